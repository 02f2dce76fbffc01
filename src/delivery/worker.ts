/**
 * The webhook delivery worker: claim → decrypt → sign → send → record → reschedule (DESIGN data
 * flow; SPEC §Events "Delivery to a webhook_url", §States "Delivery status").
 *
 * One loop per worker, up to `concurrency` attempts in flight (config.delivery.concurrency,
 * default 64):
 * - Claim (claim.ts) only free slots, so every claimed notification starts at once and its lease
 *   (webhook timeout + 20 s) covers it. To keep claims batched under load, the loop claims when
 *   at least a quarter of the slots are free, or when none is in flight.
 * - A claim that returns fewer rows than asked means nothing more is due: the loop sleeps
 *   `pollMs` (config.delivery.pollMs, default 250) or until `wake()` (ingest calls it after
 *   committing notifications), whichever is first.
 * - Outcomes are recorded in batches (complete.ts), group-commit style: one transaction in flight;
 *   outcomes that finish meanwhile wait for the next one. The attempt row is written in the same
 *   transaction as, and before, the state move (invariant 3).
 * - A database error never ends the loop: it is logged, the loop backs off (exponential, full
 *   jitter, up to 10 s) and tries again; outcomes not yet recorded are kept and retried, so a
 *   PostgreSQL restart costs a pause, not attempts (DESIGN "Postgres unreachable").
 * - An undecryptable secret (unknown key id, tampered ciphertext) is a failed attempt with that
 *   reason, never a crash.
 *
 * Stopping (`stop()` or the start signal aborting): no new claims; attempts in flight finish
 * within their deadline (config.delivery.timeoutMs) and are recorded; then `start` resolves. If
 * the database stays unreachable, recording is retried until the lease margin has passed, then
 * given up (logged): the leases expire and another worker retries (at-least-once).
 *
 * Counters on the instance (`delivered`, `failed`, `dead`, …) count committed outcomes; metrics
 * come later.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../common/logger.js';
import { backoffDelay, sleep } from '../common/retry.js';
import type { SecretBox } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { type ClaimedNotification, claimNotifications, LEASE_MARGIN_MS, leaseMs } from './claim.js';
import { type Completion, completeAttempts } from './complete.js';
import { type AttemptResult, failedAttempt, WebhookSender } from './send.js';

export interface DeliveryWorkerOptions {
  db: Db;
  /** Decrypts the watches' webhook secrets (the keyring of config.secrets). */
  secrets: SecretBox;
  /** config.delivery is read: timeoutMs, scheduleScale, concurrency, pollMs, allowCidrs, caFile. */
  config: Pick<Config, 'delivery'>;
  logger: Logger;
  /** Prefix of this worker's lease tokens and its log field `worker_id`. Default: pid-random. */
  workerId?: string;
  /** Lease = timeoutMs + this, ms. Default LEASE_MARGIN_MS (20 s). */
  leaseMarginMs?: number;
  /** Most notifications per claim. Default: config.delivery.concurrency. */
  claimBatch?: number;
}

/** Outcomes per completion transaction, at most (bounds statement size and lock time). */
const MAX_COMPLETE_BATCH = 1_000;

export class DeliveryWorker {
  readonly workerId: string;
  /** Notifications moved to DELIVERED by this worker (committed). */
  delivered = 0;
  /** Failed attempts recorded (rescheduled or dead). */
  failed = 0;
  /** Notifications moved to DEAD by this worker (their sixth failure). */
  dead = 0;
  /** Attempts recorded whose lease had been taken over (state not moved). */
  stale = 0;
  /** Attempt rows recorded. */
  attempts = 0;
  /** Notifications claimed. */
  claimed = 0;
  /** Claim statements that succeeded (empty ones included). */
  claimRounds = 0;
  /** Database errors survived (claims and completions). */
  dbErrors = 0;

  private readonly db: Db;
  private readonly secrets: SecretBox;
  private readonly delivery: Config['delivery'];
  private readonly logger: Logger;
  private readonly sender: WebhookSender;
  private readonly leaseMs: number;
  private readonly leaseMarginMs: number;
  private readonly claimBatch: number;
  /** Claim when at least this many slots are free (or nothing is in flight). */
  private readonly claimThreshold: number;

