/**
 * Request rate limits (SPEC §Limits "Rate limit"): a sliding 60-second window per API key, at
 * the account's plan rate (src/api/plans.ts). Unauthenticated `/v1/*` requests are counted per
 * client IP at the Free rate (DESIGN decisions).
 *
 * `RateLimiter` is the seam: `MemoryRateLimiter` (this file) keeps the windows in the process —
 * exact, but per replica, which is what a single-process deployment (and the fallback when Redis
 * is unreachable) needs; a Redis implementation shares the windows between replicas behind the
 * same interface.
 *
 * Semantics, the same for every implementation:
 * - The window is TRUE sliding: a request at time t is allowed when fewer than `limit` requests
 *   were ACCEPTED in (t − 60 s, t]. No fixed buckets, so no burst of 2×limit across a boundary.
 * - Refused requests do NOT count. A client hammering while limited is served again as soon as
 *   the oldest accepted request leaves the window, and `Retry-After` is exact: it says when that
 *   happens (whole seconds, rounded up, at least 1).
 */

/** Length of the sliding window, ms (SPEC: "a sliding 60-second window"). */
export const WINDOW_MS = 60_000;

export interface RateLimitResult {
  /** True when the request may proceed (and was counted). */
  allowed: boolean;
  /** The limit applied: requests per window. Sent as `X-RateLimit-Limit`. */
  limit: number;
  /** Requests still allowed in the window after this one. Sent as `X-RateLimit-Remaining`. */
  remaining: number;
  /** When refused: whole seconds until a request would be allowed (≥ 1). 0 when allowed. */
  retryAfterSeconds: number;
}

export interface RateLimiter {
  /**
   * Count a request of `id` against `limit` requests per sliding 60 s, if there is room.
   * @param id what is limited: `key:<api key id>` or `ip:<client address>`.
   * @param limit requests per window (≥ 1).
   * @param nowMs the current time, ms since the epoch (default Date.now(); tests pass their own).
   */
  hit(id: string, limit: number, nowMs?: number): Promise<RateLimitResult>;
}

/** The accepted requests of one id inside the window: timestamps ascending, from `head`. */
interface Log {
  ts: number[];
  head: number;
}

/**
 * In-process sliding windows: per id, the log of accepted timestamps in the window (at most
 * `limit` of them, so memory is bounded by the limit per active id). Ids idle for a whole window
 * are swept at most once per window, so the map does not grow with every client ever seen.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, Log>();
  private lastSweepMs = 0;

  async hit(id: string, limit: number, nowMs: number = Date.now()): Promise<RateLimitResult> {
    this.sweep(nowMs);
    let log = this.logs.get(id);
    if (!log) {
      log = { ts: [], head: 0 };
      this.logs.set(id, log);
    }
    const horizon = nowMs - WINDOW_MS;
    while (log.head < log.ts.length && (log.ts[log.head] ?? 0) <= horizon) log.head++;
    // Compact now and then: amortised O(1) per request.
    if (log.head > 64 && log.head * 2 > log.ts.length) {
      log.ts = log.ts.slice(log.head);
      log.head = 0;
    }
    const count = log.ts.length - log.head;
    if (count < limit) {
      // A clock that steps back must not unsort the log: never record before the newest entry.
      const last = log.ts[log.ts.length - 1];
      log.ts.push(last !== undefined && last > nowMs ? last : nowMs);
      return { allowed: true, limit, remaining: limit - count - 1, retryAfterSeconds: 0 };
    }
    // Refused. Room appears when count − limit + 1 entries have left the window, i.e. when the
    // entry at offset count − limit does (the oldest one when count == limit; a lowered limit
    // makes count exceed it).
    const freeing = log.ts[log.head + count - limit] ?? nowMs;
    const waitMs = freeing + WINDOW_MS - nowMs;
    return {
      allowed: false,
      limit,
      remaining: 0,
      retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
    };
  }

  /** Drop the logs whose newest entry has left the window (at most once per window). */
  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < WINDOW_MS) return;
    this.lastSweepMs = nowMs;
    const horizon = nowMs - WINDOW_MS;
    for (const [id, log] of this.logs) {
      const newest = log.ts[log.ts.length - 1];
      if (newest === undefined || newest <= horizon) this.logs.delete(id);
    }
  }

  /** Ids currently tracked (tests and metrics). */
  get size(): number {
    return this.logs.size;
  }
}
