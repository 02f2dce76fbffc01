/**
 * Alerts in a browser (issue 29, "Done when"): in Debian's headless Chromium, an owner sets up
 * the Alerts page (a Slack-compatible incoming webhook, a signed alert webhook whose secret is
 * shown once, e-mail to the members who opted in), tests each channel, then a failing receiver
 * is walked through two outages and their recoveries by the real delivery worker. Each channel
 * gets exactly four alerts (failing, recovered, failing, recovered): e-mail through the real SMTP
 * test server, the Slack-compatible receiver, and the alert webhook verified with the npm
 * `standardwebhooks` library. No alert carries a path or query of any receiver's URL: the only
 * URL in them is the console's page of the watch. Screenshots of the page at 1440 and 390 px,
 * with no sideways scroll at 390.
 *
 * One local HTTPS receiver plays all three parts by path: `/hook` the watch's receiver,
 * `/services/…` the Slack-compatible webhook, `/oncall/…` the on-call tool. The service runs the
 * api and worker roles on a stored chain head (events inserted as the ingester would), on
 * PostgreSQL when DATABASE_URL is set; WATCH_ALERT_PACE_MINUTES=0, so the test's outages, each
 * awaited before the next, are four alerts rather than one summary.
 */
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ReceivedRequest, type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { insertEvents } from '../helpers/api.js';
import {
  browserTestsReady,
  type ConsoleService,
  launchBrowser,
  shot,
  startConsoleService,
  visible,
} from '../helpers/browser.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

const READY = browserTestsReady();
const ADDRESS = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const EMAIL = 'oncall@alerts.example';
/** Parts of the receivers' URLs that no alert may carry. */
const SLACK_PATH = '/services/T01/B02/slackSecretPart';
const HOOK_PATH = '/oncall/hookSecretPart';
const LEAKS = ['slackSecretPart', 'slk-q-1', 'hookSecretPart', 'oc-q-2', '/hook', 'watch-q-3'];

