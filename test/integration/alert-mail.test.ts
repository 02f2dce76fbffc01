/**
 * Watch alerts by e-mail (issue 19 item 2, wired in the worker role): the alert outbox
 * (watch_alerts) is sent through the real mailer to a real SMTP server in this process, to the
 * account's members who joined and opted in (console_users.alert_emails, migration 047: set here
 * as createUser and PUT /console/api/members/me/alerts do), once, by one process at a time
 * (lease 'alert-mail'); nothing to an account whose members all opted out; the account's own
 * address when no member has joined.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alertEmailsByDefault, type Role } from '../../src/accounts/users.js';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { Mailer } from '../../src/mail/mailer.js';
import { base58ToHex } from '../../src/tron/address.js';
import { AlertMailLoop } from '../../src/watches/alert-mail.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { insertAccount, USDT_CONTRACT } from '../helpers/outbox.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

// Two more addresses (watches are unique per account and address; any valid ones do).
const QUIET_ADDRESS = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';
const CLI_ADDRESS = 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL';

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

  /** A console user of `acc`; `alerts`: its alert_emails choice (default: its role's). */
  const user = (
    acc: string,
    email: string,
    role: Role,
    o: { joined?: boolean; alerts?: boolean } = {},
  ) =>
    (t as TestDb).db.query(
      `INSERT INTO console_users (id, account_id, email, role, joined_at, alert_emails)
       VALUES ($1, $2, $3, $4, CASE WHEN $5::boolean THEN now() END, $6)`,
      [newId('usr'), acc, email, role, o.joined ?? true, o.alerts ?? alertEmailsByDefault(role)],
    );
  /** A webhook watch of `acc` labelled `label`, with one pending alert; its id. */
  const watchWithAlert = async (acc: string, label: string, address = USDT_CONTRACT) => {
    const db = (t as TestDb).db;
    const watchId = newId('wh');
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext,
                            active_from_block, label)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://93.184.216.34/h',
               'k', '\\x00'::bytea, 1, $5)`,
      [watchId, acc, address, base58ToHex(address), label],
    );
    await db.query(
      `INSERT INTO watch_alerts (id, watch_id, account_id, kind, message)
       VALUES ($1, $2, $3, 'failing', '5 deliveries in a row failed: HTTP 500')`,
      [newId('alr'), watchId, acc],
    );
    return watchId;
  };

  it("mails each pending alert once to the account's joined members who opted in, one sender at a time", async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    await user(acc, 'owner@example.com', 'owner');
    await user(acc, 'admin@example.com', 'admin');
    await user(acc, 'invited-admin@example.com', 'admin', { joined: false });
    // An admin who opted out gets nothing; a developer who opted in gets the alert.
    await user(acc, 'quiet-admin@example.com', 'admin', { alerts: false });
    await user(acc, 'dev@example.com', 'developer', { alerts: true });
    await user(acc, 'other-dev@example.com', 'developer');
    await user(acc, 'viewer@example.com', 'viewer');
    const watchId = await watchWithAlert(acc, 'Shop deposits');
    const mailer = new Mailer({
      transport: (smtp as TestSmtp).url,
      from: 'tronwatch <no-reply@tw.example>',
      logger: silentLogger,
    });
    const opts = { db, mailer, consoleUrl: 'https://tw.example', logger: silentLogger };
    const a = new AlertMailLoop(opts);
    const b = new AlertMailLoop(opts);
    try {
      expect(await a.runOnce()).toBe(1);
      // Another process finds the lease held; the holder finds nothing left to send.
      expect(await b.runOnce()).toBeNull();
      expect(await a.runOnce()).toBe(0);
      const got = (smtp as TestSmtp).received.filter((m) => m.subject.includes('failing'));
      expect(got).toHaveLength(1);
      expect([...(got[0]?.to ?? [])].sort()).toEqual([
        'admin@example.com',
        'dev@example.com',
        'owner@example.com',
      ]);
      expect(got[0]?.subject).toBe('Deliveries to your webhook are failing');
      expect(got[0]?.text).toContain('Shop deposits');
      expect(got[0]?.text).toContain(`https://tw.example/console/watches/${watchId}`);
      const { rows } = await db.query<{ mailed: boolean }>(
        'SELECT mailed_at IS NOT NULL AS mailed FROM watch_alerts WHERE watch_id = $1',
        [watchId],
      );
      expect(rows).toEqual([{ mailed: true }]);
    } finally {
      await a.stop();
      await b.stop();
      await mailer.close();
    }
  }, 180_000);

  it('sends nothing when every joined member opted out; the account address when none has joined', async () => {
    const db = (t as TestDb).db;
    // Everyone opted out (the owner included): the alert is done with, nobody is mailed.
    const quiet = await insertAccount(db);
    await user(quiet, 'quiet-owner@example.com', 'owner', { alerts: false });
    await user(quiet, 'quiet-dev@example.com', 'developer');
    await watchWithAlert(quiet, 'Quiet shop', QUIET_ADDRESS);
    // Nobody has joined yet (a CLI account): its own address, even though an invited admin
    // would be opted in once joined.
    const cli = await insertAccount(db);
    await user(cli, 'not-yet@example.com', 'admin', { joined: false });
    await watchWithAlert(cli, 'CLI shop', CLI_ADDRESS);
    const { rows: acc } = await db.query<{ email: string }>(
      'SELECT email FROM accounts WHERE id = $1',
      [cli],
    );
    const cliEmail = (acc[0] as { email: string }).email;
    const before = (smtp as TestSmtp).received.length;
    const mailer = new Mailer({
      transport: (smtp as TestSmtp).url,
      from: 'tronwatch <no-reply@tw.example>',
      logger: silentLogger,
    });
    const loop = new AlertMailLoop({
      db,
      mailer,
      consoleUrl: 'https://tw.example',
      logger: silentLogger,
    });
    try {
      // Both alerts are done with; one message went out.
      expect(await loop.runOnce()).toBe(2);
    } finally {
      await loop.stop();
      await mailer.close();
    }
    const got = (smtp as TestSmtp).received.slice(before);
    expect(got.map((m) => m.to)).toEqual([[cliEmail.toLowerCase()]]);
    expect(got[0]?.text).toContain('CLI shop');
    expect(got.some((m) => m.text.includes('Quiet shop'))).toBe(false);
    const { rows } = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM watch_alerts WHERE mailed_at IS NULL',
    );
    expect(rows).toEqual([{ n: 0 }]);
  }, 180_000);
});
