/**
 * Rotating a watch's webhook secret without downtime (issue 19 item 3), on both engines: the
 * public API (POST /v1/watches/{id}/rotate-secret, POST …/previous-secret/expire), a real delivery
 * worker and a real HTTPS receiver. During the grace period every delivery is signed with both
 * secrets, and a receiver holding either one verifies it: with the npm `standardwebhooks` library
 * and with docs/integrating.md's Node snippet (extracted and run as written).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import {
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

const ROOT = path.resolve(import.meta.dirname, '../..');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-rotation-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

type SnippetFn = (...args: unknown[]) => boolean;
let snippet: { verifyXSignature: SnippetFn; verifyStandardWebhook: SnippetFn };

/** docs/integrating.md's Node snippet ("Receiving webhooks"), written to a file and imported as is. */
beforeAll(async () => {
  const readme = fs.readFileSync(path.join(ROOT, 'docs', 'integrating.md'), 'utf8');
  const start = readme.indexOf('## Receiving webhooks');
  const end = readme.indexOf('\n## ', start + 1);
  const m = /```js\n([\s\S]*?)```/.exec(readme.slice(start, end < 0 ? undefined : end));
  if (!m?.[1]) throw new Error('no js block in "Receiving webhooks"');
  const file = path.join(tmp, 'verify.mjs');
  fs.writeFileSync(file, m[1]);
  snippet = (await import(pathToFileURL(file).href)) as typeof snippet;
});

