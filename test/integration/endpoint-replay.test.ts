/**
 * An endpoint's events and its replay (issue 40 item 1), on both engines, through the real app:
 * - the `endpoint_id` filter of GET /v1/events and of the console's events list, export, dead
 *   letters count and bulk redelivery: only the events of the watches on that endpoint; another
 *   account's endpoint, another environment's and a malformed id give nothing;
 * - POST /v1/endpoints/{id}/replay (and the console's): the failed (DEAD) deliveries of the
 *   endpoint's events since a time are queued again, nothing else; the same request twice
 *   replays once (even after the replayed deliveries failed again); bounded at 10,000 per call
 *   with `next_since` to continue; audited once; 404 across accounts and environments; 403 for a
 *   read-only key; the SPEC's error body for a bad `since`.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import {
  type ApiHarness,
  apiHarness,
  type Caller,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

/** `count` distinct valid TRON addresses (41-hex). */
function addresses(count: number): string[] {
  const salt = randomBytes(2).toString('hex');
  return Array.from(
    { length: count },
    (_, i) => `41${salt}${i.toString(16).padStart(6, '0')}${'ab'.repeat(15)}`,
  );
}

interface Page {
  data: Array<{ event_id: string; watch_id: string; delivery: { status: string } }>;
}

describe.each(dbEngines)('endpoint events and replay on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** An endpoint with `n` watches on it, for `c`. */
  async function endpointWith(hh: ApiHarness, c: Caller, n: number, label: string) {
    const created = await hh.app.inject({
      method: 'POST',
      url: '/v1/endpoints',
      headers: c.headers,
      payload: { url: `https://hooks.example.com/${label}?token=abc`, label },
    });
    expect(created.statusCode, created.body).toBe(201);
    const ep = json<{ id: string }>(created);
    const batch = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches/batch',
      headers: c.headers,
      payload: {
        items: addresses(n).map((address) => ({
          address,
          asset_filter: 'USDT',
          endpoint_id: ep.id,
        })),
      },
    });
    const watchIds = json<{ results: Array<{ watch: { id: string } }> }>(batch).results.map(
      (x) => x.watch.id,
    );
    expect(watchIds).toHaveLength(n);
    return { id: ep.id, watchIds };
  }

  /**
   * One event per watch with one notification each, as the ingester writes them, `status` its
   * state (DEAD: as the worker leaves it after the sixth failure). Returns the event ids.
   */
  async function eventsFor(
    hh: ApiHarness,
    watchIds: string[],
    tag: string,
    status: 'PENDING' | 'DEAD' | 'DELIVERED',
    /** How long before now they were created (a PostgreSQL interval). */
    ago = '0 seconds',
  ): Promise<string[]> {
    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                           event_index, block_number, block_timestamp, from_address, to_address,
                           amount_raw, contract, created_at)
       SELECT 'evt_' || $1 || '_' || w.id, w.account_id, w.id, w.network, 'incoming', 'USDT',
              md5($1 || w.id) || md5(w.id || $1), 0, 79072107, '2026-01-08T13:36:51Z',
              'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              clock_timestamp() - $3::text::interval
                + row_number() OVER (ORDER BY w.id) * interval '1 microsecond'
         FROM watches w WHERE w.id = ANY($2::text[])`,
      [tag, watchIds, ago],
    );
    await hh.db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at, network)
       SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', $2,
              CASE WHEN $2 = 'DEAD' THEN 6 WHEN $2 = 'DELIVERED' THEN 1 ELSE 0 END,
              created_at, created_at, network
         FROM events WHERE id LIKE 'evt_' || $1 || '\\_%'`,
      [tag, status],
    );
    return watchIds.map((w) => `evt_${tag}_${w}`);
  }

  /** A console owner (signed up in the console) and a full live API key of that account. */
  async function consoleOwner(hh: ApiHarness): Promise<{ br: Browser; c: Caller }> {
    const br = new Browser(hh.app);
    const res = await br.signUp(`owner-${randomBytes(3).toString('hex')}@example.com`);
    expect(res.statusCode).toBe(201);
    const accountId = json<{ account: { id: string } }>(res).account.id;
    await hh.db.query(`UPDATE accounts SET plan = 'pro' WHERE id = $1`, [accountId]);
    const k = await createApiKey(hh.db, accountId);
    return {
      br,
      c: { accountId, keyId: k.id, key: k.key, headers: { authorization: `Bearer ${k.key}` } },
    };
  }

  it('filters events, the export and the dead letters by endpoint, and nothing crosses accounts or environments', async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const hh = h;
    const { br, c } = await consoleOwner(hh);
    const a = await endpointWith(hh, c, 2, 'a');
    const b = await endpointWith(hh, c, 1, 'b');
    const own = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: {
        address: addresses(1)[0],
        asset_filter: 'USDT',
        webhook_url: 'https://hooks.example.com/own',
      },
    });
    expect(own.statusCode).toBe(201);
    const ownId = json<{ id: string }>(own).id;
    const aEvents = await eventsFor(hh, a.watchIds, 'a', 'DEAD');
    const bEvents = await eventsFor(hh, b.watchIds, 'b', 'DEAD');
    await eventsFor(hh, [ownId], 'o', 'DEAD');

    const list = async (caller: Caller, query: string) => {
      const res = await hh.app.inject({
        method: 'GET',
        url: `/v1/events?${query}`,
        headers: caller.headers,
      });
      expect(res.statusCode, res.body).toBe(200);
      return json<Page>(res)
        .data.map((e) => e.event_id)
        .sort();
    };
    expect(await list(c, `endpoint_id=${a.id}`)).toEqual([...aEvents].sort());
    expect(await list(c, `endpoint_id=${b.id}&limit=10`)).toEqual(bEvents);
    expect(await list(c, `endpoint_id=${a.id}&watch_id=${a.watchIds[0]}`)).toEqual([aEvents[0]]);
    expect(await list(c, 'endpoint_id=ep_nope')).toEqual([]);
    expect(await list(c, 'endpoint_id=wh_notanendpoint')).toEqual([]);
    // Another account naming this account's endpoint: nothing.
    const other = await hh.caller({ plan: 'pro' });
    expect(await list(other, `endpoint_id=${a.id}`)).toEqual([]);
    // The same account's test key (the other environment): nothing.
    const t = await createApiKey(hh.db, c.accountId, { network: 'nile' });
    expect(
      await list({ ...c, headers: { authorization: `Bearer ${t.key}` } }, `endpoint_id=${a.id}`),
    ).toEqual([]);

    // The console: the list, the dead letters count, the export, the bulk redelivery.
    const page = await br.get(`/console/api/events?endpoint_id=${a.id}&status=DEAD`);
    expect(page.statusCode, page.body).toBe(200);
    expect(
      json<Page>(page)
        .data.map((e) => e.event_id)
        .sort(),
    ).toEqual([...aEvents].sort());
    expect(json<Page>(await br.get('/console/api/events?endpoint_id=bad')).data).toEqual([]);
    const count = await br.get(`/console/api/redeliver/count?endpoint_id=${b.id}`);
    expect(json(count)).toMatchObject({ count: 1 });
    const csv = await br.get(`/console/api/events/export?format=csv&endpoint_id=${a.id}`);
    expect(csv.statusCode).toBe(200);
    expect(csv.body.trim().split('\n')).toHaveLength(1 + aEvents.length);
    const redone = await br.post('/console/api/redeliver', { endpoint_id: b.id });
    expect(json(redone)).toEqual({ redelivered: 1 });
    const { rows: audit } = await hh.db.query<{ target_id: string; detail: unknown }>(
      `SELECT target_id, detail FROM audit_log WHERE action = 'event.bulk_redelivered'`,
    );
    expect(audit).toEqual([
      { target_id: b.id, detail: expect.objectContaining({ endpoint_id: b.id, redelivered: 1 }) },
    ]);
    // Only b's dead letter went again: a's and the own watch's are still DEAD.
    expect(await list(c, `endpoint_id=${b.id}`)).toEqual(bEvents);
    const states = json<Page>(
      await hh.app.inject({ method: 'GET', url: '/v1/events', headers: c.headers }),
    ).data.map((e) => [e.event_id, e.delivery.status]);
    expect(states.filter(([, s]) => s === 'PENDING').map(([id]) => id)).toEqual(bEvents);
  }, 180_000);

  interface Replay {
    id: string;
    endpoint_id: string;
    since: string;
    replayed: number;
    next_since: string | null;
    created_at: string;
    repeated: boolean;
  }

  it('replays the failed deliveries since a time once, bounded, audited, and only for its owner', async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const hh = h;
    const check = responseChecker(await openapiDocument(hh.app));
    const { br, c } = await consoleOwner(hh);
    const a = await endpointWith(hh, c, 3, 'a');
    const b = await endpointWith(hh, c, 1, 'b');
    // a: one failed delivery two days ago (before `since`), three failed since, one still being
    // delivered and one delivered; b: one failed since (another endpoint).
    const old = await eventsFor(hh, [a.watchIds[0] ?? ''], 'old', 'DEAD', '2 days');
    const failed = await eventsFor(hh, a.watchIds, 'f', 'DEAD');
    await eventsFor(hh, [a.watchIds[1] ?? ''], 'p', 'PENDING');
    await eventsFor(hh, [a.watchIds[2] ?? ''], 'd', 'DELIVERED');
    const bFailed = await eventsFor(hh, b.watchIds, 'bf', 'DEAD');
    const since = new Date(Date.now() - 3_600_000).toISOString();

    const replay = (caller: Caller, id: string, body: unknown) =>
      hh.app.inject({
        method: 'POST',
        url: `/v1/endpoints/${id}/replay`,
        headers: caller.headers,
        payload: body as Record<string, unknown>,
      });
    const pending = async (ids: string[]) =>
      (
        await hh.db.query<{ event_id: string }>(
          `SELECT event_id FROM notifications WHERE status = 'PENDING' AND event_id = ANY($1)
            ORDER BY event_id`,
          [ids],
        )
      ).rows.map((r) => r.event_id);
    const notificationsOf = async (ids: string[]) =>
      (
        await hh.db.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM notifications WHERE event_id = ANY($1)',
          [ids],
        )
      ).rows[0]?.n;

    const first = await replay(c, a.id, { since });
    expect(first.statusCode, first.body).toBe(200);
    expect(check('/v1/endpoints/{id}/replay', 'post', first)).toEqual([]);
    const r1 = json<Replay>(first);
    expect(r1).toMatchObject({
      endpoint_id: a.id,
      replayed: 3,
      next_since: null,
      repeated: false,
    });
    expect(r1.id).toMatch(/^rpl_/);
    expect(Date.parse(r1.since)).toBe(Date.parse(since));
    // Exactly a's three failed deliveries since: not the older one, not b's.
    expect(await pending(failed)).toEqual([...failed].sort());
    expect(await pending([...old, ...bFailed])).toEqual([]);
    expect(await notificationsOf(failed)).toBe(6);

    // The replayed deliveries fail again (DEAD); the same request again replays nothing: it is
    // answered with the first replay.
    await hh.db.query(
      `UPDATE notifications SET status = 'DEAD', attempts = 6
        WHERE status = 'PENDING' AND event_id = ANY($1)`,
      [failed],
    );
    const second = await replay(c, a.id, { since });
    expect(second.statusCode).toBe(200);
    expect(json<Replay>(second)).toEqual({ ...r1, repeated: true });
    expect(await notificationsOf(failed)).toBe(6);
    expect(await pending(failed)).toEqual([]);
    // The console's button is the same request: still the first replay.
    const fromConsole = await br.post(`/console/api/endpoints/${a.id}/replay`, { since });
    expect(fromConsole.statusCode, fromConsole.body).toBe(200);
    expect(json<Replay>(fromConsole)).toEqual({ ...r1, repeated: true });
    // One audit entry: the replay that ran.
    const { rows: audit } = await hh.db.query<{ target_id: string; detail: unknown }>(
      `SELECT target_id, detail FROM audit_log WHERE action = 'endpoint.replayed'`,
    );
    expect(audit).toEqual([
      {
        target_id: a.id,
        detail: { replay_id: r1.id, since: r1.since, replayed: 3, next_since: null },
      },
    ]);
    // Another `since` is another replay: it takes them again (and the old one now).
    const wider = await replay(c, a.id, {
      since: new Date(Date.now() - 3 * 86_400_000).toISOString(),
    });
    expect(json<Replay>(wider)).toMatchObject({ replayed: 4, repeated: false });

    // Nobody else's: another account, the same account's test key, a missing or malformed id.
    const other = await hh.caller({ plan: 'pro' });
    const t = await createApiKey(hh.db, c.accountId, { network: 'nile' });
    const testKey = { ...c, headers: { authorization: `Bearer ${t.key}` } };
    for (const [caller, id] of [
      [other, b.id],
      [testKey, b.id],
      [c, 'ep_0000000000000000000000000'],
      [c, 'wh_nope'],
    ] as const) {
      const res = await replay(caller, id, { since });
      expect(res.statusCode, `${id}: ${res.body}`).toBe(404);
      expect(json(res)).toMatchObject({ error: 'endpoint not found' });
    }
    // A read-only key reads, never replays.
    const ro = await createApiKey(hh.db, c.accountId, { scope: 'read' });
    const refused = await replay({ ...c, headers: { authorization: `Bearer ${ro.key}` } }, b.id, {
      since,
    });
    expect(refused.statusCode).toBe(403);
    expect(json(refused)).toMatchObject({ code: 'read_only_key' });
    expect(await pending(bFailed)).toEqual([]);

    // A bad `since`: the SPEC's error body naming the field, nothing queued.
    for (const body of [
      {},
      { since: 'yesterday' },
      { since: new Date(Date.now() + 3_600_000).toISOString() },
      { since: new Date(Date.now() - 31 * 86_400_000).toISOString() },
      { since: '0000-01-01T00:00:00Z' },
      { since, extra: 1 },
    ]) {
      const res = await replay(c, b.id, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(check('/v1/endpoints/{id}/replay', 'post', res)).toEqual([]);
      const e = json<{ error: string; details: Array<{ field: string }> }>(res);
      expect(e.error).toBe('invalid request body');
      expect(e.details.length).toBeGreaterThan(0);
    }
    expect(await pending(bFailed)).toEqual([]);
    const { rows: replays } = await hh.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM endpoint_replays',
    );
    expect(replays[0]?.n).toBe(2);
  }, 180_000);

  it('replays at most 10,000 failed deliveries per call and says where to continue', async () => {
    h = await apiHarness(engine);
    const hh = h;
    const c = await hh.caller({ plan: 'pro' });
    const ep = await endpointWith(hh, c, 1, 'big');
    const watchId = ep.watchIds[0] ?? '';
    // 10,001 failed deliveries of one watch, one microsecond apart, as the worker leaves them.
    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                           event_index, block_number, block_timestamp, from_address, to_address,
                           amount_raw, contract, created_at)
       SELECT 'evt_big_' || lpad(i::text, 6, '0'), w.account_id, w.id, w.network, 'incoming',
              'USDT', md5('big' || i) || md5(i || 'big'), 0, 79072107, '2026-01-08T13:36:51Z',
              'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              now() - interval '1 minute' + i * interval '1 microsecond'
         FROM watches w, generate_series(1, 10001) AS i WHERE w.id = $1`,
      [watchId],
    );
    await hh.db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at, network)
       SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', 'DEAD', 6,
              created_at, created_at, network
         FROM events WHERE watch_id = $1`,
      [watchId],
    );
    const since = new Date(Date.now() - 3_600_000).toISOString();
    const first = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/replay`,
      headers: c.headers,
      payload: { since },
    });
    const r1 = json<Replay>(first);
    expect(r1.replayed).toBe(10_000);
    // The 10,000th oldest: the last one taken.
    const { rows } = await hh.db.query<{ at: string }>(
      `SELECT to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS at
         FROM events WHERE id = 'evt_big_010000'`,
    );
    expect(r1.next_since).toBe(rows[0]?.at);
    const rest = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/replay`,
      headers: c.headers,
      payload: { since: r1.next_since },
    });
    expect(json<Replay>(rest)).toMatchObject({ replayed: 1, next_since: null, repeated: false });
    const { rows: left } = await hh.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM events e WHERE e.watch_id = $1
          AND (SELECT n.status FROM notifications n WHERE n.event_id = e.id
                ORDER BY n.created_at DESC LIMIT 1) = 'DEAD'`,
      [watchId],
    );
    expect(left[0]?.n).toBe(0);
  }, 120_000);
});
