/**
 * Chat delivery benchmark (issue 13): chat deliveries per second through the outbox
 * (ChatDeliveryWorker: claim, pace, sendMessage to the Bot API stand-in, record) against the
 * configured Bot API limits, which bind here by design: the goal is a rate within 5 % of the limit
 * and never over it. Two scenarios, the limits compressed by TELEGRAM_PACING_SCALE (default here
 * 1, the Bot API's own: 30/s per bot, 1/s per chat; a compressed scale adds the
 * waiters' wake-up and Redis round trip to every short window, measured at 0.1: 86 % per chat):
 *
 * - many chats: C chats × K events; the per-bot window binds;
 * - one chat: a burst of B events for one private chat; the per-chat window binds.
 *
 * "Over" is checked from the attempts' recorded start times (the slots' times): the most messages
 * found in any window of the limit's length, which must not exceed the limit. The rate is
 * (messages − 1) / (last start − first start). Pacing in Redis when REDIS_URL is set (a fresh key
 * prefix), in process otherwise; the database is DATABASE_URL's server (a fresh database) or PGlite.
 *
 * Run alone: `npx tsx bench/telegram.ts` (BENCH_TG_SCALE, BENCH_TG_CHATS, BENCH_TG_PER_CHAT,
 * BENCH_TG_BURST).
 */
import { randomBytes } from 'node:crypto';
import { newId } from '../src/common/ids.js';
import { silentLogger } from '../src/common/logger.js';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import type { Db } from '../src/db/pool.js';
import { ChatDeliveryWorker } from '../src/delivery/chat-worker.js';
import { startTelegramStandIn } from '../src/devnet/telegram-stand-in.js';
import { closeRedis, createRedis, waitReady } from '../src/redis/client.js';
import { RedisPacer } from '../src/redis/pacing.js';
import { openBot } from '../src/telegram/bot.js';
import { BOT_API_LIMITS, MemoryPacer, type Pacer } from '../src/telegram/pacing.js';
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
}

/** A fresh database: PostgreSQL at DATABASE_URL when set (created and dropped), else PGlite. */
async function freshDb(): Promise<{ db: Db; what: string; drop: () => Promise<void> }> {
  const t = await emptyDb(process.env.DATABASE_URL ? 'postgres' : 'pglite');
  return { db: t.db, what: t.engine === 'postgres' ? 'PostgreSQL' : 'PGlite', drop: t.drop };
}

async function chatOutbox(db: Db, chatId: string, count: number): Promise<void> {
  const accountId = await insertAccount(db, 'pro');
  await db.query(
    `UPDATE accounts SET telegram_chat_id = $2, telegram_chat_type = 'private' WHERE id = $1`,
    [accountId, chatId],
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

async function scenario(
  label: string,
  chats: number,
  perChat: number,
  scale: number,
  limit: { limit: number; windowMs: number },
): Promise<string[]> {
  const { db, what, drop } = await freshDb();
  const standIn = await startTelegramStandIn();
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
    for (let i = 0; i < chats; i++) await chatOutbox(db, String(100_000 + i), perChat);
    let pacer: Pacer = new MemoryPacer();
    if (redis && (await waitReady(redis, 2_000))) {
      pacer = new RedisPacer(redis, { prefix: `tw:bench:pace:${randomBytes(4).toString('hex')}:` });
    }
    const total = chats * perChat;
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer,
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    await db.query(`UPDATE notifications SET next_attempt_at = now()`);
    worker.wake();
    const deadline = Date.now() + 600_000;
    while (worker.delivered < total && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 50));
    }
    ac.abort();
    await run;
    const { rows } = await db.query<{ t: Date }>(
      'SELECT started_at AS t FROM attempts WHERE NOT throttled ORDER BY started_at',
    );
    const ts = rows.map((r) => r.t.getTime());
    const windowMs = limit.windowMs * scale;
    const perSecondLimit = (limit.limit * 1000) / windowMs;
    const span = (ts[ts.length - 1] ?? 0) - (ts[0] ?? 0);
    const rate = span > 0 ? ((ts.length - 1) * 1000) / span : 0;
    const most = maxInWindow(ts, windowMs);
    const arrivals = standIn.delivered().map((m) => m.at);
    const arrivalSpan = (arrivals[arrivals.length - 1] ?? 0) - (arrivals[0] ?? 0);
    const arrivalRate = arrivalSpan > 0 ? ((arrivals.length - 1) * 1000) / arrivalSpan : 0;
    return [
      `${label}: ${chats} chat(s) × ${perChat} events, ${what}, pacing ${pacer instanceof RedisPacer ? 'Redis' : 'in process'}, scale ${scale}`,
      `  delivered ${worker.delivered}/${total}, deferred ${worker.deferred}, throttled ${worker.throttled}`,
      `  rate ${rate.toFixed(1)}/s (slots) · ${arrivalRate.toFixed(1)}/s (arrivals at the stand-in) · limit ${perSecondLimit.toFixed(1)}/s → ${((rate / perSecondLimit) * 100).toFixed(1)} % of the limit (goal ≥ 95 %)`,
      `  most in any ${windowMs} ms window: ${most} (limit ${limit.limit}) → ${most <= limit.limit ? 'never over' : 'OVER THE LIMIT'}`,
    ];
  } finally {
    await standIn.close();
    if (redis) await closeRedis(redis);
    await drop();
  }
}

/** Both scenarios; returns the report lines. */
export async function benchTelegram(opts: BenchTelegramOptions = {}): Promise<string[]> {
  const scale = opts.scale ?? 1;
  return [
    ...(await scenario(
      'many chats (per-bot limit)',
      opts.chats ?? 100,
      opts.perChat ?? 3,
      scale,
      BOT_API_LIMITS.perBot,
    )),
    ...(await scenario(
      'one chat (per-chat limit)',
      1,
      opts.burst ?? 20,
      scale,
      BOT_API_LIMITS.perChat,
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
  })) {
    console.log(line);
  }
}
