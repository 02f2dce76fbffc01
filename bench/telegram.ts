/**
 * Chat delivery benchmark (issues 13 and 21): chat deliveries through the outbox
 * (ChatDeliveryWorker: claim, pace, sendMessage to the Bot API stand-in, record) against the Bot
 * API limits, which bind here by design, with the stand-in ENFORCING those limits on arrival, where
 * Telegram counts them (its windows scaled like ours). The goal: no 429 at all, and as much of each
 * binding limit as the pacing's margin leaves (src/telegram/pacing.ts: one send's round trip per
 * interval). Three scenarios:
 *
 * - many chats: C chats × K events; the per-bot limit binds (scale BENCH_TG_SCALE, default 1);
 * - one chat: a burst of B events for one private chat; the per-chat limit binds (same scale);
 * - one group: G events for one supergroup; the per-group limit binds (20 per minute: its windows
 *   compressed by BENCH_TG_GROUP_SCALE, default 0.1, so 20 per 6 s, to keep the run short).
 *
 * Figures, from the stand-in's arrival times of the messages it accepted: the share of each limit
 * used, = the least time the limit allows for those messages (message m no earlier than
 * floor(m / limit) windows after the first) over the time they took (first to last arrival); for
 * the per-chat limit, the busiest chat. The limit that binds should be near 100 %, never over (the
 * stand-in refuses what would be). The most messages in any window on arrival, and the 429 count
 * (the stand-in's refusals by its limits; the worker's throttled count beside it). Pacing in Redis
 * when REDIS_URL is set (a fresh key prefix), in process otherwise; the database is DATABASE_URL's
 * server (a fresh database) or PGlite.
 *
 * Run alone: `npx tsx bench/telegram.ts` (BENCH_TG_SCALE, BENCH_TG_CHATS, BENCH_TG_PER_CHAT,
 * BENCH_TG_BURST, BENCH_TG_GROUP, BENCH_TG_GROUP_SCALE).
 */
import { randomBytes } from 'node:crypto';
import { newId } from '../src/common/ids.js';
import { silentLogger } from '../src/common/logger.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import type { Db } from '../src/db/pool.js';
import { ChatDeliveryWorker } from '../src/delivery/chat-worker.js';
import {
  type LimitName,
  startTelegramStandIn,
  TELEGRAM_LIMITS,
} from '../src/devnet/telegram-stand-in.js';
import { closeRedis, createRedis, waitReady } from '../src/redis/client.js';
import { RedisPacer } from '../src/redis/pacing.js';
import { openBot } from '../src/telegram/bot.js';
import { MemoryPacer, type Pacer } from '../src/telegram/pacing.js';
import { emptyDb } from '../test/helpers/db.js';
import {
  insertAccount,
  insertEvents,
  USDT_CONTRACT,
  USDT_CONTRACT_HEX,
} from '../test/helpers/outbox.js';

export interface BenchTelegramOptions {
  scale?: number;
  chats?: number;
  perChat?: number;
  burst?: number;
  /** Events to one group (default 41: two windows' worth after the first). */
  group?: number;
  /** TELEGRAM_PACING_SCALE of the group scenario (default 0.1: 20 per 6 s). */
  groupScale?: number;
}

/** A fresh database: PostgreSQL at DATABASE_URL when set (created and dropped), else PGlite. */
async function freshDb(): Promise<{ db: Db; what: string; drop: () => Promise<void> }> {
  const t = await emptyDb(process.env.DATABASE_URL ? 'postgres' : 'pglite');
  return { db: t.db, what: t.engine === 'postgres' ? 'PostgreSQL' : 'PGlite', drop: t.drop };
}

