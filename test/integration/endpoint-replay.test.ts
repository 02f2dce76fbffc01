/**
 * An endpoint's events and its replay (issue 40 item 1), on both engines, through the real app:
 * - the `endpoint_id` filter of GET /v1/events and of the console's events list, export, dead
 *   letters count and bulk redelivery: only the events of the watches on that endpoint; another
 *   account's endpoint, another environment's and a malformed id give nothing;
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { type ApiHarness, apiHarness, type Caller, json } from '../helpers/api.js';
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
    createdAt = 'now',
  ): Promise<string[]> {
    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                           event_index, block_number, block_timestamp, from_address, to_address,
                           amount_raw, contract, created_at)
       SELECT 'evt_' || $1 || '_' || w.id, w.account_id, w.id, w.network, 'incoming', 'USDT',
              md5($1 || w.id) || md5(w.id || $1), 0, 79072107, '2026-01-08T13:36:51Z',
              'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              (CASE WHEN $3 = 'now' THEN clock_timestamp() ELSE $3::timestamptz END)
                + row_number() OVER (ORDER BY w.id) * interval '1 microsecond'
         FROM watches w WHERE w.id = ANY($2::text[])`,
      [tag, watchIds, createdAt],
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
  });
});
