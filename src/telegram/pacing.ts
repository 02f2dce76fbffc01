/**
 * Pacing of chat messages by the Bot API's limits (issue 13 item 3; DESIGN "The console and the
 * chat channel": "paced by Bot API limits shared in Redis"):
 *
 *   per chat   1 message per second          (https://core.telegram.org/bots/faq#my-bot-is-hitting-limits-how-do-i-avoid-this)
 *   per group  20 messages per minute        (groups and supergroups, on top of the per-chat limit)
 *   per bot    30 messages per second
 *
 * A message may be sent only when EVERY window that applies to it has room: {@link Pacer.take}
 * checks them all and, only when all have room, records the message in all of them, atomically
 * (one Lua script in Redis: src/redis/pacing.lua; one synchronous step in memory). So a message
 * refused by one window takes nothing from the others, and no window is ever over its limit, across
 * every worker sharing the Redis. The windows are TRUE sliding windows (as src/rate-limit/limiter.ts).
 *
 * Measured where Telegram measures (issue 21 item 4). Telegram counts a message when it RECEIVES
 * it, not when we start sending it: spacing the starts of two sends exactly one interval apart let
 * the spread of send-to-arrival delay (the start mark, event-loop lag, a new connection's
 * handshake, the network) bring arrivals closer than the interval: 25 of 80 sends to two chats
 * arrived 949-999 ms apart and were refused with 429. So a window counts each message from the END
 * of its send, not from its start: the slot is recorded IN FLIGHT when granted, and
 * {@link Pacer.release}d when the send's answer has been received; the window's interval then runs
 * from the release. Telegram received the message before it answered (causality, whatever the
 * delay and its spread), and the next message of that window is granted no earlier than the
 * release + the interval, so it can only arrive later still: two arrivals are never closer than
 * the interval, with no jitter estimate to get wrong and on any network. In the sliding-window
 * form: the (i + limit)-th slot is granted at least one window after the i-th was released.
 *
 * The margin this keeps below each limit is thus one slot's span, from its grant to its release:
 * the claim's start mark (chat-worker.ts), sendMessage's round trip, and the release's Redis round
 * trip. That is its whole cost in throughput: a chat gets one message per (1 s + span), a group 20
 * per (60 s + span), the bot 30 per (1 s + span). With the Bot API 50-300 ms away that is about
 * 77-95 % of the per-chat and per-bot limits and 99.5 % of the per-group one. Against the loopback
 * stand-in enforcing the limits on arrival (bench/telegram.ts), on a loaded 2-core machine: per
 * chat 97 %, per group 98 %, per bot 75-78 % (30 start marks at once, spans p50 60 ms, p99 626 ms),
 * and no 429; the start-spaced pacing before it: 72 %, 63 % and 58-63 %, with 37-62 429s a run,
 * each costing a retry_after (at least 1 s). Cheaper schemes do not hold: a fixed margin covers only
 * the spread it was sized for (a new connection's TLS handshake alone is 2-3 round trips), and the
 * arrival time is not observable (the answer's `date` is whole seconds).
 *
 * In flight, an entry counts as ending at its provisional end, `flightMs` after the grant (the
 * caller's bound on when its send can end: its deadline plus slack), so a worker that dies mid-send
 * blocks its windows at most flightMs + the interval. A refusal whose freeing entry is still in
 * flight answers `waitMs` = the window's length (the least it can be: that send ends no earlier
 * than now), and the caller asks again then. A send that got no answer (a network error, its
 * deadline) should be released with a linger (its bytes may still be on the way). The guarantee
 * needs the send to be over, bytes included, by the provisional end: chat-worker.ts sends within
 * 500 ms of asking for the slot (else it takes a fresh one) and aborts at its deadline. Two cases
 * are left to Telegram's 429 (recorded, not an attempt): a process stalled past all that, and a
 * send without an answer that Telegram counts later than its linger (a request stuck in a queue
 * may be counted whenever the server gets to it: no bound exists).
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
  /** True when the message may be sent now (and was counted, in flight, in every window). */
  granted: boolean;
  /**
   * Granted: the slot's time, ms since the epoch (the Redis server's clock with Redis, this
   * process's otherwise): the instant the attempt is allowed to start. Refused: the time asked.
   */
  atMs: number;
  /**
   * Refused: ms until the windows that refused have room, or may have (> 0; see the file's
   * comment for a window whose freeing send is in flight). 0 when granted.
   */
  waitMs: number;
  /** Granted: the slot's entry in every window, for {@link Pacer.release}. '' when refused. */
  token: string;
}

