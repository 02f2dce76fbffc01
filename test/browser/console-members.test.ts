/**
 * Members and password reset in a real browser (issue 18 items 3, 2 and 6), on the service as
 * deployed with e-mail on (a real SMTP server in the test process): an owner invites a developer
 * from the Members page (1440 px); the developer opens the link from the received e-mail on a
 * phone (390 px), sets a password and lands in the console as developer; the owner changes the
 * role; the developer forgets the password, asks for a link on the phone, follows the link from
 * the e-mail on a desktop, and the phone's session is signed out. Alert e-mails (issue 19 item
 * 2): the owner's own switch starts on, the developer's off; the developer turns theirs on from the
 * phone (kept across a reload, shown to the owner as ON, recorded in the audit log). Screenshots
 * of every page at both widths into test-output/screenshots/; no sideways scrolling at 390 px.
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
const NEW_PASSWORD = 'a brand new long passphrase';
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };

/** No horizontal scrolling of the page. */
async function noSideways(page: Page): Promise<void> {
  const [scroll, client] = (await page.evaluate(
    '[document.documentElement.scrollWidth, document.documentElement.clientWidth]',
  )) as [number, number];
  expect(scroll).toBeLessThanOrEqual(client);
}

const nav = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

describe.skipIf(!READY)('members and password reset in a browser', () => {
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

  /** A link from an e-mail, on this test's service (PUBLIC_URL is the default localhost:8080). */
  const onService = (link: string | undefined) => {
    const u = new URL(link ?? '');
    return `${service.base}${u.pathname}${u.hash}`;
  };

  it('invites by e-mail, accepts on a phone, changes the role, and resets a forgotten password', async () => {
    // The owner, on a desktop.
    const ownerCtx = await browser.newContext({ viewport: DESKTOP });
    const owner = await ownerCtx.newPage();
    await owner.goto(`${service.base}/console/signup`);
    await owner.getByLabel('E-mail').fill('owner@acme-pay.example');
    await owner.getByLabel('Password').fill(PASSWORD);
    await owner.getByRole('button', { name: 'Create account' }).click();
    await visible(owner.getByRole('heading', { name: 'Overview' }));
    await nav(owner, 'Members').click();
    await visible(owner.getByRole('heading', { level: 1, name: 'Members' }));
    await owner.getByLabel('E-mail').fill('dev@acme-pay.example');
    await owner.getByLabel('Role', { exact: true }).selectOption('developer');
    await owner.getByRole('button', { name: 'Invite', exact: true }).click();
    await visible(owner.getByText('Invitation sent to dev@acme-pay.example'));
    await visible(owner.getByRole('cell', { name: 'dev@acme-pay.example' }));
    // The owner's own alert e-mails start on; the invited developer's off.
    expect(await owner.getByRole('checkbox', { name: 'Send alerts to me' }).isChecked()).toBe(true);
    expect(await owner.getByRole('checkbox').count()).toBe(1);
    await visible(
      owner.getByRole('row', { name: /dev@acme-pay\.example/ }).getByText('OFF', { exact: true }),
    );
    await shot(owner, 'members-owner-1440');

    // The developer follows the link from the e-mail, on a phone.
    const invite = await smtp.waitFor('dev@acme-pay.example', /invitation/);
    expect(invite.text).toContain('as developer');
    const devCtx = await browser.newContext({ viewport: PHONE });
    const dev = await devCtx.newPage();
    await dev.goto(onService(invite.link));
    await visible(dev.getByRole('heading', { name: 'Set your password' }));
    await dev.getByLabel('New password').fill(PASSWORD);
    await dev.getByLabel('Repeat the password').fill(PASSWORD);
    await dev.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(dev.getByRole('heading', { name: 'Overview' }));
    await dev.goto(`${service.base}/console/members`);
    await visible(dev.getByRole('heading', { level: 1, name: 'Members' }));
    await visible(dev.getByText('dev@acme-pay.example (developer)'));
    // A developer has no invitation form.
    expect(await dev.getByRole('button', { name: 'Invite', exact: true }).count()).toBe(0);
    // Their own alert e-mails: off, turned on here, kept across a reload.
    const alerts = dev.getByRole('checkbox', { name: 'Send alerts to me' });
    expect(await alerts.isChecked()).toBe(false);
    await alerts.check();
    await visible(dev.getByText('Alert e-mails on: you get an e-mail when a watch'));
    await dev.reload();
    await visible(dev.getByRole('checkbox', { name: 'Send alerts to me' }));
    expect(await dev.getByRole('checkbox', { name: 'Send alerts to me' }).isChecked()).toBe(true);
    await visible(
      dev.getByRole('row', { name: /owner@acme-pay\.example/ }).getByText('ON', { exact: true }),
    );
    await noSideways(dev);
    await shot(dev, 'members-developer-390');
    const audit = await service.svc.db.query<{ detail: unknown }>(
      "SELECT detail FROM audit_log WHERE action = 'member.alert_emails_changed'",
    );
    expect(audit.rows).toEqual([{ detail: { alert_emails: true } }]);

    // The owner makes the developer a viewer: refused from the developer's next request.
    await owner.reload();
    await visible(owner.getByLabel('Role of dev@acme-pay.example'));
    await owner.getByLabel('Role of dev@acme-pay.example').selectOption('viewer');
    await visible(owner.getByText('dev@acme-pay.example is now viewer.'));
    await visible(
      owner.getByRole('row', { name: /dev@acme-pay\.example/ }).getByText('ON', { exact: true }),
    );
    await owner.setViewportSize(PHONE);
    await noSideways(owner);
    await shot(owner, 'members-owner-390');
    const devCsrf = decodeURIComponent(
      (await devCtx.cookies()).find((c) => c.name === 'tw_csrf')?.value ?? '',
    );
    const refused = await dev.evaluate(async (csrf) => {
      const res = await fetch('/console/api/keys', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
        body: '{}',
      });
      return { status: res.status, code: ((await res.json()) as { code?: string }).code };
    }, devCsrf);
    expect(refused).toEqual({ status: 403, code: 'insufficient_role' });

    // Forgotten password: asked for on another phone…
    const askCtx = await browser.newContext({ viewport: PHONE });
    const ask = await askCtx.newPage();
    await ask.goto(`${service.base}/console/login`);
    await ask.getByRole('link', { name: 'Forgot your password?' }).click();
    await visible(ask.getByRole('heading', { name: 'Reset your password' }));
    await ask.getByLabel('E-mail').fill('dev@acme-pay.example');
    await shot(ask, 'forgot-390');
    await ask.getByRole('button', { name: 'Send me a link' }).click();
    await visible(ask.getByText('a link to choose a new password is on its way'));
    await shot(ask, 'forgot-sent-390');
    await ask.setViewportSize(DESKTOP);
    await shot(ask, 'forgot-sent-1440');

    // …and the link from the e-mail followed on a desktop.
    const reset = await smtp.waitFor('dev@acme-pay.example', /Reset/);
    const resetCtx = await browser.newContext({ viewport: DESKTOP });
    const r = await resetCtx.newPage();
    await r.goto(onService(reset.link));
    await visible(r.getByRole('heading', { name: 'Choose a new password' }));
    await r.getByLabel('New password').fill(NEW_PASSWORD);
    await r.getByLabel('Repeat the password').fill(NEW_PASSWORD);
    await shot(r, 'reset-1440');
    await r.setViewportSize(PHONE);
    await shot(r, 'reset-390');
    await r.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(r.getByRole('heading', { name: 'Overview' }));
    // The token left the address bar.
    expect(r.url()).not.toContain('token=');

    // The developer's earlier session (the first phone) was signed out.
    await dev.reload();
    await visible(dev.getByRole('heading', { name: 'Sign in to the console' }));
    // The reset link works once.
    const again = await browser.newContext({ viewport: DESKTOP });
    const a = await again.newPage();
    await a.goto(onService(reset.link));
    await a.getByLabel('New password').fill('yet another long passphrase');
    await a.getByLabel('Repeat the password').fill('yet another long passphrase');
    await a.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(a.getByText('This reset link is invalid, expired'));
    for (const c of [ownerCtx, devCtx, askCtx, resetCtx, again]) await c.close();
  });
});
