/**
 * SPEC §Authentication and §Limits "Rate limit" through the HTTP app, plus the account and key
 * domain functions and the CLI functions behind `tronwatch accounts|keys`.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { createAccount, findAccountByEmail } from '../../src/accounts/accounts.js';
import { accountsCreate, keysCreate, keysList, keysRevoke } from '../../src/accounts/cli.js';
import { createApiKey, hashApiKey, listApiKeys, revokeApiKey } from '../../src/accounts/keys.js';
import { buildApp } from '../../src/api/app.js';
import { KeyCache } from '../../src/api/auth.js';
import { silentLogger } from '../../src/common/logger.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import {
  type ApiHarness,
  apiHarness,
  insertEvents,
  json,
  otherNetworkKey,
  webhookWatch,
} from '../helpers/api.js';
import { dbEngines } from '../helpers/db.js';

const LIVE_KEY_RE = /^tw_live_[1-9A-HJ-NP-Za-km-z]{24,33}$/;

describe.each(dbEngines)('API authentication on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('answers 401 missing_api_key without a Bearer header, with the rate-limit headers', async () => {
    h = await apiHarness(engine);
    for (const headers of [
      {},
      { authorization: 'Basic dXNlcjpwYXNz' },
      { authorization: 'Bearer' },
    ]) {
      const res = await h.app.inject({ url: '/v1/watches', headers });
      expect(res.statusCode).toBe(401);
      expect(json(res)).toEqual({ error: expect.any(String), code: 'missing_api_key' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
      expect(res.headers['x-ratelimit-limit']).toBe('60');
      expect(res.headers['x-ratelimit-remaining']).toMatch(/^\d+$/);
    }
  });

  it('answers 401 invalid_api_key to a malformed or unknown key', async () => {
    h = await apiHarness(engine);
    const unknown = `tw_live_${'A'.repeat(32)}`;
    for (const key of [
      'abc',
      'tw_live_',
      'tw_live_0OIl0OIl0OIl0OIl0OIl0OIl',
      `${unknown}!`,
      unknown,
    ]) {
      const res = await h.app.inject({
        url: '/v1/events',
        headers: { authorization: `Bearer ${key}` },
      });
      expect(res.statusCode, key).toBe(401);
      expect(json(res).code).toBe('invalid_api_key');
      expect(res.headers['x-ratelimit-limit']).toBe('60');
    }
  });

  it('accepts a live key and refuses it from the very next request once revoked, on every replica', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    // A second replica on the same database: no cache anywhere may serve the revoked key.
    const replica = await buildApp({
      config: h.config,
      db: h.db,
      logger: silentLogger,
      secrets: h.secrets,
      rateLimiter: new MemoryRateLimiter(),
    });
    try {
      for (const app of [h.app, replica]) {
        const ok = await app.inject({ url: '/v1/watches', headers: c.headers });
        expect(ok.statusCode).toBe(200);
      }
      const revoked = await revokeApiKey(h.db, c.keyId);
      const at = revoked?.revoked_at?.toISOString();
      expect(at).toBeDefined();
      for (const app of [h.app, replica]) {
        const res = await app.inject({ url: '/v1/watches', headers: c.headers });
        expect(res.statusCode).toBe(401);
        const body = json(res);
        expect(body.code).toBe('revoked_api_key');
        expect(body.error).toContain(at);
        expect(body.details).toEqual({ revoked_at: at });
        expect(res.headers['x-ratelimit-limit']).toBe('60');
      }
    } finally {
      await replica.close();
    }
  });

  it('serves a tw_test_ key in the test environment (issue 32); an unknown one is 401 invalid_api_key', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const test = await otherNetworkKey(h.db, c.accountId);
    expect(test.key.startsWith('tw_test_')).toBe(true);
    const served = await h.app.inject({
      url: '/v1/events',
      headers: { authorization: `Bearer ${test.key}` },
    });
    expect(served.statusCode).toBe(200);
    expect(json<{ data: unknown[] }>(served).data).toEqual([]);
    const neverIssued = `tw_test_${'B'.repeat(32)}`;
    const res = await h.app.inject({
      url: '/v1/events',
      headers: { authorization: `Bearer ${neverIssued}` },
    });
    expect(res.statusCode).toBe(401);
    expect(json<{ code: string }>(res).code).toBe('invalid_api_key');
    expect(res.headers['x-ratelimit-limit']).toBe('60');
  });

  it('limits per key at the plan rate: X-RateLimit-* on every answer, then 429 with Retry-After', async () => {
    h = await apiHarness(engine);
    const c = await h.caller({ rateLimitPerMin: 3 });
    const other = await h.caller();
    for (let i = 0; i < 3; i++) {
      const res = await h.app.inject({ url: '/v1/watches', headers: c.headers });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      expect(res.headers['x-ratelimit-remaining']).toBe(String(2 - i));
    }
    const limited = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(limited.statusCode).toBe(429);
    expect(json(limited)).toEqual({ error: expect.any(String), code: 'rate_limited' });
    expect(limited.headers['x-ratelimit-limit']).toBe('3');
    expect(limited.headers['x-ratelimit-remaining']).toBe('0');
    const retry = Number(limited.headers['retry-after']);
    expect(Number.isInteger(retry)).toBe(true);
    expect(retry).toBeGreaterThanOrEqual(1);
    expect(retry).toBeLessThanOrEqual(60);
    // Another key is counted separately, at its own plan's rate (Free: 60).
    const res = await h.app.inject({ url: '/v1/watches', headers: other.headers });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('60');
    expect(res.headers['x-ratelimit-remaining']).toBe('59');
  });

  it('uses the plan rate of the account (Pro: 300)', async () => {
    h = await apiHarness(engine);
    const c = await h.caller({ plan: 'pro' });
    const res = await h.app.inject({ url: '/v1/events', headers: c.headers });
    expect(res.headers['x-ratelimit-limit']).toBe('300');
  });

  it('counts a request refused before routing against its valid key, not the client IP', async () => {
    h = await apiHarness(engine);
    const c = await h.caller({ plan: 'pro' });
    // A bad %-encoding (400) and an over-long id (404): no route ran, but the key is valid.
    for (const [url, status, remaining] of [
      ['/v1/watches/%E0%A4%A', 400, '299'],
      [`/v1/watches/${'w'.repeat(600)}`, 404, '298'],
    ] as const) {
      const res = await h.app.inject({ url, method: 'DELETE', headers: c.headers });
      expect(res.statusCode, url).toBe(status);
      expect(res.headers['x-ratelimit-limit']).toBe('300');
      expect(res.headers['x-ratelimit-remaining']).toBe(remaining);
    }
    // The client IP's anonymous window was not touched.
    const anon = await h.app.inject({ url: '/v1/watches' });
    expect(anon.headers['x-ratelimit-remaining']).toBe('59');
    // Without a valid key it is the IP's window, as before.
    const bad = await h.app.inject({ url: '/v1/watches/%E0%A4%A', method: 'DELETE' });
    expect(bad.headers['x-ratelimit-limit']).toBe('60');
    expect(bad.headers['x-ratelimit-remaining']).toBe('58');
  });

  it('limits unauthenticated requests per client IP at the Free rate', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    for (let i = 0; i < 60; i++) {
      const res = await h.app.inject({ url: '/v1/watches' });
      expect(res.statusCode).toBe(401);
      expect(res.headers['x-ratelimit-remaining']).toBe(String(59 - i));
    }
    const limited = await h.app.inject({ url: '/v1/watches' });
    expect(limited.statusCode).toBe(429);
    expect(json(limited).code).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1);
    // Another client address is not affected, nor is a valid key from the same address.
    const elsewhere = await h.app.inject({ url: '/v1/watches', remoteAddress: '203.0.113.7' });
    expect(elsewhere.statusCode).toBe(401);
    const keyed = await h.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(keyed.statusCode).toBe(200);
  });

  it('does not rate-limit or authenticate /healthz and /docs', async () => {
    h = await apiHarness(engine);
    for (const url of ['/healthz', '/docs/openapi.json']) {
      const res = await h.app.inject({ url });
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBeUndefined();
    }
  });
});

describe.each(dbEngines)('the key cache of GET /v1/events on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  /** A Pro caller with one watch and `events` events, on an app using `cache`. */
  async function setup(cache: KeyCache, events: number) {
    h = await apiHarness(engine, { keyCache: cache });
    const c = await h.caller({ plan: 'pro' });
    const created = await h.app.inject({
      method: 'POST',
      url: '/v1/watches',
      headers: c.headers,
      payload: webhookWatch(),
    });
    expect(created.statusCode).toBe(201);
    const watchId = String(json(created).id);
    if (events > 0) {
      await insertEvents(h.db, {
        accountId: c.accountId,
        watchId,
        tag: 'kc',
        count: events,
        start: '2026-01-08T00:00:00Z',
      });
    }
    return { c, watchId };
  }

  it('serves a cached caller and refuses it from the next request once revoked, whatever it asks', async () => {
    const cache = new KeyCache();
    const { c, watchId } = await setup(cache, 3);
    const h1 = h as ApiHarness;
    const replicaCache = new KeyCache();
    const replica = await buildApp({
      config: h1.config,
      db: h1.db,
      logger: silentLogger,
      secrets: h1.secrets,
      rateLimiter: new MemoryRateLimiter(),
      keyCache: replicaCache,
    });
    try {
      for (const app of [h1.app, replica]) {
        // The first page looks the key up and caches it; the second is served from the cache.
        for (let i = 0; i < 2; i++) {
          const res = await app.inject({ url: '/v1/events', headers: c.headers });
          expect(res.statusCode).toBe(200);
          expect(json<{ data: unknown[] }>(res).data).toHaveLength(3);
        }
      }
      expect(cache.size).toBe(1);
      expect(replicaCache.size).toBe(1);

      const revoked = await revokeApiKey(h1.db, c.keyId);
      const at = revoked?.revoked_at?.toISOString();
      // Every way a cached caller can be answered: a page with rows, an empty page (since),
      // another watch's empty page, a malformed watch id, an invalid query (400 before the
      // statement). Each must be the revocation's 401, on both replicas.
      const queries = [
        '',
        '?since=2027-01-01T00:00:00Z',
        `?watch_id=${watchId.replace(/.$/, (x) => (x === '0' ? '1' : '0'))}`,
        '?watch_id=nonsense',
        '?limit=0',
        '?limit=10&bogus=1',
      ];
      for (const app of [h1.app, replica]) {
        for (const q of queries) {
          // Put the caller back in the cache each time, as a replica that has not seen the
          // revocation would have it.
          const cacheOf = app === replica ? replicaCache : cache;
          cacheOf.set(hashApiKey(c.key), {
            keyId: c.keyId,
            accountId: c.accountId,
            network: 'mainnet',
            role: 'owner',
            plan: 'pro',
            limits: { name: 'Pro', requestsPerMinute: 300, activeWatches: 100 },
            verified: true,
          });
          const res = await app.inject({ url: `/v1/events${q}`, headers: c.headers });
          expect(res.statusCode, q).toBe(401);
          expect(json(res).code, q).toBe('revoked_api_key');
          expect(json(res).details, q).toEqual({ revoked_at: at });
          // The lookup that found the revocation dropped the entry.
          expect(cacheOf.size, q).toBe(0);
        }
      }
    } finally {
      await replica.close();
    }
  });

  it('answers a revoked cached caller whose window is full with 401, not 429', async () => {
    const cache = new KeyCache();
    h = await apiHarness(engine, { keyCache: cache });
    const c = await h.caller({ plan: 'business', rateLimitPerMin: 2 });
    for (let i = 0; i < 2; i++) {
      expect((await h.app.inject({ url: '/v1/events', headers: c.headers })).statusCode).toBe(200);
    }
    expect((await h.app.inject({ url: '/v1/events', headers: c.headers })).statusCode).toBe(429);
    await revokeApiKey(h.db, c.keyId);
    const res = await h.app.inject({ url: '/v1/events', headers: c.headers });
    expect(res.statusCode).toBe(401);
    expect(json(res).code).toBe('revoked_api_key');
  });

  it('never caches an unknown or revoked key, and other routes always look the key up', async () => {
    const cache = new KeyCache();
    const { c } = await setup(cache, 0);
    const h1 = h as ApiHarness;
    const unknown = `tw_live_${'B'.repeat(32)}`;
    const res = await h1.app.inject({
      url: '/v1/events',
      headers: { authorization: `Bearer ${unknown}` },
    });
    expect(json(res).code).toBe('invalid_api_key');
    expect(cache.size).toBe(1); // the caller's own key, cached by setup's POST; not the unknown one
    expect(cache.get(hashApiKey(unknown))).toBeUndefined();
    // /v1/watches ignores the cache: its answer reflects a revocation even with the entry there.
    await revokeApiKey(h1.db, c.keyId);
    expect(cache.get(hashApiKey(c.key))).toBeDefined();
    const watches = await h1.app.inject({ url: '/v1/watches', headers: c.headers });
    expect(json(watches).code).toBe('revoked_api_key');
    expect(cache.size).toBe(0);
  });

  it('applies a change of limits within the TTL on the cached route, at once elsewhere', async () => {
    let now = 1_000_000;
    const cache = new KeyCache({ ttlMs: 10_000, now: () => now });
    h = await apiHarness(engine, { keyCache: cache });
    const c = await h.caller({ plan: 'business', rateLimitPerMin: 1_000 });
    const limitOf = async (url: string) =>
      (await (h as ApiHarness).app.inject({ url, headers: c.headers })).headers[
        'x-ratelimit-limit'
      ];
    expect(await limitOf('/v1/events')).toBe('1000');
    await h.db.query('UPDATE accounts SET rate_limit_per_min = 2000 WHERE id = $1', [c.accountId]);
    expect(await limitOf('/v1/events')).toBe('1000'); // cached
    expect(await limitOf('/v1/watches')).toBe('2000'); // looked up (and re-caches)
    expect(await limitOf('/v1/events')).toBe('2000');
    await h.db.query('UPDATE accounts SET rate_limit_per_min = 3000 WHERE id = $1', [c.accountId]);
    now += 10_000;
    expect(await limitOf('/v1/events')).toBe('3000'); // expired: looked up again
  });
});

