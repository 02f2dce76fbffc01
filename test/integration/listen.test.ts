/**
 * `tronwatch listen --forward-to <url>` (issue 32 item 6), end to end on both engines: the API
 * served on a real port, the real CLI (src/main.ts) as a child process reading
 * GET /v1/events/stream, a real test deposit (POST /v1/test/transfers), and a local plain-http
 * receiver that verifies X-Signature with the watch's secret on the exact bytes received. Each
 * environment's listener forwards its own events only; bad input and a revoked key end it.
 */
import http from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { createApiKey, revokeApiKey } from '../../src/accounts/keys.js';
import { verifySignature } from '../../src/devnet/receiver.js';
import {
  type ApiHarness,
  apiHarness,
  type Caller,
  insertEvents,
  json,
  webhookWatch,
} from '../helpers/api.js';
import { spawnCli } from '../helpers/cli.js';
import { dbEngines } from '../helpers/db.js';

interface Got {
  headers: http.IncomingHttpHeaders;
  body: Buffer;
  verified: boolean;
}

/** A local plain-http receiver (what a developer runs on localhost) verifying with `secret`. */
async function localReceiver(secretOf: () => string, status: (n: number) => number) {
  const got: Got[] = [];
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const verified = verifySignature(secretOf(), body, req.headers['x-signature']);
      got.push({ headers: req.headers, body, verified });
      res.writeHead(verified ? status(got.length) : 401).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  return {
    got,
    url: `http://127.0.0.1:${port}/hook`,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

/** The CLI as a child process; its stdout lines and stderr collected. */
function listen(args: string[], env: Record<string, string>) {
  const child = spawnCli(['listen', ...args], env);
  const lines: string[] = [];
  let err = '';
  let buf = '';
  child.stdout?.on('data', (d: Buffer) => {
    buf += d.toString();
    for (let i = buf.indexOf('\n'); i >= 0; i = buf.indexOf('\n')) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  });
  child.stderr?.on('data', (d: Buffer) => {
    err += d.toString();
  });
  const exit = new Promise<number | null>((r) => child.on('exit', (c) => r(c)));
  return { child, lines, stderr: () => err, exit };
}

async function until(what: string, cond: () => boolean, detail: () => string, ms = 30_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n${detail()}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe.each(dbEngines)('tronwatch listen on %s', (engine) => {
  let h: ApiHarness | undefined;
  const cleanups: Array<() => Promise<unknown> | unknown> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
    await h?.close();
    h = undefined;
  });

  async function setup() {
    h = await apiHarness(engine);
    await h.app.listen({ port: 0, host: '127.0.0.1' });
    const addr = h.app.server.address() as { port: number };
    const base = `http://127.0.0.1:${addr.port}`;
    const live = await h.caller();
    const t = await createApiKey(h.db, live.accountId, { network: 'nile' });
    const test: Caller = {
      accountId: live.accountId,
      keyId: t.id,
      key: t.key,
      headers: { authorization: `Bearer ${t.key}` },
    };
    return { h, base, live, test };
  }

  async function watch(hh: ApiHarness, c: Caller) {
    const res = await hh.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(),
    });
    expect(res.statusCode, res.body).toBe(201);
    return json<{ id: string; secret: string }>(res);
  }

  function start(base: string, key: string, forwardTo: string) {
    const l = listen(['--forward-to', forwardTo], {
      TRONWATCH_URL: base,
      TRONWATCH_API_KEY: key,
    });
    cleanups.push(async () => {
      if (l.child.exitCode === null && l.child.signalCode === null) {
        l.child.kill('SIGTERM');
        await l.exit;
      }
    });
    return l;
  }

  it('forwards a test deposit signed with the test watch’s secret, and the receiver’s status, test events only', async () => {
    const { h, base, live, test } = await setup();
    const tw = await watch(h, test);
    const lw = await watch(h, live);
    // The receiver accepts the first request and fails the second (a developer's bug).
    const r = await localReceiver(
      () => tw.secret,
      (n) => (n === 1 ? 200 : 500),
    );
    cleanups.push(r.close);
    const l = start(base, test.key, r.url);
    await until(
      'Ready',
      () => l.lines.some((x) => x.startsWith('Ready:')),
      () => l.stderr(),
    );
    expect(l.lines[0]).toContain('test-mode events (nile)');

    // A live event of the same account: never forwarded by the test listener.
    await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'live1',
      count: 1,
      start: new Date().toISOString(),
    });
    const dep = await h.app.inject({
      method: 'POST',
      url: '/v1/test/transfers',
      headers: test.headers,
      payload: { watch_id: tw.id, amount: '12.5' },
    });
    expect(dep.statusCode, dep.body).toBe(201);
    const e1 = json<{ event_id: string }>(dep);
    await until(
      'the first forward',
      () => l.lines.some((x) => x.includes(e1.event_id)),
      () => `${l.lines.join('\n')}\n${l.stderr()}`,
    );
    expect(r.got).toHaveLength(1);
    const g = r.got[0] as Got;
    expect(g.verified).toBe(true);
    expect(g.headers['tronwatch-test-mode']).toBe('true');
    expect(g.headers['x-event-id']).toBe(e1.event_id);
    expect(g.headers['content-type']).toBe('application/json');
    const body = JSON.parse(g.body.toString('utf8')) as Record<string, unknown>;
    expect(body).toMatchObject({
      event_id: e1.event_id,
      type: 'transfer.confirmed',
      network: 'nile',
      livemode: false,
      amount: '12.5',
      watch_id: tw.id,
    });
    // The bytes are the event's as GET /v1/events/{id} shows every attempt's body.
    const detail = await h.app.inject({ url: `/v1/events/${e1.event_id}`, headers: test.headers });
    expect(detail.statusCode, detail.body).toBe(200);
    expect(g.body.toString('utf8')).toBe(json<{ payload: string }>(detail).payload);
    expect(l.lines.find((x) => x.includes(e1.event_id))).toMatch(
      /transfer\.confirmed {2}evt_\S+ {2}test {2}→ 200 \(\d+ ms\)$/,
    );

    const dep2 = await h.app.inject({
      method: 'POST',
      url: '/v1/test/transfers',
      headers: test.headers,
      payload: { watch_id: tw.id, amount: '1' },
    });
    expect(dep2.statusCode, dep2.body).toBe(201);
    const e2 = json<{ event_id: string }>(dep2);
    await until(
      'the second forward',
      () => l.lines.some((x) => x.includes(e2.event_id)),
      () => `${l.lines.join('\n')}\n${l.stderr()}`,
    );
    expect(l.lines.find((x) => x.includes(e2.event_id))).toMatch(/test {2}→ 500 \(\d+ ms\)$/);
    expect(r.got).toHaveLength(2);
    expect(r.got[1]?.verified).toBe(true);
    // Nothing of the live environment reached the test listener.
    expect(r.got.map((x) => x.headers['x-event-id'])).toEqual([e1.event_id, e2.event_id]);
    expect(l.lines.join('\n')).not.toContain('evt_live1');
  }, 90_000);

  it('a live read-only key’s listener forwards live events signed with the live watch’s secret, never test ones', async () => {
    const { h, base, live, test } = await setup();
    // Listening only reads: a read-only key is served.
    const ro = await createApiKey(h.db, live.accountId, { scope: 'read' });
    const tw = await watch(h, test);
    const lw = await watch(h, live);
    const r = await localReceiver(
      () => lw.secret,
      () => 204,
    );
    cleanups.push(r.close);
    const l = start(base, ro.key, r.url);
    await until(
      'Ready',
      () => l.lines.some((x) => x.startsWith('Ready:')),
      () => l.stderr(),
    );
    expect(l.lines[0]).toContain('LIVE events (mainnet)');
    const dep = await h.app.inject({
      method: 'POST',
      url: '/v1/test/transfers',
      headers: test.headers,
      payload: { watch_id: tw.id, amount: '3' },
    });
    expect(dep.statusCode, dep.body).toBe(201);
    const [liveId] = await insertEvents(h.db, {
      accountId: live.accountId,
      watchId: lw.id,
      tag: 'live2',
      count: 1,
      start: new Date().toISOString(),
    });
    await until(
      'the live forward',
      () => l.lines.some((x) => x.includes(liveId as string)),
      () => `${l.lines.join('\n')}\n${l.stderr()}`,
    );
    expect(l.lines.find((x) => x.includes(liveId as string))).toMatch(/live {2}→ 204/);
    expect(r.got).toHaveLength(1);
    expect(r.got[0]?.verified).toBe(true);
    expect(r.got[0]?.headers['tronwatch-test-mode']).toBeUndefined();
    expect(JSON.parse(r.got[0]?.body.toString('utf8') ?? '{}')).toMatchObject({
      event_id: liveId,
      livemode: true,
      network: 'mainnet',
    });
  }, 90_000);

  it('at most 5 streams per account and environment: test streams never take the live ones', async () => {
    const { base, live, test } = await setup();
    const ends: AbortController[] = [];
    cleanups.push(() => {
      for (const a of ends) a.abort();
    });
    const open = async (c: Caller) => {
      const ac = new AbortController();
      ends.push(ac);
      const res = await fetch(`${base}/v1/events/stream`, {
        headers: c.headers,
        signal: ac.signal,
      });
      // A refusal's body is read whole; an open stream stays open until the test ends.
      const body = res.status === 200 ? '' : await res.text();
      return { status: res.status, body };
    };
    for (let i = 0; i < 5; i++) expect((await open(test)).status).toBe(200);
    const sixth = await open(test);
    expect(sixth.status).toBe(429);
    expect((JSON.parse(sixth.body) as { code?: string }).code).toBe('too_many_streams');
    // The live environment's streams are its own: all 5 open beside the test ones.
    for (let i = 0; i < 5; i++) expect((await open(live)).status).toBe(200);
    expect((await open(live)).status).toBe(429);
  }, 60_000);

  it('a revoked key ends the stream; bad settings and bad input are refused', async () => {
    const { h, base, test } = await setup();
    const r = await localReceiver(
      () => '',
      () => 200,
    );
    cleanups.push(r.close);
    const l = start(base, test.key, r.url);
    await until(
      'Ready',
      () => l.lines.some((x) => x.startsWith('Ready:')),
      () => l.stderr(),
    );
    await revokeApiKey(h.db, test.keyId);
    expect(await l.exit).toBe(2);
    expect(l.stderr()).toContain('revoked');

    const unknown = start(base, `tw_test_${'x'.repeat(40)}`, r.url);
    expect(await unknown.exit).toBe(2);
    expect(unknown.stderr()).toContain('invalid_api_key');
    const badUrl = start(base, test.key, 'ftp://127.0.0.1/hook');
    expect(await badUrl.exit).toBe(2);
    expect(badUrl.stderr()).toContain('--forward-to must be an http:// or https:// URL');

    const anon = await h.app.inject({ url: '/v1/events/stream' });
    expect(anon.statusCode).toBe(401);
    expect(json(anon).code).toBe('missing_api_key');
    const other = await h.caller();
    const bad = await h.app.inject({
      url: '/v1/events/stream?since=yesterday',
      headers: other.headers,
    });
    expect(bad.statusCode, bad.body).toBe(400);
    expect(json(bad)).toMatchObject({ error: 'invalid query parameters' });
    expect(bad.headers['x-ratelimit-limit']).toBeDefined();
  }, 90_000);
});