  private inflight = 0;
  private readonly idle = new Set<() => void>();
  private pending: Completion[] = [];
  private flushing: Promise<void> | null = null;
  /** Set when stopping: the time after which unrecorded outcomes are abandoned (ms epoch). */
  private giveUpAt: number | null = null;
  private woken = false;
  private waiting: 'slots' | 'poll' | null = null;
  private nudge: (() => void) | null = null;
  private stopping = false;
  private running: Promise<void> | null = null;

  /** @throws Error when config.delivery.caFile cannot be read. */
  constructor(opts: DeliveryWorkerOptions) {
    this.db = opts.db;
    this.secrets = opts.secrets;
    this.delivery = opts.config.delivery;
    this.workerId = opts.workerId ?? `${process.pid}-${randomBytes(3).toString('hex')}`;
    this.logger = opts.logger.child({ worker_id: this.workerId });
    this.leaseMarginMs = opts.leaseMarginMs ?? LEASE_MARGIN_MS;
    this.leaseMs = leaseMs(this.delivery.timeoutMs, this.leaseMarginMs);
    const concurrency = Math.max(1, this.delivery.concurrency);
    this.claimBatch = Math.max(1, opts.claimBatch ?? concurrency);
    this.claimThreshold = Math.max(1, Math.ceil(concurrency / 4));
    this.sender = new WebhookSender({
      timeoutMs: this.delivery.timeoutMs,
      allowCidrs: this.delivery.allowCidrs,
      caFile: this.delivery.caFile,
      connections: concurrency,
    });
  }

  /**
   * Run the loop until `signal` aborts or `stop()` is called; resolves once stopped (in-flight
   * attempts finished and recorded, connections closed). Never rejects on database errors.
   * @throws Error when called twice.
   */
  start(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error('DeliveryWorker already started');
    const onAbort = () => {
      this.stopping = true;
      this.poke();
    };
    if (signal.aborted) this.stopping = true;
    signal.addEventListener('abort', onAbort, { once: true });
    this.running = this.loop().finally(() => signal.removeEventListener('abort', onAbort));
    return this.running;
  }

  /** Claim now instead of at the next poll (ingest calls this after committing notifications). */
  wake(): void {
    this.woken = true;
    this.poke();
  }

  /** Stop claiming, finish and record in-flight attempts, close connections. Idempotent. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.poke();
    if (this.running) await this.running;
    else await this.sender.close();
  }

  /** Attempts in flight now. */
  get inFlight(): number {
    return this.inflight;
  }

  private poke(): void {
    this.nudge?.();
  }

