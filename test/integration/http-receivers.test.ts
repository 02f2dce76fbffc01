/**
 * Plain `http://` receivers (issue 29 item 5; src/net/url-policy.ts "Plain http"): allowed when,
 * and only when, the address connected to is inside WEBHOOK_ALLOW_CIDRS. Proven through the whole
 * path: POST /v1/watches (201 or 400 naming webhook_url), then the delivery worker's attempt to
 * a real plain-HTTP receiver that counts its TCP connections and verifies the signature on the
 * bytes it received.
 *
 * Names resolve through a stub resolver (offline): `hooks.test-internal.example` answers
 * 127.0.0.1 (inside the 127.0.0.1/32 allow-list), `public.test-internal.example` a public address
 * (enough for https, never for http), and `rebind.test-internal.example` 127.0.0.1 at creation
 * and a public address at delivery (the connect-time lookup for http must refuse it).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { DeliveryWorker } from '../../src/delivery/worker.js';
import { verifySignature } from '../../src/devnet/receiver.js';
import { stubResolver } from '../../src/net/dns.js';
import {
  ADDR_B58,
  type ApiHarness,
  apiHarness,
  json,
  PUBLIC_TEST_ADDRESS,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';
import { insertEvents } from '../helpers/outbox.js';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

interface PlainReceiver {
  port: number;
  readonly connections: number;
  /** Bodies received, each with whether X-Signature verified against `secret`. */
  received: Array<{ eventId: string | undefined; verified: boolean }>;
  secret: string;
}

/** A plain-HTTP receiver on 127.0.0.1 answering 200, counting accepted connections. */
async function plainReceiver(): Promise<PlainReceiver> {
  let connections = 0;
  const state: PlainReceiver = {
    port: 0,
    get connections() {
      return connections;
    },
    received: [],
    secret: '',
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const id = req.headers['x-event-id'];
      state.received.push({
        eventId: typeof id === 'string' ? id : undefined,
        verified: verifySignature(state.secret, body, req.headers['x-signature']),
      });
      res.writeHead(200);
      res.end('ok');
    });
  });
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.port = (server.address() as AddressInfo).port;
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return state;
}

let rebindCalls = 0;
const resolver = stubResolver({
  'hooks.test-internal.example': ['127.0.0.1'],
  'public.test-internal.example': [PUBLIC_TEST_ADDRESS],
  'mixed.test-internal.example': ['127.0.0.1', PUBLIC_TEST_ADDRESS],
  'rebind.test-internal.example': () =>
    rebindCalls++ === 0 ? ['127.0.0.1'] : [PUBLIC_TEST_ADDRESS],
});

async function harness(engine: (typeof dbEngines)[number], allow: string): Promise<ApiHarness> {
  const h = await apiHarness(engine, {
    resolver,
    env: allow ? { WEBHOOK_ALLOW_CIDRS: allow } : {},
  });
  cleanups.push(() => h.close());
  return h;
}

function post(
  h: ApiHarness,
  headers: Record<string, string>,
  webhook_url: string,
  asset_filter = 'USDT',
) {
  return h.app.inject({
    method: 'POST',
    url: '/v1/watches',
    headers,
    payload: { address: ADDR_B58, asset_filter, webhook_url },
  });
}

/** Run the delivery worker (the harness's config and secrets, the same resolver) until stopped. */
function startWorker(h: ApiHarness): void {
  const worker = new DeliveryWorker({
    db: h.db,
    secrets: h.secrets,
    config: { delivery: { ...h.config.delivery, pollMs: 10 } },
    logger: silentLogger,
    resolver,
  });
  const ac = new AbortController();
  const done = worker.start(ac.signal);
  cleanups.push(async () => {
    ac.abort();
    await done;
  });
}

async function notificationOf(h: ApiHarness, eventId: string) {
  const { rows } = await h.db.query<{ status: string; attempts: number }>(
    'SELECT status, attempts FROM notifications WHERE event_id = $1',
    [eventId],
  );
  return rows[0];
}

async function lastAttemptError(h: ApiHarness, eventId: string): Promise<string | null> {
  const { rows } = await h.db.query<{ error: string | null }>(
    `SELECT a.error FROM attempts a JOIN notifications n ON n.id = a.notification_id
      WHERE n.event_id = $1 ORDER BY a.attempt DESC LIMIT 1`,
    [eventId],
  );
  return rows[0]?.error ?? null;
}

