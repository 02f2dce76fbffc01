/**
 * SSRF defences end to end (SPEC POST /v1/watches rule 3, §Events "re-checked at delivery";
 * DESIGN invariant 7: resolve, check, pin; no redirects; no proxy).
 *
 * Real local HTTPS receivers count accepted TCP connections, so every refusal is proven by the
 * receiver never seeing a connection, not only by the error text. Names resolve through a stub
 * resolver (offline): `hooks.test-public.example` answers 127.0.0.1, admitted by the
 * 127.0.0.1/32 allow-list in the "accepted" cases; the refused cases answer addresses that are
 * not allow-listed (several of which would reach the receiver if connected to: 127.0.0.1 without
 * the allow-list, 0.0.0.0, ::ffff:127.0.0.1).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { generate } from 'selfsigned';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { newWebhookSecret } from '../../src/common/secrets.js';
import { type AttemptResult, WebhookSender } from '../../src/delivery/send.js';
import { type Receiver, type Reply, startReceiver } from '../../src/devnet/receiver.js';
import type { EventRow } from '../../src/events/event.js';
import { type Resolver, type StubAnswer, stubResolver } from '../../src/net/dns.js';
import { checkWebhookUrl } from '../../src/net/url-policy.js';
import { ADDR_B58, apiHarness, json, PUBLIC_TEST_ADDRESS } from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const HOST = 'hooks.test-public.example';
const SECRET = newWebhookSecret();
const ALLOW_LOOPBACK = ['127.0.0.1/32'];

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-ssrf-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.();
});

function caFileOf(pem: string): string {
  const file = path.join(tmp, `ca-${randomBytes(4).toString('hex')}.pem`);
  fs.writeFileSync(file, pem);
  return file;
}

/** The project's receiver (certificate for 127.0.0.1 / localhost only). */
async function receiver(): Promise<Receiver & { caFile: string }> {
  const r = await startReceiver({ secretFor: SECRET });
  cleanups.push(() => r.close());
  return Object.assign(r, { caFile: caFileOf(r.ca) });
}

interface NamedReceiver {
  port: number;
  caFile: string;
  readonly connections: number;
  readonly requests: number;
  /** The SNI server name of each TLS connection that sent a request. */
  servernames: string[];
}

/** An HTTPS receiver on 127.0.0.1 whose certificate names `hostname` (SAN DNS), answering 200. */
async function namedReceiver(hostname: string): Promise<NamedReceiver> {
  const pems = await generate([{ name: 'commonName', value: hostname }], {
    keyType: 'ec',
    curve: 'P-256',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      { name: 'subjectAltName', altNames: [{ type: 2, value: hostname }] },
    ],
  });
  let connections = 0;
  let requests = 0;
  const servernames: string[] = [];
  const server = https.createServer({ key: pems.private, cert: pems.cert }, (req, res) => {
    requests++;
    const sni = (req.socket as TLSSocket).servername;
    servernames.push(typeof sni === 'string' ? sni : '');
    req.resume();
    req.on('end', () => {
      res.writeHead(200);
      res.end('ok');
    });
  });
  server.on('connection', () => {
    connections++;
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const addr = server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no port');
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  );
  return {
    port: addr.port,
    caFile: caFileOf(pems.cert),
    get connections() {
      return connections;
    },
    get requests() {
      return requests;
    },
    servernames,
  };
}

function sender(o: {
  resolver?: Resolver;
  allowCidrs?: readonly string[];
  caFile?: string;
  timeoutMs?: number;
}): WebhookSender {
  const s = new WebhookSender({
    timeoutMs: o.timeoutMs ?? 5_000,
    allowCidrs: o.allowCidrs ?? ALLOW_LOOPBACK,
    caFile: o.caFile,
    resolver: o.resolver,
    connections: 4,
  });
  cleanups.push(() => s.close());
  return s;
}

