/**
 * Request rate limits (SPEC §Limits "Rate limit"): a sliding 60-second window per API key, at
 * the account's plan rate (src/accounts/plans.ts). Unauthenticated `/v1/*` requests are counted per
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

import ipaddr from 'ipaddr.js';
import type { Logger } from '../common/logger.js';

/**
 * How a client address is counted in the per-address windows (`ip:…`, `login:{…}`, …): an IPv4
 * address as it is (an IPv4-mapped IPv6 one, `::ffff:192.0.2.7`, as its IPv4), an IPv6 address
 * by its /64 network (`2001:db8:1:2::/64`). One host or subscriber is given a whole /64 at least
 * (RFC 6177), so counting each of its 2^64 addresses apart would hand it a fresh window per
 * request. `ip` is `request.ip` (the socket peer, or the forwarded client behind a trusted proxy);
 * text that is not an address (none is expected) is used as it is.
 */
export function clientAddressKey(ip: string): string {
  if (!ip.includes(':')) return ip;
  try {
    const addr = ipaddr.process(ip);
    if (addr.kind() === 'ipv4') return addr.toString();
    const words = (addr as ipaddr.IPv6).parts.slice(0, 4).map((w) => w.toString(16));
    return `${words.join(':')}::/64`;
  } catch {
    return ip;
  }
}

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

/** One sliding window a {@link RateLimiter.reserve} counts in. */
export interface WindowLimit {
  /** What is counted: `login:{<address>}:<e-mail digest>`, `login-ip:{<address>}`, … */
  id: string;
  /** Entries allowed in the window (≥ 1). */
  limit: number;
  /** The window's length, ms. One id is always used with one window length. */
  windowMs: number;
}

/** The outcome of {@link RateLimiter.reserve}. */
export interface Reservation {
  /** True when one entry was recorded in every window; false when none was (one was full). */
  allowed: boolean;
  /** When refused: whole seconds until every window has room (≥ 1). 0 when allowed. */
  retryAfterSeconds: number;
  /**
   * When allowed: the entries the FIRST window still has room for after this one (0: the next
   * attempt is refused unless this one is given back). Absent when refused.
   */
  remaining?: number;
  /**
   * Give the entry back: remove it from every window it was recorded in (nothing when refused,
   * or when it has left its window). Idempotent. Rejects when the shared store is unreachable
   * (the entry then stays until it leaves its window).
   */
  release(): Promise<void>;
}

export interface RateLimiter {
  /**
   * Count a request of `id` against `limit` requests per sliding window, if there is room.
   * @param id what is limited: `key:<api key id>`, `ip:<client address>`, `login-ip:…`.
   * @param limit requests per window (≥ 1).
   * @param nowMs the current time, ms since the epoch (default Date.now(); tests pass their own).
   * @param windowMs the window's length, ms (default WINDOW_MS, SPEC's 60 s; the console's login
   *   failures use 15 minutes). One id is always used with one window length.
   */
  hit(id: string, limit: number, nowMs?: number, windowMs?: number): Promise<RateLimitResult>;
  /**
   * Whether a request of `id` would be allowed now, recording nothing: `remaining` is the room
   * left (limit − count), `retryAfterSeconds` as for hit when there is none. Parameters as hit.
   */
  peek(id: string, limit: number, nowMs?: number, windowMs?: number): Promise<RateLimitResult>;
  /**
   * Atomically record one entry in EVERY window of `windows` when each has room, else in none:
   * counting before the work it guards, so that N parallel requests cannot all pass a check
   * made before any of them was counted (issue 17 item 2: a login attempt is counted before
   * argon2 runs, and given back with `release` when it succeeds). Refused reservations record
   * nothing, like refused requests.
   * @param nowMs as for hit.
   */
  reserve(windows: readonly WindowLimit[], nowMs?: number): Promise<Reservation>;
}

/** A refused reservation: nothing was recorded, so there is nothing to give back. */
export function refusedReservation(retryAfterSeconds: number): Reservation {
  return { allowed: false, retryAfterSeconds, release: async () => {} };
}

/** The accepted requests of one id inside the window: timestamps ascending, from `head`. */
interface Log {
  ts: number[];
  head: number;
  /** The window this id is counted in, ms. */
  windowMs: number;
}

/**
 * In-process sliding windows: per id, the log of accepted timestamps in the window (at most
 * `limit` of them, so memory is bounded by the limit per active id). Ids idle for a whole window
 * are swept at most once per window, so the map does not grow with every client ever seen.
 */
export class MemoryRateLimiter implements RateLimiter {
  private readonly logs = new Map<string, Log>();
  private lastSweepMs = 0;

