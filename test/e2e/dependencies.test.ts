/**
 * Alive while a dependency is not (issue 17 item 6; DESIGN decisions "Postgres unreachable",
 * "Redis unreachable"), under real `tronwatch` processes and throwaway servers of their own
 * (test/helpers/servers.ts: the machine's shared PostgreSQL and Redis are never stopped):
 * - PostgreSQL down when `serve` starts: the process waits (logged once), listens at once with
 *   /healthz 503 `{ ok: false, checks: { postgres: false, …, started: false } }` and every other
 *   route 503; once PostgreSQL is started it migrates, starts every role, ingests and delivers
 *   each event exactly once. A `worker` stopped (SIGTERM) while it waits exits 0.
 * - Redis down when `api` starts: it serves at once on in-process windows, says so once at start,
 *   /healthz 503 with `redis: false`; back on Redis once it is started (its windows appear there);
 *   a stop while Redis is down again exits 0 at once.
 * - PostgreSQL SIGKILLed (the postmaster, no shutdown) under `serve`: /healthz 503, /v1 500
 *   meanwhile, no crash, and a `worker` (re)started during the outage waits; after the restart
 *   (crash recovery) ingest resumes where it stopped and every event is stored and delivered
 *   exactly once (two workers sharing the outbox), those delivered before the kill not again.
 * Waits poll the database, the processes' logs or the receiver; no timing assertions.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { PLAN_LIMITS } from '../../src/accounts/plans.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import { migrate } from '../../src/db/migrate.js';
import { type Db, openDb, type Queryable } from '../../src/db/pool.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import { closeRedis, createRedis, waitReady } from '../../src/redis/client.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  nodeEnv,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
} from '../helpers/chain.js';
import { type LoggedProcess, startLogged, terminate, untilOrExit } from '../helpers/cli.js';
import { migratedDb, POSTGRES_URL } from '../helpers/db.js';
import { insertAccount } from '../helpers/outbox.js';
import {
  throwawayPostgres,
  throwawayRedis,
  throwawayServersAvailable,
} from '../helpers/servers.js';

const available = throwawayServersAvailable();
if (!available)
  console.warn('dependencies.test.ts skipped: initdb/postgres or redis-server missing');

const ACCEPTING = 'api accepting connections: only /healthz answers until started';
/** Bound of a wait for processes to boot (tsx compiles src/ at each start: slow on a loaded machine). */
const BOOT_MS = 90_000;

const cleanup: Array<() => Promise<void>> = [];
const live: ChildProcess[] = [];
afterAll(async () => {
  for (const c of live) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  for (const c of cleanup.reverse()) await c().catch(() => undefined);
});

function start(name: string, args: string[], env: Record<string, string>): LoggedProcess {
  const p = startLogged(name, args, env);
  live.push(p.child);
  return p;
}

function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-deps-'));
  cleanup.push(async () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

/** An HTTP answer; a request that takes more than 8 s fails the test (a hang). */
async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: Record<string, unknown> }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(8_000) });
  return {
    status: res.status,
    headers: res.headers,
    body: (await res.json()) as Record<string, unknown>,
  };
}

/** The API's URL, from the line logged at listen (before the start completes) or once started. */
function apiUrl(p: LoggedProcess): string {
  const line = p.logs.find((l) => l.msg === ACCEPTING || l.msg === 'api listening');
  return typeof line?.url === 'string' ? line.url : '';
}

async function count(db: Queryable, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(sql);
  return rows[0]?.n ?? 0;
}

const delivered = (db: Queryable) =>
  count(db, "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'DELIVERED'");

async function cursorOf(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ block_number: number }>(
    'SELECT block_number FROM chain_cursor',
  );
  return rows[0]?.block_number ?? 0;
}

/**
 * What a `serve` process delivering a synthetic chain needs: the chain (blocks revealed by
 * `chain.node.advanceTo`), an HTTPS receiver, and the environment; the watches are inserted by
 * `watch(db)` once the database is migrated.
 */
