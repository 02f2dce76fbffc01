/**
 * The webhook delivery worker: claim → decrypt → sign → send → record → reschedule (DESIGN data
 * flow; SPEC §Events "Delivery to a webhook_url", §States "Delivery status").
 *
 * Up to `concurrency` attempts in flight (config.delivery.concurrency, default 64), fed from a
 * queue of claimed notifications so that the HTTP slots do not wait for the database:
 * - Claims (claim.ts, one statement each, at most two in flight) top the queue up to a depth of
 *   what the slots start within a quarter of the lease margin at the current pace (between
 *   concurrency / 4 and 2 × concurrency), at least concurrency / 2 rows at a time, so claims stay
 *   batched under load and their round trips are hidden behind queued work.
 * - A claim that returns fewer rows than asked means nothing more is due: claims pause for
 *   `pollMs` (config.delivery.pollMs, default 250) or until `wake()` (ingest calls it after
 *   committing notifications), whichever is first.
 * - Lease: timeout + margin (claim.ts; 10 s + 20 s). The queue depth rule bounds a queued
 *   notification's wait to about a quarter of the margin; one that has waited more than three
 *   quarters of it anyway is released unattempted rather than started late, so every attempt
 *   starts, ends (timeout) and is recorded within its lease (invariant 3).
 * - Starting: a notification leaves the queue for a free slot and is marked as attempted
 *   (claim.ts startClaims, migration 014) before its request is sent, group-commit style like the
 *   outcomes: one statement in flight, slots freed meanwhile go into the next one. Only a marked
 *   claim counts when its lease runs out; a claim the mark finds taken over is not sent.
 * - Outcomes are recorded in batches (complete.ts), group-commit style: one transaction in
 *   flight; outcomes that finish meanwhile go into the next one. The attempt row is written in
 *   the same transaction as, and before, the state move.
 * - A database error never ends the loop: it is logged, the loop backs off (exponential, full
 *   jitter, up to 10 s) and tries again; outcomes not yet recorded are kept and retried, so a
 *   PostgreSQL restart costs a pause, not attempts (DESIGN "Postgres unreachable").
 * - An undecryptable secret (unknown key id, tampered ciphertext) is held back without using an
 *   attempt (decryptable(), issue 14 item 3). A watch without URL is a
 *   failed attempt with that reason, never a crash.
 * - A claim that finds a lease run out unrecorded on a started attempt (a worker died or stalled
 *   mid-attempt) records a lost attempt instead (claim.ts): it counts, so a notification that
 *   kills every worker trying it goes DEAD after six claims. Claims a killed worker held queued
 *   (never started) are simply claimed again.
 *
 * Stopping (`stop()` or the start signal aborting): no new claims and no new attempts (queued
 * notifications are released, due at once for any worker); attempts in flight finish within their
 * deadline (config.delivery.timeoutMs) and are recorded; then `start` resolves. If the database
 * stays unreachable, recording is retried until the lease margin has passed, then given up
 * (logged): the leases expire and another worker retries (at-least-once).
 *
 * Counters on the instance (`delivered`, `failed`, `dead`, …) count committed outcomes; with
 * `metrics`, the same outcomes feed tronwatch_deliveries_total and every attempt's duration
 * tronwatch_delivery_attempt_duration_seconds (src/common/metrics.ts).
 */

import { randomBytes } from 'node:crypto';
import { isLivemode } from '../common/environment.js';
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { backoffDelay, sleep } from '../common/retry.js';
import { type EncryptedSecret, type SecretBox, SecretDecryptError } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { refreshEndpointHealth } from '../endpoints/health.js';
import type { Resolver } from '../net/dns.js';
import { MemoryPacer, type Pacer } from '../telegram/pacing.js';
import { type AlertPolicy, DEFAULT_ALERT_POLICY, refreshWatchHealth } from '../watches/health.js';
import {
  type ClaimedNotification,
  claimDue,
  LEASE_MARGIN_MS,
  leaseMs,
  startClaims,
} from './claim.js';
import {
  type CompleteOutcome,
  type Completion,
  completeAttempts,
  releaseClaims,
} from './complete.js';
import { EndpointPacing, endpointWindows, type GrantedSlot } from './endpoint-pacing.js';
import { clearSecretProblem, holdClaims, recordSecretProblem } from './secret-problems.js';
import { type AttemptResult, failedAttempt, WebhookSender } from './send.js';
import { deferClaims } from './throttle.js';

