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
import { emailAlertSender, mailerTransport } from '../../src/watches/alert-mail.js';
import { AlertLoop } from '../../src/watches/alert-outbox.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { insertAccount, USDT_CONTRACT } from '../helpers/outbox.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

// Two more addresses (watches are unique per account and address; any valid ones do).
const QUIET_ADDRESS = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';
const CLI_ADDRESS = 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL';
const FLAP_ADDRESS = 'TMuA6YqfCeX8EhbfYEg5y7S4DqzSJireY9';
// A receiver URL whose path and query hold secrets: no alert may show more than its host.
const RECEIVER_URL = 'https://93.184.216.34:8443/hooks/shop-7f3a?token=s3cr3t-t0ken';

/** Every alert body shows the receiver's host, and nothing of its path or query. */
function expectHostOnly(text: string) {
  expect(text).toContain('Endpoint: 93.184.216.34:8443');
  for (const leak of ['/hooks', 'shop-7f3a', 'token', 's3cr3t', '?'])
    expect(text).not.toContain(leak);
}

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
  /** Queue one alert of `kind` for watch `watchId` of `acc`, with its e-mail send (migration 055). */
  const queue = async (acc: string, watchId: string, kind: string, message: string) => {
    const db = (t as TestDb).db;
    const alertId = newId('alr');
    await db.query(
      `INSERT INTO watch_alerts (id, watch_id, account_id, kind, message)
       VALUES ($1, $2, $3, $4, $5)`,
      [alertId, watchId, acc, kind, message],
    );
    await db.query(
      `INSERT INTO alert_sends (id, alert_id, watch_id, account_id, target)
       VALUES ($1, $2, $3, $4, 'email')`,
      [newId('als'), alertId, watchId, acc],
    );
  };
  /** A loop sending e-mail through `mailer`, paced `paceMinutes`. */
  const loopOf = (mailer: Mailer, paceMinutes = 5, batch?: number) =>
    new AlertLoop({
      db: (t as TestDb).db,
      consoleUrl: 'https://tw.example',
      paceMinutes,
      ...(batch === undefined ? {} : { batch }),
      email: emailAlertSender((t as TestDb).db, mailerTransport(mailer)),
      logger: silentLogger,
    });
  /** A webhook watch of `acc` labelled `label`, with one pending alert; its id. */
  const watchWithAlert = async (acc: string, label: string, address = USDT_CONTRACT) => {
    const db = (t as TestDb).db;
    const watchId = newId('wh');
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext,
                            active_from_block, label)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', $6,
               'k', '\\x00'::bytea, 1, $5)`,
      [watchId, acc, address, base58ToHex(address), label, RECEIVER_URL],
    );
    await queue(
      acc,
      watchId,
      'failing',
      'Deliveries are failing: 5 delivery attempts in a row failed.',
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
    const a = loopOf(mailer);
    const b = loopOf(mailer);
    try {
      expect(await a.runOnce()).toEqual({ sent: 1, failed: 0 });
      // Another process finds the lease held; the holder finds nothing left to send.
      expect(await b.runOnce()).toBeNull();
      expect(await a.runOnce()).toEqual({ sent: 0, failed: 0 });
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
      expectHostOnly(got[0]?.text ?? '');
      expectHostOnly(got[0]?.html ?? '');
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
    const loop = loopOf(mailer);
    try {
      // Both alerts are done with; one message went out.
      expect(await loop.runOnce()).toEqual({ sent: 2, failed: 0 });
    } finally {
      await loop.stop();
      await mailer.close();
    }
    const got = (smtp as TestSmtp).received.slice(before);
    expect(got.map((m) => m.to)).toEqual([[cliEmail.toLowerCase()]]);
    expect(got[0]?.text).toContain('CLI shop');
    expect(got.some((m) => m.text.includes('Quiet shop'))).toBe(false);
    const { rows } = await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM alert_sends WHERE sent_at IS NULL',
    );
    expect(rows).toEqual([{ n: 0 }]);
  }, 180_000);

  it('alerts every outage; a flapping endpoint gets one summary per pace, never silence', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    await user(acc, 'oncall@example.com', 'owner');
    const watchId = await watchWithAlert(acc, 'Flappy shop', FLAP_ADDRESS);
    const mailer = new Mailer({
      transport: (smtp as TestSmtp).url,
      from: 'tronwatch <no-reply@tw.example>',
      logger: silentLogger,
    });
    const loop = loopOf(mailer, 5);
    const mine = () =>
      (smtp as TestSmtp).received.filter((m) => m.to.includes('oncall@example.com'));
    try {
      // The first outage is mailed at once.
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
      expect(mine().map((m) => m.subject)).toEqual(['Deliveries to your webhook are failing']);
      // It ends, a second outage starts and ends within the pace (5 minutes): nothing yet…
      await queue(acc, watchId, 'recovered', 'Deliveries succeed again.');
      await queue(
        acc,
        watchId,
        'failing',
        'Deliveries are failing: 5 delivery attempts in a row failed.',
      );
      await queue(acc, watchId, 'recovered', 'Deliveries succeed again.');
      expect(await loop.runOnce()).toEqual({ sent: 0, failed: 0 });
      expect(mine()).toHaveLength(1);
      // …and once the pace has passed (the last send moved 5 minutes back), one summary of the
      // three changes, which says the state now.
      await db.query(
        `UPDATE alert_sends SET sent_at = sent_at - interval '5 minutes'
          WHERE watch_id = $1 AND sent_at IS NOT NULL`,
        [watchId],
      );
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
      const got = mine();
      expect(got).toHaveLength(2);
      const summary = got[1];
      expect(summary?.subject).toMatch(
        /^Deliveries to your webhook are flapping: 1 outage since .* UTC, now delivering again$/,
      );
      expect(summary?.text).toContain('changed state 3 times');
      expect(summary?.text.match(/^- .* UTC {2}Deliveries (succeed|are failing)/gm)).toHaveLength(
        3,
      );
      expect(summary?.text).toContain('Now: delivering again.');
      for (const m of got) {
        expectHostOnly(m.text);
        expectHostOnly(m.html);
      }
      // Every alert of the watch is done with, each once.
      const { rows } = await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM watch_alerts WHERE watch_id = $1 AND mailed_at IS NOT NULL',
        [watchId],
      );
      expect(rows).toEqual([{ n: 4 }]);
    } finally {
      await loop.stop();
      await mailer.close();
    }
  }, 180_000);

  it('a watch that waits for its pace never holds up another watch (the batch is due groups only)', async () => {
    const db = (t as TestDb).db;
    const acc = await insertAccount(db);
    await user(acc, 'batch@example.com', 'owner');
    const paced = await watchWithAlert(acc, 'Paced shop', 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf');
    const mailer = new Mailer({
      transport: (smtp as TestSmtp).url,
      from: 'tronwatch <no-reply@tw.example>',
      logger: silentLogger,
    });
    // One group per run: the paced watch's older change comes first in the outbox.
    const loop = loopOf(mailer, 5, 1);
    try {
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
      await queue(acc, paced, 'recovered', 'Deliveries succeed again.');
      const other = await watchWithAlert(acc, 'Other shop', 'TFczxzPhnThNSqr5by8tvxsdCFRRz6cPNq');
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
      const got = (smtp as TestSmtp).received.filter((m) => m.to.includes('batch@example.com'));
      expect(got.map((m) => m.text.includes('Other shop'))).toEqual([false, true]);
      void other;
    } finally {
      await loop.stop();
      await mailer.close();
    }
  }, 180_000);
});