let seq = 0;
function event(): EventRow {
  seq++;
  return {
    id: `evt_ssrf_${seq}_${randomBytes(4).toString('hex')}`,
    account_id: 'acc_test',
    watch_id: 'wh_test',
    network: 'mainnet',
    direction: 'incoming',
    asset: 'USDT',
    tx_id: randomBytes(32).toString('hex'),
    event_index: 0,
    block_number: 79_072_107,
    block_timestamp: new Date('2026-01-08T13:36:51.000Z'),
    from_address: 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
    to_address: ADDR_B58,
    amount_raw: '1500000',
    contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
    proof: 'signed',
    created_at: new Date(),
  };
}

const resolveTo = (answer: StubAnswer): Resolver => stubResolver({ [HOST]: answer });

function expectFailed(res: AttemptResult, reason: RegExp): void {
  expect(res.ok).toBe(false);
  expect(res.status).toBeUndefined();
  expect(res.error).toMatch(reason);
}

describe('delivery to a host name: resolve, check, pin (accepted)', () => {
  it('connects to the checked address and keeps the host name for SNI and the certificate', async () => {
    const r = await namedReceiver(HOST);
    const s = sender({ resolver: resolveTo(['127.0.0.1']), caFile: r.caFile });
    const res = await s.send(`https://${HOST}:${r.port}/hook`, event(), SECRET);
    expect(res).toMatchObject({ ok: true, status: 200 });
    expect(r.connections).toBe(1);
    expect(r.servernames).toEqual([HOST]);
  });

  it('follows a CNAME chain to an admitted address (the URL host stays the TLS name)', async () => {
    const r = await namedReceiver(HOST);
    const resolver = stubResolver({
      [HOST]: { cname: 'edge.cdn.example' },
      'edge.cdn.example': { cname: 'origin.cdn.example' },
      'origin.cdn.example': ['127.0.0.1'],
    });
    const s = sender({ resolver, caFile: r.caFile });
    expect(await s.send(`https://${HOST}:${r.port}/hook`, event(), SECRET)).toMatchObject({
      ok: true,
      status: 200,
    });
    expect(r.servernames).toEqual([HOST]);
  });

  it('verifies the certificate against the host name, not the pinned IP', async () => {
    // The project's receiver has a certificate for 127.0.0.1 only: connecting by name to that
    // address reaches it, and TLS then refuses the certificate (no request is sent).
    const r = await receiver();
    const s = sender({ resolver: resolveTo(['127.0.0.1']), caFile: r.caFile });
    const port = new URL(r.url).port;
    const res = await s.send(`https://${HOST}:${port}/hook`, event(), SECRET);
    expectFailed(res, /ERR_TLS_CERT_ALTNAME_INVALID|altnames/i);
    expect(r.connections).toBe(1);
    expect(r.requests).toBe(0);
  });
});

