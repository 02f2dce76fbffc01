/**
 * Dependencies failing under real processes (DESIGN decisions "Postgres unreachable", "Redis
 * unreachable"; ingest never skips a block):
 * - PostgreSQL behind a TCP proxy that is cut for a while under `tronwatch serve`: /healthz
 *   answers 503 (checks.postgres false) and /v1 answers 500 {"error":"internal server error"}
 *   while cut, never hanging; the ingest leader stops when its lock connection breaks; after
 *   the restore, ingest and delivery resume by themselves: every expected event exactly once,
 *   every notification delivered exactly once.
 * - Redis (when REDIS_URL is set) behind a proxy cut under `tronwatch api`: /v1 keeps answering
 *   (in-process windows), /healthz says 503 with checks.redis false, then 200 after the restore.
 * - The TRON node: answers that time out, HTTP 503, `{}`, then no node at all (closed, and a new
 *   one started on the same port later): the ingester retries the same block, never passes it,
 *   /healthz still says 200 (PostgreSQL is fine), and in the end every event exists exactly once.
 * Waits poll the database, the processes' logs or the fault counters; no timing assertions.
 */
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import type { Queryable } from '../../src/db/pool.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import {
  type ExpectedEvent,
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  nodeEnv,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
} from '../helpers/chain.js';
import { type LoggedProcess, startLogged, terminate as term, untilOrExit } from '../helpers/cli.js';
import { migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';
import { insertAccount } from '../helpers/outbox.js';
import { startTcpProxy } from '../helpers/tcp-proxy.js';

if (!POSTGRES_URL) console.warn('faults.test.ts skipped: DATABASE_URL is unset (needs PostgreSQL)');
const REDIS_URL = process.env.REDIS_URL;

type Proc = LoggedProcess;

/** Start a logged process and register it for the final kill. */
function start(name: string, args: string[], env: Record<string, string>): Proc {
  const p = startLogged(name, args, env);
  live.push({ child: p.child });
  return p;
}

/** An HTTP answer; a request that takes more than 8 s fails the test (a hang). */
async function get(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(url, { headers, signal: AbortSignal.timeout(8_000) });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

const live: Array<{ child: ChildProcess }> = [];
const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const p of live) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  for (const c of cleanup.reverse()) await c();
});

function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-faults-'));
  cleanup.push(async () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

/** Insert webhook watches on the first `n` synthetic addresses (secret encrypted by `box`). */
async function insertWatches(
  db: Queryable,
  opts: {
    chain: { seed: number; addresses: number; firstBlock: number };
    n: number;
    box: SecretBox;
    url: string;
    secret: string;
  },
): Promise<{ accountId: string; watches: TestWatch[] }> {
  const accountId = await insertAccount(db, 'scale');
  const enc = opts.box.encrypt(opts.secret);
  const watches = await insertSyntheticWatches(
    db,
    accountId,
    syntheticAddresses(opts.chain).slice(0, opts.n),
    {
      activeFrom: opts.chain.firstBlock - 1,
      webhookUrl: opts.url,
      secret: enc,
    },
  );
  return { accountId, watches };
}

/** The stored events as sorted keys, and their total count (duplicates would show). */
async function storedEvents(db: Queryable): Promise<string[]> {
  return storedEventKeys(db);
}

function keys(expected: ExpectedEvent[]): string[] {
  return expected.map(eventKey).sort();
}

async function cursorOf(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ block_number: number }>(
    'SELECT block_number FROM chain_cursor',
  );
  return rows[0]?.block_number ?? 0;
}

async function count(db: Queryable, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(sql);
  return rows[0]?.n ?? 0;
}

