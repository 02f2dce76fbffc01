/**
 * Endpoints at scale (issue 30 item 5), each figure next to a baseline measured in the same run:
 *
 * 1. Creating watches on one endpoint: N (BENCH_EP_WATCHES, default 100,000) watches through
 *    `POST /v1/watches/batch` (1,000 per request) onto one endpoint, watches/s, next to
 *    BENCH_EP_SINGLE (default 1,000) watches created one `POST /v1/watches` at a time on the same
 *    endpoint (the baseline). Requests go through the real Fastify app (routes, schema
 *    validation, auth, quotas, rate limits) by `app.inject`, so the figures leave out the socket.
 * 2. A burst of deliveries: BENCH_EP_BURST (default 10,000) events, one per watch, delivered by the
 *    real DeliveryWorker to a real HTTPS receiver on 127.0.0.1 that counts the requests it serves
 *    at once and their arrival instants. First to an endpoint without limits (the baseline), then
 *    to one with `rate_limit_per_second` BENCH_EP_RATE (default 500) and `max_concurrency`
 *    BENCH_EP_CAP (default 16): deliveries/s of both, the most arrivals in any 1-second span and
 *    the most requests in service at once next to the limits ("never exceeded" is that
 *    comparison, printed, not asserted).
 *
 * Database: a fresh database on DATABASE_URL's server when set, else PGlite in memory.
 * Run alone: `npx tsx bench/endpoints.ts`.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { silentLogger } from '../src/common/logger.js';
import { DeliveryWorker } from '../src/delivery/worker.js';
import { startReceiver } from '../src/devnet/receiver.js';
import { type ApiHarness, apiHarness, type Caller } from '../test/helpers/api.js';
import type { Engine } from '../test/helpers/db.js';

export interface BenchEndpointsOptions {
  /** Watches created through the batch API on one endpoint (default 100,000). */
  watches?: number;
  /** Watches created one request at a time, the baseline (default 1,000). */
  single?: number;
  /** Events delivered in the burst (default 10,000; at most `watches`). */
  burst?: number;
  /** The paced endpoint's rate limit, deliveries per second (default 500). */
  rate?: number;
  /** The paced endpoint's concurrency cap (default 16). */
  cap?: number;
}

/** `count` distinct valid TRON addresses (41-hex), distinct per `salt` (2 hex digits). */
function addresses(count: number, salt: string): string[] {
  return Array.from(
    { length: count },
    (_, i) => `41${salt}${i.toString(16).padStart(8, '0')}${'ab'.repeat(15)}`,
  );
}

