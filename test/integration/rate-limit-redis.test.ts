/**
 * SPEC §Limits "Rate limit" on real Redis (DESIGN §Redis, decisions): the sliding window shared
 * by every API replica (src/redis/rate-limit.ts, src/redis/sliding-window.lua), and the
 * in-process fallback while Redis is unreachable (src/rate-limit/limiter.ts FallbackRateLimiter).
 *
 * Needs REDIS_URL (skipped with a warning when unset, fails under CI=true). The two-process test
 * also needs DATABASE_URL (PostgreSQL: two processes cannot share an in-memory PGlite).
 * Every test writes under its own random key prefix, so parallel files never share a window.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createApiKey } from '../../src/accounts/keys.js';
import { buildApp } from '../../src/api/app.js';
import type { Logger } from '../../src/common/logger.js';
import { FallbackRateLimiter, WINDOW_MS } from '../../src/rate-limit/limiter.js';
import {
  closeRedis,
  createRedis,
  pingRedis,
  type Redis,
  waitReady,
} from '../../src/redis/client.js';
import { RedisRateLimiter } from '../../src/redis/rate-limit.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import { spawnCli } from '../helpers/cli.js';
import { migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

const REDIS_URL = process.env.REDIS_URL;

if (!REDIS_URL) {
  if (process.env.CI === 'true')
    throw new Error('CI=true but REDIS_URL is unset: the Redis rate-limit tests must run in CI');
  console.warn('REDIS_URL is unset: Redis rate-limit tests skipped');
}

/** A fresh key prefix: no other test or file ever touches these windows. */
const freshPrefix = () => `tw:test:${randomBytes(6).toString('hex')}:`;

/** A logger whose warn+ lines land in `lines` (parsed). */
function capturingLogger(): { logger: Logger; lines: { msg: string; level: number }[] } {
  const lines: { msg: string; level: number }[] = [];
  const logger = pino(
    { level: 'warn' },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as { msg: string; level: number });
      },
    },
  );
  return { logger, lines };
}

/** The Redis server clock, ms (what the script reads with TIME). */
async function redisNowMs(redis: Redis): Promise<number> {
  const [s, us] = await redis.time();
  return Number(s) * 1000 + Math.floor(Number(us) / 1000);
}