describe.skipIf(!READY)('alerts in a browser', () => {
  let receiver: Receiver;
  let smtp: TestSmtp;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;
  let base: string;
  let failing = false;

  beforeAll(async () => {
    receiver = await startReceiver({
      respond: (req) => (req.path.startsWith('/hook') && failing ? 500 : 200),
    });
    smtp = await startSmtp();
    service = await startConsoleService({
      roles: ['api', 'worker'],
      caPem: receiver.ca,
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        DELIVERY_SCHEDULE_SCALE: '0.0001',
        DELIVERY_POLL_MS: '50',
        WATCH_ALERT_FAILURES: '3',
        WATCH_ALERT_PACE_MINUTES: '0',
        SMTP_URL: smtp.url,
      },
    });
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 80_000_000, head: 80_000_018 });
    base = service.base;
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
    await smtp?.close();
  });

  const noSideways = async () => {
    const [scroll, client] = (await page.evaluate(
      '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
    )) as [number, number];
    expect(scroll).toBeLessThanOrEqual(client);
  };

  const slackPosts = () => receiver.received.filter((r) => r.path.startsWith('/services/'));
  const hookPosts = () => receiver.received.filter((r) => r.path.startsWith('/oncall/'));
  const slackText = (r: ReceivedRequest) =>
    (JSON.parse(r.body.toString('utf8')) as { text: string }).text;

  it('sets up the channels, then sees four alerts per channel over two outages', async () => {
    await page.goto(`${base}/console/signup`);
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // The Alerts page, from the navigation.
    await page.getByRole('link', { name: 'Alerts', exact: true }).click();
    await visible(page.getByRole('heading', { name: 'Alerts', exact: true }));
    await visible(page.getByText(`Alerts are e-mailed to ${EMAIL}.`));

    // A private address is refused in words, the URL kept.
    const slackUrl = page.getByLabel('Slack-compatible webhook URL');
    await slackUrl.fill('https://10.9.8.7/services/x');
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await visible(page.getByText(/non-public/));
    await slackUrl.fill(`${receiver.origin}${SLACK_PATH}?token=slk-q-1`);
    await page.getByRole('button', { name: 'Add webhook' }).click();
    await visible(page.getByText('The Slack-compatible webhook is added.'));

    await page
      .getByLabel('Signed alert webhook URL')
      .fill(`${receiver.origin}${HOOK_PATH}?key=oc-q-2`);
    await page.getByRole('button', { name: 'Add alert webhook' }).click();
    const region = page.getByRole('region', { name: "The alert webhook's signing secret" });
    await visible(region.getByText(/^whsec_/));
    const secret = (await region.getByText(/^whsec_/).textContent())?.trim() as string;
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await expect.poll(() => page.getByText(/^whsec_/).count()).toBe(0);

    // Shown by host only.
    const host = new URL(receiver.origin).host;
    await expect.poll(() => page.getByText(host, { exact: true }).count()).toBe(2);
    const pageText = (await page.locator('main').textContent()) ?? '';
    for (const leak of LEAKS) expect(pageText).not.toContain(leak);

    // The test buttons.
    const slackCard = page.getByRole('region', { name: /Slack-compatible webhook/ });
    await slackCard.getByRole('button', { name: 'Send a test alert' }).click();
    await visible(page.getByText('Test alert sent on the Slack-compatible webhook.'));
    const hookCard = page.getByRole('region', { name: /Signed alert webhook/ });
    await hookCard.getByRole('button', { name: 'Send a test alert' }).click();
    await visible(page.getByText('Test alert sent on the alert webhook.'));
    await page.getByRole('button', { name: 'Send a test e-mail' }).click();
    await visible(page.getByText('Test alert sent by e-mail.'));
    expect(slackText(slackPosts()[0] as ReceivedRequest)).toMatch(/^\*Test alert from tronwatch\*/);
    const verify = (r: ReceivedRequest) =>
      new Webhook(secret).verify(r.body.toString('utf8'), {
        'webhook-id': String(r.headers['webhook-id']),
        'webhook-timestamp': String(r.headers['webhook-timestamp']),
        'webhook-signature': String(r.headers['webhook-signature']),
      }) as { type: string; data: { state: string; endpoint_host: string; text: string } };
    expect(verify(hookPosts()[0] as ReceivedRequest).type).toBe('alert.test');
    await smtp.waitFor(EMAIL, /^Test alert from tronwatch$/);

    await shot(page, 'console-alerts');
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await visible(page.getByRole('heading', { name: 'Alerts', exact: true }));
    await visible(page.getByText(host, { exact: true }).first());
    await noSideways();
    await shot(page, 'console-alerts-mobile');
    await page.setViewportSize({ width: 1440, height: 900 });

    // A watch whose URL carries a path and a query.
    await page.goto(`${base}/console/watches`);
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(ADDRESS);
    await page.getByLabel('Webhook URL').fill(`${receiver.url}?token=watch-q-3`);
    await page.getByLabel('Label (optional)').fill('Shop deposits');
    await page.getByRole('button', { name: 'Create watch' }).click();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    const { rows } = await service.svc.db.query<{ id: string; account_id: string }>(
      'SELECT id, account_id FROM watches',
    );
    const { id: watchId, account_id: accountId } = rows[0] as { id: string; account_id: string };

    let tag = 0;
    const event = () =>
      insertEvents(service.svc.db, {
        accountId,
        watchId,
        tag: `alert${++tag}`,
        count: 1,
        start: new Date().toISOString(),
      });
    const alertMails = () =>
      smtp.received.filter((m) => m.to.includes(EMAIL) && !m.subject.startsWith('Test alert'));
    const slackAlerts = () => slackPosts().slice(1);
    const hookAlerts = () => hookPosts().slice(1);
    /** Wait until every channel has `n` alerts. */
    const alertsReach = async (n: number) => {
      await expect.poll(() => alertMails().length, { timeout: 60_000 }).toBe(n);
      await expect.poll(() => slackAlerts().length, { timeout: 60_000 }).toBe(n);
      await expect.poll(() => hookAlerts().length, { timeout: 60_000 }).toBe(n);
    };

    // Two outages, each followed by its recovery; each alert awaited before the next change.
    for (const round of [1, 2]) {
      failing = true;
      await event();
      await alertsReach(2 * round - 1);
      if (round === 2) {
        // The console's banner is back for the second outage.
        await page.goto(`${base}/console/watches`);
        await visible(page.getByText('Deliveries failing:').first());
      }
      failing = false;
      await event();
      await alertsReach(2 * round);
    }

    const subjects = alertMails().map((m) => m.subject);
    expect(subjects).toEqual([
      'Deliveries to your webhook are failing',
      'Deliveries to your webhook recovered',
      'Deliveries to your webhook are failing',
      'Deliveries to your webhook recovered',
    ]);
    expect(slackAlerts().map((r) => slackText(r).split('\n')[0])).toEqual(
      subjects.map((s) => `*${s}*`),
    );
    const hooks = hookAlerts().map(verify);
    expect(hooks.map((h) => [h.type, h.data.state, h.data.endpoint_host])).toEqual([
      ['watch.alert', 'failing', host],
      ['watch.alert', 'recovered', host],
      ['watch.alert', 'failing', host],
      ['watch.alert', 'recovered', host],
    ]);

    // None with a path or query: every URL in every alert body is the console's page of the
    // watch, and nothing of the receivers' URLs is there.
    // PUBLIC_URL is unset: the console's URL is http://localhost:PORT (PORT=0 here).
    const link = `http://localhost:0/console/watches/${watchId}`;
    const bodies = [
      ...alertMails().flatMap((m) => [m.subject, m.text, m.html]),
      ...slackAlerts().map((r) => r.body.toString('utf8')),
      ...hookAlerts().map((r) => r.body.toString('utf8')),
    ];
    expect(bodies).toHaveLength(20);
    for (const body of bodies) {
      for (const leak of LEAKS) expect(body).not.toContain(leak);
      for (const url of body.match(/https?:\/\/[^\s"<>\\]+/g) ?? []) expect(url).toBe(link);
    }

    // The page tells when each channel last sent.
    await page.goto(`${base}/console/alerts`);
    await visible(page.getByRole('heading', { name: 'Alerts', exact: true }));
    await expect.poll(() => page.getByText('never', { exact: true }).count()).toBe(0);
    await shot(page, 'console-alerts-after');
  }, 300_000);
});
