/**
 * The console's words (issue 40 items 5, 11, and the event page and Endpoint filter of 1 and 2),
 * in Debian's headless Chromium at 1440 and 390 px, on one service: an event's metadata on its
 * page and found by the Events search ("INV-2026-0091"); the Endpoint filter; the event page of a
 * watch on an endpoint says its payload is signed with the endpoint's secret; the environment
 * switch reads Live / Test mode; after switching environment on an event's page, the page says
 * the event is in the other environment; test mode's empty Events list says how test events come;
 * every button on these pages has an accessible name (the browser's accessibility tree).
 * Screenshots: test-output/screenshots/words-*.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
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
const INVOICE = 'INV-2026-0091';

/** Buttons without an accessible name in the page's accessibility tree (aria snapshot lines). */
async function unnamedButtons(page: Page): Promise<string[]> {
  const tree = await page.locator('body').ariaSnapshot();
  return tree.split('\n').filter((l) => /^\s*- (button|switch)(\s*\[[^\]]*\])*:?\s*$/.test(l));
}

describe.skipIf(!READY)('the console’s words', () => {
  let service: ConsoleService;
  let browser: Browser;
  const ids = { a: '', c: '' };
  let endpointId = '';

  beforeAll(async () => {
    service = await startConsoleService({
      roles: ['api'],
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    });
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 1_000, head: 1_018 });
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  /** Watches A (metadata) and C (on an endpoint) and one event each, as the ingester writes. */
  async function seed(email: string) {
    const db = service.svc.db;
    const { rows } = await db.query<{ id: string }>('SELECT id FROM accounts WHERE email = $1', [
      email,
    ]);
    const accountId = rows[0]?.id as string;
    const key = await createApiKey(db, accountId);
    const headers = { authorization: `Bearer ${key.key}`, 'content-type': 'application/json' };
    const post = async (url: string, body: Record<string, unknown>) => {
      const res = await fetch(`${service.base}${url}`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
      });
      expect(res.status, await res.clone().text()).toBe(201);
      return ((await res.json()) as { id: string }).id;
    };
    const watchA = await post('/v1/watches', {
      address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      asset_filter: 'USDT',
      webhook_url: 'https://127.0.0.1:9/a',
      label: 'Invoice deposits',
      metadata: { invoice: INVOICE, customer: 'c_1842' },
    });
    endpointId = await post('/v1/endpoints', {
      url: 'https://127.0.0.1:9/shared',
      label: 'deposits',
    });
    const watchC = await post('/v1/watches', {
      address: 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL',
      asset_filter: 'USDT',
      endpoint_id: endpointId,
    });
    ids.a = `evt_${'a'.repeat(26)}`;
    ids.c = `evt_${'c'.repeat(26)}`;
    await db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw,
                           contract, created_at, metadata)
       SELECT x.id, $1, w.id, 'mainnet', 'incoming', 'USDT', md5(x.id) || md5(x.id || 'x'), 0,
              79072107, now(), 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, x.amount,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', now() + x.n * interval '1 microsecond', w.metadata
         FROM (VALUES ($2, $3, 250000000, 1), ($4, $5, 1500000, 2)) AS x(id, watch, amount, n)
         JOIN watches w ON w.id = x.watch`,
      [accountId, ids.a, watchA, ids.c, watchC],
    );
    await db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, network, channel, status,
                                  attempts, next_attempt_at, created_at)
       SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, network, 'webhook', 'DELIVERED', 1,
              created_at, created_at
         FROM events WHERE id = ANY($1)`,
      [[ids.a, ids.c]],
    );
  }

  it('shows metadata, finds it, filters by endpoint, names the endpoint’s secret, and says where an event went', async () => {
    const email = 'words@console.example';
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    await seed(email);

    // The switch reads both states, the current one marked; its name is Test mode, off.
    const env = page.getByRole('region', { name: 'Environment' });
    const sw = env.getByRole('switch', { name: 'Test mode' });
    expect(await sw.getAttribute('aria-checked')).toBe('false');
    expect((await sw.textContent())?.replace(/\s+/g, ' ').trim()).toBe('LiveTest mode');
    await visible(sw.locator('.env-state-on', { hasText: 'Live' }));

    // Events: search by the invoice number.
    await page.goto(`${service.base}/console/events`);
    await visible(page.getByRole('heading', { name: 'Events' }));
    await page.getByLabel('Search').fill(INVOICE);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await visible(page.getByText('1 event (all)'));
    await visible(page.getByRole('cell', { name: /250 USDT/ }));
    expect(await page.getByRole('cell', { name: /1\.5 USDT/ }).count()).toBe(0);
    expect(await unnamedButtons(page)).toEqual([]);
    await shot(page, 'words-events-metadata-search');

    // The Endpoint filter: the endpoint's watch's event only.
    await page.getByRole('button', { name: 'Clear' }).click();
    await visible(page.getByText('2 events (all)'));
    await page.getByLabel('Endpoint').selectOption({ label: 'deposits' });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await visible(page.getByText('1 event (all)'));
    await visible(page.getByRole('cell', { name: /1\.5 USDT/ }));
    expect(page.url()).toContain(`endpoint_id=${endpointId}`);
    await page.goto(`${service.base}/console/dead-letters?endpoint_id=${endpointId}`);
    await visible(page.getByRole('heading', { name: 'Dead letters' }));
    expect(await page.getByLabel('Endpoint').inputValue()).toBe(endpointId);

    // The event page: metadata, and the endpoint whose secret signs the payload.
    await page.goto(`${service.base}/console/events/${ids.c}`);
    await visible(page.getByRole('heading', { name: 'Payload' }));
    await visible(page.getByText(/signed with the endpoint's secret/));
    await visible(page.getByRole('link', { name: 'deposits' }).first());
    await page.goto(`${service.base}/console/events/${ids.a}`);
    await visible(page.getByRole('heading', { name: 'Payload' }));
    await visible(page.getByText('X-Signature is the HMAC-SHA256', { exact: false }));
    const meta = page.getByRole('link', { name: INVOICE });
    await visible(meta);
    expect(await meta.getAttribute('href')).toBe(
      `/console/events?q=${encodeURIComponent(INVOICE)}`,
    );
    await visible(page.getByText('c_1842'));
    expect(await unnamedButtons(page)).toEqual([]);
    await shot(page, 'words-event-metadata');

    // Switch to test mode on this live event's page: the page says where the event is.
    await sw.click();
    await visible(env.getByText('TEST MODE', { exact: true }));
    expect(await env.getByRole('switch', { name: 'Test mode' }).getAttribute('aria-checked')).toBe(
      'true',
    );
    await visible(
      page.getByText(/This event belongs to live mode, and the console is in test mode/),
    );
    expect(await page.getByText(/No event .* in this account/).count()).toBe(0);
    await shot(page, 'words-event-other-environment');

    // Test mode's empty lists say how test events come.
    await page.goto(`${service.base}/console/events`);
    await visible(page.getByRole('heading', { name: 'No test events yet' }));
    await visible(page.getByText(/Test events come from the deposits you trigger/));
    await page.goto(`${service.base}/console/dead-letters`);
    await visible(page.getByRole('heading', { name: 'No dead test events' }));
    expect(await unnamedButtons(page)).toEqual([]);
    await shot(page, 'words-test-mode-empty');

    // Back to live through the link of the notice: the event opens.
    await page.goto(`${service.base}/console/events/${ids.a}`);
    await page.getByRole('link', { name: 'Switch to live mode and open it' }).click();
    await visible(env.getByText('LIVE', { exact: true }));
    await visible(page.getByRole('link', { name: INVOICE }));

    // At 390 px: the event page and the search fit the width.
    await page.setViewportSize({ width: 390, height: 844 });
    await page.reload();
    await visible(page.getByRole('link', { name: INVOICE }));
    const wide = Number(
      await page.evaluate(
        'document.documentElement.scrollWidth - document.documentElement.clientWidth',
      ),
    );
    expect(wide).toBeLessThanOrEqual(0);
    await shot(page, 'words-event-metadata-mobile');
    await context.close();
  }, 300_000);
});