describe.skipIf(!REDIS_URL)('Redis sliding window', () => {
  let redis: Redis;
  let prefix: string;
  const opened: Redis[] = [];

  beforeAll(async () => {
    redis = createRedis(REDIS_URL ?? '');
    expect(await waitReady(redis, 5_000)).toBe(true);
  });
  afterEach(async () => {
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await Promise.all(opened.splice(0).map(closeRedis));
  });
  afterAll(async () => {
    await closeRedis(redis);
  });

  const limiter = () => {
    prefix = freshPrefix();
    return new RedisRateLimiter(redis, { prefix });
  };

  it('slides: a burst right after a minute boundary is refused (a fixed minute would reset)', async () => {
    // Placed exactly with the script's time argument: 10 requests at hh:mm:59.5, 10 at
    // hh:(mm+1):00.5. A fixed per-minute counter would allow the second burst (a new minute,
    // 20 requests in 1 s); the sliding window refuses all of it until the first burst is 60 s old.
    const rl = limiter();
    const minute = 29_000_000 * 60_000; // a minute boundary (ms since the epoch)
    for (let i = 0; i < 10; i++) {
      expect((await rl.hit('key:a', 10, minute - 500)).remaining).toBe(9 - i);
    }
    for (let i = 0; i < 10; i++) {
      expect(await rl.hit('key:a', 10, minute + 500)).toEqual({
        allowed: false,
        limit: 10,
        remaining: 0,
        retryAfterSeconds: 59,
      });
    }
    // Refused requests were not recorded: the set still holds the 10 accepted ones.
    expect(await redis.zcard(`${prefix}key:a`)).toBe(10);
    // 1 ms before the first burst is 60 s old: still full; at exactly 60 s it has left.
    const r = await rl.hit('key:a', 10, minute + 59_499);
    expect(r).toMatchObject({ allowed: false, retryAfterSeconds: 1 });
    for (let i = 0; i < 10; i++)
      expect((await rl.hit('key:a', 10, minute + 59_500)).allowed).toBe(true);
    expect((await rl.hit('key:a', 10, minute + 59_500)).allowed).toBe(false);
  });

  it('slides on the Redis clock: 10 requests, 1.5 s later 10 more, all refused until the first leave', async () => {
    // The production path (no time argument: Redis TIME). This proves that the entries carry
    // the server's time and that Retry-After counts from the FIRST burst (58–59 s after a 1.5 s
    // wait). Whether a fixed minute boundary fell in the gap depends on the wall clock; the test
    // above places one there exactly.
    const rl = limiter();
    const before = await redisNowMs(redis);
    for (let i = 0; i < 10; i++) expect((await rl.hit('key:b', 10)).allowed).toBe(true);
    const after = await redisNowMs(redis);
    const scores = (await redis.zrange(`${prefix}key:b`, 0, -1, 'WITHSCORES'))
      .filter((_, i) => i % 2 === 1)
      .map(Number);
    expect(scores).toHaveLength(10);
    for (const s of scores) {
      expect(s).toBeGreaterThanOrEqual(before);
      expect(s).toBeLessThanOrEqual(after);
    }
    await sleep(1_500);
    for (let i = 0; i < 10; i++) {
      const r = await rl.hit('key:b', 10);
      expect(r.allowed).toBe(false);
      expect(r.retryAfterSeconds).toBeGreaterThanOrEqual(57);
      expect(r.retryAfterSeconds).toBeLessThanOrEqual(59);
    }
    expect(await redis.zcard(`${prefix}key:b`)).toBe(10);
    const ttl = await redis.pttl(`${prefix}key:b`);
    expect(ttl).toBeGreaterThan(WINDOW_MS - 5_000);
    expect(ttl).toBeLessThanOrEqual(WINDOW_MS);
  });

  it('gives Retry-After as the whole seconds until the freeing entry leaves the window', async () => {
    const rl = limiter();
    for (const t of [1_000, 2_000, 3_000]) expect((await rl.hit('key:c', 3, t)).allowed).toBe(true);
    // Oldest at 1 000 leaves at 61 000: 29.5 s from 31 500 → 30.
    expect((await rl.hit('key:c', 3, 31_500)).retryAfterSeconds).toBe(30);
    expect((await rl.hit('key:c', 3, 60_999)).retryAfterSeconds).toBe(1);
    // A lowered limit (1) with 3 in the window: room when the newest (3 000) leaves → 31.5 s → 32.
    expect((await rl.hit('key:c', 1, 31_500)).retryAfterSeconds).toBe(32);
    // A clock stepping back never records before the newest entry.
    expect((await rl.hit('key:d', 2, 10_000)).allowed).toBe(true);
    expect((await rl.hit('key:d', 2, 9_000)).allowed).toBe(true);
    expect(
      (await redis.zrange(`${prefix}key:d`, 0, -1, 'WITHSCORES')).filter((_, i) => i % 2),
    ).toEqual(['10000', '10000']);
  });

  it('reserves in several windows at once, all or nothing, and gives a reservation back', async () => {
    const rl = limiter();
    const pair = { id: 'login:{a}:e', limit: 2, windowMs: 900_000 };
    const address = { id: 'login-ip:{a}', limit: 3, windowMs: 900_000 };
    const first = await rl.reserve([pair, address], 1_000);
    // remaining: the room the first window has left after this entry (the sign-in page's warning).
    expect(first).toMatchObject({ allowed: true, retryAfterSeconds: 0, remaining: 1 });
    expect(await rl.reserve([pair, address], 2_000)).toMatchObject({ allowed: true, remaining: 0 });
    // The pair is full: refused, and the address window is not charged (2 entries, not 3).
    expect(await rl.reserve([pair, address], 3_000)).toMatchObject({
      allowed: false,
      retryAfterSeconds: 898, // the entry at 1 000 leaves at 901 000
    });
    expect(await redis.zcard(`${prefix}login-ip:{a}`)).toBe(2);
    // Given back: gone from both windows, once.
    await first.release();
    await first.release();
    expect(await redis.zcard(`${prefix}login:{a}:e`)).toBe(1);
    expect(await redis.zcard(`${prefix}login-ip:{a}`)).toBe(1);
    expect((await rl.reserve([pair, address], 4_000)).allowed).toBe(true);
    // Each key expires when its newest entry leaves its window.
    const ttl = await redis.pttl(`${prefix}login:{a}:e`);
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(900_000);
  });

  it('lets exactly `limit` of 50 concurrent reservations through, on the Redis clock', async () => {
    const rl = limiter();
    const w = [
      { id: 'login:{b}:e', limit: 5, windowMs: 900_000 },
      { id: 'login-ip:{b}', limit: 50, windowMs: 900_000 },
    ];
    const all = await Promise.all(Array.from({ length: 50 }, () => rl.reserve(w)));
    expect(all.filter((r) => r.allowed)).toHaveLength(5);
    for (const r of all.filter((x) => !x.allowed)) {
      expect(r.retryAfterSeconds).toBeGreaterThan(898);
      expect(r.retryAfterSeconds).toBeLessThanOrEqual(900);
    }
    expect(await redis.zcard(`${prefix}login:{b}:e`)).toBe(5);
    expect(await redis.zcard(`${prefix}login-ip:{b}`)).toBe(5);
  });

  it('fails fast when Redis is unreachable (the fallback then answers)', async () => {
    const dead = createRedis('redis://127.0.0.1:1');
    opened.push(dead);
    const rl = new RedisRateLimiter(dead, { prefix: freshPrefix() });
    // Rejects rather than queueing the command until Redis comes back (which would never settle).
    await expect(rl.hit('key:e', 3)).rejects.toThrow();
    expect(await pingRedis(dead)).toBe(false);
  });
});