async function deliverySetup(seed: number, firstBlock: number) {
  const CHAIN = { seed, firstBlock, txPerBlock: 300, addresses: 1_500, count: 20 };
  const chain: SyntheticChain = await serveSynthetic(CHAIN, { intervalMs: 0 });
  cleanup.push(() => chain.node.close());
  const key = randomBytes(32);
  const secret = newWebhookSecret();
  const receiver: Receiver = await startReceiver({ secretFor: secret });
  cleanup.push(() => receiver.close());
  const dir = tmpDir();
  const caFile = path.join(dir, 'receiver-ca.pem');
  fs.writeFileSync(caFile, receiver.ca);
  const env = (databaseUrl: string): Record<string, string> => ({
    DATABASE_URL: databaseUrl,
    REDIS_URL: '',
    DATA_DIR: dir,
    SECRET_ENCRYPTION_KEY: key.toString('hex'),
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
    WEBHOOK_CA_FILE: caFile,
    DELIVERY_POLL_MS: '50',
    ...nodeEnv(chain.node),
    // One replay node: router logs are provider-proof, and this test counts every delivery
    // (their hold: held-provider-proof.test.ts). The operator's documented opt-in.
    TRON_DELIVER_PROVIDER_PROOF: '1',
    INGEST_START_BLOCK: String(chain.first),
    TRON_BLOCK_INTERVAL_MS: '100',
    HOST: '127.0.0.1',
    PORT: '0',
  });
  /** Eight webhook watches on the chain's busiest addresses; returns the expected events. */
  const watch = async (db: Queryable) => {
    const accountId = await insertAccount(db, 'scale');
    const watches = await insertSyntheticWatches(
      db,
      accountId,
      syntheticAddresses(CHAIN).slice(0, 8),
      {
        activeFrom: chain.first - 1,
        webhookUrl: receiver.url,
        secret: new SecretBox([key]).encrypt(secret),
      },
    );
    const apiKey = await createApiKey(db, accountId);
    const expected = expectedEvents(chain.transfers, watches).map(eventKey).sort();
    return { expected, auth: { authorization: `Bearer ${apiKey.key}` } };
  };
  return { chain, receiver, env, watch };
}

/** A pool of the test's own on `url` (it reconnects by itself after a restart). */
async function testPool(url: string): Promise<Db> {
  const db = await openDb({ url, embeddedDir: '', poolSize: 2 });
  cleanup.push(() => db.close());
  return db;
}