describe('delivery refused at connect time: the receiver gets no connection', () => {
  const refused: Array<[string, StubAnswer, RegExp]> = [
    [
      'loopback, not allow-listed',
      ['127.0.0.2'],
      /127\.0\.0\.2 is in a non-public range \(loopback\)/,
    ],
    ['0.0.0.0 (would reach the receiver)', ['0.0.0.0'], /0\.0\.0\.0 .*\(this network\)/],
    ['IPv4-mapped loopback', ['::ffff:127.0.0.2'], /127\.0\.0\.2 .*\(loopback\)/],
    ['IPv6 loopback', ['::1'], /::1 .*\(loopback\)/],
    ['private', ['10.0.0.7'], /10\.0\.0\.7 .*\(private\)/],
    ['cloud metadata', ['169.254.169.254'], /\(link-local\)/],
    ['CGNAT', ['100.64.0.1'], /CGNAT/],
    ['unique-local', ['fd12::1'], /\(unique-local\)/],
    ['NAT64 of loopback', ['64:ff9b::7f00:1'], /embedded IPv4 127\.0\.0\.1/],
    [
      'mixed: admitted + private',
      ['127.0.0.1', '10.0.0.7'],
      /10\.0\.0\.7 .*\(1 of 2 answers refused\)/,
    ],
    ['mixed: public + loopback', [PUBLIC_TEST_ADDRESS, '127.0.0.2'], /127\.0\.0\.2 .*\(1 of 2/],
    [
      'mixed: admitted IPv4 + link-local IPv6',
      ['127.0.0.1', 'fe80::1'],
      /fe80::1 .*\(link-local\)/,
    ],
  ];

  it.each(refused)('%s', async (_label, answer, reason) => {
    const r = await receiver();
    const s = sender({ resolver: resolveTo(answer), caFile: r.caFile });
    const port = new URL(r.url).port;
    const res = await s.send(`https://${HOST}:${port}/hook`, event(), SECRET);
    expectFailed(res, new RegExp(`^refused: ${HOST.replaceAll('.', '\\.')} resolves to `));
    expect(res.error).toMatch(reason);
    expect(r.connections).toBe(0);
    expect(r.requests).toBe(0);
  });

  it('refuses loopback when the allow-list is empty (the receiver is right there)', async () => {
    const r = await receiver();
    const s = sender({ resolver: resolveTo(['127.0.0.1']), caFile: r.caFile, allowCidrs: [] });
    const port = new URL(r.url).port;
    const res = await s.send(`https://${HOST}:${port}/hook`, event(), SECRET);
    expectFailed(
      res,
      /^refused: .* resolves to address 127\.0\.0\.1 is in a non-public range \(loopback\)$/,
    );
    expect(r.connections).toBe(0);
  });

  it('refuses a CNAME chain whose final answer is private', async () => {
    const r = await receiver();
    const resolver = stubResolver({
      [HOST]: { cname: 'a.attacker.example' },
      'a.attacker.example': { cname: 'b.attacker.example' },
      'b.attacker.example': ['127.0.0.1'],
    });
    const s = sender({ resolver, caFile: r.caFile, allowCidrs: [] });
    const port = new URL(r.url).port;
    expectFailed(await s.send(`https://${HOST}:${port}/hook`, event(), SECRET), /\(loopback\)/);
    expect(r.connections).toBe(0);
  });

  it('an unresolvable host is a failed attempt (dns), with no connection', async () => {
    const r = await receiver();
    const s = sender({ resolver: resolveTo({ error: 'ENOTFOUND' }), caFile: r.caFile });
    const port = new URL(r.url).port;
    expectFailed(
      await s.send(`https://${HOST}:${port}/hook`, event(), SECRET),
      /^dns: hooks\.test-public\.example does not resolve/,
    );
    expect(r.connections).toBe(0);
  });

  it('re-checks the form at delivery: scheme and credentials are refused although allow-listed', async () => {
    const r = await receiver();
    const s = sender({ caFile: r.caFile });
    const port = new URL(r.url).port;
    for (const [url, reason] of [
      [`ftp://127.0.0.1:${port}/hook`, /^refused: scheme must be https$/],
      [
        `http://127.0.0.2:${port}/hook`,
        /^refused: address 127\.0\.0\.2 is outside WEBHOOK_ALLOW_CIDRS/,
      ],
      [`https://u:p@127.0.0.1:${port}/hook`, /^refused: credentials/],
      [`https://10.0.0.7:${port}/hook`, /^refused: address 10\.0\.0\.7 .*\(private\)$/],
    ] as const) {
      expectFailed(await s.send(url, event(), SECRET), reason);
    }
    expect(r.connections).toBe(0);
  });
});

describe('DNS rebinding: public at creation, private at delivery', () => {
  /** A name answering public on its first resolution and `later` afterwards. */
  function rebinding(later: readonly string[]): { resolver: Resolver; calls: () => number } {
    let n = 0;
    const resolver = stubResolver({
      [HOST]: () => (n++ === 0 ? [PUBLIC_TEST_ADDRESS] : later),
    });
    return { resolver, calls: () => n };
  }

  it('the creation check passes, the delivery is refused, the receiver sees nothing', async () => {
    const r = await receiver();
    const port = new URL(r.url).port;
    const url = `https://${HOST}:${port}/hook`;
    const { resolver, calls } = rebinding(['127.0.0.1']);
    expect(await checkWebhookUrl(url, { allowCidrs: [], resolver })).toMatchObject({ ok: true });
    const s = sender({ resolver, caFile: r.caFile, allowCidrs: [] });
    for (let i = 0; i < 3; i++) {
      // Every attempt resolves again (nothing about the name is remembered) and is refused.
      expectFailed(await s.send(url, event(), SECRET), /resolves to address 127\.0\.0\.1/);
    }
    expect(calls()).toBe(4);
    expect(r.connections).toBe(0);
  });

  it.each(dbEngines)(
    'through the API on %s: 201 at creation, refused at delivery, 0 connections',
    async (engine) => {
      const r = await receiver();
      const port = new URL(r.url).port;
      const { resolver } = rebinding(['10.0.0.7', '127.0.0.1']);
      const h = await apiHarness(engine, { resolver });
      cleanups.push(() => h.close());
      const c = await h.caller();
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: {
          address: ADDR_B58,
          asset_filter: 'USDT',
          webhook_url: `https://${HOST}:${port}/hook`,
        },
      });
      expect(res.statusCode).toBe(201);
      const created = json<{ webhook_url: string; secret: string }>(res);
      const s = sender({ resolver, caFile: r.caFile });
      const attempt = await s.send(created.webhook_url, event(), created.secret);
      expectFailed(attempt, /10\.0\.0\.7 .*\(private\) \(1 of 2 answers refused\)/);
      expect(r.connections).toBe(0);
    },
  );
});

