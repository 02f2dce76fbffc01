/**
 * The chat delivery worker (issue 13 item 3; DESIGN "The console and the chat channel", decisions
 * "chat deliveries"): claim → pace → sendMessage → record → reschedule, over the same outbox,
 * attempt rows, states and schedule as webhooks (claim.ts with channel 'telegram', complete.ts,
 * schedule.ts). One message per event (src/telegram/message.ts).
 *
 * Outcomes:
 * - the Bot API answered `ok: true` → DELIVERED (complete.ts);
 * - 429 with `retry_after` → a `throttled` attempt row, due again after retry_after, attempts
 *   unchanged (throttle.ts recordThrottled): it does not use one of the six attempts; and the
 *   chat's pacing window is held until then (Pacer.hold, shared by every worker), so the chat's
 *   other notifications wait for retry_after too, as the Bot API asks;
 * - 400 with `migrate_to_chat_id` (the group became a supergroup) → the binding follows the chat
 *   (src/telegram/binding.ts migrateChat) and the message is sent to the new chat, in the same
 *   attempt (the refused request is not recorded: nothing was delivered and nothing failed);
 * - anything else (403: the bot was blocked or removed; 400; a network error; the deadline;
 *   no chat bound) → a failed attempt, retried on the schedule, DEAD after the sixth.
 *
 * Pacing (src/telegram/pacing.ts): before each send, a slot in every Bot API window that applies
 * (per chat, per group, per bot; shared through Redis by every worker), released once the send's
 * answer is in, so the windows count each message from the end of its send: Telegram counts it on
 * arrival, which lies before the answer, and the next message of the window is granted at least one
 * interval after that (issue 21 item 4: no 429 from jitter between our clock and Telegram's). A
 * send that got no answer is released {@link NO_ANSWER_LINGER_MS} late (its bytes may still be on
 * the way). Waiting for a slot is not an attempt: a notification waits in memory at most
 * {@link MAX_SLOT_WAIT_MS} in all (the lease covers it: timeout + that wait + margin), and when
 * the windows will have no room for it within that bound it goes back to the outbox unattempted
 * (throttle.ts deferClaims), due when its chat's slot should be free, later ones of the same chat
 * spaced by the chat's window so they keep their order. The attempt row's started_at is the slot's
 * time (the instant the attempt was allowed to start; the Redis server's clock when Redis paces);
 * successive slots of a window are at least its interval apart on that clock too.
 *
 * Up to config.delivery.concurrency notifications are held at once (waiting for a slot or in
 * flight). A claim that returns fewer rows than asked means nothing more is due: claims pause for
 * config.delivery.pollMs or until wake(). Database errors are logged and retried with backoff;
 * outcomes not yet recorded are kept and retried. Stopping: no new claims; notifications waiting for
 * a slot go back unattempted; sends in flight finish (deadline config.telegram.timeoutMs) and are
 * recorded.
 */

import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { isLivemode } from '../common/environment.js';
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { backoffDelay, sleep } from '../common/retry.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { migrateChat } from '../telegram/binding.js';
import { sendChatMessage, type TelegramBot } from '../telegram/bot.js';
import { formatChatMessage } from '../telegram/message.js';
import {
  chatWindowId,
  chatWindows,
  type Pacer,
  type PacingSlot,
  type PacingWindow,
} from '../telegram/pacing.js';
import {
  type ClaimedNotification,
  claimDue,
  LEASE_MARGIN_MS,
  leaseMs,
  startClaims,
} from './claim.js';
import { type Completion, completeAttempts } from './complete.js';
import { type AttemptResult, failedAttempt } from './send.js';
import { deferClaims, recordThrottled } from './throttle.js';

/**
 * Longest a claimed notification waits in memory for a pacing slot, ms, in all. 5 s: a few
 * per-chat windows, short against the lease margin (20 s), so the lease (timeout + this + margin)
 * is never at risk; beyond it the notification goes back to the outbox unattempted.
 */
export const MAX_SLOT_WAIT_MS = 5_000;

/**
 * A claim whose send has not started this long after the claim (its start mark retried through a
 * database outage) goes back to the outbox unsent: the send and its recording must still fit in
 * the lease (timeout + MAX_SLOT_WAIT_MS + margin), half the margin being left to record.
 */
const START_DEADLINE_MS = MAX_SLOT_WAIT_MS + LEASE_MARGIN_MS / 2;