describe.skipIf(!POSTGRES_URL)('faults under real processes (PostgreSQL)', () => {
  it('PostgreSQL cut mid-run: 503/500 while cut, then ingest and delivery resume, nothing lost or doubled', async () => {
    const CHAIN = {
      seed: 41,
      firstBlock: 75_000_000,
      txPerBlock: 300,
      addresses: 1_500,
      count: 30,
    };
    const t: TestDb = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const pgUrl = new URL(t.url ?? '');
    const proxy = await startTcpProxy({ host: pgUrl.hostname, port: Number(pgUrl.port || 5432) });
    cleanup.push(() => proxy.close());
    const chain = await serveSynthetic(CHAIN, { intervalMs: 0 });
    cleanup.push(() => chain.node.close());
    const key = randomBytes(32);
    const secret = newWebhookSecret();
    const receiver: Receiver = await startReceiver({ secretFor: secret });
    cleanup.push(() => receiver.close());
    const dir = tmpDir();
    const caFile = path.join(dir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);
    const { accountId, watches } = await insertWatches(t.db, {
      chain: CHAIN,
      n: 8,
      box: new SecretBox([key]),
      url: receiver.url,
      secret,
    });
    const apiKey = await createApiKey(t.db, accountId);
    const auth = { authorization: `Bearer ${apiKey.key}` };
    const expected = expectedEvents(chain.transfers, watches);
    expect(expected.length).toBeGreaterThan(20);

    const serve = start('serve', ['serve'], {
      DATABASE_URL: proxy.via(t.url ?? ''),
      DATA_DIR: dir,
      SECRET_ENCRYPTION_KEY: key.toString('hex'),
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      WEBHOOK_TIMEOUT_MS: '2000', // lease 22 s: a claim lost in the cut is retried within the test
      // A lost claim counts as a failed attempt, retried on the schedule after its lease: 1 m → 0.6 s.
      DELIVERY_SCHEDULE_SCALE: '0.01',
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
    await untilOrExit('serve running', () => serve.count('tronwatch running') > 0, [serve]);
    const line = serve.logs.find((l) => l.msg === 'api listening');
    const api = typeof line?.url === 'string' ? line.url : '';
    expect((await get(`${api}/healthz`)).status).toBe(200);

    chain.node.advanceTo(chain.first + 12);
    await untilOrExit(
      'first blocks ingested and delivered',
      async () => (await cursorOf(t.db)) >= chain.first + 12 && receiver.countsByEvent.size > 0,
      [serve],
    );

    proxy.cut();
    chain.node.advanceTo(chain.last); // blocks keep coming while the database is away
    await untilOrExit('the ingest leader stops', () => serve.count('ingest leadership lost') > 0, [
      serve,
    ]);
    let health = await get(`${api}/healthz`);
    expect(health.status).toBe(503);
    expect(health.body.checks).toMatchObject({ postgres: false });
    const v1 = await get(`${api}/v1/events`, auth);
    expect(v1).toEqual({ status: 500, body: { error: 'internal server error' } });
    // Stay cut until every part has tried and failed to reach the database a few times.
    await untilOrExit(
      'reconnects refused',
      () => proxy.refused >= 10 && serve.count('ingest leader lock: database unreachable') >= 2,
      [serve],
    );
    expect((await get(`${api}/v1/events`, auth)).status).toBe(500);

    proxy.restore();
    await untilOrExit('healthz 200', async () => (await get(`${api}/healthz`)).status === 200, [
      serve,
    ]);
    health = await get(`${api}/healthz`);
    expect(health.body.checks).toMatchObject({ postgres: true });
    await untilOrExit(
      'ingest resumes to the end',
      async () => (await cursorOf(t.db)) === chain.last,
      [serve],
    );
    await untilOrExit(
      'every notification delivered',
      async () =>
        (await count(
          t.db,
          "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'DELIVERED'",
        )) === expected.length,
      [serve],
      60_000,
    );
    expect(serve.count('ingest leader acquired')).toBeGreaterThanOrEqual(2); // re-elected itself
    expect(await storedEvents(t.db)).toEqual(keys(expected));
    expect(await count(t.db, 'SELECT count(*)::int8 AS n FROM notifications')).toBe(
      expected.length,
    );
    expect(receiver.countsByEvent.size).toBe(expected.length);
    expect([...receiver.countsByEvent.values()].every((n) => n === 1)).toBe(true);
    expect((await get(`${api}/v1/events`, auth)).status).toBe(200);
    expect(await term(serve)).toBe(0);
  }, 90_000);

  it.skipIf(!REDIS_URL)(
    'Redis cut: the API keeps answering, /healthz tells',
    async () => {
      const t = await migratedDb('postgres');
      cleanup.push(() => t.drop());
      const redisUrl = new URL(REDIS_URL ?? '');
      const proxy = await startTcpProxy({
        host: redisUrl.hostname,
        port: Number(redisUrl.port || 6379),
      });
      cleanup.push(() => proxy.close());
      const accountId = await insertAccount(t.db, 'pro');
      const apiKey = await createApiKey(t.db, accountId);
      const auth = { authorization: `Bearer ${apiKey.key}` };
      const api = start('api', ['api'], {
        DATABASE_URL: t.url ?? '',
        REDIS_URL: proxy.via(REDIS_URL ?? ''),
        DATA_DIR: tmpDir(),
        HOST: '127.0.0.1',
        PORT: '0',
      });
      await untilOrExit('api running', () => api.count('tronwatch running') > 0, [api]);
      const line = api.logs.find((l) => l.msg === 'api listening');
      const base = typeof line?.url === 'string' ? line.url : '';
      expect((await get(`${base}/healthz`)).status).toBe(200);
      expect((await get(`${base}/v1/events`, auth)).status).toBe(200);

      proxy.cut();
      await untilOrExit('healthz 503 with redis false', async () => {
        const h = await get(`${base}/healthz`);
        return h.status === 503 && (h.body.checks as { redis?: boolean }).redis === false;
      }, [api]);
      for (let i = 0; i < 5; i++) {
        const r = await get(`${base}/v1/events`, auth); // bounded: a hang fails the test
        expect(r.status).toBe(200);
      }
      proxy.restore();
      await untilOrExit('healthz 200', async () => (await get(`${base}/healthz`)).status === 200, [
        api,
      ]);
      expect((await get(`${base}/v1/events`, auth)).status).toBe(200);
      expect(await term(api)).toBe(0);
    },
    60_000,
  );

  it('TRON node timeouts, 503s, empty answers and absence: the same block is retried, then every event exactly once', async () => {
    const CHAIN = {
      seed: 43,
      firstBlock: 76_000_000,
      txPerBlock: 300,
      addresses: 1_500,
      count: 30,
    };
    const t = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const chain = await serveSynthetic(CHAIN, { intervalMs: 0 });
    let node = chain.node; // replaced by a new node on the same port below
    const port = node.port;
    const grpcPort = Number(new URL(node.grpcUrl as string).port);
    cleanup.push(() => node.close());
    const { watches } = await insertWatches(t.db, {
      chain: CHAIN,
      n: 8,
      box: new SecretBox([randomBytes(32)]),
      url: 'https://hooks.example.com/h',
      secret: newWebhookSecret(),
    });
    const expected = expectedEvents(chain.transfers, watches);
    expect(expected.length).toBeGreaterThan(20);
    const env = {
      DATABASE_URL: t.url ?? '',
      DATA_DIR: tmpDir(),
      ...nodeEnv(node),
      TRON_NODE_TIMEOUT_MS: '300',
      TRON_NODE_RETRIES: '1',
      INGEST_START_BLOCK: String(chain.first),
      TRON_BLOCK_INTERVAL_MS: '100',
      HOST: '127.0.0.1',
      PORT: '0',
    };
    const ingest = start('ingest', ['ingest'], env);
    const api = start('api', ['api'], env);
    const procs = [ingest, api];
    await untilOrExit(
      'both running',
      () => procs.every((p) => p.count('tronwatch running') > 0),
      procs,
    );
    const apiLine = api.logs.find((l) => l.msg === 'api listening');
    const base = typeof apiLine?.url === 'string' ? apiLine.url : '';
    const at = chain.first + 5;
    node.advanceTo(at);
    await untilOrExit('first blocks', async () => (await cursorOf(t.db)) === at, procs);

    const failed = () => ingest.count('ingest step failed; retrying the same block');
    // `failedStep`: whether the phase must also log a failed step. An empty answer (`{}`) to the
    // next block is java-tron's "not solidified yet", which a caught-up ingester asks again
    // without calling it a failure (it asks for the next block itself since issue 14); what
    // matters there is the same: asked again, never skipped, the cursor stays.
    const phases: Array<{
      name: string;
      faults: Parameters<typeof node.setFaults>[0];
      n: () => number;
      failedStep: boolean;
    }> = [
      {
        name: 'timeouts',
        faults: { delayMs: 1_000 },
        n: () => node.stats.faults.delayed,
        failedStep: true,
      },
      {
        name: '503s',
        faults: { errorRate: 1 },
        n: () => node.stats.faults.error,
        failedStep: true,
      },
      {
        name: 'empty answers',
        faults: { emptyRate: 1 },
        n: () => node.stats.faults.empty,
        failedStep: false,
      },
    ];
    node.advanceTo(chain.last);
    for (const ph of phases) {
      const before = ph.n();
      const failedBefore = failed();
      node.setFaults(ph.faults);
      await untilOrExit(
        `${ph.name} seen${ph.failedStep ? ' and a failed step' : ''}`,
        () => ph.n() >= before + 2 && (!ph.failedStep || failed() > failedBefore),
        procs,
      );
      expect(await cursorOf(t.db)).toBe(at); // never past the block it cannot read
      const h = await get(`${base}/healthz`);
      expect(h.status).toBe(200); // the truth: PostgreSQL (and Redis) are up
    }
    // No node at all for a while, then a new one on the same port.
    node.setFaults(undefined);
    const failedBefore = failed();
    await node.close();
    await untilOrExit(
      'failed steps without a node',
      () => failed() >= failedBefore + 2,
      procs,
      60_000,
    );
    expect(await cursorOf(t.db)).toBe(at);
    expect((await get(`${base}/healthz`)).status).toBe(200);
    node = (await serveSynthetic(CHAIN, { intervalMs: 0, port, grpcPort })).node;
    node.advanceTo(chain.last);
    await untilOrExit(
      'ingest reaches the end',
      async () => (await cursorOf(t.db)) === chain.last,
      procs,
      60_000,
    );

    expect(await storedEvents(t.db)).toEqual(keys(expected));
    expect(await count(t.db, 'SELECT count(*)::int8 AS n FROM notifications')).toBe(
      expected.length,
    );
    expect(await Promise.all(procs.map(term))).toEqual([0, 0]);
  }, 90_000);
});