/** Most arrivals within any span shorter than `windowMs` (instants in ms). */
function maxInWindow(instants: number[], windowMs: number): number {
  const t = [...instants].sort((a, b) => a - b);
  let best = 0;
  let lo = 0;
  for (let hi = 0; hi < t.length; hi++) {
    while ((t[hi] as number) - (t[lo] as number) >= windowMs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}

const fmt = (n: number, d = 0) =>
  n.toLocaleString('en-US', { minimumFractionDigits: d, maximumFractionDigits: d });

async function createEndpoint(
  h: ApiHarness,
  c: Caller,
  url: string,
  pace: { rate_limit_per_second?: number; max_concurrency?: number },
): Promise<string> {
  const res = await h.app.inject({
    method: 'POST',
    url: '/v1/endpoints',
    headers: c.headers,
    payload: { url, label: 'bench', ...pace },
  });
  if (res.statusCode !== 201) throw new Error(`POST /v1/endpoints: ${res.statusCode} ${res.body}`);
  return (res.json() as { id: string }).id;
}

/** Events (and PENDING notifications) for the first `n` watches of `endpointId`, as ingest does. */
async function burstFor(h: ApiHarness, endpointId: string, n: number, tag: string) {
  await h.db.query(
    `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id,
                         event_index, block_number, block_timestamp, from_address, to_address,
                         amount_raw, contract, created_at)
     SELECT 'evt_' || $1 || '_' || w.id, w.account_id, w.id, 'mainnet', 'incoming', 'USDT',
            md5($1 || w.id) || md5(w.id || $1), 0, 79072107, '2026-01-08T13:36:51Z',
            'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7', w.address, 1500000,
            'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
            clock_timestamp() + row_number() OVER (ORDER BY w.id) * interval '1 microsecond'
       FROM (SELECT * FROM watches WHERE endpoint_id = $2 AND deleted_at IS NULL
              ORDER BY id LIMIT $3) AS w`,
    [tag, endpointId, n],
  );
  await h.db.query(
    `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                next_attempt_at, created_at)
     SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', 'PENDING', 0,
            created_at, created_at
       FROM events WHERE id LIKE 'evt_' || $1 || '\\_%'`,
    [tag],
  );
}

/** Run the delivery worker until `n` notifications of `tag` are DELIVERED; seconds taken. */
async function deliver(h: ApiHarness, tag: string, n: number): Promise<number> {
  const worker = new DeliveryWorker({
    db: h.db,
    secrets: h.secrets,
    config: h.config,
    logger: silentLogger,
  });
  const ac = new AbortController();
  const started = performance.now();
  const done = worker.start(ac.signal);
  try {
    for (;;) {
      const { rows } = await h.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM notifications
          WHERE status = 'DELIVERED' AND event_id LIKE 'evt_' || $1 || '\\_%'`,
        [tag],
      );
      if ((rows[0]?.n ?? 0) >= n) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    return (performance.now() - started) / 1000;
  } finally {
    ac.abort();
    await done;
  }
}

/** The benchmark (module doc); returns the lines to print. */
export async function benchEndpoints(opts: BenchEndpointsOptions = {}): Promise<string[]> {
  const total = opts.watches ?? 100_000;
  const single = opts.single ?? 1_000;
  const burst = Math.min(opts.burst ?? 10_000, total);
  const rate = opts.rate ?? 500;
  const cap = opts.cap ?? 16;
  const engine: Engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  const lines: string[] = [];

  // A receiver that counts, per path (one path per endpoint), requests in service and arrivals.
  const inService = new Map<string, number>();
  const maxInService = new Map<string, number>();
  const arrivals = new Map<string, number[]>();
  const receiver = await startReceiver({
    record: false,
    respond: async (req) => {
      const p = req.path;
      const list = arrivals.get(p) ?? [];
      list.push(Date.now());
      arrivals.set(p, list);
      const k = (inService.get(p) ?? 0) + 1;
      inService.set(p, k);
      maxInService.set(p, Math.max(maxInService.get(p) ?? 0, k));
      // A receiver that takes a few ms per request (a database write of its own).
      await new Promise((r) => setTimeout(r, 5));
      inService.set(p, (inService.get(p) ?? 1) - 1);
      return 200;
    },
  });
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-ep-'));
  const caFile = path.join(tmp, 'ca.pem');
  fs.writeFileSync(caFile, receiver.ca);
  const h = await apiHarness(engine, {
    env: {
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      DELIVERY_POLL_MS: '20',
    },
  });
  try {
    const c = await h.caller({
      plan: 'business',
      rateLimitPerMin: 100_000_000,
      watchQuota: 10 * (total + single + 10),
    });
    const freeUrl = `${receiver.origin}/free`;
    const pacedUrl = `${receiver.origin}/paced`;
    const free = await createEndpoint(h, c, freeUrl, {});
    const paced = await createEndpoint(h, c, pacedUrl, {
      rate_limit_per_second: rate,
      max_concurrency: cap,
    });

    // 1. Baseline: one watch per request.
    const one = addresses(single, '01');
    let t0 = performance.now();
    for (const address of one) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/watches',
        headers: c.headers,
        payload: { address, asset_filter: 'USDT', endpoint_id: free },
      });
      if (res.statusCode !== 201)
        throw new Error(`POST /v1/watches: ${res.statusCode} ${res.body}`);
    }
    const singleSec = (performance.now() - t0) / 1000;
    // The baseline burst's endpoint gets as many watches as the burst (untimed).
    const extra = addresses(Math.max(0, burst - single), '03');
    for (let i = 0; i < extra.length; i += 1_000) {
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/watches/batch',
        headers: c.headers,
        payload: {
          items: extra
            .slice(i, i + 1_000)
            .map((address) => ({ address, asset_filter: 'USDT', endpoint_id: free })),
        },
      });
      if (res.statusCode >= 300) throw new Error(`batch: ${res.statusCode} ${res.body}`);
    }
    // The batch API, 1,000 per request, onto the paced endpoint.
    const many = addresses(total, '02');
    t0 = performance.now();
    let created = 0;
    // Seconds of each batch request: the first and the last show how creation scales with the
    // watches already on the account.
    const perBatch: number[] = [];
    for (let i = 0; i < many.length; i += 1_000) {
      const b0 = performance.now();
      const res = await h.app.inject({
        method: 'POST',
        url: '/v1/watches/batch',
        headers: c.headers,
        payload: {
          items: many
            .slice(i, i + 1_000)
            .map((address) => ({ address, asset_filter: 'USDT', endpoint_id: paced })),
        },
      });
      if (res.statusCode >= 300) throw new Error(`batch: ${res.statusCode} ${res.body}`);
      const results = (res.json() as { results: Array<{ watch?: unknown }> }).results;
      created += results.filter((r) => r.watch !== undefined).length;
      perBatch.push((performance.now() - b0) / 1000);
    }
    const batchSec = (performance.now() - t0) / 1000;
    if (created !== total) throw new Error(`batch created ${created} of ${total}`);
    const singleRate = single / singleSec;
    const batchRate = total / batchSec;
    lines.push(`database: ${engine}; requests by app.inject (no socket)`);
    lines.push(
      `create, one POST /v1/watches each (baseline): ${fmt(single)} watches in ${singleSec.toFixed(1)} s = ${fmt(singleRate)} watches/s`,
    );
    lines.push(
      `create, POST /v1/watches/batch (1,000 each) onto one endpoint: ${fmt(total)} watches in ${batchSec.toFixed(1)} s = ${fmt(batchRate)} watches/s`,
    );
    lines.push(
      `  first batch request ${(perBatch[0] ?? 0).toFixed(2)} s, last ${(perBatch[perBatch.length - 1] ?? 0).toFixed(2)} s (${fmt(single + total)} watches on the account by then)`,
    );
    lines.push(`ratio batch/single: ${(batchRate / singleRate).toFixed(1)}`);

    // 2. The burst: to the endpoint without limits (baseline), then to the paced one.
    const freeBurst = burst;
    await burstFor(h, free, freeBurst, 'free');
    const freeSec = await deliver(h, 'free', freeBurst);
    await burstFor(h, paced, burst, 'paced');
    const pacedSec = await deliver(h, 'paced', burst);
    const freeRate = freeBurst / freeSec;
    const pacedRate = burst / pacedSec;
    const pacedArrivals = arrivals.get('/paced') ?? [];
    const peak1s = maxInWindow(pacedArrivals, 1_000);
    const peakAtOnce = maxInService.get('/paced') ?? 0;
    lines.push(
      `burst to an endpoint without limits (baseline): ${fmt(freeBurst)} deliveries in ${freeSec.toFixed(1)} s = ${fmt(freeRate)} deliveries/s; at most ${maxInService.get('/free') ?? 0} at once, ${maxInWindow(arrivals.get('/free') ?? [], 1_000)} in a second`,
    );
    lines.push(
      `burst to the endpoint of ${fmt(total)} watches (limit ${fmt(rate)}/s, ${cap} at once): ${fmt(burst)} deliveries in ${pacedSec.toFixed(1)} s = ${fmt(pacedRate)} deliveries/s (${((pacedRate / rate) * 100).toFixed(0)} % of its limit)`,
    );
    lines.push(
      `  most arrivals in any 1 s span: ${fmt(peak1s)} (limit ${fmt(rate)}: ${peak1s <= rate ? 'never exceeded' : 'EXCEEDED'}); most in service at once: ${peakAtOnce} (cap ${cap}: ${peakAtOnce <= cap ? 'never exceeded' : 'EXCEEDED'}); requests received ${fmt(pacedArrivals.length)}`,
    );
    lines.push(`ratio paced/unlimited deliveries/s: ${(pacedRate / freeRate).toFixed(2)}`);
  } finally {
    await h.close();
    await receiver.close();
    fs.rmSync(tmp, { recursive: true, force: true });
  }
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const env = (k: string, d: number) => Number(process.env[k] ?? d);
  for (const l of await benchEndpoints({
    watches: env('BENCH_EP_WATCHES', 100_000),
    single: env('BENCH_EP_SINGLE', 1_000),
    burst: env('BENCH_EP_BURST', 10_000),
    rate: env('BENCH_EP_RATE', 500),
    cap: env('BENCH_EP_CAP', 16),
  }))
    console.log(l);
}