describe.skipIf(!REDIS_URL)('Redis rate limits through the HTTP API', () => {
  let h: ApiHarness | undefined;
  let app: FastifyInstance | undefined;
  let redis: Redis | undefined;
  let prefix = '';
  const clients: Redis[] = [];
  const servers: net.Server[] = [];

  // One database for the describe (each test makes its own account, key and app).
  beforeAll(async () => {
    h = await apiHarness('pglite');
  });
  afterAll(async () => {
    await h?.close();
  });
  afterEach(async () => {
    await app?.close();
    app = undefined;
    if (redis) {
      const keys = await redis.keys(`${prefix}*`);
      if (keys.length) await redis.del(...keys);
    }
    await Promise.all(clients.splice(0).map(closeRedis));
    await Promise.all(
      servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))),
    );
    redis = undefined;
  });

  /** The app on its own database, limited by `rateLimiter`, checking `redisCheck`. */
  async function appWith(
    url: string,
    opts: { logger?: Logger; probeIntervalMs?: number } = {},
  ): Promise<{ app: FastifyInstance; limiter: FallbackRateLimiter; client: Redis }> {
    if (!h) throw new Error('no harness');
    const client = createRedis(url);
    clients.push(client);
    await waitReady(client, 2_000);
    prefix = freshPrefix();
    const limiter = new FallbackRateLimiter(new RedisRateLimiter(client, { prefix }), {
      logger: opts.logger ?? capturingLogger().logger,
      ...(opts.probeIntervalMs !== undefined ? { probeIntervalMs: opts.probeIntervalMs } : {}),
    });
    app = await buildApp({
      config: h.config,
      db: h.db,
      logger: pino({ level: 'silent' }),
      secrets: h.secrets,
      rateLimiter: limiter,
      redisCheck: () => pingRedis(client),
    });
    return { app, limiter, client };
  }

  it('lets exactly `limit` of 50 concurrent requests through (Business, 10/min)', async () => {
    const { app, client } = await appWith(REDIS_URL ?? '');
    redis = client;
    const c = await h?.caller({ plan: 'business', rateLimitPerMin: 10 });
    if (!c) throw new Error('no harness');
    const answers = await Promise.all(
      Array.from({ length: 50 }, () => app.inject({ url: '/v1/watches', headers: c.headers })),
    );
    const codes = answers.map((r) => r.statusCode);
    expect(codes.filter((s) => s === 200)).toHaveLength(10);
    expect(codes.filter((s) => s === 429)).toHaveLength(40);
    for (const r of answers) expect(r.headers['x-ratelimit-limit']).toBe('10');
    // Each accepted request saw a different count: remaining 9, 8, …, 0 once each.
    const remaining = answers
      .filter((r) => r.statusCode === 200)
      .map((r) => Number(r.headers['x-ratelimit-remaining']))
      .sort((a, b) => a - b);
    expect(remaining).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    expect(await client.zcard(`${prefix}key:${c.keyId}`)).toBe(10);
    const health = await app.inject({ url: '/healthz' });
    expect(health.statusCode).toBe(200);
    expect(json(health).checks).toEqual({ postgres: true, redis: true });
  });

  it('answers 429 with a Retry-After within a second of when the oldest request leaves', async () => {
    const { app, client } = await appWith(REDIS_URL ?? '');
    redis = client;
    const c = await h?.caller({ plan: 'business', rateLimitPerMin: 3 });
    if (!c) throw new Error('no harness');
    for (let i = 0; i < 3; i++) {
      expect((await app.inject({ url: '/v1/watches', headers: c.headers })).statusCode).toBe(200);
    }
    await sleep(1_200);
    const limited = await app.inject({ url: '/v1/watches', headers: c.headers });
    const now = await redisNowMs(client);
    expect(limited.statusCode).toBe(429);
    expect(json(limited).code).toBe('rate_limited');
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    const retry = Number(limited.headers['retry-after']);
    expect(Number.isInteger(retry)).toBe(true);
    const [, oldest] = await client.zrange(`${prefix}key:${c.keyId}`, 0, 0, 'WITHSCORES');
    const exact = (Number(oldest) + WINDOW_MS - now) / 1000;
    expect(Math.abs(retry - exact)).toBeLessThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(59);
  });

  it('keeps serving on the in-process window when Redis is unreachable; /healthz 503', async () => {
    const { logger, lines } = capturingLogger();
    const { app, limiter } = await appWith('redis://127.0.0.1:1', { logger });
    const c = await h?.caller({ plan: 'business', rateLimitPerMin: 3 });
    if (!c) throw new Error('no harness');
    for (let i = 0; i < 3; i++) {
      const res = await app.inject({ url: '/v1/watches', headers: c.headers });
      expect(res.statusCode).toBe(200);
      // The first request's failure switches to the in-process window: the next ones do not wait
      // for Redis again (at most one probe per second).
      expect(limiter.degraded).toBe(true);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(2 - i));
    }
    const limited = await app.inject({ url: '/v1/watches', headers: c.headers });
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(58);
    expect(limiter.degraded).toBe(true);
    // Logged once, not once per request.
    expect(lines.filter((l) => /unreachable/.test(l.msg))).toHaveLength(1);
    const health = await app.inject({ url: '/healthz' });
    expect(health.statusCode).toBe(503);
    expect(json(health)).toMatchObject({ ok: false, checks: { postgres: true, redis: false } });
  });

  it('falls back when Redis goes away and returns to it when it comes back', async () => {
    // A TCP relay in front of the real Redis, closed and reopened on the same port.
    const sockets = new Set<net.Socket>();
    const target = new URL(REDIS_URL ?? '');
    const relay = () =>
      net.createServer((inbound) => {
        const outbound = net.connect(Number(target.port || 6379), target.hostname);
        for (const s of [inbound, outbound]) {
          sockets.add(s);
          s.on('close', () => sockets.delete(s));
          s.on('error', () => s.destroy());
        }
        inbound.pipe(outbound).pipe(inbound);
      });
    let server = relay();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    const port = address.port;
    const relayUrl = new URL(REDIS_URL ?? '');
    relayUrl.hostname = '127.0.0.1';
    relayUrl.port = String(port);

    const { logger, lines } = capturingLogger();
    const { app, limiter } = await appWith(relayUrl.toString(), { logger, probeIntervalMs: 100 });
    const direct = createRedis(REDIS_URL ?? '');
    clients.push(direct);
    redis = direct;
    expect(await waitReady(direct, 5_000)).toBe(true);
    const c = await h?.caller({ plan: 'business', rateLimitPerMin: 100 });
    if (!c) throw new Error('no harness');
    const key = `${prefix}key:${c.keyId}`;
    const get = () => app.inject({ url: '/v1/watches', headers: c.headers });

    expect((await get()).statusCode).toBe(200);
    expect(await direct.zcard(key)).toBe(1);
    expect(limiter.degraded).toBe(false);

    // Redis goes away.
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of sockets) s.destroy();
    });
    await sleep(50);
    for (let i = 0; i < 5; i++) expect((await get()).statusCode).toBe(200);
    expect(limiter.degraded).toBe(true);
    expect(await direct.zcard(key)).toBe(1); // counted in process, not in Redis
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(503);

    // Redis comes back on the same address; the client reconnects within ~1 s.
    server = relay();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
    const deadline = Date.now() + 5_000;
    while (limiter.degraded && Date.now() < deadline) {
      expect((await get()).statusCode).toBe(200);
      await sleep(100);
    }
    expect(limiter.degraded).toBe(false);
    expect((await get()).statusCode).toBe(200);
    expect(await direct.zcard(key)).toBeGreaterThanOrEqual(3); // the probe and this one
    expect((await app.inject({ url: '/healthz' })).statusCode).toBe(200);
    expect(lines.map((l) => l.msg)).toEqual([
      expect.stringMatching(/unreachable/),
      expect.stringMatching(/reachable again/),
    ]);
  });
});

