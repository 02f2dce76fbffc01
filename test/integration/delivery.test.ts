/**
 * Webhook delivery end to end (src/delivery/*): a real database on each engine, a real HTTPS
 * receiver with a self-signed certificate trusted through config.delivery.caFile, real AES-GCM
 * secrets and real HMAC signatures. No mocks. Timing-free: waits are for states (with generous
 * limits), and time is only asserted as lower bounds (a retry never comes before its delay).
 *
 * SPEC §Events "Delivery to a webhook_url", §Webhook signature, §States "Delivery status";
 * DESIGN invariants 3, 4, 6, 7.
 */
import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { pino } from 'pino';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import type { Config } from '../../src/config.js';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { type Db, openDb } from '../../src/db/pool.js';
import {
  type ClaimedNotification,
  claimDue,
  claimNotifications,
  startClaims,
  WORKER_LOST_ERROR,
} from '../../src/delivery/claim.js';
import { completeAttempts } from '../../src/delivery/complete.js';
import { MAX_ATTEMPTS, nextDelayMs, RETRY_DELAYS_MS } from '../../src/delivery/schedule.js';
import { recentSecretProblems } from '../../src/delivery/secret-problems.js';
import { AddressRefusedError, guardedLookup } from '../../src/delivery/send.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import {
  type Receiver,
  type ReceiverOptions,
  replySequence,
  startReceiver,
  verifySignature,
} from '../../src/devnet/receiver.js';
import { EventSchema } from '../../src/events/event.js';
import { dbEngines, emptyDb, migratedDb, type TestDb } from '../helpers/db.js';
import {
  attemptsOf,
  FROM_ADDRESS,
  insertAccount,
  insertEvents,
  insertWebhookWatch,
  notification,
  statusCounts,
  TO_ADDRESS,
  USDT_CONTRACT,
} from '../helpers/outbox.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-delivery-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Resources opened by a test, closed after it in reverse order (workers before receivers). */
const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

const box = new SecretBox([randomBytes(32)]);
/** The secret of the watches made by `setup` (unless a test asks for a fresh one). */
const SECRET = newWebhookSecret();

/** A receiver (verifying SECRET unless told otherwise), and the CA file that makes the worker trust it. */
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
      scheduleScale: 1,
      concurrency: 8,
      pollMs: 10,
      allowCidrs: ['127.0.0.1/32'],
      caFile: undefined,
      ...over,
    },
  };
}

/** Start a worker; it is stopped after the test. */
function startWorker(
  db: Db,
  over: Partial<Config['delivery']>,
  extra: { workerId?: string; leaseMarginMs?: number } = {},
): { worker: DeliveryWorker; done: Promise<void> } {
  const worker = new DeliveryWorker({
    db,
    secrets: box,
    config: deliveryConfig(over),
    logger: silentLogger,
    ...extra,
  });
  const ac = new AbortController();
  const done = worker.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
  return { worker, done };
}

/** Wait (without asserting time) until the notification reaches `status`. */
async function until(db: Db, id: string, status: string, timeout = 30_000) {
  return vi.waitFor(
    async () => {
      const n = await notification(db, id);
      if (n.status !== status) throw new Error(`still ${n.status} after ${n.attempts} attempts`);
      return n;
    },
    { timeout, interval: 10 },
  );
}

/** An attempts row with the columns of migrations 006 and 008. */
interface FullAttemptRow {
  attempt: number;
  started_at: Date;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  lease_expired_at: Date | null;
  duplicate: boolean;
}

/** The attempts of a notification, by number (then recording order). */
/**
 * What a worker does before sending (claim.ts startClaims), for claims a test then lets die
 * mid-attempt: marks them started and returns, per notification id, the start mark and the lease's
 * expiry as the database wrote them (the lost attempt's started_at and lease_expired_at), and the
 * time between them in whole ms, rounded from the database's µs (the lost attempt's duration_ms).
 */
async function startAll(
  db: Db,
  claims: ClaimedNotification[],
): Promise<Map<string, { startedAt: Date; expiresAt: Date; durationMs: number }>> {
  const held = await startClaims(db, claims);
  expect([...held].sort()).toEqual(claims.map((c) => c.notificationId).sort());
  const { rows } = await db.query<{
    id: string;
    attempt_started_at: Date;
    next_attempt_at: Date;
    duration_ms: number;
  }>(
    `SELECT id, attempt_started_at, next_attempt_at,
            GREATEST(0, round(extract(epoch FROM next_attempt_at - attempt_started_at) * 1000))::int4
              AS duration_ms
       FROM notifications WHERE id = ANY($1::text[])`,
    [claims.map((c) => c.notificationId)],
  );
  return new Map(
    rows.map((r) => [
      r.id,
      { startedAt: r.attempt_started_at, expiresAt: r.next_attempt_at, durationMs: r.duration_ms },
    ]),
  );
}

async function attemptRows(db: Db, notificationId: string): Promise<FullAttemptRow[]> {
  const { rows } = await db.query<FullAttemptRow>(
    `SELECT attempt, started_at, duration_ms, http_status, error, lease_expired_at, duplicate
       FROM attempts WHERE notification_id = $1 ORDER BY attempt, id`,
    [notificationId],
  );
  return rows;
}

describe('schedule (SPEC §Events: immediate, then 1m, 5m, 30m, 2h, 6h; 6 attempts)', () => {
  it('is the contract curve at scale 1 and dead after the sixth failure', () => {
    expect(RETRY_DELAYS_MS).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 21_600_000]);
    expect(MAX_ATTEMPTS).toBe(6);
    expect([1, 2, 3, 4, 5, 6].map((n) => nextDelayMs(n, 1))).toEqual([
      60_000,
      300_000,
      1_800_000,
      7_200_000,
      21_600_000,
      null,
    ]);
    expect(nextDelayMs(1, 0.0002)).toBe(12);
    expect(nextDelayMs(5, 0.0002)).toBe(4_320);
    expect(nextDelayMs(6, 0.0002)).toBeNull();
    expect(() => nextDelayMs(0, 1)).toThrow(RangeError);
    expect(() => nextDelayMs(1, 0)).toThrow(RangeError);
  });
});