export interface DeliveryWorkerOptions {
  db: Db;
  /** Decrypts the watches' webhook secrets (the keyring of config.secrets). */
  secrets: SecretBox;
  /**
   * config.delivery is read: timeoutMs, scheduleScale, concurrency, pollMs, allowCidrs, caFile;
   * config.alerts (the alert threshold, window and automatic pause; defaults when absent).
   */
  config: Pick<Config, 'delivery'> & Partial<Pick<Config, 'alerts'>>;
  logger: Logger;
  /** Prefix of this worker's lease tokens and its log field `worker_id`. Default: pid-random. */
  workerId?: string;
  /** Lease = timeoutMs + this, ms. Default LEASE_MARGIN_MS (20 s). */
  leaseMarginMs?: number;
  /** Most notifications per claim statement. Default: config.delivery.concurrency. */
  claimBatch?: number;
  /** Deliveries by outcome and attempt durations (src/common/metrics.ts). Default: none. */
  metrics?: Metrics;
  /**
   * The endpoints' pacing windows (issue 30 item 3; endpoint-pacing.ts): a RedisPacer behind a
   * FallbackPacer to share them with every worker replica (src/service.ts). Default: in process.
   */
  pacer?: Pacer;
  /**
   * Resolves webhook host names at connect time (default: the system resolver). Tests inject a
   * stub (names inside the allow-list, DNS rebinding).
   */
  resolver?: Resolver;
}

/**
 * Claims in flight at once. Two hide a claim's round trip behind the other's when the database
 * is slow to answer (a loaded server): measured in bench/delivery.ts.
 */
const MAX_CLAIMS_IN_FLIGHT = 2;

/**
 * How long a notification for a switched-off endpoint waits in the outbox before it is looked at
 * again, ms (× schedule scale): 60 s, so a re-enabled endpoint gets its backlog within a minute
 * while a long-disabled one costs a claim per notification per minute. Not an attempt.
 */
const DISABLED_ENDPOINT_RECHECK_MS = 60_000;

/** How long a notification whose secret does not decrypt is held back, ms (× schedule scale). */
export const SECRET_HOLD_MS = 60_000;

/** Webhook secrets kept decrypted at most (one per watch with deliveries in progress). */
const SECRETS_REMEMBERED = 10_000;

/** How long a completion waits for more outcomes while attempts are in flight, ms. */
const COMPLETE_GATHER_MS = 10;

/** Outcomes per completion transaction, at most (bounds statement size and lock time). */
const MAX_COMPLETE_BATCH = 1_000;

interface Queued {
  claim: ClaimedNotification;
  /** performance.now() when the claim returned. */
  claimedAt: number;
}

export class DeliveryWorker {
  readonly workerId: string;
  /** Notifications moved to DELIVERED by this worker (committed). */
  delivered = 0;
  /** Failed attempts recorded (rescheduled or dead). */
  failed = 0;
  /** Notifications moved to DEAD by this worker (their sixth failure, lost attempts included). */
  dead = 0;
  /**
   * Lost attempts this worker's claims recorded: due notifications whose lease had run out
   * unrecorded (another worker died or stalled holding them; claim.ts).
   */
  lost = 0;
  /** Attempts recorded whose lease had been taken over (state not moved). */
  stale = 0;
  /** Attempt rows recorded. */
  attempts = 0;
  /** Notifications claimed. */
  claimed = 0;
  /** Claim statements that succeeded (empty ones included). */
  claimRounds = 0;
  /** Completion transactions committed (complete.ts). */
  completeRounds = 0;
  /** Start-mark statements that succeeded (claim.ts startClaims). */
  startRounds = 0;
  /** Claimed notifications given back unattempted (stopping, or queued too long). */
  released = 0;
  /** Claimed notifications put back unattempted for a while (their endpoint is switched off). */
  deferred = 0;
  /** Database errors survived (claims, completions, releases). */
  dbErrors = 0;