interface Sw {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

function std(h: Record<string, string | string[] | undefined>): Sw {
  return {
    'webhook-id': String(h['webhook-id']),
    'webhook-timestamp': String(h['webhook-timestamp']),
    'webhook-signature': String(h['webhook-signature']),
  };
}

describe.each(dbEngines)('webhook secret rotation on %s', (engine) => {
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

  async function setup() {
    r = await startReceiver({ respond: () => 200 });
    const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
    fs.writeFileSync(caFile, r.ca);
    h = await apiHarness(engine, {
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32', WEBHOOK_CA_FILE: caFile, DELIVERY_POLL_MS: '20' },
    });
    const c = await h.caller();
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch({ webhook_url: r.url }),
    });
    expect(created.statusCode).toBe(201);
    const w = json<{ id: string; secret: string }>(created);
    const worker = new DeliveryWorker({
      db: h.db,
      secrets: h.secrets,
      config: h.config,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const done = worker.start(ac.signal);
    stopWorker = async () => {
      ac.abort();
      await done;
    };
    return { h, r, c, watchId: w.id, firstSecret: w.secret };
  }

  let batch = 0;
  /** One event for the watch; resolves with the request the receiver got for it. */
  async function deliverOne(hh: ApiHarness, rr: Receiver, c: Caller, watchId: string) {
    const [id] = await insertEvents(hh.db, {
      accountId: c.accountId,
      watchId,
      tag: `rot${++batch}`,
      count: 1,
      start: new Date().toISOString(),
    });
    return vi.waitFor(
      () => {
        const got = rr.received.find((q) => q.eventId === id);
        if (!got) throw new Error(`no request for ${id} yet`);
        return got;
      },
      { timeout: 30_000, interval: 20 },
    );
  }

  it('signs with both secrets during the grace period; either verifies; ending it early drops the old one', async () => {
    const { h, r, c, watchId, firstSecret } = await setup();
    const check = responseChecker(await openapiDocument(h.app));
    const rotated = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${watchId}/rotate-secret`,
      headers: c.headers,
      payload: { grace_period_seconds: 3600 },
    });
    expect(rotated.statusCode).toBe(200);
    expect(check('/v1/watches/{id}/rotate-secret', 'post', rotated)).toEqual([]);
    const rw = json<{
      secret: string;
      previous_secret_expires_at: string;
      secret_rotated_at: string;
      note: string;
    }>(rotated);
    const newSecret = rw.secret;
    expect(newSecret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(newSecret).not.toBe(firstSecret);
    const ends = Date.parse(rw.previous_secret_expires_at) - Date.now();
    expect(ends).toBeGreaterThan(3500_000);
    expect(ends).toBeLessThanOrEqual(3600_000);
    expect(rw.note).toMatch(/only once/);

    // The list shows the grace period, never a secret.
    const list = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(list.body).not.toContain(newSecret);
    expect(list.body).not.toContain(firstSecret);
    expect(json<{ data: Array<Record<string, unknown>> }>(list).data[0]).toMatchObject({
      id: watchId,
      previous_secret_expires_at: rw.previous_secret_expires_at,
      secret_rotated_at: rw.secret_rotated_at,
    });

    const req = await deliverOne(h, r, c, watchId);
    const sigs = String(req.headers['webhook-signature']).split(' ');
    expect(sigs).toHaveLength(2);
    for (const s of sigs) expect(s).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const payload = JSON.parse(req.body.toString('utf8')) as unknown;
    // The reference library, with either secret.
    expect(new Webhook(newSecret).verify(req.body.toString('utf8'), std(req.headers))).toEqual(
      payload,
    );
    expect(new Webhook(firstSecret).verify(req.body.toString('utf8'), std(req.headers))).toEqual(
      payload,
    );
    // docs/integrating.md's snippet, with either secret, both schemes.
    expect(snippet.verifyStandardWebhook(newSecret, req.body, req.headers)).toBe(true);
    expect(snippet.verifyStandardWebhook(firstSecret, req.body, req.headers)).toBe(true);
    expect(snippet.verifyXSignature(newSecret, req.body, req.headers['x-signature'])).toBe(true);
    expect(
      snippet.verifyXSignature(firstSecret, req.body, req.headers['x-signature-previous']),
    ).toBe(true);
    // X-Signature is the new secret's only.
    expect(snippet.verifyXSignature(firstSecret, req.body, req.headers['x-signature'])).toBe(false);

    // End the grace period early: the old secret stops signing at once.
    const expired = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${watchId}/previous-secret/expire`,
      headers: c.headers,
    });
    expect(expired.statusCode).toBe(200);
    expect(check('/v1/watches/{id}/previous-secret/expire', 'post', expired)).toEqual([]);
    expect(json(expired).previous_secret_expires_at).toBeNull();
    const { rows } = await h.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM watches WHERE previous_secret_ciphertext IS NOT NULL`,
    );
    expect(rows[0]?.n).toBe(0);

    const after = await deliverOne(h, r, c, watchId);
    expect(after.headers['x-signature-previous']).toBeUndefined();
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(snippet.verifyStandardWebhook(newSecret, after.body, after.headers)).toBe(true);
    expect(snippet.verifyStandardWebhook(firstSecret, after.body, after.headers)).toBe(false);
    expect(() =>
      new Webhook(firstSecret).verify(after.body.toString('utf8'), std(after.headers)),
    ).toThrow();
  }, 180_000);

  it('defaults to 24 h, rotating again keeps two secrets at most, 0 keeps none; 400s and 404s', async () => {
    const { h, r, c, watchId, firstSecret } = await setup();
    const rotate = (payload?: Record<string, unknown>, id = watchId) =>
      h.app.inject({
        method: 'POST',
        url: `/v1/watches/${id}/rotate-secret`,
        headers: c.headers,
        ...(payload ? { payload } : {}),
      });
    const first = await rotate();
    expect(first.statusCode).toBe(200);
    const ends = Date.parse(json(first).previous_secret_expires_at as string) - Date.now();
    expect(ends).toBeGreaterThan(24 * 3600_000 - 120_000);
    expect(ends).toBeLessThanOrEqual(24 * 3600_000);
    const second = await rotate({});
    const s2 = json(second).secret as string;
    const s1 = json(first).secret as string;
    const req = await deliverOne(h, r, c, watchId);
    const body = req.body.toString('utf8');
    expect(new Webhook(s2).verify(body, std(req.headers))).toBeTruthy();
    expect(new Webhook(s1).verify(body, std(req.headers))).toBeTruthy();
    // The secret before the previous one no longer signs.
    expect(() => new Webhook(firstSecret).verify(body, std(req.headers))).toThrow();

    const none = await rotate({ grace_period_seconds: 0 });
    expect(none.statusCode).toBe(200);
    expect(json(none).previous_secret_expires_at).toBeNull();
    const s3 = json(none).secret as string;
    const last = await deliverOne(h, r, c, watchId);
    expect(last.headers['x-signature-previous']).toBeUndefined();
    expect(snippet.verifyXSignature(s3, last.body, last.headers['x-signature'])).toBe(true);

    for (const bad of [-1, 604_801, 1.5, '3600']) {
      const res = await rotate({ grace_period_seconds: bad });
      expect(res.statusCode).toBe(400);
      expect(res.body).toContain('grace_period_seconds');
    }
    expect((await rotate({ grace: 1 })).statusCode).toBe(400);
    expect((await rotate(undefined, 'wh_nope')).statusCode).toBe(404);
    const other = await h.caller();
    const theirs = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${watchId}/rotate-secret`,
      headers: other.headers,
    });
    expect(theirs.statusCode).toBe(404);
    const theirExpire = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${watchId}/previous-secret/expire`,
      headers: other.headers,
    });
    expect(theirExpire.statusCode).toBe(404);
  }, 180_000);
});
