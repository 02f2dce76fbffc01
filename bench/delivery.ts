/**
 * Delivery benchmark: webhook deliveries per second through the outbox (DeliveryWorker: claim,
 * decrypt, sign, POST, record the attempt and the state move) next to a bare POST loop measured
 * in the same run, against the same local HTTPS receiver (which verifies every signature), with
 * the same undici Agent settings, the same concurrency and the same bodies. The ratio
 * worker/bare is the cost of the outbox; the goal is ≥ 2,000 deliveries/s and a ratio ≥ 0.5.
 *
 * The two alternate over several rounds of N (after a warm-up round) and medians are reported,
 * so a machine whose load drifts during the run (CI, shared hosts) skews both sides alike.
 *
 * Two placements of the receiver, each reported: in its own thread (bench/receiver-thread.ts),
 * as if it were another machine — the bare loop then has a core to itself and the worker shares
 * the machine with PostgreSQL, the hardest comparison on a small box; and on the main thread,
 * sharing the event loop with the side measured. On a machine where PostgreSQL, the receiver and
 * the worker share two cores, the two placements bracket what a deployment would see.
 *
 * Database: a fresh database on the PostgreSQL server of DATABASE_URL (dropped afterwards), or
 * the embedded PGlite in memory when DATABASE_URL is unset; each variant's first line says which.
 *
 * Run alone: `npx tsx bench/delivery.ts [N] [thread|inline]` (DATABASE_URL=… for PostgreSQL).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import pg from 'pg';
import { request } from 'undici';
import { silentLogger } from '../src/common/logger.js';
import { SecretBox } from '../src/common/secrets.js';
import type { Config } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { type Db, openDb } from '../src/db/pool.js';
import { signBody } from '../src/delivery/payload.js';
import { webhookAgent, webhookHeaders } from '../src/delivery/send.js';
import { DeliveryWorker } from '../src/delivery/worker.js';
import { startReceiver } from '../src/devnet/receiver.js';
import { type EventRow, eventPayload, serializeEvent } from '../src/events/event.js';
import {
  insertAccount,
  insertEvents,
  insertWebhookWatch,
  type StoredEvent,
} from '../test/helpers/outbox.js';

export interface BenchDeliveryOptions {
  /** Notifications delivered by each side per round. Default 5000. */
  n?: number;
  /**
   * Where the receiver runs: 'thread' (its own event loop and CPU, like a remote receiver),
   * 'inline' (the main thread, shared with the side being measured), or 'both' (default: one
   * after the other, each with a fresh database).
   */
  receiver?: 'thread' | 'inline' | 'both';
  /** Requests in flight (worker and bare loop alike). Default 64 (config default). */
  concurrency?: number;
  /** Measured rounds (after a warm-up round); medians are reported. Default 3. */
  rounds?: number;
  /** PostgreSQL server; default process.env.DATABASE_URL; unset → PGlite in memory. */
  databaseUrl?: string | undefined;
}