describe.each(dbEngines)('plain http receivers on %s', (engine) => {
  it('inside WEBHOOK_ALLOW_CIDRS: 201, then delivered over http, signature verified', async () => {
    const r = await plainReceiver();
    const h = await harness(engine, '127.0.0.1/32');
    const c = await h.caller({ plan: 'pro' });
    for (const [url, asset] of [
      [`http://127.0.0.1:${r.port}/hook`, 'USDT'],
      [`http://hooks.test-internal.example:${r.port}/hook`, 'TRX'],
    ] as const) {
      const res = await post(h, c.headers, url, asset);
      expect(res.statusCode, url).toBe(201);
      const created = json<{ id: string; secret: string; webhook_url: string }>(res);
      expect(created.webhook_url).toBe(url);
      r.secret = created.secret;
      const [ev] = await insertEvents(h.db, { accountId: c.accountId, watchId: created.id });
      if (!ev) throw new Error('no event inserted');
      startWorker(h);
      await vi.waitFor(
        async () => {
          const n = await notificationOf(h, ev.eventId);
          if (n?.status !== 'DELIVERED') throw new Error(`still ${n?.status}`);
        },
        { timeout: 20_000, interval: 20 },
      );
      await cleanups.pop()?.(); // stop this worker before the next URL
      expect(r.received.filter((x) => x.eventId === ev.eventId)).toEqual([
        { eventId: ev.eventId, verified: true },
      ]);
    }
  });

  it('outside WEBHOOK_ALLOW_CIDRS: 400 naming webhook_url, whatever the spelling', async () => {
    const r = await plainReceiver();
    const h = await harness(engine, '127.0.0.1/32');
    const c = await h.caller({ plan: 'pro' });
    const cases: Array<[string, RegExp]> = [
      // Public, but http would cross the internet in clear.
      ['http://8.8.8.8/hook', /^address 8\.8\.8\.8 is outside WEBHOOK_ALLOW_CIDRS: http:\/\//],
      // Private, not in the allow-list.
      ['http://10.0.0.7/hook', /^address 10\.0\.0\.7 is outside WEBHOOK_ALLOW_CIDRS/],
      ['http://127.0.0.2/hook', /^address 127\.0\.0\.2 is outside WEBHOOK_ALLOW_CIDRS/],
      // localhost by name stays refused, although its address is allow-listed.
      [`http://localhost:${r.port}/hook`, /^localhost is not a public host$/],
      // A name whose answers are public, or only partly inside the allow-list.
      [
        'http://public.test-internal.example/hook',
        /^host resolves to an address 93\.184\.215\.14 is outside WEBHOOK_ALLOW_CIDRS/,
      ],
      ['http://mixed.test-internal.example/hook', /outside WEBHOOK_ALLOW_CIDRS \(1 of 2 answers\)/],
      ['http://u:p@127.0.0.1/hook', /^credentials in the URL are not allowed$/],
    ];
    for (const [url, reason] of cases) {
      const res = await post(h, c.headers, url);
      expect(res.statusCode, url).toBe(400);
      expect(json<{ details: unknown }>(res).details, url).toEqual([
        { field: 'webhook_url', message: expect.stringMatching(reason) },
      ]);
    }
    // The same public name over https is fine: the rule is about http only.
    expect((await post(h, c.headers, 'https://public.test-internal.example/hook')).statusCode).toBe(
      201,
    );
    expect(r.connections).toBe(0);
  });

  it('with an empty allow-list (the default) http is refused outright', async () => {
    const r = await plainReceiver();
    const h = await harness(engine, '');
    const c = await h.caller({ plan: 'pro' });
    const res = await post(h, c.headers, `http://127.0.0.1:${r.port}/hook`);
    expect(res.statusCode).toBe(400);
    expect(json<{ details: Array<{ message: string }> }>(res).details[0]?.message).toMatch(
      /^scheme must be https \(http:\/\/ only to an address inside WEBHOOK_ALLOW_CIDRS/,
    );
  });

  it('a name inside the allow-list at creation and public at delivery: refused at connect, no connection', async () => {
    rebindCalls = 0;
    const r = await plainReceiver();
    const h = await harness(engine, '127.0.0.1/32');
    const c = await h.caller({ plan: 'pro' });
    const res = await post(h, c.headers, `http://rebind.test-internal.example:${r.port}/hook`);
    expect(res.statusCode).toBe(201);
    const created = json<{ id: string }>(res);
    const [ev] = await insertEvents(h.db, { accountId: c.accountId, watchId: created.id });
    if (!ev) throw new Error('no event inserted');
    startWorker(h);
    await vi.waitFor(
      async () => {
        const n = await notificationOf(h, ev.eventId);
        if ((n?.attempts ?? 0) < 1) throw new Error('no attempt yet');
      },
      { timeout: 20_000, interval: 20 },
    );
    expect(await lastAttemptError(h, ev.eventId)).toMatch(
      /^refused: rebind\.test-internal\.example resolves to address 93\.184\.215\.14 is outside WEBHOOK_ALLOW_CIDRS/,
    );
    expect(r.connections).toBe(0);
  });
});