  async hit(
    id: string,
    limit: number,
    nowMs: number = Date.now(),
    windowMs: number = WINDOW_MS,
  ): Promise<RateLimitResult> {
    return this.count(id, limit, nowMs, windowMs, true);
  }

  async peek(
    id: string,
    limit: number,
    nowMs: number = Date.now(),
    windowMs: number = WINDOW_MS,
  ): Promise<RateLimitResult> {
    return this.count(id, limit, nowMs, windowMs, false);
  }

  async reserve(windows: readonly WindowLimit[], nowMs: number = Date.now()): Promise<Reservation> {
    // No await between the checks and the records: atomic within the process.
    this.sweep(nowMs);
    let waitMs = 0;
    for (const w of windows) {
      const log = this.trimmed(w.id, w.windowMs, nowMs);
      const count = log.ts.length - log.head;
      if (count >= w.limit) {
        const freeing = log.ts[log.head + count - w.limit] ?? nowMs;
        waitMs = Math.max(waitMs, freeing + w.windowMs - nowMs, 1);
      }
    }
    if (waitMs > 0) return refusedReservation(Math.max(1, Math.ceil(waitMs / 1000)));
    const recorded = windows.map((w) => {
      const log = this.trimmed(w.id, w.windowMs, nowMs);
      const last = log.ts[log.ts.length - 1];
      const at = last !== undefined && last > nowMs ? last : nowMs;
      log.ts.push(at);
      return { id: w.id, at };
    });
    let released = false;
    const w0 = windows[0];
    const log0 = w0 ? this.logs.get(w0.id) : undefined;
    return {
      allowed: true,
      retryAfterSeconds: 0,
      ...(w0 && log0 ? { remaining: Math.max(0, w0.limit - (log0.ts.length - log0.head)) } : {}),
      release: async () => {
        if (released) return;
        released = true;
        for (const { id, at } of recorded) {
          const log = this.logs.get(id);
          if (!log) continue;
          // Any entry with the same time is the same to the window: remove the newest such one.
          const i = log.ts.lastIndexOf(at);
          if (i >= log.head) log.ts.splice(i, 1);
        }
      },
    };
  }

  /** The log of `id` with the entries that left the window (ending at `nowMs`) dropped. */
  private trimmed(id: string, windowMs: number, nowMs: number): Log {
    let log = this.logs.get(id);
    if (!log) {
      log = { ts: [], head: 0, windowMs };
      this.logs.set(id, log);
    }
    const horizon = nowMs - windowMs;
    while (log.head < log.ts.length && (log.ts[log.head] ?? 0) <= horizon) log.head++;
    // Compact now and then: amortised O(1) per request.
    if (log.head > 64 && log.head * 2 > log.ts.length) {
      log.ts = log.ts.slice(log.head);
      log.head = 0;
    }
    return log;
  }

  private count(
    id: string,
    limit: number,
    nowMs: number,
    windowMs: number,
    record: boolean,
  ): RateLimitResult {
    this.sweep(nowMs);
    const log = this.trimmed(id, windowMs, nowMs);
    const count = log.ts.length - log.head;
    if (count < limit && !record) {
      return { allowed: true, limit, remaining: limit - count, retryAfterSeconds: 0 };
    }
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
    const waitMs = freeing + windowMs - nowMs;
    return {
      allowed: false,
      limit,
      remaining: 0,
      retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
    };
  }

  /** Drop the logs whose newest entry has left their window (a sweep at most once a minute). */
  private sweep(nowMs: number): void {
    if (nowMs - this.lastSweepMs < WINDOW_MS) return;
    this.lastSweepMs = nowMs;
    for (const [id, log] of this.logs) {
      const newest = log.ts[log.ts.length - 1];
      if (newest === undefined || newest <= nowMs - log.windowMs) this.logs.delete(id);
    }
  }

  /** Ids currently tracked (tests and metrics). */
  get size(): number {
    return this.logs.size;
  }
}

export interface FallbackRateLimiterOptions {
  /** Where the transitions are logged (warn, once each way). */
  logger: Logger;
  /** The windows used while the primary fails. Default: a new MemoryRateLimiter (per replica). */
  fallback?: RateLimiter;
  /** While on the fallback, at most one request per this many ms tries the primary. Default 1000. */
  probeIntervalMs?: number;
  /** Name of the primary in logs. Default 'redis'. */
  name?: string;
}

