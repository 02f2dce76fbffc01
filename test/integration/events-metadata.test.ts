/**
 * Events found by their metadata and by their endpoint (issue 40 items 5 and 1), on both engines,
 * through the real app:
 * - GET /v1/events?metadata[key]=value: exact pairs (all of them, case-sensitive, the key beside
 *   its value), never another account's events; bad filters are 400s naming the parameter; the
 *   OpenAPI document calls the parameter a deepObject;
 * - the console's search box takes a metadata value (an invoice number) under any key;
 * - the console's list, count and bulk redelivery take an endpoint filter;
 * - the console's event page names the endpoint whose secret signs it, and a 404 for the account's
 *   event of the other environment says which environment holds it (issue 40 items 2 and 11);
 * - the CSV export carries a `metadata` column (the JSON export the event's own member).
 * An event's metadata is its watch's, copied at the match (migration 085): the rows below are the
 * watch's metadata written onto its events as the ingester writes it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import {
  type ApiHarness,
  apiHarness,
  insertEvents,
  json,
  openapiDocument,
} from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

const OPEN = { CONSOLE_SIGNUP: 'open' };
const INVOICE = 'INV-2026-0091';

interface Page {
  data: Array<{ event_id: string; watch_id: string; metadata?: Record<string, string> }>;
  next_before: string | null;
}

describe.each(dbEngines)('events by metadata and endpoint on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /**
   * A signed-in account with a live key and three watches: A (metadata invoice INV-2026-0091,
   * customer c_1842), B (invoice inv-2026-0091: another case; customer INV-2026-0091 under another
   * key) and C on an endpoint without metadata; 3 events each. A second account's watch carries
   * A's metadata exactly.
   */
  async function setUp() {
    h = await apiHarness(engine, { env: OPEN });
    const hh = h;
    const b = new Browser(hh.app);
    expect((await b.signUp(`meta-${engine}@example.com`)).statusCode).toBe(201);
    const { rows } = await hh.db.query<{ id: string }>('SELECT id FROM accounts');
    const accountId = rows[0]?.id as string;
    const key = await createApiKey(hh.db, accountId);
    const headers: Record<string, string> = { authorization: `Bearer ${key.key}` };
    const post = async (url: string, payload: Record<string, unknown>, hd = headers) => {
      const res = await hh.app.inject({ method: 'POST', url, headers: hd, payload });
      expect(res.statusCode, res.body).toBe(201);
      return json<{ id: string }>(res).id;
    };
    const watchA = await post('/v1/watches', {
      address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      asset_filter: 'USDT',
      webhook_url: 'https://hooks.example.com/a',
      metadata: { invoice: INVOICE, customer: 'c_1842' },
    });
    const watchB = await post('/v1/watches', {
      address: 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
      asset_filter: 'USDT',
      webhook_url: 'https://hooks.example.com/b',
      metadata: { invoice: 'inv-2026-0091', customer: INVOICE },
    });
    const endpointId = await post('/v1/endpoints', {
      url: 'https://hooks.example.com/shared',
      label: 'deposits',
    });
    const watchC = await post('/v1/watches', {
      address: 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL',
      asset_filter: 'USDT',
      endpoint_id: endpointId,
    });
    const other = await hh.caller({ plan: 'pro' });
    const otherWatch = await post(
      '/v1/watches',
      {
        address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        asset_filter: 'USDT',
        webhook_url: 'https://hooks.example.com/other',
        metadata: { invoice: INVOICE, customer: 'c_1842' },
      },
      other.headers,
    );
    const ids = {
      a: await insertEvents(hh.db, {
        accountId,
        watchId: watchA,
        tag: 'ma',
        count: 3,
        start: '2026-01-08T13:36:54Z',
      }),
      b: await insertEvents(hh.db, {
        accountId,
        watchId: watchB,
        tag: 'mb',
        count: 3,
        start: '2026-01-08T13:37:54Z',
      }),
      c: await insertEvents(hh.db, {
        accountId,
        watchId: watchC,
        tag: 'mc',
        count: 3,
        start: '2026-01-08T13:38:54Z',
      }),
      other: await insertEvents(hh.db, {
        accountId: other.accountId,
        watchId: otherWatch,
        tag: 'mo',
        count: 2,
        start: '2026-01-08T13:39:54Z',
      }),
    };
    // The watch's metadata on its events, as the ingester copies it (src/ingest/commit.ts).
    await hh.db.query(
      'UPDATE events e SET metadata = w.metadata FROM watches w WHERE w.id = e.watch_id',
    );
    await hh.db.query('ANALYZE events');
    return { b, headers, ids, endpointId, watchA, watchC };
  }

  const v1 = async (headers: Record<string, string>, qs: string) => {
    const res = await (h as ApiHarness).app.inject({ url: `/v1/events?${qs}`, headers });
    return res;
  };
  const v1Ids = async (headers: Record<string, string>, qs: string) => {
    const res = await v1(headers, qs);
    expect(res.statusCode, res.body).toBe(200);
    return json<Page>(res).data.map((e) => e.event_id);
  };
  const newestFirst = (...lists: string[][]) => lists.flat().reverse();

  it('GET /v1/events filters by exact metadata pairs, within the caller’s account', async () => {
    const { headers, ids } = await setUp();
    const q = (o: Record<string, string>) =>
      Object.entries(o)
        .map(([k, v]) => `${encodeURIComponent(`metadata[${k}]`)}=${encodeURIComponent(v)}`)
        .join('&');
    // A's invoice: A's events only (not B's, whose invoice differs in case and whose customer
    // holds the same value under another key; not the other account's).
    expect(await v1Ids(headers, q({ invoice: INVOICE }))).toEqual(newestFirst(ids.a));
    const page = json<Page>(await v1(headers, q({ invoice: INVOICE })));
    expect(page.data[0]?.metadata).toEqual({ invoice: INVOICE, customer: 'c_1842' });
    expect(await v1Ids(headers, q({ customer: INVOICE }))).toEqual(newestFirst(ids.b));
    expect(await v1Ids(headers, q({ invoice: 'inv-2026-0091' }))).toEqual(newestFirst(ids.b));
    // Every pair must hold.
    expect(await v1Ids(headers, q({ invoice: INVOICE, customer: 'c_1842' }))).toEqual(
      newestFirst(ids.a),
    );
    expect(await v1Ids(headers, q({ invoice: INVOICE, customer: 'c_9999' }))).toEqual([]);
    expect(await v1Ids(headers, q({ order: INVOICE }))).toEqual([]);
    // Brackets written unescaped, as openapi-fetch and curl -g send them; with paging.
    const first = json<Page>(await v1(headers, `metadata[invoice]=${INVOICE}&limit=2`));
    expect(first.data.map((e) => e.event_id)).toEqual(newestFirst(ids.a).slice(0, 2));
    expect(
      await v1Ids(
        headers,
        `metadata[invoice]=${INVOICE}&before=${encodeURIComponent(first.next_before as string)}`,
      ),
    ).toEqual([ids.a[0]]);
    // A key named like an object's prototype is a key like any other: it matches nothing here.
    expect(await v1Ids(headers, `metadata[__proto__]=${INVOICE}`)).toEqual([]);
  });

  it('GET /v1/events refuses a malformed metadata filter with the error body', async () => {
    const { headers } = await setUp();
    const bad = async (qs: string, field: string) => {
      const res = await v1(headers, qs);
      expect(res.statusCode, `${qs}: ${res.body}`).toBe(400);
      const body = json<{ error: string; details: Array<{ field: string; message: string }> }>(res);
      expect(body.error).toBe('invalid query parameters');
      expect(body.details.map((d) => d.field)).toContain(field);
    };
    await bad(`metadata[${'k'.repeat(41)}]=x`, `metadata[${'k'.repeat(41)}]`);
    await bad('metadata[]=x', 'metadata[]');
    await bad(`metadata[invoice]=${'x'.repeat(501)}`, 'metadata[invoice]');
    await bad('metadata[invoice]=a&metadata[invoice]=b', 'metadata[invoice]');
    await bad(Array.from({ length: 21 }, (_, i) => `metadata[k${i}]=v`).join('&'), 'metadata');
    // A bare `metadata=…` is not an object.
    const bare = await v1(headers, 'metadata=INV-2026-0091');
    expect(bare.statusCode).toBe(400);
    expect(json(bare).error).toBeTypeOf('string');
  });

  it('the OpenAPI document calls the filter a deepObject query parameter', async () => {
    await setUp();
    const doc = await openapiDocument((h as ApiHarness).app);
    const op = (doc.paths as Record<string, Record<string, { parameters: unknown[] }>>)[
      '/v1/events'
    ]?.get;
    const p = op?.parameters.find((x) => (x as { name: string }).name === 'metadata');
    expect(p).toMatchObject({
      in: 'query',
      style: 'deepObject',
      explode: true,
      schema: { type: 'object', additionalProperties: { type: 'string' } },
    });
  });

  it('the console finds events by a metadata value under any key, and by endpoint', async () => {
    const { b, ids, endpointId, watchA } = await setUp();
    const page = async (qs: string) => {
      const res = await b.get(`/console/api/events?${qs}`);
      expect(res.statusCode, res.body).toBe(200);
      return json<Page>(res).data.map((e) => e.event_id);
    };
    // The invoice number typed in the search box (spaces around it trimmed): A's invoice and B's
    // customer, exactly that case; never the other account's.
    expect(await page(`q=${encodeURIComponent(`  ${INVOICE} `)}`)).toEqual(
      newestFirst(ids.a, ids.b),
    );
    expect(await page('q=inv-2026-0091')).toEqual(newestFirst(ids.b));
    expect(await page('q=c_1842')).toEqual(newestFirst(ids.a));
    expect(await page('q=INV-2026')).toEqual([]);
    // With the other filters.
    expect(await page(`q=${INVOICE}&watch_id=${watchA}`)).toEqual(newestFirst(ids.a));
    // Longer than any metadata value: refused, saying what the box takes.
    const long = await b.get(`/console/api/events?q=${'x'.repeat(501)}`);
    expect(long.statusCode).toBe(400);
    expect(json(long).details).toEqual([
      { field: 'q', message: expect.stringContaining('a metadata value') },
    ]);

    // The endpoint filter: the events of the watches delivering to it; a malformed id none.
    expect(await page(`endpoint_id=${endpointId}`)).toEqual(newestFirst(ids.c));
    expect(await page('endpoint_id=ep_nothing')).toEqual([]);
    expect(await page('endpoint_id=not-an-id')).toEqual([]);
    // Dead letters of the endpoint: counted and redelivered by the same filter.
    await (h as ApiHarness).db.query(
      `UPDATE notifications SET status = 'DEAD', attempts = 6 WHERE event_id = ANY($1)`,
      [[ids.c[0], ids.a[0]]],
    );
    expect(await page(`endpoint_id=${endpointId}&status=DEAD`)).toEqual([ids.c[0]]);
    const count = await b.get(`/console/api/redeliver/count?endpoint_id=${endpointId}`);
    expect(json(count)).toMatchObject({ count: 1 });
    const redelivered = await b.post('/console/api/redeliver', { endpoint_id: endpointId });
    expect(json(redelivered)).toEqual({ redelivered: 1 });
    expect(await page('status=DEAD')).toEqual([ids.a[0]]);
  });

  it('the console’s event page names the endpoint, and a 404 names the other environment', async () => {
    const { b, ids, endpointId } = await setUp();
    const hh = h as ApiHarness;
    const detail = async (id: string) => {
      const res = await b.get(`/console/api/events/${id}`);
      expect(res.statusCode, res.body).toBe(200);
      return json<{ endpoint: unknown; event: { metadata?: unknown } }>(res);
    };
    // The endpoint the watch delivers to (its secret signs the payload); none for a watch's own URL.
    expect((await detail(ids.c[0] as string)).endpoint).toEqual({
      id: endpointId,
      label: 'deposits',
    });
    const a = await detail(ids.a[0] as string);
    expect(a.endpoint).toBeNull();
    expect(a.event.metadata).toEqual({ invoice: INVOICE, customer: 'c_1842' });
    // A test-mode event of the same account, opened in live mode: 404 saying where it is; in test
    // mode it is there, and a live event is "in the live environment". Another account's event, or
    // none, is a plain 404.
    const { rows } = await hh.db.query<{ id: string }>(
      'SELECT id FROM accounts ORDER BY created_at',
    );
    const accountId = rows[0]?.id as string;
    const testKey = await createApiKey(hh.db, accountId, { network: 'nile' });
    const tw = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: { authorization: `Bearer ${testKey.key}` },
      payload: {
        address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        asset_filter: 'USDT',
        webhook_url: 'https://hooks.example.com/test',
      },
    });
    expect(tw.statusCode, tw.body).toBe(201);
    const testWatch = json<{ id: string }>(tw).id;
    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw,
                           contract, created_at)
       VALUES ('evt_testmode_1', $1, $2, 'nile', 'incoming', 'USDT', 'test_' || md5('x'), 0, 1,
               now(), 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               1000000, 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf', now())`,
      [accountId, testWatch],
    );
    const live = await b.get('/console/api/events/evt_testmode_1');
    expect(live.statusCode).toBe(404);
    expect(json(live)).toEqual({
      error: 'this event is in the test environment',
      environment: 'test',
    });
    b.jar.set('tw_env', 'test');
    expect((await b.get('/console/api/events/evt_testmode_1')).statusCode).toBe(200);
    const fromTest = await b.get(`/console/api/events/${ids.a[0]}`);
    expect(fromTest.statusCode).toBe(404);
    expect(json(fromTest)).toMatchObject({ environment: 'live' });
    b.jar.delete('tw_env');
    const foreign = await b.get(`/console/api/events/${ids.other[0]}`);
    expect(foreign.statusCode).toBe(404);
    expect(json(foreign)).toEqual({ error: 'event not found' });
  });

  it('exports metadata: a CSV column, the JSON member', async () => {
    const { b, ids } = await setUp();
    const csv = await b.get(`/console/api/events/export?format=csv&q=${INVOICE}`);
    expect(csv.statusCode, csv.body).toBe(200);
    const lines = csv.body.trim().split('\n');
    expect(lines[0]).toBe(
      'event_id,block_timestamp,block_number,tx_id,event_index,direction,asset,amount,amount_raw,from,to,contract,watch_id,watch_label,delivery_status,delivery_attempts,notification_id,metadata',
    );
    expect(lines).toHaveLength(1 + 6);
    const a = lines.find((l) => l.startsWith(`${ids.a[2]},`));
    expect(a).toMatch(/,"\{""invoice"":""INV-2026-0091"",""customer"":""c_1842""\}"$/);
    const all = await b.get('/console/api/events/export?format=csv');
    const c = all.body
      .trim()
      .split('\n')
      .find((l) => l.startsWith(`${ids.c[0]},`));
    // No metadata: an empty last cell.
    expect(c).toMatch(/,ntf_mc_000000,$/);
    const js = await b.get(`/console/api/events/export?format=json&q=c_1842`);
    const arr = JSON.parse(js.body) as Array<{ metadata?: Record<string, string> }>;
    expect(arr).toHaveLength(3);
    expect(arr[0]?.metadata).toEqual({ invoice: INVOICE, customer: 'c_1842' });
  });
});