async function chatOutbox(db: Db, chatId: string, chatType: string, count: number): Promise<void> {
  const accountId = await insertAccount(db, 'pro');
  await db.query(
    `UPDATE accounts SET telegram_chat_id = $2, telegram_chat_type = $3 WHERE id = $1`,
    [accountId, chatId, chatType],
  );
  const watchId = newId('wh');
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                          channel, active_from_block)
     VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'incoming', 'telegram', 0)`,
    [watchId, accountId, USDT_CONTRACT, USDT_CONTRACT_HEX],
  );
  await insertEvents(db, { accountId, watchId, count, dueAt: new Date(Date.now() + 3_600_000) });
  await db.query(`UPDATE notifications SET channel = 'telegram' WHERE watch_id = $1`, [watchId]);
}

/** Most entries of sorted `ts` within any window (t − windowMs, t]. */
function maxInWindow(ts: readonly number[], windowMs: number): number {
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < ts.length; hi++) {
    while ((ts[lo] ?? 0) <= (ts[hi] ?? 0) - windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

/**
 * Share of a limit used by sorted arrival times `ts`: the least time the limit allows for them
 * (message m no earlier than floor(m / limit) windows after the first) over the time they took.
 */
function share(ts: readonly number[], l: { limit: number; windowMs: number }): number {
  const span = (ts[ts.length - 1] ?? 0) - (ts[0] ?? 0);
  const least = Math.floor((ts.length - 1) / l.limit) * l.windowMs;
  return span > 0 ? least / span : 0;
}

interface Chat {
  id: string;
  type: 'private' | 'supergroup';
  count: number;
}

async function scenario(
  label: string,
  chats: readonly Chat[],
  scale: number,
  binding: LimitName,
): Promise<string[]> {
  const { db, what, drop } = await freshDb();
  const standIn = await startTelegramStandIn({ limits: { scale } });
  const redisUrl = process.env.REDIS_URL;
  const redis = redisUrl ? createRedis(redisUrl) : undefined;
  try {
    await migrate(db);
    const cfg = loadConfig({
      TELEGRAM_BOT_TOKEN: standIn.token,
      TELEGRAM_API_ROOT: standIn.url,
      TELEGRAM_PACING_SCALE: String(scale),
      DELIVERY_POLL_MS: '20',
    });
    const bot = await openBot(cfg.telegram);
    for (const c of chats) await chatOutbox(db, c.id, c.type, c.count);
    let pacer: Pacer = new MemoryPacer();
    if (redis && (await waitReady(redis, 2_000))) {
      pacer = new RedisPacer(redis, { prefix: `tw:bench:pace:${randomBytes(4).toString('hex')}:` });
    }
    const total = chats.reduce((n, c) => n + c.count, 0);
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer,
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    const t0 = performance.now();
    await db.query(`UPDATE notifications SET next_attempt_at = now()`);
    worker.wake();
    const deadline = Date.now() + 900_000;
    while (worker.delivered < total && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const seconds = (performance.now() - t0) / 1000;
    ac.abort();
    await run;
    const accepted = standIn.delivered();
    const limited = standIn.limited();
    const byLimit = (['chat', 'group', 'bot'] as const)
      .map((l) => `${l} ${limited.filter((m) => m.limit === l).length}`)
      .join(', ');
    const lines = [
      `${label}: ${chats.length} chat(s), ${total} events, ${what}, pacing ${pacer instanceof RedisPacer ? 'Redis' : 'in process'}, scale ${scale}; the stand-in enforces the limits on arrival`,
      `  delivered ${worker.delivered}/${total} in ${seconds.toFixed(1)} s, deferred ${worker.deferred} · 429 on arrival: ${limited.length} (${byLimit}), worker throttled ${worker.throttled}`,
    ];
    const groups = chats.filter((c) => c.type !== 'private');
    const limits: Array<[LimitName, number[][]]> = [
      ['chat', chats.map((c) => accepted.filter((m) => m.chatId === c.id).map((m) => m.at))],
      ...(groups.length > 0
        ? [
            [
              'group',
              groups.map((c) => accepted.filter((m) => m.chatId === c.id).map((m) => m.at)),
            ] as [LimitName, number[][]],
          ]
        : []),
      ['bot', [accepted.map((m) => m.at)]],
    ];
    for (const [name, series] of limits) {
      const l = TELEGRAM_LIMITS[name];
      const scaled = { limit: l.limit, windowMs: l.windowMs * scale };
      // The busiest chat (or group): the highest share.
      let best = 0;
      let most = 0;
      for (const ts of series) {
        best = Math.max(best, share(ts, scaled));
        most = Math.max(most, maxInWindow(ts, scaled.windowMs));
      }
      lines.push(
        `  per ${name}${name === binding ? ' (binds)' : ''}: ${(best * 100).toFixed(1)} % of the limit (${l.limit} per ${scaled.windowMs} ms) · most in any window on arrival ${most} → ${most <= l.limit ? 'never over' : 'OVER THE LIMIT'}`,
      );
    }
    return lines;
  } finally {
    await standIn.close();
    if (redis) await closeRedis(redis);
    await drop();
  }
}

/** The three scenarios; returns the report lines. */
export async function benchTelegram(opts: BenchTelegramOptions = {}): Promise<string[]> {
  const scale = opts.scale ?? 1;
  const perChat = opts.perChat ?? 3;
  return [
    ...(await scenario(
      'many chats (per-bot limit)',
      Array.from({ length: opts.chats ?? 100 }, (_, i) => ({
        id: String(100_000 + i),
        type: 'private' as const,
        count: perChat,
      })),
      scale,
      'bot',
    )),
    ...(await scenario(
      'one chat (per-chat limit)',
      [{ id: '100000', type: 'private', count: opts.burst ?? 20 }],
      scale,
      'chat',
    )),
    ...(await scenario(
      'one group (per-group limit)',
      [{ id: '-1000100000', type: 'supergroup', count: opts.group ?? 41 }],
      opts.groupScale ?? 0.1,
      'group',
    )),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const env = (k: string, d: number) => Number(process.env[k] ?? d);
  for (const line of await benchTelegram({
    scale: env('BENCH_TG_SCALE', 1),
    chats: env('BENCH_TG_CHATS', 100),
    perChat: env('BENCH_TG_PER_CHAT', 3),
    burst: env('BENCH_TG_BURST', 20),
    group: env('BENCH_TG_GROUP', 41),
    groupScale: env('BENCH_TG_GROUP_SCALE', 0.1),
  })) {
    console.log(line);
  }
}
