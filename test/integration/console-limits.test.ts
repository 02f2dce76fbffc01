/**
 * Console login limits that hold under parallel requests and cannot be turned against a user
 * (issue 17 item 2; src/console/login-limits.ts): an attempt is counted before argon2 runs, so
 * 50 parallel guesses get 5 answers 401 and 45 answers 429; the SPEC's 5 failures per 15 minutes
 * are keyed on (client address, e-mail), so a lockout from one address leaves the e-mail usable
 * from every other; one address is bounded across e-mails too (50); a password change counts in
 * the login's windows; wrong invitation tokens are counted per client address.
 *
 * Through the real app (inject), on the in-process windows (both engines), on Redis (shared
 * windows, one atomic script per attempt), and on the in-process fallback while Redis is
 * unreachable.
 */
import { randomBytes } from 'node:crypto';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createInvite } from '../../src/accounts/credentials.js';
import { buildApp } from '../../src/api/app.js';
import { silentLogger } from '../../src/common/logger.js';
import { SecretBox } from '../../src/common/secrets.js';
import { loadConfig } from '../../src/config.js';
import { LOGIN_FAILURES, LOGIN_FAILURES_PER_ADDRESS } from '../../src/console/login-limits.js';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
} from '../../src/rate-limit/limiter.js';
import { closeRedis, createRedis, type Redis, waitReady } from '../../src/redis/client.js';
import { RedisRateLimiter } from '../../src/redis/rate-limit.js';
import { json } from '../helpers/api.js';
import { Browser, PASSWORD } from '../helpers/console.js';
import { dbEngines, type Engine, migratedDb, type TestDb } from '../helpers/db.js';

const REDIS_URL = process.env.REDIS_URL;
if (!REDIS_URL && process.env.CI === 'true') {
  throw new Error('CI=true but REDIS_URL is unset: the Redis login-limit tests must run in CI');
}

/** How many of `rs` answered each status: `{ 401: 5, 429: 45 }`. */
function tally(rs: LightMyRequestResponse[]): Record<number, number> {
  const out: Record<number, number> = {};
  for (const r of rs) out[r.statusCode] = (out[r.statusCode] ?? 0) + 1;
  return out;
}

const email = (name: string) => `${name}-${randomBytes(3).toString('hex')}@example.com`;

/** A limiter for one describe block, and what to close after it. */
interface LimiterKind {
  /** Under 40 characters: vitest cuts a longer $name (and -t filters on the cut name). */
  name: string;
  engine: Engine;
  /** Whether the attempts land on FallbackRateLimiter's in-process windows (Redis down). */
  degraded?: boolean;
  open(): Promise<{ limiter: RateLimiter; close(): Promise<void> }>;
}

/** Redis windows under a prefix of their own, removed afterwards. */
async function openRedisLimiter(url: string, waitMs: number) {
  const client: Redis = createRedis(url);
  if (waitMs > 0) await waitReady(client, waitMs);
  const prefix = `tw:test:${randomBytes(6).toString('hex')}:`;
  const limiter = new FallbackRateLimiter(new RedisRateLimiter(client, { prefix }), {
    logger: silentLogger,
  });
  return {
    limiter,
    async close() {
      if (client.status === 'ready') {
        const keys = await client.keys(`${prefix}*`);
        if (keys.length) await client.del(...keys);
      }
      await closeRedis(client);
    },
  };
}

const lastEngine = dbEngines[dbEngines.length - 1] ?? 'pglite';
const kinds: LimiterKind[] = [
  ...dbEngines.map((engine) => ({
    name: `in-process windows, ${engine}`,
    engine,
    open: async () => ({ limiter: new MemoryRateLimiter(), close: async () => {} }),
  })),
  ...(REDIS_URL
    ? [
        {
          name: `Redis windows, ${lastEngine}`,
          engine: lastEngine,
          degraded: false,
          open: () => openRedisLimiter(REDIS_URL, 2_000),
        },
        {
          // Nothing listens on port 1: every attempt lands on the in-process fallback.
          name: `Redis down: fallback, ${lastEngine}`,
          engine: lastEngine,
          degraded: true,
          open: () => openRedisLimiter('redis://127.0.0.1:1', 0),
        },
      ]
    : []),
];

/** One migrated database per engine for the whole file (each test makes its own accounts). */
const databases = new Map<Engine, Promise<TestDb>>();
afterAll(async () => {
  for (const d of databases.values()) await (await d).drop();
});

