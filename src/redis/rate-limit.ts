/**
 * Rate-limit windows in Redis, shared by every API replica (SPEC §Limits "Rate limit"; DESIGN
 * §Redis). Same semantics as the in-process MemoryRateLimiter (src/rate-limit/limiter.ts): a TRUE
 * sliding 60 s window per id, refused requests not counted, exact `Retry-After`.
 *
 * One request = one atomic script (src/redis/sliding-window.lua; a reservation in several windows
 * at once, src/redis/reserve.lua), run by EVALSHA through ioredis `defineCommand` (which falls
 * back to EVAL once after a NOSCRIPT): trim, count, and record when there is room. Time is the Redis server's clock (TIME inside the script), so replicas
 * whose clocks disagree still share one window. Key: `tw:rl:<id>`, a sorted set of at most
 * `limit` entries that expires when its newest entry leaves the window.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from '../common/logger.js';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  type RateLimitResult,
  type Reservation,
  refusedReservation,
  WINDOW_MS,
  type WindowLimit,
} from '../rate-limit/limiter.js';
import { closeRedis, createRedis, luaScript, pingRedis, type Redis, waitReady } from './client.js';

/** Default key prefix: the window of id `key:key_…` is `tw:rl:key:key_…`. */
export const RATE_LIMIT_PREFIX = 'tw:rl:';

/** ioredis command name of src/redis/sliding-window.lua. */
const COMMAND = 'twSlidingWindow';
/** ioredis command name of src/redis/reserve.lua. */
const RESERVE = 'twReserve';

interface SlidingWindowCommand {
  /** key, limit, window ms, now ms or '' (server clock), member suffix → [allowed, remaining, wait ms] */
  [COMMAND](
    key: string,
    limit: number,
    windowMs: number,
    nowMs: string,
    suffix: string,
    mode: string,
  ): Promise<unknown>;
  /** n window keys, then now ms or '', member, (limit, window ms) × n → [allowed, wait ms, remaining] */
  [RESERVE](numKeys: number, ...keysThenArgs: string[]): Promise<unknown>;
}

export interface RedisRateLimiterOptions {
  /** Prefix of every window key. Default RATE_LIMIT_PREFIX (`tw:rl:`); tests use their own. */
  prefix?: string;
}

/** Sliding windows in Redis (see module doc). Errors (unreachable, timeout) reject `hit`. */
export class RedisRateLimiter implements RateLimiter {
  private readonly redis: Redis & SlidingWindowCommand;
  private readonly prefix: string;

  constructor(redis: Redis, opts: RedisRateLimiterOptions = {}) {
    if (!(COMMAND in redis)) {
      redis.defineCommand(COMMAND, { numberOfKeys: 1, lua: luaScript('sliding-window.lua') });
    }
    if (!(RESERVE in redis)) {
      // numberOfKeys omitted: the first argument of each call gives it (one key per window).
      redis.defineCommand(RESERVE, { lua: luaScript('reserve.lua') });
    }
    // defineCommand adds the method at run time; the interface above is its type.
    this.redis = redis as Redis & SlidingWindowCommand;
    this.prefix = opts.prefix ?? RATE_LIMIT_PREFIX;
  }

  /**
   * Count a request of `id` in `tw:rl:<id>` (see RateLimiter.hit).
   * @param nowMs the time of the request, ms since the epoch. Omitted (production): the Redis
   *   server clock. Tests pass it to place requests exactly.
   * @param windowMs the window, ms (default WINDOW_MS).
   * @throws the ioredis error when Redis is unreachable, too slow (command timeout) or answers
   *   something else than the script's triple.
   */
  hit(id: string, limit: number, nowMs?: number, windowMs = WINDOW_MS): Promise<RateLimitResult> {
    return this.run(id, limit, nowMs, windowMs, '');
  }

  /** See RateLimiter.peek: the same script, recording nothing. @throws as hit. */
  peek(id: string, limit: number, nowMs?: number, windowMs = WINDOW_MS): Promise<RateLimitResult> {
    return this.run(id, limit, nowMs, windowMs, 'peek');
  }

