/**
 * Read-only API keys (issue 31 item 3): a key created read-only (by the CLI's function or the
 * console) may make every GET of `/v1` and nothing else: every other operation the OpenAPI
 * document lists is refused with 403 read_only_key and changes nothing, whatever the body; the
 * key is listed as read-only by the CLI and the console. (Its MCP side: mcp.test.ts.)
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { keysCreate, keysList } from '../../src/accounts/cli.js';
import { ADDR_B58, type ApiHarness, apiHarness } from '../helpers/api.js';
import { Browser } from '../helpers/console.js';
import { dbEngines } from '../helpers/db.js';

describe.each(dbEngines)('read-only API keys (%s)', (engine) => {
  let h: ApiHarness;
  beforeAll(async () => {
    h = await apiHarness(engine, { env: { CONSOLE_SIGNUP: 'open' } });
  }, 120_000);
  afterAll(async () => {
    await h?.close();
  });

  it('refuses every write of every /v1 operation with 403 read_only_key, serves the reads', async () => {
    const full = await h.caller({ plan: 'pro' });
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: full.headers,
      payload: {
        address: ADDR_B58,
        asset_filter: 'USDT',
        webhook_url: 'https://hooks.example.com/a',
      },
    });
    expect(created.statusCode).toBe(201);
    const watch = created.json() as { id: string; label: string | null };
    const ro = await keysCreate(h.db, { account: full.accountId, name: 'agent', scope: 'read' });
    expect(ro.scope).toBe('read');
    const headers = { authorization: `Bearer ${ro.key}` };

    const doc = (await h.app.inject({ url: '/docs/openapi.json' })).json() as {
      paths: Record<string, Record<string, unknown>>;
    };
    const refused: string[] = [];
    const served: string[] = [];
    for (const [template, ops] of Object.entries(doc.paths)) {
      if (!template.startsWith('/v1')) continue;
      // (explain reads a block through the node, which this harness has not: not a write anyway.)
      if (template.includes('{tx_id}')) continue;
      // (the event stream never ends, so inject cannot wait for it: listen.test.ts serves it to a
      // read-only key over a real port.)
      if (template === '/v1/events/stream') continue;
      const url = template.replace('{id}', watch.id).replace('{event_id}', `evt_${'0'.repeat(26)}`);
      for (const method of Object.keys(ops)) {
        if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
        const res = await h.app.inject({
          method: method.toUpperCase() as 'GET',
          url,
          headers,
          ...(method === 'get' || method === 'delete' ? {} : { payload: { label: 'x' } }),
        });
        const what = `${method.toUpperCase()} ${template}`;
        if (method === 'get') {
          expect(res.statusCode, what).not.toBe(403);
          expect(res.statusCode, what).toBeLessThan(500);
          served.push(what);
        } else {
          expect(res.statusCode, `${what}: ${res.body}`).toBe(403);
          expect(res.json(), what).toMatchObject({
            code: 'read_only_key',
            error: expect.stringMatching(/read-only/),
          });
          // Counted like any request: the rate-limit headers are there.
          expect(res.headers['x-ratelimit-limit'], what).toBeDefined();
          refused.push(what);
        }
      }
    }
    expect(refused).toEqual(
      expect.arrayContaining([
        'POST /v1/watches',
        'DELETE /v1/watches/{id}',
        'PATCH /v1/watches/{id}',
        'POST /v1/watches/{id}/pause',
        'POST /v1/watches/{id}/resume',
        'POST /v1/watches/{id}/rotate-secret',
        'POST /v1/watches/{id}/previous-secret/expire',
        'POST /v1/events/{event_id}/redeliver',
      ]),
    );
    expect(served).toEqual(
      expect.arrayContaining(['GET /v1/watches', 'GET /v1/events', 'GET /v1/status']),
    );
    // Nothing changed; the full key still writes.
    const list = await h.app.inject({ url: '/v1/watches', headers });
    expect(list.statusCode).toBe(200);
    expect(
      (list.json() as { data: Array<{ id: string; label: string | null; status: string }> }).data,
    ).toEqual([expect.objectContaining({ id: watch.id, label: null, status: 'ACTIVE' })]);
    const paused = await h.app.inject({
      method: 'POST',
      url: `/v1/watches/${watch.id}/pause`,
      headers: full.headers,
    });
    expect(paused.statusCode).toBe(200);
    // Listed as read-only by the CLI.
    const keys = (await keysList(h.db, { account: full.accountId })).keys;
    expect(keys.find((k) => k.id === ro.id)?.scope).toBe('read');
    expect(keys.find((k) => k.id === full.keyId)?.scope).toBe('full');
  });

  it('the console creates a read-only key and lists it as such', async () => {
    const b = new Browser(h.app);
    expect((await b.signUp(`scope-${engine}@example.com`)).statusCode).toBeLessThan(300);
    const res = await b.post('/console/api/keys', { name: 'dashboard', scope: 'read' });
    expect(res.statusCode).toBe(201);
    const { key, secret } = res.json() as { key: { id: string; scope: string }; secret: string };
    expect(key.scope).toBe('read');
    const other = await b.post('/console/api/keys', { name: 'backend' });
    expect((other.json() as { key: { scope: string } }).key.scope).toBe('full');
    const listed = (await b.get('/console/api/keys')).json() as {
      data: Array<{ id: string; scope: string }>;
    };
    expect(listed.data.find((k) => k.id === key.id)?.scope).toBe('read');
    const bad = await b.post('/console/api/keys', { scope: 'admin' });
    expect(bad.statusCode).toBe(400);
    const write = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: { authorization: `Bearer ${secret}` },
      payload: {
        address: ADDR_B58,
        asset_filter: 'TRX',
        webhook_url: 'https://hooks.example.com/b',
      },
    });
    expect(write.statusCode).toBe(403);
    expect(write.json()).toMatchObject({ code: 'read_only_key' });
  });
});
