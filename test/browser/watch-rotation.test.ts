/**
 * Rotating a webhook watch's secret in the console, checked at a real HTTPS receiver (issue 19
 * item 3 and its "Done when": "rotation with both secrets verified by a receiver"), in Debian's
 * headless Chromium at 1440 and 390 px.
 *
 * A watch is created in the console to a local HTTPS receiver and its first secret read from the
 * page; the secret is rotated with the console's button (1 hour of grace), the new one read from
 * the page that shows it once; a test event sent with the console's "Send test event" button
 * reaches the receiver, which verifies it with the `standardwebhooks` library under the old
 * secret AND under the new one, and checks `X-Signature` (HMAC of the body under the new secret)
 * and `X-Signature-Previous` (under the old), as docs/integrating.md's snippets do. The grace period is then
 * ended early in the console, and the next test event verifies only with the new secret (no
 * `X-Signature-Previous`, one `webhook-signature` entry). The rotation form and the new-secret
 * panel are photographed at both widths, with no sideways scrolling at 390 px.
 *
 * The service runs the api role only, on a stored chain head: a test send is made by the API
 * process itself, signed like a delivery (src/delivery/test-event.ts); on PostgreSQL when
 * DATABASE_URL is set, else PGlite.
 * watch-ops.test.ts checks a worker's deliveries (events as ingest stores them) across a rotation.
 */
import type { Browser, Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  type ReceivedRequest,
  type Receiver,
  startReceiver,
  verifySignature,
} from '../../src/devnet/receiver.js';
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
const ADDRESS = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };

/** The Standard Webhooks headers of a request, as the library reads them. */
const std = (r: ReceivedRequest) => ({
  'webhook-id': String(r.headers['webhook-id']),
  'webhook-timestamp': String(r.headers['webhook-timestamp']),
  'webhook-signature': String(r.headers['webhook-signature']),
});

/** True when `secret` verifies `r` with the standardwebhooks library (which throws otherwise). */
const stdVerifies = (secret: string, r: ReceivedRequest): boolean => {
  try {
    new Webhook(secret).verify(r.body.toString('utf8'), std(r));
    return true;
  } catch {
    return false;
  }
};

