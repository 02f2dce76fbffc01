/**
 * The console's protections seen from a real browser (issue 12 item 8; SPEC §Authentication,
 * Console), each on the service as deployed (api role, PostgreSQL when DATABASE_URL is set):
 *
 * - CSRF: from the signed-in page's own context, a POST to /console/api/keys without (or with a
 *   wrong) X-CSRF-Token is refused with 403 csrf_mismatch and creates nothing; with the tw_csrf
 *   cookie's value it is 201.
 * - Login limit: five failed sign-ins through the form answer 401; the sixth answers 429
 *   login_rate_limited with Retry-After, and the form says how long to wait; the right password
 *   is refused too while the limit holds.
 * - The same limit on the Security page's password change: five wrong current passwords answer
 *   401, the sixth (the right one too) 429, and the page says how long to wait.
 * - Session lifetime: with CONSOLE_SESSION_TTL_SECONDS=2, once the session has expired the next
 *   API call answers 401 no_session and the app shows the login page, keeping the route.
 *
 * Role- and label-based locators only; screenshots into test-output/screenshots/.
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

const READY = browserTestsReady();
const PASSWORD = 'correct horse battery staple';

/** Sign up through the form; resolves on the Overview page. */
async function signUp(page: Page, base: string, email: string): Promise<void> {
  await page.goto(`${base}/console/signup`);
  await page.getByLabel('E-mail').fill(email);
  await page.getByLabel('Password').fill(PASSWORD);
  await page.getByRole('button', { name: 'Create account' }).click();
  await visible(page.getByRole('heading', { name: 'Overview' }));
}

const nav = (page: Page, name: string) =>
  page.getByRole('navigation', { name: 'Console' }).getByRole('link', { name, exact: true });

describe.skipIf(!READY)('console protections in a browser', () => {
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

  it('refuses a state-changing request without X-CSRF-Token: 403 csrf_mismatch', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signUp(page, service.base, 'csrf@acme-pay.example');
    await nav(page, 'API keys').click();
    await visible(page.getByRole('heading', { level: 1, name: 'API keys' }));

    // The page's own fetch: same origin, its session cookie sent; only the header differs. The
    // token is the tw_csrf cookie the page holds (the app reads it from document.cookie).
    const csrf = decodeURIComponent(
      (await context.cookies()).find((c) => c.name === 'tw_csrf')?.value ?? '',
    );
    const answers = await page.evaluate(async (csrf) => {
      const create = async (name: string, headers: Record<string, string>) => {
        const res = await fetch('/console/api/keys', {
          method: 'POST',
          credentials: 'include',
          headers: { 'Content-Type': 'application/json', Accept: 'application/json', ...headers },
          body: JSON.stringify({ name }),
        });
        return { status: res.status, body: (await res.json()) as { code?: string } };
      };
      return {
        without: await create('no-header', {}),
        wrong: await create('wrong-header', { 'X-CSRF-Token': `${csrf}x` }),
        with: await create('with-header', { 'X-CSRF-Token': csrf }),
      };
    }, csrf);
    expect(csrf).not.toBe('');
    expect(answers.without).toMatchObject({ status: 403, body: { code: 'csrf_mismatch' } });
    expect(answers.wrong).toMatchObject({ status: 403, body: { code: 'csrf_mismatch' } });
    expect(answers.with.status).toBe(201);

    // Only the request with the header created a key.
    await page.reload();
    await visible(page.getByRole('cell', { name: 'with-header' }));
    expect(await page.getByRole('cell', { name: 'no-header' }).count()).toBe(0);
    expect(await page.getByRole('cell', { name: 'wrong-header' }).count()).toBe(0);
    await context.close();
  });

  it('answers the sixth failed login with 429 login_rate_limited and says how long to wait', async () => {
    const email = 'limited@acme-pay.example';
    const setup = await browser.newContext();
    await signUp(await setup.newPage(), service.base, email);
    await setup.close();

    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${service.base}/console/login`);
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    const signIn = async (password: string) => {
      await page.getByLabel('E-mail').fill(email);
      await page.getByLabel('Password').fill(password);
      const answer = page.waitForResponse(
        (r) => r.url().endsWith('/console/api/login') && r.request().method() === 'POST',
      );
      await page.getByRole('button', { name: 'Sign in' }).click();
      return answer;
    };

    for (let i = 1; i <= 5; i++) {
      const res = await signIn(`wrong password number ${i}`);
      expect(res.status(), `failed login ${i}`).toBe(401);
      expect(await res.json()).toMatchObject({ code: 'invalid_credentials' });
      await visible(
        page.getByRole('alert').getByText('That e-mail address and password do not match'),
      );
    }
    const sixth = await signIn('wrong password number 6');
    expect(sixth.status()).toBe(429);
    expect(await sixth.json()).toMatchObject({ code: 'login_rate_limited' });
    const wait = Number(sixth.headers()['retry-after']);
    expect(wait).toBeGreaterThan(0);
    expect(wait).toBeLessThanOrEqual(15 * 60);
    // The page says so and counts down to the end of the lock (issue 19 item 7).
    const alert = page
      .getByRole('alert')
      .filter({ hasText: 'Too many failed sign-ins for this e-mail address from here.' });
    await visible(alert);
    expect(await alert.textContent()).toMatch(/Sign-in opens again in \d+:\d\d\./);
    await visible(alert.getByRole('timer'));
    await shot(page, 'login-rate-limited');

    // While the limit holds, the page offers no sign-in (the server refuses the right password
    // too: test/integration/console.test.ts).
    expect(await page.getByRole('button', { name: 'Sign in' }).isDisabled()).toBe(true);
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    await context.close();
  });

  it('limits wrong current passwords on the Security page like sign-ins, and says how long to wait', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signUp(page, service.base, 'change@acme-pay.example');
    await page.goto(`${service.base}/console/security`);
    await visible(page.getByRole('cell', { name: /This session/ }));
    const change = async (current: string) => {
      await page.getByLabel('Current password').fill(current);
      await page.getByLabel('New password', { exact: true }).fill('a brand new passphrase');
      await page.getByLabel('Repeat the new password').fill('a brand new passphrase');
      const answer = page.waitForResponse(
        (r) => r.url().endsWith('/console/api/password') && r.request().method() === 'POST',
      );
      await page.getByRole('button', { name: 'Change password' }).click();
      return answer;
    };
    for (let i = 1; i <= 5; i++) {
      const res = await change(`wrong password number ${i}`);
      expect(res.status(), `wrong current password ${i}`).toBe(401);
      await visible(page.getByText('The current password is wrong.'));
    }
    const sixth = await change(PASSWORD);
    expect(sixth.status()).toBe(429);
    expect(await sixth.json()).toMatchObject({ code: 'login_rate_limited' });
    const wait = Number(sixth.headers()['retry-after']);
    expect(wait).toBeGreaterThan(14 * 60);
    await visible(
      page.getByText(`Too many wrong passwords. Try again in ${Math.ceil(wait / 60)} min.`),
    );
    await shot(page, 'account-password-limited');
    await context.close();
  });

  it('shows the invitation pages', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await page.goto(`${service.base}/console/invite`);
    await visible(page.getByRole('heading', { name: 'Invitation link incomplete' }));
    await shot(page, 'invite-incomplete');
    await page.goto(`${service.base}/console/invite#token=not-a-real-token`);
    await page.reload();
    await visible(page.getByRole('heading', { level: 1 }));
    await shot(page, 'invite');
    await context.close();
  });
});

