/**
 * The console as a person uses it, in Debian's headless Chromium driven by playwright-core:
 * role- and label-based locators only (CONVENTIONS "Browser tests that a person would
 * recognise"), one screenshot per page into test-output/screenshots/ (git-ignored).
 *
 * The whole service runs (api, ingest, worker on embedded PGlite) over a synthetic chain that a
 * replay node reveals block by block, so a watch created in the browser matches real transfers;
 * webhooks go to a local HTTPS receiver that acknowledges USDT and refuses TRX, with the retry
 * schedule compressed (DELIVERY_SCHEDULE_SCALE), so the run shows DELIVERED and DEAD events,
 * attempt logs, and a dead letter recovered in one click once the receiver accepts.
 *
 * Needs the built app (npm run build:web, run by npm ci's prepare) and /usr/bin/chromium (Debian
 * package chromium); without Chromium the file is skipped with a message.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type Browser, chromium, type Locator, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { loadConfig } from '../../src/config.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { type Service, startService } from '../../src/service.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { type SyntheticChain, serveSynthetic } from '../helpers/chain.js';

const CHROMIUM = '/usr/bin/chromium';
const SHOTS = path.resolve('test-output/screenshots');
const BUILT = fs.existsSync(path.resolve('dist/web/index.html'));
const HAS_CHROMIUM = fs.existsSync(CHROMIUM);
if (!HAS_CHROMIUM)
  console.warn(`${CHROMIUM} missing (apt-get install chromium): browser tests skipped`);
if (!BUILT) console.warn('dist/web/ missing (npm run build:web): browser tests skipped');

/** Wait until the first element of `l` is visible (Playwright's own assertion, without its runner). */
async function visible(l: Locator, timeout = 10_000): Promise<void> {
  await l.first().waitFor({ state: 'visible', timeout });
}

const EMAIL = 'ops@acme-pay.example';
const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'a different long passphrase';

