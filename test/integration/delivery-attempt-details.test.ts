/**
 * What an attempt row keeps for the console (issue 12 item 5; migration 009): error_class, the
 * headers sent (signatures, never the secret), and the start of the answer (its headers, the
 * first 4 KB of its body). Real database on each engine, real HTTPS receiver
 * (src/devnet/receiver.ts) trusted through config.delivery.caFile, real AES-GCM secrets and HMAC
 * signatures, the real worker. No mocks, no timing assertions: waits are for states.
 *
 * SPEC §Events "Delivery to a webhook_url" (a 2xx within the deadline is the acknowledgement);
 * DESIGN invariants 3, 6, 7; CONVENTIONS habit 8.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import type { Config } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import {
  claimDue,
  claimNotifications,
  startClaims,
  WORKER_LOST_ERROR,
} from '../../src/delivery/claim.js';
import { completeAttempts } from '../../src/delivery/complete.js';
import { RESPONSE_BODY_MAX_BYTES, WebhookSender } from '../../src/delivery/send.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { type Receiver, type ReceiverOptions, startReceiver } from '../../src/devnet/receiver.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  insertAccount,
  insertEvents,
  insertWebhookWatch,
  notification,
} from '../helpers/outbox.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-attempt-details-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Resources opened by a test, closed after it in reverse order (workers before receivers). */
const cleanups: Array<() => Promise<void>> = [];

const box = new SecretBox([randomBytes(32)]);
/** The whsec_ secret of every watch here: it must appear in no attempts column. */
const SECRET = newWebhookSecret();

/** The headers every webhook POST carries (send.ts webhookHeaders, payload.ts). */
const SENT_HEADERS = [
  'content-type',
  'x-signature',
  'x-event-id',
  'user-agent',
  'webhook-id',
  'webhook-timestamp',
  'webhook-signature',
];

/** A receiver verifying SECRET, and the CA file that makes the worker trust it. */
async function receiver(opts: ReceiverOptions): Promise<Receiver & { caFile: string }> {
  const r = await startReceiver({ secretFor: SECRET, ...opts });
  cleanups.push(() => r.close());
  const caFile = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
  fs.writeFileSync(caFile, r.ca);
  return Object.assign(r, { caFile });
}

function deliveryConfig(over: Partial<Config['delivery']>): Pick<Config, 'delivery'> {
  return {
    delivery: {
      timeoutMs: 5_000,
      scheduleScale: 1, // a failed attempt's retry is a minute away: one attempt per test
      concurrency: 8,
      pollMs: 10,
      allowCidrs: ['127.0.0.1/32'],
      caFile: undefined,
      ...over,
    },
  };
}

/** Start a worker; it is stopped after the test. */
function startWorker(db: Db, over: Partial<Config['delivery']>): DeliveryWorker {
  const worker = new DeliveryWorker({
    db,
    secrets: box,
    config: deliveryConfig(over),
    logger: silentLogger,
  });
  const ac = new AbortController();
  const done = worker.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  return worker;
}

/** An attempts row with the console's columns (migration 009). */
interface DetailRow {
  attempt: number;
  http_status: number | null;
  error: string | null;
  error_class: string | null;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  lease_expired_at: Date | null;
}

async function detailRows(db: Db, notificationId: string): Promise<DetailRow[]> {
  const { rows } = await db.query<DetailRow>(
    `SELECT attempt, http_status, error, error_class, request_headers, response_headers,
            response_body, lease_expired_at
       FROM attempts WHERE notification_id = $1 ORDER BY attempt, id`,
    [notificationId],
  );
  return rows;
}

/** Wait (without asserting time) until the notification has `n` attempt rows; returns them. */
async function untilAttempts(db: Db, notificationId: string, n = 1): Promise<DetailRow[]> {
  return vi.waitFor(
    async () => {
      const rows = await detailRows(db, notificationId);
      if (rows.length < n) throw new Error(`${rows.length} attempt rows`);
      return rows;
    },
    { timeout: 30_000, interval: 10 },
  );
}

/** Every attempts row as JSON text (every column), for looking for the secret in any of them. */
async function allAttemptsText(db: Db): Promise<string[]> {
  const { rows } = await db.query<{ row: string }>(
    'SELECT row_to_json(a)::text AS row FROM attempts a',
  );
  return rows.map((r) => r.row);
}

/** The secret, whole or its key part alone, appears in none of `texts`. */
function expectNoSecret(texts: readonly string[]): void {
  expect(texts.length).toBeGreaterThan(0);
  for (const text of texts) {
    expect(text).not.toContain(SECRET);
    expect(text).not.toContain(SECRET.slice('whsec_'.length));
    expect(text).not.toContain('whsec_');
  }
}