describe('creation through the API: 400 naming webhook_url and the reason', () => {
  it.each(dbEngines)('on %s', async (engine) => {
    const resolver = stubResolver({
      'private.test-public.example': ['192.168.1.10'],
      'mixed.test-public.example': [PUBLIC_TEST_ADDRESS, '10.0.0.7'],
      'alias.test-public.example': { cname: 'internal.test-public.example' },
      'internal.test-public.example': ['169.254.169.254'],
      'slow.test-public.example': { hang: true },
      'ok.test-public.example': [PUBLIC_TEST_ADDRESS],
    });
    const h = await apiHarness(engine, { resolver });
    cleanups.push(() => h.close());
    const c = await h.caller({ plan: 'pro' });
    const post = (webhook_url: string) =>
      h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: { address: ADDR_B58, asset_filter: 'USDT', webhook_url },
      });
    for (const [host, reason] of [
      [
        'private.test-public.example',
        /^host resolves to a non-public address: .*192\.168\.1\.10.*\(private\)$/,
      ],
      ['mixed.test-public.example', /10\.0\.0\.7 .*\(1 of 2 answers refused\)$/],
      ['alias.test-public.example', /169\.254\.169\.254 .*\(link-local\)$/],
      ['nowhere.test-public.example', /^host does not resolve$/],
    ] as const) {
      const res = await post(`https://${host}/hook`);
      expect(res.statusCode, host).toBe(400);
      const body = json<{ code?: string; details: Array<{ field: string; message: string }> }>(res);
      expect(body.code).toBeUndefined();
      expect(body.details).toEqual([
        { field: 'webhook_url', message: expect.stringMatching(reason) },
      ]);
    }
    expect((await post('https://ok.test-public.example/hook')).statusCode).toBe(201);
  });
});