/**
 * A send that would start later than this after its pacing slot was asked for, ms (a slow start
 * mark: the database stalled; a stalled event loop), goes on a fresh slot instead (the late one is
 * released unused). Bounds the start so that the send is over, its bytes included, by the slot's
 * provisional end (FLIGHT_SLACK_MS).
 */
const SEND_START_SLACK_MS = 500;

/**
 * How long after a send that got no answer (a network error, its deadline) its slot still counts
 * as in flight, ms: a request aborted at its deadline may still have bytes on the way to Telegram
 * (a TCP retransmission is 200 ms or more on a lossy path).
 */
export const NO_ANSWER_LINGER_MS = 500;

/**
 * A slot's provisional end, ms after its grant, beyond the send's deadline
 * (config.telegram.timeoutMs): the send starts within SEND_START_SLACK_MS and its last bytes
 * arrive within NO_ANSWER_LINGER_MS of its deadline. Until then a slot whose worker died counts.
 */
const FLIGHT_SLACK_MS = SEND_START_SLACK_MS + NO_ANSWER_LINGER_MS;

/** How long a notification waits in the outbox after the pacer failed, ms. */
const PACER_ERROR_DELAY_MS = 1_000;

/** Migrations followed within one attempt, at most (a chat migrates once; a loop is a bug). */
const MAX_MIGRATIONS = 2;

export interface ChatWorkerOptions {
  db: Db;
  telegram: TelegramBot;
  /** Pacing windows shared by every worker (Redis) or in process. */
  pacer: Pacer;
  /** config.delivery (scheduleScale, concurrency, pollMs) and config.telegram (timeoutMs, pacingScale). */
  config: Pick<Config, 'delivery' | 'telegram'>;
  logger: Logger;
  metrics?: Metrics;
  /** Prefix of lease tokens and log field `worker_id`. Default: chat-pid-random. */
  workerId?: string;
}

export class ChatDeliveryWorker {
  readonly workerId: string;
  /** Notifications moved to DELIVERED (committed). */
  delivered = 0;
  /** Failed attempts recorded (rescheduled or dead). */
  failed = 0;
  /** Notifications moved to DEAD. */
  dead = 0;
  /** 429 answers recorded (not attempts). */
  throttled = 0;
  /** Notifications put back unattempted for want of a pacing slot. */
  deferred = 0;
  /** Chats followed to their supergroup. */
  migrated = 0;
  /** Lost attempts found by this worker's claims. */
  lost = 0;
  /** Claims taken again whose previous lease ran out before their attempt started (claim.ts). */
  reclaimed = 0;
  /** Database errors survived. */
  dbErrors = 0;

  private readonly db: Db;
  private readonly telegram: TelegramBot;
  private readonly pacer: Pacer;
  private readonly cfg: Pick<Config, 'delivery' | 'telegram'>;
  private readonly logger: Logger;
  private readonly metrics: Metrics | undefined;
  private readonly leaseMs: number;
  private readonly concurrency: number;
  private held = 0;
  /** Notifications of each chat held now. */
  private readonly perChat = new Map<string, number>();
  /** Per chat: when the next notification this worker defers should be due, ms epoch. */
  private readonly deferredUntil = new Map<string, number>();
  private stopping = false;
  private woken = false;
  private nudge: (() => void) | null = null;
  private running: Promise<void> | null = null;
  private readonly tasks = new Set<Promise<void>>();
  private readonly stopSignal = new AbortController();

