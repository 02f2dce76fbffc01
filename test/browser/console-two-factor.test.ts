/**
 * Two-factor sign-in in a real browser (issue 18 items 4 and 6), on the service as deployed (api
 * role; PostgreSQL when DATABASE_URL is set): the Security page enrols (password, QR code, the
 * key as text, a code computed here from that key with otpauth, ten recovery codes shown once);
 * signing out and in asks for the code after the password; a wrong code says how many tries are
 * left; a recovery code signs in; an owner requires it of every member, and a member without one
 * reaches only the Security page until they set it up; the owner sees it on the Members page and
 * turns it off for a lost device. Desktop (1440 px) and phone (390 px, no
 * sideways scrolling) screenshots into test-output/screenshots/.
 */
import { Secret, TOTP } from 'otpauth';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setPasswordHash } from '../../src/accounts/credentials.js';
import { createUser } from '../../src/accounts/users.js';
import { hashPassword } from '../../src/console/passwords.js';
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

/** The code an authenticator app shows `offsetSteps` 30-second steps from now. */
const codeOf = (key: string, offsetSteps = 0) =>
  TOTP.generate({ secret: Secret.fromBase32(key), timestamp: Date.now() + offsetSteps * 30_000 });

const nav = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

async function noSidewaysScroll(page: Page, where: string): Promise<void> {
  const { sw, cw } = (await page.evaluate(
    '({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth })',
  )) as { sw: number; cw: number };
  if (sw > cw) {
    // What overflows: the widest elements, and a picture of it.
    const wide = await page.evaluate(`[...document.querySelectorAll('body *')]
      .filter((e) => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
      .slice(0, 5).map((e) => e.tagName + '.' + e.className + ' ' + Math.round(e.getBoundingClientRect().right))`);
    await shot(page, `overflow-${where.replace(/\W+/g, '-')}`);
    expect.fail(`${where}: page ${sw} px wide on a ${cw} px screen: ${JSON.stringify(wide)}`);
  }
}