describe.each(dbEngines)('attempt details on %s', (engine) => {
  let t: TestDb;
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.();
    await t?.drop();
  });

  /** A fresh database with an account, a webhook watch to `url` (secret SECRET) and one event. */
  async function setup(url: string) {
    t = await migratedDb(engine);
    const accountId = await insertAccount(t.db);
    const { watchId } = await insertWebhookWatch(t.db, box, { accountId, url, secret: SECRET });
    const [ev] = await insertEvents(t.db, { accountId, watchId });
    if (!ev) throw new Error('no event');
    return { db: t.db, ev };
  }

  it('a 2xx: its headers and the first 4 KB of a 10 KB body, the headers sent, no secret', async () => {
    // 10 KB of text with the characters an array literal or JSON must escape.
    const body = '{"k":"v\\\\w"},'.repeat(1_000).slice(0, 10 * 1024);
    const r = await receiver({
      respond: () => ({
        status: 200,
        headers: { 'X-Receiver': 'r1', 'x-multi': ['a', 'b'], 'set-cookie': ['s=1', 't=2'] },
        body,
      }),
    });
    const { db, ev } = await setup(r.url);
    startWorker(db, { caFile: r.caFile });

    await vi.waitFor(
      async () => expect((await notification(db, ev.notificationId)).status).toBe('DELIVERED'),
      { timeout: 30_000, interval: 10 },
    );
    const [a] = await detailRows(db, ev.notificationId);
    expect(a).toMatchObject({ attempt: 1, http_status: 200, error: null, error_class: null });
    expect(a?.response_body).toBe(body.slice(0, RESPONSE_BODY_MAX_BYTES));
    expect(a?.response_body).toHaveLength(4096);
    expect(a?.response_headers).toMatchObject({
      'x-receiver': 'r1',
      'x-multi': 'a, b',
      'set-cookie': 's=1, t=2',
      'content-type': 'text/plain',
    });
    // The headers sent, as the receiver got them: the signatures included.
    const sent = a?.request_headers ?? {};
    expect(Object.keys(sent).sort()).toEqual([...SENT_HEADERS].sort());
    const got = r.received[0]?.headers ?? {};
    for (const name of SENT_HEADERS) expect(sent[name], name).toBe(got[name]);
    expect(r.received[0]?.verified).toBe(true);
    expectNoSecret(await allAttemptsText(db));
  });

  it('a 500: status, class http, its headers and body (U+0000 stored as U+FFFD)', async () => {
    const r = await receiver({
      respond: () => ({
        status: 500,
        headers: { 'retry-after': '120' },
        body: Buffer.from('upstream broke: é\u0000 "x"', 'utf8'),
      }),
    });
    const { db, ev } = await setup(r.url);
    startWorker(db, { caFile: r.caFile });

    const [a] = await untilAttempts(db, ev.notificationId);
    expect(a).toMatchObject({
      attempt: 1,
      http_status: 500,
      error: 'HTTP 500: not a 2xx answer',
      error_class: 'http',
      response_body: 'upstream broke: é\uFFFD "x"',
    });
    expect(a?.response_headers).toMatchObject({ 'retry-after': '120' });
    expect(a?.request_headers?.['x-event-id']).toBe(ev.eventId);
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'PENDING',
      attempts: 1,
      last_status: 500,
    });
    expectNoSecret(await allAttemptsText(db));
  });

  it('a timeout: class timeout, the headers sent, no answer fields', async () => {
    const r = await receiver({ respond: () => ({ status: 200, delayMs: 5_000 }) });
    const { db, ev } = await setup(r.url);
    startWorker(db, { caFile: r.caFile, timeoutMs: 300 });

    const [a] = await untilAttempts(db, ev.notificationId);
    expect(a).toMatchObject({
      http_status: null,
      error: 'timeout: no complete answer within 300 ms',
      error_class: 'timeout',
      response_headers: null,
      response_body: null,
    });
    expect(Object.keys(a?.request_headers ?? {}).sort()).toEqual([...SENT_HEADERS].sort());
    expect(r.received).toHaveLength(1); // sent; the answer came too late
  });

  it('a refused address: class blocked, nothing sent, no answer fields', async () => {
    const r = await receiver({});
    const port = new URL(r.url).port;
    const { db, ev } = await setup(`https://10.0.0.7:${port}/hook`);
    startWorker(db, { caFile: r.caFile, allowCidrs: [] });

    const [a] = await untilAttempts(db, ev.notificationId);
    expect(a).toMatchObject({
      http_status: null,
      error: 'refused: address 10.0.0.7 is in a non-public range (private)',
      error_class: 'blocked',
      request_headers: null,
      response_headers: null,
      response_body: null,
    });
    expect(r.connections).toBe(0);
  });

  it('a 200 whose body is held open is DELIVERED, with the part of the body that came', async () => {
    // The status and the body's first byte come at once; the rest only long after the deadline.
    const r = await receiver({
      respond: () => ({ status: 200, body: 'acknowledged', bodyDelayMs: 30_000 }),
    });
    const { db, ev } = await setup(r.url);
    startWorker(db, { caFile: r.caFile, timeoutMs: 3_000 });

    await vi.waitFor(
      async () => expect((await notification(db, ev.notificationId)).status).toBe('DELIVERED'),
      { timeout: 30_000, interval: 10 },
    );
    const [a] = await detailRows(db, ev.notificationId);
    expect(a).toMatchObject({
      attempt: 1,
      http_status: 200,
      error: null,
      error_class: null,
      response_body: 'a',
    });
    expect(a?.response_headers?.['content-type']).toBe('text/plain');
    expect(await notification(db, ev.notificationId)).toMatchObject({ attempts: 1 });
    expect(r.countsByEvent.get(ev.eventId)).toBe(1);
  });

  it('a lost attempt is class lost; its late 2xx fills the row in with the answer, no secret', async () => {
    const r = await receiver({ respond: () => ({ status: 202, body: 'queued' }) });
    const { db, ev } = await setup(r.url);
    // A worker claims with a short lease, starts the attempt and stalls past the lease.
    const [held] = await claimNotifications(db, { limit: 1, leaseMs: 100, owner: 'stalled' });
    if (!held) throw new Error('nothing claimed');
    expect(await startClaims(db, [held])).toEqual(new Set([held.notificationId]));
    await vi.waitFor(
      async () => {
        const { lost } = await claimDue(db, { limit: 1, leaseMs: 100, owner: 'probe' });
        if (lost !== 1) throw new Error('lease not expired yet');
      },
      { timeout: 10_000, interval: 20 },
    );
    const [lost] = await detailRows(db, ev.notificationId);
    expect(lost).toMatchObject({
      attempt: 1,
      error: WORKER_LOST_ERROR,
      error_class: 'lost',
      request_headers: null,
      response_headers: null,
      response_body: null,
    });

    // The stalled worker's attempt did happen, late: recorded into its lost row.
    const sender = new WebhookSender({
      timeoutMs: 5_000,
      allowCidrs: ['127.0.0.1/32'],
      caFile: r.caFile,
    });
    cleanups.push(() => sender.close());
    const result = await sender.send(r.url, held.event, SECRET);
    expect(result).toMatchObject({ ok: true, status: 202, responseBody: 'queued' });
    await completeAttempts(
      db,
      [
        {
          notificationId: held.notificationId,
          leaseToken: held.leaseToken,
          attemptsBefore: 0,
          result,
        },
      ],
      1,
    );
    const [filled, ...others] = await detailRows(db, ev.notificationId);
    expect(others).toEqual([]);
    expect(filled).toMatchObject({
      attempt: 1,
      http_status: 202,
      error: null,
      error_class: null,
      response_body: 'queued',
    });
    expect(filled?.lease_expired_at).toBeInstanceOf(Date);
    expect(filled?.response_headers?.['content-type']).toBe('text/plain');
    expect(filled?.request_headers?.['x-signature']).toBe(r.received[0]?.headers['x-signature']);
    expect(await notification(db, ev.notificationId)).toMatchObject({ status: 'DELIVERED' });
    expectNoSecret(await allAttemptsText(db));
  });

  it('a late 2xx for a lost sixth attempt fills its row in but leaves the notification DEAD', async () => {
    const r = await receiver({ respond: () => ({ status: 200, body: 'ok' }) });
    const { db, ev } = await setup(r.url);
    // Five attempts failed already: the sixth is the last.
    await db.query('UPDATE notifications SET attempts = 5 WHERE id = $1', [ev.notificationId]);
    const [held] = await claimNotifications(db, { limit: 1, leaseMs: 100, owner: 'stalled' });
    if (!held) throw new Error('nothing claimed');
    expect(held.attempts).toBe(5);
    expect(await startClaims(db, [held])).toEqual(new Set([held.notificationId]));
    // Its lease runs out: the claim that finds it counts the lost sixth attempt, and it is DEAD.
    await vi.waitFor(
      async () => {
        const { lost } = await claimDue(db, { limit: 1, leaseMs: 100, owner: 'probe' });
        if (lost !== 1) throw new Error('lease not expired yet');
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'DEAD',
      attempts: 6,
    });
    // The stalled worker's request did reach the receiver, which acknowledged it, late.
    const sender = new WebhookSender({
      timeoutMs: 5_000,
      allowCidrs: ['127.0.0.1/32'],
      caFile: r.caFile,
    });
    cleanups.push(() => sender.close());
    const result = await sender.send(r.url, held.event, SECRET);
    expect(result).toMatchObject({ ok: true, status: 200 });
    const outcome = await completeAttempts(
      db,
      [
        {
          notificationId: held.notificationId,
          leaseToken: held.leaseToken,
          attemptsBefore: 5,
          result,
        },
      ],
      1,
    );
    expect(outcome).toMatchObject({ recorded: 1, delivered: 0, stale: 1 });
    // DEAD is final; the attempt log shows the answer, marked as having come after its lease.
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'DEAD',
      attempts: 6,
    });
    const [sixth, ...others] = await detailRows(db, ev.notificationId);
    expect(others).toEqual([]);
    expect(sixth).toMatchObject({ attempt: 6, http_status: 200, error: null, response_body: 'ok' });
    expect(sixth?.lease_expired_at).toBeInstanceOf(Date);
  });
});
