/**
 * Chat pacing windows in Redis, shared by every delivery worker (issue 13 item 3; semantics in
 * src/telegram/pacing.ts): one atomic script per slot (src/redis/pacing.lua, EVALSHA through
 * ioredis `defineCommand`), on the Redis server's clock. Keys: `tw:pace:{tg}:<window id>`, sorted
 * sets of at most `limit` entries that expire when their newest entry leaves the window.
 */
import { randomBytes } from 'node:crypto';
import type { Pacer, PacingSlot, PacingWindow } from '../telegram/pacing.js';
import { luaScript, type Redis } from './client.js';

/** Default key prefix (one hash tag, so a Redis Cluster keeps every window on one slot). */
export const PACING_PREFIX = 'tw:pace:{tg}:';

const COMMAND = 'twPacingTake';

interface PacingCommand {
  [COMMAND](numKeys: number, ...args: Array<string | number>): Promise<unknown>;
}

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
    this.redis = redis as Redis & PacingCommand;
    this.prefix = opts.prefix ?? PACING_PREFIX;
  }

  /**
   * See Pacer.take.
   * @throws the ioredis error, or Error when the script answers something else than its triple.
   */
  async take(windows: readonly PacingWindow[], nowMs?: number): Promise<PacingSlot> {
    const args: Array<string | number> = [
      ...windows.map((w) => this.prefix + w.id),
      nowMs === undefined ? '' : String(Math.floor(nowMs)),
      randomBytes(6).toString('hex'),
    ];
    for (const w of windows) args.push(w.limit, w.windowMs);
    const reply = await this.redis[COMMAND](windows.length, ...args);
    if (
      !Array.isArray(reply) ||
      reply.length !== 3 ||
      !reply.every((n): n is number => typeof n === 'number')
    ) {
      throw new Error(`pacing.lua answered ${JSON.stringify(reply)}`);
    }
    const [granted, waitMs, atMs] = reply as [number, number, number];
    return { granted: granted === 1, waitMs: granted === 1 ? 0 : waitMs, atMs };
  }
}
