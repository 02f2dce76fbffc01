/**
 * What each role sees in the console (issue 18 item 3), in Debian's headless Chromium: an owner
 * signs up, makes a key and a watch, and invites a viewer and a developer from the Members page
 * (e-mail off: the link shown to copy); each accepts in their own browser. On Keys, Watches, a
 * watch's page, Events, an event's page and Dead letters the viewer sees the same data with no
 * control that changes anything (create, revoke, delete, pause, resume, test send, edit, rotate,
 * redeliver) and one line saying whom to ask; the developer sees those controls. Then the owner
 * demotes the developer to viewer from the Members page while the developer's Watches page is
 * open: the developer's next click (Pause) is refused by the server, the page says why in words,
 * drops the controls, and the watch stays active. Screenshots of the viewer's Watches page at
 * 1440 and 390 px, which does not scroll sideways.
 *
 * The service runs the api role only (no worker: the deliveries stay as written), on a stored
 * chain head; events are inserted as the ingester would. PostgreSQL when DATABASE_URL is set.
 */
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { insertEvents } from '../helpers/api.js';
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
const DESKTOP = { width: 1440, height: 900 };
const PHONE = { width: 390, height: 844 };
const ADDRESS = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
const OWNER = 'owner@roles.example';
const VIEWER = 'viewer@roles.example';
const DEVELOPER = 'dev@roles.example';
/** expect.poll's bound (its default is 1 s): the host is loaded, pages take a while. */
const WAIT = { timeout: 30_000, interval: 200 };

/**
 * The names of every control that changes something on these pages (their visible words or
 * aria-labels): none may be present for a viewer.
 */
const ACTION =
  /^(New watch|Create (key|watch)|Revoke|Delete|Pause|Resume|Send test event|Save|Rotate secret|End grace period now|Redeliver)\b/;

