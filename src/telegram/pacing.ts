/**
 * Pacing of chat messages by the Bot API's limits (issue 13 item 3; DESIGN "The console and the
 * chat channel": "paced by Bot API limits shared in Redis"):
 *
 *   per chat   1 message per second          (https://core.telegram.org/bots/faq#broadcasting-to-users)
 *   per group  20 messages per minute        (groups and supergroups, on top of the per-chat limit)
 *   per bot    30 messages per second
 *
 * A message may be sent only when EVERY window that applies to it has room: {@link Pacer.take}
 * checks them all and, only when all have room, records the message in all of them, atomically
 * (one Lua script in Redis: src/redis/pacing.lua; one synchronous step in memory). So a message
 * refused by one window takes nothing from the others, and no window is ever over its limit, across
 * every worker sharing the Redis. The windows are TRUE sliding windows (as src/rate-limit/limiter.ts):
 * the i-th message and the (i + limit)-th are at least a window apart.
 *
 * A refusal says how long until the window that refused has room (`waitMs`): the worker waits that
 * long (or defers the notification in the outbox); waiting for a slot is not an attempt.
 * `config.telegram.pacingScale` multiplies the window lengths (1 = the Bot API's; tests and the
 * benchmark compress them, e.g. 0.05 → 1 message per 50 ms per chat).
 *
 * Holds ({@link Pacer.hold}): a Bot API 429 with `retry_after` asks the bot to wait that long
 * before sending to that chat again, whatever the message. The worker that got it holds the chat's
 * window for retry_after (in the same store as the windows, so every worker sharing the Redis
 * respects it); while a window is held, `take` refuses every message that needs it, with `waitMs`
 * the rest of the hold. retry_after is the Bot API's own figure: it is never scaled.
 */
import type { Logger } from '../common/logger.js';

/** One window: at most `limit` messages in any `windowMs`. */
export interface PacingWindow {
  /** What is limited, e.g. `chat:-100123`, `group:-100123`, `bot:123456`. */
  id: string;
  limit: number;
  windowMs: number;
}

/** The answer of {@link Pacer.take}. */
export interface PacingSlot {
  /** True when the message may be sent now (and was counted in every window). */
  granted: boolean;
  /**
   * Granted: the slot's time, ms since the epoch (the Redis server's clock with Redis, this
   * process's otherwise): the instant the attempt is allowed to start. Refused: the time asked.
   */
  atMs: number;
  /** Refused: ms until the windows that refused have room (> 0). 0 when granted. */
  waitMs: number;
}

/** Takes pacing slots (see the file's comment). */
export interface Pacer {
  /**
   * Take one slot in every window of `windows`, or none.
   * @param nowMs the time, ms since the epoch; default: the Redis server's clock (Redis) or
   *   Date.now() (memory). Tests pass their own.
   * @throws the Redis error for a Redis pacer (FallbackPacer never throws).
   */
  take(windows: readonly PacingWindow[], nowMs?: number): Promise<PacingSlot>;
  /**
   * Hold the window `windowId` for `ms` from now (a Bot API 429's retry_after): until then, take()
   * refuses every message that needs it. A shorter hold never shortens a longer one.
   * @throws the Redis error for a Redis pacer (FallbackPacer never throws).
   */
  hold(windowId: string, ms: number): Promise<void>;
}

/** The Bot API's limits (see the file's comment): count and window, ms. */
export const BOT_API_LIMITS = {
  perChat: { limit: 1, windowMs: 1_000 },
  perGroup: { limit: 20, windowMs: 60_000 },
  perBot: { limit: 30, windowMs: 1_000 },
} as const;

/**
 * The windows of one message to `chatId`.
 * @param chatId Bot API chat id (decimal text; negative for groups and supergroups).
 * @param botId the bot's id (getMe), so two bots sharing a Redis do not share a window.
 * @param scale config.telegram.pacingScale, in (0, 1].
 */
/** The id of the per-chat window of `chatId` (what a 429's retry_after holds). */
export function chatWindowId(chatId: string, botId: string): string {
  return `chat:${botId}:${chatId}`;
}

export function chatWindows(chatId: string, botId: string, scale: number): PacingWindow[] {
  const w = (id: string, l: { limit: number; windowMs: number }): PacingWindow => ({
    id,
    limit: l.limit,
    windowMs: Math.max(1, Math.round(l.windowMs * scale)),
  });
  // Private chats have positive ids; groups, supergroups and channels negative ones.
  const group = chatId.startsWith('-');
  return [
    w(chatWindowId(chatId, botId), BOT_API_LIMITS.perChat),
    ...(group ? [w(`group:${botId}:${chatId}`, BOT_API_LIMITS.perGroup)] : []),
    w(`bot:${botId}`, BOT_API_LIMITS.perBot),
  ];
}

