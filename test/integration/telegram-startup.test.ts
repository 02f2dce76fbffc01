/**
 * Startup does not depend on the Bot API (issue 13): with TELEGRAM_BOT_TOKEN set, the whole
 * service (api and worker roles) starts while the Bot API refuses connections, or refuses the
 * token (401); webhooks are delivered meanwhile; getMe is retried in the background and its
 * failure logged as an error once; the console's Telegram endpoints answer 503
 * telegram_unavailable and chat notifications wait in the outbox without an attempt. Once the Bot
 * API answers (the stand-in started after the service, on the configured port), the console shows
 * the bot and the waiting chat notification is delivered as its first attempt.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import { consoleSession } from '../../src/devnet/console-client.js';
import { startReceiver } from '../../src/devnet/receiver.js';
import { startTelegramStandIn, type TelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
import { type Service, secretBox, startService } from '../../src/service.js';
import { dbEngines, type Engine, emptyDb, type TestDb } from '../helpers/db.js';
import { insertAccount, insertEvents, insertWebhookWatch } from '../helpers/outbox.js';

const TOKEN = '7000000001:STAND-IN-startup';
const PASSWORD = 'correct horse battery staple';

/** A free port on 127.0.0.1 (nothing listens on it when this returns). */
async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

/** Wait until `check` is true (bounded: a condition, never a duration). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe.each(dbEngines)('a Bot API that is down at start, on %s', (engine: Engine) => {
  let svc: Service | undefined;
  let standIn: TelegramStandIn | undefined;
  let t: TestDb | undefined;
  let dir: string | undefined;
  const closers: Array<() => Promise<unknown>> = [];
  afterEach(async () => {
    await svc?.stop();
    await standIn?.close();
    for (const c of closers.splice(0).reverse()) await c();
    await t?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    svc = standIn = t = dir = undefined;
  });

  it.each([
    ['refused connections', 'refused'],
    ['a token refused with 401', 'unauthorized'],
  ] as const)(
    'starts with %s, then delivers chat messages once getMe answers',
    async (_, mode) => {
      const port = await freePort();
      if (mode === 'unauthorized') {
        // A Bot API that knows another token: getMe answers 401 Unauthorized.
        standIn = await startTelegramStandIn({ port, token: '7000000001:ANOTHER-TOKEN' });
      }
      let hookSecret = '';
      const receiver = await startReceiver({ secretFor: () => hookSecret });
      closers.push(() => receiver.close());
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-tg-startup-'));
      const caFile = path.join(dir, 'ca.pem');
      fs.writeFileSync(caFile, receiver.ca);
      let dbUrl: string | undefined;
      if (engine === 'postgres') {
        t = await emptyDb('postgres');
        dbUrl = t.url;
      }
      const cfg = loadConfig({
        DATA_DIR: dir,
        ...(dbUrl ? { DATABASE_URL: dbUrl } : {}),
        TRON_NODE_URL: 'http://127.0.0.1:9', // api and worker roles do not read the chain
        HOST: '127.0.0.1',
        PORT: '0',
        METRICS_PORT: '0',
        CONSOLE_SIGNUP: 'open',
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_CA_FILE: caFile,
        DELIVERY_POLL_MS: '50',
        TELEGRAM_BOT_TOKEN: TOKEN,
        TELEGRAM_API_ROOT: `http://127.0.0.1:${port}`,
        TELEGRAM_POLL_TIMEOUT_SECONDS: '1',
        TELEGRAM_TIMEOUT_MS: '10000', // a loaded machine must not turn the 401 into a timeout
        TELEGRAM_PACING_SCALE: '0.02',
      });
      const lines: string[] = [];
      const logger = pino(
        { level: 'debug' },
        new Writable({
          write(chunk: Buffer, _enc, cb) {
            lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
            cb();
          },
        }),
      );
      // The start itself succeeds: nothing waits for getMe.
      svc = await startService(cfg, { roles: ['api', 'worker'], logger });
      const base = svc.url as string;
      const db: Db = svc.db;
      expect((await fetch(`${base}/healthz`)).status).toBe(200);

      // A chat notification and a webhook notification wait in the outbox.
      const call = await consoleSession(base);
      expect(
        (await call('POST', '/console/api/signup', { email: 'up@example.com', password: PASSWORD }))
          .status,
      ).toBe(201);
      expect(await call('GET', '/console/api/config')).toMatchObject({
        json: { telegram: true, bot_username: null },
      });
      for (const [method, p] of [
        ['GET', '/console/api/telegram'],
        ['POST', '/console/api/telegram/connect'],
        ['DELETE', '/console/api/telegram'],
      ] as const) {
        const r = await call(method, p);
        expect(r.status, `${method} ${p}`).toBe(503);
        expect(r.json).toMatchObject({ code: 'telegram_unavailable' });
      }
      const chatAccount = await insertAccount(db);
      await db.query(
        `UPDATE accounts SET telegram_chat_id = '4242', telegram_chat_type = 'private',
                           telegram_bound_at = now() WHERE id = $1`,
        [chatAccount],
      );
      await db.query(
        `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, active_from_block)
       VALUES ('wh_startupchat', $1, 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'incoming', 'telegram', 0)`,
        [chatAccount],
      );
      // Inserted as a webhook notification not yet due, then made a chat one due now: due at once,
      // the running webhook worker could claim it before the UPDATE (and fail it: no URL).
      const [chatEvent] = await insertEvents(db, {
        accountId: chatAccount,
        watchId: 'wh_startupchat',
        dueAt: new Date(Date.now() + 3_600_000),
      });
      await db.query(
        `UPDATE notifications SET channel = 'telegram', next_attempt_at = now()
          WHERE watch_id = 'wh_startupchat'`,
      );
      const hookAccount = await insertAccount(db);
      hookSecret = (
        await insertWebhookWatch(db, secretBox(cfg, logger), {
          accountId: hookAccount,
          url: `${receiver.origin}/hook`,
        })
      ).secret;
      const { rows: hookWatch } = await db.query<{ id: string }>(
        'SELECT id FROM watches WHERE account_id = $1',
        [hookAccount],
      );
      const [hookEvent] = await insertEvents(db, {
        accountId: hookAccount,
        watchId: hookWatch[0]?.id ?? '',
      });

      // Webhooks are delivered while the Bot API is down.
      await until(
        async () =>
          (
            await db.query<{ status: string }>('SELECT status FROM notifications WHERE id = $1', [
              hookEvent?.notificationId,
            ])
          ).rows[0]?.status === 'DELIVERED',
        'the webhook delivery',
      );
      // getMe failed, logged as an error once (then retried at debug).
      await until(
        () => lines.filter((l) => l.includes('"telegram getMe failed again')).length > 0,
        'a getMe retry',
      );
      const errors = lines.filter((l) => l.includes('"level":50'));
      expect(errors).toHaveLength(1);
      expect(errors[0], errors[0]).toContain(
        mode === 'unauthorized' ? 'refused the token (401)' : 'Bot API is unreachable',
      );
      expect(errors[0]).not.toContain(TOKEN);
      // The chat notification waited: no attempt.
      const waiting = await db.query<{ status: string; attempts: number }>(
        'SELECT status, attempts FROM notifications WHERE id = $1',
        [chatEvent?.notificationId],
      );
      expect(waiting.rows[0]).toEqual({ status: 'PENDING', attempts: 0 });
      expect(svc.chatWorker).toBeUndefined();

      // The Bot API comes up (with the right token) on the configured port.
      await standIn?.close();
      standIn = await startTelegramStandIn({ port, token: TOKEN });
      const si = standIn;
      await until(
        async () => (await call('GET', '/console/api/telegram')).status === 200,
        'the bot',
      );
      expect((await call('GET', '/console/api/telegram')).json).toMatchObject({
        configured: true,
        bot_username: si.username,
      });
      await until(() => si.delivered('4242').length === 1, 'the waiting chat message');
      await until(
        async () =>
          (
            await db.query<{ status: string }>('SELECT status FROM notifications WHERE id = $1', [
              chatEvent?.notificationId,
            ])
          ).rows[0]?.status === 'DELIVERED',
        'the chat delivery recorded',
      );
      const done = await db.query<{ attempts: number }>(
        'SELECT attempts FROM notifications WHERE id = $1',
        [chatEvent?.notificationId],
      );
      expect(done.rows[0]?.attempts).toBe(1);
      expect(lines.some((l) => l.includes('"telegram bot ready"'))).toBe(true);
      // Still one error for the whole episode.
      expect(lines.filter((l) => l.includes('"level":50'))).toHaveLength(1);
    },
    120_000,
  );
});