describe.skipIf(!READY)('what each role sees in the console', () => {
  let service: ConsoleService;
  let browser: Browser;
  const contexts: BrowserContext[] = [];
  let owner: Page;
  let viewer: Page;
  let developer: Page;
  let watchId: string;
  let eventId: string;
  let deadId: string;

  beforeAll(async () => {
    service = await startConsoleService({
      roles: ['api'],
      env: { WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32' },
    });
    await saveChainHead(service.svc.db, 'mainnet', { solidified: 79_000_000, head: 79_000_018 });
    browser = await launchBrowser();
  }, 180_000);

  afterAll(async () => {
    for (const c of contexts) await c.close();
    await browser?.close();
    await service?.stop();
  });

  const newPage = async (viewport = DESKTOP) => {
    const c = await browser.newContext({ viewport });
    contexts.push(c);
    return c.newPage();
  };

  const go = async (page: Page, path: string, heading: string | RegExp) => {
    await page.goto(`${service.base}/console${path}`);
    await visible(page.getByRole('heading', { level: 1, name: heading }));
  };

  /** The controls on `page` that change something (buttons by name; links are reads). */
  const actions = (page: Page): Locator => page.getByRole('button', { name: ACTION });

  const roleNote = (page: Page) => page.getByTestId('role-note');

  /** The page's CSRF token (the tw_csrf cookie), for a request made from the page. */
  const csrfOf = async (page: Page) =>
    decodeURIComponent(
      (await page.context().cookies()).find((c) => c.name === 'tw_csrf')?.value ?? '',
    );

  /** Invite `email` with `role` from the owner's Members page; the link, on this service. */
  const invite = async (email: string, role: 'viewer' | 'developer'): Promise<string> => {
    await go(owner, '/members', 'Members');
    await owner.getByLabel('E-mail').fill(email);
    await owner.getByLabel('Role', { exact: true }).selectOption(role);
    await owner.getByRole('button', { name: 'Invite', exact: true }).click();
    const shown = owner.getByTestId('invite-link');
    await visible(shown);
    const link = new URL((await shown.textContent()) ?? '');
    await owner.getByRole('button', { name: 'Done' }).click();
    return `${service.base}${link.pathname}${link.hash}`;
  };

  /** Accept an invitation in a browser of its own; the member lands on the Overview. */
  const accept = async (link: string): Promise<Page> => {
    const page = await newPage();
    await page.goto(link);
    await visible(page.getByRole('heading', { name: 'Set your password' }));
    await page.getByLabel('New password').fill(PASSWORD);
    await page.getByLabel('Repeat the password').fill(PASSWORD);
    await page.getByRole('button', { name: 'Set password and sign in' }).click();
    await visible(page.getByRole('heading', { name: 'Overview' }));
    return page;
  };

  it('an owner sets up a key, a watch, events (one DEAD), and invites a viewer and a developer', async () => {
    owner = await newPage();
    await owner.goto(`${service.base}/console/signup`);
    await owner.getByLabel('E-mail').fill(OWNER);
    await owner.getByLabel('Password').fill(PASSWORD);
    await owner.getByRole('button', { name: 'Create account' }).click();
    await visible(owner.getByRole('heading', { name: 'Overview' }));

    await go(owner, '/keys', 'API keys');
    await owner.getByLabel('Name (optional)').fill('payments-prod');
    await owner.getByRole('button', { name: 'Create key' }).click();
    await owner.getByRole('button', { name: 'I have saved it' }).click();

    const created = await owner.evaluate(
      async ({ address, csrf }) => {
        const res = await fetch('/console/api/watches', {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-csrf-token': csrf },
          body: JSON.stringify({
            address,
            asset_filter: 'USDT',
            webhook_url: 'https://127.0.0.1:9/hooks/tron',
            label: 'Deposits',
          }),
        });
        return { status: res.status, body: (await res.json()) as { id: string } };
      },
      { address: ADDRESS, csrf: await csrfOf(owner) },
    );
    expect(created.status).toBe(201);
    watchId = created.body.id;

    const db = service.svc.db;
    const { rows } = await db.query<{ id: string }>('SELECT id FROM accounts');
    const ids = await insertEvents(db, {
      accountId: rows[0]?.id as string,
      watchId,
      tag: 'roles',
      count: 3,
      start: new Date().toISOString(),
    });
    [eventId, deadId] = ids as [string, string];
    // One delivery gave up after its six attempts: a dead letter.
    await db.query(
      `UPDATE notifications SET status = 'DEAD', attempts = 6, last_status = 503 WHERE event_id = $1`,
      [deadId],
    );
    await db.query(
      `UPDATE notifications SET status = 'DELIVERED', attempts = 1,
                           delivered_at = now() WHERE event_id <> $1`,
      [deadId],
    );

    viewer = await accept(await invite(VIEWER, 'viewer'));
    developer = await accept(await invite(DEVELOPER, 'developer'));
  }, 180_000);

  it('a viewer sees every page and its data, and no control that changes anything', async () => {
    // Keys: the owner's key listed; no form, no Revoke.
    await go(viewer, '/keys', 'API keys');
    await visible(viewer.getByRole('cell', { name: 'payments-prod' }));
    await visible(roleNote(viewer));
    await expect
      .poll(() => roleNote(viewer).textContent(), WAIT)
      .toContain(
        'Your role (viewer) can read this account; ask an owner or admin for the developer role',
      );
    expect(await viewer.getByLabel('Name (optional)').count()).toBe(0);
    expect(await actions(viewer).count()).toBe(0);

    // Watches: the watch listed with its target and health; no New watch, test send, pause, delete.
    await go(viewer, '/watches', 'Watches');
    await visible(viewer.getByRole('link', { name: 'Deposits' }));
    await visible(viewer.getByText('https://127.0.0.1:9/hooks/tron'));
    await visible(roleNote(viewer));
    expect(await actions(viewer).count()).toBe(0);
    await shot(viewer, 'roles-viewer-watches-1440');
    await viewer.setViewportSize(PHONE);
    await visible(viewer.getByRole('link', { name: 'Deposits' }));
    const { sw, cw } = (await viewer.evaluate(
      '({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth })',
    )) as { sw: number; cw: number };
    expect(sw, `Watches at 390 px: scrollWidth ${sw} > clientWidth ${cw}`).toBeLessThanOrEqual(cw);
    await shot(viewer, 'roles-viewer-watches-390');
    await viewer.setViewportSize(DESKTOP);

    // A watch's page: its facts and health, the secret's state; no edit form, no rotation.
    await go(viewer, `/watches/${watchId}`, 'Deposits');
    await visible(viewer.getByRole('heading', { name: 'Endpoint health' }));
    await visible(viewer.getByText('The secret given at creation'));
    await visible(roleNote(viewer));
    expect(await viewer.getByLabel('Webhook URL').count()).toBe(0);
    expect(await viewer.getByLabel('Grace period').count()).toBe(0);
    expect(await actions(viewer).count()).toBe(0);

    // Events: the three events; nothing on this page changes anything, for any role.
    await go(viewer, '/events', 'Events');
    await expect.poll(() => viewer.getByRole('row').count(), WAIT).toBe(4);
    expect(await actions(viewer).count()).toBe(0);

    // An event's page: its deliveries and payload; no Redeliver.
    await go(viewer, `/events/${eventId}`, /USDT incoming/);
    await visible(viewer.getByRole('heading', { name: 'Deliveries' }));
    await visible(viewer.getByRole('heading', { name: 'Payload' }));
    await visible(roleNote(viewer));
    expect(await actions(viewer).count()).toBe(0);

    // Dead letters: the dead event listed; no Redeliver, no Redeliver all.
    await go(viewer, '/dead-letters', 'Dead letters');
    await expect.poll(() => viewer.getByRole('row').count(), WAIT).toBe(2);
    await visible(viewer.getByText('DEAD', { exact: true }));
    await visible(roleNote(viewer));
    expect(await actions(viewer).count()).toBe(0);

    // The navigation offers no Audit log (an admin's page); Security is everyone's.
    const side = viewer.getByRole('navigation', { name: 'Console' });
    expect(await side.getByRole('link', { name: 'Audit log', exact: true }).count()).toBe(0);
    await visible(side.getByRole('link', { name: 'Security', exact: true }));

    // What the pages do not show, the server refuses anyway.
    const refused = await viewer.evaluate(
      async ({ csrf, id }) => {
        const res = await fetch(`/console/api/events/${id}/redeliver`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
          body: '{}',
        });
        return { status: res.status, code: ((await res.json()) as { code?: string }).code };
      },
      { csrf: await csrfOf(viewer), id: deadId },
    );
    expect(refused).toEqual({ status: 403, code: 'insufficient_role' });
  }, 180_000);

  it('a developer sees the controls on the same pages', async () => {
    const has = async (name: string | RegExp) => visible(developer.getByRole('button', { name }));

    await go(developer, '/keys', 'API keys');
    await has('Create key');
    await has('Revoke key payments-prod');

    await go(developer, '/watches', 'Watches');
    await has('New watch');
    await has(`Send test event to ${ADDRESS}`);
    await has(`Pause ${ADDRESS}`);
    await has(`Delete ${ADDRESS}`);
    expect(await roleNote(developer).count()).toBe(0);

    await go(developer, `/watches/${watchId}`, 'Deposits');
    await has('Save');
    await has('Rotate secret');
    expect(await roleNote(developer).count()).toBe(0);

    await go(developer, `/events/${eventId}`, /USDT incoming/);
    await has(/^Redeliver$/);

    await go(developer, '/dead-letters', 'Dead letters');
    await has('Redeliver all');
    await has(`Redeliver event ${deadId}`);
    expect(await roleNote(developer).count()).toBe(0);
  }, 180_000);

  it('demoted while the page is open: the next action says why and the controls go', async () => {
    await go(developer, '/watches', 'Watches');
    const pause = developer.getByRole('button', { name: `Pause ${ADDRESS}` });
    await visible(pause);

    // Another session (the owner's) makes the developer a viewer.
    await go(owner, '/members', 'Members');
    await owner.getByLabel(`Role of ${DEVELOPER}`).selectOption('viewer');
    await visible(owner.getByText(`${DEVELOPER} is now viewer.`));

    // The developer's page still shows Pause; the server refuses it, and the page says why.
    await pause.click();
    const alert = developer.getByRole('alert');
    await visible(alert);
    const text = (await alert.textContent()) ?? '';
    expect(text).toContain('Could not pause the watch: your role does not allow it');
    expect(text).toContain('viewer');
    expect(text).toContain('An owner or admin of the account can change your role');
    // The page read the new role: the controls are gone, the role's line is there.
    await expect.poll(() => actions(developer).count(), WAIT).toBe(0);
    await visible(roleNote(developer));
    await expect
      .poll(() => roleNote(developer).textContent(), WAIT)
      .toContain('Your role (viewer)');
    await shot(developer, 'roles-demoted-watches-1440');
    // And nothing changed.
    const { rows } = await service.svc.db.query<{ status: string }>(
      'SELECT status FROM watches WHERE id = $1',
      [watchId],
    );
    expect(rows[0]?.status).toBe('ACTIVE');
  }, 180_000);
});
