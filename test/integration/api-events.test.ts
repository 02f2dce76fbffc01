/**
 * SPEC §GET /v1/events and DESIGN invariant 8 (paging never skips or repeats, even inside one
 * block's commit where hundreds of events fall within one millisecond).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { listEvents, pageQuery } from '../../src/events/list.js';
import { saveProviderStates } from '../../src/ingest/providers.js';
import { recordStall } from '../../src/ingest/stall.js';
import {
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  type Caller,
  insertEvents,
  json,
  openapiDocument,
  responseChecker,
  webhookWatch,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

interface Page {
  data: Array<Record<string, unknown> & { event_id: string; delivery: Record<string, unknown> }>;
  next_before: string | null;
}

const US_ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/;

describe.each(dbEngines)('GET /v1/events on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  async function watch(c: Caller, overrides: Record<string, unknown> = {}): Promise<string> {
    if (!h) throw new Error('no harness');
    const res = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(overrides),
    });
    expect(res.statusCode).toBe(201);
    return String(json(res).id);
  }

  async function page(c: Caller, query: string) {
    if (!h) throw new Error('no harness');
    return h.app.inject({ url: `/v1/events${query}`, headers: c.headers });
  }

  it('pages 500 events of one millisecond with limit 7: every event exactly once, newest first', async () => {
    h = await apiHarness(engine);
    // 72 pages: Pro's 300 requests per minute leave room.
    const c = await h.caller({ plan: 'pro' });
    const w = await watch(c);
    const ids = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'blk',
      count: 500,
      start: '2026-01-08T13:36:54.123000Z',
    });
    const seen: string[] = [];
    let before: string | null = null;
    let pages = 0;
    do {
      const q: string =
        before === null ? '?limit=7' : `?limit=7&before=${encodeURIComponent(before)}`;
      const res = await page(c, q);
      expect(res.statusCode).toBe(200);
      const body = json<Page>(res);
      pages++;
      expect(body.data.length).toBe(pages <= 71 ? 7 : 3);
      for (const e of body.data) seen.push(e.event_id);
      before = body.next_before;
      if (before !== null) {
        expect(before).toMatch(US_ISO);
        expect(before).toBe(body.data[body.data.length - 1]?.delivery.created_at);
      }
    } while (before !== null && pages < 100);
    expect(pages).toBe(72);
    expect(seen).toHaveLength(500);
    expect(new Set(seen).size).toBe(500);
    expect(seen).toEqual([...ids].reverse());
  });

  it('returns next_before null when the last page is exactly full', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'x',
      count: 14,
      start: '2026-01-08T00:00:00Z',
    });
    const first = json<Page>(await page(c, '?limit=7'));
    expect(first.data).toHaveLength(7);
    expect(first.next_before).toBe('2026-01-08T00:00:00.000007Z');
    const second = json<Page>(await page(c, `?limit=7&before=${first.next_before}`));
    expect(second.data).toHaveLength(7);
    expect(second.next_before).toBeNull();
  });

  it('shapes each item as Event plus delivery, with microsecond delivery.created_at', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'one',
      count: 1,
      start: '2026-01-08T13:36:54.123456Z',
    });
    const body = json<Page>(await page(c, ''));
    expect(body).toEqual({
      data: [
        {
          api_version: '2026-08',
          event_id: 'evt_one_000000',
          type: 'transfer.confirmed',
          direction: 'incoming',
          network: 'mainnet',
          livemode: true,
          asset: 'USDT',
          tx_id: expect.stringMatching(/^[0-9a-f]{64}$/),
          event_index: 0,
          block_number: 79072107,
          block_timestamp: '2026-01-08T13:36:51.000Z',
          from: 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
          to: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
          amount_raw: '1500000',
          amount: '1.5',
          watch_id: w,
          contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
          // A row written by hand claims nothing (migration 048's default).
          proof: 'provider',
          delivery: {
            notification_id: 'ntf_one_000000',
            status: 'PENDING',
            attempts: 0,
            created_at: '2026-01-08T13:36:54.123456Z',
            // Additive (issue 36): a notification written by hand is not held.
            held: null,
          },
        },
      ],
      next_before: null,
      scanned_through: null,
    });
    // proof filters the list (issue 26); an unknown level is a 400 naming the field.
    await h.db.query("UPDATE events SET proof = 'signed' WHERE id = 'evt_one_000000'");
    expect(json<Page>(await page(c, '?proof=signed')).data.map((e) => e.proof)).toEqual(['signed']);
    expect(json<Page>(await page(c, '?proof=provider')).data).toEqual([]);
    const bad = await page(c, '?proof=maybe');
    expect(bad.statusCode).toBe(400);
    expect(JSON.stringify(json(bad))).toMatch(/proof/);
  });

  it('answers a page holding an event without its notification: that item has delivery null, the rest intact', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    const ids = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'orphan',
      count: 3,
      start: '2026-01-08T13:36:54.000001Z',
    });
    // The middle event loses its notification (a partial restore, a hand edit): once a 500 for
    // the whole page, because the row text had 14 fields instead of 18.
    await h.db.query('DELETE FROM notifications WHERE event_id = $1', [ids[1]]);
    const res = await page(c, '');
    expect(res.statusCode).toBe(200);
    const body = json<{ data: Array<{ event_id: string; delivery: unknown; amount: string }> }>(
      res,
    );
    expect(body.data.map((e) => e.event_id)).toEqual([...ids].reverse());
    expect(body.data[1]?.delivery).toBeNull();
    expect(body.data[1]?.amount).toBe('1.500001');
    expect(body.data[0]?.delivery).toMatchObject({ status: 'PENDING', attempts: 0 });
    expect(body.data[2]?.delivery).toMatchObject({ notification_id: 'ntf_orphan_000000' });
  });

  it('carries the scanned-through watermark of its own snapshot, as GET /v1/status does', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    // Before the first committed block: null in both.
    expect(json(await page(c, '')).scanned_through).toBeNull();
    const before = json(await h.app.inject({ url: '/v1/status', headers: c.headers }));
    expect(before).toEqual({
      network: 'mainnet',
      solidified_head: 1000,
      scanned_through: null,
      lag_blocks: null,
      lag_seconds: null,
      ingest_stall: null,
      light_client: null,
      // Additive (issue 36): the harness's config has the one default provider.
      provider_proof: {
        providers: 1,
        needed: 2,
        deliver_unconfirmed: false,
        held_events: 0,
        warning: expect.stringMatching(/^one node provider is configured: /),
      },
      node_providers: [],
    });
    await h.db.query(
      `INSERT INTO chain_cursor (network, block_number, block_id, block_timestamp)
       VALUES ('mainnet', 990, 'b990', '2026-01-08T13:36:51.000Z')`,
    );
    await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'wm',
      count: 2,
      start: '2026-01-08T13:36:54Z',
    });
    const mark = { block_number: 990, block_timestamp: '2026-01-08T13:36:51.000Z' };
    expect(json(await page(c, '')).scanned_through).toEqual(mark);
    // An empty page (a filter that matches nothing) carries it too.
    const empty = json(await page(c, '?since=2030-01-01T00:00:00Z'));
    expect(empty).toEqual({ data: [], next_before: null, scanned_through: mark });
    const status = json(await h.app.inject({ url: '/v1/status', headers: c.headers }));
    expect(status).toMatchObject({ scanned_through: mark, solidified_head: 1000, lag_blocks: 10 });
    expect(status.lag_seconds).toBeGreaterThan(0);
    // The ingest stall and the providers, as the ingester stored them (no URL is shown).
    await saveProviderStates(h.db, 'mainnet', [
      { index: 0, name: 'http://10.0.0.5:8090', state: 'ok', solidified: 1000, head: 1018 },
      {
        index: 1,
        name: 'https://api.trongrid.io',
        state: 'unhealthy',
        reason: 'forbidden',
        since: Date.parse('2026-01-08T13:40:00Z'),
        solidified: 990,
        head: 1008,
      },
    ]);
    await recordStall(h.db, 'mainnet', 991, 'block 991 failed verification (tx_id): …');
    const stalled = json(await h.app.inject({ url: '/v1/status', headers: c.headers }));
    expect(stalled).toMatchObject({
      ingest_stall: {
        block_number: 991,
        reason: 'block 991 failed verification (tx_id): …',
        since: expect.any(String),
      },
      node_providers: [
        { index: 0, state: 'ok', solidified_head: 1000 },
        {
          index: 1,
          state: 'unhealthy',
          reason: 'forbidden',
          since: '2026-01-08T13:40:00.000Z',
          solidified_head: 990,
        },
      ],
    });
    expect(JSON.stringify(stalled)).not.toMatch(/10\.0\.0\.5|trongrid/);
    const check = responseChecker(await openapiDocument(h.app));
    expect(
      check('/v1/status', 'get', await h.app.inject({ url: '/v1/status', headers: c.headers })),
    ).toEqual([]);
    // Rate-limited and authenticated like every /v1 route.
    const anon = await h.app.inject({ url: '/v1/status' });
    expect(anon.statusCode).toBe(401);
    expect(anon.headers['x-ratelimit-limit']).toBe('60');
  });

  it('filters by since (inclusive), before (exclusive), watch_id; defaults to 50', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w1 = await watch(c);
    const w2 = await watch(c, { address: ADDR2_B58 });
    const a = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w1,
      tag: 'a',
      count: 60,
      start: '2026-01-08T10:00:00Z',
    });
    const b = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w2,
      tag: 'b',
      count: 5,
      start: '2026-01-08T11:00:00Z',
    });

    const all = json<Page>(await page(c, ''));
    expect(all.data).toHaveLength(50);
    expect(all.data[0]?.event_id).toBe(b[4]);
    expect(all.next_before).not.toBeNull();

    // since is inclusive: the event created exactly then is included.
    const since = json<Page>(await page(c, '?since=2026-01-08T10:00:00.000055Z&limit=200'));
    expect(since.data.map((e) => e.event_id)).toEqual([
      ...b.reverse(),
      a[59],
      a[58],
      a[57],
      a[56],
      a[55],
    ]);
    // before is exclusive.
    const before = json<Page>(await page(c, '?before=2026-01-08T10:00:00.000002Z'));
    expect(before.data.map((e) => e.event_id)).toEqual([a[1], a[0]]);
    expect(before.next_before).toBeNull();
    // Both, with a time-zone offset.
    const both = json<Page>(
      await page(
        c,
        `?since=${encodeURIComponent('2026-01-08T11:00:00.000001+01:00')}&before=2026-01-08T10:00:00.000004Z`,
      ),
    );
    expect(both.data.map((e) => e.event_id)).toEqual([a[3], a[2], a[1]]);

    const onlyW2 = json<Page>(await page(c, `?watch_id=${w2}`));
    expect(onlyW2.data.map((e) => e.watch_id)).toEqual([w2, w2, w2, w2, w2]);
    expect(onlyW2.next_before).toBeNull();

    const unknown = json<Page>(await page(c, '?watch_id=wh_00000000000000000000000000'));
    expect(unknown).toEqual({ data: [], next_before: null, scanned_through: null });
  });

  it('never shows another account’s events, even for its watch_id; deleted watches keep theirs', async () => {
    h = await apiHarness(engine);
    const alice = await h.caller();
    const bob = await h.caller();
    const wa = await watch(alice);
    const wb = await watch(bob);
    await insertEvents(h.db, {
      accountId: alice.accountId,
      watchId: wa,
      tag: 'al',
      count: 3,
      start: '2026-01-08T12:00:00Z',
    });
    await insertEvents(h.db, {
      accountId: bob.accountId,
      watchId: wb,
      tag: 'bo',
      count: 4,
      start: '2026-01-08T12:00:00.5Z',
    });

    const mine = json<Page>(await page(alice, '?limit=200'));
    expect(mine.data.map((e) => e.event_id)).toEqual([
      'evt_al_000002',
      'evt_al_000001',
      'evt_al_000000',
    ]);
    expect(json<Page>(await page(alice, `?watch_id=${wb}`))).toEqual({
      data: [],
      next_before: null,
      scanned_through: null,
    });

    const del = await h.app.inject({
      method: 'DELETE',
      url: `/v1/watches/${wb}`,
      headers: bob.headers,
    });
    expect(del.statusCode).toBe(204);
    expect(json<Page>(await page(bob, '')).data).toHaveLength(4);
  });

  it('writes a TRX event with contract null, as application/json', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    const [id] = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'trx',
      count: 1,
      start: '2026-01-08T13:36:54Z',
    });
    await h.db.query(
      "UPDATE events SET asset = 'TRX', contract = NULL, amount_raw = 5000000 WHERE id = $1",
      [id],
    );
    const res = await page(c, '');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8');
    const [item] = json<Page>(res).data;
    expect(item).toMatchObject({ event_id: id, asset: 'TRX', amount: '5', contract: null });
    expect(item?.delivery.created_at).toBe('2026-01-08T13:36:54.000000Z');
  });

  it('pages every event exactly once at page sizes in and between the LIMIT buckets', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const w = await watch(c);
    const ids = await insertEvents(h.db, {
      accountId: c.accountId,
      watchId: w,
      tag: 'lim',
      count: 230,
      start: '2026-01-08T13:36:54.5Z',
    });
    for (const limit of [1, 9, 10, 37, 50, 51, 150, 200]) {
      const seen: string[] = [];
      let before: string | undefined;
      for (let pages = 0; pages < 300; pages++) {
        const p = await listEvents(h.db, {
          accountId: c.accountId,
          network: 'mainnet',
          limit,
          before,
        });
        expect(p.data.length).toBeLessThanOrEqual(limit);
        seen.push(...p.data.map((e) => e.event_id));
        if (p.next_before === null) break;
        expect(p.data).toHaveLength(limit);
        before = p.next_before;
      }
      expect(seen, `limit ${limit}`).toEqual([...ids].reverse());
    }
  });

  it('plans the page on the account index, also as a generic plan (migration 004)', async () => {
    h = await apiHarness(engine);
    const big = await h.caller();
    const small = await h.caller();
    const wb = await watch(big);
    const ws = await watch(small);
    await insertEvents(h.db, {
      accountId: big.accountId,
      watchId: wb,
      tag: 'big',
      count: 3000,
      start: '2026-01-08T10:00:00Z',
    });
    await insertEvents(h.db, {
      accountId: small.accountId,
      watchId: ws,
      tag: 'sml',
      count: 3,
      start: '2026-01-08T09:00:00Z',
    });
    await h.db.query('ANALYZE events');
    // PostgreSQL stops planning a named statement once its generic plan costs what the custom
    // plans did; the generic plan must then read the small account's own index range, not walk
    // the big account's events newest first.
    const shapes = [
      { before: undefined, since: undefined },
      { before: '2026-01-08T11:00:00Z', since: '2026-01-01T00:00:00Z' },
    ];
    for (const shape of shapes) {
      const q = pageQuery({ accountId: small.accountId, network: 'mainnet', limit: 50, ...shape });
      const plan = await h.db.transaction(async (tx) => {
        await tx.query('SET LOCAL plan_cache_mode = force_generic_plan');
        await tx.query(`PREPARE plan_test AS ${q.text}`);
        const literals = q.values.map((v) => `'${String(v).replace(/'/g, "''")}'`).join(', ');
        const r = await tx.query<{ 'QUERY PLAN': unknown }>(
          `EXPLAIN (FORMAT JSON) EXECUTE plan_test(${literals})`,
        );
        await tx.query('DEALLOCATE plan_test');
        return JSON.stringify(r.rows[0]?.['QUERY PLAN']);
      });
      expect(plan).toContain('"Index Name":"events_account_created"');
      expect(plan).toMatch(/"Index Cond":"\(\(?account_id = \$1\)/);
      expect(plan).not.toContain('"Node Type":"Sort"');
    }
  });

  it('answers 400 with field details to an invalid query', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const cases: Array<[string, string]> = [
      ['?limit=0', 'limit'],
      ['?limit=201', 'limit'],
      ['?limit=abc', 'limit'],
      ['?limit=1.5', 'limit'],
      ['?limit=', 'limit'],
      ['?before=yesterday', 'before'],
      ['?before=2026-01-08', 'before'],
      ['?before=2026-01-08T10:00:00', 'before'],
      ['?since=2026-13-01T00:00:00Z', 'since'],
      ['?since=2026-02-30T00:00:00Z', 'since'],
      ['?before=2026-01-08T10:00:00.1234567Z', 'before'],
      ['?since=0000-01-01T00:00:00Z', 'since'],
      [`?watch_id=${'w'.repeat(65)}`, 'watch_id'],
    ];
    for (const [q, field] of cases) {
      const res = await page(c, q);
      expect(res.statusCode, q).toBe(400);
      const body = json(res);
      expect(body.code).toBeUndefined();
      expect(
        (body.details as Array<{ field: string }>).map((d) => d.field),
        q,
      ).toContain(field);
      expect(res.headers['x-ratelimit-limit']).toBe('60');
    }
    const both = json(await page(c, '?limit=0&since=nope'));
    expect((both.details as Array<{ field: string }>).map((d) => d.field).sort()).toEqual([
      'limit',
      'since',
    ]);
    // Bounds are accepted.
    for (const q of ['?limit=1', '?limit=200']) expect((await page(c, q)).statusCode).toBe(200);
  });
});
