/**
 * Operating a webhook watch in the console (issue 19 items 1–4 and the watch form of item 7), in
 * Debian's headless Chromium at 1440 and 390 px: the create form's own plain-word errors (an
 * over-long URL kept, with the limit stated), a label, the channel on each row, a duplicate linked
 * to the existing watch; the watch's page with its health chart; a secret rotation during which a
 * receiver verifies a delivery with either secret (npm `standardwebhooks`); ending the grace early;
 * editing the label; the failure banner; and no sideways scrolling at 390 px, with Delete on the
 * same line as the row's other buttons.
 *
 * The service runs the api and worker roles on a stored chain head (no chain needed: events are
 * inserted as the ingester would), on PostgreSQL when DATABASE_URL is set.
 */
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
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

const READY = browserTestsReady();
const ADDRESS = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';

describe.skipIf(!READY)('operating a watch in a browser', () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;
  let base: string;
  let failing = false;

  beforeAll(async () => {
    receiver = await startReceiver({ respond: () => (failing ? 500 : 200) });
    service = await startConsoleService({
      roles: ['api', 'worker'],
      caPem: receiver.ca,
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        DELIVERY_SCHEDULE_SCALE: '0.0001',
        DELIVERY_POLL_MS: '50',
        WATCH_ALERT_FAILURES: '3',
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
  });

  /** No horizontal scrolling of the page. */
  const noSideways = async () => {
    const [scroll, client] = (await page.evaluate(
      '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
    )) as [number, number];
    expect(scroll).toBeLessThanOrEqual(client);
  };

  let tag = 0;
  /** One event for the watch, as the ingester would store it; resolves with its request. */
  const deliver = async (accountId: string, watchId: string) => {
    const [id] = await insertEvents(service.svc.db, {
      accountId,
      watchId,
      tag: `ops${++tag}`,
      count: 1,
      start: new Date().toISOString(),
    });
    await expect
      .poll(() => receiver.received.filter((r) => r.eventId === id).length, { timeout: 60_000 })
      .toBeGreaterThan(0);
    return receiver.received.find((r) => r.eventId === id);
  };

  it('creates, labels, rotates and edits a watch; shows its health and its alert', async () => {
    await page.goto(`${base}/console/signup`);
    await page.getByLabel('E-mail').fill('ops@health.example');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    await page.goto(`${base}/console/watches`);
    await page.getByRole('button', { name: 'New watch' }).click();

    // The console's own messages, in plain words; an over-long URL is kept and the limit stated.
    await page.getByLabel('TRON address').fill('Tabc');
    await page.getByLabel('Webhook URL').fill('ftp://hooks.example.com/x');
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(page.getByText('A TRON address has 34 characters and starts with T'));
    // This deployment admits http inside its allow-list (WEBHOOK_ALLOW_CIDRS): the form says so.
    await visible(
      page.getByText(
        'The URL must start with https:// (or http:// for an address this deployment allows).',
      ),
    );
    const long = `https://hooks.example.com/${'a'.repeat(2100)}`;
    await page.getByLabel('Webhook URL').fill(long);
    expect(await page.getByLabel('Webhook URL').inputValue()).toHaveLength(long.length);
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(page.getByText(/at most 2,048 are allowed/));
    await shot(page, 'watch-form-errors');

    await page.getByLabel('TRON address').fill(ADDRESS);
    await page.getByLabel('Webhook URL').fill(receiver.url);
    await page.getByLabel('Label (optional)').fill('Shop EU deposits');
    await page.getByRole('button', { name: 'Create watch' }).click();
    const region = page.getByRole('region', { name: 'Webhook signing secret' });
    await visible(region.getByText(/^whsec_/));
    const first = (await region.getByText(/^whsec_/).textContent())?.trim() as string;
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByRole('link', { name: 'Shop EU deposits', exact: true }));
    await visible(page.getByRole('row').getByText('Webhook', { exact: true }));

    // A duplicate links to the watch that exists.
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(ADDRESS);
    await page.getByLabel('Webhook URL').fill(`${receiver.url}?again`);
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(page.getByRole('link', { name: 'Open the existing watch' }));
    await page.getByRole('button', { name: 'Cancel' }).click();

    const { rows } = await service.svc.db.query<{ id: string; account_id: string }>(
      'SELECT id, account_id FROM watches',
    );
    const { id: watchId, account_id: accountId } = rows[0] as { id: string; account_id: string };
    const before = await deliver(accountId, watchId);
    expect(before?.headers['x-signature-previous']).toBeUndefined();

    // The watch's page: health figures and the chart.
    await page.getByRole('link', { name: 'Shop EU deposits', exact: true }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Shop EU deposits' }));
    await visible(page.getByRole('heading', { name: 'Endpoint health' }));
    await expect
      .poll(
        async () => {
          await page.reload();
          await visible(page.getByRole('heading', { name: 'Endpoint health' }));
          return page.getByRole('row', { name: /Last day/ }).textContent();
        },
        { timeout: 60_000 },
      )
      .toMatch(/100 %.*1 of 1/);
    await visible(page.getByTestId('health-chart').locator('canvas'));
    await shot(page, 'watch-page');

    // Rotate with the default 24 h grace: the new secret once; a delivery verifies with either.
    await page.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = page.getByRole('region', { name: 'New webhook signing secret' });
    await visible(rotated.getByText(/^whsec_/));
    const second = (await rotated.getByText(/^whsec_/).textContent())?.trim() as string;
    expect(second).not.toBe(first);
    await shot(page, 'watch-rotated');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByText(/Both the new and the previous secret sign every delivery/));
    const during = await deliver(accountId, watchId);
    const std = (r: typeof during) => ({
      'webhook-id': String(r?.headers['webhook-id']),
      'webhook-timestamp': String(r?.headers['webhook-timestamp']),
      'webhook-signature': String(r?.headers['webhook-signature']),
    });
    const body = during?.body.toString('utf8') as string;
    expect(new Webhook(first).verify(body, std(during))).toBeTruthy();
    expect(new Webhook(second).verify(body, std(during))).toBeTruthy();
    expect(during?.headers['x-signature-previous']).toMatch(/^[0-9a-f]{64}$/);

    await page.getByRole('button', { name: 'End grace period now' }).click();
    await page
      .getByRole('dialog', { name: 'End the grace period now?' })
      .getByRole('button', { name: 'End grace period', exact: true })
      .click();
    await visible(page.getByText(/Grace period ended/));
    const after = await deliver(accountId, watchId);
    expect(() =>
      new Webhook(first).verify(after?.body.toString('utf8') ?? '', std(after)),
    ).toThrow();

    // Edit the label.
    await page.getByLabel('Label').fill('Main wallet');
    await page.getByRole('button', { name: 'Save' }).click();
    await visible(page.getByText('Watch saved.'));
    await visible(page.getByRole('heading', { level: 1, name: 'Main wallet' }));

    // The endpoint fails: the banner names the watch.
    failing = true;
    const [failed] = await insertEvents(service.svc.db, {
      accountId,
      watchId,
      tag: 'opsfail',
      count: 1,
      start: new Date().toISOString(),
    });
    expect(failed).toBeDefined();
    await expect
      .poll(
        async () => {
          await page.reload();
          await visible(page.getByRole('heading', { level: 1 }));
          return page.getByRole('region', { name: 'Delivery alerts' }).count();
        },
        { timeout: 90_000, interval: 500 },
      )
      .toBe(1);
    await visible(page.getByRole('region', { name: 'Delivery alerts' }).getByText('Main wallet'));
    await shot(page, 'watch-alert');
    await page.goto(`${base}/console/watches`);
    await visible(page.getByRole('row').getByText('Failing'));
    await shot(page, 'watches-health');
  }, 400_000);

  it('at 390 px: no sideways scrolling, Delete on the line of the other buttons', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(`${base}/console/watches`);
    await visible(page.getByRole('link', { name: 'Main wallet', exact: true }));
    await noSideways();
    const pause = await page
      .getByRole('button', { name: /^(Pause|Resume) / })
      .first()
      .boundingBox();
    const del = await page
      .getByRole('button', { name: /^Delete / })
      .first()
      .boundingBox();
    expect(pause && del).toBeTruthy();
    expect(Math.abs((del?.y ?? 0) - (pause?.y ?? 1))).toBeLessThan(4);
    await shot(page, 'watches-390');
    await page.getByRole('table').getByRole('link', { name: 'Main wallet', exact: true }).click();
    await visible(page.getByRole('heading', { name: 'Endpoint health' }));
    await visible(page.getByTestId('health-chart').locator('canvas'));
    await noSideways();
    await shot(page, 'watch-page-390');
    await page.goto(`${base}/console/watches`);
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('Webhook URL').fill(`https://hooks.example.com/${'b'.repeat(2100)}`);
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(page.getByText(/at most 2,048 are allowed/));
    await noSideways();
    await shot(page, 'watch-form-390');
  }, 180_000);
});