describe.skipIf(!READY)('rotating a secret in a browser, verified by a receiver', () => {
  let receiver: Receiver;
  let service: ConsoleService;
  let browser: Browser;
  let page: Page;

  beforeAll(async () => {
    // The receiver records everything and answers 200: the checks are this test's.
    receiver = await startReceiver({ respond: () => 200 });
    service = await startConsoleService({
      roles: ['api'],
      caPem: receiver.ca,
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    });
    // A stored chain head (a new watch starts after it); no chain is needed for test sends.
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 80_000_000, head: 80_000_018 });
    browser = await launchBrowser();
    page = await browser.newPage({ viewport: DESKTOP });
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await receiver?.close();
  });

  /**
   * No horizontal scrolling of the page, once the layout has followed a resize (the health
   * chart redraws at the new width on its ResizeObserver's next callback).
   */
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

  /** Press "Send test event" on the Watches page; the request the receiver got for it. */
  const testSend = async (): Promise<ReceivedRequest> => {
    const before = receiver.received.length;
    await page.goto(`${service.base}/console/watches`);
    await page.getByRole('button', { name: `Send test event to ${ADDRESS}` }).click();
    await visible(page.getByText(/^Test event delivered: HTTP 200/));
    expect(receiver.received.length).toBe(before + 1);
    const r = receiver.received[before] as ReceivedRequest;
    expect(r.headers['x-tronwatch-test']).toBe('1');
    return r;
  };

  const openWatch = async () => {
    await page.goto(`${service.base}/console/watches`);
    await page.getByRole('link', { name: 'Rotation shop', exact: true }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'Rotation shop' }));
  };

  it('signs with both secrets during the grace period, and only the new one once it is ended', async () => {
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill('rotate@secrets.example');
    await page.getByLabel('Password').fill('correct horse battery staple');
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // A webhook watch to the receiver; its first secret, shown once.
    await page.goto(`${service.base}/console/watches`);
    await page.getByRole('button', { name: 'New watch' }).click();
    await page.getByLabel('TRON address').fill(ADDRESS);
    await page.getByLabel('Webhook URL').fill(receiver.url);
    await page.getByLabel('Label (optional)').fill('Rotation shop');
    await page.getByRole('button', { name: 'Create watch' }).click();
    const created = page.getByRole('region', { name: 'Webhook signing secret' });
    await visible(created.getByText(/^whsec_/));
    const first = (await created.getByText(/^whsec_/).textContent())?.trim() ?? '';
    expect(first).toMatch(/^whsec_/);
    await page.getByRole('button', { name: 'I have saved it' }).click();

    // Before any rotation: one secret signs.
    const plain = await testSend();
    expect(stdVerifies(first, plain)).toBe(true);
    expect(plain.headers['x-signature-previous']).toBeUndefined();

    // The rotation form, at both widths.
    await openWatch();
    const form = page.getByRole('form', { name: 'Signing secret' });
    await visible(form);
    await visible(form.getByText('The secret given at creation.'));
    // Its activation (issue 36 item 4): the block after which it matches transfers.
    const { rows: activeFrom } = await service.svc.db.query<{ n: string }>(
      'SELECT active_from_block AS n FROM watches ORDER BY created_at DESC LIMIT 1',
    );
    await visible(
      page.getByText(
        `transfers in blocks after ${Number(activeFrom[0]?.n).toLocaleString('en-US')} (the chain head when created or last resumed)`,
      ),
    );
    await form.getByLabel('Grace period').selectOption({ label: '1 hour' });
    await shot(page, 'rotate-form-1440', form);
    await page.setViewportSize(PHONE);
    await noSideways();
    await shot(page, 'rotate-form-390', form);
    await page.setViewportSize(DESKTOP);

    // Rotate: the new secret, shown once.
    await form.getByRole('button', { name: 'Rotate secret' }).click();
    const rotated = page.getByRole('region', { name: 'New webhook signing secret' });
    await visible(rotated.getByText(/^whsec_/));
    const second = (await rotated.getByText(/^whsec_/).textContent())?.trim() ?? '';
    expect(second).toMatch(/^whsec_/);
    expect(second).not.toBe(first);
    await visible(rotated.getByText(/X-Signature-Previous/));
    await shot(page, 'rotate-new-secret-1440', rotated);
    await page.setViewportSize(PHONE);
    await noSideways();
    await shot(page, 'rotate-new-secret-390', rotated);
    await page.setViewportSize(DESKTOP);
    await page.getByRole('button', { name: 'I have saved it' }).click();
    await visible(page.getByText(/Both the new and the previous secret sign every delivery/));
    // Shown once: a reload does not show it again.
    await page.reload();
    await visible(page.getByRole('heading', { name: 'Signing secret' }));
    expect(await page.getByText(second).count()).toBe(0);

    // During the grace period: the receiver verifies with the old secret and with the new one.
    const during = await testSend();
    expect(stdVerifies(first, during)).toBe(true);
    expect(stdVerifies(second, during)).toBe(true);
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    // X-Signature under the new secret, X-Signature-Previous under the old (docs/integrating.md's snippet).
    expect(verifySignature(second, during.body, during.headers['x-signature'])).toBe(true);
    expect(verifySignature(first, during.body, during.headers['x-signature-previous'])).toBe(true);
    expect(verifySignature(first, during.body, during.headers['x-signature'])).toBe(false);
    expect(verifySignature(second, during.body, during.headers['x-signature-previous'])).toBe(
      false,
    );
    // A secret that never was this watch's verifies nothing.
    expect(stdVerifies(`whsec_${Buffer.alloc(24, 7).toString('base64')}`, during)).toBe(false);

    // End the grace period early, in the console.
    await openWatch();
    await visible(page.getByText(/Both the new and the previous secret sign every delivery/));
    await shot(page, 'rotate-grace-1440', page.getByRole('form', { name: 'Signing secret' }));
    await page.getByRole('button', { name: 'End grace period now' }).click();
    await page
      .getByRole('dialog', { name: 'End the grace period now?' })
      .getByRole('button', { name: 'End grace period', exact: true })
      .click();
    await visible(page.getByText('Grace period ended: only the new secret signs deliveries now.'));
    await visible(page.getByText(/^Last rotated/));

    // From now on only the new secret signs.
    const after = await testSend();
    expect(stdVerifies(second, after)).toBe(true);
    expect(stdVerifies(first, after)).toBe(false);
    expect(after.headers['x-signature-previous']).toBeUndefined();
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(verifySignature(second, after.body, after.headers['x-signature'])).toBe(true);
    expect(verifySignature(first, after.body, after.headers['x-signature'])).toBe(false);
  }, 300_000);
});
