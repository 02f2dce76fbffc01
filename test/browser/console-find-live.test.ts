/**
 * Finding and following deliveries in a browser (issue 19 items 5, 6, 7), at 1440 and 390 px:
 * search by tx id, filters and paging kept in the URL, an export downloaded, a "From" after the
 * "To" refused; the events list, the dead letters and an event's page updating as deliveries land
 * (an event going DEAD, then its redelivery's new attempt) without a reload; a chat delivery's
 * page; and no page scrolling sideways at 390 px (document scrollWidth ≤ clientWidth).
 *
 * The service runs its api and worker roles; events are written as the ingester writes them (an
 * event, its notification, chain_cursor.last_event_at) and delivered by the real worker to a real
 * HTTPS receiver on the compressed retry schedule. PostgreSQL when DATABASE_URL is set, else PGlite.
 */
import fs from 'node:fs';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
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
/** A chat watch written straight into the database (a real id: the console checks its shape). */
const CHAT_WATCH = newId('wh');
/** expect.poll's bound (its default is 1 s): the host is loaded, pages take a while. */
const WAIT = { timeout: 30_000, interval: 200 };
const EMAIL = 'finder@acme-pay.example';
const PASSWORD = 'correct horse battery staple';
const TX = `${'c0ffee'.repeat(10).slice(0, 60)}beef`;

