/**
 * Alert channels (issue 29 item 1), on both engines, through the console's JSON API (inject,
 * with a browser's cookies and CSRF), a real HTTPS receiver standing in for a Slack-compatible
 * incoming webhook and an on-call tool, and a real SMTP server:
 *
 * - the settings: add a Slack-compatible webhook and a signed alert webhook (its secret shown
 *   once, never again), URLs checked by the webhook URL policy (a private address refused with
 *   400 naming `url`), shown by host only; turn one off; remove one; every change audited with
 *   before/after;
 * - the test button on each channel and e-mail;
 * - the alert outbox: one alert reaches e-mail and both channels, the alert webhook verified with
 *   the `standardwebhooks` library; a channel that answers 500 is tried again (a try counted,
 *   the error shown on the page, host only), a 429 waits its Retry-After without a try;
 * - host only: every body the receiver got and every e-mail is searched for the paths and
 *   queries of the channels' and the watch's URLs.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Webhook as StandardWebhook } from 'standardwebhooks';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { type ReceivedRequest, type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { stubResolver } from '../../src/net/dns.js';
import { base58ToHex } from '../../src/tron/address.js';
import { AlertChannelSender, saveAlertChannel } from '../../src/watches/alert-channels.js';
import { emailAlertSender, mailerTransport } from '../../src/watches/alert-mail.js';
import { AlertLoop, queueAlertSends } from '../../src/watches/alert-outbox.js';
import { queueAlert } from '../../src/watches/health.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-alert-channels-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** Secrets in URLs that no alert, page or log may show. */
const SLACK_PATH = '/services/T0000/B0000/slackSecretPath';
const SLACK_QUERY = 'token=slk-q-777';
const HOOK_PATH = '/oncall/alertHookPath';
const HOOK_QUERY = 'key=wh-q-888';
const WATCH_PATH = '/shop/watchPath';
const WATCH_QUERY = 'token=watch-q-999';
const LEAKS = [
  'slackSecretPath',
  'slk-q-777',
  'alertHookPath',
  'wh-q-888',
  'watchPath',
  'watch-q-999',
];

interface Channel {
  id: string;
  kind: string;
  host: string;
  enabled: boolean;
  pending: number;
  last_error: string | null;
  last_sent_at: string | null;
}
interface Settings {
  pace_minutes: number;
  email: { available: boolean; recipients: string[] };
  channels: Channel[];
}

