/**
 * Delivery benchmark: webhook deliveries per second through the outbox (DeliveryWorker: claim,
 * decrypt, sign, POST, record the attempt and the state move) next to a bare POST loop measured
 * in the same run, against the same local HTTPS receiver (which verifies every signature), with
 * the same undici Agent settings, the same concurrency and the same bodies. The ratio
 * worker/bare is the cost of the outbox; the goal is ≥ 2,000 deliveries/s and a ratio ≥ 0.5.
 *
 * Database: a fresh database on the PostgreSQL server of DATABASE_URL (dropped afterwards), or
 * the embedded PGlite in memory when DATABASE_URL is unset; the first line says which.
 *
 * Run alone: `npx tsx bench/delivery.ts [N]` (DATABASE_URL=… for PostgreSQL).
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { request } from 'undici';
import { silentLogger } from '../src/common/logger.js';
import { SecretBox } from '../src/common/secrets.js';
import type { Config } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { type Db, openDb } from '../src/db/pool.js';
import { type EventRow, eventPayload, serializeEvent, signBody } from '../src/delivery/payload.js';
import { startReceiver } from '../src/delivery/receiver.js';
import { webhookAgent, webhookHeaders } from '../src/delivery/send.js';
import { DeliveryWorker } from '../src/delivery/worker.js';
import { insertAccount, insertEvents, insertWebhookWatch } from '../test/helpers/outbox.js';

export interface BenchDeliveryOptions {
  /** Notifications delivered by each side. Default 5000. */
  n?: number;
  /** Requests in flight (worker and bare loop alike). Default 64 (config default). */
  concurrency?: number;
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
  const db = await openDb({ url: u.toString(), embeddedDir: '', max: 10 });
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

export async function benchDelivery(opts: BenchDeliveryOptions = {}): Promise<{ lines: string[] }> {
  const n = opts.n ?? 5000;
  const concurrency = opts.concurrency ?? 64;
  const databaseUrl = 'databaseUrl' in opts ? opts.databaseUrl : process.env.DATABASE_URL;
  const lines: string[] = [];
  const secret = `whsec_${randomBytes(32).toString('base64')}`;
  const receiver = await startReceiver({ secretFor: secret, record: false });
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
  try {
    lines.push(
      `delivery: database ${db.kind === 'postgres' ? 'PostgreSQL (DATABASE_URL)' : 'PGlite (embedded, in memory; DATABASE_URL unset)'}, ` +
        `receiver https://127.0.0.1 in-process, concurrency ${concurrency}, N ${n}, ${os.cpus().length} CPUs`,
    );
    await migrate(db);
    const box = new SecretBox([randomBytes(32)]);
    const accountId = await insertAccount(db);
    const { watchId } = await insertWebhookWatch(db, box, {
      accountId,
      url: receiver.url,
      secret,
    });
    // Notifications in the future: inserted now, made due when the worker's turn comes.
    const future = new Date(Date.now() + 3_600_000);
    await insertEvents(db, { accountId, watchId, count: n, dueAt: future });

    // The same bodies both sides send: the stored events as the worker reads them.
    const { rows } = await db.query<EventRow>(
      `SELECT id, account_id, watch_id, network, direction, asset, tx_id, event_index, block_number,
              block_timestamp, from_address, to_address, amount_raw::text AS amount_raw, contract,
              created_at FROM events ORDER BY created_at`,
    );
    const requests = rows.map((e) => {
      const body = serializeEvent(eventPayload(e));
      return { body, headers: webhookHeaders(e.id, signBody(secret, body)) };
    });

    // Bare loop: POST the same bodies with the same Agent settings and concurrency, nothing else.
    const agent = webhookAgent({
      timeoutMs: delivery.timeoutMs,
      allowCidrs: delivery.allowCidrs,
      caFile,
      connections: concurrency,
    });
    const bare = async (count: number) => {
      let next = 0;
      let ok = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < count) {
            const r = requests[next++ % requests.length];
            if (!r) break;
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
      return ok;
    };
    await bare(Math.min(n, 1000)); // warm-up: connections, TLS sessions, JIT on both ends
    const b0 = performance.now();
    const bareOk = await bare(n);
    const bareMs = performance.now() - b0;
    const bareConnections = receiver.connections;
    await agent.close();
    if (bareOk !== n) throw new Error(`bare loop: ${n - bareOk} requests not answered 2xx`);

    // The worker: make everything due, start, wait until every delivery is recorded.
    await db.query("UPDATE notifications SET next_attempt_at = now() WHERE status = 'PENDING'");
    const worker = new DeliveryWorker({
      db,
      secrets: box,
      config: { delivery },
      logger: silentLogger,
      workerId: 'bench',
    });
    const ac = new AbortController();
    const w0 = performance.now();
    const running = worker.start(ac.signal);
    while (worker.delivered + worker.failed < n) {
      await new Promise((r) => setTimeout(r, 2));
    }
    const workerMs = performance.now() - w0;
    const workerConnections = receiver.connections - bareConnections;
    ac.abort();
    await running;
    const { rows: check } = await db.query<{ delivered: number; attempts: number }>(
      `SELECT (SELECT count(*) FROM notifications WHERE status = 'DELIVERED')::int8 AS delivered,
              (SELECT count(*) FROM attempts)::int8 AS attempts`,
    );
    const c = check[0];
    if (!c || c.delivered !== n || c.attempts !== n) {
      throw new Error(`worker: ${c?.delivered} delivered, ${c?.attempts} attempts (want ${n})`);
    }

    const bareRate = rate(n, bareMs);
    const workerRate = rate(n, workerMs);
    const ratio = workerRate / bareRate;
    lines.push(
      `delivery: bare POST loop   ${n} in ${(bareMs / 1000).toFixed(2)} s = ${bareRate}/s (${bareConnections} connections)`,
      `delivery: DeliveryWorker   ${n} in ${(workerMs / 1000).toFixed(2)} s = ${workerRate}/s ` +
        `(${workerConnections} connections, ${worker.claimRounds} claims; ${c.attempts} attempt rows, ${c.delivered} DELIVERED)`,
      `delivery: ratio worker/bare ${ratio.toFixed(2)} (goal ≥ 0.5: ${ratio >= 0.5 ? 'met' : 'NOT met'}; ` +
        `goal ≥ 2000/s: ${workerRate >= 2000 ? 'met' : 'NOT met'})`,
    );
    return { lines };
  } finally {
    await drop();
    await receiver.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
}

if (process.argv[1] && fileURLToPath(import.meta.url) === path.resolve(process.argv[1])) {
  const n = process.argv[2] ? Number(process.argv[2]) : undefined;
  const { lines } = await benchDelivery({ n });
  for (const l of lines) console.log(l);
}
