import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApiKey } from '../../src/accounts/keys.js';
import { newWebhookSecret, SecretBox } from '../../src/common/secrets.js';
import { type Receiver, startReceiver } from '../../src/devnet/receiver.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  nodeEnv,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
} from '../helpers/chain.js';
import { type LoggedProcess, startLogged, terminate as term, untilOrExit } from '../helpers/cli.js';
import { migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';
import {
  insertAccount,
  insertEvents,
  insertWebhookWatch,
  statusCounts,
} from '../helpers/outbox.js';

if (!POSTGRES_URL) console.warn('roles.test.ts skipped: DATABASE_URL is unset (needs PostgreSQL)');

type Proc = LoggedProcess;
const start = startLogged;

const live: Proc[] = [];
const cleanup: Array<() => Promise<void>> = [];
afterAll(async () => {
  for (const p of live) if (p.child.exitCode === null) p.child.kill('SIGKILL');
  for (const c of cleanup.reverse()) await c();
});

function tmpDir(): string {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-roles-'));
  cleanup.push(async () => fs.rmSync(d, { recursive: true, force: true }));
  return d;
}

const CHAIN = { seed: 31, firstBlock: 74_000_000, txPerBlock: 300, addresses: 1_500, count: 32 };

describe.skipIf(!POSTGRES_URL)('roles as processes (PostgreSQL)', () => {
  it('two ingesters: one leads, the standby takes over after kill -9, events exactly once', async () => {
    const t: TestDb = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const chain: SyntheticChain = await serveSynthetic(CHAIN, { intervalMs: 0 });
    cleanup.push(() => chain.node.close());
    const acc = await insertAccount(t.db, 'scale');
    const watches = await insertSyntheticWatches(
      t.db,
      acc,
      syntheticAddresses(CHAIN).slice(0, 30),
      {
        activeFrom: chain.first - 1,
      },
    );
    const expected = expectedEvents(chain.transfers, watches);
    expect(expected.length).toBeGreaterThan(100);
    const cursor = async () =>
      (await t.db.query<{ block_number: number }>('SELECT block_number FROM chain_cursor')).rows[0]
        ?.block_number ?? 0;
    const env = {
      DATABASE_URL: t.url ?? '',
      DATA_DIR: tmpDir(),
      ...nodeEnv(chain.node),
      INGEST_START_BLOCK: String(chain.first),
      TRON_BLOCK_INTERVAL_MS: '100',
      TRON_NODE_CONCURRENCY: '2',
    };

    // Both start at once; whichever takes the lock first is `a`, the other must be on standby.
    const p1 = start('ingest-1', ['ingest'], env);
    const p2 = start('ingest-2', ['ingest'], env);
    live.push(p1, p2);
    await untilOrExit(
      'one leader and one standby',
      () =>
        (p1.has('ingest leader acquired') && p2.has('standby')) ||
        (p2.has('ingest leader acquired') && p1.has('standby')),
      [p1, p2],
      30_000,
    );
    const [a, b] = p1.has('ingest leader acquired') ? [p1, p2] : [p2, p1];

    chain.node.advanceTo(chain.first + 20);
    await untilOrExit(
      'a ingests',
      async () => (await cursor()) >= chain.first + 12,
      [a, b],
      30_000,
    );
    expect(a.has('ingest starting')).toBe(true);
    expect(b.has('ingest leader acquired')).toBe(false);
    expect(b.has('ingest starting')).toBe(false); // only the leader advances
    a.child.kill('SIGKILL');
    expect(await a.exit).toBe(null);
    const killedAt = await cursor();
    expect(killedAt).toBeLessThan(chain.last);

    chain.node.advanceTo(chain.last);
    await untilOrExit('b takes over', () => b.has('ingest leader acquired'), [b], 30_000);
    await untilOrExit(
      'b reaches the end',
      async () => (await cursor()) === chain.last,
      [b],
      60_000,
    );
    expect(await term(b)).toBe(0);
    expect(b.has('stopped')).toBe(true);

    const got = await storedEventKeys(t.db);
    expect(got).toEqual(expected.map(eventKey).sort());
    const { rows: n } = await t.db.query<{ notifications: number }>(
      'SELECT count(*)::int8 AS notifications FROM notifications',
    );
    expect(n[0]?.notifications).toBe(expected.length);
  }, 85_000);

  it('two workers deliver every notification exactly once; SIGTERM exits 0', async () => {
    const t = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const key = randomBytes(32);
    const box = new SecretBox([key]);
    const secret = newWebhookSecret();
    const receiver: Receiver = await startReceiver({
      secretFor: secret,
      respond: (req) => ({ status: req.verified ? 200 : 401, delayMs: 10 }),
    });
    cleanup.push(() => receiver.close());
    const dir = tmpDir();
    const caFile = path.join(dir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);
    const acc = await insertAccount(t.db, 'pro');
    const { watchId } = await insertWebhookWatch(t.db, box, {
      accountId: acc,
      url: receiver.url,
      secret,
    });
    const env = {
      DATABASE_URL: t.url ?? '',
      DATA_DIR: dir,
      SECRET_ENCRYPTION_KEY: key.toString('hex'),
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      DELIVERY_CONCURRENCY: '4',
      DELIVERY_POLL_MS: '50',
    };
    const w1 = start('worker-1', ['worker'], env);
    const w2 = start('worker-2', ['worker'], env);
    live.push(w1, w2);
    await untilOrExit(
      'both workers started',
      () => w1.has('delivery worker started') && w2.has('delivery worker started'),
      [w1, w2],
      30_000,
    );
    const events = await insertEvents(t.db, { accountId: acc, watchId, count: 300 });
    await untilOrExit(
      'every notification delivered',
      async () => (await statusCounts(t.db)).DELIVERED === events.length,
      [w1, w2],
      60_000,
    );
    expect(await Promise.all([term(w1), term(w2)])).toEqual([0, 0]);

    expect(receiver.countsByEvent.size).toBe(events.length);
    for (const e of events) expect(receiver.countsByEvent.get(e.eventId)).toBe(1);
    expect(receiver.received.every((r) => r.verified)).toBe(true);
    const delivered = [w1, w2].map((w) => {
      const line = w.logs.find((l) => l.msg === 'delivery worker stopped');
      return typeof line?.delivered === 'number' ? line.delivered : -1;
    });
    expect(delivered[0]).toBeGreaterThan(0); // both took part
    expect(delivered[1]).toBeGreaterThan(0);
    expect((delivered[0] ?? 0) + (delivered[1] ?? 0)).toBe(events.length);
    const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM attempts');
    expect(rows[0]?.n).toBe(events.length);
  }, 85_000);

  it('SIGTERM: serve, api, ingest and worker exit 0; a worker records its in-flight attempts', async () => {
    const t = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const chain = await serveSynthetic({ ...CHAIN, count: 5 }, { intervalMs: 0 });
    cleanup.push(() => chain.node.close());
    chain.node.advanceTo(chain.last);
    const key = randomBytes(32);
    const secret = newWebhookSecret();
    const receiver = await startReceiver({
      secretFor: secret,
      respond: () => ({ status: 200, delayMs: 1_500 }), // slow: attempts are in flight at SIGTERM
    });
    cleanup.push(() => receiver.close());
    const dir = tmpDir();
    const caFile = path.join(dir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);
    const acc = await insertAccount(t.db, 'pro');
    const { watchId } = await insertWebhookWatch(t.db, new SecretBox([key]), {
      accountId: acc,
      url: receiver.url,
      secret,
    });
    await insertEvents(t.db, { accountId: acc, watchId, count: 20 });
    const env = {
      DATABASE_URL: t.url ?? '',
      DATA_DIR: dir,
      SECRET_ENCRYPTION_KEY: key.toString('hex'),
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      DELIVERY_CONCURRENCY: '4',
      ...nodeEnv(chain.node),
      INGEST_START_BLOCK: String(chain.first),
      TRON_BLOCK_INTERVAL_MS: '100',
      HOST: '127.0.0.1',
      PORT: '0',
    };
    // serve, api and ingest start meanwhile, on a database of their own (serve's worker would
    // otherwise take part in the deliveries counted below).
    const t2 = await migratedDb('postgres');
    cleanup.push(() => t2.drop());
    const env2 = { ...env, DATABASE_URL: t2.url ?? '' };
    const procs = [
      start('serve', ['serve'], env2),
      start('api', ['api'], env2),
      start('ingest', ['ingest'], env2),
    ];
    live.push(...procs);
    const worker = start('worker', ['worker'], env);
    live.push(worker);
    await untilOrExit('attempts in flight', () => receiver.received.length > 0, [worker], 30_000);
    // Everything in flight now finishes and is recorded before the exit.
    expect(await term(worker)).toBe(0);
    const requests = receiver.received.length;
    expect(requests).toBeGreaterThan(0);
    const { rows } = await t.db.query<{ n: number }>('SELECT count(*)::int8 AS n FROM attempts');
    expect(rows[0]?.n).toBe(requests);
    const { rows: leased } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM notifications WHERE lease_token IS NOT NULL',
    );
    expect(leased[0]?.n).toBe(0); // queued claims were released, not left to expire

    for (const p of procs)
      await untilOrExit(`${p.name} running`, () => p.has('tronwatch running'), [p], 30_000);
    const cursor = async () =>
      (await t2.db.query<{ block_number: number }>('SELECT block_number FROM chain_cursor')).rows[0]
        ?.block_number ?? 0;
    await untilOrExit(
      'ingest reaches the end',
      async () => (await cursor()) === chain.last,
      procs,
      30_000,
    );
    expect(await Promise.all(procs.map(term))).toEqual([0, 0, 0]);
    for (const p of procs) expect(p.has('stopped')).toBe(true);
  }, 85_000);

  it('DATABASE_POOL_SIZE bounds the PostgreSQL connections of a process', async () => {
    const t: TestDb = await migratedDb('postgres');
    cleanup.push(() => t.drop());
    const accountId = await insertAccount(t.db, 'scale');
    const key = await createApiKey(t.db, accountId);
    const url = new URL(t.url ?? '');
    url.searchParams.set('application_name', 'tw_pool_test');
    const api = start('api', ['api'], {
      DATABASE_URL: url.toString(),
      DATABASE_POOL_SIZE: '2',
      DATA_DIR: tmpDir(),
      HOST: '127.0.0.1',
      PORT: '0',
    });
    live.push(api);
    await untilOrExit('api running', () => api.has('tronwatch running'), [api], 30_000);
    const line = api.logs.find((l) => l.msg === 'api listening');
    const base = typeof line?.url === 'string' ? line.url : '';
    const connections = async () =>
      (
        await t.db.query<{ n: number }>(
          "SELECT count(*)::int8 AS n FROM pg_stat_activity WHERE application_name = 'tw_pool_test'",
        )
      ).rows[0]?.n ?? -1;
    // 40 requests at a time, each needing the database (GET /v1/watches looks the key up and
    // lists), for a while: the pool opens its connections, and no more.
    let most = 0;
    const statuses = new Set<number>();
    for (let round = 0; round < 10; round++) {
      const load = Promise.all(
        Array.from({ length: 40 }, async () => {
          const r = await fetch(`${base}/v1/watches`, {
            headers: { authorization: `Bearer ${key.key}` },
          });
          await r.arrayBuffer();
          statuses.add(r.status);
        }),
      );
      most = Math.max(most, await connections());
      await load;
      most = Math.max(most, await connections());
    }
    expect([...statuses]).toEqual([200]);
    expect(most).toBe(2);
    expect(await term(api)).toBe(0);
  }, 60_000);
});