describe.skipIf(!REDIS_URL || !POSTGRES_URL)('two API processes share one window', () => {
  let t: TestDb | undefined;
  const children: ChildProcess[] = [];
  let redis: Redis | undefined;

  afterAll(async () => {
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve();
            const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
            child.once('exit', () => {
              clearTimeout(kill);
              resolve();
            });
            child.kill('SIGTERM');
          }),
      ),
    );
    if (redis) await closeRedis(redis);
    await t?.drop();
  });

  /** Start `tronwatch api` and resolve with its URL (from its "api listening" log line). */
  function startApi(env: Record<string, string>): Promise<string> {
    const child = spawnCli(['api'], env);
    children.push(child);
    return new Promise((resolve, reject) => {
      let buf = '';
      const timer = setTimeout(() => reject(new Error(`api did not start: ${buf}`)), 30_000);
      child.stderr?.on('data', (d: Buffer) => {
        buf += d.toString();
        for (const line of buf.split('\n')) {
          if (!line.startsWith('{')) continue;
          try {
            const rec = JSON.parse(line) as { msg?: string; url?: string };
            if (rec.msg === 'api listening' && rec.url) {
              clearTimeout(timer);
              resolve(rec.url);
            }
          } catch {
            // a partial line: wait for the rest
          }
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`api exited with ${code}: ${buf}`));
      });
    });
  }

  // Two processes boot tsx, migrations and pools: allow for a loaded CI machine.
  it('allows `limit` requests in total, split between the processes', {
    timeout: 120_000,
  }, async () => {
    t = await migratedDb('postgres');
    const acc = await createAccount(t.db, {
      email: `two-${randomBytes(3).toString('hex')}@example.com`,
      plan: 'business',
      rateLimitPerMin: 10,
    });
    const k = await createApiKey(t.db, acc.id);
    const env = {
      DATABASE_URL: t.url ?? '',
      REDIS_URL: REDIS_URL ?? '',
      HOST: '127.0.0.1',
      PORT: '0',
      LOG_LEVEL: 'info',
      SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
    };
    const urls = await Promise.all([startApi(env), startApi(env)]);
    const allowed = [0, 0];
    const refused = [0, 0];
    // Alternate: with a window per process each would allow 10 (20 in all).
    for (let i = 0; i < 30; i++) {
      const p = i % 2;
      const res = await fetch(`${urls[p]}/v1/watches`, {
        headers: { authorization: `Bearer ${k.key}` },
      });
      await res.arrayBuffer();
      expect(res.headers.get('x-ratelimit-limit')).toBe('10');
      if (res.status === 200) allowed[p] = (allowed[p] ?? 0) + 1;
      else {
        expect(res.status).toBe(429);
        expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(59);
        refused[p] = (refused[p] ?? 0) + 1;
      }
    }
    expect(allowed).toEqual([5, 5]);
    expect(refused).toEqual([10, 10]);
    redis = createRedis(REDIS_URL ?? '');
    await waitReady(redis, 2_000);
    expect(await redis.zcard(`tw:rl:key:${k.id}`)).toBe(10);
    await redis.del(`tw:rl:key:${k.id}`);
    for (const url of urls) {
      const health = await fetch(`${url}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toMatchObject({ checks: { redis: true } });
    }
  });
});
