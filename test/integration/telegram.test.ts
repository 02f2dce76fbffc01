/**
 * Telegram deliveries (issue 13) against the Bot API stand-in (a real HTTP server,
 * src/devnet/telegram-stand-in.ts), on both database engines:
 * - binding through the console API and the bot (long polling under the lock): link, /start,
 *   bound chat shown, a used token refused, POST /v1/watches telegram:true, unbinding refused
 *   while a chat watch exists then allowed; 503 telegram_unavailable without a bot;
 * - chat deliveries through the chat worker: one HTML message per event with the exact amount,
 *   DELIVERED; 429 recorded and rescheduled without using an attempt; 403 a failed attempt; a
 *   group that migrates is followed;
 * - pacing (issue 21 item 4), with the stand-in enforcing the Bot API's limits on ARRIVAL, where
 *   Telegram counts them (compressed windows, the same scale as ours): a burst of 200 events for
 *   one chat gets no 429 at all and never two messages in one per-chat window; two chats and a
 *   group, shared by two workers through Redis (in process without REDIS_URL), no 429 from the
 *   per-chat or per-group limits; with Redis, two workers together never exceed the per-bot
 *   window either (no 429 on arrival, and the attempts' recorded start times, the slots' times).
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { type Config, loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import { ChatDeliveryWorker } from '../../src/delivery/chat-worker.js';
import { startTelegramStandIn, type TelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
import { eventDetail } from '../../src/events/detail.js';
import { closeRedis, createRedis, waitReady } from '../../src/redis/client.js';
import { RedisPacer } from '../../src/redis/pacing.js';
import { openBot, type TelegramBot } from '../../src/telegram/bot.js';
import {
  BOT_API_LIMITS,
  FallbackPacer,
  MemoryPacer,
  type Pacer,
} from '../../src/telegram/pacing.js';
import { runUpdatePolling } from '../../src/telegram/updates.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';
import {
  insertAccount,
  insertEvents,
  USDT_CONTRACT,
  USDT_CONTRACT_HEX,
} from '../helpers/outbox.js';

const PASSWORD = 'correct horse battery staple';
const REDIS_URL = process.env.REDIS_URL;
/** The 429 hold, in process and (with REDIS_URL) shared by two workers through Redis. */
const HOLD_CASES: Array<[string, 1 | 2]> = [
  ['one worker, in-process pacing', 1],
  ...(REDIS_URL ? [['two workers sharing Redis', 2] as [string, 2]] : []),
];

/**
 * The tests with the stand-in's arrival limits are about the pacing's normal path: a send answered,
 * pacing shared in Redis. On a loaded machine this process's event loop stalls for seconds (PGlite
 * runs on it: stalls of 1-3 s seen during the sends at load average 16, 25 s during setup), and
 * two degraded paths follow that can end in a 429 by design: a send outlives the tests' 5 s
 * deadline, and the in-process stand-in counts it when its handler finally runs (seen up to 14 s
 * after the send started, 8 s after the worker gave up; a send without an answer may be counted
 * whenever Telegram gets to it); and a Redis command outlives its 200 ms timeout, which turns
 * FallbackPacer to per-worker windows that do not see each other. Deadlines far above those stalls
 * keep both out of these tests.
 */
const ARRIVAL_ENV = { TELEGRAM_TIMEOUT_MS: '30000' };
const ARRIVAL_REDIS = { commandTimeoutMs: 5_000 };

/** A console session: cookies kept, X-CSRF-Token sent like the page. */
class Session {
  readonly jar = new Map<string, string>();
  constructor(private readonly app: FastifyInstance) {}
  async request(method: 'GET' | 'POST' | 'DELETE', url: string, body?: unknown) {
    const headers: Record<string, string> = { host: 'localhost' };
    const cookie = [...this.jar].map(([k, v]) => `${k}=${v}`).join('; ');
    if (cookie) headers.cookie = cookie;
    const csrf = this.jar.get('tw_csrf');
    if (method !== 'GET' && csrf) headers['x-csrf-token'] = csrf;
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res: LightMyRequestResponse = await this.app.inject({
      method,
      url,
      headers,
      ...(body !== undefined ? { payload: JSON.stringify(body) } : {}),
    });
    for (const c of res.cookies as Array<{ name: string; value: string; maxAge?: number }>) {
      if (c.value === '' || c.maxAge === 0) this.jar.delete(c.name);
      else this.jar.set(c.name, c.value);
    }
    return res;
  }
  async signUp(email: string) {
    await this.request('GET', '/console/api/config');
    return this.request('POST', '/console/api/signup', { email, password: PASSWORD });
  }
}