  private readonly db: Db;
  private readonly secrets: SecretBox;
  private readonly delivery: Config['delivery'];
  private readonly alerts: AlertPolicy;
  /** Watches whose health is to be refreshed (src/watches/health.ts), and those with a DEAD. */
  private readonly healthDirty = new Set<string>();
  private readonly healthDead = new Set<string>();
  /** The same for endpoints (src/endpoints/health.ts). */
  private readonly endpointDirty = new Set<string>();
  private readonly endpointDead = new Set<string>();
  private healthRunning: Promise<void> | null = null;
  private readonly logger: Logger;
  private readonly metrics: Metrics | undefined;
  private readonly sender: WebhookSender;
  private readonly concurrency: number;
  private readonly leaseMs: number;
  private readonly leaseMarginMs: number;
  private readonly claimBatch: number;
  /** Queue depth bounds: concurrency / 4 … 2 × concurrency (see room()). */
  private readonly maxQueued: number;
  private readonly minQueued: number;
  /**
   * Claim only when at least this many more may be held (half of concurrency): PostgreSQL's CPU
   * per notification falls steeply with the rows per statement (claim + completion measured on
   * the 2-vCPU dev machine: ~0.19 ms at 16 rows, ~0.10 ms at 64), and the queue hides the wait.
   */
  private readonly claimThreshold: number;
  /** A queued notification older than this (ms since its claim; ¾ of the lease margin) is released. */
  private readonly maxQueueWaitMs: number;

  private inflight = 0;
  /** Decrypted secrets by key id and ciphertext (see decrypt). */
  private readonly plaintexts = new Map<string, string>();
  /** Key ids whose secrets failed to decrypt → when last recorded (ms since the epoch). */
  private readonly badKeys = new Map<string, number>();
  /** Key ids whose secrets decrypted in this process (their problem rows were cleared). */
  private readonly goodKeys = new Set<string>();
  /** Claims held back because their secret did not decrypt (tests, stats). */
  heldForSecrets = 0;
  /**
   * Claims whose previous lease had run out before their attempt started (a worker died holding
   * them queued): claimed again by this worker, no attempt counted (claim.ts).
   */
  reclaimed = 0;
  /** Claims the start mark found taken over (their lease ran out in the queue): not sent. */
  superseded = 0;
  /** Claims taken from the queue for free slots, waiting for the next start mark. */
  private starting: Queued[] = [];
  /** The start mark in flight (startClaims) and how many slots its claims hold. */
  private marking: Promise<void> | null = null;
  private markingCount = 0;
  private markErrors = 0;
  /** performance.now() before which no start mark is tried (backoff after a database error). */
  private markPauseUntil = 0;
  /** The timer that marks again once markPauseUntil has passed (one at a time). */
  private markTimer: NodeJS.Timeout | null = null;
  /** Moving average of attempt durations, ms (EWMA, weight 1/32; starts at 100 ms). */
  private meanAttemptMs = 100;
  /** Rows asked for by claims in flight (they may all arrive). */
  private reserved = 0;
  private claimErrors = 0;
  /** performance.now() before which no claim starts unless woken (idle poll or backoff). */
  private pauseUntil = 0;
  private queue: Queued[] = [];
  /** Claims of paced endpoints waiting for a slot of their endpoint (issue 30 item 3). */
  private readonly pacing: EndpointPacing<Queued>;
  /** Endpoint slots granted, by notification id, until the attempt's send is over. */
  private readonly slots = new Map<string, GrantedSlot>();
  private readonly idle = new Set<() => void>();
  private readonly releasing = new Set<Promise<void>>();
  private pending: Completion[] = [];
  /**
   * A completion transaction failed and its outcomes still wait to be recorded. No claim is made
   * meanwhile: after an outage longer than the lease, a claim could take back this worker's own
   * notifications whose 2xx it holds unrecorded, and send them again.
   */
  private recordingBacklog = false;
  private flushing: Promise<void> | null = null;
  /** Set when stopping: the time after which unrecorded outcomes are abandoned (ms epoch). */
  private giveUpAt: number | null = null;
  private woken = false;
  private waiting: 'room' | 'poll' | null = null;
  private nudge: (() => void) | null = null;
  private stopping = false;
  private running: Promise<void> | null = null;