describe('receiver reference logic (SPEC §Webhook signature)', () => {
  it('verifies lowercase hex HMAC-SHA256 over the exact bytes, nothing else', () => {
    const secret = 'whsec_dGVzdA==';
    const body = Buffer.from('{"a":1}');
    const sig = createHmac('sha256', secret).update(body).digest('hex');
    expect(verifySignature(secret, body, sig)).toBe(true);
    expect(verifySignature(secret, Buffer.from('{"a": 1}'), sig)).toBe(false);
    expect(verifySignature('whsec_other', body, sig)).toBe(false);
    expect(verifySignature(secret, body, sig.toUpperCase())).toBe(false);
    expect(verifySignature(secret, body, sig.slice(2))).toBe(false);
    expect(verifySignature(secret, body, undefined)).toBe(false);
  });
});

describe('address guard at connect time (DESIGN invariant 7: resolve, check, pin)', () => {
  it('refuses a host name that resolves to a non-public address', async () => {
    const lookup = guardedLookup([]);
    const err = await new Promise<unknown>((resolve) =>
      lookup('localhost', { all: true }, (e) => resolve(e)),
    );
    expect(err).toBeInstanceOf(AddressRefusedError);
    expect(String(err)).toMatch(/localhost resolves to address .* non-public range \(loopback\)/);
  });
});