describe.skipIf(!available)('a dependency down (throwaway servers)', () => {
  it('PostgreSQL down at start: /healthz 503 meanwhile, then a full start, every event ingested and delivered once', async () => {
    const pg = await throwawayPostgres({ start: false });
    cleanup.push(() => pg.close());
    const s = await deliverySetup(61, 77_000_000);
    // Debug: the retries are logged at debug level, the episode once at warn.
    const serve = start('serve', ['serve'], { ...s.env(pg.url()), LOG_LEVEL: 'debug' });
    // A second process, stopped while it waits: a clean stop, not a failed start.
    const worker = start('worker', ['worker'], s.env(pg.url()));
    await untilOrExit(
      'listening, and waiting for PostgreSQL',
      () =>
        serve.has(ACCEPTING) &&
        serve.count('PostgreSQL still unreachable') >= 2 &&
        worker.has('PostgreSQL unreachable: waiting to start'),
      [serve, worker],
      BOOT_MS,
    );
    expect(await terminate(worker)).toBe(0);
    expect(worker.has('stopped before the start completed')).toBe(true);
    const api = apiUrl(serve);
    const health = await get(`${api}/healthz`);
    expect({ status: health.status, body: health.body }).toEqual({
      status: 503,
      body: {
        ok: false,
        network: 'mainnet',
        checks: { postgres: false, redis: true, started: false },
      },
    });
    const v1 = await get(`${api}/v1/events`, { authorization: `Bearer tw_live_${'a'.repeat(43)}` });
    expect(v1.status).toBe(503);
    expect(v1.headers.get('retry-after')).toBe('5');
    expect(typeof v1.body.error).toBe('string');
    // Counted against the client IP's window (no key can be looked up yet), headers included.
    expect(v1.headers.get('x-ratelimit-limit')).toBe(String(PLAN_LIMITS.free.requestsPerMinute));
    expect(serve.count('PostgreSQL unreachable: waiting to start')).toBe(1); // once per episode
    expect(serve.has('tronwatch running') || serve.has('api listening')).toBe(false);

    await pg.start();
    await untilOrExit('started', () => serve.has('tronwatch running'), [serve], BOOT_MS);
    expect(serve.count('PostgreSQL reachable: starting')).toBe(1);
    expect(serve.count('PostgreSQL unreachable: waiting to start')).toBe(1);
    const db = await testPool(pg.url());
    const { expected, auth } = await s.watch(db);
    expect(expected.length).toBeGreaterThan(10);
    expect((await get(`${api}/healthz`)).status).toBe(200);
    s.chain.node.advanceTo(s.chain.last);
    await untilOrExit(
      'every notification delivered',
      async () =>
        (await cursorOf(db)) === s.chain.last && (await delivered(db)) === expected.length,
      [serve],
      60_000,
    );
    expect(await storedEventKeys(db)).toEqual(expected);
    expect(await count(db, 'SELECT count(*)::int8 AS n FROM notifications')).toBe(expected.length);
    expect(s.receiver.countsByEvent.size).toBe(expected.length);
    expect([...s.receiver.countsByEvent.values()].every((n) => n === 1)).toBe(true);
    expect((await get(`${api}/v1/events`, auth)).status).toBe(200);
    expect(await terminate(serve)).toBe(0);
  }, 240_000);

  it.skipIf(!POSTGRES_URL)(
    'Redis down at start: serves at once on in-process windows, said once; back on Redis when it is up',
    async () => {
      const redis = await throwawayRedis({ start: false });
      cleanup.push(() => redis.close());
      const t = await migratedDb('postgres');
      cleanup.push(() => t.drop());
      const accountId = await insertAccount(t.db, 'pro');
      const auth = { authorization: `Bearer ${(await createApiKey(t.db, accountId)).key}` };
      const api = start('api', ['api'], {
        DATABASE_URL: t.url ?? '',
        REDIS_URL: redis.url,
        DATA_DIR: tmpDir(),
        HOST: '127.0.0.1',
        PORT: '0',
      });
      await untilOrExit('api running', () => api.has('tronwatch running'), [api], BOOT_MS);
      const down = 'redis unreachable: rate limits fall back to in-process windows (per replica)';
      const back = 'redis reachable again: rate limits are shared between replicas again';
      // Said at start, before any request needed a window.
      expect(api.count(down)).toBe(1);
      const base = apiUrl(api);
      const health = await get(`${base}/healthz`);
      expect({ status: health.status, body: health.body }).toEqual({
        status: 503,
        body: { ok: false, network: 'mainnet', checks: { postgres: true, redis: false } },
      });
      for (let i = 0; i < 3; i++) {
        const r = await get(`${base}/v1/events`, auth);
        expect(r.status).toBe(200);
        expect(r.headers.get('x-ratelimit-remaining')).toBe(String(299 - i)); // Pro: 300/min
      }
      expect(api.count(down)).toBe(1);

      await redis.start();
      await untilOrExit('healthz 200', async () => (await get(`${base}/healthz`)).status === 200, [
        api,
      ]);
      // The first request that tries Redis (at most one a second while down) switches back.
      await untilOrExit(
        'a request back on Redis',
        async () => (await get(`${base}/v1/events`, auth)).status === 200 && api.count(back) > 0,
        [api],
      );
      expect(api.count(back)).toBe(1);
      const direct = createRedis(redis.url);
      cleanup.push(() => closeRedis(direct));
      expect(await waitReady(direct, 5_000)).toBe(true);
      expect(await direct.keys('tw:rl:key:*')).toHaveLength(1); // the window is in Redis again

      // Down again, then a stop: clean and prompt (no reconnect timer left to outlive it).
      await redis.stop();
      await untilOrExit('healthz 503', async () => (await get(`${base}/healthz`)).status === 503, [
        api,
      ]);
      expect(await terminate(api)).toBe(0);
      expect(api.has('a handle is still open after the stop; exiting anyway')).toBe(false);
    },
    180_000,
  );

  it('PostgreSQL SIGKILLed mid-run: 503/500 meanwhile, no crash, then ingest and delivery resume, nothing lost or doubled', async () => {
    const pg = await throwawayPostgres();
    cleanup.push(() => pg.close());
    const db = await testPool(pg.url());
    await migrate(db);
    const s = await deliverySetup(62, 78_000_000);
    const { expected, auth } = await s.watch(db);
    expect(expected.length).toBeGreaterThan(10);
    const serve = start('serve', ['serve'], s.env(pg.url()));
    await untilOrExit('serve running', () => serve.has('tronwatch running'), [serve], BOOT_MS);
    const api = apiUrl(serve);
    const half = s.chain.first + 9;
    s.chain.node.advanceTo(half);
    // The first half ingested and every one of its notifications delivered: nothing in flight.
    await untilOrExit(
      'first half delivered',
      async () =>
        (await cursorOf(db)) === half &&
        (await count(
          db,
          "SELECT count(*)::int8 AS n FROM notifications WHERE status <> 'DELIVERED'",
        )) === 0,
      [serve],
      60_000,
    );
    const before = new Map(s.receiver.countsByEvent);
    expect(before.size).toBeGreaterThan(0);

    await pg.kill();
    s.chain.node.advanceTo(s.chain.last); // blocks keep coming while the database is away
    await untilOrExit('the ingest leader stops', () => serve.count('ingest leadership lost') > 0, [
      serve,
    ]);
    const health = await get(`${api}/healthz`);
    expect(health.status).toBe(503);
    expect(health.body.checks).toMatchObject({ postgres: false, redis: true });
    expect(await get(`${api}/v1/events`, auth)).toMatchObject({
      status: 500,
      body: { error: 'internal server error' },
    });
    // A worker (re)started by its supervisor during the outage waits instead of exiting.
    const worker = start('worker', ['worker'], s.env(pg.url()));
    await untilOrExit(
      'the leader lock retried, the new worker waiting',
      () =>
        serve.count('ingest leader lock: database unreachable') >= 2 &&
        worker.has('PostgreSQL unreachable: waiting to start'),
      [serve, worker],
      BOOT_MS,
    );

    await pg.start(); // crash recovery
    await untilOrExit(
      'ingest and delivery resumed to the end',
      async () =>
        (await cursorOf(db)) === s.chain.last && (await delivered(db)) === expected.length,
      [serve, worker],
      60_000,
    );
    // serve alone can finish the work before the waiting worker's next probe of PostgreSQL: the
    // worker must still start, whenever that probe comes (it retries, never exits).
    await untilOrExit(
      'the waiting worker started',
      () => worker.has('tronwatch running'),
      [worker],
      BOOT_MS,
    );
    expect(await storedEventKeys(db)).toEqual(expected);
    expect(await count(db, 'SELECT count(*)::int8 AS n FROM notifications')).toBe(expected.length);
    expect(s.receiver.countsByEvent.size).toBe(expected.length);
    expect([...s.receiver.countsByEvent.values()].every((n) => n === 1)).toBe(true);
    for (const [id, n] of before) expect(s.receiver.countsByEvent.get(id)).toBe(n);
    expect((await get(`${api}/healthz`)).status).toBe(200);
    expect(await terminate(worker)).toBe(0);
    expect(await terminate(serve)).toBe(0);
  }, 240_000);
});