  /** @throws Error when config.delivery.caFile cannot be read. */
  constructor(opts: DeliveryWorkerOptions) {
    this.db = opts.db;
    this.secrets = opts.secrets;
    this.delivery = opts.config.delivery;
    this.alerts = opts.config.alerts ?? DEFAULT_ALERT_POLICY;
    this.workerId = opts.workerId ?? `${process.pid}-${randomBytes(3).toString('hex')}`;
    this.logger = opts.logger.child({ worker_id: this.workerId });
    this.metrics = opts.metrics;
    this.leaseMarginMs = opts.leaseMarginMs ?? LEASE_MARGIN_MS;
    this.leaseMs = leaseMs(this.delivery.timeoutMs, this.leaseMarginMs);
    this.maxQueueWaitMs = (this.leaseMarginMs * 3) / 4;
    this.concurrency = Math.max(1, this.delivery.concurrency);
    this.claimBatch = Math.max(1, opts.claimBatch ?? this.concurrency);
    this.maxQueued = 2 * this.concurrency;
    this.minQueued = Math.max(1, Math.ceil(this.concurrency / 4));
    this.claimThreshold = Math.max(1, Math.ceil(this.concurrency / 2));
    this.sender = new WebhookSender({
      timeoutMs: this.delivery.timeoutMs,
      allowCidrs: this.delivery.allowCidrs,
      caFile: this.delivery.caFile,
      connections: this.concurrency,
      resolver: opts.resolver,
    });
    this.pacing = new EndpointPacing<Queued>({
      pacer: opts.pacer ?? new MemoryPacer(),
      // A send ends within its deadline; 5 s of slack for the answer to be read and released.
      flightMs: this.delivery.timeoutMs + 5_000,
      maxWaitMs: this.maxQueueWaitMs,
      logger: this.logger,
      canStart: () =>
        !this.stopping &&
        this.inflight + this.markingCount + this.starting.length < this.concurrency,
      onGranted: (q, slot) => {
        this.slots.set(q.claim.notificationId, slot);
        this.starting.push(q);
        this.markStarted();
      },
      onDefer: (items) =>
        this.deferLater(items.map(({ item, delayMs }) => ({ claim: item.claim, delayMs }))),
    });
  }

  /** Claims of paced endpoints given back to the outbox unattempted (their lane was full or slow). */
  get paceDeferred(): number {
    return this.pacing.deferred;
  }