describe.each(dbEngines)('alert channels on %s', (engine) => {
  let h: ApiHarness | undefined;
  let r: Receiver | undefined;
  let smtp: TestSmtp | undefined;
  afterEach(async () => {
    await h?.close();
    await r?.close();
    await smtp?.close();
    h = undefined;
    r = undefined;
    smtp = undefined;
  });

  it('are set in the console, tested, audited, and carry every alert, host only', async () => {
    let slackStatus: number | { status: number; headers: Record<string, string> } = 200;
    r = await startReceiver({
      respond: (req) => (req.path.startsWith('/services/') ? slackStatus : 200),
    });
    const rr = r;
    smtp = await startSmtp();
    const caFile = path.join(tmp, `ca-${engine}.pem`);
    fs.writeFileSync(caFile, r.ca);
    h = await apiHarness(engine, {
      env: {
        CONSOLE_SIGNUP: 'open',
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        WEBHOOK_CA_FILE: caFile,
        SMTP_URL: smtp.url,
      },
    });
    const hh = h;
    const b = new Browser(hh.app);
    expect((await b.signUp('oncall@example.com')).statusCode).toBe(201);
    const settings = async () => json<Settings>(await b.get('/console/api/alert-settings'));
    expect(await settings()).toEqual({
      pace_minutes: 5,
      email: { available: true, recipients: ['oncall@example.com'] },
      channels: [],
    });

    // Refused: no URL to add a channel with; a private address outside WEBHOOK_ALLOW_CIDRS.
    const noUrl = await b.put('/console/api/alert-settings/channels/slack', { enabled: true });
    expect(noUrl.statusCode).toBe(400);
    expect(json(noUrl)).toMatchObject({ details: [{ field: 'url' }] });
    const priv = await b.put('/console/api/alert-settings/channels/slack', {
      url: 'https://10.1.2.3/services/x',
    });
    expect(priv.statusCode).toBe(400);
    expect(json(priv)).toMatchObject({
      error: 'invalid request body',
      details: [{ field: 'url', message: expect.stringMatching(/non-public|private/) }],
    });
    const badKind = await b.put('/console/api/alert-settings/channels/pager', { url: rr.url });
    expect(badKind.statusCode).toBe(400);

    // Added: the Slack-compatible webhook (no secret) and the signed alert webhook (its secret
    // once). Only hosts are shown.
    const host = new URL(rr.origin).host;
    const slack = await b.put('/console/api/alert-settings/channels/slack', {
      url: `${rr.origin}${SLACK_PATH}?${SLACK_QUERY}`,
    });
    expect(slack.statusCode, slack.body).toBe(201);
    expect(json(slack)).toMatchObject({
      channel: { kind: 'slack', host, enabled: true },
      secret: null,
    });
    const hook = await b.put('/console/api/alert-settings/channels/webhook', {
      url: `${rr.origin}${HOOK_PATH}?${HOOK_QUERY}`,
    });
    expect(hook.statusCode, hook.body).toBe(201);
    const secret = json<{ secret: string }>(hook).secret;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const listed = await b.get('/console/api/alert-settings');
    expect(json<Settings>(listed).channels.map((c) => [c.kind, c.host])).toEqual([
      ['slack', host],
      ['webhook', host],
    ]);
    for (const leak of [...LEAKS, secret, 'whsec_']) expect(listed.body).not.toContain(leak);
    // Stored encrypted: the secret's text is not in the row.
    const { rows: stored } = await hh.db.query<{ ct: Uint8Array }>(
      `SELECT secret_ciphertext AS ct FROM alert_channels WHERE kind = 'webhook'`,
    );
    expect(Buffer.from(stored[0]?.ct ?? []).toString('latin1')).not.toContain(secret.slice(6));

    // The test buttons: each channel and e-mail get a test message now.
    for (const target of ['slack', 'webhook', 'email']) {
      const t = await b.post('/console/api/alert-settings/test', { target });
      expect(t.statusCode, t.body).toBe(200);
      expect(json(t)).toEqual({ ok: true, error: null });
    }
    const slackReqs = () => rr.received.filter((q) => q.path.startsWith('/services/'));
    const hookReqs = () => rr.received.filter((q) => q.path.startsWith('/oncall/'));
    expect(JSON.parse(slackReqs()[0]?.body.toString('utf8') ?? '{}').text).toMatch(
      /^\*Test alert from tronwatch\*\n/,
    );
    const verify = (q: ReceivedRequest | undefined) =>
      new StandardWebhook(secret).verify(q?.body.toString('utf8') ?? '', {
        'webhook-id': String(q?.headers['webhook-id']),
        'webhook-timestamp': String(q?.headers['webhook-timestamp']),
        'webhook-signature': String(q?.headers['webhook-signature']),
      }) as { type: string; data: Record<string, unknown> };
    expect(verify(hookReqs()[0]).type).toBe('alert.test');
    await smtp.waitFor('oncall@example.com', /^Test alert from tronwatch$/);

    // An outage of a watch whose URL carries a path and a query: one alert, on every target.
    const { rows: acc } = await hh.db.query<{ account_id: string }>(
      `SELECT account_id FROM console_users WHERE email = 'oncall@example.com'`,
    );
    const accountId = acc[0]?.account_id ?? '';
    const watchId = newId('wh');
    const address = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';
    await hh.db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext,
                            active_from_block, label)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', $5, 'k', '\\x00'::bytea, 1,
               'Shop deposits')`,
      [
        watchId,
        accountId,
        address,
        base58ToHex(address),
        `https://shop.example:8443${WATCH_PATH}?${WATCH_QUERY}`,
      ],
    );
    const queue = async (kind: string, message: string) => {
      const alertId = newId('alr');
      await hh.db.transaction(async (tx) => {
        await tx.query(
          `INSERT INTO watch_alerts (id, watch_id, account_id, kind, message)
           VALUES ($1, $2, $3, $4, $5)`,
          [alertId, watchId, accountId, kind, message],
        );
        await queueAlertSends(tx, alertId, { id: watchId, account_id: accountId });
      });
      return alertId;
    };
    const channels = new AlertChannelSender({
      db: hh.db,
      secrets: hh.secrets,
      timeoutMs: 5_000,
      allowCidrs: ['127.0.0.1/32'],
      caFile,
    });
    const loop = new AlertLoop({
      db: hh.db,
      consoleUrl: 'https://tw.example',
      paceMinutes: 0,
      email: emailAlertSender(hh.db, mailerTransport(hh.mailer as NonNullable<typeof hh.mailer>)),
      channels: channels.send,
      logger: silentLogger,
    });
    try {
      const failing = await queue(
        'failing',
        'Deliveries are failing: 5 delivery attempts in a row failed.',
      );
      expect(await loop.runOnce()).toEqual({ sent: 3, failed: 0 });
      const slackAlert = JSON.parse(slackReqs()[1]?.body.toString('utf8') ?? '{}') as {
        text: string;
      };
      expect(slackAlert.text).toMatch(/^\*Deliveries to your webhook are failing\*\n/);
      expect(slackAlert.text).toContain('Endpoint: shop.example:8443\n');
      const alert = verify(hookReqs()[1]);
      expect(alert).toMatchObject({
        type: 'watch.alert',
        data: {
          watch: { id: watchId, address, label: 'Shop deposits' },
          endpoint_host: 'shop.example:8443',
          state: 'failing',
          outages: 1,
          summary: false,
          changes: [{ id: failing, kind: 'failing' }],
          console_url: `https://tw.example/console/watches/${watchId}`,
          // A live watch's alert (issue 32: a test-mode one says false, 'test').
          livemode: true,
          environment: 'live',
        },
      });
      const mail = await smtp.waitFor(
        'oncall@example.com',
        /^Deliveries to your webhook are failing$/,
      );
      expect(mail.text).toContain('Endpoint: shop.example:8443\n');

      // The Slack side answers 500: tried again later (one try counted), the page shows why.
      slackStatus = 500;
      await queue('recovered', 'Deliveries succeed again.');
      expect(await loop.runOnce()).toEqual({ sent: 2, failed: 1 });
      const down = (await settings()).channels.find((c) => c.kind === 'slack');
      expect(down).toMatchObject({ pending: 1, last_error: `${host} answered HTTP 500` });
      const tries = async () =>
        (
          await hh.db.query<{ tries: number; due_later: boolean }>(
            `SELECT s.tries, s.due_at > now() AS due_later FROM alert_sends s
               JOIN alert_channels c ON c.id = s.target
              WHERE c.kind = 'slack' AND s.sent_at IS NULL`,
          )
        ).rows;
      expect(await tries()).toEqual([{ tries: 1, due_later: true }]);
      // Due again: a 429 with Retry-After waits without a try.
      await hh.db.query('UPDATE alert_sends SET due_at = now() WHERE sent_at IS NULL');
      slackStatus = { status: 429, headers: { 'retry-after': '30' } };
      expect(await loop.runOnce()).toEqual({ sent: 0, failed: 1 });
      expect(await tries()).toEqual([{ tries: 1, due_later: true }]);
      // Due again, and answered: the recovery goes out, once.
      await hh.db.query('UPDATE alert_sends SET due_at = now() WHERE sent_at IS NULL');
      slackStatus = 200;
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
      expect(await tries()).toEqual([]);
      const slackTexts = slackReqs()
        .filter((q) => q.headers['content-type'] === 'application/json')
        .map((q) => (JSON.parse(q.body.toString('utf8')) as { text: string }).text);
      // Posted three times (500, 429, then accepted), the same text each time.
      expect(
        slackTexts.filter((t) => t.startsWith('*Deliveries to your webhook recovered*')),
      ).toHaveLength(3);
      expect(hookReqs().map((q) => verify(q).type)).toEqual([
        'alert.test',
        'watch.alert',
        'watch.alert',
      ]);

      // An endpoint's alert (issue 30, migration 092): one message about the endpoint on every
      // target, `watch` null and `endpoint` set in the signed webhook, host only.
      const endpointId = newId('ep');
      await hh.db.query(
        `INSERT INTO endpoints (id, account_id, network, url, label, secret_key_id,
                                secret_ciphertext)
         VALUES ($1, $2, 'mainnet', $3, 'Gateway', 'k', '\\x00'::bytea)`,
        [endpointId, accountId, `https://pay.example${WATCH_PATH}?${WATCH_QUERY}`],
      );
      await hh.db.transaction((tx) =>
        queueAlert(
          tx,
          { id: endpointId, account_id: accountId },
          'failing',
          'Deliveries to the endpoint are failing: 5 delivery attempts in a row failed.',
        ),
      );
      expect(await loop.runOnce()).toEqual({ sent: 3, failed: 0 });
      expect(verify(hookReqs()[3])).toMatchObject({
        type: 'watch.alert',
        data: {
          watch: null,
          endpoint: { id: endpointId, label: 'Gateway', watch_count: 0 },
          endpoint_host: 'pay.example',
          state: 'failing',
          console_url: `https://tw.example/console/endpoints/${endpointId}`,
        },
      });
      const slackEndpoint = slackReqs()
        .map((q) => (JSON.parse(q.body.toString('utf8')) as { text?: string }).text ?? '')
        .filter((t) => t.startsWith('*Deliveries to your endpoint are failing*'));
      expect(slackEndpoint).toHaveLength(1);
      expect(slackEndpoint[0]).toContain(`Endpoint id: Gateway (${endpointId})`);
      const endpointMail = await smtp.waitFor(
        'oncall@example.com',
        /^Deliveries to your endpoint are failing$/,
      );
      expect(endpointMail.text).toContain('Endpoint: pay.example\n');

      // Turned off: no message is queued for it; removed: gone from the page.
      const off = await b.put('/console/api/alert-settings/channels/webhook', { enabled: false });
      expect(off.statusCode).toBe(200);
      expect(json(off)).toMatchObject({ channel: { enabled: false }, secret: null });
      await queue('failing', 'Deliveries are failing: 5 delivery attempts in a row failed.');
      const { rows: targets } = await hh.db.query<{ target: string }>(
        `SELECT s.target FROM alert_sends s WHERE s.sent_at IS NULL ORDER BY s.target`,
      );
      expect(targets.map((t) => (t.target === 'email' ? 'email' : 'channel'))).toEqual([
        'channel',
        'email',
      ]);
      expect((await b.del('/console/api/alert-settings/channels/slack')).statusCode).toBe(204);
      expect((await b.del('/console/api/alert-settings/channels/slack')).statusCode).toBe(404);
      expect((await settings()).channels.map((c) => [c.kind, c.enabled])).toEqual([
        ['webhook', false],
      ]);
      expect(await loop.runOnce()).toEqual({ sent: 1, failed: 0 });
    } finally {
      await loop.stop();
      await channels.close();
    }

    // Audited, hosts only.
    const audit = await b.get('/console/api/audit?action=alert_channel.*');
    const entries = json<{ data: Array<{ action: string; detail: Record<string, unknown> }> }>(
      audit,
    ).data;
    expect(entries.map((e) => e.action).sort()).toEqual([
      'alert_channel.created',
      'alert_channel.created',
      'alert_channel.deleted',
      'alert_channel.test_sent',
      'alert_channel.test_sent',
      'alert_channel.test_sent',
      'alert_channel.updated',
    ]);
    expect(entries.find((e) => e.action === 'alert_channel.updated')?.detail).toMatchObject({
      kind: 'webhook',
      enabled_before: true,
      enabled_after: false,
      host_before: host,
      host_after: host,
    });
    for (const leak of LEAKS) expect(audit.body).not.toContain(leak);

    // Host only, everywhere: every body the receiver got, every e-mail.
    const bodies = [
      ...rr.received.map((q) => q.body.toString('utf8')),
      ...smtp.received.flatMap((m) => [m.subject, m.text, m.html]),
    ];
    expect(bodies.length).toBeGreaterThanOrEqual(10);
    for (const body of bodies) for (const leak of LEAKS) expect(body).not.toContain(leak);
  }, 120_000);

  it('re-checks the address at every send: a name that rebinds to a private address gets no connection', async () => {
    r = await startReceiver({ respond: () => 200 });
    const rr = r;
    h = await apiHarness(engine);
    const hh = h;
    const accountId = (await hh.caller()).accountId;
    const port = new URL(rr.origin).port;
    const url = `https://alerts.rebind.example:${port}${HOOK_PATH}?${HOOK_QUERY}`;
    // Public when saved…
    const saved = await saveAlertChannel(
      hh.db,
      {
        secrets: hh.secrets,
        allowCidrs: [],
        resolver: stubResolver({ 'alerts.rebind.example': ['93.184.216.34'] }),
      },
      { accountId, kind: 'webhook', url },
      { accountId, actor: { type: 'system', id: 'test' }, clientIp: null },
    );
    expect(saved.channel.host).toBe(`alerts.rebind.example:${port}`);
    // …loopback when sent: refused at connect, nothing reaches the receiver.
    const sender = new AlertChannelSender({
      db: hh.db,
      secrets: hh.secrets,
      timeoutMs: 5_000,
      allowCidrs: [],
      resolver: stubResolver({ 'alerts.rebind.example': ['127.0.0.1'] }),
    });
    try {
      const error = await sender.sendTest(accountId, 'webhook');
      expect(error).toMatch(/^no answer from alerts\.rebind\.example:\d+: /);
      for (const leak of LEAKS) expect(error).not.toContain(leak);
    } finally {
      await sender.close();
    }
    expect(rr.connections).toBe(0);
    expect(rr.received).toHaveLength(0);
  }, 60_000);
});
