/**
 * Issue 27 in a real browser, on the service as deployed with e-mail on (a real SMTP server in the
 * test process):
 *
 * - The invitation takeover: an owner's admin invites a member, sends the invitation again, the
 *   member joins with the second link (the page says who invited them, to which account, as what)
 *   and is made owner; the admin then opens the first link in their browser and is refused, and the
 *   member's own session stays.
 * - The live stream closing on removal: a developer has the Events page open (the live stream
 *   connected); the owner removes them in another browser; the developer's page says at once that
 *   they were removed and shows the sign-in page, without a reload by hand.
 *
 * Screenshots at 1440 px into test-output/screenshots/.
 */
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  browserTestsReady,
  type ConsoleService,
  launchBrowser,
  shot,
  startConsoleService,
  visible,
} from '../helpers/browser.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

const READY = browserTestsReady();
const PASSWORD = 'correct horse battery staple';
const DESKTOP = { width: 1440, height: 900 };

const nav = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

describe.skipIf(!READY)('the team account against its own members, in a browser', () => {
  let service: ConsoleService;
  let browser: Browser;
  let smtp: TestSmtp;

  beforeAll(async () => {
    smtp = await startSmtp();
    service = await startConsoleService({
      roles: ['api'],
      env: { SMTP_URL: smtp.url, MAIL_FROM: 'tronwatch <no-reply@tronwatch.test>' },
    });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
    await smtp?.close();
  });

  const onService = (link: string | undefined) => {
    const u = new URL(link ?? '');
    return `${service.base}${u.pathname}${u.hash}`;
  };

  async function signUp(page: Page, email: string): Promise<void> {
    await page.goto(`${service.base}/console/signup`);
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Create account' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
  }

  async function invite(page: Page, email: string, role: string): Promise<void> {
    await nav(page, 'Members').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Members' }));
    await page.getByLabel('E-mail').fill(email);
    await page.getByLabel('Role', { exact: true }).selectOption(role);
    await page.getByRole('button', { name: 'Invite', exact: true }).click();
    await visible(page.getByText(`Invitation sent to ${email}`));
  }

  /** Open an invitation link, check what it says, set the password. */
  async function accept(page: Page, link: string | undefined, says: RegExp): Promise<void> {
    await page.goto(onService(link));
    await visible(page.getByRole('heading', { name: 'Set your password' }));
    await visible(page.getByText(says));
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
  }

  it('an old invitation link cannot take over a member who joined and was made owner', async () => {
    const owner = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await signUp(owner, 'owner@takeover.example');
    await invite(owner, 'admin@takeover.example', 'admin');
    const adminMail = await smtp.waitFor('admin@takeover.example', /invitation/);
    const admin = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await accept(admin, adminMail.link, /owner@takeover\.example invited admin@takeover\.example/);

    // The admin invites M, then sends the invitation again.
    await invite(admin, 'm@takeover.example', 'developer');
    const first = await smtp.waitFor('m@takeover.example', /invitation/);
    smtp.received.splice(smtp.received.indexOf(first), 1);
    await admin.getByRole('button', { name: 'Invite again' }).click();
    const second = await smtp.waitFor('m@takeover.example', /invitation/);
    expect(second.link).not.toBe(first.link);

    // M joins with the second link; the page says who, where and as what.
    const m = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await accept(
      m,
      second.link,
      /admin@takeover\.example invited m@takeover\.example to the tronwatch console of owner@takeover\.example, as developer/,
    );
    await shot(m, 'account-security-invited-member-1440');

    // The owner makes M an owner.
    await owner.goto(`${service.base}/console/members`);
    await visible(owner.getByLabel('Role of m@takeover.example'));
    await owner.getByLabel('Role of m@takeover.example').selectOption('owner');
    await visible(owner.getByText('m@takeover.example is now owner.'));

    // The admin opens the first link in a private window: refused, whatever password they choose.
    const attacker = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await attacker.goto(onService(first.link));
    await visible(attacker.getByRole('heading', { name: 'Set your password' }));
    await attacker.getByLabel('New password').fill('the admin picked this one');
    await attacker.getByLabel('Repeat the password').fill('the admin picked this one');
    await attacker.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(
      attacker.getByText('This invitation is invalid, expired or already used. Ask for a new one.'),
    );
    await shot(attacker, 'account-security-old-link-refused-1440');

    // M's session stands; the original owner is still an owner.
    await m.reload();
    await visible(m.getByRole('heading', { name: 'Overview' }));
    const { rows } = await service.svc.db.query<{ email: string; role: string }>(
      "SELECT email, role FROM console_users WHERE email LIKE '%@takeover.example' ORDER BY email",
    );
    expect(rows).toEqual([
      { email: 'admin@takeover.example', role: 'admin' },
      { email: 'm@takeover.example', role: 'owner' },
      { email: 'owner@takeover.example', role: 'owner' },
    ]);
  });

  it("closes a removed member's live stream at once, and the page says why", async () => {
    const owner = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await signUp(owner, 'owner@stream.example');
    await invite(owner, 'dev@stream.example', 'developer');
    const mail = await smtp.waitFor('dev@stream.example', /invitation/);
    const dev = await (await browser.newContext({ viewport: DESKTOP })).newPage();
    await accept(dev, mail.link, /owner@stream\.example invited dev@stream\.example/);
    await nav(dev, 'Events').click();
    await visible(dev.getByRole('heading', { level: 1, name: 'Events' }));
    // The page's live stream is open.
    await visible(dev.getByText('● Live'));

    await owner.goto(`${service.base}/console/members`);
    await owner.getByRole('button', { name: 'Remove dev@stream.example' }).click();
    await owner.getByRole('button', { name: 'Remove member' }).click();
    await visible(owner.getByText('dev@stream.example was removed'));

    // No reload by hand: the stream's end brings the sign-in page with the reason.
    await visible(dev.getByText('You were removed from this account: your sessions ended.'));
    await visible(dev.getByRole('heading', { name: 'Sign in to the console' }));
    await shot(dev, 'account-security-removed-1440');
  });
});