/** Wait until `check` is true (bounded: a condition, never a duration). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 20_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function telegramConfig(
  standIn: TelegramStandIn | null,
  extra: Record<string, string> = {},
): Config {
  return loadConfig({
    ...(standIn ? { TELEGRAM_BOT_TOKEN: standIn.token, TELEGRAM_API_ROOT: standIn.url } : {}),
    TELEGRAM_POLL_TIMEOUT_SECONDS: '1',
    TELEGRAM_TIMEOUT_MS: '5000',
    TELEGRAM_PACING_SCALE: '0.02',
    DELIVERY_POLL_MS: '20',
    DELIVERY_SCHEDULE_SCALE: '0.0001',
    ...extra,
  });
}

/** An account bound to `chatId`, a chat watch, and `count` PENDING chat notifications. */
async function chatOutbox(db: Db, chatId: string, count: number, chatType = 'private') {
  const accountId = await insertAccount(db, 'pro');
  await db.query(
    `UPDATE accounts SET telegram_chat_id = $2, telegram_chat_type = $3, telegram_bound_at = now()
      WHERE id = $1`,
    [accountId, chatId, chatType],
  );
  const watchId = `wh_${randomBytes(8).toString('hex')}`;
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                          channel, active_from_block)
     VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'incoming', 'telegram', 0)`,
    [watchId, accountId, USDT_CONTRACT, USDT_CONTRACT_HEX],
  );
  const events = await insertEvents(db, { accountId, watchId, count });
  await db.query(`UPDATE notifications SET channel = 'telegram' WHERE watch_id = $1`, [watchId]);
  return { accountId, watchId, events };
}

async function states(db: Db) {
  const { rows } = await db.query<{ id: string; status: string; attempts: number }>(
    'SELECT id, status, attempts FROM notifications ORDER BY id',
  );
  return rows;
}

describe.each(dbEngines)('telegram on %s', (engine) => {
  let h: ApiHarness | undefined;
  let standIn: TelegramStandIn | undefined;
  const stops: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0).reverse()) await s();
    await h?.close();
    await standIn?.close();
    h = undefined;
    standIn = undefined;
  });

  /**
   * A stand-in and a bot on it. `arrivalLimits`: the stand-in enforces the Bot API's limits on
   * arrival, its windows compressed by the same TELEGRAM_PACING_SCALE as ours.
   */
  async function withBot(
    env: Record<string, string> = {},
    arrivalLimits = false,
  ): Promise<{
    bot: TelegramBot;
    cfg: Config;
  }> {
    const scale = Number(env.TELEGRAM_PACING_SCALE ?? telegramConfig(null).telegram.pacingScale);
    standIn = await startTelegramStandIn(arrivalLimits ? { limits: { scale } } : {});
    const cfg = telegramConfig(standIn, env);
    const bot = await openBot(cfg.telegram);
    return { bot, cfg };
  }

  it('without a bot: config says so, the endpoints answer 503, telegram watches 400', async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const s = new Session(h.app);
    expect((await s.signUp('nobot@example.com')).statusCode).toBe(201);
    expect(json(await s.request('GET', '/console/api/config'))).toMatchObject({ telegram: false });
    expect(json(await s.request('GET', '/console/api/telegram'))).toEqual({
      configured: false,
      bot_username: null,
      chat: null,
    });
    const c = await s.request('POST', '/console/api/telegram/connect');
    expect(c.statusCode).toBe(503);
    expect(json(c)).toMatchObject({ code: 'telegram_unavailable' });
    const d = await s.request('DELETE', '/console/api/telegram');
    expect(d.statusCode).toBe(503);
  });

  it('binds a chat through the console and /start, then refuses and allows unbinding', async () => {
    const { bot, cfg } = await withBot();
    const si = standIn as TelegramStandIn;
    expect(bot.identity.username).toBe(si.username);
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' }, telegram: bot });
    const harness = h;
    // The bot reads updates by long polling (PGlite: this process leads; PostgreSQL: the lock).
    const ac = new AbortController();
    const polling = runUpdatePolling(
      {
        db: harness.db,
        telegram: bot,
        pacer: new MemoryPacer(),
        logger: silentLogger,
        databaseUrl: harness.t.url,
        network: 'mainnet',
      },
      ac.signal,
    );
    stops.push(async () => {
      ac.abort();
      await polling;
    });

    const s = new Session(harness.app);
    expect((await s.signUp('shop@example.com')).statusCode).toBe(201);
    expect(json(await s.request('GET', '/console/api/config'))).toMatchObject({
      telegram: true,
      bot_username: si.username,
    });
    expect(json(await s.request('GET', '/console/api/telegram'))).toEqual({
      configured: true,
      bot_username: si.username,
      chat: null,
    });
    // A telegram watch before binding: 400 telegram_not_bound.
    const early = await s.request('POST', '/console/api/watches', {
      address: USDT_CONTRACT,
      asset_filter: 'USDT',
      telegram: true,
    });
    expect(early.statusCode, early.body).toBe(400);
    expect(json(early)).toMatchObject({ code: 'telegram_not_bound' });

    const connect = await s.request('POST', '/console/api/telegram/connect');
    expect(connect.statusCode, connect.body).toBe(200);
    const { link, expires_at } = json<{ link: string; expires_at: string }>(connect);
    const m = new RegExp(`^https://t\\.me/${si.username}\\?start=([A-Za-z0-9_-]{32})$`).exec(link);
    expect(m, link).not.toBeNull();
    const token = m?.[1] ?? '';
    const ttl = Date.parse(expires_at) - Date.now();
    expect(ttl).toBeGreaterThan(9 * 60_000);
    expect(ttl).toBeLessThanOrEqual(10 * 60_000);
    // Only the token's hash is stored.
    const { rows: stored } = await harness.db.query<{ token_hash: string }>(
      'SELECT token_hash FROM telegram_link_tokens',
    );
    expect(stored).toHaveLength(1);
    expect(stored[0]?.token_hash).toMatch(/^[0-9a-f]{64}$/);
    expect(stored[0]?.token_hash).not.toContain(token);

    // The merchant opens the link in a group: Telegram sends "/start@bot <token>".
    const groupId = -1_001_234_567;
    si.userSends(
      { id: groupId, type: 'group', title: 'Coffee & <Shop>' },
      `/start@${si.username} ${token}`,
    );
    await until(() => si.delivered(groupId).length === 1, 'the bot to answer in the group');
    expect(si.delivered(groupId)[0]?.text).toMatch(/^Connected/);
    const bound = json<{ chat: { id: string; title: string; type: string; bound_at: string } }>(
      await s.request('GET', '/console/api/telegram'),
    );
    expect(bound.chat).toMatchObject({
      id: String(groupId),
      title: 'Coffee & <Shop>',
      type: 'group',
    });
    expect(Date.parse(bound.chat.bound_at)).not.toBeNaN();

    // The same token again (single use): refused in the chat, nothing changes.
    si.userSends({ id: 555, type: 'private' }, `/start ${token}`);
    await until(() => si.delivered(555).length === 1, 'the bot to refuse the used token');
    expect(si.delivered(555)[0]?.text).toMatch(/unknown, already used or expired/);
    expect(json(await s.request('GET', '/console/api/telegram'))).toMatchObject({
      chat: { id: String(groupId) },
    });

    // A chat watch now; unbinding is refused while it exists.
    const w = await s.request('POST', '/console/api/watches', {
      address: USDT_CONTRACT,
      asset_filter: 'USDT',
      telegram: true,
    });
    expect(w.statusCode, w.body).toBe(201);
    const watchId = json<{ id: string }>(w).id;
    const refused = await s.request('DELETE', '/console/api/telegram');
    expect(refused.statusCode).toBe(409);
    expect(json(refused)).toMatchObject({ code: 'telegram_watches_active' });

    // The group becomes a supergroup: the binding follows.
    si.migrate(groupId, -1_009_999_999);
    await until(
      async () =>
        json<{ chat: { id: string } }>(await s.request('GET', '/console/api/telegram')).chat.id ===
        '-1009999999',
      'the binding to follow the migration',
    );

    expect((await s.request('DELETE', `/console/api/watches/${watchId}`)).statusCode).toBe(204);
    const unbound = await s.request('DELETE', '/console/api/telegram');
    expect(unbound.statusCode, unbound.body).toBe(204);
    expect(json(await s.request('GET', '/console/api/telegram'))).toMatchObject({ chat: null });
    expect(cfg.telegram.webhookUrl).toBeUndefined();
  });

  it('delivers one exact HTML message per event; 429 is not an attempt; 403 is one', async () => {
    const { bot, cfg } = await withBot();
    const si = standIn as TelegramStandIn;
    h = await apiHarness(engine);
    const db = h.db;
    const chat = '4242';
    const { events } = await chatOutbox(db, chat, 3);
    const [first, second, third] = events;
    // Event 1: a 429 first (retry_after 1 s), then delivered. Event 3's chat gets a 403 after.
    si.failNext(chat, { code: 429, retryAfter: 1 });
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer: new MemoryPacer(),
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    stops.push(async () => {
      ac.abort();
      await run;
    });
    await until(
      async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
      'three deliveries',
    );
    const ok = si.delivered(chat);
    expect(ok).toHaveLength(3);
    for (const msg of ok) expect(msg.parseMode).toBe('HTML');
    const texts = ok.map((m) => m.text).sort();
    for (const e of [first, second, third]) {
      // The exact decimal of amount_raw / 10^6, computed here by string arithmetic.
      const raw = (e?.amountRaw ?? '0').padStart(7, '0');
      const frac = raw.slice(-6).replace(/0+$/, '');
      const exact = frac ? `${raw.slice(0, -6)}.${frac}` : raw.slice(0, -6);
      const text = texts.find((t) => t.includes(`/transaction/${e?.txId}"`));
      expect(text, `message of ${e?.txId}`).toBeDefined();
      expect(text).toContain(`<b>⬇️ Incoming ${exact} USDT</b>`);
      expect(text).toContain(`https://tronscan.org/#/transaction/${e?.txId}`);
      expect(text).toContain('Time: 2026-01-15 12:30:45 UTC');
    }
    // The 429: one throttled row, attempts still 1 for that notification (the delivery).
    const { rows: throttled } = await db.query<{ notification_id: string; attempt: number }>(
      'SELECT notification_id, attempt FROM attempts WHERE throttled',
    );
    expect(throttled).toHaveLength(1);
    const n429 = (await states(db)).find((n) => n.id === throttled[0]?.notification_id);
    const log429 = await db.query(
      `SELECT attempt, throttled, http_status, error, started_at, duration_ms FROM attempts
        WHERE notification_id = $1 ORDER BY started_at`,
      [throttled[0]?.notification_id],
    );
    expect(n429, JSON.stringify(log429.rows)).toMatchObject({ status: 'DELIVERED', attempts: 1 });
    expect(worker.throttled).toBe(1);
    expect(si.sent.filter((m) => m.status === 429)).toHaveLength(1);
    // The console's event page: the 429 listed before the attempt that delivered, with the same
    // number, flagged throttled (shown "rate limited, not counted").
    const { rows: ev } = await db.query<{ event_id: string; account_id: string }>(
      'SELECT event_id, account_id FROM notifications WHERE id = $1',
      [throttled[0]?.notification_id],
    );
    const detail = await eventDetail(db, ev[0]?.account_id ?? '', 'mainnet', ev[0]?.event_id ?? '');
    expect(
      detail?.notifications[0]?.attempt_log.map((a) => [a.attempt, a.http_status, a.throttled]),
    ).toEqual([
      [1, 429, true],
      [1, 200, false],
    ]);

    // A 403 (bot blocked): a failed attempt with its status, then retried on the schedule.
    si.block(chat);
    await insertEvents(db, {
      accountId: (await db.query<{ account_id: string }>('SELECT account_id FROM watches')).rows[0]
        ?.account_id as string,
      watchId: (await db.query<{ id: string }>('SELECT id FROM watches')).rows[0]?.id as string,
      count: 1,
    });
    await db.query(`UPDATE notifications SET channel = 'telegram'`);
    worker.wake();
    await until(
      async () => (await states(db)).some((n) => n.status === 'DEAD'),
      'the blocked chat to dead-letter after six attempts',
    );
    const dead = (await states(db)).find((n) => n.status === 'DEAD');
    expect(dead?.attempts).toBe(6);
    const { rows: a403 } = await db.query<{
      http_status: number;
      error_class: string;
      error: string;
    }>(
      'SELECT http_status, error_class, error FROM attempts WHERE notification_id = $1 ORDER BY attempt',
      [dead?.id],
    );
    expect(a403).toHaveLength(6);
    for (const a of a403) {
      expect(a).toMatchObject({ http_status: 403, error_class: 'http' });
      expect(a.error).toMatch(/^Bot API 403: Forbidden/);
    }
  });

  it('follows a migrated group when sendMessage names the supergroup', async () => {
    const { bot, cfg } = await withBot();
    const si = standIn as TelegramStandIn;
    h = await apiHarness(engine);
    const db = h.db;
    const { accountId } = await chatOutbox(db, '-777', 2, 'group');
    si.migrate(-777, -100777);
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer: new MemoryPacer(),
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    stops.push(async () => {
      ac.abort();
      await run;
    });
    await until(
      async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
      'deliveries',
    );
    expect(si.delivered('-100777')).toHaveLength(2);
    const { rows } = await db.query<{ telegram_chat_id: string; telegram_chat_type: string }>(
      'SELECT telegram_chat_id, telegram_chat_type FROM accounts WHERE id = $1',
      [accountId],
    );
    expect(rows[0]).toEqual({ telegram_chat_id: '-100777', telegram_chat_type: 'supergroup' });
    expect((await states(db)).every((n) => n.attempts === 1)).toBe(true);
  });

  it.each(HOLD_CASES)(
    'after a 429, holds every message of that chat until retry_after (%s)',
    async (_, n) => {
      // Per-chat window 250 ms, retry_after 2 s: without the hold, the chat's next message would go
      // one window after the 429.
      const { bot, cfg } = await withBot({ TELEGRAM_PACING_SCALE: '0.25' });
      const si = standIn as TelegramStandIn;
      h = await apiHarness(engine);
      const db = h.db;
      const chat = '31337';
      await chatOutbox(db, chat, 4);
      si.failNext(chat, { code: 429, retryAfter: 2 });
      const prefix = `tw:test:hold:${randomBytes(4).toString('hex')}:`;
      const pacers: Pacer[] = [];
      if (n === 1) pacers.push(new MemoryPacer());
      else {
        const clients = [createRedis(REDIS_URL as string), createRedis(REDIS_URL as string)];
        stops.push(async () => {
          for (const c of clients) await closeRedis(c);
        });
        for (const c of clients) {
          expect(await waitReady(c, 5_000)).toBe(true);
          pacers.push(new RedisPacer(c, { prefix }));
        }
      }
      const workers = pacers.map(
        (pacer, i) =>
          new ChatDeliveryWorker({
            db,
            telegram: bot,
            pacer,
            config: cfg,
            logger: silentLogger,
            workerId: `hold${i}`,
          }),
      );
      const ac = new AbortController();
      const runs = workers.map((w) => w.start(ac.signal));
      stops.push(async () => {
        ac.abort();
        await Promise.all(runs);
      });
      await until(
        async () => (await states(db)).every((x) => x.status === 'DELIVERED'),
        'four deliveries',
      );
      const to = si.sent.filter((m) => m.chatId === chat);
      const refused = to.filter((m) => m.status === 429);
      expect(refused).toHaveLength(1);
      const t429 = refused[0]?.at ?? 0;
      const ok = to.filter((m) => m.status === 200);
      expect(ok).toHaveLength(4);
      // Nothing reached the chat before retry_after had passed since the 429 (arrival times, the
      // stand-in's clock): the held notifications waited, not only the one that got it.
      for (const m of ok) expect(m.at - t429).toBeGreaterThanOrEqual(2_000);
      // Waiting was never an attempt.
      expect((await states(db)).every((x) => x.attempts === 1)).toBe(true);
    },
    60_000,
  );

  it('a wake while every slot is held waits for room (it once spun and starved the process)', async () => {
    // Concurrency 2 and a per-chat window of 100 ms: the worker is full while the ingester wakes it.
    const { bot, cfg } = await withBot({ DELIVERY_CONCURRENCY: '2', TELEGRAM_PACING_SCALE: '0.1' });
    const si = standIn as TelegramStandIn;
    h = await apiHarness(engine);
    const db = h.db;
    await chatOutbox(db, '6060', 8);
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer: new MemoryPacer(),
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    stops.push(async () => {
      ac.abort();
      await run;
    });
    const waking = setInterval(() => worker.wake(), 5);
    stops.push(async () => clearInterval(waking));
    await until(
      async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
      'eight deliveries',
    );
    expect(si.delivered('6060')).toHaveLength(8);
  });

  it("paces the bot's own messages with deliveries: a group bound within the minute gets no 429 on its 21st", async () => {
    // Windows ×0.02: per group 20 per 1.2 s on arrival. The group is bound with /start (the bot
    // answers "Connected"), then 20 deliveries follow at once: the 21st message of the window
    // waits for room. Before the fix the reply was sent outside the pacing and the stand-in
    // refused the 21st with 429.
    const { bot, cfg } = await withBot(ARRIVAL_ENV, true);
    const si = standIn as TelegramStandIn;
    const pacer = new MemoryPacer();
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' }, telegram: bot, pacer });
    const harness = h;
    const ac = new AbortController();
    const polling = runUpdatePolling(
      {
        db: harness.db,
        telegram: bot,
        pacer,
        logger: silentLogger,
        databaseUrl: harness.t.url,
        network: 'mainnet',
      },
      ac.signal,
    );
    const worker = new ChatDeliveryWorker({
      db: harness.db,
      telegram: bot,
      pacer,
      config: cfg,
      logger: silentLogger,
    });
    const run = worker.start(ac.signal);
    stops.push(async () => {
      ac.abort();
      await polling;
      await run;
    });
    const s = new Session(harness.app);
    expect((await s.signUp('group@example.com')).statusCode).toBe(201);
    const connect = await s.request('POST', '/console/api/telegram/connect');
    const token = /start=([A-Za-z0-9_-]+)$/.exec(json<{ link: string }>(connect).link)?.[1] ?? '';
    const groupId = -1_002_020_020;
    si.userSends({ id: groupId, type: 'group', title: 'Paced' }, `/start@${si.username} ${token}`);
    await until(() => si.delivered(groupId).length === 1, 'the bot to answer in the group');
    expect(si.delivered(groupId)[0]?.text).toMatch(/^Connected/);
    // 20 chat deliveries to the same group, due at once.
    const { rows } = await harness.db.query<{ id: string }>(
      'SELECT id FROM accounts WHERE telegram_chat_id = $1',
      [String(groupId)],
    );
    const accountId = rows[0]?.id ?? '';
    const watchId = `wh_${randomBytes(8).toString('hex')}`;
    await harness.db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, active_from_block)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'incoming', 'telegram', 0)`,
      [watchId, accountId, USDT_CONTRACT, USDT_CONTRACT_HEX],
    );
    await insertEvents(harness.db, { accountId, watchId, count: 20 });
    await harness.db.query(`UPDATE notifications SET channel = 'telegram' WHERE watch_id = $1`, [
      watchId,
    ]);
    worker.wake();
    await until(
      async () => (await states(harness.db)).every((n) => n.status === 'DELIVERED'),
      '20 deliveries',
      60_000,
    );
    expect(si.delivered(groupId)).toHaveLength(21);
    expect(refusals(si)).toEqual([]);
    expect(si.sent.filter((m) => m.status === 429)).toEqual([]);
    expect((await states(harness.db)).every((n) => n.attempts === 1)).toBe(true);
  }, 90_000);

  it('paces a burst of 200 events for one chat: no 429 on arrival, never two in one per-chat window', async () => {
    const { bot, cfg } = await withBot(ARRIVAL_ENV, true);
    const si = standIn as TelegramStandIn;
    h = await apiHarness(engine);
    const db = h.db;
    const chat = '9001';
    await chatOutbox(db, chat, 200);
    const worker = new ChatDeliveryWorker({
      db,
      telegram: bot,
      pacer: new MemoryPacer(),
      config: cfg,
      logger: silentLogger,
    });
    const ac = new AbortController();
    const run = worker.start(ac.signal);
    stops.push(async () => {
      ac.abort();
      await run;
    });
    await until(
      async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
      '200 deliveries',
      90_000,
    );
    expect(si.delivered(chat)).toHaveLength(200);
    // Telegram's side: not one message arrived inside the chat's window of the previous one.
    expect(refusals(si)).toEqual([]);
    expect(si.sent).toHaveLength(200);
    // Every delivery is its first attempt: waiting for a slot was never an attempt.
    expect((await states(db)).every((n) => n.attempts === 1)).toBe(true);
    const starts = await attemptStarts(db);
    expect(starts).toHaveLength(200);
    const windowMs = BOT_API_LIMITS.perChat.windowMs * cfg.telegram.pacingScale;
    assertWindow(starts, BOT_API_LIMITS.perChat.limit, windowMs);
  }, 120_000);

  it('two chats and a group, two workers: no 429 on arrival from any limit', async () => {
    // Windows ×0.02: per chat 20 ms, per group 20 per 1.2 s, per bot 30 per 20 ms. 25 messages to
    // the group: the 21st waits for the group's window, on arrival.
    const { bot, cfg } = await withBot(ARRIVAL_ENV, true);
    const si = standIn as TelegramStandIn;
    h = await apiHarness(engine);
    const db = h.db;
    const group = '-100555';
    await chatOutbox(db, '1111', 25);
    await chatOutbox(db, '2222', 25);
    await chatOutbox(db, group, 25, 'supergroup');
    const pacers: Pacer[] = [];
    if (REDIS_URL) {
      const prefix = `tw:test:arrival:${randomBytes(4).toString('hex')}:`;
      const clients = [
        createRedis(REDIS_URL, ARRIVAL_REDIS),
        createRedis(REDIS_URL, ARRIVAL_REDIS),
      ];
      stops.push(async () => {
        for (const c of clients) await closeRedis(c);
      });
      for (const c of clients) {
        expect(await waitReady(c, 5_000)).toBe(true);
        pacers.push(new FallbackPacer(new RedisPacer(c, { prefix }), silentLogger));
      }
    } else pacers.push(new MemoryPacer());
    const workers = pacers.map(
      (pacer, i) =>
        new ChatDeliveryWorker({
          db,
          telegram: bot,
          pacer,
          config: cfg,
          logger: silentLogger,
          workerId: `arrival${i}`,
        }),
    );
    const ac = new AbortController();
    const runs = workers.map((w) => w.start(ac.signal));
    stops.push(async () => {
      ac.abort();
      await Promise.all(runs);
    });
    await until(
      async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
      '75 deliveries',
      60_000,
    );
    for (const chat of ['1111', '2222', group]) expect(si.delivered(chat)).toHaveLength(25);
    expect(refusals(si)).toEqual([]);
    expect(si.sent).toHaveLength(75);
    expect((await states(db)).every((n) => n.attempts === 1)).toBe(true);
  }, 90_000);

  it.skipIf(!REDIS_URL)(
    'two workers sharing Redis never exceed the per-bot window, on arrival either',
    async () => {
      const { bot, cfg } = await withBot(ARRIVAL_ENV, true);
      const si = standIn as TelegramStandIn;
      h = await apiHarness(engine);
      const db = h.db;
      // 40 chats × 3 events: the per-bot window (30 per window) is the one that binds.
      for (let i = 0; i < 40; i++) await chatOutbox(db, String(10_000 + i), 3);
      const prefix = `tw:test:pace:${randomBytes(4).toString('hex')}:`;
      const clients = [
        createRedis(REDIS_URL as string, ARRIVAL_REDIS),
        createRedis(REDIS_URL as string, ARRIVAL_REDIS),
      ];
      stops.push(async () => {
        for (const c of clients) await closeRedis(c);
      });
      for (const c of clients) expect(await waitReady(c, 5_000)).toBe(true);
      const workers = clients.map(
        (c, i) =>
          new ChatDeliveryWorker({
            db,
            telegram: bot,
            pacer: new RedisPacer(c, { prefix }) as Pacer,
            config: cfg,
            logger: silentLogger,
            workerId: `w${i}`,
          }),
      );
      const ac = new AbortController();
      const runs = workers.map((w) => w.start(ac.signal));
      stops.push(async () => {
        ac.abort();
        await Promise.all(runs);
      });
      await until(
        async () => (await states(db)).every((n) => n.status === 'DELIVERED'),
        '120 deliveries',
        90_000,
      );
      expect(workers.every((w) => w.delivered > 0)).toBe(true);
      expect(refusals(si)).toEqual([]);
      expect(si.sent).toHaveLength(120);
      const starts = await attemptStarts(db);
      expect(starts).toHaveLength(120);
      const windowMs = BOT_API_LIMITS.perBot.windowMs * cfg.telegram.pacingScale;
      assertWindow(starts, BOT_API_LIMITS.perBot.limit, windowMs);
      // And per chat.
      const { rows } = await db.query<{ chat: string; t: Date }>(
        `SELECT acc.telegram_chat_id AS chat, a.started_at AS t
         FROM attempts a JOIN notifications n ON n.id = a.notification_id
         JOIN accounts acc ON acc.id = n.account_id ORDER BY a.started_at`,
      );
      const byChat = new Map<string, number[]>();
      for (const r of rows) byChat.set(r.chat, [...(byChat.get(r.chat) ?? []), r.t.getTime()]);
      for (const ts of byChat.values()) {
        assertWindow(ts, 1, BOT_API_LIMITS.perChat.windowMs * cfg.telegram.pacingScale);
      }
    },
    120_000,
  );
});

/**
 * The stand-in's refusals by its arrival limits, each with the gap since the previous message the
 * same chat accepted (what the assertion prints when it fails).
 */
function refusals(si: TelegramStandIn): string[] {
  return si.limited().map((m) => {
    const before = si.sent.filter((x) => x.chatId === m.chatId && x.at <= m.at && x.status === 200);
    const prev = before[before.length - 1];
    return `429 (${m.limit}) to ${m.chatId}, ${prev ? m.at - prev.at : '∞'} ms after the previous accepted`;
  });
}

/** The recorded start times (the slots' times) of every attempt, ms, ascending. */
async function attemptStarts(db: Db): Promise<number[]> {
  const { rows } = await db.query<{ t: Date }>(
    'SELECT started_at AS t FROM attempts ORDER BY started_at',
  );
  return rows.map((r) => r.t.getTime());
}

/** No `windowMs`-long window (t − windowMs, t] holds more than `limit` of `ts` (sorted). */
function assertWindow(ts: readonly number[], limit: number, windowMs: number): void {
  for (let i = limit; i < ts.length; i++) {
    const gap = (ts[i] ?? 0) - (ts[i - limit] ?? 0);
    if (gap < windowMs) {
      throw new Error(
        `messages ${i - limit} and ${i} are ${gap} ms apart: more than ${limit} in ${windowMs} ms`,
      );
    }
  }
}