describe.each(dbEngines)('webhook delivery on %s', (engine) => {
  let t: TestDb;
  afterEach(async () => {
    // Cleanups (workers, receivers) first, then the database.
    while (cleanups.length > 0) await cleanups.pop()?.();
    await t?.drop();
  });

  /** A fresh database with an account and a webhook watch to `r` (secret SECRET, or a new one). */
  async function setup(r: Receiver, opts: { freshSecret?: boolean } = {}) {
    t = await migratedDb(engine);
    const accountId = await insertAccount(t.db);
    const secret = opts.freshSecret ? undefined : SECRET;
    const watch = await insertWebhookWatch(t.db, box, { accountId, url: r.url, secret });
    return { db: t.db, accountId, ...watch };
  }

  it('delivers a signed event: byte-exact HMAC, SPEC Event body, X-Event-Id', async () => {
    const secrets = new Map<string, string>();
    const r = await receiver({ secretFor: () => secrets.get('only') });
    // The secret is the one "returned at creation" (a new one, not SECRET).
    const { db, accountId, watchId, secret } = await setup(r, { freshSecret: true });
    expect(secret).not.toBe(SECRET);
    secrets.set('only', secret);
    const [ev] = await insertEvents(db, { accountId, watchId });
    startWorker(db, { caFile: r.caFile });

    const n = await until(db, ev!.notificationId, 'DELIVERED');
    expect(n).toMatchObject({ attempts: 1, last_status: 200, last_error: null, lease_token: null });
    expect(n.delivered_at).toBeInstanceOf(Date);

    expect(r.received).toHaveLength(1);
    const req = r.received[0]!;
    // The receiver recomputes the HMAC over the exact bytes it received, keyed by the secret.
    const expected = createHmac('sha256', secret).update(req.body).digest('hex');
    expect(req.headers['x-signature']).toBe(expected);
    expect(req.headers['x-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(req.verified).toBe(true);
    expect(req.method).toBe('POST');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['x-event-id']).toBe(ev!.eventId);
    expect(req.headers['user-agent']).toMatch(/^tronwatch\/\d+\.\d+\.\d+/);
    // Standard Webhooks headers, verified by the reference library on the same bytes.
    expect(req.headers['webhook-id']).toBe(ev!.eventId);
    expect(req.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    const verified = new StandardWebhook(secret).verify(req.body.toString('utf8'), {
      'webhook-id': String(req.headers['webhook-id']),
      'webhook-timestamp': String(req.headers['webhook-timestamp']),
      'webhook-signature': String(req.headers['webhook-signature']),
    });
    expect(verified).toEqual(JSON.parse(req.body.toString('utf8')));

    const body = JSON.parse(req.body.toString('utf8')) as Record<string, unknown>;
    // The body carries every member of the one Event schema, in its order (SPEC order: the
    // OpenAPI test holds the schema to SPEC's list).
    // `metadata` is there only when the watch has some (issue 30): this one has none.
    expect(Object.keys(body)).toEqual(
      Object.keys(EventSchema.properties).filter((k) => k !== 'metadata'),
    );
    expect(body).toEqual({
      api_version: '2026-08',
      event_id: ev!.eventId,
      type: 'transfer.confirmed',
      direction: 'incoming',
      network: 'mainnet',
      livemode: true,
      asset: 'USDT',
      tx_id: ev!.txId,
      event_index: ev!.eventIndex,
      block_number: ev!.blockNumber,
      block_timestamp: '2026-01-15T12:30:45.123Z',
      from: FROM_ADDRESS,
      to: TO_ADDRESS,
      amount_raw: '1500000',
      amount: '1.5',
      watch_id: watchId,
      contract: USDT_CONTRACT,
      // Written by hand, not by the ingester: the column's default, the level that claims nothing.
      proof: 'provider',
    });

    const attempts = await attemptsOf(db, ev!.notificationId);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({ attempt: 1, http_status: 200, error: null });
    expect(attempts[0]!.duration_ms).toBeGreaterThanOrEqual(0);
  });

  it('follows the whole schedule (compressed): 6 failed attempts, then DEAD', async () => {
    const scale = 0.0002; // 1 m → 12 ms … 6 h → 4.32 s
    const statuses = [500, 503, 502, 429, 404, 500];
    const r = await receiver({ respond: replySequence(statuses) });
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });
    startWorker(db, { caFile: r.caFile, scheduleScale: scale });

    const n = await until(db, ev!.notificationId, 'DEAD');
    expect(n).toMatchObject({
      attempts: 6,
      last_status: 500,
      delivered_at: null,
      lease_token: null,
    });
    expect(n.last_error).toMatch(/HTTP 500/);

    const attempts = await attemptsOf(db, ev!.notificationId);
    expect(attempts.map((a) => a.attempt)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(attempts.map((a) => a.http_status)).toEqual(statuses);
    for (const a of attempts) expect(a.error).toMatch(/^HTTP \d{3}: not a 2xx answer$/);
    // Each retry comes no earlier than its scaled delay after the previous attempt started
    // (the delay runs from the failure, which is later still), and in the schedule's order.
    for (let k = 1; k < attempts.length; k++) {
      const gap = attempts[k]!.started_at.getTime() - attempts[k - 1]!.started_at.getTime();
      expect(gap).toBeGreaterThanOrEqual(nextDelayMs(k, scale)!);
    }
    expect(r.countsByEvent.get(ev!.eventId)).toBe(6);
    // Dead is final: nothing claims it again.
    expect(await claimNotifications(db, { limit: 10, leaseMs: 1_000, owner: 'probe' })).toEqual([]);
  });

  it('recovers: fail, fail, 200 → DELIVERED after 3 attempts', async () => {
    const r = await receiver({ respond: replySequence([500, 503, 200]) });
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });
    const { worker } = startWorker(db, { caFile: r.caFile, scheduleScale: 0.0002 });

    const n = await until(db, ev!.notificationId, 'DELIVERED');
    expect(n).toMatchObject({ attempts: 3, last_status: 200, last_error: null });
    const attempts = await attemptsOf(db, ev!.notificationId);
    expect(attempts.map((a) => [a.attempt, a.http_status])).toEqual([
      [1, 500],
      [2, 503],
      [3, 200],
    ]);
    expect(attempts[2]!.error).toBeNull();
    await vi.waitFor(() => expect(worker.delivered).toBe(1));
    expect(worker.failed).toBe(2);
  });

  it('does not follow a redirect: 3xx is a failed attempt, the Location sees nothing', async () => {
    const r: Receiver & { caFile: string } = await receiver({
      respond: (req) =>
        req.path === '/hook'
          ? { status: 302, headers: { location: `${r.origin}/elsewhere` } }
          : { status: 200 },
    });
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });
    const before = Date.now();
    startWorker(db, { caFile: r.caFile }); // scale 1: the retry is a minute away

    await vi.waitFor(async () => expect(await attemptsOf(db, ev!.notificationId)).toHaveLength(1), {
      timeout: 30_000,
      interval: 10,
    });
    const [a] = await attemptsOf(db, ev!.notificationId);
    expect(a).toMatchObject({ attempt: 1, http_status: 302 });
    expect(a!.error).toMatch(/redirect not followed/);
    const n = await notification(db, ev!.notificationId);
    expect(n).toMatchObject({ status: 'PENDING', attempts: 1, last_status: 302 });
    expect(n.next_attempt_at.getTime()).toBeGreaterThanOrEqual(before + 60_000);
    expect(r.received.map((q) => q.path)).toEqual(['/hook']);
  });

  it('times out: no answer within timeoutMs is a failed attempt with an error', async () => {
    const r = await receiver({ respond: () => ({ status: 200, delayMs: 5_000 }) });
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });
    startWorker(db, { caFile: r.caFile, timeoutMs: 300 });

    await vi.waitFor(async () => expect(await attemptsOf(db, ev!.notificationId)).toHaveLength(1), {
      timeout: 30_000,
      interval: 10,
    });
    const [a] = await attemptsOf(db, ev!.notificationId);
    expect(a!.http_status).toBeNull();
    expect(a!.error).toBe('timeout: no complete answer within 300 ms');
    expect(a!.duration_ms).toBeGreaterThanOrEqual(299);
    const n = await notification(db, ev!.notificationId);
    expect(n).toMatchObject({ status: 'PENDING', attempts: 1, last_status: null });
    expect(r.received).toHaveLength(1); // it was sent; the answer came too late
  });

  it('a worker that dies holding a lease loses it: it counts, another delivers exactly once', async () => {
    const r = await receiver({});
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });

    // "Worker A" claims with a short lease, starts the attempt, then dies: the result is dropped.
    const leaseMs = 500;
    const claimedAt = Date.now();
    const [held] = await claimNotifications(db, { limit: 10, leaseMs, owner: 'dead' });
    expect(held?.notificationId).toBe(ev!.notificationId);
    expect(held?.leaseToken).toMatch(/^dead:/);
    const mark = (await startAll(db, [held!])).get(held!.notificationId)!;
    // While the lease holds, nobody else can claim it.
    expect(await claimNotifications(db, { limit: 10, leaseMs, owner: 'probe' })).toEqual([]);

    // B finds A's lease run out: A's attempt is lost (attempt 1, failed), B's is attempt 2, on
    // the schedule after it (compressed: 1 m → 12 ms).
    const scale = 0.0002;
    const { worker } = startWorker(
      db,
      { caFile: r.caFile, scheduleScale: scale },
      { workerId: 'b' },
    );
    const n = await until(db, ev!.notificationId, 'DELIVERED');
    expect(n.attempts).toBe(2);
    const attempts = await attemptRows(db, ev!.notificationId);
    expect(attempts.map((a) => [a.attempt, a.http_status, a.error])).toEqual([
      [1, null, WORKER_LOST_ERROR],
      [2, 200, null],
    ]);
    const [lost, delivered] = attempts as [FullAttemptRow, FullAttemptRow];
    // Started when A marked it, lost when its lease ran out.
    expect(lost.started_at).toEqual(mark.startedAt);
    expect(lost.lease_expired_at).toEqual(mark.expiresAt);
    expect(lost.duration_ms).toBe(mark.durationMs);
    expect(lost.duration_ms).toBeLessThanOrEqual(leaseMs);
    expect(delivered.started_at.getTime()).toBeGreaterThanOrEqual(claimedAt + leaseMs - 1);
    expect(delivered.started_at.getTime()).toBeGreaterThanOrEqual(
      lost.lease_expired_at!.getTime() + nextDelayMs(1, scale)!,
    );
    expect(r.countsByEvent.get(ev!.eventId)).toBe(1);
    expect(r.received[0]?.verified).toBe(true);
    expect(worker.delivered).toBe(1);
    expect(worker.lost).toBe(1);

    // A's late completion, with its old token, fills in its attempt's row but moves nothing.
    const late = await completeAttempts(
      db,
      [
        {
          notificationId: held!.notificationId,
          leaseToken: held!.leaseToken,
          attemptsBefore: held!.attempts,
          result: {
            ok: false,
            status: 500,
            error: 'HTTP 500',
            durationMs: 3,
            startedAt: new Date(),
          },
        },
      ],
      1,
    );
    expect(late).toMatchObject({ recorded: 1, stale: 1, delivered: 0, retried: 0, dead: 0 });
    expect(await notification(db, ev!.notificationId)).toMatchObject({
      status: 'DELIVERED',
      attempts: 2,
      last_status: 200,
    });
    const after = await attemptRows(db, ev!.notificationId);
    expect(after.map((a) => [a.attempt, a.http_status, a.error, a.duration_ms])).toEqual([
      [1, 500, 'HTTP 500', 3],
      [2, 200, null, delivered.duration_ms],
    ]);
    expect(after[0]!.lease_expired_at).toEqual(lost.lease_expired_at);
  });

  /**
   * One notification claimed by worker a with a 100 ms lease, then, once that lease has run out,
   * by worker b: a's claim is stale. The first claim after the expiry records a's attempt as lost
   * (attempt 1) and reschedules it (compressed: 1 m → 12 ms); b's claim is attempt 2.
   */
  async function claimedTwice() {
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: 'https://receiver.example/hook',
    });
    const [ev] = await insertEvents(db, { accountId, watchId });
    const [a] = await claimNotifications(db, { limit: 1, leaseMs: 100, owner: 'a' });
    await startAll(db, [a!]);
    const [b] = await vi.waitFor(
      async () => {
        const got = await claimNotifications(db, {
          limit: 1,
          leaseMs: 60_000,
          owner: 'b',
          scheduleScale: 0.0002,
        });
        if (got.length === 0) throw new Error('lease of a not expired yet');
        return got;
      },
      { timeout: 10_000, interval: 20 },
    );
    expect(b!.leaseToken).not.toBe(a!.leaseToken);
    return { db, ev: ev!, a: a!, b: b! };
  }

  it('a stale completion does not move a notification re-claimed by another worker', async () => {
    const { db, ev, a, b } = await claimedTwice();
    const failure = (attemptsBefore: number, leaseToken: string) => ({
      notificationId: ev.notificationId,
      leaseToken,
      attemptsBefore,
      result: { ok: false, status: 503, error: 'HTTP 503', durationMs: 1, startedAt: new Date() },
    });
    expect([a.attempts, b.attempts]).toEqual([0, 1]);
    // a's outcome arrives after b's claim: recorded (in its lost attempt's row), not applied.
    const late = await completeAttempts(db, [failure(a.attempts, a.leaseToken)], 1);
    expect(late).toMatchObject({ recorded: 1, stale: 1 });
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'PENDING',
      attempts: 1,
      lease_token: b.leaseToken,
      last_status: null,
      last_error: WORKER_LOST_ERROR,
    });
    // b's outcome applies: second failure, rescheduled by the schedule (+5 m).
    const moved = await completeAttempts(db, [failure(b.attempts, b.leaseToken)], 1);
    expect(moved).toMatchObject({ recorded: 1, retried: 1, stale: 0 });
    const n = await notification(db, ev.notificationId);
    expect(n).toMatchObject({
      status: 'PENDING',
      attempts: 2,
      lease_token: null,
      last_status: 503,
    });
    expect(n.next_attempt_at.getTime()).toBeGreaterThan(Date.now() + 50_000);
    expect(await attemptsOf(db, ev.notificationId)).toHaveLength(2);
    expect(
      (await attemptRows(db, ev.notificationId)).map((r) => [
        r.attempt,
        r.http_status,
        r.duplicate,
      ]),
    ).toEqual([
      [1, 503, false],
      [2, 503, false],
    ]);
  });

  it('a stale 2xx still marks the notification DELIVERED: the receiver has it', async () => {
    const { db, ev, a, b } = await claimedTwice();
    const outcome = (attemptsBefore: number, leaseToken: string, ok: boolean) => ({
      notificationId: ev.notificationId,
      leaseToken,
      attemptsBefore,
      result: ok
        ? { ok: true, status: 200, durationMs: 1, startedAt: new Date() }
        : { ok: false, status: 503, error: 'HTTP 503', durationMs: 1, startedAt: new Date() },
    });
    // a's 2xx arrives after b's claim (a was cut off from the database past its lease).
    const late = await completeAttempts(db, [outcome(a.attempts, a.leaseToken, true)], 1);
    expect(late).toMatchObject({ recorded: 1, delivered: 1, stale: 0 });
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'DELIVERED',
      attempts: 1,
      lease_token: null,
      last_status: 200,
    });
    // b's failure then finds it DELIVERED: recorded, not applied (no retry, never DEAD).
    const after = await completeAttempts(db, [outcome(b.attempts, b.leaseToken, false)], 1);
    expect(after).toMatchObject({ recorded: 1, stale: 1, retried: 0 });
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'DELIVERED',
      attempts: 1,
      last_status: 200,
    });
    expect(await attemptsOf(db, ev.notificationId)).toHaveLength(2);
    expect(
      (await attemptsOf(db, ev.notificationId)).map((r) => [r.attempt, r.http_status]),
    ).toEqual([
      [1, 200],
      [2, 503],
    ]);
  });

  it("one row per attempt number: a stale outcome and the newer claim's are attempts 1 and 2", async () => {
    const { db, ev, a, b } = await claimedTwice();
    const outcome = (attemptsBefore: number, leaseToken: string, status: number) => ({
      notificationId: ev.notificationId,
      leaseToken,
      attemptsBefore,
      result:
        status === 200
          ? { ok: true, status, durationMs: 1, startedAt: new Date() }
          : { ok: false, status, error: `HTTP ${status}`, durationMs: 1, startedAt: new Date() },
    });
    // b's 2xx first, then a's stale failure: neither fails, each keeps its own number.
    const batch1 = [outcome(b.attempts, b.leaseToken, 200)];
    const batch2 = [outcome(a.attempts, a.leaseToken, 503)];
    expect(await completeAttempts(db, batch1, 1)).toMatchObject({ recorded: 1, delivered: 1 });
    expect(await completeAttempts(db, batch2, 1)).toMatchObject({ recorded: 1, stale: 1 });
    expect(
      (await attemptsOf(db, ev.notificationId)).map((r) => [r.attempt, r.http_status]),
    ).toEqual([
      [1, 503],
      [2, 200],
    ]);
    // The same batches again (a commit whose answer was lost, retried): nothing added or moved.
    expect(await completeAttempts(db, batch1, 1)).toMatchObject({ recorded: 1, stale: 1 });
    expect(await completeAttempts(db, batch2, 1)).toMatchObject({ recorded: 1, stale: 1 });
    expect(await attemptsOf(db, ev.notificationId)).toHaveLength(2);
    expect(await notification(db, ev.notificationId)).toMatchObject({
      status: 'DELIVERED',
      attempts: 2,
      last_status: 200,
    });
    // The key itself: a second row for (notification, attempt) is refused by the database.
    await expect(
      db.query(
        `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status)
         VALUES ($1, 2, now(), 1, 200)`,
        [ev.notificationId],
      ),
    ).rejects.toMatchObject({ code: '23505' });
  });

  it('migration 006 keeps attempts recorded twice under one number, marked duplicate', async () => {
    t = await emptyDb(engine);
    const db = t.db;
    const upTo5 = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-migrations-'));
    for (const f of fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^00[1-5]\.do\./.test(f)))
      fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(upTo5, f));
    expect((await migrate(db, upTo5)).version).toBe(5);
    fs.rmSync(upTo5, { recursive: true, force: true });
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: 'https://x.example/h',
    });
    const [ev] = await insertEvents(db, { accountId, watchId });
    // What the recorder wrote before: a stale 503 and the newer claim's 200 both as attempt 1.
    await db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error)
       VALUES ($1, 1, now(), 5, 503, 'HTTP 503'), ($1, 1, now(), 6, 200, NULL),
              ($1, 2, now(), 7, 500, 'HTTP 500')`,
      [ev!.notificationId],
    );
    expect((await migrate(db)).applied).toContain(6);
    expect(
      (await attemptRows(db, ev!.notificationId)).map((r) => [
        r.attempt,
        r.duration_ms,
        r.http_status,
        r.duplicate,
      ]),
    ).toEqual([
      [1, 5, 503, false],
      [1, 6, 200, true],
      [2, 7, 500, false],
    ]);
  });

  it('an attempt that kills its worker every time counts: DEAD after six claims, on the schedule', async () => {
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: 'https://x.example/h',
    });
    const [ev] = await insertEvents(db, { accountId, watchId });
    const leaseMs = 40;
    const scale = 0.00005; // 1 m → 3 ms … 6 h → 1.08 s
    const claim = (owner: string) =>
      claimNotifications(db, { limit: 10, leaseMs, owner, scheduleScale: scale });
    // Six workers in turn claim it, start the attempt and die: each claim's result is dropped.
    const marks: Array<{ startedAt: Date; expiresAt: Date; durationMs: number }> = [];
    for (let k = 1; k <= MAX_ATTEMPTS; k++) {
      const [held] = await vi.waitFor(
        async () => {
          const got = await claim(`crash${k}`);
          if (got.length === 0) throw new Error(`attempt ${k} not claimable yet`);
          return got;
        },
        { timeout: 20_000, interval: 5 },
      );
      expect(held!.notificationId).toBe(ev!.notificationId);
      expect(held!.attempts).toBe(k - 1);
      marks.push((await startAll(db, [held!])).get(held!.notificationId)!);
    }
    // The sixth lease runs out: the next claim records it, the sixth failure, and it is DEAD.
    const n = await vi.waitFor(
      async () => {
        expect(await claim('probe')).toEqual([]);
        const got = await notification(db, ev!.notificationId);
        if (got.status !== 'DEAD') throw new Error(`still ${got.status}`);
        return got;
      },
      { timeout: 20_000, interval: 5 },
    );
    expect(n).toMatchObject({
      attempts: MAX_ATTEMPTS,
      lease_token: null,
      last_status: null,
      last_error: WORKER_LOST_ERROR,
      delivered_at: null,
    });
    const rows = await attemptRows(db, ev!.notificationId);
    expect(rows.map((r) => [r.attempt, r.http_status, r.error])).toEqual(
      [1, 2, 3, 4, 5, 6].map((k) => [k, null, WORKER_LOST_ERROR]),
    );
    // Each started when its worker marked it and was lost when its lease ran out; the next
    // claim came no earlier than the schedule's delay after that (the contract's curve,
    // compressed).
    rows.forEach((r, k) => {
      const mark = marks[k]!;
      expect(r.started_at).toEqual(mark.startedAt);
      expect(r.lease_expired_at).toEqual(mark.expiresAt);
      expect(r.duration_ms).toBe(mark.durationMs);
    });
    for (let k = 1; k < rows.length; k++) {
      expect(rows[k]!.started_at.getTime()).toBeGreaterThanOrEqual(
        rows[k - 1]!.lease_expired_at!.getTime() + nextDelayMs(k, scale)!,
      );
    }
    const { rows: claimedAt } = await db.query<{ claimed_at: Date }>(
      'SELECT claimed_at FROM notifications WHERE id = $1',
      [ev!.notificationId],
    );
    expect(rows[5]!.started_at.getTime()).toBeGreaterThanOrEqual(
      claimedAt[0]!.claimed_at.getTime(),
    );
    // Dead is final.
    expect(await claim('after')).toEqual([]);
  });

  it('two claims racing for expired leases record each lost attempt exactly once', async () => {
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: 'https://x.example/h',
    });
    const events = await insertEvents(db, { accountId, watchId, count: 40 });
    let db2: Db = db;
    if (engine === 'postgres') {
      // A second worker process would have its own pool.
      db2 = await openDb({ url: t.url, embeddedDir: '' });
      cleanups.push(() => db2.close());
    }
    const first = await claimNotifications(db, { limit: 40, leaseMs: 50, owner: 'dead' });
    expect(first).toHaveLength(40);
    await startAll(db, first);
    // Every lease has run out (the database's clock decides, as for claims).
    await vi.waitFor(
      async () => {
        const { rows } = await db.query<{ n: number }>(
          'SELECT count(*)::int8 AS n FROM notifications WHERE next_attempt_at > now()',
        );
        expect(rows[0]!.n).toBe(0);
      },
      { timeout: 10_000, interval: 10 },
    );
    // Scale 1: a lost first attempt is due again a minute after its lease ran out.
    const opts = { limit: 40, leaseMs: 60_000, scheduleScale: 1 };
    const results = await Promise.all([
      claimDue(db, { ...opts, owner: 'w1' }),
      claimDue(db2, { ...opts, owner: 'w2' }),
      claimDue(db, { ...opts, owner: 'w3' }),
    ]);
    expect(results.map((r) => r.claimed)).toEqual([[], [], []]);
    expect(results.reduce((sum, r) => sum + r.lost, 0)).toBe(40);
    expect(results.reduce((sum, r) => sum + r.dead, 0)).toBe(0);
    for (const e of events) {
      const rows = await attemptRows(db, e.notificationId);
      expect(rows.map((r) => [r.attempt, r.error])).toEqual([[1, WORKER_LOST_ERROR]]);
      const n = await notification(db, e.notificationId);
      expect(n).toMatchObject({ status: 'PENDING', attempts: 1, lease_token: null });
      expect(n.next_attempt_at.getTime()).toBe(
        rows[0]!.lease_expired_at!.getTime() + nextDelayMs(1, 1)!,
      );
    }
    expect(await claimNotifications(db, { ...opts, owner: 'w4' })).toEqual([]);
  });

  it('a claim lost before its attempt started is claimed again without counting an attempt', async () => {
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: 'https://x.example/h',
    });
    const events = await insertEvents(db, { accountId, watchId, count: 5 });
    // A worker claims five (one in a slot, four queued), starts one, and is killed.
    const held = await claimNotifications(db, { limit: 5, leaseMs: 50, owner: 'killed' });
    expect(held).toHaveLength(5);
    const [sent, ...queued] = held as [ClaimedNotification, ...ClaimedNotification[]];
    await startAll(db, [sent]);
    await vi.waitFor(
      async () => {
        const { rows } = await db.query<{ n: number }>(
          'SELECT count(*)::int8 AS n FROM notifications WHERE next_attempt_at > now()',
        );
        expect(rows[0]!.n).toBe(0);
      },
      { timeout: 10_000, interval: 10 },
    );
    // The next claim: the started one is a lost attempt (attempt 1, due on the schedule); the four
    // queued ones are simply claimed again, as they were: attempts 0, nothing recorded.
    const r = await claimDue(db, { limit: 10, leaseMs: 60_000, owner: 'next', scheduleScale: 1 });
    expect(r).toMatchObject({ lost: 1, dead: 0, reclaimed: 4 });
    expect(r.claimed.map((c) => c.notificationId).sort()).toEqual(
      queued.map((c) => c.notificationId).sort(),
    );
    expect(r.claimed.map((c) => c.attempts)).toEqual([0, 0, 0, 0]);
    expect((await attemptRows(db, sent.notificationId)).map((a) => [a.attempt, a.error])).toEqual([
      [1, WORKER_LOST_ERROR],
    ]);
    expect(await notification(db, sent.notificationId)).toMatchObject({
      status: 'PENDING',
      attempts: 1,
      lease_token: null,
    });
    for (const e of events.filter((e) => e.notificationId !== sent.notificationId)) {
      expect(await attemptRows(db, e.notificationId)).toEqual([]);
      const n = await notification(db, e.notificationId);
      expect(n).toMatchObject({ status: 'PENDING', attempts: 0, last_error: null });
      expect(n.lease_token).toMatch(/^next:/);
    }
    // The killed worker's start mark, had it come late, finds its claims taken over: not sent.
    expect(await startClaims(db, queued)).toEqual(new Set());
    // The new holder marks them.
    expect(await startClaims(db, r.claimed)).toEqual(new Set(queued.map((c) => c.notificationId)));
  });

  it('claims nothing while outcomes wait to be recorded: none re-sent after its lease ran out', async () => {
    const r = await receiver({});
    const { db, accountId, watchId } = await setup(r);
    // Recording attempts fails (a real database refusal) while claims still work.
    await db.query('ALTER TABLE attempts ADD CONSTRAINT tw_test_refuse CHECK (false) NOT VALID');
    const [first] = await insertEvents(db, { accountId, watchId });
    // Lease 1 s + 0.3 s: the 2xx of the first event stays unrecorded longer than that.
    const { worker } = startWorker(
      db,
      { caFile: r.caFile, timeoutMs: 1_000 },
      { leaseMarginMs: 300 },
    );
    await vi.waitFor(() => expect(worker.dbErrors).toBeGreaterThan(0), {
      timeout: 10_000,
      interval: 10,
    });
    expect(r.countsByEvent.get(first!.eventId)).toBe(1);
    const [second] = await insertEvents(db, { accountId, watchId });
    // Three leases: a claim now would take back the first event (and send it again) and the
    // second one.
    await new Promise((resolve) => setTimeout(resolve, 4_000));
    expect(r.countsByEvent.get(first!.eventId)).toBe(1);
    expect(r.countsByEvent.get(second!.eventId)).toBeUndefined();
    expect(await notification(db, first!.notificationId)).toMatchObject({ status: 'PENDING' });

    await db.query('ALTER TABLE attempts DROP CONSTRAINT tw_test_refuse');
    await until(db, first!.notificationId, 'DELIVERED');
    await until(db, second!.notificationId, 'DELIVERED');
    expect(r.countsByEvent.get(first!.eventId)).toBe(1);
    expect(r.countsByEvent.get(second!.eventId)).toBe(1);
    expect(await attemptsOf(db, first!.notificationId)).toHaveLength(1);
  });

  it('start marks that fail: nothing sent unmarked, claims released when too old, then all delivered once', async () => {
    const r = await receiver({});
    const { db, accountId, watchId } = await setup(r);
    // Marking an attempt as started fails (a real database refusal); claims still work.
    await db.query(`CREATE FUNCTION tw_test_refuse_start() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'tw test: start marks refused'; END $$`);
    await db.query(`CREATE TRIGGER tw_test_refuse_start BEFORE UPDATE OF attempt_started_at
                      ON notifications FOR EACH ROW WHEN (NEW.attempt_started_at IS NOT NULL)
                      EXECUTE FUNCTION tw_test_refuse_start()`);
    const events = await insertEvents(db, { accountId, watchId, count: 12 });
    // Lease 1 s + 5 s: a claim queued more than 3.75 s is given back rather than started (the
    // marks' backoffs, 0.25 s doubling, reach that after a few failures); long enough that no
    // lease runs out on a loaded machine once the marks work again.
    const { worker } = startWorker(
      db,
      { caFile: r.caFile, timeoutMs: 1_000, concurrency: 4 },
      { leaseMarginMs: 5_000 },
    );
    // The marks back off (exponentially); claims that waited out a backoff past the age limit
    // are released, not marked and sent late.
    await vi.waitFor(
      () => {
        expect(worker.dbErrors).toBeGreaterThanOrEqual(3);
        expect(worker.released).toBeGreaterThan(0);
      },
      { timeout: 60_000, interval: 10 },
    );
    expect(r.requests).toBe(0);
    // The database accepts marks again: the worker, paused by its last backoff, resumes by itself.
    await db.query('DROP TRIGGER tw_test_refuse_start ON notifications');
    for (const e of events) await until(db, e.notificationId, 'DELIVERED');
    for (const e of events) expect(r.countsByEvent.get(e.eventId)).toBe(1);
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM attempts');
    expect(rows[0]?.n).toBe(12);
  }, 150_000);

  it('two workers share the outbox: 200 notifications, none delivered twice', async () => {
    const r = await receiver({ record: false });
    const { db, accountId, watchId } = await setup(r);
    const events = await insertEvents(db, { accountId, watchId, count: 200 });
    let db2: Db = db;
    if (engine === 'postgres') {
      // A second worker process would have its own pool.
      db2 = await openDb({ url: t.url, embeddedDir: '' });
      cleanups.unshift(() => db2.close()); // closed after the workers stop
    }
    const w1 = startWorker(db, { caFile: r.caFile, concurrency: 8 }, { workerId: 'w1' });
    const w2 = startWorker(db2, { caFile: r.caFile, concurrency: 8 }, { workerId: 'w2' });
    await vi.waitFor(async () => expect(await statusCounts(db)).toEqual({ DELIVERED: 200 }), {
      timeout: 60_000,
      interval: 20,
    });
    for (const e of events) expect(r.countsByEvent.get(e.eventId)).toBe(1);
    expect(r.requests).toBe(200);
    await vi.waitFor(() => expect(w1.worker.delivered + w2.worker.delivered).toBe(200));
    expect(w1.worker.stale + w2.worker.stale).toBe(0);
    const { rows } = await db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM attempts');
    expect(rows[0]?.n).toBe(200);
  });

  it('refuses a private or reserved literal IP at delivery, with no connection at all', async () => {
    const r = await receiver({});
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    // Stored directly (the API would refuse them): the receiver itself on loopback, not admitted
    // by this worker's (empty) allow-list, and a private address.
    const port = new URL(r.url).port;
    const loop = await insertWebhookWatch(db, box, { accountId, url: r.url });
    const priv = await insertWebhookWatch(db, box, {
      accountId,
      url: `https://10.0.0.7:${port}/hook`,
      direction: 'outgoing',
    });
    const [e1] = await insertEvents(db, { accountId, watchId: loop.watchId });
    const [e2] = await insertEvents(db, { accountId, watchId: priv.watchId });
    startWorker(db, { caFile: r.caFile, allowCidrs: [] });

    for (const [ev, reason] of [
      [e1!, 'refused: address 127.0.0.1 is in a non-public range (loopback)'],
      [e2!, 'refused: address 10.0.0.7 is in a non-public range (private)'],
    ] as const) {
      await vi.waitFor(
        async () => expect(await attemptsOf(db, ev.notificationId)).toHaveLength(1),
        { timeout: 30_000, interval: 10 },
      );
      const [a] = await attemptsOf(db, ev.notificationId);
      expect(a).toMatchObject({ attempt: 1, http_status: null, error: reason });
      expect(await notification(db, ev.notificationId)).toMatchObject({
        status: 'PENDING',
        attempts: 1,
        last_error: reason,
      });
    }
    expect(r.connections).toBe(0);
    expect(r.requests).toBe(0);
  });

  it('an undecryptable secret holds the delivery without using an attempt, logged once, and it resumes once the key is configured', async () => {
    const r = await receiver({});
    t = await migratedDb(engine);
    const db = t.db;
    const accountId = await insertAccount(db);
    const missingKey = randomBytes(32);
    const otherBox = new SecretBox([missingKey]);
    const { watchId } = await insertWebhookWatch(db, otherBox, {
      accountId,
      url: r.url,
      secret: SECRET,
    });
    const [ev] = await insertEvents(db, { accountId, watchId });
    const lines: Array<{ msg: string; key_id?: string }> = [];
    const logger = pino({ level: 'warn' }, { write: (l: string) => lines.push(JSON.parse(l)) });
    const metrics = new Metrics({ db, logger: silentLogger });
    const lacking = new DeliveryWorker({
      db,
      secrets: new SecretBox([randomBytes(32)]),
      // Hold for 60 s × 0.001 = 60 ms: claimed and held again and again.
      config: deliveryConfig({ caFile: r.caFile, scheduleScale: 0.001 }),
      logger,
      metrics,
    });
    const ac = new AbortController();
    const done = lacking.start(ac.signal);
    await vi.waitFor(() => expect(lacking.heldForSecrets).toBeGreaterThanOrEqual(3), {
      timeout: 30_000,
      interval: 10,
    });
    const keyId = otherBox.keyIds[0];
    await vi.waitFor(async () =>
      expect((await recentSecretProblems(db)).map((p) => p.key_id)).toEqual([keyId]),
    );
    ac.abort();
    await done;
    // No attempt used, nothing sent, the reason kept on the notification.
    expect(await attemptsOf(db, ev!.notificationId)).toHaveLength(0);
    expect(await notification(db, ev!.notificationId)).toMatchObject({
      status: 'PENDING',
      attempts: 0,
      last_error: expect.stringMatching(/^secret: unknown secret key id [0-9a-f]{16}$/),
    });
    expect(r.connections).toBe(0);
    const held = lines.filter((l) => /cannot be decrypted/.test(l.msg));
    expect(held).toHaveLength(1);
    expect(held[0]?.key_id).toBe(keyId);
    const text = await metrics.registry.metrics();
    const counted = text.match(
      /^tronwatch_secret_decrypt_failures_total\{key_id="([0-9a-f]+)"\} (\d+)$/m,
    );
    expect(counted?.[1]).toBe(keyId);
    expect(Number(counted?.[2])).toBeGreaterThanOrEqual(3);
    // The key configured (as an old, read-only key): delivered as its first attempt, cleared.
    const configured = new DeliveryWorker({
      db,
      secrets: new SecretBox([randomBytes(32), missingKey]),
      config: deliveryConfig({ caFile: r.caFile }),
      logger: silentLogger,
    });
    const ac2 = new AbortController();
    const done2 = configured.start(ac2.signal);
    cleanups.push(async () => {
      ac2.abort();
      await done2;
    });
    await until(db, ev!.notificationId, 'DELIVERED');
    expect(await notification(db, ev!.notificationId)).toMatchObject({ attempts: 1 });
    await vi.waitFor(async () => expect(await recentSecretProblems(db)).toEqual([]));
  });

  it('wake() claims at once instead of waiting for the poll', async () => {
    const r = await receiver({});
    const { db, accountId, watchId } = await setup(r);
    // A poll of 10 minutes: only wake() can make this delivery happen within the test.
    const { worker } = startWorker(db, { caFile: r.caFile, pollMs: 600_000 });
    // Its first claim found nothing; now it sleeps for the poll.
    await vi.waitFor(() => expect(worker.claimRounds).toBeGreaterThanOrEqual(1));
    const [ev] = await insertEvents(db, { accountId, watchId });
    worker.wake();
    await until(db, ev!.notificationId, 'DELIVERED', 20_000);
  });

  it('stop() lets attempts in flight finish and records them', async () => {
    const r = await receiver({ respond: () => ({ status: 200, delayMs: 1_000 }) });
    const { db, accountId, watchId } = await setup(r);
    const [ev] = await insertEvents(db, { accountId, watchId });
    const { worker, done } = startWorker(db, { caFile: r.caFile });
    await vi.waitFor(() => expect(r.requests).toBe(1), { timeout: 30_000, interval: 5 });
    expect(worker.inFlight).toBe(1);
    await worker.stop();
    await done;
    expect(worker.inFlight).toBe(0);
    expect(await notification(db, ev!.notificationId)).toMatchObject({
      status: 'DELIVERED',
      attempts: 1,
    });
    expect(await attemptsOf(db, ev!.notificationId)).toHaveLength(1);
  });

  it('stop() gives back claimed notifications it has not started, due at once', async () => {
    const r = await receiver({ respond: () => ({ status: 200, delayMs: 1_000 }) });
    const { db, accountId, watchId } = await setup(r);
    const events = await insertEvents(db, { accountId, watchId, count: 5 });
    // One slot: one attempt in flight, the others claimed into the queue behind it.
    const { worker, done } = startWorker(db, { caFile: r.caFile, concurrency: 1 });
    await vi.waitFor(() => expect(r.requests).toBe(1), { timeout: 30_000, interval: 5 });
    await vi.waitFor(() => expect(worker.claimed).toBeGreaterThan(1), { interval: 5 });
    expect(worker.inFlight).toBe(1); // the first answer takes a second
    await worker.stop();
    await done;
    const after = await Promise.all(events.map((e) => notification(db, e.notificationId)));
    const delivered = after.filter((n) => n.status === 'DELIVERED');
    const given = after.filter((n) => n.status === 'PENDING');
    expect(delivered).toHaveLength(1);
    expect(worker.released).toBe(worker.claimed - 1);
    for (const n of given) {
      expect(n).toMatchObject({ attempts: 0, lease_token: null });
      expect(n.next_attempt_at.getTime()).toBeLessThanOrEqual(Date.now());
    }
    // Another worker takes them at once.
    const [again] = await claimNotifications(db, { limit: 10, leaseMs: 1_000, owner: 'next' });
    expect(again).toBeDefined();
  });

  it.runIf(engine === 'postgres')(
    'a start mark slower than the age limit: the claims are given back, not sent late, then delivered once',
    async () => {
      // PostgreSQL only: the stall is another session holding a lock the mark must wait for
      // (PGlite has one connection; a stall there stalls everything alike).
      const r = await receiver({});
      const { db, accountId, watchId } = await setup(r);
      await db.query(`CREATE FUNCTION tw_test_slow_start() RETURNS trigger LANGUAGE plpgsql AS $$
                      BEGIN PERFORM pg_advisory_xact_lock(4242); RETURN NEW; END $$`);
      await db.query(`CREATE TRIGGER tw_test_slow_start BEFORE UPDATE OF attempt_started_at
                        ON notifications FOR EACH ROW WHEN (NEW.attempt_started_at IS NOT NULL)
                        EXECUTE FUNCTION tw_test_slow_start()`);
      const stall = new pg.Client({ connectionString: t.url });
      await stall.connect();
      cleanups.push(() => stall.end());
      await stall.query('SELECT pg_advisory_lock(4242)');
      const events = await insertEvents(db, { accountId, watchId, count: 4 });
      // Lease 1 s + 5 s: a claim older than 3.75 s when its mark returns is given back; the mark
      // is held 4.5 s, within the lease, so it does come back with the claims still held.
      const { worker } = startWorker(
        db,
        { caFile: r.caFile, timeoutMs: 1_000, concurrency: 4 },
        { leaseMarginMs: 5_000 },
      );
      await vi.waitFor(async () => {
        const { rows } = await db.query<{ n: string }>(
          'SELECT count(*)::int8 AS n FROM notifications WHERE lease_token IS NOT NULL',
        );
        expect(Number(rows[0]?.n)).toBe(4);
      });
      await new Promise((resolve) => setTimeout(resolve, 4_500));
      await stall.query('SELECT pg_advisory_unlock(4242)');
      await vi.waitFor(() => expect(worker.released).toBeGreaterThanOrEqual(4), {
        timeout: 20_000,
        interval: 10,
      });
      // Given back unattempted: claimed again, marked at once now, delivered once each.
      for (const e of events) await until(db, e.notificationId, 'DELIVERED');
      for (const e of events) expect(r.countsByEvent.get(e.eventId)).toBe(1);
      const { rows } = await db.query<{ n: number; lost: number }>(
        `SELECT count(*)::int8 AS n, count(*) FILTER (WHERE lease_expired_at IS NOT NULL)::int8 AS lost
           FROM attempts`,
      );
      expect(rows[0]).toEqual({ n: 4, lost: 0 });
    },
    60_000,
  );

  it.runIf(engine === 'postgres')(
    'survives the database going away: claims fail, the loop backs off and resumes',
    async () => {
      const r = await receiver({});
      const { db, accountId, watchId } = await setup(r);
      const [first] = await insertEvents(db, { accountId, watchId });
      const { worker } = startWorker(db, { caFile: r.caFile });
      await until(db, first!.notificationId, 'DELIVERED');

      // Refuse new connections and cut the existing ones, as a restart would.
      const name = new URL(t.url!).pathname.slice(1);
      const admin = new pg.Client({ connectionString: process.env.DATABASE_URL });
      await admin.connect();
      try {
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS false`);
        await admin.query(
          'SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1',
          [name],
        );
        await vi.waitFor(() => expect(worker.dbErrors).toBeGreaterThan(0), {
          timeout: 20_000,
          interval: 20,
        });
        await admin.query(`ALTER DATABASE ${name} ALLOW_CONNECTIONS true`);
      } finally {
        await admin.end();
      }
      const [second] = await insertEvents(db, { accountId, watchId });
      worker.wake();
      await until(db, second!.notificationId, 'DELIVERED', 40_000);
      expect(r.countsByEvent.get(second!.eventId)).toBe(1);
    },
  );
});
