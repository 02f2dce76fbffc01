/**
 * The console's Endpoints page (issue 30 item 4), in Debian's headless Chromium at 1440 and 390 px:
 * create an endpoint (its secret shown once), import watches onto it from CSV lines with a preview
 * of what will be created and what is skipped, see its watches, pause and resume it, rotate its
 * secret, and be refused its deletion while watches target it. Screenshots of the list, the
 * preview and the results at both widths, with no sideways scrolling at 390 px.
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

describe.skipIf(!READY)('the Endpoints page in a browser', () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    receiver = await startReceiver({ respond: () => 200 });
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

  const bothWidths = async (name: string, from?: Parameters<typeof shot>[2]) => {
    await shot(page, `${name}-1440`, from);
    await page.setViewportSize(PHONE);
    await noSideways();
    await shot(page, `${name}-390`, from);
    await page.setViewportSize(DESKTOP);
  };

  it('creates an endpoint, imports watches onto it from CSV with a preview, pauses and rotates it', async () => {
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill('gateway@endpoints.example');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    await page.getByRole('link', { name: 'Endpoints' }).first().click();
    await visible(page.getByRole('heading', { level: 1, name: 'Endpoints' }));
    await visible(page.getByText('No endpoints yet'));
    await page.getByLabel('URL').fill(receiver.url);
    await page.getByLabel('Label (optional)').fill('Deposits EU');
    await page.getByLabel('Deliveries per second (optional)').fill('50');
    await page.getByLabel('At once (optional)').fill('8');
    await page.getByRole('button', { name: 'Create endpoint' }).click();
    const secret = page.getByText(/^whsec_/);
    await visible(secret);
    const first = (await secret.textContent())?.trim() ?? '';
    expect(first).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByRole('cell', { name: /Deposits EU/ }));
    await visible(page.getByText('50/s, 8 at once'));
    // Shown once: a reload shows no secret.
    await page.reload();
    await visible(page.getByRole('cell', { name: /Deposits EU/ }));
    expect(await page.getByText(first).count()).toBe(0);

    // CSV import: two valid lines and one that is not an address; a preview before anything.
    await page
      .getByLabel('Or paste the lines')
      .fill(
        [
          'address,asset_filter,direction,label',
          'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t,USDT,incoming,invoice-1',
          'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7,ALL,both,invoice-2',
          'Tnot-an-address,USDT,incoming,invoice-3',
        ].join('\n'),
      );
    await page.getByRole('button', { name: 'Preview' }).click();
    const preview = page.getByRole('table', { name: 'Preview' });
    await visible(preview);
    await visible(page.getByText(/2 watches will be created on/));
    await visible(page.getByText(/1 line will be skipped/));
    await visible(preview.getByText('skipped: not a TRON address'));
    // Nothing was created by the preview.
    const { rows: none } = await service.svc.db.query('SELECT 1 FROM watches');
    expect(none).toEqual([]);
    await bothWidths(
      'endpoints-csv-preview',
      page.getByRole('form', { name: 'Import watches from CSV' }),
    );
    await page.getByRole('button', { name: 'Create 2 watches' }).click();
    await visible(page.getByText('2 watches created.'));
    expect(await preview.getByText('created', { exact: true }).count()).toBe(2);
    const { rows: made } = await service.svc.db.query<{ endpoint_id: string; label: string }>(
      'SELECT endpoint_id, label FROM watches ORDER BY label',
    );
    expect(made.map((r) => r.label)).toEqual(['invoice-1', 'invoice-2']);
    expect(new Set(made.map((r) => r.endpoint_id)).size).toBe(1);

    // Its watches.
    await page.getByRole('button', { name: '2 watches' }).click();
    const list = page.getByRole('region', { name: 'Watches on this endpoint' });
    await visible(list.getByRole('link', { name: 'invoice-1' }));
    await bothWidths('endpoints-list');

    // Pause and resume.
    await page.getByRole('button', { name: 'Pause Deposits EU' }).click();
    await visible(page.getByText(/Deposits EU is paused/));
    await visible(page.getByText('PAUSED', { exact: true }));
    await page.getByRole('button', { name: 'Resume Deposits EU' }).click();
    await visible(page.getByText(/Deposits EU is resumed/));

    // Rotate: a new secret, shown once; the old one still signs for the grace period.
    await page.getByRole('button', { name: 'Rotate the secret of Deposits EU' }).click();
    await visible(page.getByText(/^whsec_/));
    const second = (await page.getByText(/^whsec_/).textContent())?.trim() ?? '';
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(first);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByText(/old secret signs until/));

    // The watch form offers the endpoint as a target.
    await page.goto(`${service.base}/console/watches`);
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill('TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7');
    await page.getByRole('radio', { name: 'An endpoint' }).check();
    await page.getByLabel('Endpoint', { exact: true }).selectOption({ label: 'Deposits EU' });
    await bothWidths('watch-form-endpoint', page.getByRole('form').first());
    await page.getByRole('button', { name: 'Create watch' }).click();
    await visible(
      page.getByText(/Deliveries go to the endpoint, signed with the endpoint's secret/),
    );
    const { rows: three } = await service.svc.db.query<{ n: number }>(
      'SELECT count(DISTINCT endpoint_id)::int AS n FROM watches WHERE endpoint_id IS NOT NULL',
    );
    expect(three[0]?.n).toBe(1);
    await page.goto(`${service.base}/console/endpoints`);
    await visible(page.getByRole('button', { name: '3 watches' }));

    // Deleting it while watches target it is refused, in plain words.
    await page.getByRole('button', { name: 'Delete Deposits EU' }).click();
    await page.getByRole('button', { name: 'Delete endpoint' }).click();
    await visible(page.getByText(/still has watches: delete them or move them/));
    await bothWidths('endpoints-refused-delete');

    // An endpoint whose deliveries fail, switched off by tronwatch: the columns the delivery
    // worker writes (src/endpoints/health.ts, covered by endpoint-operations.test.ts), shown.
    await service.svc.db.query(
      `UPDATE endpoints SET consecutive_failures = 7, failing_since = now() - interval '2 hours',
              last_failure_at = now(), alert_state = 'failing',
              alert_since = now() - interval '1 hour', alert_reason = '7 delivery attempts in a row failed',
              enabled = false, auto_paused_at = now(),
              paused_reason = 'every delivery attempt since 2026-11-23 failed: switched off automatically'`,
    );
    await page.reload();
    await visible(page.getByRole('cell', { name: /Deposits EU/ }));
    await visible(page.getByText('failing', { exact: true }));
    await visible(page.getByText(/7 failed in a row since/));
    await visible(page.getByText(/Switched off: every delivery attempt since 2026-11-23 failed/));
    await bothWidths('endpoints-failing');
  }, 180_000);
});
