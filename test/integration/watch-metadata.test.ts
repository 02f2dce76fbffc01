/**
 * A watch's `metadata` (issue 30 item 2), on both engines, through the whole path: set through
 * POST /v1/watches, the batch and PATCH (limits answered 400 with SPEC's error body, no coercion
 * of a value), returned with the watch, copied onto the event by the ingest transaction
 * (src/ingest/commit.ts), delivered in the signed webhook body to a real HTTPS receiver and listed
 * by GET /v1/events; a watch without metadata gives events without the member at all (additive);
 * a change of the watch's metadata does not change an event already stored.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver, verifySignature } from '../../src/devnet/receiver.js';
import { commitBlock, ensureCursor } from '../../src/ingest/commit.js';
import { parseAddress } from '../../src/tron/address.js';
import {
  ADDR_B58,
  ADDR2_B58,
  type ApiHarness,
  apiHarness,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-metadata-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const USDT_HEX = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
const SENDER_HEX = `41${'cd'.repeat(20)}`;

describe.each(dbEngines)('watch metadata on %s', (engine) => {
  let h: ApiHarness | undefined;
  let r: Receiver | undefined;
  let stopWorker: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await stopWorker?.();
    stopWorker = undefined;
    await r?.close();
    r = undefined;
    await h?.close();
    h = undefined;
  });

  it('refuses metadata beyond its limits with a 400 naming the member, on create, batch and PATCH', async () => {
    h = await apiHarness(engine);
    const check = responseChecker(await openapiDocument(h.app));
    const c = await h.caller({ plan: 'pro' });
    const post = (url: string, payload: unknown, method: 'POST' | 'PATCH' = 'POST') =>
      (h as ApiHarness).app.inject({
        method,
        url,
        headers: c.headers,
        payload: payload as Record<string, unknown>,
      });
    const base = {
      address: ADDR_B58,
      asset_filter: 'USDT',
      webhook_url: 'https://hooks.example.com/a',
    };
    const tooMany = Object.fromEntries(Array.from({ length: 21 }, (_, i) => [`k${i}`, 'v']));
    const cases: Array<[string, unknown]> = [
      ['21 keys', tooMany],
      ['a 41-character key', { ['k'.repeat(41)]: 'v' }],
      ['an empty key', { '': 'v' }],
      ['a 501-character value', { customer: 'x'.repeat(501) }],
      ['a number value (never coerced to "1")', { customer: 1 }],
      ['a nested object', { customer: { id: 'c1' } }],
      ['an array', ['c1']],
      ['a string', 'c1'],
    ];
    for (const [what, metadata] of cases) {
      const res = await post('/v1/watches', { ...base, metadata });
      expect(res.statusCode, what).toBe(400);
      expect(check('/v1/watches', 'post', res), what).toEqual([]);
      const body = json<{ error: string; details: Array<{ field: string }> }>(res);
      expect(typeof body.error, what).toBe('string');
      expect(
        body.details.some((d) => d.field.startsWith('metadata')),
        what,
      ).toBe(true);
    }
    // A key with a control character passes the schema and is refused by the domain rule.
    const ctl = await post('/v1/watches', { ...base, metadata: { 'a\nb': 'v' } });
    expect(ctl.statusCode).toBe(400);
    expect(json<{ details: Array<{ field: string }> }>(ctl).details[0]?.field).toBe('metadata');
    expect((await h.db.query('SELECT 1 FROM watches')).rows).toEqual([]);

    // At the limits exactly: created, returned as given.
    const full = Object.fromEntries(
      Array.from({ length: 20 }, (_, i) => [
        `${String(i).padStart(2, '0')}${'k'.repeat(38)}`,
        'v'.repeat(500),
      ]),
    );
    const ok = await post('/v1/watches', { ...base, metadata: full });
    expect(ok.statusCode).toBe(201);
    expect(check('/v1/watches', 'post', ok)).toEqual([]);
    const w = json<{ id: string; metadata: Record<string, string> }>(ok);
    expect(w.metadata).toEqual(full);

    // The batch: the invalid item is that item's 400, the valid one is created with its metadata.
    const batch = await post('/v1/watches/batch', {
      items: [
        { ...base, address: ADDR2_B58, metadata: { customer: 'c_2' } },
        { ...base, direction: 'both', metadata: { customer: 7 } },
      ],
    });
    expect(batch.statusCode).toBe(200);
    expect(check('/v1/watches/batch', 'post', batch)).toEqual([]);
    const results = json<{
      results: Array<{
        status: number;
        watch?: { metadata: unknown };
        error?: { details: Array<{ field: string }> };
      }>;
    }>(batch).results;
    expect(results.map((x) => x.status)).toEqual([201, 400]);
    expect(results[0]?.watch?.metadata).toEqual({ customer: 'c_2' });
    expect(results[1]?.error?.details.map((d) => d.field)).toEqual(['metadata.customer']);

    // PATCH: refused beyond the limits (the watch unchanged), replaced whole, cleared by null.
    const badPatch = await post(`/v1/watches/${w.id}`, { metadata: { n: 1 } }, 'PATCH');
    expect(badPatch.statusCode).toBe(400);
    expect(check('/v1/watches/{id}', 'patch', badPatch)).toEqual([]);
    const replaced = await post(`/v1/watches/${w.id}`, { metadata: { order: 'o_9' } }, 'PATCH');
    expect(replaced.statusCode).toBe(200);
    expect(check('/v1/watches/{id}', 'patch', replaced)).toEqual([]);
    expect(json(replaced).metadata).toEqual({ order: 'o_9' });
    const cleared = await post(`/v1/watches/${w.id}`, { metadata: null }, 'PATCH');
    expect(json(cleared).metadata).toBeNull();
    const list = await h.app.inject({ method: 'GET', url: '/v1/watches', headers: c.headers });
    expect(check('/v1/watches', 'get', list)).toEqual([]);
    const listed = json<{ data: Array<{ id: string; metadata: unknown }> }>(list).data;
    expect(listed.find((x) => x.id === w.id)?.metadata).toBeNull();
    expect(listed.find((x) => x.id !== w.id)?.metadata).toEqual({ customer: 'c_2' });
  }, 120_000);

  it('copies the metadata onto the event at ingest: in the signed webhook body and GET /v1/events, absent without it', async () => {
    r = await startReceiver({ secretFor: () => '', respond: () => 200 });
    const receiver = r;
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, receiver.ca);
    h = await apiHarness(engine, {
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: caFile, DELIVERY_POLL_MS: '20' },
    });
    const hh = h;
    const check = responseChecker(await openapiDocument(hh.app));
    const c = await hh.caller({ plan: 'pro' });
    const ep = json<{ id: string; secret: string }>(
      await hh.app.inject({
        method: 'POST',
        url: '/v1/endpoints',
        headers: c.headers,
        payload: { url: receiver.url },
      }),
    );
    const meta = { customer_id: 'c_1842', note: 'Zoë "quoted" \\ \u001f' };
    const batch = json<{ results: Array<{ status: number; watch: { id: string } }> }>(
      await hh.app.inject({
        method: 'POST',
        url: '/v1/watches/batch',
        headers: c.headers,
        payload: {
          items: [
            { address: ADDR_B58, asset_filter: 'USDT', endpoint_id: ep.id, metadata: meta },
            { address: ADDR2_B58, asset_filter: 'USDT', endpoint_id: ep.id },
          ],
        },
      }),
    );
    expect(batch.results.map((x) => x.status)).toEqual([201, 201]);
    const [withMeta, without] = batch.results.map((x) => x.watch.id);

    // One block above the watches' activation (chain head 1,018), one USDT transfer to each.
    await ensureCursor(hh.db, 'mainnet', 1_100);
    const transfer = (toB58: string, i: number) => ({
      blockNumber: 1_100,
      blockTimestamp: Date.parse('2026-01-08T13:36:51Z'),
      txId: randomBytes(32).toString('hex'),
      eventIndex: i,
      asset: 'USDT' as const,
      from: SENDER_HEX,
      to: parseAddress(toB58).hex,
      amountRaw: 1_500_000n,
      contract: USDT_HEX,
      proof: 'signed' as const,
    });
    const committed = await commitBlock(
      hh.db,
      'mainnet',
      { number: 1_100, id: 'b'.repeat(64), timestamp: Date.parse('2026-01-08T13:36:51Z') },
      [transfer(ADDR_B58, 0), transfer(ADDR2_B58, 1)],
    );
    expect(committed.events).toBe(2);
    // A later change of the watch's metadata does not touch the event already stored.
    const patched = await hh.app.inject({
      method: 'PATCH',
      url: `/v1/watches/${withMeta}`,
      headers: c.headers,
      payload: { metadata: { customer_id: 'changed' } },
    });
    expect(patched.statusCode).toBe(200);

    const worker = new DeliveryWorker({
      db: hh.db,
      secrets: hh.secrets,
      config: hh.config,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
    const got = await vi.waitFor(
      () => {
        if (receiver.received.length < 2) throw new Error(`${receiver.received.length} of 2`);
        return receiver.received;
      },
      { timeout: 60_000, interval: 50 },
    );
    const byWatch = new Map(got.map((q) => [q.event?.watch_id, q]));
    const a = byWatch.get(withMeta);
    const b = byWatch.get(without);
    // Signed with the endpoint's secret over the exact bytes that carry the metadata.
    expect(verifySignature(ep.secret, a?.body ?? Buffer.alloc(0), a?.headers['x-signature'])).toBe(
      true,
    );
    expect(JSON.parse(String(a?.body)).metadata).toEqual(meta);
    // Without metadata the member is absent (not null): the body is the payload of before.
    expect(Object.hasOwn(JSON.parse(String(b?.body)), 'metadata')).toBe(false);

    const page = await hh.app.inject({ method: 'GET', url: '/v1/events', headers: c.headers });
    expect(page.statusCode).toBe(200);
    expect(check('/v1/events', 'get', page)).toEqual([]);
    const events = json<{ data: Array<Record<string, unknown>> }>(page).data;
    const ea = events.find((e) => e.watch_id === withMeta);
    const eb = events.find((e) => e.watch_id === without);
    expect(ea?.metadata).toEqual(meta);
    expect(eb && Object.hasOwn(eb, 'metadata')).toBe(false);
    // The listed event is the delivered payload plus its delivery state.
    const { delivery: _d, ...listedA } = ea ?? {};
    expect(listedA).toEqual(JSON.parse(String(a?.body)));
  }, 120_000);
});
