/**
 * Test mode in the console (issue 32, "Done when"), in Debian's headless Chromium on the service
 * as deployed (API and delivery worker): sign up, switch to test mode (the switch and its orange
 * bar on every page), create a test key, a test watch on a local HTTPS receiver with that key,
 * trigger a deposit with the watch page's button, see it delivered and verified at the receiver
 * (its signature with the test watch's secret, `livemode: false`, `Tronwatch-Test-Mode: true`),
 * make the receiver fail and watch the retries until DEAD, redeliver, then switch back to live
 * mode and see none of it; a second tab still showing live mode after the switch acts in neither
 * environment (409 environment_changed) and reloads. Screenshots:
 * test-output/screenshots/test-mode-*.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import {
  browserTestsReady,
  type ConsoleService,
  launchBrowser,
  shot,
  startConsoleService,
  visible,
} from '../helpers/browser.js';

const READY = browserTestsReady();

describe.skipIf(!READY)('test mode in the console', () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let secret: string | undefined;
  let failing = false;

  beforeAll(async () => {
    receiver = await startReceiver({
      secretFor: () => secret,
      respond: (req) => (failing ? 500 : req.verified ? 200 : 401),
    });
    service = await startConsoleService({
      roles: ['api', 'worker'],
      caPem: receiver.ca,
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        // The contract's schedule compressed (1 min → 6 ms … 6 h → 2.2 s): DEAD within seconds.
        DELIVERY_SCHEDULE_SCALE: '0.0001',
        DELIVERY_POLL_MS: '100',
      },
    });
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 1_000, head: 1_018 });
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
  });

  /**
   * Reload an event's page until `count()` reaches `want` (the worker runs beside the page). Each
   * check waits for the event to be loaded (its Deliveries section): a check made while the page
   * still says "Loading the event…" would count nothing, every time.
   */
  async function reloadUntil(page: Page, what: string, count: () => Promise<number>, want = 1) {
    for (let i = 0; i < 60; i++) {
      await visible(page.getByRole('heading', { name: 'Deliveries' }));
      if ((await count()) >= want) return;
      await new Promise((r) => setTimeout(r, 1_000));
      await page.reload();
    }
    await shot(page, `test-mode-not-seen-${what.replace(/\W+/g, '-')}`);
    const headings = await page.getByRole('heading').allTextContents();
    throw new Error(`${what}: not seen after 60 reloads; headings: ${headings.join(' | ')}`);
  }

  it('switches to test mode, triggers a deposit, sees it delivered, failing, redelivered; live mode shows none of it', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill('integrator@test-mode.example');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    const env = page.getByRole('region', { name: 'Environment' });
    await visible(env.getByText('LIVE', { exact: true }));
    await shot(page, 'test-mode-live-overview');

    // Switch to test mode: the page reloads in test mode, and says so.
    await env.getByRole('switch', { name: 'Test mode' }).click();
    await visible(env.getByText('TEST MODE', { exact: true }));
    expect(await env.getByRole('switch', { name: 'Test mode' }).getAttribute('aria-checked')).toBe(
      'true',
    );
    await visible(page.getByRole('heading', { name: 'Overview' }));
    // No test network is followed here (TRON_TESTNET_NODE_URL unset): no chain shown as starting.
    await visible(page.getByText('None followed'));
    expect(await page.getByText('Starting').count()).toBe(0);
    await visible(page.getByText(/Trigger a test deposit on the watch/));
    await shot(page, 'test-mode-overview');

    // A test key on the API keys page.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'API keys', exact: true })
      .click();
    await visible(page.getByRole('heading', { level: 1, name: 'API keys' }));
    await visible(env.getByText('TEST MODE', { exact: true }));
    await visible(page.getByText('Authorization: Bearer tw_test_…'));
    await page.getByLabel('Name (optional)').fill('integration tests');
    await page.getByRole('button', { name: 'Create key' }).click();
    const key = (await page.getByTestId('secret').textContent())?.trim() ?? '';
    expect(key).toMatch(/^tw_test_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await shot(page, 'test-mode-keys');

    // A test watch on the local receiver, made with the test key as an integrator would.
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${service.base}/v1/watches`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        asset_filter: 'USDT',
        webhook_url: receiver.url,
        label: 'test deposits',
      }),
    });
    expect(created.status).toBe(201);
    const watch = (await created.json()) as { id: string; secret: string };
    secret = watch.secret;

    // Trigger a deposit with the watch page's button.
    await page.goto(`${service.base}/console/watches/${watch.id}`);
    await visible(page.getByRole('heading', { name: 'Test deposit' }));
    await page.getByLabel('Amount').fill('25.5');
    await page.getByRole('button', { name: 'Trigger test deposit' }).click();
    await visible(page.getByText(/Test deposit of 25\.5 USDT created/));
    await shot(page, 'test-mode-watch');

    // Delivered and verified at the receiver: the test watch's secret, marked test twice.
    await expect
      .poll(() => receiver.received.filter((r) => r.verified).length, { timeout: 30_000 })
      .toBe(1);
    const got = receiver.received[0];
    expect(got?.headers['tronwatch-test-mode']).toBe('true');
    expect(got?.event).toMatchObject({
      type: 'transfer.confirmed',
      livemode: false,
      network: 'nile',
      amount: '25.5',
      watch_id: watch.id,
    });
    const firstId = String(got?.event?.event_id);
    expect(String(got?.event?.tx_id)).toMatch(/^test_/);
    await page.goto(`${service.base}/console/events/${firstId}`);
    await reloadUntil(page, 'first DELIVERED', () =>
      page.getByRole('heading', { name: /DELIVERED/ }).count(),
    );

    // The receiver fails: six attempts, then DEAD; Redeliver once it recovers.
    failing = true;
    await page.goto(`${service.base}/console/watches/${watch.id}`);
    await page.getByLabel('Amount').fill('7');
    await page.getByRole('button', { name: 'Trigger test deposit' }).click();
    await visible(page.getByText(/Test deposit of 7 USDT created/));
    const failedId = await expect
      .poll(() => receiver.received.find((r) => r.event?.amount === '7')?.eventId ?? '', {
        timeout: 30_000,
      })
      .not.toBe('')
      .then(() => receiver.received.find((r) => r.event?.amount === '7')?.eventId ?? '');
    await page.goto(`${service.base}/console/events/${failedId}`);
    await reloadUntil(page, 'DEAD', () =>
      page.getByRole('heading', { name: 'Delivery DEAD' }).count(),
    );
    await visible(page.getByText('6 of 6 attempts'));
    await expect.poll(() => page.getByRole('cell', { name: /HTTP 500/ }).count()).toBe(6);
    expect(receiver.countsByEvent.get(failedId)).toBe(6);
    // A test transfer is on no chain: no explorer link, and no "check it yourself" warning.
    await visible(page.getByText(/test deposit: triggered through the API, on no chain/));
    expect(await page.getByRole('link', { name: /Tronscan/ }).count()).toBe(0);
    await shot(page, 'test-mode-dead');
    failing = false;
    await page.getByRole('button', { name: 'Redeliver', exact: true }).click();
    await visible(page.getByText(/Redelivery queued/));
    await reloadUntil(page, 'redelivery DELIVERED', () =>
      page.getByRole('heading', { name: 'Latest delivery DELIVERED' }).count(),
    );
    expect(receiver.countsByEvent.get(failedId)).toBe(7);
    await shot(page, 'test-mode-redelivered');

    // Back to live mode: none of it is there.
    await env.getByRole('switch', { name: 'Test mode' }).click();
    await visible(env.getByText('LIVE', { exact: true }));
    await page.goto(`${service.base}/console/events`);
    await visible(page.getByText('No events yet'));
    await expect(page.getByText(firstId).count()).resolves.toBe(0);
    await page.goto(`${service.base}/console/keys`);
    await visible(page.getByRole('heading', { level: 1, name: 'API keys' }));
    await expect(page.getByText('integration tests').count()).resolves.toBe(0);
    await page.goto(`${service.base}/console/watches/${watch.id}`);
    await visible(page.getByText(/No such watch/));
    await shot(page, 'test-mode-back-to-live');

    // Two tabs: one still shows live mode after the other switched to test. Its action is refused
    // (409 environment_changed), nothing is created in either environment, and it reloads in
    // test mode.
    const stale = await context.newPage();
    await stale.goto(`${service.base}/console/keys`);
    const staleEnv = stale.getByRole('region', { name: 'Environment' });
    await visible(staleEnv.getByText('LIVE', { exact: true }));
    await env.getByRole('switch', { name: 'Test mode' }).click();
    await visible(env.getByText('TEST MODE', { exact: true }));
    await stale.getByLabel('Name (optional)').fill('stale tab key');
    await stale.getByRole('button', { name: 'Create key' }).click();
    await visible(staleEnv.getByText('TEST MODE', { exact: true }));
    const { rows } = await service.svc.db.query<{ n: string }>(
      "SELECT count(*)::text AS n FROM api_keys WHERE name = 'stale tab key'",
    );
    expect(rows[0]?.n).toBe('0');
    await shot(stale, 'test-mode-stale-tab-reloaded');
    await context.close();
  }, 600_000);
});