interface Log {
  ts: number[];
  windowMs: number;
}

/**
 * In-process windows: exact, but per process (a single-process deployment, and the fallback while
 * Redis is unreachable). Memory: at most `limit` timestamps per window id in use; ids idle for a
 * whole window are swept at most once a minute.
 */
export class MemoryPacer implements Pacer {
  private readonly logs = new Map<string, Log>();
  /** Held windows: id → until, ms since the epoch (Date.now()). */
  private readonly holds = new Map<string, number>();
  private lastSweepMs = 0;

  async hold(windowId: string, ms: number): Promise<void> {
    const until = Date.now() + Math.max(0, ms);
    if ((this.holds.get(windowId) ?? 0) < until) this.holds.set(windowId, until);
  }

  async take(windows: readonly PacingWindow[], nowMs: number = Date.now()): Promise<PacingSlot> {
    this.sweep(nowMs);
    let wait = 0;
    let at = nowMs;
    const realNow = Date.now();
    for (const w of windows) {
      const held = this.holds.get(w.id);
      if (held !== undefined) {
        if (held > realNow) wait = Math.max(wait, held - realNow);
        else this.holds.delete(w.id);
      }
      const log = this.log(w);
      while (log.ts.length > 0 && (log.ts[0] ?? 0) <= nowMs - w.windowMs) log.ts.shift();
      const newest = log.ts[log.ts.length - 1];
      if (newest !== undefined && newest > at) at = newest;
      if (log.ts.length >= w.limit) {
        const freeing = log.ts[log.ts.length - w.limit] ?? nowMs;
        wait = Math.max(wait, freeing + w.windowMs - nowMs);
      }
    }
    if (wait > 0) return { granted: false, atMs: nowMs, waitMs: wait };
    for (const w of windows) this.log(w).ts.push(at);
    return { granted: true, atMs: at, waitMs: 0 };
  }

  private log(w: PacingWindow): Log {
    let log = this.logs.get(w.id);
    if (!log) {
      log = { ts: [], windowMs: w.windowMs };
      this.logs.set(w.id, log);
    }
    return log;
  }

  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < 60_000) return;
    this.lastSweepMs = nowMs;
    for (const [id, log] of this.logs) {
      const newest = log.ts[log.ts.length - 1];
      if (newest === undefined || newest <= nowMs - log.windowMs) this.logs.delete(id);
    }
    const realNow = Date.now();
    for (const [id, until] of this.holds) if (until <= realNow) this.holds.delete(id);
  }
}

/**
 * A shared pacer (Redis) that degrades to in-process windows while it fails, as
 * FallbackRateLimiter does for request limits: one warn per transition, at most one probe of the
 * primary per `probeIntervalMs` (1 s) while down. While down, each worker process paces alone
 * (N workers may send up to N × the limits): the price of not stopping deliveries; the Bot API
 * answers any excess with 429, which is rescheduled without using an attempt.
 */
export class FallbackPacer implements Pacer {
  private down = false;
  private nextProbeMs = 0;
  private readonly fallback = new MemoryPacer();

  constructor(
    private readonly primary: Pacer,
    private readonly logger: Logger,
    private readonly probeIntervalMs = 1_000,
  ) {}

  /** True while slots are taken in process. */
  get degraded(): boolean {
    return this.down;
  }

  async take(windows: readonly PacingWindow[], nowMs?: number): Promise<PacingSlot> {
    const t = Date.now();
    if (!this.down || t >= this.nextProbeMs) {
      if (this.down) this.nextProbeMs = t + this.probeIntervalMs;
      try {
        const r = await this.primary.take(windows, nowMs);
        if (this.down) {
          this.down = false;
          this.logger.warn(
            { limiter: 'telegram-pacing' },
            'redis reachable again: chat pacing is shared again',
          );
        }
        return r;
      } catch (err) {
        if (!this.down) {
          this.down = true;
          this.nextProbeMs = t + this.probeIntervalMs;
          this.logger.warn(
            { limiter: 'telegram-pacing', err: err instanceof Error ? err.message : String(err) },
            'redis unreachable: chat pacing falls back to in-process windows (per worker)',
          );
        }
      }
    }
    return this.fallback.take(windows, nowMs);
  }

  /**
   * Held in Redis when reachable, and always in process too, so a hold outlives Redis going away
   * (this worker then still respects it).
   */
  async hold(windowId: string, ms: number): Promise<void> {
    await this.fallback.hold(windowId, ms);
    if (this.down) return;
    try {
      await this.primary.hold(windowId, ms);
    } catch (err) {
      this.logger.warn(
        { limiter: 'telegram-pacing', err: err instanceof Error ? err.message : String(err) },
        'redis unreachable: a chat hold (429 retry_after) is kept in process only',
      );
    }
  }
}
