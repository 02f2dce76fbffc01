/**
 * Endpoints (issue 30 item 1), on both engines, through the public API, a real delivery worker
 * and a real HTTPS receiver:
 * - /v1/endpoints: create (secret once), list, get, edit, delete; the URL policy of webhook_url;
 *   answers conform to the OpenAPI document; another account's key gets 404 on every route and
 *   cannot target the endpoint from a watch; a watch targets exactly one of webhook_url,
 *   telegram, endpoint_id; deleting an endpoint that watches target is refused (409).
 * - A receiver holding ONE secret verifies the deliveries of 1,000 watches on the endpoint, then,
 *   through a rotation, with either secret during the grace period and only the new one after it.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver, verifySignature } from '../../src/devnet/receiver.js';
import {
  ADDR_B58,
  type ApiHarness,
  apiHarness,
  type Caller,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-endpoints-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** `count` distinct valid TRON addresses (41-hex: 0x41 + 20 bytes). */
function addresses(count: number): string[] {
  return Array.from(
    { length: count },
    (_, i) => `41${i.toString(16).padStart(8, '0')}${'ab'.repeat(16)}`,
  );
}

describe.each(dbEngines)('endpoints on %s', (engine) => {
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

  it('is a resource of its own: created with its secret once, listed, edited, refused to others (404), deleted only without watches (409)', async () => {
    h = await apiHarness(engine);
    const check = responseChecker(await openapiDocument(h.app));
    const c = await h.caller({ plan: 'pro' });
    const other = await h.caller({ plan: 'pro' });
    const inject = (caller: Caller, method: string, url: string, payload?: unknown) =>
      (h as ApiHarness).app.inject({
        method: method as 'GET',
        url,
        headers: caller.headers,
        ...(payload !== undefined ? { payload: payload as Record<string, unknown> } : {}),
      });

    // The URL policy of webhook_url: a private address is refused, naming the member.
    const bad = await inject(c, 'POST', '/v1/endpoints', { url: 'https://10.1.2.3/hook' });
    expect(bad.statusCode).toBe(400);
    expect(check('/v1/endpoints', 'post', bad)).toEqual([]);
    expect(json<{ details: Array<{ field: string }> }>(bad).details.map((d) => d.field)).toEqual([
      'url',
    ]);
    const badLimit = await inject(c, 'POST', '/v1/endpoints', {
      url: 'https://hooks.example.com/a',
      rate_limit_per_second: 0,
    });
    expect(badLimit.statusCode).toBe(400);

    const created = await inject(c, 'POST', '/v1/endpoints', {
      url: 'https://hooks.example.com/tron?token=abc',
      label: ' Shop EU ',
      rate_limit_per_second: 20,
      max_concurrency: 4,
    });
    expect(created.statusCode).toBe(201);
    expect(check('/v1/endpoints', 'post', created)).toEqual([]);
    const ep = json<{ id: string; secret: string; label: string; enabled: boolean }>(created);
    expect(ep.id).toMatch(/^ep_/);
    expect(ep.secret).toMatch(/^whsec_/);
    expect(ep.label).toBe('Shop EU');
    expect(ep.enabled).toBe(true);
    // Stored encrypted: the plaintext is nowhere in the row.
    const { rows: stored } = await h.db.query<{ secret_ciphertext: Uint8Array }>(
      'SELECT secret_ciphertext FROM endpoints WHERE id = $1',
      [ep.id],
    );
    expect(Buffer.from(stored[0]?.secret_ciphertext ?? []).includes(ep.secret)).toBe(false);

    const list = await inject(c, 'GET', '/v1/endpoints');
    expect(list.statusCode).toBe(200);
    expect(check('/v1/endpoints', 'get', list)).toEqual([]);
    expect(list.body).not.toContain(ep.secret);
    expect(json<{ data: Array<{ id: string }> }>(list).data.map((e) => e.id)).toEqual([ep.id]);
    expect(json<{ data: unknown[] }>(await inject(other, 'GET', '/v1/endpoints')).data).toEqual([]);

    // Another account's key: 404 on every route, as for a missing id.
    for (const [method, url, payload] of [
      ['GET', `/v1/endpoints/${ep.id}`],
      ['PATCH', `/v1/endpoints/${ep.id}`, { enabled: false }],
      ['DELETE', `/v1/endpoints/${ep.id}`],
      ['POST', `/v1/endpoints/${ep.id}/rotate-secret`, {}],
      ['POST', `/v1/endpoints/${ep.id}/previous-secret/expire`],
    ] as const) {
      const res = await inject(other, method, url, payload);
      expect(res.statusCode, `${method} ${url}`).toBe(404);
    }
    // … and cannot target it from a watch.
    const stolen = await inject(other, 'POST', '/v1/watches', {
      address: ADDR_B58,
      asset_filter: 'USDT',
      endpoint_id: ep.id,
    });
    expect(stolen.statusCode).toBe(404);
    expect(check('/v1/watches', 'post', stolen)).toEqual([]);
    expect(
      (await h.db.query('SELECT 1 FROM watches WHERE account_id = $1', [other.accountId])).rows,
    ).toEqual([]);

    const got = await inject(c, 'GET', `/v1/endpoints/${ep.id}`);
    expect(got.statusCode).toBe(200);
    expect(check('/v1/endpoints/{id}', 'get', got)).toEqual([]);
    expect(got.body).not.toContain(ep.secret);

    const patched = await inject(c, 'PATCH', `/v1/endpoints/${ep.id}`, {
      enabled: false,
      rate_limit_per_second: null,
    });
    expect(patched.statusCode).toBe(200);
    expect(check('/v1/endpoints/{id}', 'patch', patched)).toEqual([]);
    expect(json(patched)).toMatchObject({
      enabled: false,
      rate_limit_per_second: null,
      max_concurrency: 4,
    });
    const patchBad = await inject(c, 'PATCH', `/v1/endpoints/${ep.id}`, {
      url: 'https://192.168.0.1/x',
    });
    expect(patchBad.statusCode).toBe(400);

    // A watch targets exactly one of webhook_url, telegram, endpoint_id.
    const two = await inject(c, 'POST', '/v1/watches', {
      address: ADDR_B58,
      asset_filter: 'USDT',
      endpoint_id: ep.id,
      webhook_url: 'https://hooks.example.com/x',
    });
    expect(two.statusCode).toBe(400);
    expect(json(two).code).toBe('invalid_target');
    const onEp = await inject(c, 'POST', '/v1/watches', {
      address: ADDR_B58,
      asset_filter: 'USDT',
      endpoint_id: ep.id,
    });
    expect(onEp.statusCode).toBe(201);
    expect(check('/v1/watches', 'post', onEp)).toEqual([]);
    const w = json<{ id: string; endpoint_id: string; webhook_url: null; secret?: string }>(onEp);
    expect(w.endpoint_id).toBe(ep.id);
    expect(w.webhook_url).toBeNull();
    expect(w.secret).toBeUndefined();
    // Its own secret cannot be rotated: the endpoint's signs.
    const rot = await inject(c, 'POST', `/v1/watches/${w.id}/rotate-secret`, {});
    expect(rot.statusCode).toBe(400);

    // Deleting the endpoint while a watch (even paused) targets it: 409, the SPEC's error body.
    await inject(c, 'POST', `/v1/watches/${w.id}/pause`);
    const refused = await inject(c, 'DELETE', `/v1/endpoints/${ep.id}`);
    expect(refused.statusCode).toBe(409);
    expect(check('/v1/endpoints/{id}', 'delete', refused)).toEqual([]);
    expect(json(refused)).toMatchObject({
      code: 'endpoint_watches_active',
      details: { watch_count: 1 },
    });
    expect(typeof json(refused).error).toBe('string');

    expect((await inject(c, 'DELETE', `/v1/watches/${w.id}`)).statusCode).toBe(204);
    const deleted = await inject(c, 'DELETE', `/v1/endpoints/${ep.id}`);
    expect(deleted.statusCode).toBe(204);
    expect((await inject(c, 'GET', `/v1/endpoints/${ep.id}`)).statusCode).toBe(404);
    // A deleted endpoint cannot be targeted.
    const late = await inject(c, 'POST', '/v1/watches', {
      address: ADDR_B58,
      asset_filter: 'USDT',
      endpoint_id: ep.id,
    });
    expect(late.statusCode).toBe(404);

    const { rows: audit } = await h.db.query<{ action: string }>(
      `SELECT action FROM audit_log WHERE action LIKE 'endpoint.%' ORDER BY at`,
    );
    expect(audit.map((a) => a.action)).toEqual([
      'endpoint.created',
      'endpoint.updated',
      'endpoint.deleted',
    ]);
  }, 180_000);

  it('a receiver holding one secret verifies the deliveries of 1,000 watches, through a rotation', async () => {
    // The receiver holds ONE secret at a time (the endpoint's), whatever the watch.
    let held = '';
    r = await startReceiver({ secretFor: () => held, respond: () => 200 });
    const receiver = r;
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, receiver.ca);
    h = await apiHarness(engine, {
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: caFile, DELIVERY_POLL_MS: '20' },
    });
    const hh = h;
    const c = await hh.caller({ plan: 'business', watchQuota: 2_000, rateLimitPerMin: 100_000 });
    const created = await hh.app.inject({
      method: 'POST',
      url: '/v1/endpoints',
      headers: c.headers,
      payload: { url: receiver.url, label: 'deposits' },
    });
    expect(created.statusCode).toBe(201);
    const ep = json<{ id: string; secret: string }>(created);
    held = ep.secret;

    // The 1,000 watches in one batch (POST /v1/watches/batch, issue 30 item 2).
    const batch = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches/batch',
      headers: c.headers,
      payload: {
        items: addresses(1_000).map((address) => ({
          address,
          asset_filter: 'ALL',
          endpoint_id: ep.id,
        })),
      },
    });
    expect(batch.statusCode).toBe(200);
    const made = json<{ created: number; results: Array<{ watch: { id: string } }> }>(batch);
    expect(made.created).toBe(1_000);
    const watchIds = made.results.map((x) => x.watch.id);
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

    /** One event per watch of the endpoint; resolves with the receiver's requests for them. */
    let round = 0;
    async function deliverRound(watches = watchIds) {
      const tag = `r${++round}`;
      await hh.db.query(
        `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                             event_index, block_number, block_timestamp, from_address, to_address,
                             amount_raw, contract, created_at)
         SELECT 'evt_' || $1 || '_' || w.id, w.account_id, w.id, 'mainnet', 'incoming', 'USDT',
                md5($1 || w.id) || md5(w.id || $1), 0, 79072107, '2026-01-08T13:36:51Z',
                'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
                'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
                clock_timestamp() + row_number() OVER (ORDER BY w.id) * interval '1 microsecond'
           FROM watches w WHERE w.id = ANY($2::text[])`,
        [tag, watches],
      );
      await hh.db.query(
        `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                    next_attempt_at, created_at)
         SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', 'PENDING', 0,
                created_at, created_at
           FROM events WHERE id LIKE 'evt_' || $1 || '\\_%'`,
        [tag],
      );
      const ids = new Set(watches.map((w) => `evt_${tag}_${w}`));
      return vi.waitFor(
        () => {
          const got = receiver.received.filter((q) => q.eventId && ids.has(q.eventId));
          if (new Set(got.map((q) => q.eventId)).size < ids.size) {
            throw new Error(`${got.length} of ${ids.size} delivered`);
          }
          return got;
        },
        // PGlite on a loaded 2-core machine delivers ~10 a second: generous, not a measure.
        { timeout: 400_000, interval: 100 },
      );
    }

    // 1. One secret verifies every watch's delivery.
    const first = await deliverRound();
    expect(new Set(first.map((q) => q.event?.watch_id))).toEqual(new Set(watchIds));
    expect(first.every((q) => q.verified)).toBe(true);
    expect(first.every((q) => q.headers['x-signature-previous'] === undefined)).toBe(true);

    // 2. Rotation with a grace period: both secrets sign each delivery; a receiver still holding
    // the old one verifies X-Signature-Previous, one holding the new one X-Signature.
    const rotated = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/rotate-secret`,
      headers: c.headers,
      payload: { grace_period_seconds: 3600 },
    });
    expect(rotated.statusCode).toBe(200);
    const next = json<{ secret: string; previous_secret_expires_at: string }>(rotated).secret;
    expect(next).not.toBe(ep.secret);
    const during = await deliverRound();
    for (const q of during) {
      expect(verifySignature(next, q.body, q.headers['x-signature'])).toBe(true);
      expect(verifySignature(ep.secret, q.body, q.headers['x-signature-previous'])).toBe(true);
      expect(String(q.headers['webhook-signature']).split(' ')).toHaveLength(2);
    }

    // 3. The grace period ended: only the new secret signs.
    const expired = await hh.app.inject({
      method: 'POST',
      url: `/v1/endpoints/${ep.id}/previous-secret/expire`,
      headers: c.headers,
    });
    expect(expired.statusCode).toBe(200);
    held = next;
    // (A sample of 100 watches: the secret is the endpoint's, the same for every watch.)
    const after = await deliverRound(watchIds.slice(0, 100));
    for (const q of after) {
      expect(q.verified).toBe(true);
      expect(verifySignature(ep.secret, q.body, q.headers['x-signature'])).toBe(false);
      expect(q.headers['x-signature-previous']).toBeUndefined();
    }
    // Every event reached the receiver (at least once: a loaded machine may retry one whose lease
    // ran out, SPEC §Events "at-least-once"); the signatures were checked round by round above.
    expect(new Set(receiver.received.map((q) => q.eventId)).size).toBe(2_100);
  }, 1_200_000);

  it('holds deliveries for a switched-off endpoint in the outbox without using attempts, and moves a webhook watch onto an endpoint', async () => {
    let held = '';
    r = await startReceiver({ secretFor: () => held, respond: () => 200 });
    const receiver = r;
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, receiver.ca);
    h = await apiHarness(engine, {
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_CA_FILE: caFile,
        DELIVERY_POLL_MS: '20',
        // 60 s recheck of a switched-off endpoint → 60 ms.
        DELIVERY_SCHEDULE_SCALE: '0.001',
      },
    });
    const hh = h;
    const c = await hh.caller({ plan: 'pro' });
    const ep = json<{ id: string; secret: string }>(
      await hh.app.inject({
        method: 'POST',
        url: '/v1/endpoints',
        headers: c.headers,
        payload: { url: receiver.url, enabled: false },
      }),
    );
    held = ep.secret;
    // A watch with its own URL and secret, moved onto the endpoint.
    const own = json<{ id: string; secret: string }>(
      await hh.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: { address: ADDR_B58, asset_filter: 'USDT', webhook_url: receiver.url },
      }),
    );
    const moved = await hh.app.inject({
      method: 'PATCH',
      url: `/v1/watches/${own.id}`,
      headers: c.headers,
      payload: { endpoint_id: ep.id },
    });
    expect(moved.statusCode).toBe(200);
    expect(json(moved)).toMatchObject({ endpoint_id: ep.id, webhook_url: null });
    const { rows: cols } = await hh.db.query<{ s: unknown }>(
      'SELECT secret_ciphertext AS s FROM watches WHERE id = $1',
      [own.id],
    );
    expect(cols[0]?.s).toBeNull();

    await hh.db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw,
                           contract, created_at)
       VALUES ('evt_off_1', $1, $2, 'mainnet', 'incoming', 'USDT', md5('off') || md5('x'), 0,
               79072107, '2026-01-08T13:36:51Z', 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
               'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 1, NULL, clock_timestamp())`,
      [c.accountId, own.id],
    );
    await hh.db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at)
       SELECT 'ntf_off_1', id, account_id, watch_id, 'webhook', 'PENDING', 0, created_at, created_at
         FROM events WHERE id = 'evt_off_1'`,
    );
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
    // Switched off: claimed and put back several times, never sent, no attempt used.
    await vi.waitFor(
      () => {
        if (worker.deferred < 3) throw new Error(`deferred ${worker.deferred}`);
      },
      { timeout: 30_000, interval: 20 },
    );
    expect(receiver.requests).toBe(0);
    const { rows: before } = await hh.db.query<{ attempts: number; status: string }>(
      `SELECT attempts, status FROM notifications WHERE id = 'ntf_off_1'`,
    );
    expect(before[0]).toEqual({ attempts: 0, status: 'PENDING' });
    expect(
      (await hh.db.query(`SELECT 1 FROM attempts WHERE notification_id = 'ntf_off_1'`)).rows,
    ).toEqual([]);

    // Switched on: delivered, signed with the endpoint's secret.
    const on = await hh.app.inject({
      method: 'PATCH',
      url: `/v1/endpoints/${ep.id}`,
      headers: c.headers,
      payload: { enabled: true },
    });
    expect(on.statusCode).toBe(200);
    const got = await vi.waitFor(
      () => {
        const q = receiver.received.find((x) => x.eventId === 'evt_off_1');
        if (!q) throw new Error('not delivered yet');
        return q;
      },
      { timeout: 30_000, interval: 20 },
    );
    expect(got.verified).toBe(true);
    expect(verifySignature(own.secret, got.body, got.headers['x-signature'])).toBe(false);
  }, 180_000);
});
