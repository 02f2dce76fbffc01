/**
 * The console's Telegram flow in a real browser (Debian's Chromium, role and label locators): the
 * service with the Bot API stand-in as its Bot API; sign up, Account → Connect Telegram shows the
 * one-time deep link with its countdown; the user presses Start in Telegram (simulated: the
 * stand-in delivers `/start <token>` to the bot, which reads it by long polling); the page shows
 * the connected chat by itself; a watch delivering to the Telegram chat is created and listed as
 * such; Disconnect is refused while it exists. One screenshot per state into test-output/screenshots/.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTelegramStandIn, type TelegramStandIn } from '../../src/devnet/telegram-stand-in.js';
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
const EMAIL = 'chat@acme-pay.example';
const PASSWORD = 'correct horse battery staple';
const WATCHED = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const GROUP_ID = -1_004_242;

describe.skipIf(!READY)('Telegram in the console, in a browser', () => {
  let standIn: TelegramStandIn;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    standIn = await startTelegramStandIn();
    service = await startConsoleService({
      roles: ['api', 'worker'],
      env: {
        TELEGRAM_BOT_TOKEN: standIn.token,
        TELEGRAM_API_ROOT: standIn.url,
        TELEGRAM_POLL_TIMEOUT_SECONDS: '1',
      },
    });
    // No ingest role here: the chain head a new watch is placed at.
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 1_000, head: 1_018 });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await standIn?.close();
  });

  it('connects a chat with Connect Telegram and /start, then creates a chat watch', async () => {
    const base = service.base;
    await page.goto(`${base}/console/signup`);
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // Before a chat is connected, the watch form explains why the chat target is disabled.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Watches', exact: true })
      .click();
    await page.getByRole('button', { name: 'New watch' }).click();
    await visible(page.getByText(/No Telegram chat is connected/));
    expect(await page.getByRole('radio', { name: /Telegram chat/ }).isDisabled()).toBe(true);

    // Account → Connect Telegram: the one-time deep link, copyable, with its countdown.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Account', exact: true })
      .click();
    const card = page.getByRole('article', { name: 'Telegram' });
    await card.getByRole('button', { name: 'Connect Telegram' }).click();
    const link = card.getByRole('link', { name: 'Telegram connection link' });
    await visible(link);
    await visible(card.getByRole('button', { name: 'Copy link' }));
    await visible(card.getByText(/Valid for \d+:\d\d more, once\./));
    await shot(page, 'account-telegram-link', card);
    const href = (await link.getAttribute('href')) ?? '';
    const m = new RegExp(`^https://t\\.me/${standIn.username}\\?start=([A-Za-z0-9_-]+)$`).exec(
      href,
    );
    expect(m, href).not.toBeNull();

    // The user opens it in Telegram and picks a group: the bot receives /start@bot <token>.
    standIn.userSends(
      { id: GROUP_ID, type: 'group', title: 'Acme payments' },
      `/start@${standIn.username} ${m?.[1]}`,
    );
    await visible(card.getByText('Telegram chat connected.'));
    await visible(card.getByText('Acme payments'));
    await visible(card.getByText('group', { exact: true }));
    await shot(page, 'account-telegram-connected', card);
    expect(standIn.delivered(GROUP_ID)[0]?.text).toMatch(/^Connected/);

    // A watch delivering to the chat.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Watches', exact: true })
      .click();
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(WATCHED);
    await page.getByLabel('Assets').selectOption('USDT');
    await page.getByLabel('Direction').selectOption('incoming');
    await page.getByRole('radio', { name: /Telegram chat \(Acme payments\)/ }).check();
    expect(await page.getByLabel('Webhook URL').count()).toBe(0);
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(page.getByRole('cell', { name: 'Telegram chat' }));
    await shot(page, 'watches-telegram');
    const { rows } = await service.svc.db.query<{ channel: string; webhook_url: string | null }>(
      'SELECT channel, webhook_url FROM watches',
    );
    expect(rows).toEqual([{ channel: 'telegram', webhook_url: null }]);

    // Disconnect is refused while the chat watch exists.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Account', exact: true })
      .click();
    await card.getByRole('button', { name: 'Disconnect' }).click();
    // It asks first, like Delete and Revoke.
    const dialog = page.getByRole('dialog', { name: 'Disconnect this Telegram chat?' });
    await visible(dialog);
    await shot(page, 'telegram-disconnect-confirm');
    await dialog.getByRole('button', { name: 'Disconnect' }).click();
    await visible(card.getByText(/still has chat watches: delete them on the Watches page first/));
  }, 120_000);
});
