/**
 * Watch alerts by e-mail (issue 19 item 2, wired in the worker role): the alert outbox
 * (watch_alerts) is sent through the real mailer to a real SMTP server in this process, to the
 * account's owners and admins who joined, once, by one process at a time (lease 'alert-mail').
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { Mailer } from '../../src/mail/mailer.js';
import { AlertMailLoop } from '../../src/watches/alert-mail.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { insertAccount, USDT_CONTRACT, USDT_CONTRACT_HEX } from '../helpers/outbox.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

describe.each(dbEngines)('alert e-mails on %s', (engine) => {
  let t: TestDb | undefined;
  let smtp: TestSmtp | undefined;
  beforeAll(async () => {
    t = await migratedDb(engine);
    smtp = await startSmtp();
  }, 180_000);
  afterAll(async () => {
    await smtp?.close();
    await t?.drop();
  });

  it("mails each pending alert once to the account's owners and admins, one sender at a time", async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    const user = async (email: string, role: string, joined: boolean) =>
      db.query(
        `INSERT INTO console_users (id, account_id, email, role, joined_at)
         VALUES ($1, $2, $3, $4, CASE WHEN $5::boolean THEN now() END)`,
        [newId('usr'), acc, email, role, joined],
      );
    await user('owner@example.com', 'owner', true);
    await user('admin@example.com', 'admin', true);
    await user('invited-admin@example.com', 'admin', false);
    await user('dev@example.com', 'developer', true);
    await user('viewer@example.com', 'viewer', true);
    const watchId = newId('wh');
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext,
                            active_from_block, label)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://93.184.216.34/h',
               'k', '\\x00'::bytea, 1, 'Shop deposits')`,
      [watchId, acc, USDT_CONTRACT, USDT_CONTRACT_HEX],
    );
    await db.query(
      `INSERT INTO watch_alerts (id, watch_id, account_id, kind, message)
       VALUES ($1, $2, $3, 'failing', '5 deliveries in a row failed: HTTP 500')`,
      [newId('alr'), watchId, acc],
    );
    const mailer = new Mailer({
      transport: (smtp as TestSmtp).url,
      from: 'tronwatch <no-reply@tw.example>',
      logger: silentLogger,
    });
    try {
      const opts = { db, mailer, consoleUrl: 'https://tw.example', logger: silentLogger };
      const a = new AlertMailLoop(opts);
      const b = new AlertMailLoop(opts);
      expect(await a.runOnce()).toBe(1);
      // Another process finds the lease held; the holder finds nothing left to send.
      expect(await b.runOnce()).toBeNull();
      expect(await a.runOnce()).toBe(0);
      const got = (smtp as TestSmtp).received.filter((m) => m.subject.includes('failing'));
      expect(got).toHaveLength(1);
      expect([...(got[0]?.to ?? [])].sort()).toEqual(['admin@example.com', 'owner@example.com']);
      expect(got[0]?.subject).toBe('Deliveries to your webhook are failing');
      expect(got[0]?.text).toContain('Shop deposits');
      expect(got[0]?.text).toContain(`https://tw.example/console/watches/${watchId}`);
      const { rows } = await db.query<{ mailed: boolean }>(
        'SELECT mailed_at IS NOT NULL AS mailed FROM watch_alerts',
      );
      expect(rows).toEqual([{ mailed: true }]);
    } finally {
      await mailer.close();
    }
  }, 180_000);
});