describe('KeyCache', () => {
  const auth = (keyId: string) => ({
    keyId,
    accountId: 'acc_1',
    network: 'mainnet',
    role: 'owner' as const,
    plan: 'free' as const,
    limits: { name: 'Free', requestsPerMinute: 60, activeWatches: 3 },
    verified: true,
  });

  it('returns entries unverified until their TTL, and keeps at most maxEntries', () => {
    let now = 0;
    const cache = new KeyCache({ ttlMs: 100, maxEntries: 2, now: () => now });
    cache.set('a', auth('k_a'));
    expect(cache.get('a')).toEqual({ ...auth('k_a'), verified: false });
    now = 99;
    expect(cache.get('a')?.keyId).toBe('k_a');
    now = 100;
    expect(cache.get('a')).toBeUndefined();
    cache.set('a', auth('k_a'));
    cache.set('b', auth('k_b'));
    cache.set('c', auth('k_c'));
    expect(cache.size).toBe(2);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('c')?.keyId).toBe('k_c');
  });
});

describe.each(dbEngines)('accounts and API keys on %s', (engine) => {
  let h: ApiHarness | undefined;
  afterEach(async () => {
    await h?.close();
    h = undefined;
  });

  it('issues tw_live_ keys of ≥128 random bits, storing only their SHA-256 and a display prefix', async () => {
    h = await apiHarness(engine);
    const acc = await createAccount(h.db, { email: 'Alice@Example.com ', plan: 'Starter' });
    expect(acc).toMatchObject({
      email: 'alice@example.com',
      plan: 'starter',
      rate_limit_per_min: null,
    });
    expect(acc.id).toMatch(/^acc_/);
    expect(await findAccountByEmail(h.db, 'ALICE@example.com')).toEqual(acc);

    const keys = await Promise.all(
      [1, 2, 3].map(() => createApiKey(h!.db, acc.id, { name: 'ci' })),
    );
    expect(new Set(keys.map((k) => k.key)).size).toBe(3);
    for (const k of keys) {
      expect(k.key).toMatch(LIVE_KEY_RE);
      expect(k.prefix).toBe(k.key.slice(0, 12));
      expect(k.id).toMatch(/^key_/);
    }
    const k = keys[0]!;
    const { rows } = await h.db.query<Record<string, unknown>>(
      'SELECT * FROM api_keys WHERE id = $1',
      [k.id],
    );
    expect(rows[0]?.key_hash).toBe(createHash('sha256').update(k.key).digest('hex'));
    expect(rows[0]?.key_hash).toBe(hashApiKey(k.key));
    expect(rows[0]?.key_prefix).toBe(k.prefix);
    expect(JSON.stringify(rows)).not.toContain(k.key);

    const listed = await listApiKeys(h.db, acc.id);
    expect(listed).toHaveLength(3);
    expect(JSON.stringify(listed)).not.toContain(k.key.slice(12));
    expect(listed[0]).not.toHaveProperty('key_hash');
  });

  it('revokes idempotently, keeping the first revocation time', async () => {
    h = await apiHarness(engine);
    const c = await h.caller();
    const first = await revokeApiKey(h.db, c.keyId);
    const second = await revokeApiKey(h.db, c.keyId);
    expect(first?.revoked_at).toBeInstanceOf(Date);
    expect(second?.revoked_at?.getTime()).toBe(first?.revoked_at?.getTime());
    expect(await revokeApiKey(h.db, 'key_00000000000000000000000000')).toBeUndefined();
  });

  it('refuses bad account input', async () => {
    h = await apiHarness(engine);
    await createAccount(h.db, { email: 'bob@example.com', plan: 'free' });
    await expect(createAccount(h.db, { email: 'BOB@example.com', plan: 'free' })).rejects.toThrow(
      /already exists/,
    );
    await expect(createAccount(h.db, { email: 'not-an-email', plan: 'free' })).rejects.toThrow(
      /e-mail/,
    );
    await expect(createAccount(h.db, { email: 'c@example.com', plan: 'gold' })).rejects.toThrow(
      /unknown plan/,
    );
    await expect(
      createAccount(h.db, { email: 'd@example.com', plan: 'business', rateLimitPerMin: 0 }),
    ).rejects.toThrow(/rate limit/);
  });

  it('backs the CLI: accounts create, keys create/list/revoke by e-mail or id', async () => {
    h = await apiHarness(engine);
    const acc = await accountsCreate(h.db, {
      email: 'ops@example.com',
      plan: 'business',
      rateLimit: '5000',
      watchQuota: '25000',
    });
    expect(acc).toMatchObject({
      email: 'ops@example.com',
      plan: 'business',
      rate_limit_per_min: 5000,
      watch_quota: 25000,
    });
    expect(typeof acc.created_at).toBe('string');

    const byEmail = await keysCreate(h.db, { account: 'ops@example.com', name: 'prod' });
    const byId = await keysCreate(h.db, { account: acc.id });
    expect(byEmail.key).toMatch(LIVE_KEY_RE);
    expect(byEmail).toMatchObject({ account_id: acc.id, name: 'prod', network: 'mainnet' });
    expect(byId.name).toBeNull();

    // The key works against the API, at the account's own rate.
    const res = await h.app.inject({
      url: '/v1/watches',
      headers: { authorization: `Bearer ${byEmail.key}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-ratelimit-limit']).toBe('5000');

    const list = await keysList(h.db, { account: acc.id });
    expect(list.keys.map((k) => k.id).sort()).toEqual([byEmail.id, byId.id].sort());
    expect(JSON.stringify(list)).not.toContain(byEmail.key);
    // Made by the operator: the CLI's, with the owner role (issue 27).
    expect(list.keys.map((k) => [k.made_by, k.role])).toEqual([
      ['cli', 'owner'],
      ['cli', 'owner'],
    ]);

    const revoked = await keysRevoke(h.db, { keyId: byEmail.id });
    expect(revoked.revoked_at).toMatch(/Z$/);
    const again = await keysRevoke(h.db, { keyId: byEmail.id });
    expect(again.revoked_at).toBe(revoked.revoked_at);

    await expect(keysCreate(h.db, { account: 'nobody@example.com' })).rejects.toThrow(/no account/);
    await expect(keysList(h.db, { account: 'acc_00000000000000000000000000' })).rejects.toThrow(
      /no account/,
    );
    await expect(keysRevoke(h.db, { keyId: 'nope' })).rejects.toThrow(/no API key/);
    await expect(
      accountsCreate(h.db, { email: 'x@example.com', plan: 'free', rateLimit: 'ten' }),
    ).rejects.toThrow(/--rate-limit/);
  });
});