async function signIn(page: Page, base: string, email: string): Promise<void> {
  await page.goto(`${base}/console/login`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Sign in' }).click();
}

async function signOut(page: Page): Promise<void> {
  const menu = page.getByRole('button', { name: 'Menu' });
  if (await menu.isVisible()) await menu.click();
  await page.getByRole('button', { name: 'Sign out' }).first().click();
  await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
}

describe.skipIf(!READY)('two-factor sign-in in a browser', () => {
  let service: ConsoleService;
  let browser: Browser;

  beforeAll(async () => {
    service = await startConsoleService({ roles: ['api'] });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  it('enrols on the Security page, signs out, and signs in with a computed code and with a recovery code', async () => {
    const context = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (m) => {
      if (m.type() === 'error') errors.push(m.text());
    });
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill('owner@acme-pay.example');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    await nav(page, 'Security').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Security' }));
    await visible(page.getByRole('heading', { name: 'Two-factor sign-in' }));
    await page.getByLabel('Your password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const qr = page.getByRole('img', { name: /QR code/ });
    await visible(qr);
    // The QR code is an image that loaded (an SVG of the otpauth URI).
    expect(
      await qr.evaluate((i) => (i as unknown as { naturalWidth: number }).naturalWidth),
    ).toBeGreaterThan(0);
    const key = ((await page.getByTestId('totp-secret').textContent()) ?? '').replace(/\s+/g, '');
    expect(key).toMatch(/^[A-Z2-7]{32}$/);
    await shot(page, 'security-enrol');

    // A wrong code first: said in plain words, nothing turned on.
    await page.getByLabel('The 6-digit code the app shows').fill('12345');
    await page.getByRole('button', { name: 'Turn on' }).click();
    await visible(page.getByText('The code has 6 digits'));
    await page.getByLabel('The 6-digit code the app shows').fill(codeOf(key));
    await page.getByRole('button', { name: 'Turn on' }).click();
    await visible(page.getByRole('heading', { name: /Two-factor sign-in is on/ }));
    await visible(page.getByText('ON', { exact: true }));
    const codes = (await page.getByTestId('recovery-codes').locator('code').allTextContents()).map(
      (c) => c.trim(),
    );
    expect(codes).toHaveLength(10);
    for (const c of codes) expect(c).toMatch(/^[a-z2-7]{5}-[a-z2-7]{5}$/);
    await visible(page.getByRole('link', { name: 'Download' }));
    await shot(page, 'security-recovery-codes');
    await page.getByRole('button', { name: 'I have saved them' }).click();
    await visible(page.getByText('10 of 10'));
    await shot(page, 'security-on');

    // Sign out; the password alone no longer signs in.
    await signOut(page);
    await signIn(page, service.base, 'owner@acme-pay.example');
    await visible(page.getByRole('heading', { name: 'Two-factor authentication' }));
    expect((await context.cookies()).some((c) => c.name === 'tw_session')).toBe(false);
    await shot(page, 'sign-in-code-step');
    // The enrolment used this step's code; the app's next one signs in.
    await page.getByLabel('Authentication code').fill(codeOf(key, 1));
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));

    // Again, with a wrong code and then a recovery code.
    await signOut(page);
    await signIn(page, service.base, 'owner@acme-pay.example');
    await visible(page.getByRole('heading', { name: 'Two-factor authentication' }));
    const wrong = codeOf(key) === '000000' ? '000001' : '000000';
    await page.getByLabel('Authentication code').fill(wrong);
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await visible(
      page.getByText('That code is wrong. 4 tries left before you must sign in again.'),
    );
    await page.getByRole('button', { name: 'Use a recovery code instead' }).click();
    await page.getByLabel('Recovery code').fill(codes[0] as string);
    await page.getByRole('button', { name: 'Verify and sign in' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    await nav(page, 'Security').click();
    await visible(page.getByText('9 of 10'));
    // No error in the browser's console but the refused code's 401.
    expect(errors.filter((e) => !/401/.test(e))).toEqual([]);
    await context.close();
  });

  it('an owner requires it; a member without one reaches only the Security page until set up (390 px)', async () => {
    const owner = await browser.newContext({ viewport: { width: 1440, height: 1000 } });
    const op = await owner.newPage();
    await op.goto(`${service.base}/console/signup`);
    await op.getByLabel('E-mail').fill('boss@acme-pay.example');
    await op.getByLabel('Password').fill(PASSWORD);
    await op.getByRole('button', { name: 'Create account' }).click();
    await visible(op.getByRole('heading', { name: 'Overview' }));
    await nav(op, 'Security').click();
    await visible(op.getByText('Turn on your own two-factor sign-in first.'));
    await op.getByLabel('Your password').fill(PASSWORD);
    await op.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const key = ((await op.getByTestId('totp-secret').textContent()) ?? '').replace(/\s+/g, '');
    await op.getByLabel('The 6-digit code the app shows').fill(codeOf(key));
    await op.getByRole('button', { name: 'Turn on' }).click();
    await op.getByRole('button', { name: 'I have saved them' }).click();
    await op.getByRole('button', { name: 'Require it of every member' }).click();
    await op.getByRole('dialog').getByRole('button', { name: 'Require it' }).click();
    await visible(op.getByText('Every member now needs two-factor sign-in.'));
    await shot(op, 'security-required');

    // A developer of the account (made directly: the invitation flow has its own tests).
    const { rows } = await service.svc.db.query<{ id: string }>(
      "SELECT account_id AS id FROM console_users WHERE email = 'boss@acme-pay.example'",
    );
    const dev = await createUser(service.svc.db, {
      accountId: rows[0]?.id as string,
      email: 'dev@acme-pay.example',
      role: 'developer',
    });
    await setPasswordHash(service.svc.db, dev.id, await hashPassword(PASSWORD));

    const phone = await browser.newContext({ viewport: { width: 390, height: 844 } });
    const pp = await phone.newPage();
    await signIn(pp, service.base, 'dev@acme-pay.example');
    await visible(pp.getByRole('heading', { level: 1, name: 'Security' }));
    await visible(pp.getByText('An owner of this account requires two-factor sign-in'));
    // Any other page shows the same until the set-up is done.
    await pp.goto(`${service.base}/console/keys`);
    await visible(pp.getByRole('heading', { level: 1, name: 'Security' }));
    await noSidewaysScroll(pp, 'security (required) at 390 px');
    await shot(pp, 'security-required-member-390');
    await pp.getByLabel('Your password').fill(PASSWORD);
    await pp.getByRole('button', { name: 'Set up two-factor sign-in' }).click();
    const devKey = ((await pp.getByTestId('totp-secret').textContent()) ?? '').replace(/\s+/g, '');
    await noSidewaysScroll(pp, 'enrolment at 390 px');
    await shot(pp, 'security-enrol-390');
    await pp.getByLabel('The 6-digit code the app shows').fill(codeOf(devKey));
    await pp.getByRole('button', { name: 'Turn on' }).click();
    await visible(pp.getByRole('heading', { name: /Two-factor sign-in is on/ }));
    await noSidewaysScroll(pp, 'recovery codes at 390 px');
    await shot(pp, 'security-recovery-codes-390');
    await pp.getByRole('button', { name: 'I have saved them' }).click();
    // Now the rest of the console answers.
    await pp.goto(`${service.base}/console/keys`);
    await visible(pp.getByRole('heading', { level: 1, name: 'API keys' }));
    await signOut(pp);
    await signIn(pp, service.base, 'dev@acme-pay.example');
    await visible(pp.getByRole('heading', { name: 'Two-factor authentication' }));
    await noSidewaysScroll(pp, 'code step at 390 px');
    await shot(pp, 'sign-in-code-step-390');
    await pp.getByLabel('Authentication code').fill(codeOf(devKey, 1));
    await pp.getByRole('button', { name: 'Verify and sign in' }).click();
    await visible(pp.getByRole('heading', { name: 'Overview' }));

    // The owner sees who has it on the Members page, and turns the developer's off (a lost
    // phone): the developer must set up a new device before anything else.
    await nav(op, 'Members').click();
    const devRow = op.getByRole('row').filter({ hasText: 'dev@acme-pay.example' });
    await visible(devRow.getByText('ON', { exact: true }).first());
    await devRow
      .getByRole('button', { name: 'Turn off two-factor sign-in of dev@acme-pay.example' })
      .click();
    await op.getByRole('dialog').getByRole('button', { name: 'Turn it off' }).click();
    await visible(op.getByText('Two-factor sign-in of dev@acme-pay.example is off'));
    await shot(op, 'members-two-factor-reset');
    await pp.goto(`${service.base}/console/keys`);
    await visible(pp.getByRole('heading', { level: 1, name: 'Security' }));
    await visible(pp.getByRole('button', { name: 'Set up two-factor sign-in' }));
    await owner.close();
    await phone.close();
  });
});