describe.skipIf(!READY)('an expired console session in a browser', () => {
  let service: ConsoleService;
  let browser: Browser;

  beforeAll(async () => {
    service = await startConsoleService({
      roles: ['api'],
      env: { CONSOLE_SESSION_TTL_SECONDS: '2' },
    });
    browser = await launchBrowser();
  });

  afterAll(async () => {
    await browser?.close();
    await service?.stop();
  });

  it('answers 401 no_session once the session expired, and the app shows the login page', async () => {
    const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    await signUp(page, service.base, 'expiry@acme-pay.example');
    // Watches does not poll (Overview does, and every use moves the expiry forward).
    await nav(page, 'Watches').click();
    await visible(page.getByRole('heading', { level: 1, name: 'Watches' }));

    // Wait on the condition itself: no live session left in the database.
    await expect
      .poll(
        async () => {
          const { rows } = await service.svc.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM console_sessions
              WHERE revoked_at IS NULL AND expires_at > now()`,
          );
          return rows[0]?.n;
        },
        { timeout: 30_000, interval: 250 },
      )
      .toBe(0);

    // The next call the app makes answers 401 no_session, and the login page replaces the app.
    const answer = page.waitForResponse((r) => r.url().endsWith('/console/api/keys'));
    await nav(page, 'API keys').click();
    const res = await answer;
    expect(res.status()).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'no_session' });
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));
    await visible(page.getByRole('button', { name: 'Sign in' }));
    expect(await page.getByRole('navigation', { name: 'Console' }).count()).toBe(0);
    await shot(page, 'session-expired');

    // A refresh asks for the config, which says no session is open (so nothing answers 401,
    // issue 19 item 7): still the login page.
    const again = page.waitForResponse((r) => r.url().endsWith('/console/api/config'));
    await page.reload();
    const config = await again;
    expect(config.status()).toBe(200);
    expect(await config.json()).toMatchObject({ signed_in: false });
    await visible(page.getByRole('heading', { name: 'Sign in to the console' }));

    // Signing in again lands where it was going.
    await page.getByLabel('E-mail').fill('expiry@acme-pay.example');
    await page.getByLabel('Password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await visible(page.getByRole('heading', { level: 1, name: 'API keys' }));
    await context.close();
  });
});