  /**
   * See RateLimiter.reserve: src/redis/reserve.lua on `tw:rl:<id>` of every window, in one
   * script; `release` removes the reservation's member from each (ZREM).
   * @param nowMs as for hit (omitted: the Redis server clock).
   * @throws as hit.
   */
  async reserve(windows: readonly WindowLimit[], nowMs?: number): Promise<Reservation> {
    const keys = windows.map((w) => this.prefix + w.id);
    const member = randomBytes(8).toString('hex');
    const reply = await this.redis[RESERVE](
      keys.length,
      ...keys,
      nowMs === undefined ? '' : String(Math.floor(nowMs)),
      member,
      ...windows.flatMap((w) => [String(w.limit), String(w.windowMs)]),
    );
    if (
      !Array.isArray(reply) ||
      reply.length !== 3 ||
      !reply.every((n): n is number => typeof n === 'number')
    ) {
      throw new Error(`reserve.lua answered ${JSON.stringify(reply)}`);
    }
    const [allowed, waitMs, remaining] = reply as [number, number, number];
    if (allowed !== 1) return refusedReservation(Math.max(1, Math.ceil(waitMs / 1000)));
    let released = false;
    return {
      allowed: true,
      retryAfterSeconds: 0,
      remaining: Math.max(0, remaining),
      release: async () => {
        if (released) return;
        released = true;
        await Promise.all(keys.map((k) => this.redis.zrem(k, member)));
      },
    };
  }

  private async run(
    id: string,
    limit: number,
    nowMs: number | undefined,
    windowMs: number,
    mode: '' | 'peek',
  ): Promise<RateLimitResult> {
    const reply = await this.redis[COMMAND](
      this.prefix + id,
      limit,
      windowMs,
      nowMs === undefined ? '' : String(Math.floor(nowMs)),
      randomBytes(6).toString('hex'),
      mode,
    );
    if (
      !Array.isArray(reply) ||
      reply.length !== 3 ||
      !reply.every((n): n is number => typeof n === 'number')
    ) {
      throw new Error(`sliding-window.lua answered ${JSON.stringify(reply)}`);
    }
    const [allowed, remaining, waitMs] = reply as [number, number, number];
    if (allowed === 1) return { allowed: true, limit, remaining, retryAfterSeconds: 0 };
    return {
      allowed: false,
      limit,
      remaining: 0,
      retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)),
    };
  }
}

/** What the API needs for its limits, and what to close at shutdown. */
export interface RateLimits {
  rateLimiter: RateLimiter;
  /** Redis liveness for /healthz (PING within 500 ms); absent without Redis. */
  redisCheck?: () => Promise<boolean>;
  /** Close the Redis client, if any. */
  close(): Promise<void>;
}

/** How long start-up waits for the first Redis connection, ms, before serving anyway. */
const START_WAIT_MS = 1_000;

/**
 * The limits of an API process (DESIGN decisions):
 * - `url` set: Redis windows shared by every replica; while Redis is unreachable, in-process
 *   windows per replica (logged once per transition, /healthz 503 through `redisCheck`).
 * - `url` unset: in-process windows only, and no `redisCheck` (/healthz reports redis true:
 *   there is no Redis to be down).
 * Start-up waits up to 1 s for Redis, then serves anyway (on the fallback until it connects,
 * logged at once: 'redis unreachable: …', then 'redis reachable again: …' when the client
 * connects). Redis down never delays a start by more than that second, nor stops it.
 */
export async function openRateLimits(url: string | undefined, logger: Logger): Promise<RateLimits> {
  if (!url) return { rateLimiter: new MemoryRateLimiter(), close: async () => {} };
  const redis = createRedis(url, { logger });
  const limiter = new FallbackRateLimiter(new RedisRateLimiter(redis), { logger });
  // Down at start: said now, once, rather than at the first request; and back on Redis as soon
  // as the client connects (at start or after an outage), not at the next probing request
  // (issue 17 item 6).
  if (!(await waitReady(redis, START_WAIT_MS)))
    limiter.markDown(`not connected after ${START_WAIT_MS} ms`);
  redis.on('ready', () => limiter.markUp());
  return {
    rateLimiter: limiter,
    redisCheck: () => pingRedis(redis),
    close: () => closeRedis(redis),
  };
}