/** Takes pacing slots (see the file's comment). */
export interface Pacer {
  /**
   * Take one slot in every window of `windows`, or none. A granted slot counts in flight until
   * {@link Pacer.release}, as ending `flightMs` after now.
   * @param flightMs the provisional end of the slot's send, ms after now (>= 0): when it will have
   *   ended at the latest (its deadline plus slack).
   * @param nowMs the time, ms since the epoch; default: the Redis server's clock (Redis) or
   *   Date.now() (memory). Tests pass their own.
   * @throws the Redis error for a Redis pacer (FallbackPacer never throws).
   */
  take(windows: readonly PacingWindow[], flightMs: number, nowMs?: number): Promise<PacingSlot>;
  /**
   * The send of the granted slot `token` is over (its answer received, or it was never sent): its
   * entry in every window of `windows` now ends `lingerMs` after now instead of at its provisional
   * end. Only ever moves an end earlier; a token that is unknown or already gone is ignored.
   * @param lingerMs how long after now the send may still reach Telegram: 0 once its answer was
   *   received; more when it got none (see the file's comment).
   * @throws the Redis error for a Redis pacer (FallbackPacer never throws).
   */
  release(
    windows: readonly PacingWindow[],
    token: string,
    lingerMs?: number,
    nowMs?: number,
  ): Promise<void>;
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

/** The id of the per-chat window of `chatId` (what a 429's retry_after holds). */
export function chatWindowId(chatId: string, botId: string): string {
  return `chat:${botId}:${chatId}`;
}

/**
 * The windows of one message to `chatId`.
 * @param chatId Bot API chat id (decimal text; negative for groups and supergroups).
 * @param botId the bot's id (getMe), so two bots sharing a Redis do not share a window.
 * @param scale config.telegram.pacingScale, in (0, 1].
 */

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

/** One entry of a window: a slot and when its send ended (or will have, while in flight). */
interface Entry {
  token: string;
  /** The send's end, ms since the epoch; ahead of now while in flight (the provisional end). */
  endsMs: number;
}

interface Log {
  /** Ascending by endsMs. */
  entries: Entry[];
  windowMs: number;
}

/**
 * In-process windows: exact, but per process (a single-process deployment, and the fallback while
 * Redis is unreachable). Memory: at most `limit` entries per window id in use; ids idle for a
 * whole window are swept at most once a minute.
 */
export class MemoryPacer implements Pacer {
  private readonly logs = new Map<string, Log>();
  /** Held windows: id → until, ms since the epoch (Date.now()). */
  private readonly holds = new Map<string, number>();
  private lastSweepMs = 0;
  private nextToken = 1;

  async hold(windowId: string, ms: number): Promise<void> {
    const until = Date.now() + Math.max(0, ms);
    if ((this.holds.get(windowId) ?? 0) < until) this.holds.set(windowId, until);
  }

  async take(
    windows: readonly PacingWindow[],
    flightMs: number,
    nowMs: number = Date.now(),
  ): Promise<PacingSlot> {
    this.sweep(nowMs);
    let wait = 0;
    const realNow = Date.now();
    for (const w of windows) {
      const held = this.holds.get(w.id);
      if (held !== undefined) {
        if (held > realNow) wait = Math.max(wait, held - realNow);
        else this.holds.delete(w.id);
      }
      const log = this.log(w);
      // The window is (now - windowMs, +inf): as pacing.lua.
      while (log.entries.length > 0 && (log.entries[0]?.endsMs ?? 0) <= nowMs - w.windowMs) {
        log.entries.shift();
      }
      const count = log.entries.length;
      if (count >= w.limit) {
        const ends = log.entries[count - w.limit]?.endsMs ?? nowMs;
        // In flight: that send ends no earlier than now, so the window has no room for windowMs.
        wait = Math.max(wait, ends <= nowMs ? ends + w.windowMs - nowMs : w.windowMs);
      }
    }
    if (wait > 0) return { granted: false, atMs: nowMs, waitMs: wait, token: '' };
    const token = `m${this.nextToken++}`;
    const endsMs = nowMs + Math.max(0, flightMs);
    for (const w of windows) insertSorted(this.log(w).entries, { token, endsMs });
    return { granted: true, atMs: nowMs, waitMs: 0, token };
  }

  async release(
    windows: readonly PacingWindow[],
    token: string,
    lingerMs = 0,
    nowMs: number = Date.now(),
  ): Promise<void> {
    const endsMs = nowMs + Math.max(0, lingerMs);
    for (const w of windows) {
      const entries = this.logs.get(w.id)?.entries;
      const i = entries?.findIndex((e) => e.token === token) ?? -1;
      const e = entries?.[i];
      if (!entries || !e || e.endsMs <= endsMs) continue;
      entries.splice(i, 1);
      insertSorted(entries, { token, endsMs });
    }
  }

  private log(w: PacingWindow): Log {
    let log = this.logs.get(w.id);
    if (!log) {
      log = { entries: [], windowMs: w.windowMs };
      this.logs.set(w.id, log);
    }
    return log;
  }

  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < 60_000) return;
    this.lastSweepMs = nowMs;
    for (const [id, log] of this.logs) {
      const newest = log.entries[log.entries.length - 1];
      if (newest === undefined || newest.endsMs <= nowMs - log.windowMs) this.logs.delete(id);
    }
    const realNow = Date.now();
    for (const [id, until] of this.holds) if (until <= realNow) this.holds.delete(id);
  }
}

/** Insert `e` into `entries`, kept ascending by endsMs (a window holds at most `limit`). */
function insertSorted(entries: Entry[], e: Entry): void {
  let i = entries.length;
  while (i > 0 && (entries[i - 1]?.endsMs ?? 0) > e.endsMs) i--;
  entries.splice(i, 0, e);
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

  async take(
    windows: readonly PacingWindow[],
    flightMs: number,
    nowMs?: number,
  ): Promise<PacingSlot> {
    const t = Date.now();
    if (!this.down || t >= this.nextProbeMs) {
      if (this.down) this.nextProbeMs = t + this.probeIntervalMs;
      try {
        const r = await this.primary.take(windows, flightMs, nowMs);
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
    return this.fallback.take(windows, flightMs, nowMs);
  }

  /**
   * Released where it may have been granted: in process (a no-op for a Redis slot's token), and in
   * Redis unless down. A Redis slot whose release fails keeps counting until its provisional end:
   * only stricter.
   */
  async release(
    windows: readonly PacingWindow[],
    token: string,
    lingerMs?: number,
    nowMs?: number,
  ): Promise<void> {
    await this.fallback.release(windows, token, lingerMs, nowMs);
    if (this.down) return;
    try {
      await this.primary.release(windows, token, lingerMs, nowMs);
    } catch (err) {
      this.logger.warn(
        { limiter: 'telegram-pacing', err: err instanceof Error ? err.message : String(err) },
        'redis unreachable: a chat pacing slot was not released; it counts until its provisional end',
      );
    }
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