describe.each(kinds)('console login limits with $name', (kind) => {
  let t: TestDb;
  let app: FastifyInstance;
  let limits: { limiter: RateLimiter; close(): Promise<void> };
  let next = 0;
  beforeAll(async () => {
    let d = databases.get(kind.engine);
    if (!d) {
      d = migratedDb(kind.engine);
      databases.set(kind.engine, d);
    }
    t = await d;
  });
  afterEach(async () => {
    await app.close();
    await limits.close();
  });

  async function start(): Promise<void> {
    limits = await kind.open();
    app = await buildApp({
      config: loadConfig({ CONSOLE_SIGNUP: 'open' }),
      db: t.db,
      logger: silentLogger,
      secrets: new SecretBox([randomBytes(32)]),
      rateLimiter: limits.limiter,
    });
  }

  /** A browser from a fresh documentation address (198.51.100.x), its CSRF cookie set. */
  async function browser(): Promise<Browser> {
    const b = new Browser(app, 'localhost', `198.51.100.${++next}`);
    await b.get('/console/api/config');
    return b;
  }

  /** A new account with PASSWORD, signed up from an address of its own. */
  async function account(name: string): Promise<string> {
    const e = email(name);
    const res = await (await browser()).signUp(e);
    expect(res.statusCode, res.body).toBe(201);
    return e;
  }

  it('lets 5 of 50 parallel wrong passwords reach the check (401), refuses the other 45 (429)', async () => {
    await start();
    const erin = await account('erin');
    const attacker = await browser();
    const answers = await Promise.all(
      Array.from({ length: 50 }, (_, i) => attacker.login(erin, `wrong password ${i}`)),
    );
    expect(tally(answers)).toEqual({ 401: LOGIN_FAILURES, 429: 50 - LOGIN_FAILURES });
    for (const r of answers.filter((x) => x.statusCode === 429)) {
      expect(json(r).code).toBe('login_rate_limited');
      expect(Number(r.headers['retry-after'])).toBeGreaterThan(14 * 60);
    }
    // Locked for this address, the right password too; not for erin anywhere else.
    expect((await attacker.login(erin)).statusCode).toBe(429);
    expect((await (await browser()).login(erin)).statusCode).toBe(200);
    if (limits.limiter instanceof FallbackRateLimiter) {
      expect(limits.limiter.degraded).toBe(kind.degraded);
    }
  });

  it('does not lock an e-mail out from other addresses, and gives a successful attempt back', async () => {
    await start();
    const gus = await account('gus');
    const a = await browser();
    for (let i = 1; i <= 4; i++) expect((await a.login(gus, `wrong ${i}`)).statusCode).toBe(401);
    // Right: given back, so the count stays at 4 and one more failure is still answered.
    expect((await a.login(gus)).statusCode).toBe(200);
    expect((await a.login(gus, 'wrong 5')).statusCode).toBe(401);
    expect((await a.login(gus)).statusCode).toBe(429);
    // Another address: a window of its own for the same e-mail.
    const b = await browser();
    expect((await b.login(gus)).statusCode).toBe(200);
    for (let i = 1; i <= 5; i++) expect((await b.login(gus, `wrong ${i}`)).statusCode).toBe(401);
    expect((await b.login(gus)).statusCode).toBe(429);
    // Two addresses locked for gus, a third signs in; and the locked ones may try other e-mails.
    expect((await (await browser()).login(gus)).statusCode).toBe(200);
    expect((await a.login(email('nobody'), 'x')).statusCode).toBe(401);
  });

  it('bounds one address across e-mails at 50 failures, counted before the check', async () => {
    await start();
    const hal = await account('hal');
    const sprayer = await browser();
    const answers = await Promise.all(
      Array.from({ length: LOGIN_FAILURES_PER_ADDRESS + 10 }, (_, i) =>
        sprayer.login(email(`spray${i}`), 'guess'),
      ),
    );
    expect(tally(answers)).toEqual({ 401: LOGIN_FAILURES_PER_ADDRESS, 429: 10 });
    expect((await sprayer.login(hal)).statusCode).toBe(429);
    expect((await (await browser()).login(hal)).statusCode).toBe(200);
  });

  it('limits POST /console/api/password like the login, in the same windows', async () => {
    await start();
    const ivy = await account('ivy');
    const session = await browser();
    expect((await session.login(ivy)).statusCode).toBe(200);
    const change = (current: string) =>
      session.post('/console/api/password', {
        current_password: current,
        new_password: 'a brand new passphrase',
      });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => change(`wrong ${i}`)));
    expect(tally(answers)).toEqual({ 401: LOGIN_FAILURES, 429: 20 - LOGIN_FAILURES });
    const right = await change(PASSWORD);
    expect(right.statusCode).toBe(429);
    expect(json(right).code).toBe('login_rate_limited');
    // The login from this address is locked too (the same windows); from another it is not, and
    // the password was not changed.
    expect((await session.login(ivy)).statusCode).toBe(429);
    expect((await (await browser()).login(ivy)).statusCode).toBe(200);
    // A right current password from an address with room changes it and is not counted.
    const other = await browser();
    expect((await other.login(ivy)).statusCode).toBe(200);
    const ok = await other.post('/console/api/password', {
      current_password: PASSWORD,
      new_password: 'a brand new passphrase',
    });
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('counts wrong invitation tokens per client address, in parallel too', async () => {
    await start();
    const acc = await createAccount(t.db, { email: email('jo'), plan: 'free' });
    const token = await createInvite(t.db, acc.id);
    const guesser = await browser();
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        guesser.post('/console/api/invite/accept', { token: `nope${i}`, password: PASSWORD }),
      ),
    );
    expect(tally(answers)).toEqual({ 400: 5, 429: 15 });
    expect(
      (await guesser.post('/console/api/invite/accept', { token, password: PASSWORD })).statusCode,
    ).toBe(429);
    // Not one bucket for every invitation: the invited user, elsewhere, accepts it.
    const invited = await browser();
    const accepted = await invited.post('/console/api/invite/accept', {
      token,
      password: PASSWORD,
    });
    expect(accepted.statusCode, accepted.body).toBe(200);
  });
});
