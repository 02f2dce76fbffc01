/**
 * The client's address behind a proxy (issue 17 item 1; docs/operating.md "Running several processes",
 * TRUST_PROXY): every limit keyed on the client's address (the per-address window of
 * unauthenticated /v1 callers, console login failures, sign-ups, invitation tokens), the sessions
 * list and the request log use the address a TRUSTED proxy forwarded, and never an
 * X-Forwarded-For sent by anyone else. Through the real app (inject, with the socket peer set),
 * on both engines.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createInvite } from '../../src/accounts/credentials.js';
import { buildApp } from '../../src/api/app.js';
import { SecretBox } from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import { json } from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

/** The proxy's address, inside TRUST_PROXY's range. */
const PROXY = '10.0.0.1';
const TRUSTED = { TRUST_PROXY: '10.0.0.0/24', CONSOLE_SIGNUP: 'open' };
/** Unauthenticated /v1 requests allowed per client address per minute (the Free rate). */
const ANON_LIMIT = 60;

describe.each(dbEngines)('the client address behind a proxy on %s', (engine) => {
  let t: TestDb;
  const apps: FastifyInstance[] = [];
  beforeAll(async () => {
    t = await migratedDb(engine);
  });
  afterEach(async () => {
    await Promise.all(apps.splice(0).map((a) => a.close()));
  });
  afterAll(async () => {
    await t.drop();
  });

  /** The app on this file's database with its own in-process windows; its log lines kept. */
  async function appWith(env: Record<string, string>) {
    const lines: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'info' },
      { write: (l: string) => void lines.push(JSON.parse(l)) },
    );
    const app = await buildApp({
      config: loadConfig(env),
      db: t.db,
      logger,
      secrets: new SecretBox([randomBytes(32)]),
      rateLimiter: new MemoryRateLimiter(),
    });
    apps.push(app);
    /** The `client_ip` of every 'request completed' line for `url`. */
    const loggedClients = (url: string) =>
      lines.filter((l) => l.msg === 'request completed' && l.path === url).map((l) => l.client_ip);
    return { app, loggedClients };
  }

  /** GET /v1/watches without a key from socket peer `peer`, with `xff` as X-Forwarded-For. */
  const anon = (app: FastifyInstance, peer: string, xff?: string) =>
    app.inject({
      url: '/v1/watches',
      remoteAddress: peer,
      headers: xff === undefined ? {} : { 'x-forwarded-for': xff },
    });

  const statuses = (rs: LightMyRequestResponse[]) => rs.map((r) => r.statusCode);

  /** `n` unauthenticated requests, one after another; their statuses. */
  async function anonRun(n: number, send: (i: number) => Promise<LightMyRequestResponse>) {
    const out: LightMyRequestResponse[] = [];
    for (let i = 0; i < n; i++) out.push(await send(i));
    return statuses(out);
  }

  const email = (name: string) => `${name}-${randomBytes(3).toString('hex')}@example.com`;

  it('gives two clients behind one trusted proxy their own /v1 window, login lockout, sign-ups, invitation limit and log lines', async () => {
    const { app, loggedClients } = await appWith(TRUSTED);
    const A = '198.51.100.1';
    const B = '198.51.100.2';

    // Unauthenticated /v1: A uses up its window; B, behind the same proxy, has its own.
    expect(await anonRun(ANON_LIMIT, () => anon(app, PROXY, A))).toEqual(
      Array(ANON_LIMIT).fill(401),
    );
    expect((await anon(app, PROXY, A)).statusCode).toBe(429);
    // A forged address A puts in front is kept by the proxy, which appends the one it saw.
    expect((await anon(app, PROXY, `203.0.113.99, ${A}`)).statusCode).toBe(429);
    const b = await anon(app, PROXY, B);
    expect(b.statusCode).toBe(401);
    expect(b.headers['x-ratelimit-remaining']).toBe(String(ANON_LIMIT - 1));
    // Two trusted hops (an edge proxy 10.0.0.9, then 10.0.0.1): the client is the address before them.
    expect((await anon(app, PROXY, `${A}, 10.0.0.9`)).statusCode).toBe(429);
    expect((await anon(app, PROXY, '198.51.100.5, 10.0.0.9')).statusCode).toBe(401);
    expect(new Set(loggedClients('/v1/watches'))).toEqual(new Set([A, B, '198.51.100.5']));

    // Console: A locks itself out of erin's account; B, behind the same proxy, signs in.
    const erin = email('erin');
    const via = (client: string) =>
      new Browser(app, 'localhost', PROXY, { 'x-forwarded-for': client });
    expect((await via('198.51.100.3').signUp(erin)).statusCode).toBe(201);
    const a = via(A);
    for (let i = 1; i <= 5; i++) expect((await a.login(erin, `wrong ${i}`)).statusCode).toBe(401);
    expect((await a.login(erin)).statusCode).toBe(429);
    const bBrowser = via(B);
    expect((await bBrowser.login(erin)).statusCode).toBe(200);
    // The session is listed with the client's address, not the proxy's.
    const sessions = json<{ data: Array<{ ip: string; current: boolean }> }>(
      await bBrowser.get('/console/api/sessions'),
    );
    expect(sessions.data.find((s) => s.current)?.ip).toBe(B);
    expect(loggedClients('/console/api/login')).toEqual([A, A, A, A, A, A, B]);

    // Sign-ups: 10 per client address.
    const c = '198.51.100.4';
    for (let i = 0; i < 10; i++) expect((await via(c).signUp(email('s'))).statusCode).toBe(201);
    expect((await via(c).signUp(email('s'))).statusCode).toBe(429);
    expect((await via('198.51.100.6').signUp(email('s'))).statusCode).toBe(201);

    // Invitation tokens: A's wrong tokens close A's window only.
    const invited = await createAccount(t.db, { email: email('ivy'), plan: 'free' });
    const token = await createInvite(t.db, invited.id);
    await a.get('/console/api/config');
    for (let i = 1; i <= 5; i++) {
      const wrong = await a.post('/console/api/invite/accept', {
        token: `nope${i}`,
        password: PASSWORD,
      });
      expect(json(wrong).code).toBe('invalid_invite');
    }
    expect(
      (await a.post('/console/api/invite/accept', { token, password: PASSWORD })).statusCode,
    ).toBe(429);
    const d = via('198.51.100.7');
    await d.get('/console/api/config');
    const accepted = await d.post('/console/api/invite/accept', { token, password: PASSWORD });
    expect(accepted.statusCode, accepted.body).toBe(200);
  });

  it('believes no X-Forwarded-For from a peer that is not a trusted proxy', async () => {
    const { app, loggedClients } = await appWith(TRUSTED);
    const X = '192.0.2.50';
    // X connects directly and forges a new X-Forwarded-For on every request: one window still.
    expect(await anonRun(ANON_LIMIT, (i) => anon(app, X, `203.0.113.${i + 1}`))).toEqual(
      Array(ANON_LIMIT).fill(401),
    );
    expect((await anon(app, X, '203.0.113.200')).statusCode).toBe(429);
    expect(new Set(loggedClients('/v1/watches'))).toEqual(new Set([X]));
    // The same client through the proxy is the same client: its window is full.
    expect((await anon(app, PROXY, X)).statusCode).toBe(429);
    expect(loggedClients('/v1/watches').at(-1)).toBe(X);
    // A peer just outside TRUST_PROXY's range (10.0.1.1) is not trusted either.
    expect(await anonRun(ANON_LIMIT, (i) => anon(app, '10.0.1.1', `203.0.113.${i + 1}`))).toEqual(
      Array(ANON_LIMIT).fill(401),
    );
    expect((await anon(app, '10.0.1.1', '198.51.100.99')).statusCode).toBe(429);

    // The console: X's failures are X's, whatever it forges.
    const fay = email('fay');
    expect(
      (
        await new Browser(app, 'localhost', PROXY, { 'x-forwarded-for': '198.51.100.8' }).signUp(
          fay,
        )
      ).statusCode,
    ).toBe(201);
    for (let i = 1; i <= 5; i++) {
      const forged = new Browser(app, 'localhost', X, { 'x-forwarded-for': `203.0.113.${i}` });
      expect((await forged.login(fay, `wrong ${i}`)).statusCode).toBe(401);
    }
    const again = new Browser(app, 'localhost', X, { 'x-forwarded-for': '203.0.113.77' });
    expect((await again.login(fay)).statusCode).toBe(429);
    expect(
      (await new Browser(app, 'localhost', PROXY, { 'x-forwarded-for': X }).login(fay)).statusCode,
    ).toBe(429);

    // TRUST_PROXY unset: nobody is trusted, not even a proxy on loopback.
    const plain = await appWith({});
    expect(
      await anonRun(ANON_LIMIT, (i) => anon(plain.app, '127.0.0.1', `203.0.113.${i + 1}`)),
    ).toEqual(Array(ANON_LIMIT).fill(401));
    expect((await anon(plain.app, '127.0.0.1', '198.51.100.10')).statusCode).toBe(429);
    expect(new Set(plain.loggedClients('/v1/watches'))).toEqual(new Set(['127.0.0.1']));
  });

  it('counts an IPv6 client by its /64, directly and behind an IPv6 proxy', async () => {
    const { app } = await appWith({ TRUST_PROXY: 'fd00::1' });
    // Every request from a new address of one /64: still one window.
    expect(
      await anonRun(ANON_LIMIT, (i) => anon(app, `2001:db8:1:2::${(i + 1).toString(16)}`)),
    ).toEqual(Array(ANON_LIMIT).fill(401));
    expect((await anon(app, '2001:db8:1:2:ffff::1')).statusCode).toBe(429);
    expect((await anon(app, 'fd00::1', '2001:db8:1:2::abcd')).statusCode).toBe(429);
    // The next /64 is another client.
    expect((await anon(app, '2001:db8:1:3::1')).statusCode).toBe(401);
    expect((await anon(app, 'fd00::1', '2001:db8:1:4::1')).statusCode).toBe(401);
  });
});
