/**
 * An endpoint's page and the places that point at it (issue 40 items 1, 2, 3), in Debian's
 * headless Chromium at 1440 and 390 px:
 * - the page: URL, state, pace, success rate with its chart, its newest attempts and events, its
 *   watches; Send test event (a real signed POST to a local HTTPS receiver), the label and pace
 *   edited in place, Replay failed deliveries since a time (twice: replayed once), switch off;
 * - a watch on the endpoint: "Delivers to" names and links the endpoint (the Watches list too),
 *   no Webhook URL field and no Rotate secret on its page;
 * - one banner per failing endpoint naming it with its watch count and linking its page (its 2
 *   watches add no banner of their own); on a phone two alerts fold into one line.
 * No sideways scrolling at 390 px. The service runs the api role (no worker: replayed deliveries
 * stay queued, so the counts are exact); events and attempts are inserted as the ingester and
 * the worker write them.
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
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };

describe.skipIf(!READY)("an endpoint's page in a browser", () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;
  let tests = 0;

  beforeAll(async () => {
    receiver = await startReceiver({
      respond: (req) => {
        if (req.headers['x-tronwatch-test'] === '1') tests += 1;
        return 200;
      },
    });
    service = await startConsoleService({
      roles: ['api'],
      caPem: receiver.ca,
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    });
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 80_000_000, head: 80_000_018 });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: DESKTOP });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
  });

  const noSideways = async () => {
    await expect
      .poll(async () => {
        const [scroll, client] = (await page.evaluate(
          '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
        )) as [number, number];
        return scroll - client;
      })
      .toBeLessThanOrEqual(0);
  };

  const bothWidths = async (name: string) => {
    await shot(page, `${name}-1440`);
    await page.setViewportSize(PHONE);
    await noSideways();
    await shot(page, `${name}-390`);
    await page.setViewportSize(DESKTOP);
  };

  it('shows and operates an endpoint, names it on its watches, and gives it one banner', async () => {
    const db = service.svc.db;
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill('gateway@endpoint-page.example');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // An endpoint with a token in its query string, and two watches on it from CSV lines.
    await page.goto(`${service.base}/console/endpoints`);
    await page.getByLabel('URL').fill(`${receiver.url}?token=s3cr3t`);
    await page.getByLabel('Label (optional)').fill('Deposits EU');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await page
      .getByLabel('Or paste the lines')
      .fill(
        [
          'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t,USDT,incoming,invoice-1',
          'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7,USDT,incoming,invoice-2',
        ].join('\n'),
      );
    await page.getByRole('button', { name: 'Preview' }).click();
    await page.getByRole('button', { name: 'Create 2 watches' }).click();
    await visible(page.getByText('2 watches created.'));
    const { rows: ids } = await db.query<{ endpoint_id: string; watch_id: string }>(
      'SELECT endpoint_id, id AS watch_id FROM watches ORDER BY label',
    );
    const endpointId = ids[0]?.endpoint_id ?? '';

    // What the worker and the ingester would have written: two events whose deliveries went
    // DEAD (six failed attempts each, 503) an hour ago, and a delivered one (HTTP 200).
    await db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                           event_index, block_number, block_timestamp, from_address, to_address,
                           amount_raw, contract, created_at)
       SELECT 'evt_pg_' || i, w.account_id, w.id, 'mainnet', 'incoming', 'USDT',
              md5('pg' || i) || md5(i || 'pg'), 0, 79072107, now() - interval '40 minutes',
              'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000 * i,
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
              now() - interval '40 minutes' + i * interval '1 second'
         FROM watches w, generate_series(1, 3) AS i WHERE w.label = 'invoice-' || (1 + i % 2)`,
    );
    await db.query(
      `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                  next_attempt_at, created_at, network)
       SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook',
              CASE WHEN id = 'evt_pg_3' THEN 'DELIVERED' ELSE 'DEAD' END,
              CASE WHEN id = 'evt_pg_3' THEN 1 ELSE 6 END, created_at, created_at, network
         FROM events`,
    );
    await db.query(
      `INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error,
                             error_class, watch_id, endpoint_id)
       SELECT n.id, a, n.created_at + a * interval '1 minute', 120 + a, 503,
              'HTTP 503 Service Unavailable', 'http', n.watch_id, $1
         FROM notifications n, generate_series(1, 6) AS a WHERE n.status = 'DEAD'
       UNION ALL
       SELECT n.id, 1, n.created_at + interval '10 seconds', 85, 200, NULL, NULL, n.watch_id, $1
         FROM notifications n WHERE n.status = 'DELIVERED'`,
      [endpointId],
    );
    await db.query(
      `UPDATE endpoints SET consecutive_failures = 12, failing_since = now() - interval '39 minutes',
              last_failure_at = now() - interval '30 minutes', alert_state = 'failing',
              alert_since = now() - interval '35 minutes',
              alert_reason = '5 delivery attempts in a row failed'`,
    );
    // Its watches have their own streak too: they add no banner of their own.
    await db.query(
      `UPDATE watches SET alert_state = 'failing', alert_since = now() - interval '35 minutes',
              alert_reason = '5 delivery attempts in a row failed', consecutive_failures = 6`,
    );

    // The list links the endpoint's page; the banner names the endpoint once, with its watches.
    await page.reload();
    const banner = page.getByRole('region', { name: 'Delivery alerts' });
    await visible(banner.getByText('Endpoint failing:'));
    await visible(banner.getByRole('link', { name: 'Deposits EU' }));
    await visible(banner.getByText(/\(2 watches\)/));
    expect(await banner.getByText('Deliveries failing:').count()).toBe(0);
    await page.getByRole('link', { name: 'Open endpoint Deposits EU' }).click();

    // The page.
    await visible(page.getByRole('heading', { level: 1, name: 'Deposits EU' }));
    await visible(page.getByText(`${receiver.url}?token=s3cr3t`).first());
    await visible(page.getByText(/Deliveries are failing/));
    const attempts = page.getByRole('table', { name: 'Newest attempts' });
    await visible(attempts);
    expect(await attempts.getByText('HTTP 503', { exact: true }).count()).toBe(12);
    expect(await attempts.getByText('HTTP 200', { exact: true }).count()).toBe(1);
    await visible(page.getByRole('article', { name: 'Success rate' }).getByText('1 of 13').first());
    await visible(page.getByTestId('health-chart').locator('canvas'));
    const events = page.getByRole('region', { name: 'Events' });
    await visible(events.getByText('DEAD').first());
    await visible(page.getByRole('link', { name: 'All its events' }));
    await visible(
      page.getByRole('region', { name: 'Watches on this endpoint' }).getByRole('link', {
        name: 'invoice-1',
      }),
    );
    await bothWidths('endpoint-page');

    // Send test event: a signed POST reaches the receiver.
    await page.getByRole('button', { name: 'Send test event' }).click();
    await visible(page.getByText(/Test event delivered: HTTP 200/));
    expect(tests).toBe(1);

    // Edited in place.
    const edit = page.getByRole('form', { name: 'Edit' });
    await edit.getByLabel('Label').fill('Deposits EU (primary)');
    await edit.getByLabel('Deliveries per second').fill('20');
    await edit.getByRole('button', { name: 'Save' }).click();
    await visible(page.getByText('Endpoint saved.'));
    await visible(page.getByRole('heading', { level: 1, name: 'Deposits EU (primary)' }));
    const { rows: saved } = await db.query<{ label: string; rate_limit_per_second: number }>(
      'SELECT label, rate_limit_per_second FROM endpoints',
    );
    expect(saved).toEqual([{ label: 'Deposits EU (primary)', rate_limit_per_second: 20 }]);

    // Replay the failed deliveries since an hour ago (the form's default): two; the same
    // request again replays none.
    await page.getByRole('button', { name: 'Replay failed deliveries' }).click();
    await visible(page.getByText('2 failed deliveries queued again.'));
    await page.getByRole('button', { name: 'Replay failed deliveries' }).click();
    await visible(page.getByText(/Already replayed from this time/));
    const { rows: pending } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM notifications WHERE status = 'PENDING'`,
    );
    expect(pending[0]?.n).toBe(2);

    // Switch off.
    await page.getByRole('button', { name: 'Switch off' }).click();
    await visible(page.getByText(/Switched off: its deliveries wait/));
    await visible(page.getByText('PAUSED', { exact: true }));

    // A watch on it names it and links its page; no URL field and no rotation of its own.
    await page.goto(`${service.base}/console/watches`);
    await visible(page.getByRole('link', { name: 'Deposits EU (primary)' }).first());
    expect(await page.getByText(endpointId).count()).toBe(0);
    await page.getByRole('link', { name: 'invoice-1' }).first().click();
    await visible(page.getByRole('heading', { level: 1, name: 'invoice-1' }));
    // "Delivers to" (a definition of the facts list; the banner names it too).
    const deliversTo = page
      .getByRole('definition')
      .getByRole('link', { name: 'Deposits EU (primary)' });
    await visible(deliversTo);
    await visible(page.getByText(/signed with the endpoint's secret/));
    expect(await page.getByLabel('Webhook URL').count()).toBe(0);
    expect(await page.getByRole('button', { name: 'Rotate secret' }).count()).toBe(0);
    await bothWidths('watch-on-endpoint');
    await deliversTo.click();
    await visible(page.getByRole('heading', { level: 1, name: 'Deposits EU (primary)' }));

    // A second failing endpoint: two banners on a desktop, one line on a phone.
    await db.query(
      `INSERT INTO endpoints (id, account_id, network, url, label, secret_key_id,
                              secret_ciphertext, alert_state, alert_since, alert_reason,
                              consecutive_failures)
       SELECT 'ep_01jzzzzzzzzzzzzzzzzzzzzzzz', account_id, network, url, 'Refunds', secret_key_id,
              secret_ciphertext, 'failing', now(), 'a delivery went DEAD', 6
         FROM endpoints LIMIT 1`,
    );
    await page.reload();
    await visible(banner.getByRole('link', { name: 'Refunds' }));
    expect(await banner.getByText(/^Endpoint failing:/).count()).toBe(2);
    await page.setViewportSize(PHONE);
    await visible(banner.getByText('2 delivery alerts:'));
    expect(await banner.getByRole('link').count()).toBe(0);
    await noSideways();
    await shot(page, 'endpoint-banner-folded-390');
    await banner.getByRole('button', { name: 'Show' }).click();
    await visible(banner.getByRole('link', { name: 'Refunds' }));
    await page.setViewportSize(DESKTOP);
  }, 180_000);
});
