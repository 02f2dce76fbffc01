/**
 * The Audit log page (issue 18 item 6) in Debian's headless Chromium, on the service as deployed
 * (api role; PostgreSQL when DATABASE_URL is set): changes made through the console's forms and
 * through /v1 with an API key show with who made them, from which address and what they touched;
 * the filters (who, action, time) narrow the list and live in the URL; "Older" pages back; the
 * page is usable at 1440 and 390 px wide (nothing wider than the phone's screen).
 * Screenshots: test-output/screenshots/audit-log*.png.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { recordAudit } from '../../src/audit/audit.js';
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
const PASSWORD = 'correct horse battery staple';
const EMAIL = 'audit@acme-pay.example';

const nav = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

/** Rows of the audit table (the header row excluded). */
const rows = (page: Page) => page.locator('table.audit-table tbody tr');

describe.skipIf(!READY)('audit log page in a browser', () => {
  let service: ConsoleService;
  let browser: Browser;

  beforeAll(async () => {
    service = await startConsoleService({ roles: ['api'] });
    // A chain head, so that /v1/watches can activate a watch without an ingester.
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 1_000, head: 1_018 });
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  it('shows console and API changes with who, where and what, filters them and pages back, at 1440 and 390 px', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // A key, made through the form; its secret is shown once.
    await nav(page, 'API keys').click();
    await visible(page.getByRole('heading', { level: 1, name: 'API keys' }));
    await page.getByLabel('Name (optional)').fill('billing backend');
    await page.getByRole('button', { name: 'Create key' }).click();
    const secret = (await page.getByTestId('secret').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^tw_live_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();

    // The backend uses the key: a watch created and paused through /v1.
    const auth = { authorization: `Bearer ${secret}`, 'content-type': 'application/json' };
    const created = await fetch(`${service.base}/v1/watches`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({
        address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
        asset_filter: 'USDT',
        // An address literal: the test resolves no name (the URL policy accepts a public one).
        webhook_url: 'https://93.184.215.14/tron',
      }),
    });
    const watch = (await created.json()) as { id: string };
    expect(created.status, JSON.stringify(watch)).toBe(201);
    const paused = await fetch(`${service.base}/v1/watches/${watch.id}/pause`, {
      method: 'POST',
      headers: { authorization: auth.authorization },
    });
    expect(paused.status).toBe(200);

    // Someone tries the password from another browser.
    const intruder = await browser.newContext();
    const ip = await intruder.newPage();
    await ip.goto(`${service.base}/console/login`);
    await ip.getByLabel('E-mail').fill(EMAIL);
    await ip.getByLabel('Password').fill('guessing the password');
    await ip.getByRole('button', { name: 'Sign in' }).click();
    await visible(ip.getByRole('alert'));
    await intruder.close();

    await nav(page, 'Audit log').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Audit log' }));
    await visible(rows(page));
    const texts = async () => (await rows(page).allInnerTexts()).map((t) => t.replace(/\s+/g, ' '));
    const all = await texts();
    expect(
      all.map(
        (t) =>
          /(Signed up|Created an API key|Created a watch|Paused a watch|Failed sign-in)/.exec(
            t,
          )?.[1],
      ),
    ).toEqual([
      'Failed sign-in',
      'Paused a watch',
      'Created a watch',
      'Created an API key',
      'Signed up',
    ]);
    // Who: the key (by prefix and name) for the API's changes, the user's e-mail for the others.
    const prefix = secret.slice(0, 12);
    expect(all[1]).toContain(`API key ${prefix} · billing backend`);
    expect(all[2]).toContain('webhook host 93.184.215.14');
    expect(all[3]).toContain(`User ${EMAIL}`);
    expect(all[3]).toContain('name billing backend');
    expect(all[4]).toContain('127.0.0.1');
    // Never the key itself.
    expect((await page.content()).includes(secret)).toBe(false);
    await shot(page, 'audit-log');

    // Who = the key: only its two changes; the filter is in the URL.
    await page.getByLabel('Who').selectOption({ label: `API key ${prefix} · billing backend` });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/actor=api_key%3Akey_/);
    await expect.poll(async () => (await texts()).length, { timeout: 20_000 }).toBe(2);
    expect((await texts()).every((t) => t.includes('Watches') || /watch/.test(t))).toBe(true);
    await shot(page, 'audit-log-filtered');

    // Action = API keys' creations, anyone: one entry. A time range before it all: none.
    await page.getByLabel('Who').selectOption({ label: 'Anyone' });
    await page.getByLabel('Action').selectOption({ label: 'Created an API key' });
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await page.waitForURL(/action=api_key\.created/);
    await expect.poll(async () => (await texts()).length, { timeout: 20_000 }).toBe(1);
    await page.getByLabel('Action').selectOption({ label: 'Any action' });
    await page.getByLabel('To (your time)').fill('2020-01-01T00:00');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await visible(page.getByRole('heading', { name: 'No entries match these filters' }));
    await page.getByRole('button', { name: 'Clear' }).click();
    await expect.poll(async () => (await texts()).length, { timeout: 20_000 }).toBe(5);

    // Sixty older entries (the operator's CLI): a page of 50, then Older brings the rest.
    const accountId = (await (await page.request.get(`${service.base}/console/api/session`)).json())
      .account.id as string;
    for (let i = 0; i < 60; i++) {
      await recordAudit(
        service.svc.db,
        { accountId, actor: { type: 'system', id: 'cli' }, clientIp: null },
        { action: 'api_key.revoked', targetId: `key_${String(i).padStart(26, '0')}` },
      );
    }
    await page.reload();
    await visible(rows(page));
    await expect.poll(async () => rows(page).count(), { timeout: 20_000 }).toBe(50);
    await page.getByRole('button', { name: 'Older' }).click();
    await expect.poll(async () => rows(page).count(), { timeout: 20_000 }).toBe(65);
    expect(await page.getByRole('button', { name: 'Older' }).count()).toBe(0);
    await visible(page.getByText('Showing 65 entries (all), newest first.'));

    // The phone: the same page, nothing wider than the screen.
    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      storageState: await context.storageState(),
    });
    const p = await phone.newPage();
    await p.goto(`${service.base}/console/audit?action=watch.*`);
    await visible(p.getByRole('heading', { level: 1, name: 'Audit log' }));
    await expect.poll(async () => rows(p).count(), { timeout: 20_000 }).toBe(2);
    const width = Number(await p.evaluate('document.documentElement.scrollWidth'));
    expect(width).toBeLessThanOrEqual(390);
    await shot(p, 'audit-log-mobile');
    await p.getByRole('button', { name: 'Menu' }).click();
    await visible(nav(p, 'Audit log'));
    await shot(p, 'audit-log-mobile-menu');
    await phone.close();
    await context.close();
  }, 240_000);
});