/**
 * A shared limiter (Redis) that degrades to in-process windows while it fails (DESIGN
 * decisions: "Redis unreachable: the API keeps serving on an in-process window (per replica),
 * logs it, /healthz answers 503"; the 503 is the health route's own PING, not this class).
 *
 * - Up: every request goes to the primary. One that fails (unreachable, command timeout)
 *   switches to the fallback, logged once (warn), and that request is answered by the fallback:
 *   a Redis outage never becomes an API error.
 * - Down: requests go to the fallback; at most one request per `probeIntervalMs` (1 s) tries the
 *   primary again, so an unanswering Redis costs one command timeout per second, not one per
 *   request. The first probe that succeeds switches back, logged once (warn).
 * - Outcomes of requests started before the last switch are ignored: a late success from before
 *   an outage, or a late failure from before the recovery, does not flip the state again.
 *
 * What this costs: while down, each replica counts alone (N replicas allow up to N × limit), and
 * the counts of either side are not carried over a switch (a client may get up to one extra
 * window's worth once per switch). Both bounded, both the price of not refusing service.
 */
export class FallbackRateLimiter implements RateLimiter {
  private readonly logger: Logger;
  private readonly fallback: RateLimiter;
  private readonly probeIntervalMs: number;
  private readonly name: string;
  private down = false;
  /** Incremented at every switch; a request acts on its outcome only in the epoch it began. */
  private epoch = 0;
  private nextProbeMs = 0;

  constructor(
    private readonly primary: RateLimiter,
    opts: FallbackRateLimiterOptions,
  ) {
    this.logger = opts.logger;
    this.fallback = opts.fallback ?? new MemoryRateLimiter();
    this.probeIntervalMs = opts.probeIntervalMs ?? 1_000;
    this.name = opts.name ?? 'redis';
  }

  /** True while requests are counted on the fallback. */
  get degraded(): boolean {
    return this.down;
  }

  /**
   * Start on the fallback because the primary is known to be down (Redis not connected when the
   * process starts): logged now (the same warning as a switch), not at the first request, and the
   * first request tries the primary, so the return to it is logged too. No-op when already down.
   * @param reason why, for the log line.
   */
  markDown(reason: string): void {
    if (this.down) return;
    this.down = true;
    this.epoch++;
    this.nextProbeMs = 0;
    this.logger.warn(
      { limiter: this.name, err: reason },
      `${this.name} unreachable: rate limits fall back to in-process windows (per replica)`,
    );
  }

  /**
   * Back on the primary because it is known to answer again (the Redis client connected): logged
   * now (the same warning as a switch back), without waiting for a request to probe it. No-op
   * when up.
   */
  markUp(): void {
    if (!this.down) return;
    this.down = false;
    this.epoch++;
    this.logger.warn(
      { limiter: this.name },
      `${this.name} reachable again: rate limits are shared between replicas again`,
    );
  }

  /** See RateLimiter.hit. `nowMs` also clocks the probes (tests); default Date.now(). */
  async hit(
    id: string,
    limit: number,
    nowMs?: number,
    windowMs?: number,
  ): Promise<RateLimitResult> {
    return this.run(nowMs, (l) => l.hit(id, limit, nowMs, windowMs));
  }

  /** See RateLimiter.peek; on the primary or the fallback as hit. */
  async peek(
    id: string,
    limit: number,
    nowMs?: number,
    windowMs?: number,
  ): Promise<RateLimitResult> {
    return this.run(nowMs, (l) => l.peek(id, limit, nowMs, windowMs));
  }

  /**
   * See RateLimiter.reserve; on the primary or the fallback as hit. The reservation is given
   * back to the limiter that made it; a release that fails there (Redis went away since) leaves
   * the entry to expire with its window: one extra counted entry, not an error for the caller.
   */
  async reserve(windows: readonly WindowLimit[], nowMs?: number): Promise<Reservation> {
    const r = await this.run(nowMs, (l) => l.reserve(windows, nowMs));
    return { ...r, release: () => r.release().catch(() => undefined) };
  }

  private async run<T>(
    nowMs: number | undefined,
    op: (limiter: RateLimiter) => Promise<T>,
  ): Promise<T> {
    const t = nowMs ?? Date.now();
    if (!this.down || t >= this.nextProbeMs) {
      const epoch = this.epoch;
      if (this.down) this.nextProbeMs = t + this.probeIntervalMs;
      try {
        const r = await op(this.primary);
        if (this.down && epoch === this.epoch) {
          this.down = false;
          this.epoch++;
          this.logger.warn(
            { limiter: this.name },
            `${this.name} reachable again: rate limits are shared between replicas again`,
          );
        }
        return r;
      } catch (err) {
        if (!this.down && epoch === this.epoch) {
          this.down = true;
          this.epoch++;
          this.nextProbeMs = t + this.probeIntervalMs;
          this.logger.warn(
            { limiter: this.name, err: err instanceof Error ? err.message : String(err) },
            `${this.name} unreachable: rate limits fall back to in-process windows (per replica)`,
          );
        }
      }
    }
    return op(this.fallback);
  }
}