  /** Wait for a nudge (wake, stop, or — when waiting for slots — a freed slot) or `ms`. */
  private wait(reason: 'slots' | 'poll', ms: number): Promise<void> {
    if (this.stopping) return Promise.resolve();
    if (reason === 'poll' && this.woken) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.nudge === done) {
          this.nudge = null;
          this.waiting = null;
        }
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiting = reason;
      this.nudge = done;
    });
  }

  private async loop(): Promise<void> {
    const concurrency = Math.max(1, this.delivery.concurrency);
    let claimErrors = 0;
    this.logger.info(
      { concurrency, lease_ms: this.leaseMs, poll_ms: this.delivery.pollMs },
      'delivery worker started',
    );
    while (!this.stopping) {
      const free = concurrency - this.inflight;
      if (free < this.claimThreshold && this.inflight > 0) {
        await this.wait('slots', this.delivery.pollMs);
        continue;
      }
      this.woken = false;
      const limit = Math.min(free, this.claimBatch);
      let batch: ClaimedNotification[];
      try {
        batch = await claimNotifications(this.db, {
          limit,
          leaseMs: this.leaseMs,
          owner: this.workerId,
        });
        claimErrors = 0;
      } catch (err) {
        claimErrors++;
        this.dbErrors++;
        const delay = backoffDelay(claimErrors, { baseMs: 250, capMs: 10_000 });
        this.logger.warn(
          { err: errorText(err), retry_in_ms: delay, consecutive: claimErrors },
          'claim failed; retrying',
        );
        await this.wait('poll', delay);
        continue;
      }
      this.claimRounds++;
      this.claimed += batch.length;
      for (const c of batch) this.launch(c);
      // Fewer than asked: nothing more is due now. Sleep until the poll or a wake().
      if (batch.length < limit) await this.wait('poll', this.delivery.pollMs);
    }
    await this.drain();
    await this.sender.close();
    this.logger.info(
      { delivered: this.delivered, failed: this.failed, dead: this.dead, stale: this.stale },
      'delivery worker stopped',
    );
  }

  /** Start one attempt in a free slot; its outcome joins the next completion batch. */
  private launch(c: ClaimedNotification): void {
    this.inflight++;
    void this.attempt(c).then((result) => {
      this.inflight--;
      this.pending.push({
        notificationId: c.notificationId,
        leaseToken: c.leaseToken,
        attemptsBefore: c.attempts,
        result,
      });
      this.logger.debug(
        {
          notification_id: c.notificationId,
          event_id: c.event.id,
          attempt: c.attempts + 1,
          http_status: result.status,
          duration_ms: result.durationMs,
          error: result.error,
        },
        result.ok ? 'webhook delivered' : 'webhook attempt failed',
      );
      this.scheduleFlush();
      if (this.waiting === 'slots') this.poke();
      if (this.inflight === 0) for (const f of this.idle) f();
    });
  }

  /** One attempt; never throws (every failure is an AttemptResult). */
  private async attempt(c: ClaimedNotification): Promise<AttemptResult> {
    const startedAt = new Date();
    const t0 = performance.now();
    if (c.webhookUrl === null || c.secret === null) {
      return failedAttempt('watch has no webhook_url or secret', startedAt, t0);
    }
    let secret: string;
    try {
      secret = this.secrets.decrypt(c.secret);
    } catch (err) {
      return failedAttempt(`secret: ${errorText(err)}`, startedAt, t0);
    }
    try {
      return await this.sender.send(c.webhookUrl, c.event, secret);
    } catch (err) {
      // send() classifies everything; this is a bug guard, not a path.
      return failedAttempt(`internal: ${errorText(err)}`, startedAt, t0);
    }
  }

  /**
   * Record what waits, one transaction at a time, until nothing waits (group commit: outcomes
   * that finish during a transaction go into the next one). A failed transaction keeps its
   * outcomes (they happened) and is retried after a backoff.
   */
  private scheduleFlush(): void {
    if (this.flushing || this.pending.length === 0) return;
    this.flushing = this.flushAll().finally(() => {
      this.flushing = null;
      // Outcomes may have arrived between the last check and now.
      if (this.pending.length > 0 && !this.givenUp()) this.scheduleFlush();
    });
  }

  private async flushAll(): Promise<void> {
    let failures = 0;
    while (this.pending.length > 0 && !this.givenUp()) {
      const batch = this.pending.splice(0, MAX_COMPLETE_BATCH);
      try {
        const o = await completeAttempts(this.db, batch, this.delivery.scheduleScale);
        failures = 0;
        this.attempts += o.recorded;
        this.delivered += o.delivered;
        this.dead += o.dead;
        this.stale += o.stale;
        for (const c of batch) if (!c.result.ok) this.failed++;
        if (o.dead > 0) this.logger.warn({ count: o.dead }, 'notifications dead-lettered');
        if (o.stale > 0) {
          this.logger.warn(
            { count: o.stale },
            'attempts recorded after their lease was taken over',
          );
        }
      } catch (err) {
        this.pending = batch.concat(this.pending);
        failures++;
        this.dbErrors++;
        const delay = backoffDelay(failures, { baseMs: 250, capMs: 10_000 });
        this.logger.warn(
          { err: errorText(err), retry_in_ms: delay, outcomes: batch.length },
          'recording attempts failed; retrying',
        );
        await sleep(delay);
      }
    }
  }

  /** While stopping, recording is retried until the lease margin has passed, then abandoned. */
  private givenUp(): boolean {
    return this.giveUpAt !== null && Date.now() > this.giveUpAt;
  }

  /** After stopping: wait for attempts in flight, then for their outcomes to be recorded. */
  private async drain(): Promise<void> {
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.idle.delete(done);
          resolve();
        };
        this.idle.add(done);
      });
    }
    this.giveUpAt = Date.now() + this.leaseMarginMs;
    this.scheduleFlush();
    while (this.flushing) await this.flushing;
    if (this.pending.length > 0) {
      this.logger.error(
        { outcomes: this.pending.length },
        'stopping without recording some attempts (database unreachable); their leases will expire',
      );
      this.pending = [];
    }
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
