/**
 * The console as a person uses it, in Debian's headless Chromium driven by playwright-core:
 * role- and label-based locators only (CONVENTIONS "Browser tests that a person would
 * recognise"), one screenshot per page into test-output/screenshots/ (git-ignored).
 *
 * One journey end to end (issue 12 item 8), on PostgreSQL when DATABASE_URL is set (always under
 * CI=true), else on embedded PGlite: sign up → create a key → create a watch to the local HTTPS
 * receiver → the replay node solidifies a block with a matching transfer → the event shows
 * DELIVERED with its attempt → the receiver starts failing → the next matching transfer's event
 * goes DEAD on the compressed schedule (DELIVERY_SCHEDULE_SCALE) with its six attempts → the
 * receiver recovers → Redeliver → DELIVERED. The same watch and the same receiver throughout.
 *
 * The whole service runs (api, ingest, worker) over a synthetic chain served by a replay node that
 * is paused: the test moves its solidified head (advanceTo) to the block it wants matched, so which
 * transfer meets which receiver mode is decided, not raced.
 *
 * Needs the built app and /usr/bin/chromium (test/helpers/browser.ts: skipped with a message
 * outside CI, a failure under CI=true).
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { hexToBase58 } from '../../src/tron/address.js';
import {
  browserTestsReady,
  type ConsoleService,
  launchBrowser,
  shot,
  startConsoleService,
  visible,
} from '../helpers/browser.js';
import { FINALITY_DEPTH, nodeEnv, type SyntheticChain, serveSynthetic } from '../helpers/chain.js';

const READY = browserTestsReady();

const EMAIL = 'ops@acme-pay.example';
const PASSWORD = 'correct horse battery staple';
const NEW_PASSWORD = 'a different long passphrase';
const FIRST_BLOCK = 75_000_000;

describe.skipIf(!READY)('console in a browser', () => {
  let chain: SyntheticChain;
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;
  let base: string;
  /** The watched address (base58), and the two blocks whose incoming transfers it is sent. */
  let watched: string;
  let okBlock: number;
  let failBlock: number;
  /** Incoming transfers to `watched` in okBlock and in failBlock (one event each). */
  let okCount: number;
  let failCount: number;
  /** The receiver's mode: acknowledge, or answer 503 to every event (test events excepted). */
  let failing = false;
  /** The watch's signing secret, as the console showed it once (the receiver verifies with it). */
  let watchSecret: string | undefined;

  const nav = (name: string) =>
    page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

  /** Where the pipeline stands, for a failure's message: heads, cursor, watch, deliveries. */
  const pipeline = async (): Promise<string> => {
    const q = async (sql: string) => JSON.stringify((await service.svc.db.query(sql)).rows);
    return [
      `replay node ${JSON.stringify(chain.node.heads())}; blocks wanted ${okBlock}, ${failBlock}`,
      `chain_head ${await q('SELECT solidified_block_number, head_block_number, observed_at FROM chain_head')}`,
      `chain_cursor ${await q('SELECT block_number, updated_at FROM chain_cursor')}`,
      `watches ${await q('SELECT id, active_from_block, created_at FROM watches')}`,
      `notifications ${await q('SELECT status, attempts, count(*)::int AS n FROM notifications GROUP BY 1, 2')}`,
      `receiver requests ${receiver.requests}`,
    ].join('\n');
  };

  /** Reload until `count()` reaches `n` (the pages do not refresh themselves). */
  const reloadUntil = async (
    what: string,
    count: () => Promise<number>,
    n: number,
    timeout = 90_000,
  ) => {
    try {
      await expect
        .poll(
          async () => {
            await page.reload();
            await visible(page.getByRole('heading', { level: 1 }));
            return count();
          },
          { timeout, interval: 500 },
        )
        .toBe(n);
    } catch (err) {
      throw new Error(`waiting for ${n} × ${what}: ${String(err)}\n${await pipeline()}`);
    }
  };

  /** Rows of the events table whose delivery shows `status`. */
  const rowsWith = (status: string) =>
    page.getByRole('row').filter({ has: page.getByText(status, { exact: true }) });

  beforeAll(async () => {
    // Paused (intervalMs 0) with the solidified head 101 blocks before the synthetic ones: the
    // watch is created below them, and each advanceTo reveals exactly the blocks wanted. A
    // watch's activation block is the head extrapolated by one block per TRON_BLOCK_INTERVAL_MS
    // since it was last seen, and a paused chain is not polled while the ingester waits for the
    // next block: at mainnet's 3 s the 100 blocks of margin last five minutes of a loaded host.
    chain = await serveSynthetic(
      { seed: 7, firstBlock: FIRST_BLOCK, txPerBlock: 12, addresses: 12, count: 12 },
      // The full-node head FINALITY_DEPTH above the solidified one, as on mainnet: the light
      // client proves final exactly the blocks the node solidified.
      { intervalMs: 0, lag: FINALITY_DEPTH, startBefore: 100 },
    );
    // The address with incoming transfers in the most blocks; its first two such blocks.
    const blocksOf = new Map<string, Map<number, number>>();
    for (const t of chain.transfers) {
      const m = blocksOf.get(t.to) ?? new Map<number, number>();
      m.set(t.blockNumber, (m.get(t.blockNumber) ?? 0) + 1);
      blocksOf.set(t.to, m);
    }
    const best = [...blocksOf.entries()].sort((a, b) => b[1].size - a[1].size)[0];
    if (!best || best[1].size < 2) throw new Error('synthetic chain: no address in two blocks');
    const [[b1, n1], [b2, n2]] = [...best[1].entries()].sort((a, b) => a[0] - b[0]) as [
      [number, number],
      [number, number],
    ];
    watched = hexToBase58(best[0]);
    [okBlock, okCount, failBlock, failCount] = [b1, n1, b2, n2];

    receiver = await startReceiver({
      secretFor: () => watchSecret,
      respond: (req) =>
        failing && req.headers['x-tronwatch-test'] === undefined
          ? { status: 503, body: 'receiver under maintenance' }
          : 200,
    });
    service = await startConsoleService({
      roles: ['api', 'ingest', 'worker'],
      caPem: receiver.ca,
      env: {
        ...nodeEnv(chain.node),
        // The chain's checkpoint: its first block (the fillers before it cannot hash to its parent).
        INGEST_START_BLOCK: String(chain.first),
        TRON_BLOCK_INTERVAL_MS: '3000',
        // A local replay node: no pacing of the requests.
        TRON_NODE_MAX_RPS: '0',
        WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
        // 1 min … 6 h becomes 6 ms … 2.2 s: six attempts and DEAD within a few seconds.
        DELIVERY_SCHEDULE_SCALE: '0.0001',
        DELIVERY_POLL_MS: '50',
      },
    });
    base = service.base;
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
    await chain?.node.close();
  });

  it('runs on PostgreSQL whenever DATABASE_URL is set', () => {
    expect(service.engine).toBe(process.env.DATABASE_URL ? 'postgres' : 'pglite');
  });

  it('signs up, creates a key and a watch, and follows one event to DELIVERED and one through DEAD back to DELIVERED', async () => {
    // A deep link while signed out: the login page, then sign-up.
    await page.goto(`${base}/console/watches`);
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    await shot(page, 'login');
    await page.getByRole('link', { name: 'Create an account' }).click();
    await visible(page.getByRole('heading', { name: 'Create your account' }));
    await page.getByLabel('E-mail').fill(EMAIL);
    await page.getByLabel('Password').fill(PASSWORD);
    await shot(page, 'signup');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    await visible(page.getByRole('link', { name: 'Create your first API key' }));
    await shot(page, 'overview-first-steps');

    // API key: shown once, copyable.
    await page.getByRole('link', { name: 'Create your first API key' }).click();
    await page.getByLabel('Name (optional)').fill('payments-prod');
    await page.getByRole('button', { name: 'Create key' }).click();
    const keyRegion = page.getByRole('region', { name: 'Your new API key' });
    await visible(keyRegion.getByText(/^tw_live_/));
    await visible(keyRegion.getByRole('button', { name: 'Copy key' }));
    await shot(page, 'keys');
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByRole('cell', { name: 'payments-prod' }));

    // Watch to the local HTTPS receiver: the secret shown once, then a signed test event.
    await nav('Watches').click();
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(watched);
    await page.getByLabel('Assets').selectOption('ALL');
    await page.getByLabel('Direction').selectOption('incoming');
    await page.getByLabel('Webhook URL').fill(receiver.url);
    await page.getByRole('button', { name: 'Create watch' }).click();
    const secret = page.getByRole('region', { name: 'Webhook signing secret' });
    await visible(secret.getByText(/^whsec_/));
    watchSecret = (await secret.getByText(/^whsec_/).textContent())?.trim();
    expect(watchSecret).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await page.getByRole('button', { name: `Send test event to ${watched}` }).click();
    const outcome = page.getByRole('article', { name: 'Test event result' });
    await visible(outcome.getByText(/Test event delivered: HTTP 200/));
    await shot(page, 'watches');

    // The watch is active from below the synthetic blocks.
    const { rows } = await service.svc.db.query<{ active_from_block: string }>(
      'SELECT active_from_block::text FROM watches',
    );
    expect(Number(rows[0]?.active_from_block), await pipeline()).toBeLessThan(okBlock);

    // The replay node solidifies the block with the first matching transfer(s): DELIVERED.
    chain.node.advanceTo(okBlock);
    await nav('Events').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Events' }));
    await reloadUntil('DELIVERED event row', () => rowsWith('DELIVERED').count(), okCount);
    await shot(page, 'events');

    // Its page: one delivery, one attempt, HTTP 200, what was sent and answered.
    await rowsWith('DELIVERED').first().getByRole('link').click();
    await visible(page.getByRole('heading', { level: 1, name: /incoming$/ }));
    await visible(page.getByRole('heading', { name: 'Delivery DELIVERED' }));
    await visible(page.getByText('1 of 6 attempts'));
    await expect.poll(() => page.getByRole('cell', { name: /HTTP 200/ }).count()).toBe(1);
    await page.getByText('Request and response').click();
    await visible(page.getByText('x-signature'));
    await shot(page, 'event-delivered');

    // The receiver starts failing; the next matching block's event(s) go DEAD after six attempts.
    failing = true;
    chain.node.advanceTo(failBlock);
    await nav('Dead letters').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Dead letters' }));
    await reloadUntil(
      'dead letter',
      () => page.getByRole('button', { name: /^Redeliver event / }).count(),
      failCount,
    );
    await shot(page, 'dead-letters');

    await page.getByRole('table').getByRole('link').first().click();
    await visible(page.getByRole('heading', { name: 'Delivery DEAD' }));
    await visible(page.getByText('6 of 6 attempts'));
    await expect.poll(() => page.getByRole('cell', { name: /HTTP 503/ }).count()).toBe(6);
    await page.getByText('Request and response').first().click();
    await visible(page.getByText('receiver under maintenance'));
    await shot(page, 'event-dead');

    // The receiver recovers; Redeliver in the UI: a new delivery, DELIVERED, both chains shown.
    failing = false;
    await page.getByRole('button', { name: 'Redeliver', exact: true }).click();
    await visible(page.getByText(/Redelivery queued/));
    await reloadUntil(
      'redelivery DELIVERED',
      () => page.getByRole('heading', { name: 'Latest delivery DELIVERED' }).count(),
      1,
    );
    const latest = page
      .getByRole('region')
      .filter({ has: page.getByRole('heading', { name: 'Latest delivery DELIVERED' }) });
    const earlier = page
      .getByRole('region')
      .filter({ has: page.getByRole('heading', { name: 'Earlier delivery DEAD' }) });
    await expect.poll(() => latest.getByRole('cell', { name: /HTTP 200/ }).count()).toBe(1);
    await expect.poll(() => earlier.getByRole('cell', { name: /HTTP 503/ }).count()).toBe(6);
    await shot(page, 'event-redelivered');
    await page.setViewportSize({ width: 375, height: 812 });
    await visible(page.getByRole('heading', { name: 'Latest delivery DELIVERED' }));
    await shot(page, 'event-mobile-full');
    await shot(page, 'event-mobile', page.getByRole('heading', { name: 'Deliveries' }));
    await page.setViewportSize({ width: 1280, height: 900 });

    // Any other dead event of that block: Redeliver all; then no dead letters, all DELIVERED.
    await nav('Dead letters').click();
    if (failCount > 1) {
      await page.getByRole('button', { name: 'Redeliver all' }).click();
      // The confirmation says how many (issue 29).
      const left = failCount - 1;
      const dialog = page.getByRole('dialog', {
        name: `Redeliver ${left} dead event${left === 1 ? '' : 's'}?`,
      });
      await dialog
        .getByRole('button', {
          name: `Redeliver ${left} event${left === 1 ? '' : 's'}`,
          exact: true,
        })
        .click();
      await visible(page.getByText(/queued for redelivery/));
    }
    await reloadUntil(
      'no dead letters',
      () => page.getByRole('heading', { name: 'No dead letters' }).count(),
      1,
    );
    await nav('Events').click();
    await reloadUntil(
      'DELIVERED event row',
      () => rowsWith('DELIVERED').count(),
      okCount + failCount,
    );

    // The receiver saw only this watch's events, each signed with the secret the console showed:
    // okCount acknowledged at once, failCount refused six times and acknowledged once redelivered.
    const events = receiver.received.filter((r) => r.headers['x-tronwatch-test'] === undefined);
    expect(new Set(events.map((r) => r.eventId)).size).toBe(okCount + failCount);
    expect(events.every((r) => r.verified && r.event?.to === watched)).toBe(true);
    expect(events.length).toBe(okCount + failCount * 7);

    // The proof filter (issue 26): each level lists exactly the events delivered at that level.
    const atLevel = (level: string) =>
      new Set(events.filter((r) => r.event?.proof === level).map((r) => r.eventId)).size;
    expect(atLevel('signed')).toBeGreaterThan(0);
    for (const level of ['signed', 'provider'] as const) {
      await page.getByLabel('Proof').selectOption(level);
      await page.getByRole('button', { name: 'Apply filters' }).click();
      await expect.poll(() => new URL(page.url()).searchParams.get('proof')).toBe(level);
      await reloadUntil(`${level} rows`, () => rowsWith('DELIVERED').count(), atLevel(level));
      if (level === 'signed') await shot(page, 'events-proof-signed');
    }
    await page.getByLabel('Proof').selectOption('');
    await page.getByRole('button', { name: 'Apply filters' }).click();
    await reloadUntil('all rows again', () => rowsWith('DELIVERED').count(), okCount + failCount);

    // Overview: counts, quota, chain.
    await nav('Overview').click();
    await visible(page.getByRole('heading', { name: /^Chain/ }));
    await shot(page, 'overview');
  }, 240_000);

  it('changes the password, signs out, and signs back in where it was going', async () => {
    await page.goto(`${base}/console/security`);
    await visible(page.getByRole('cell', { name: /This session/ }));
    await page.getByLabel('Current password').fill('not the password');
    await page.getByLabel('New password', { exact: true }).fill(NEW_PASSWORD);
    await page.getByLabel('Repeat the new password').fill(NEW_PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await visible(page.getByText('The current password is wrong.'));
    await page.getByLabel('Current password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Change password' }).click();
    await visible(page.getByText(/^Password changed/));
    await shot(page, 'security');

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
    await visible(page.getByText('/v1/watches').first(), 30_000);
    await shot(page, 'api-docs');
  });
});