  constructor(opts: ChatWorkerOptions) {
    this.db = opts.db;
    this.telegram = opts.telegram;
    this.pacer = opts.pacer;
    this.cfg = opts.config;
    this.workerId = opts.workerId ?? `chat-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.logger = opts.logger.child({ worker_id: this.workerId });
    this.metrics = opts.metrics;
    this.leaseMs = leaseMs(this.cfg.telegram.timeoutMs + MAX_SLOT_WAIT_MS, LEASE_MARGIN_MS);
    this.concurrency = Math.max(1, this.cfg.delivery.concurrency);
    // Every notification waiting for a slot listens on it (up to `concurrency` at once).
    setMaxListeners(0, this.stopSignal.signal);
  }

  /**
   * Run until `signal` aborts or stop(); resolves once stopped (sends in flight recorded).
   * @throws Error when called twice.
   */
  start(signal: AbortSignal): Promise<void> {
    if (this.running) throw new Error('ChatDeliveryWorker already started');
    const onAbort = () => this.halt();
    if (signal.aborted) this.halt();
    signal.addEventListener('abort', onAbort, { once: true });
    this.running = this.loop().finally(() => signal.removeEventListener('abort', onAbort));
    return this.running;
  }

  /** Claim now instead of at the next poll (ingest calls it after committing notifications). */
  wake(): void {
    this.woken = true;
    this.nudge?.();
  }

  /** Stop (see the file's comment). Idempotent. */
  async stop(): Promise<void> {
    this.halt();
    if (this.running) await this.running;
  }

  private halt(): void {
    this.stopping = true;
    this.stopSignal.abort();
    this.nudge?.();
  }

  private wait(ms: number): Promise<void> {
    if (this.stopping || this.woken) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        if (this.nudge === done) this.nudge = null;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.nudge = done;
    });
  }

  private async loop(): Promise<void> {
    this.logger.info(
      {
        concurrency: this.concurrency,
        lease_ms: this.leaseMs,
        bot: this.telegram.identity.username,
      },
      'chat delivery worker started',
    );
    let failures = 0;
    while (!this.stopping) {
      const room = this.concurrency - this.held;
      if (room <= 0) {
        // Full: a wake() cannot be served now, and would make wait() return at once, spinning on
        // resolved promises that starve the event loop (no send could then finish to free room).
        // A finishing notification nudges the loop, which then claims anyway.
        this.woken = false;
        await this.wait(this.cfg.delivery.pollMs);
        continue;
      }
      this.woken = false;
      let batch: ClaimedNotification[];
      try {
        const r = await claimDue(this.db, {
          limit: room,
          leaseMs: this.leaseMs,
          owner: this.workerId,
          scheduleScale: this.cfg.delivery.scheduleScale,
          channel: 'telegram',
        });
        failures = 0;
        batch = r.claimed;
        this.reclaimed += r.reclaimed;
        if (r.lost + r.test > 0) {
          // Test-mode lost attempts (issue 32, r.test) count in no live metric.
          this.lost += r.lost + r.test;
          this.dead += r.dead;
          this.metrics?.deliveriesCompleted({
            delivered: 0,
            retried: r.lost - r.dead,
            dead: r.dead,
          });
        }
      } catch (err) {
        failures++;
        this.dbErrors++;
        const delay = backoffDelay(failures, { baseMs: 250, capMs: 10_000 });
        this.logger.warn(
          { err: errorText(err), retry_in_ms: delay },
          'chat claim failed; retrying',
        );
        await this.wait(delay);
        continue;
      }
      for (const c of batch) this.launch(c);
      if (batch.length < room) await this.wait(this.cfg.delivery.pollMs);
    }
    await Promise.all(this.tasks);
    this.logger.info(
      {
        delivered: this.delivered,
        failed: this.failed,
        dead: this.dead,
        throttled: this.throttled,
        deferred: this.deferred,
      },
      'chat delivery worker stopped',
    );
  }

  private launch(c: ClaimedNotification): void {
    this.held++;
    const chat = c.chatId ?? '';
    this.perChat.set(chat, (this.perChat.get(chat) ?? 0) + 1);
    const task: Promise<void> = this.deliver(c)
      .catch((err: unknown) => {
        // deliver() records every outcome itself; this only guards against a bug: the claim goes
        // back unattempted rather than waiting for its lease to run out (a lost attempt).
        this.logger.error(
          { notification_id: c.notificationId, err: errorText(err) },
          'chat delivery failed',
        );
        return deferClaims(this.db, [
          { notificationId: c.notificationId, leaseToken: c.leaseToken, delayMs: 0 },
        ]).then(
          () => undefined,
          () => undefined,
        );
      })
      .finally(() => {
        this.held--;
        const n = (this.perChat.get(chat) ?? 1) - 1;
        if (n <= 0) this.perChat.delete(chat);
        else this.perChat.set(chat, n);
        this.tasks.delete(task);
        this.nudge?.();
      });
    this.tasks.add(task);
  }

  /** One claimed notification: pace, send, record (never throws on an outcome). */
  private async deliver(c: ClaimedNotification): Promise<void> {
    const startedAt = new Date();
    if (c.chatId === null) {
      await this.complete(c, failedAttempt('telegram: no chat is bound to the account', startedAt));
      return;
    }
    let html: string;
    try {
      html = formatChatMessage(c.event);
    } catch (err) {
      await this.complete(c, failedAttempt(`internal: ${errorText(err)}`, startedAt));
      return;
    }
    let chatId = c.chatId;
    let migrations = 0;
    let started = false;
    const waitedSince = performance.now();
    for (;;) {
      let slot: PacingSlot;
      const windows = chatWindows(chatId, this.telegram.identity.id, this.cfg.telegram.pacingScale);
      const askedAt = performance.now();
      try {
        slot = await this.pacer.take(windows, this.cfg.telegram.timeoutMs + FLIGHT_SLACK_MS);
      } catch (err) {
        // Only a pacer without fallback throws (Redis unreachable): nothing was sent; back to the
        // outbox, due again after a second, unattempted.
        this.logger.warn({ err: errorText(err) }, 'chat pacing unavailable; notification deferred');
        await this.defer(c, chatId, PACER_ERROR_DELAY_MS);
        return;
      }
      if (!slot.granted) {
        const waited = performance.now() - waitedSince;
        if (this.stopping || waited + slot.waitMs > MAX_SLOT_WAIT_MS) {
          await this.defer(c, chatId, this.stopping ? 0 : slot.waitMs);
          return;
        }
        await sleep(slot.waitMs, this.stopSignal.signal);
        continue;
      }
      if (!started) {
        // Marked as attempted before the first send (migration 014): waiting for a slot was not
        // an attempt, and a lease that runs out from here on counts as one. A claim taken over
        // meanwhile, or one that cannot be marked, is not sent (its lease runs out unattempted).
        const held = await this.retryDb(() => startClaims(this.db, [c]));
        if (!held?.has(c.notificationId)) {
          await this.release(windows, slot, 0);
          return;
        }
        if (performance.now() - waitedSince > START_DEADLINE_MS) {
          // Marked too late to send within the lease: given back, due at once; the next claim
          // clears the mark (a lease that ran out from here would count as an attempt).
          await this.release(windows, slot, 0);
          await this.defer(c, chatId, 0);
          return;
        }
        started = true;
      }
      if (performance.now() - askedAt > SEND_START_SLACK_MS) {
        // A slow mark (the database stalled) or a stalled process: sent now, the message could
        // still be on its way past the slot's provisional end. A fresh slot instead; the late one
        // is released unused (it counts from now: only stricter).
        await this.release(windows, slot, 0);
        if (performance.now() - waitedSince > MAX_SLOT_WAIT_MS) {
          await this.defer(c, chatId, 0);
          return;
        }
        continue;
      }
      const r = await sendChatMessage(this.telegram.bot, chatId, html, this.cfg.telegram.timeoutMs);
      // Telegram counted the message when it arrived, before its answer: its windows count it
      // from now. No answer: it may still be on the way.
      await this.release(windows, slot, r.status === undefined ? NO_ANSWER_LINGER_MS : 0);
      if (r.migrateToChatId !== undefined && migrations < MAX_MIGRATIONS) {
        migrations++;
        await this.retryDb(() => migrateChat(this.db, chatId, r.migrateToChatId as string));
        this.migrated++;
        this.logger.info(
          { chat_id: chatId, new_chat_id: r.migrateToChatId },
          'telegram chat migrated to a supergroup; binding followed',
        );
        chatId = r.migrateToChatId;
        continue;
      }
      const slotStart = new Date(slot.atMs);
      if (r.retryAfterSeconds !== undefined) {
        this.throttled++;
        // The Bot API asks the bot to wait retry_after before sending to this chat again: hold the
        // chat's window, shared by every worker, so the chat's other notifications wait too.
        await this.holdChat(chatId, r.retryAfterSeconds * 1000);
        await this.retryDb(() =>
          recordThrottled(this.db, {
            notificationId: c.notificationId,
            leaseToken: c.leaseToken,
            delayMs: (r.retryAfterSeconds as number) * 1000,
            attemptsBefore: c.attempts,
            startedAt: slotStart,
            durationMs: r.durationMs,
            error: r.error ?? 'Bot API 429',
            responseBody: r.responseBody ?? null,
          }),
        );
        this.logger.warn(
          {
            notification_id: c.notificationId,
            chat_id: chatId,
            retry_after_s: r.retryAfterSeconds,
          },
          'telegram 429: rescheduled at retry_after (not an attempt)',
        );
        return;
      }
      const result: AttemptResult = {
        ok: r.ok,
        startedAt: slotStart,
        durationMs: r.durationMs,
        ...(r.status !== undefined ? { status: r.status } : {}),
        ...(r.error !== undefined ? { error: r.error } : {}),
        ...(r.responseBody !== undefined ? { responseBody: r.responseBody } : {}),
      };
      if (isLivemode(c.event.network)) this.metrics?.attemptDuration.observe(r.durationMs / 1000);
      await this.complete(c, result);
      return;
    }
  }

  /**
   * Put a notification back unattempted, due when its chat should have room: after `waitMs`, and
   * after the ones of the same chat this worker deferred before it, one chat window apart, so a
   * burst for one chat comes back in order at the chat's pace instead of all at once.
   */
  private async defer(c: ClaimedNotification, chatId: string, waitMs: number): Promise<void> {
    const windows = chatWindows(chatId, this.telegram.identity.id, this.cfg.telegram.pacingScale);
    const chatWindow = windows[0]?.windowMs ?? 1_000;
    const now = Date.now();
    const due = Math.max(now + waitMs, this.deferredUntil.get(chatId) ?? 0);
    this.deferredUntil.set(chatId, due + chatWindow);
    if (this.deferredUntil.size > 10_000) this.pruneDeferred(now);
    this.deferred++;
    await this.retryDb(() =>
      deferClaims(this.db, [
        { notificationId: c.notificationId, leaseToken: c.leaseToken, delayMs: due - now },
      ]),
    );
  }

  /**
   * Hold the chat's pacing window for `ms` (a 429's retry_after). A pacer that fails (only one
   * without fallback throws) is logged: the Bot API answers another 429, which is not an attempt.
   */
  private async holdChat(chatId: string, ms: number): Promise<void> {
    try {
      await this.pacer.hold(chatWindowId(chatId, this.telegram.identity.id), ms);
    } catch (err) {
      this.logger.warn({ chat_id: chatId, err: errorText(err) }, 'chat hold not recorded');
    }
  }

  /**
   * Release a granted slot (Pacer.release). A pacer that fails (only one without fallback throws)
   * is logged: the slot then counts until its provisional end, which is only stricter.
   */
  private async release(windows: PacingWindow[], slot: PacingSlot, lingerMs: number) {
    try {
      await this.pacer.release(windows, slot.token, lingerMs);
    } catch (err) {
      this.logger.warn({ err: errorText(err) }, 'chat pacing slot not released');
    }
  }

  /** Forget the deferral horizons already past (bounds the map). */
  private pruneDeferred(now: number): void {
    for (const [chat, t] of this.deferredUntil) if (t <= now) this.deferredUntil.delete(chat);
  }

  private async complete(c: ClaimedNotification, result: AttemptResult): Promise<void> {
    const completion: Completion = {
      notificationId: c.notificationId,
      leaseToken: c.leaseToken,
      attemptsBefore: c.attempts,
      result,
    };
    const o = await this.retryDb(() =>
      completeAttempts(this.db, [completion], this.cfg.delivery.scheduleScale),
    );
    if (!o) return;
    this.delivered += o.delivered;
    this.dead += o.dead;
    if (!result.ok) this.failed++;
    this.metrics?.deliveriesCompleted(o);
    this.logger.debug(
      {
        notification_id: c.notificationId,
        event_id: c.event.id,
        attempt: c.attempts + 1,
        http_status: result.status,
        error: result.error,
      },
      result.ok ? 'chat message delivered' : 'chat attempt failed',
    );
  }

  /**
   * Run a recording statement, retrying database errors with backoff until it succeeds or the
   * lease margin has passed (then the lease expires and a claim counts a lost attempt).
   * @returns its result, or undefined when given up.
   */
  private async retryDb<T>(op: () => Promise<T>): Promise<T | undefined> {
    const giveUpAt = Date.now() + LEASE_MARGIN_MS;
    for (let i = 1; ; i++) {
      try {
        return await op();
      } catch (err) {
        this.dbErrors++;
        if (Date.now() > giveUpAt) {
          this.logger.error({ err: errorText(err) }, 'recording a chat outcome failed; giving up');
          return undefined;
        }
        const delay = backoffDelay(i, { baseMs: 250, capMs: 5_000 });
        this.logger.warn(
          { err: errorText(err), retry_in_ms: delay },
          'recording a chat outcome failed; retrying',
        );
        await sleep(delay);
      }
    }
  }
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