describe.skipIf(!HAS_CHROMIUM || !BUILT)('console in a browser', () => {
  let chain: SyntheticChain;
  let receiver: Receiver;
  let svc: Service;
  let browser: Browser;
  let page: Page;
  let dir: string;
  let base: string;
  let watched: string;
  /** TRX deliveries are refused until the test flips this. */
  let acceptTrx = false;

  const shot = (name: string) =>
    page.screenshot({ path: path.join(SHOTS, `${name}.png`), fullPage: true });

  beforeAll(async () => {
    fs.mkdirSync(SHOTS, { recursive: true });
    // 75 filler blocks (30 s) before the recorded ones: time to sign up and create the watch before
    // its transfers are produced (a watch never matches blocks at or below its creation head).
    chain = await serveSynthetic(
      { seed: 7, firstBlock: 75_000_000, txPerBlock: 40, addresses: 12, count: 12 },
      { intervalMs: 400, lag: 2, startBefore: 75 },
    );
    // The address receiving the most transfers of both assets.
    const score = new Map<string, Set<string>>();
    for (const t of chain.transfers) {
      const s = score.get(t.to) ?? new Set<string>();
      s.add(t.asset);
      score.set(t.to, s);
    }
    const counts = new Map<string, number>();
    for (const t of chain.transfers) counts.set(t.to, (counts.get(t.to) ?? 0) + 1);
    const best = [...counts.entries()]
      .filter(([a]) => score.get(a)?.size === 2)
      .sort((a, b) => b[1] - a[1])[0];
    if (!best) throw new Error('synthetic chain has no address receiving both assets');
    watched = hexToBase58(best[0]);

    receiver = await startReceiver({
      respond: (req) =>
        req.headers['x-tronwatch-test'] === undefined && req.event?.asset === 'TRX' && !acceptTrx
          ? 500
          : 200,
    });
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-browser-'));
    fs.writeFileSync(path.join(dir, 'ca.pem'), receiver.ca);
    const cfg = loadConfig({
      DATA_DIR: dir,
      HOST: '127.0.0.1',
      PORT: '0',
      TRON_NODE_URL: chain.node.url,
      TRON_BLOCK_INTERVAL_MS: '100',
      CONSOLE_SIGNUP: 'open',
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: path.join(dir, 'ca.pem'),
      // 1 min … 6 h becomes 6 ms … 2.2 s: six attempts and DEAD within a few seconds.
      DELIVERY_SCHEDULE_SCALE: '0.0001',
      DELIVERY_POLL_MS: '50',
    });
    svc = await startService(cfg, { roles: ['api', 'ingest', 'worker'], logger: silentLogger });
    base = (svc.url as string).replace(/\/$/, '');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await svc?.stop();
    await receiver?.close();
    await chain?.node.close();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('signs up, creates a key and a watch, and shows every delivery', async () => {
    // A deep link while signed out: the login page, then sign-up.
    await page.goto(`${base}/console/watches`);
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    await shot('login');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    await visible(page.getByRole('link', { name: 'Create your first API key' }));

    // API key: shown once, copyable.
    await page.getByRole('link', { name: 'Create your first API key' }).click();
    await page.getByLabel('Name (optional)').fill('payments-prod');
    await page.getByRole('button', { name: 'Create key' }).click();
    const keyRegion = page.getByRole('region', { name: 'Your new API key' });
    await visible(keyRegion.getByText(/^tw_live_/));
    await visible(keyRegion.getByRole('button', { name: 'Copy secret' }));
    await shot('keys');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByRole('cell', { name: 'payments-prod' }));

    // Watch: the form, the secret shown once, then a test event through the real signer.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Watches' })
      .click();
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(watched);
    await page.getByLabel('Assets').selectOption('ALL');
    await page.getByLabel('Webhook URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Create watch' }).click();
    const secret = page.getByRole('region', { name: 'Webhook signing secret' });
    await visible(secret.getByText(/^whsec_/));
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await page.getByRole('button', { name: `Send test event to ${watched}` }).click();
    const outcome = page.getByRole('article', { name: 'Test event result' });
    await visible(outcome.getByText(/Test event delivered: HTTP 200/));
    await shot('watches');

    // Events arrive as the chain produces the watched transfers.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Events' })
      .click();
    await expect
      .poll(
        async () => {
          await page.reload();
          return page.getByText('DELIVERED', { exact: true }).count();
        },
        { timeout: 60_000, interval: 1000 },
      )
      .toBeGreaterThan(0);
    await shot('events');

    // Dead letters: the TRX deliveries, refused six times.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Dead letters' })
      .click();
    await expect
      .poll(
        async () => {
          await page.reload();
          return page.getByRole('button', { name: /^Redeliver event / }).count();
        },
        { timeout: 60_000, interval: 1000 },
      )
      .toBeGreaterThan(0);
    await shot('dead-letters');

    // One dead event: six attempts explained, then recovered in one click.
    await page.getByRole('table').getByRole('link').first().click();
    await visible(page.getByRole('heading', { level: 1, name: /TRX incoming/ }));
    await visible(page.getByText('6 of 6 attempts'));
    await visible(page.getByRole('cell', { name: /HTTP 500/ }).first());
    await page.getByText('Request and response').first().click();
    await visible(page.getByText('x-signature').first());
    acceptTrx = true;
    await page.getByRole('button', { name: 'Redeliver', exact: true }).click();
    await visible(page.getByText(/Redelivery queued/));
    await expect
      .poll(
        async () => {
          await page.reload();
          return page
            .getByText('Latest delivery')
            .locator('..')
            .getByText('DELIVERED', { exact: true })
            .count();
        },
        { timeout: 30_000, interval: 500 },
      )
      .toBe(1);
    await shot('event-detail');

    // Redeliver all for the rest.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Dead letters' })
      .click();
    await page.getByRole('button', { name: 'Redeliver all' }).click();
    await page.getByRole('dialog').getByRole('button', { name: 'Redeliver all' }).click();
    await visible(page.getByText(/queued for redelivery|Nothing to redeliver/));

    // Overview: counts, quota, chain.
    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('link', { name: 'Overview' })
      .click();
    await visible(page.getByRole('heading', { name: /^Chain/ }));
    await shot('overview');
  });

  it('changes the password, signs out, and signs back in where it was going', async () => {
    await page.goto(`${base}/console/account`);
    await visible(page.getByRole('cell', { name: /This session/ }));
    await page.getByLabel('Current password').fill('not the password');
    await page.getByLabel('New password', { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await visible(page.getByText('The current password is wrong.'));
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await visible(page.getByText(/^Password changed/));
    await shot('account');

    await page
      .getByRole('navigation', { name: 'Console' })
      .getByRole('button', { name: 'Sign out' })
      .click();
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    await page.goto(`${base}/console/dead-letters`);
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByRole('heading', { name: 'Dead letters' }));
  });

  it('serves the API reference', async () => {
    await page.goto(`${base}/console/docs/`);
    await visible(page.getByRole('link', { name: /Back to the console/ }));
    await visible(page.getByText('/v1/watches').first(), 15_000);
    await shot('api-docs');
  });
});