  /** Give back the endpoint slot of a claim that will not be (or was not) sent by this worker. */
  private dropSlot(notificationId: string, answered: boolean): void {
    const slot = this.slots.get(notificationId);
    if (!slot) return;
    this.slots.delete(notificationId);
    this.pacing.release(slot, answered);
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

  /**
   * How many more notifications may be claimed: the free slots plus the queue depth, minus what
   * is queued or being claimed. The queue depth is what the slots start within a quarter of the
   * lease margin at the current pace (concurrency × window / mean attempt duration), between a
   * quarter of `concurrency` and maxQueued: deep against fast receivers, to hide the claims'
   * round trips; shallow against slow ones, so queued notifications start well within their lease.
   */
  private room(): number {
    const window = this.leaseMarginMs / 4;
    const depth = Math.min(
      this.maxQueued,
      Math.max(this.minQueued, Math.floor((this.concurrency * window) / this.meanAttemptMs)),
    );
    return (
      this.concurrency +
      depth -
      this.inflight -
      this.markingCount -
      this.starting.length -
      this.queue.length -
      this.reserved
    );
  }

  /** Wait for a nudge (wake, stop, or — when waiting for room — a freed slot) or `ms`. */
  private wait(reason: 'room' | 'poll', ms: number): Promise<void> {
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
    this.logger.info(
      { concurrency: this.concurrency, lease_ms: this.leaseMs, poll_ms: this.delivery.pollMs },
      'delivery worker started',
    );
    const claims = new Set<Promise<void>>();
    while (!this.stopping) {
      // Nothing was due at the last claim (or the database failed): sleep, unless woken.
      const pause = this.pauseUntil - performance.now();
      if (pause > 0 && !this.woken) {
        await this.wait('poll', pause);
        continue;
      }
      if (this.recordingBacklog) {
        await this.wait('room', this.delivery.pollMs);
        continue;
      }
      const room = this.room();
      if (claims.size >= MAX_CLAIMS_IN_FLIGHT || room < this.claimThreshold) {
        await this.wait('room', this.delivery.pollMs);
        continue;
      }
      this.woken = false;
      const limit = Math.min(room, this.claimBatch);
      const claim = this.claimOnce(limit).finally(() => {
        claims.delete(claim);
        this.poke();
      });
      claims.add(claim);
    }
    await Promise.all(claims);
    await this.drain();
    await this.sender.close();
    this.logger.info(
      {
        delivered: this.delivered,
        failed: this.failed,
        dead: this.dead,
        stale: this.stale,
        released: this.released,
        reclaimed: this.reclaimed,
        superseded: this.superseded,
      },
      'delivery worker stopped',
    );
  }

  /**
   * One claim of up to `limit` notifications into the queue. Fewer than asked means nothing more
   * is due: claims pause for pollMs (or until wake()). A database error pauses them for a
   * backoff (exponential, full jitter, up to 10 s).
   */
  private async claimOnce(limit: number): Promise<void> {
    this.reserved += limit;
    try {
      const {
        claimed: batch,
        lost,
        dead,
        test,
        reclaimed,
      } = await claimDue(this.db, {
        limit,
        leaseMs: this.leaseMs,
        owner: this.workerId,
        scheduleScale: this.delivery.scheduleScale,
      });
      this.claimErrors = 0;
      this.claimRounds++;
      if (lost + test > 0) {
        // Failed attempts like any other (retried on the schedule, or dead): counted where found;
        // test-mode ones (issue 32) in no live metric.
        this.lost += lost + test;
        this.dead += dead;
        this.metrics?.deliveriesCompleted({ delivered: 0, retried: lost - dead, dead });
        this.logger.warn(
          { count: lost + test, dead, test },
          'attempts lost with their lease (worker died or stalled); recorded as failed',
        );
      }
      this.claimed += batch.length;
      this.reclaimed += reclaimed;
      const claimedAt = performance.now();
      for (const claim of batch) this.queue.push({ claim, claimedAt });
      if (batch.length < limit) this.pauseUntil = claimedAt + this.delivery.pollMs;
    } catch (err) {
      this.claimErrors++;
      this.dbErrors++;
      const delay = backoffDelay(this.claimErrors, { baseMs: 250, capMs: 10_000 });
      this.pauseUntil = performance.now() + delay;
      this.logger.warn(
        { err: errorText(err), retry_in_ms: delay, consecutive: this.claimErrors },
        'claim failed; retrying',
      );
    } finally {
      this.reserved -= limit;
    }
    this.pump();
  }

  /**
   * Move queued notifications into free slots (held back if their secret does not decrypt),
   * release those queued too long, and mark the slots' claims as started.
   */
  private pump(): void {
    if (this.stopping) return;
    const tooOld: ClaimedNotification[] = [];
    const disabled: ClaimedNotification[] = [];
    const now = performance.now();
    while (
      this.inflight + this.markingCount + this.starting.length < this.concurrency &&
      this.queue.length > 0
    ) {
      const q = this.queue.shift() as Queued;
      if (now - q.claimedAt > this.maxQueueWaitMs) tooOld.push(q.claim);
      else if (q.claim.endpoint !== null && !q.claim.endpoint.enabled) disabled.push(q.claim);
      else if (q.claim.secret === null || this.decryptable(q.claim, q.claim.secret)) {
        const windows = q.claim.endpoint === null ? [] : endpointWindows(q.claim.endpoint);
        // A paced endpoint's claim waits in its lane, outside this worker's slots, until its
        // endpoint grants a slot (onGranted puts it in `starting`).
        if (
          q.claim.endpoint !== null &&
          windows.length > 0 &&
          !this.slots.has(q.claim.notificationId)
        ) {
          this.pacing.offer(q, q.claim.endpoint, windows, q.claimedAt);
        } else this.starting.push(q);
      }
    }
    if (tooOld.length > 0) this.releaseLater(tooOld);
    if (disabled.length > 0) {
      const delayMs = DISABLED_ENDPOINT_RECHECK_MS * this.delivery.scheduleScale;
      this.deferLater(disabled.map((claim) => ({ claim, delayMs })));
    }
    this.markStarted();
    // Slots may have freed: lanes waiting for room try again.
    this.pacing.poke();
    if (this.waiting === 'room' && this.room() >= this.claimThreshold) this.poke();
  }

  /**
   * Mark the claims waiting for a slot as started (one statement in flight; those that arrive
   * meanwhile go into the next), then send those still held. Claims queued longer than the age
   * limit are released instead (checked again here: they may have waited out a backoff). On a
   * database error they go back to the head of the queue and marking pauses for a backoff
   * (exponential, full jitter, up to 10 s), after which a timer marks again.
   */
  private markStarted(): void {
    if (this.marking || this.starting.length === 0 || this.stopping) return;
    const pause = this.markPauseUntil - performance.now();
    if (pause > 0) {
      // Timers may fire a little before performance.now() says the pause is over: a timer that
      // finds it not over yet arms the next one instead of leaving the claims waiting for good.
      this.markTimer ??= setTimeout(() => {
        this.markTimer = null;
        this.pump();
      }, Math.ceil(pause) + 1).unref();
      return;
    }
    const now = performance.now();
    const tooOld = this.starting.filter((q) => now - q.claimedAt > this.maxQueueWaitMs);
    const batch = this.starting.filter((q) => now - q.claimedAt <= this.maxQueueWaitMs);
    this.starting = [];
    if (tooOld.length > 0) {
      for (const q of tooOld) this.dropSlot(q.claim.notificationId, true);
      this.releaseLater(tooOld.map((q) => q.claim));
    }
    if (batch.length === 0) return;
    this.markingCount = batch.length;
    this.marking = startClaims(
      this.db,
      batch.map((q) => q.claim),
    )
      .then(
        (held) => {
          this.markErrors = 0;
          this.startRounds++;
          const gone: ClaimedNotification[] = [];
          const late: ClaimedNotification[] = [];
          const markedAt = performance.now();
          for (const { claim, claimedAt } of batch) {
            if (!held.has(claim.notificationId)) {
              this.superseded++;
              this.dropSlot(claim.notificationId, true);
            } else if (this.stopping) gone.push(claim);
            // A slow mark (the database stalled) can leave too little of the lease for the
            // attempt: given back unattempted, as the chat worker does (the next claim clears
            // the mark), rather than sent with a lease that may run out mid-attempt.
            else if (markedAt - claimedAt > this.maxQueueWaitMs) late.push(claim);
            else this.launch(claim);
          }
          for (const c of gone.concat(late)) this.dropSlot(c.notificationId, true);
          // Stopping meanwhile: marked but not sent, given back (the release clears the lease).
          if (gone.length > 0) this.releaseLater(gone, 'worker stopping');
          if (late.length > 0) {
            this.releaseLater(late, 'marked as started too late to finish within the lease');
          }
        },
        (err: unknown) => {
          this.markErrors++;
          this.dbErrors++;
          // Back to the head of the queue; their endpoint slots are given back (taken again).
          for (const q of batch) this.dropSlot(q.claim.notificationId, true);
          this.queue = batch.concat(this.queue);
          const delay = backoffDelay(this.markErrors, { baseMs: 250, capMs: 10_000 });
          this.markPauseUntil = performance.now() + delay;
          this.logger.warn(
            { err: errorText(err), retry_in_ms: delay, count: batch.length },
            'marking attempts as started failed; retrying',
          );
        },
      )
      .finally(() => {
        this.marking = null;
        this.markingCount = 0;
        this.pump();
      });
  }

  /** Start one attempt (its claim marked as started); its outcome joins the next completion batch. */
  private launch(c: ClaimedNotification): void {
    this.inflight++;
    void this.attempt(c).then((result) => {
      this.inflight--;
      // The endpoint's slot: its send is over (answered or not).
      this.dropSlot(c.notificationId, result.status !== undefined);
      this.meanAttemptMs += (Math.max(1, result.durationMs) - this.meanAttemptMs) / 32;
      // Test-mode attempts (issue 32) stay out of the live metrics.
      if (isLivemode(c.event.network)) {
        this.metrics?.attemptDuration.observe(result.durationMs / 1000);
      }
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
      this.pump();
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
      secret = this.decrypt(c.secret);
    } catch (err) {
      return failedAttempt(`secret: ${errorText(err)}`, startedAt, t0);
    }
    // During a rotation's grace period the replaced secret signs too; one that does not decrypt
    // (its key was retired early) only drops the second signature, never the delivery.
    let previous: string | null = null;
    if (c.previousSecret !== null) {
      try {
        previous = this.decrypt(c.previousSecret);
      } catch {
        previous = null;
      }
    }
    try {
      return await this.sender.send(c.webhookUrl, c.event, secret, undefined, {}, previous);
    } catch (err) {
      // send() classifies everything; this is a bug guard, not a path.
      return failedAttempt(`internal: ${errorText(err)}`, startedAt, t0);
    }
  }

  /**
   * SecretBox.decrypt, remembered per ciphertext: a watch's deliveries share one secret, and an
   * AES-GCM decipher costs ~25 µs (~6 % of the worker's CPU in the benchmark). The plaintext
   * only lives in this process's memory, as it does during every attempt; at most
   * SECRETS_REMEMBERED are kept, then the memo starts over. Failures are not remembered.
   * @throws SecretDecryptError
   */
  private decrypt(enc: EncryptedSecret): string {
    const key = `${enc.keyId}:${enc.ciphertext.toString('base64')}`;
    const known = this.plaintexts.get(key);
    if (known !== undefined) return known;
    const secret = this.secrets.decrypt(enc);
    if (this.plaintexts.size >= SECRETS_REMEMBERED) this.plaintexts.clear();
    this.plaintexts.set(key, secret);
    return secret;
  }

  /**
   * Whether the claim's secret decrypts. One that does not (a key this replica lacks during a
   * rotation, a tampered ciphertext) is not the receiver's failure and uses none of the six
   * attempts (issue 14 item 3): the notification is held back for a minute (× the schedule
   * scale) in the background, the key id is logged once (error), counted in
   * tronwatch_secret_decrypt_failures_total and recorded for /healthz (secret-problems.ts).
   * A key id that decrypts again is cleared (logged once more if it fails again later).
   */
  private decryptable(c: ClaimedNotification, enc: EncryptedSecret): boolean {
    try {
      this.decrypt(enc);
      // The first success with a key id in this process (or after it failed here) clears what
      // any worker recorded for it: another replica may have lacked the key.
      if (!this.goodKeys.has(enc.keyId)) {
        this.goodKeys.add(enc.keyId);
        this.background(clearSecretProblem(this.db, enc.keyId));
      }
      if (this.badKeys.has(enc.keyId)) {
        this.badKeys.delete(enc.keyId);
        this.logger.warn({ key_id: enc.keyId }, 'webhook secrets decrypt again: delivery resumed');
      }
      return true;
    } catch (err) {
      if (!(err instanceof SecretDecryptError)) throw err;
      this.goodKeys.delete(enc.keyId);
      const error = `secret: ${errorText(err)}`;
      this.metrics?.secretDecryptFailures.inc({ key_id: enc.keyId });
      const nowMs = Date.now();
      const last = this.badKeys.get(enc.keyId);
      if (last === undefined) {
        this.logger.error(
          { key_id: enc.keyId, err: errorText(err) },
          'webhook secret cannot be decrypted (configure this key in SECRET_ENCRYPTION_KEY or SECRET_ENCRYPTION_KEYS_OLD): its deliveries are held, attempts unused',
        );
      }
      if (last === undefined || nowMs - last >= 60_000) {
        this.badKeys.set(enc.keyId, nowMs);
        this.background(recordSecretProblem(this.db, enc.keyId, error));
      }
      this.heldForSecrets++;
      const delayMs = Math.max(1, Math.round(SECRET_HOLD_MS * this.delivery.scheduleScale));
      this.background(holdClaims(this.db, [c], delayMs, error));
      return false;
    }
  }

  /** Run a database write in the background; awaited by stop(); a failure is only logged (the lease expires). */
  private background(p: Promise<unknown>): void {
    const q: Promise<void> = p
      .then(() => undefined)
      .catch((err: unknown) => {
        this.dbErrors++;
        this.logger.warn({ err: errorText(err) }, 'background write failed; leases will expire');
      })
      .finally(() => this.releasing.delete(q));
    this.releasing.add(q);
  }

  /** Release in the background (awaited by drain before the worker reports stopped). */
  private releaseLater(
    claims: ClaimedNotification[],
    why = 'queued too long to finish within the lease',
  ): void {
    const p = this.release(claims, why).finally(() => this.releasing.delete(p));
    this.releasing.add(p);
  }

  /**
   * Put claimed, unattempted notifications back in the outbox, each due after its delay, ms,
   * attempts unchanged and nothing recorded (throttle.ts deferClaims): an endpoint that is
   * switched off, or one whose pace leaves no slot for them soon (issue 30). A failure only logs: the leases expire, unstarted, and the next claim
   * takes them again without counting an attempt (claim.ts).
   */
  private deferLater(items: Array<{ claim: ClaimedNotification; delayMs: number }>): void {
    const claims = items.map((i) => i.claim);
    const p = deferClaims(
      this.db,
      items.map(({ claim, delayMs }) => ({
        notificationId: claim.notificationId,
        leaseToken: claim.leaseToken,
        delayMs,
      })),
    )
      .then((n) => {
        this.deferred += n;
      })
      .catch((err: unknown) => {
        this.dbErrors++;
        this.logger.warn(
          { err: errorText(err), count: claims.length },
          'deferring claims failed; their leases will expire',
        );
      })
      .finally(() => this.releasing.delete(p));
    this.releasing.add(p);
  }

  /** Give claimed, unattempted notifications back (due at once); a failure only logs. */
  private async release(claims: ClaimedNotification[], why: string): Promise<void> {
    if (claims.length === 0) return;
    try {
      this.released += await releaseClaims(this.db, claims);
      this.logger.info({ count: claims.length, reason: why }, 'claimed notifications released');
    } catch (err) {
      this.dbErrors++;
      this.logger.warn(
        { err: errorText(err), count: claims.length },
        'releasing claims failed; their leases will expire',
      );
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
      // Under load, gather a little: one transaction per ~concurrency outcomes instead of one
      // per few (half the transactions in the benchmark); an isolated outcome goes at once.
      if (this.pending.length < this.concurrency && this.inflight > 0 && !this.stopping) {
        await sleep(COMPLETE_GATHER_MS);
      }
      const batch = this.pending.splice(0, MAX_COMPLETE_BATCH);
      try {
        const o = await completeAttempts(this.db, batch, this.delivery.scheduleScale);
        failures = 0;
        if (this.recordingBacklog && this.pending.length === 0) {
          this.recordingBacklog = false;
          this.poke();
        }
        this.completeRounds++;
        this.attempts += o.recorded;
        this.delivered += o.delivered;
        this.dead += o.dead;
        this.stale += o.stale;
        this.metrics?.deliveriesCompleted(o);
        this.refreshHealth(o);
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
        this.recordingBacklog = true;
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

  /**
   * Refresh the health, alert and automatic pause of the endpoints and watches a batch moved
   * (refreshEndpointHealth, then refreshWatchHealth), one run at a time: those marked meanwhile
   * go into the next run. A failed run is logged; the next batch recomputes everything from the
   * attempts.
   */
  private refreshHealth(
    o: Pick<CompleteOutcome, 'watchIds' | 'deadWatchIds' | 'endpointIds' | 'deadEndpointIds'>,
  ): void {
    for (const id of o.watchIds) this.healthDirty.add(id);
    for (const id of o.deadWatchIds) this.healthDead.add(id);
    for (const id of o.endpointIds) this.endpointDirty.add(id);
    for (const id of o.deadEndpointIds) this.endpointDead.add(id);
    const dirty = () => this.healthDirty.size > 0 || this.endpointDirty.size > 0;
    if (this.healthRunning || !dirty()) return;
    this.healthRunning = (async () => {
      while (dirty()) {
        const endpoints = [...this.endpointDirty];
        const deadEndpoints = [...this.endpointDead];
        this.endpointDirty.clear();
        this.endpointDead.clear();
        const ids = [...this.healthDirty];
        const dead = [...this.healthDead];
        this.healthDirty.clear();
        this.healthDead.clear();
        try {
          const e = await refreshEndpointHealth(this.db, endpoints, deadEndpoints, this.alerts);
          for (const id of e.opened)
            this.logger.warn({ endpoint_id: id }, 'endpoint alert: deliveries failing');
          for (const id of e.recovered)
            this.logger.info({ endpoint_id: id }, 'endpoint alert: recovered');
          for (const id of e.paused) {
            this.logger.warn(
              { endpoint_id: id },
              'endpoint switched off automatically: deliveries all failed',
            );
          }
        } catch (err) {
          this.dbErrors++;
          this.logger.warn({ err: errorText(err) }, 'refreshing endpoint health failed');
        }
        try {
          const c = await refreshWatchHealth(this.db, ids, dead, this.alerts);
          for (const id of c.opened)
            this.logger.warn({ watch_id: id }, 'watch alert: deliveries failing');
          for (const id of c.recovered)
            this.logger.info({ watch_id: id }, 'watch alert: recovered');
          for (const id of c.paused) {
            this.logger.warn({ watch_id: id }, 'watch paused automatically: deliveries all failed');
          }
        } catch (err) {
          this.dbErrors++;
          this.logger.warn({ err: errorText(err) }, 'refreshing watch health failed');
        }
      }
    })().finally(() => {
      this.healthRunning = null;
    });
  }

  /** While stopping, recording is retried until the lease margin has passed, then abandoned. */
  private givenUp(): boolean {
    return this.giveUpAt !== null && Date.now() > this.giveUpAt;
  }

  /**
   * After the loop: release what is queued, wait for attempts in flight, then for their outcomes
   * to be recorded.
   */
  private async drain(): Promise<void> {
    // A start mark in flight launches what it marked (or, stopping, releases it) first.
    while (this.marking) await this.marking;
    if (this.markTimer) clearTimeout(this.markTimer);
    this.markTimer = null;
    const queued = this.starting.concat(this.queue, this.pacing.stop()).map((q) => q.claim);
    for (const c of queued) this.dropSlot(c.notificationId, true);
    this.queue = [];
    this.starting = [];
    const released = this.release(queued, 'worker stopping');
    if (this.inflight > 0) {
      await new Promise<void>((resolve) => {
        const done = () => {
          this.idle.delete(done);
          resolve();
        };
        this.idle.add(done);
      });
    }
    await released;
    await Promise.all(this.releasing);
    this.giveUpAt = Date.now() + this.leaseMarginMs;
    this.scheduleFlush();
    while (this.flushing) await this.flushing;
    while (this.healthRunning) await this.healthRunning;
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
