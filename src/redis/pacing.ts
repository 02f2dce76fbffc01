/**
 * Chat pacing windows in Redis, shared by every delivery worker (issue 13 item 3; semantics in
 * src/telegram/pacing.ts): one atomic script per slot (src/redis/pacing.lua, EVALSHA through
 * ioredis `defineCommand`), on the Redis server's clock, and one to release it once its send is
 * over (src/redis/pacing-release.lua, same clock). Keys: `tw:pace:{tg}:<window id>`, sorted sets of
 * at most `limit` entries (member: the slot's token; score: its send's end, provisional while in
 * flight) that expire when their newest provisional end leaves the window; and
 * `tw:pace:{tg}:<window id>:hold`, a string that exists while the window is held (a 429's
 * retry_after: its PTTL is the rest of the hold, on the Redis server's clock).
 */
import { randomBytes } from 'node:crypto';
import type { Pacer, PacingSlot, PacingWindow } from '../telegram/pacing.js';
import { luaScript, type Redis } from './client.js';

/** Default key prefix (one hash tag, so a Redis Cluster keeps every window on one slot). */
export const PACING_PREFIX = 'tw:pace:{tg}:';

const COMMAND = 'twPacingTake';
const HOLD = 'twPacingHold';
const RELEASE = 'twPacingRelease';

interface PacingCommand {
  [COMMAND](numKeys: number, ...args: Array<string | number>): Promise<unknown>;
  [HOLD](key: string, ms: number): Promise<unknown>;
  [RELEASE](numKeys: number, ...args: Array<string | number>): Promise<unknown>;
}

/** The key that exists while a window is held. */
const holdKey = (windowKey: string) => `${windowKey}:hold`;

/** Pacing windows in Redis. `take` rejects when Redis is unreachable or too slow. */
export class RedisPacer implements Pacer {
  private readonly redis: Redis & PacingCommand;
  private readonly prefix: string;

  /** @param opts.prefix key prefix (default PACING_PREFIX; tests use their own). */
  constructor(redis: Redis, opts: { prefix?: string } = {}) {
    if (!(COMMAND in redis)) {
      // numberOfKeys varies with the message (2 or 3 windows): passed at each call.
      redis.defineCommand(COMMAND, { lua: luaScript('pacing.lua') });
    }
    if (!(RELEASE in redis)) redis.defineCommand(RELEASE, { lua: luaScript('pacing-release.lua') });
    if (!(HOLD in redis)) {
      redis.defineCommand(HOLD, { lua: luaScript('pacing-hold.lua'), numberOfKeys: 1 });
    }
    this.redis = redis as Redis & PacingCommand;
    this.prefix = opts.prefix ?? PACING_PREFIX;
  }

  /**
   * See Pacer.take.
   * @throws the ioredis error, or Error when the script answers something else than its triple.
   */
  async take(
    windows: readonly PacingWindow[],
    flightMs: number,
    nowMs?: number,
  ): Promise<PacingSlot> {
    // 64 random bits: unique among the few entries a window holds.
    const token = randomBytes(8).toString('hex');
    // KEYS: the windows, then each window's hold key (pacing.lua).
    const args: Array<string | number> = [
      ...windows.map((w) => this.prefix + w.id),
      ...windows.map((w) => holdKey(this.prefix + w.id)),
      nowMs === undefined ? '' : String(Math.floor(nowMs)),
      token,
      Math.max(0, Math.ceil(flightMs)),
    ];
    for (const w of windows) args.push(w.limit, w.windowMs);
    const reply = await this.redis[COMMAND](2 * windows.length, ...args);
    if (
      !Array.isArray(reply) ||
      reply.length !== 3 ||
      !reply.every((n): n is number => typeof n === 'number')
    ) {
      throw new Error(`pacing.lua answered ${JSON.stringify(reply)}`);
    }
    const [granted, waitMs, atMs] = reply as [number, number, number];
    return granted === 1
      ? { granted: true, waitMs: 0, atMs, token }
      : { granted: false, waitMs, atMs, token: '' };
  }

  /** See Pacer.release. @throws the ioredis error. */
  async release(
    windows: readonly PacingWindow[],
    token: string,
    lingerMs = 0,
    nowMs?: number,
  ): Promise<void> {
    if (token === '' || windows.length === 0) return;
    await this.redis[RELEASE](
      windows.length,
      ...windows.map((w) => this.prefix + w.id),
      nowMs === undefined ? '' : String(Math.floor(nowMs)),
      token,
      Math.max(0, Math.ceil(lingerMs)),
    );
  }

  /** See Pacer.hold. @throws the ioredis error. */
  async hold(windowId: string, ms: number): Promise<void> {
    const whole = Math.max(1, Math.ceil(ms));
    await this.redis[HOLD](holdKey(this.prefix + windowId), whole);
  }
}