describe.skipIf(!READY)('finding and following deliveries in a browser', () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let base: string;
  let accountId: string;
  let watchId: string;
  let failing = false;
  let tag = 0;

  /** Write `count` events for the watch as the ingester does (the worker then delivers them). */
  const ingest = async (count: number): Promise<string[]> => {
    const db = service.svc.db;
    const { rows } = await db.query<{ t: string }>(
      `SELECT to_char(greatest(now(), coalesce((SELECT max(created_at) FROM events), now()))
                      AT TIME ZONE 'UTC' + interval '1 ms', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS t`,
    );
    const ids = await insertEvents(db, {
      accountId,
      watchId,
      tag: `b${++tag}`,
      count,
      start: rows[0]?.t as string,
    });
    await db.query(
      `INSERT INTO chain_cursor (network, block_number, block_id, block_timestamp, last_event_at)
       VALUES ('mainnet', 79000000, 'x', '2026-01-08T13:36:51Z', (SELECT max(created_at) FROM events))
       ON CONFLICT (network) DO UPDATE SET last_event_at = excluded.last_event_at`,
    );
    return ids;
  };

  /** The document is no wider than the viewport (no sideways scrolling). */
  const noSidewaysScroll = async (what: string) => {
    const { sw, cw } = (await page.evaluate(
      '({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth })',
    )) as { sw: number; cw: number };
    expect(sw, `${what}: scrollWidth ${sw} > clientWidth ${cw}`).toBeLessThanOrEqual(cw);
  };

  const rowsWith = (status: string) =>
    page.getByRole('row').filter({ has: page.getByText(status, { exact: true }) });

  beforeAll(async () => {
    receiver = await startReceiver({
      respond: () => (failing ? { status: 503, body: 'receiver under maintenance' } : 200),
    });
    service = await startConsoleService({
      roles: ['api', 'worker'],
      caPem: receiver.ca,
      env: {
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        DELIVERY_SCHEDULE_SCALE: '0.0001',
        DELIVERY_POLL_MS: '50',
      },
    });
    base = service.base;
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 79_000_000, head: 79_000_018 });
    browser = await launchBrowser();
    context = await browser.newContext({
      viewport: { width: 1440, height: 900 },
      acceptDownloads: true,
    });
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
  });

  it('a signed-out load logs no error; sign-up; a watch and 60 delivered events', async () => {
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`${base}/console/events`);
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    expect(errors).toEqual([]);
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    const created = await page.evaluate(async (url) => {
      const doc = (globalThis as unknown as { document: { cookie: string } }).document;
      const csrf = decodeURIComponent(
        doc.cookie
          .split('; ')
          .find((c: string) => c.startsWith('tw_csrf='))
          ?.slice(8) ?? '',
      );
      const res = await fetch('/console/api/watches', {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
        body: JSON.stringify({
          address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
          asset_filter: 'ALL',
          webhook_url: url,
        }),
      });
      return {
        status: res.status,
        body: (await res.json()) as { id: string; account_id?: string },
      };
    }, receiver.url);
    expect(created.status).toBe(201);
    watchId = created.body.id;
    const { rows } = await service.svc.db.query<{ id: string }>('SELECT id FROM accounts');
    accountId = rows[0]?.id as string;
    const ids = await ingest(60);
    // One of them: a known transaction.
    await service.svc.db.query('UPDATE events SET tx_id = $2 WHERE id = $1', [ids[17], TX]);
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Events', exact: true })
      .click();
    await visible(page.getByRole('heading', { level: 1, name: 'Events' }));
    // The list follows the deliveries by itself: no reload.
    await expect.poll(() => rowsWith('DELIVERED').count(), { timeout: 60_000 }).toBe(50);
    await visible(page.getByText('● Live'));
    await shot(page, 'find-events-1440');
  }, 180_000);

  it('searches by tx id, keeps the query in the URL, pages both ways and exports', async () => {
    await page.getByLabel('Search').fill(TX);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(2);
    expect(new URL(page.url()).searchParams.get('q')).toBe(TX);
    await shot(page, 'find-search-tx');
    // The URL alone brings the same view back.
    await page.goto(page.url());
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(2);
    await expect.poll(() => page.getByLabel('Search').inputValue(), WAIT).toBe(TX);

    // A From after the To: refused at the field, the URL unchanged.
    const before = page.url();
    await page.getByLabel('From (your time)').fill('2030-01-02T10:00');
    await page.getByLabel('To (your time)').fill('2030-01-01T10:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await visible(page.getByText('"From" is after "To": choose a start before the end.'));
    expect(page.url()).toBe(before);

    // Filters and paging: 60 webhook USDT events, 50 a page.
    await page.goto(`${base}/console/events?channel=webhook&direction=incoming`);
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(51);
    await page.getByRole('link', { name: 'Older →' }).click();
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(11);
    expect(new URL(page.url()).searchParams.get('before')).not.toBeNull();
    expect(new URL(page.url()).searchParams.get('channel')).toBe('webhook');
    await page.getByRole('link', { name: '← Newer' }).click();
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(51);
    expect(new URL(page.url()).searchParams.get('after')).not.toBeNull();
    await expect.poll(() => page.getByRole('link', { name: '← Newer' }).count(), WAIT).toBe(0);

    // Export: the whole filtered list (both pages), as a file, once all 60 are delivered.
    await expect
      .poll(async () => {
        const { rows } = await service.svc.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM notifications WHERE status = 'DELIVERED'`,
        );
        return rows[0]?.n;
      }, WAIT)
      .toBe(60);
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export CSV' }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^tronwatch-events-\d{8}-\d{6}\.csv$/);
    const csv = fs
      .readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n');
    expect(csv[0]).toMatch(/^event_id,block_timestamp,/);
    expect(csv).toHaveLength(61);
    expect(csv.slice(1).every((l) => l.includes(',DELIVERED,'))).toBe(true);
    const [json] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('link', { name: 'Export JSON' }).click(),
    ]);
    expect(json.suggestedFilename()).toMatch(/\.json$/);
    const list = JSON.parse(fs.readFileSync(await json.path(), 'utf8')) as Array<{ tx_id: string }>;
    expect(list).toHaveLength(60);
    expect(list.filter((e) => e.tx_id === TX)).toHaveLength(1);
  }, 120_000);

  it('follows an event to DEAD and its redelivery to DELIVERED without a reload', async () => {
    await page.goto(`${base}/console/events`);
    await expect.poll(() => rowsWith('DELIVERED').count(), WAIT).toBe(50);
    await page.evaluate(() => {
      (globalThis as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    failing = true;
    const [deadId] = await ingest(1);
    // The new event appears on the open list, and its delivery goes DEAD: no reload.
    await expect.poll(() => rowsWith('DEAD').count(), { timeout: 60_000 }).toBe(1);
    expect(
      await page.evaluate(() => (globalThis as unknown as { notReloaded?: boolean }).notReloaded),
    ).toBe(true);

    // The event's page in a second tab, the dead letters in the first.
    const eventPage = await context.newPage();
    await eventPage.goto(`${base}/console/events/${deadId}`);
    await visible(eventPage.getByRole('heading', { name: 'Delivery DEAD' }));
    await eventPage.evaluate(() => {
      (globalThis as unknown as { notReloaded: boolean }).notReloaded = true;
    });
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Dead letters' })
      .click();
    await visible(page.getByRole('button', { name: `Redeliver event ${deadId}` }));
    await shot(page, 'find-dead-letters');
    failing = false;
    await page.getByRole('button', { name: `Redeliver event ${deadId}` }).click();
    // The other tab shows the new attempt by itself.
    await visible(eventPage.getByRole('heading', { name: 'Latest delivery DELIVERED' }), 60_000);
    const latest = eventPage
      .getByRole('region')
      .filter({ has: eventPage.getByRole('heading', { name: 'Latest delivery DELIVERED' }) });
    await expect.poll(() => latest.getByRole('cell', { name: /HTTP 200/ }).count(), WAIT).toBe(1);
    expect(
      await eventPage.evaluate(
        () => (globalThis as unknown as { notReloaded?: boolean }).notReloaded,
      ),
    ).toBe(true);
    await shot(eventPage, 'find-live-redelivered');
    await eventPage.close();
    await visible(page.getByRole('heading', { name: 'No dead letters' }), 30_000);
  }, 180_000);

  it('a new API key is shown once, with "Copy key"', async () => {
    await page.goto(`${base}/console/keys`);
    await page.getByLabel('Name (optional)').fill('payments-prod');
    await page.getByRole('button', { name: 'Create key' }).click();
    const region = page.getByRole('region', { name: 'Your new API key' });
    await visible(region.getByRole('button', { name: 'Copy key' }));
    await expect.poll(() => page.getByText(/shown only/).count(), WAIT).toBe(1);
    await shot(page, 'find-key-once', region);
    await page.getByRole('button', { name: 'I have saved it' }).click();
  });

  it('the API docs page is usable at once; Swagger UI loads when asked for', async () => {
    const t0 = Date.now();
    await page.goto(`${base}/console/docs/`);
    await visible(page.getByRole('heading', { name: /POST \/v1\/watches/ }));
    // The figure for the report (no timing assertion: the host is shared).
    console.log(`API docs usable after ${Date.now() - t0} ms (reference visible)`);
    await visible(page.getByRole('heading', { name: 'Event', exact: true }));
    await shot(page, 'find-docs-1440');
    await page.setViewportSize({ width: 390, height: 844 });
    await noSidewaysScroll('docs');
    await shot(page, 'find-docs-390', page.getByRole('heading', { level: 1 }));
    await page.setViewportSize({ width: 1440, height: 900 });
    await page.getByRole('button', { name: 'Open the interactive explorer' }).click();
    await visible(page.locator('.swagger-ui .opblock').first(), 60_000);
    await shot(page, 'find-docs-explorer');
  }, 120_000);

  it("shows a chat delivery's chat, message and Bot API answer", async () => {
    const db = service.svc.db;
    await db.query(
      `UPDATE accounts SET telegram_chat_id = '-1001234567890', telegram_chat_title = 'Treasury ops',
              telegram_chat_type = 'supergroup'`,
    );
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, active_from_block, status)
       VALUES ($2, $1, 'mainnet', 'TNPeeaaFB7K9cmo4uQpcU32zGK8G1NYqeL',
               '4187e14d9c5b5b6c5b0b0b2ad0c2a5f2f1f8a3d8a1', 'USDT', 'incoming', 'telegram', 1,
               'PAUSED')`,
      [accountId, CHAT_WATCH],
    );
    const [id] = await insertEvents(db, {
      accountId,
      watchId: CHAT_WATCH,
      tag: 'tgb',
      count: 1,
      start: '2020-01-01T00:00:00Z',
    });
    await db.query(
      `UPDATE notifications SET channel = 'telegram', status = 'DELIVERED', attempts = 1,
              delivered_at = now() WHERE event_id = $1`,
      [id],
    );
    await db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, response_body)
       SELECT id, 1, now(), 80, 200, '{"ok":true,"result":{"message_id":4242}}'
         FROM notifications WHERE event_id = $1`,
      [id],
    );
    // The watch picker: its search narrows the list by channel (or label, target, address).
    await page.goto(`${base}/console/events`);
    await page.getByLabel('Find a watch').fill('telegram');
    const picker = page.getByRole('combobox', { name: 'Watch', exact: true });
    await expect.poll(() => picker.locator('option').count(), WAIT).toBe(2);
    expect(await picker.locator('option').nth(1).textContent()).toMatch(/^Telegram chat · TNPeea…/);
    await picker.selectOption(CHAT_WATCH);
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await expect.poll(() => page.getByRole('row').count(), WAIT).toBe(2);
    expect(new URL(page.url()).searchParams.get('watch_id')).toBe(CHAT_WATCH);
    await shot(page, 'find-watch-picker');

    await page.goto(`${base}/console/events/${id}`);
    await visible(page.getByRole('heading', { name: 'Telegram message' }));
    await visible(page.getByText('Treasury ops'));
    await visible(page.getByText(/Incoming 1\.5 USDT/).first());
    await expect.poll(() => page.getByRole('heading', { name: 'Payload' }).count(), WAIT).toBe(0);
    await expect.poll(() => page.getByRole('cell', { name: /HTTP 200/ }).count(), WAIT).toBe(0);
    await page.getByText('Bot API answer').click();
    await visible(page.getByText('"message_id": 4242'));
    await shot(page, 'find-chat-event-1440');
    await page.setViewportSize({ width: 390, height: 844 });
    await noSidewaysScroll('chat event page');
    await shot(page, 'find-chat-event-390');
    await page.setViewportSize({ width: 1440, height: 900 });
  });

  it('at 390 px: no page scrolls sideways, the phone menu closes with Escape', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    const { rows } = await service.svc.db.query<{ id: string }>(
      `SELECT e.id FROM events e JOIN notifications n ON n.event_id = e.id
        WHERE e.watch_id = $1 GROUP BY e.id HAVING count(*) > 1 LIMIT 1`,
      [watchId],
    );
    const pages: Array<[string, string]> = [
      ['overview', '/console/'],
      ['events', '/console/events'],
      ['dead-letters', '/console/dead-letters'],
      ['watches', '/console/watches'],
      ['keys', '/console/keys'],
      ['account', '/console/account'],
      ['security', '/console/security'],
      ['event', `/console/events/${rows[0]?.id}`],
    ];
    for (const [name, path] of pages) {
      await page.goto(base + path);
      await visible(page.getByRole('heading', { level: 1 }));
      await page.waitForLoadState('networkidle').catch(() => undefined);
      if (name === 'overview') {
        // In sync with a node that serves old blocks: said in words, the age in days.
        await visible(page.getByText(/the node serves old blocks/));
        await visible(page.getByText(/^\d+ days( \d+ h)?$/));
        await visible(page.getByText('In sync'));
      }
      if (name === 'event') {
        // Every attempt's request and response expanded.
        for (const s of await page.getByText('Request and response').all()) await s.click();
        await visible(page.getByText('x-signature').first());
      }
      await noSidewaysScroll(name);
      await shot(page, `find-390-${name}`, page.getByRole('heading', { level: 1 }));
      if (name === 'event') {
        await shot(page, 'find-390-event-attempt', page.getByText('Request and response').first());
      }
    }
    // The sign-in page warns before the lock, then counts down (another browser, same address).
    const other = await browser.newPage({ viewport: { width: 390, height: 844 } });
    await other.goto(`${base}/console/login`);
    for (let i = 0; i < 6; i++) {
      await other.getByLabel('E-mail').fill(EMAIL);
      await other.getByLabel('Password').fill(`wrong password number ${i}`);
      await other.getByRole('button', { name: 'Sign in' }).click();
      if (i === 2)
        await visible(
          other.getByText(
            '2 more failed sign-ins lock this e-mail address out from here for 15 minutes.',
          ),
        );
      if (i === 3)
        await visible(
          other.getByText(
            'One more failed sign-in locks this e-mail address out from here for 15 minutes.',
          ),
        );
      if (i < 5)
        await visible(other.getByText('That e-mail address and password do not match an account.'));
    }
    const timer = other.getByRole('timer');
    await visible(timer);
    const first = await timer.textContent();
    expect(first).toMatch(/^1[45]:\d\d$/);
    await expect.poll(() => timer.textContent(), WAIT).not.toBe(first);
    expect(await other.getByRole('button', { name: 'Sign in' }).isDisabled()).toBe(true);
    await shot(other, 'find-390-login-locked');
    await other.close();

    await page.getByRole('button', { name: 'Menu' }).click();
    await expect
      .poll(() => page.getByRole('button', { name: 'Menu' }).getAttribute('aria-expanded'))
      .toBe('true');
    await page.keyboard.press('Escape');
    await expect
      .poll(() => page.getByRole('button', { name: 'Menu' }).getAttribute('aria-expanded'))
      .toBe('false');
    await page.setViewportSize({ width: 1440, height: 900 });
  }, 120_000);
});