/** A fresh database: a new one on the server (dropped by `drop`), or PGlite in memory. */
async function freshDb(url: string | undefined): Promise<{ db: Db; drop(): Promise<void> }> {
  if (!url) {
    const db = await openDb({ url: undefined, embeddedDir: 'memory://' });
    return { db, drop: () => db.close() };
  }
  const name = `tw_bench_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: url });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(url);
  u.pathname = `/${name}`;
  const db = await openDb({ url: u.toString(), embeddedDir: '', poolSize: 10 });
  return {
    db,
    async drop() {
      await db.close();
      const a = new pg.Client({ connectionString: url });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

const rate = (n: number, ms: number) => Math.round(n / (ms / 1000));

interface ReceiverHandle {
  url: string;
  ca: string;
  stats(): Promise<{ connections: number; requests: number }>;
  close(): Promise<void>;
}

/** The receiver on the main thread. */
async function receiverInline(secret: string): Promise<ReceiverHandle> {
  const r = await startReceiver({ secretFor: secret, record: false });
  return {
    url: r.url,
    ca: r.ca,
    stats: async () => ({ connections: r.connections, requests: r.requests }),
    close: () => r.close(),
  };
}

/** Start bench/receiver-thread.ts and wait until it listens. */
async function receiverThread(secret: string): Promise<ReceiverHandle> {
  // A worker thread does not inherit tsx's loader: register it first, then load the module.
  const script = new URL('./receiver-thread.ts', import.meta.url).href;
  const worker = new Worker(
    `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(script)}); })`,
    { eval: true, workerData: { secret } },
  );
  const next = () =>
    new Promise<unknown>((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  const ready = (await next()) as { url: string; ca: string };
  return {
    url: ready.url,
    ca: ready.ca,
    async stats() {
      const answer = next();
      worker.postMessage('stats');
      return (await answer) as { connections: number; requests: number };
    },
    async close() {
      const answer = next();
      worker.postMessage('close');
      await answer;
      await worker.terminate();
    },
  };
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
};

/**
 * Run the benchmark; `lines` are the report (the first line of each variant says the database
 * and where the receiver ran). Throws when a delivery goes missing or a body is refused.
 */
export async function benchDelivery(opts: BenchDeliveryOptions = {}): Promise<{ lines: string[] }> {
  const variants: Array<'thread' | 'inline'> =
    (opts.receiver ?? 'both') === 'both'
      ? ['thread', 'inline']
      : [opts.receiver as 'thread' | 'inline'];
  const lines: string[] = [];
  for (const where of variants) lines.push(...(await benchOnce(opts, where)));
  return { lines };
}

async function benchOnce(
  opts: BenchDeliveryOptions,
  where: 'thread' | 'inline',
): Promise<string[]> {
  const n = opts.n ?? 5000;
  const rounds = opts.rounds ?? 3;
  const concurrency = opts.concurrency ?? 64;
  const databaseUrl = 'databaseUrl' in opts ? opts.databaseUrl : process.env.DATABASE_URL;
  const lines: string[] = [];
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const receiver = where === 'thread' ? await receiverThread(secret) : await receiverInline(secret);
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-'));
  const caFile = path.join(tmp, 'ca.pem');
  fs.writeFileSync(caFile, receiver.ca);
  const delivery: Config['delivery'] = {
    timeoutMs: 10_000,
    scheduleScale: 1,
    concurrency,
    pollMs: 250,
    allowCidrs: ['127.0.0.1/32'],
    caFile,
  };
  const { db, drop } = await freshDb(databaseUrl);
  const agent = webhookAgent({ ...delivery, connections: concurrency });
  const ac = new AbortController();
  let running: Promise<void> | undefined;
  try {
    const dbName =
      db.kind === 'postgres'
        ? 'PostgreSQL (DATABASE_URL)'
        : 'PGlite (embedded, in memory; DATABASE_URL unset)';
    lines.push(
      `delivery: database ${dbName}; receiver https://127.0.0.1 (verifies every signature) ` +
        `${where === 'thread' ? 'in its own thread' : 'on the main thread'}; ` +
        `concurrency ${concurrency}; ${rounds} rounds of ${n} after a warm-up; ` +
        `${os.cpus().length} CPUs`,
    );
    await migrate(db);
    const box = new SecretBox([randomBytes(32)]);
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, { accountId, url: receiver.url, secret });
    // Every round's notifications, inserted up front and due in an hour: each round makes its
    // own due when its turn comes. Round 0 is the warm-up (connections, TLS, JIT on both ends).
    const future = new Date(Date.now() + 3_600_000);
    const sets: StoredEvent[][] = [];
    for (let r = 0; r <= rounds; r++) {
      const count = r === 0 ? Math.min(n, 1000) : n;
      sets.push(await insertEvents(db, { accountId, watchId, count, dueAt: future }));
    }
    // A server's tables have statistics (autovacuum); a table just filled has none yet, and the
    // planner would read every due row per claim instead of the first few by the due index.
    await db.query('ANALYZE');
    // The bodies both sides send: the stored events as the worker reads and signs them.
    const { rows } = await db.query<EventRow>(
      `SELECT id, account_id, watch_id, network, direction, asset, tx_id, event_index, block_number,
              block_timestamp, from_address, to_address, amount_raw::text AS amount_raw, contract,
              created_at FROM events`,
    );
    const byId = new Map(rows.map((e) => [e.id, e]));

    // Bare loop: the same bodies, headers, Agent settings and concurrency; nothing else.
    const bare = async (set: StoredEvent[]) => {
      const requests = set.map((s) => {
        const e = byId.get(s.eventId) as EventRow;
        const body = serializeEvent(eventPayload(e));
        return { body, headers: webhookHeaders(e.id, signBody(secret, body)) };
      });
      let next = 0;
      let ok = 0;
      const t0 = performance.now();
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          for (let r = requests[next++]; r; r = requests[next++]) {
            const res = await request(receiver.url, {
              method: 'POST',
              dispatcher: agent,
              headers: r.headers,
              body: r.body,
              signal: AbortSignal.timeout(delivery.timeoutMs),
            });
            await res.body.dump();
            if (res.statusCode >= 200 && res.statusCode < 300) ok++;
          }
        }),
      );
      const ms = performance.now() - t0;
      if (ok !== set.length) throw new Error(`bare loop: ${set.length - ok} not answered 2xx`);
      return ms;
    };

    // The worker: one instance across rounds (warm, like the bare loop's Agent); a round makes
    // its notifications due, wakes the worker, and ends when every attempt is recorded.
    const w = new DeliveryWorker({
      db,
      secrets: box,
      config: { delivery },
      logger: silentLogger,
      workerId: 'bench',
    });
    running = w.start(ac.signal);
    const viaWorker = async (set: StoredEvent[]) => {
      const target = w.delivered + w.failed + set.length;
      await db.query(
        'UPDATE notifications SET next_attempt_at = now() WHERE id = ANY($1::text[])',
        [set.map((e) => e.notificationId)],
      );
      const t0 = performance.now();
      w.wake();
      while (w.delivered + w.failed < target) await new Promise((r) => setTimeout(r, 1));
      return performance.now() - t0;
    };

    const bareRates: number[] = [];
    const workerRates: number[] = [];
    for (let r = 0; r <= rounds; r++) {
      const set = sets[r] as StoredEvent[];
      const bareMs = await bare(set);
      const workerMs = await viaWorker(set);
      if (r === 0) continue;
      bareRates.push(rate(set.length, bareMs));
      workerRates.push(rate(set.length, workerMs));
    }
    const { rows: check } = await db.query<{ delivered: number; attempts: number }>(
      `SELECT (SELECT count(*) FROM notifications WHERE status = 'DELIVERED')::int8 AS delivered,
              (SELECT count(*) FROM attempts)::int8 AS attempts`,
    );
    const total = sets.reduce((a, s) => a + s.length, 0);
    const c = check[0];
    if (!c || c.delivered !== total || c.attempts !== total || w.failed !== 0) {
      throw new Error(`worker: ${c?.delivered} delivered, ${c?.attempts} attempts of ${total}`);
    }
    const stats = await receiver.stats();
    const bareRate = median(bareRates);
    const workerRate = median(workerRates);
    const ratio = workerRate / bareRate;
    lines.push(
      `delivery: bare POST loop   median ${bareRate}/s (rounds: ${bareRates.join(', ')})`,
      `delivery: DeliveryWorker   median ${workerRate}/s (rounds: ${workerRates.join(', ')}); ` +
        `every attempt recorded: ${c.attempts} attempt rows, ${c.delivered} DELIVERED, ` +
        `${w.claimRounds} claims, ${w.startRounds} start marks, ${w.completeRounds} completions; ${stats.connections} TLS connections in all`,
      `delivery: ratio worker/bare ${ratio.toFixed(2)} (goal ≥ 0.5: ${ratio >= 0.5 ? 'met' : 'NOT met'}; ` +
        `goal ≥ 2000/s: ${workerRate >= 2000 ? 'met' : 'NOT met'})`,
    );
    return lines;
  } finally {
    ac.abort();
    await running;
    await agent.close();
    await drop();
    await receiver.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const n = process.argv[2] ? Number(process.argv[2]) : undefined;
  const arg = process.argv[3];
  const receiver = arg === 'inline' || arg === 'thread' ? arg : 'both';
  const { lines } = await benchDelivery({ n, receiver });
  for (const l of lines) console.log(l);
}