describe('deadline, redirects, proxies', () => {
  it('holds the deadline across DNS: a resolver that never answers is a timeout, no connection', async () => {
    const r = await receiver();
    const s = sender({ resolver: resolveTo({ hang: true }), caFile: r.caFile, timeoutMs: 300 });
    const port = new URL(r.url).port;
    const res = await s.send(`https://${HOST}:${port}/hook`, event(), SECRET);
    expectFailed(res, /timeout/);
    expect(res.durationMs).toBeGreaterThanOrEqual(250);
    expect(r.connections).toBe(0);
  });

  it('a late DNS answer is never connected to', async () => {
    const r = await receiver();
    const late: Resolver = () =>
      new Promise((resolve) =>
        setTimeout(() => resolve([{ address: '127.0.0.1', family: 4 }]), 600),
      );
    const s = sender({ resolver: late, caFile: r.caFile, timeoutMs: 300 });
    const port = new URL(r.url).port;
    expectFailed(await s.send(`https://${HOST}:${port}/hook`, event(), SECRET), /timeout/);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(r.connections).toBe(0);
  });

  /** One event sent with a 300 ms deadline to a receiver that answers every request `reply`. */
  async function sendWithin300ms(reply: Reply) {
    const r = await startReceiver({ secretFor: SECRET, respond: () => reply });
    cleanups.push(() => r.close());
    const s = sender({ caFile: caFileOf(r.ca), timeoutMs: 300 });
    return { r, res: await s.send(r.url, event(), SECRET) };
  }

  it('holds the deadline across the answer: a slow receiver is a timeout', async () => {
    const { res } = await sendWithin300ms({ status: 200, delayMs: 2_000 });
    // Without the deadline this would be a 200 after 2 s, not a failure.
    expectFailed(res, /^timeout: no complete answer within 300 ms$/);
  });

  it('a 2xx status in time is an acknowledgement, even while its body is held open', async () => {
    const { r, res } = await sendWithin300ms({ status: 200, bodyDelayMs: 1_500 });
    // Counted as a timeout, the event would be delivered again (SPEC: acknowledgement = 2xx).
    // Waiting for the body would cross the 300 ms deadline and fail the send: ok proves it did not.
    expect(res).toMatchObject({ ok: true, status: 200 });
    expect(r.received).toHaveLength(1);
  });

  it('never follows a redirect: the Location target gets no connection', async () => {
    const target = await receiver();
    const r = await startReceiver({
      secretFor: SECRET,
      respond: () => ({ status: 307, headers: { location: target.url } }),
    });
    cleanups.push(() => r.close());
    const s = sender({ caFile: caFileOf(r.ca) });
    const res = await s.send(r.url, event(), SECRET);
    expect(res).toMatchObject({ ok: false, status: 307, error: 'HTTP 307: redirect not followed' });
    expect(r.requests).toBe(1);
    expect(target.connections).toBe(0);
  });

  it('ignores proxy environment variables: the proxy gets no connection', async () => {
    let proxied = 0;
    const proxy = net.createServer((sock) => {
      proxied++;
      sock.destroy();
    });
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => proxy.close(() => resolve())));
    const addr = proxy.address();
    if (addr === null || typeof addr === 'string') throw new Error('no port');
    const names = [
      'HTTPS_PROXY',
      'https_proxy',
      'HTTP_PROXY',
      'http_proxy',
      'ALL_PROXY',
      'all_proxy',
    ];
    const saved = names.map((n) => [n, process.env[n]] as const);
    const restore = () => {
      for (const [n, v] of saved) {
        if (v === undefined) delete process.env[n];
        else process.env[n] = v;
      }
    };
    try {
      for (const n of names) process.env[n] = `http://127.0.0.1:${addr.port}`;
      const named = await namedReceiver(HOST);
      const s = sender({ resolver: resolveTo(['127.0.0.1']), caFile: named.caFile });
      const res = await s.send(`https://${HOST}:${named.port}/hook`, event(), SECRET);
      expect(res).toMatchObject({ ok: true, status: 200 });
      expect(named.connections).toBe(1);
      expect(proxied).toBe(0);
    } finally {
      restore();
    }
  });
});
