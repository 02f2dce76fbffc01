/**
 * The console's endpoint calls (issue 40 items 1, 2, 3, 6), on both engines, through the real app
 * with a browser's cookies:
 * - item 6: an endpoint's or watch's URL keeps its query string for a developer and comes masked
 *   (`?•••`) to a viewer, on every call that shows it (endpoints list and page, its watches, the
 *   watches list and a watch's page, the alert banner);
 * - item 1: the endpoint's page (windows, chart buckets, newest attempts) and its test event;
 *   another account's or environment's endpoint is 404;
 * - item 2: a watch names the endpoint it delivers to (its label), in the list and on its page;
 * - item 3: the banner lists a failing endpoint once with its watch count, and not its watches.
 */
import { randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

const SECRET_QUERY = 'token=s3cr3t-abc';

describe.each(dbEngines)('console endpoint page on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('masks URL query strings below developer, names endpoints on watches, one banner per endpoint', async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const hh = h;
    const br = new Browser(hh.app);
    const email = `owner-${randomBytes(3).toString('hex')}@example.com`;
    const signed = await br.signUp(email);
    expect(signed.statusCode).toBe(201);
    const url = `https://hooks.example.com/tron/in?${SECRET_QUERY}`;
    const created = await br.post('/console/api/endpoints', { url, label: 'Deposits' });
    expect(created.statusCode, created.body).toBe(201);
    const ep = json<{ id: string }>(created);
    const batch = await br.post('/console/api/watches/batch', {
      items: ['TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7'].map(
        (address) => ({ address, asset_filter: 'USDT', endpoint_id: ep.id }),
      ),
    });
    expect(json<{ created: number }>(batch).created).toBe(2);
    const own = await br.post('/console/api/watches', {
      address: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
      asset_filter: 'TRX',
      webhook_url: `https://own.example.com/hook?${SECRET_QUERY}#frag`,
    });
    expect(own.statusCode, own.body).toBe(201);
    const ownId = json<{ id: string }>(own).id;
    const { rows: onEp } = await hh.db.query<{ id: string }>(
      'SELECT id FROM watches WHERE endpoint_id = $1 ORDER BY id',
      [ep.id],
    );
    const epWatch = onEp[0]?.id ?? '';
    // The endpoint fails (as the worker records it), and so does each watch's own streak.
    await hh.db.query(
      `UPDATE endpoints SET alert_state = 'failing', alert_since = now(), consecutive_failures = 7,
              alert_reason = '5 delivery attempts in a row failed'`,
    );
    await hh.db.query(
      `UPDATE watches SET alert_state = 'failing', alert_since = now(), consecutive_failures = 5,
              alert_reason = '5 delivery attempts in a row failed'`,
    );

    /** Every URL the console shows on the calls of the pages involved. */
    const urls = async () => {
      const get = async <T>(path: string) => {
        const res = await br.get(`/console/api${path}`);
        expect(res.statusCode, `${path}: ${res.body}`).toBe(200);
        return json<T>(res);
      };
      const list = await get<{ data: Array<{ url: string }> }>('/endpoints');
      const pageData = await get<{ endpoint: { url: string } }>(`/endpoints/${ep.id}`);
      const watches = await get<{
        data: Array<{
          id: string;
          webhook_url: string | null;
          endpoint: { id: string; label: string | null; url: string } | null;
        }>;
      }>('/watches');
      const ownPage = await get<{ watch: { webhook_url: string } }>(`/watches/${ownId}/health`);
      const epPage = await get<{ endpoint: { label: string; url: string } | null }>(
        `/watches/${epWatch}/health`,
      );
      const alerts = await get<{
        endpoints: Array<{ endpoint_id: string; label: string; url: string; watch_count: number }>;
        data: Array<{ watch_id: string }>;
      }>('/alerts');
      return { list, pageData, watches, ownPage, epPage, alerts };
    };

    const dev = await urls();
    expect(dev.list.data[0]?.url).toBe(url);
    expect(dev.pageData.endpoint.url).toBe(url);
    expect(dev.ownPage.watch.webhook_url).toBe(`https://own.example.com/hook?${SECRET_QUERY}#frag`);
    // Item 2: a watch on the endpoint names it (label), on the list and on its page.
    const named = dev.watches.data.find((w) => w.id === epWatch);
    expect(named?.endpoint).toMatchObject({ id: ep.id, label: 'Deposits', url });
    expect(dev.watches.data.find((w) => w.id === ownId)?.endpoint).toBeNull();
    expect(dev.epPage.endpoint).toMatchObject({ label: 'Deposits', url });
    // Item 3: the endpoint once, with its watch count; its watches no banner of their own; the
    // watch with its own URL its own.
    expect(dev.alerts.endpoints).toEqual([
      expect.objectContaining({ endpoint_id: ep.id, label: 'Deposits', url, watch_count: 2 }),
    ]);
    expect(dev.alerts.data.map((a) => a.watch_id)).toEqual([ownId]);

    // A viewer (the owner's role lowered) sees no query string anywhere.
    await hh.db.query(`UPDATE console_users SET role = 'viewer' WHERE email = $1`, [email]);
    const viewer = await urls();
    const masked = 'https://hooks.example.com/tron/in?•••';
    expect(viewer.list.data[0]?.url).toBe(masked);
    expect(viewer.pageData.endpoint.url).toBe(masked);
    expect(viewer.ownPage.watch.webhook_url).toBe('https://own.example.com/hook?•••');
    expect(viewer.watches.data.find((w) => w.id === epWatch)?.endpoint?.url).toBe(masked);
    expect(viewer.watches.data.find((w) => w.id === ownId)?.webhook_url).toBe(
      'https://own.example.com/hook?•••',
    );
    expect(viewer.epPage.endpoint?.url).toBe(masked);
    expect(viewer.alerts.endpoints[0]?.url).toBe(masked);
    const theirWatches = await br.get(`/console/api/endpoints/${ep.id}/watches`);
    expect(theirWatches.body).not.toContain('s3cr3t');
    for (const path of ['/endpoints', `/endpoints/${ep.id}`, '/watches', '/alerts']) {
      expect((await br.get(`/console/api${path}`)).body).not.toContain('s3cr3t');
    }
    // A viewer cannot send a test event or replay (developer role).
    expect((await br.post(`/console/api/endpoints/${ep.id}/test`)).statusCode).toBe(403);
    expect(
      (await br.post(`/console/api/endpoints/${ep.id}/replay`, { since: new Date().toISOString() }))
        .statusCode,
    ).toBe(403);
  }, 180_000);

  it("serves the endpoint's page, its attempts and its test event, and nobody else's", async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
    const hh = h;
    const br = new Browser(hh.app);
    expect((await br.signUp('a@example.com')).statusCode).toBe(201);
    const ep = json<{ id: string }>(
      await br.post('/console/api/endpoints', { url: 'https://hooks.example.com/a' }),
    );
    // No watch on it yet: a test event has no address to name.
    const early = await br.post(`/console/api/endpoints/${ep.id}/test`);
    expect(early.statusCode).toBe(409);
    expect(json<{ error: string }>(early).error).toMatch(/no watch delivers to this endpoint/);
    const page = await br.get(`/console/api/endpoints/${ep.id}?window=hour`);
    expect(page.statusCode).toBe(200);
    const body = json<{
      window: string;
      bucket_seconds: number;
      buckets: unknown[];
      windows: Record<string, { attempts: number }>;
    }>(page);
    expect(body.window).toBe('hour');
    expect(body.bucket_seconds).toBe(300);
    expect(body.buckets.length).toBeGreaterThanOrEqual(12);
    expect(body.windows.day?.attempts).toBe(0);
    expect(json(await br.get(`/console/api/endpoints/${ep.id}/attempts`))).toEqual({ data: [] });

    // Another account, and the other environment: 404 on each call.
    const other = new Browser(hh.app);
    expect((await other.signUp('b@example.com')).statusCode).toBe(201);
    const test = new Browser(hh.app);
    await test.login('a@example.com');
    test.jar.set('tw_env', 'test');
    for (const b of [other, test]) {
      for (const path of [`/endpoints/${ep.id}`, `/endpoints/${ep.id}/attempts`]) {
        expect((await b.get(`/console/api${path}`)).statusCode, path).toBe(404);
      }
      for (const path of [`/endpoints/${ep.id}/test`, `/endpoints/${ep.id}/redeliver`]) {
        expect((await b.post(`/console/api${path}`)).statusCode, path).toBe(404);
      }
    }
    expect((await br.get('/console/api/endpoints/wh_nope')).statusCode).toBe(404);
  }, 180_000);
});
