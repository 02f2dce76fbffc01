/**
 * End-to-end benchmarks (issue 3; issue 28 item 2 for the light client):
 * 1. Latency to the local HTTPS receiver holding the signed POST of a block's events, p50/p99
 *    over ≥ 500 blocks (the node produces a block every BENCH_INTERVAL_MS, default 150 ms,
 *    faster than mainnet's 3 s), through the whole service (`serve` roles in this process), twice
 *    in the same run: light client off, from the replay node solidifying the block (today's
 *    figure); light client on (TRON_LIGHT_CLIENT_CHECKPOINT = the synthetic chain's checkpoint;
 *    ingest reads up to the full-node head), from the arrival at the node's full-node head of the
 *    block that makes it final (18 above it: 19 SRs in turn). Goal: p99 < 1 s. At this pace the
 *    run is a load test (20× mainnet's block rate on the machine that runs it).
 * 1b. The same latency, off and on, at mainnet's pace (one block per 3 s), over
 *    BENCH_PACE_LATENCY_BLOCKS blocks (default 75: 6,731 events, about 4 min a run; 0 skips
 *    it): issue 28's goal as stated, an event at the receiver within 1 s of the block that makes
 *    it final arriving, with one block's work per 3 s on the machine. Each event's time is also
 *    split: ingest, the delivery worker's pickup, the send.
 * 2. Node requests per committed block at mainnet's pace (one block per 3 s, lag 18), over 45 s,
 *    read with gRPC: over the recorded mainnet block 79,072,107 and the blocks after it, and over
 *    full synthetic blocks (requestRate), each light client off and on. Goal: ≤ 2.1 per block,
 *    ≤ 0.70 per second.
 * Sizes: BENCH_E2E_BLOCKS (510) and BENCH_INTERVAL_MS (150) for 1, BENCH_PACE_LATENCY_BLOCKS (75)
 * for 1b, BENCH_PACE_SECONDS (45) for 2.
 * PostgreSQL when DATABASE_URL is set (a fresh database), else PGlite.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { accountsCreate, keysCreate } from '../src/accounts/cli.js';
import { silentLogger } from '../src/common/logger.js';
import { loadConfig } from '../src/config.js';
import {
  type BlockSource,
  dirSource,
  memorySource,
  startReplayNode,
} from '../src/devnet/replay-node.js';
import {
  syntheticAddresses,
  syntheticBlock,
  syntheticCheckpoint,
} from '../src/devnet/synthetic.js';
import { FinalityGate } from '../src/ingest/finality-gate.js';
import { Ingester } from '../src/ingest/loop.js';
import { startService } from '../src/service.js';
import { hexToBase58 } from '../src/tron/address.js';
import { parseGrpcTarget } from '../src/tron/grpc.js';
import type { Checkpoint } from '../src/tron/light-client/sr-set.js';
import { NodeClient } from '../src/tron/node-client.js';
import { emptyDb } from '../test/helpers/db.js';
import { chainDir } from '../test/helpers/fixtures.js';

const CHAIN = { seed: 5, firstBlock: 72_000_000, txPerBlock: 600, addresses: 10_000 };

function chainSource(count: number) {
  const map = new Map<number, { block: string; infos: string }>();
  for (let n = CHAIN.firstBlock; n < CHAIN.firstBlock + count; n++) {
    const b = syntheticBlock(CHAIN, n);
    map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
  }
  return memorySource(map);
}

const pct = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;

interface PeerReport {
  received: Array<{ eventId: string | undefined; block: number; at: number; verified: boolean }>;
  solidifiedAt: Record<number, number>;
  /** The replay node's full-node head minus its solidified head, blocks. */
  lag: number;
}

/** Mainnet's block interval, ms (one block per 3 s slot). */
const MAINNET_INTERVAL_MS = 3000;

/** Blocks above a block that make it final when every SR signs in turn (19 − 1). */
const FINALISING = 18;

/**
 * One end-to-end latency run through the service. Light client off: from the replay node
 * solidifying a block to the receiver holding its events' POST. Light client on
 * (TRON_LIGHT_CLIENT_CHECKPOINT = the synthetic chain's checkpoint; ingest reads up to the
 * node's full-node head): from the arrival of the block that makes it final (block n + 18 on a
 * chain where every SR signs in turn) at the node's full-node head, which is when it is
 * solidified + lag on the replay node's timeline, to the receiver. Each event's latency is also
 * split at its block's commit and at its first attempt's start (the attempt row's started_at).
 */
async function latency(blocks: number, intervalMs: number, lightClient = false): Promise<string[]> {
  const engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  const t = await emptyDb(engine);
  await t.db.close(); // the service opens its own pool on that database
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-e2e-'));
  // tsx's loader is registered inside the thread (execArgv does not carry it to workers).
  const peersUrl = new URL('./e2e-peers.ts', import.meta.url).href;
  const peers = new Worker(
    `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(peersUrl)}); })`,
    { eval: true, workerData: { chain: CHAIN, blocks, intervalMs, extra: FINALISING + 2 } },
  );
  const next = <T>(op: string) =>
    new Promise<T>((resolve) => {
      const on = (m: { op: string }) => {
        if (m.op === op) {
          peers.off('message', on);
          resolve(m as T);
        }
      };
      peers.on('message', on);
    });
  const ready = await next<{ nodeUrl: string; origin: string; ca: string }>('ready');
  fs.writeFileSync(path.join(dataDir, 'ca.pem'), ready.ca);
  const checkpointFile = path.join(dataDir, 'checkpoint.json');
  fs.writeFileSync(checkpointFile, JSON.stringify(syntheticCheckpoint(CHAIN)));
  const cfg = loadConfig({
    ...(lightClient ? { TRON_LIGHT_CLIENT_CHECKPOINT: checkpointFile } : {}),
    ...(t.url ? { DATABASE_URL: t.url } : {}),
    DATA_DIR: dataDir,
    TRON_NODE_URL: ready.nodeUrl,
    TRON_BLOCK_INTERVAL_MS: String(intervalMs),
    // Start at the first block of the chain (its checkpoint): the empty lead-in is not measured.
    INGEST_START_BLOCK: String(CHAIN.firstBlock),
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
    WEBHOOK_CA_FILE: path.join(dataDir, 'ca.pem'),
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    LOG_LEVEL: 'error',
  });
  const committedAt = new Map<number, number>();
  const last = CHAIN.firstBlock + blocks - 1;
  const svc = await startService(cfg, {
    roles: ['api', 'ingest', 'worker'],
    logger: silentLogger,
    ingest: { onBlock: (b) => committedAt.set(b.blockNumber, Date.now()) },
    // Today's figure (off): committed on the solidified head, measured next to the light client.
    ...(lightClient ? {} : { benchmarkBaselineWithoutLightClient: true as const }),
  });
  try {
    const acc = await accountsCreate(svc.db, { email: 'bench@example.com', plan: 'scale' });
    const key = (await keysCreate(svc.db, { account: acc.id })).key;
    // The busiest synthetic addresses: nearly every block has a transfer to or from them.
    const addrs = syntheticAddresses(CHAIN).slice(0, 40);
    for (const [i, a] of addrs.entries()) {
      for (;;) {
        const res = await fetch(`${svc.url}/v1/watches`, {
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            address: hexToBase58(a),
            asset_filter: 'ALL',
            direction: 'both',
            webhook_url: `${ready.origin}/hook/w${i}`,
          }),
        });
        const body = (await res.json()) as { secret: string };
        if (res.status === 503) {
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        if (res.status !== 201) throw new Error(`watch: ${res.status} ${JSON.stringify(body)}`);
        peers.postMessage({ op: 'secret', label: `w${i}`, secret: body.secret });
        break;
      }
    }
    // Nothing waiting when ingest starts, light client off or on: the solidified head (off) or
    // the full-node head, 18 above it (on), at the block before the first.
    peers.postMessage({
      op: 'advance',
      block: CHAIN.firstBlock - 1 - (lightClient ? FINALISING : 0),
    });
    const deadline = Date.now() + blocks * intervalMs + 60_000;
    while ((svc.ingester?.stats.cursor ?? 0) < last && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 50));
    const { rows } = await svc.db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM events WHERE block_number <= $1',
      [last],
    );
    const expected = rows[0]?.n ?? 0;
    for (;;) {
      peers.postMessage({ op: 'count', block: last });
      const c = await next<{ delivered: number }>('count');
      if (c.delivered >= expected || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    peers.postMessage({ op: 'report' });
    const report = await next<PeerReport>('report');
    const firstSeen = new Map<string, { at: number; block: number }>();
    for (const r of report.received) {
      if (r.eventId && !firstSeen.has(r.eventId))
        firstSeen.set(r.eventId, { at: r.at, block: r.block });
    }
    // When the worker started each event's first attempt (its attempt row's started_at: after
    // the claim and the mark, as the slot sends it), to split commit → receiver in two.
    // Outcomes are recorded after the answer (group commit): wait for the last rows.
    for (let i = 0; i < 50; i++) {
      const { rows: a } = await svc.db.query<{ n: number }>(
        'SELECT count(*)::int8 AS n FROM attempts WHERE attempt = 1',
      );
      if (Number(a[0]?.n ?? 0) >= expected) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const started = new Map<string, number>();
    const att = await svc.db.query<{ event_id: string; started_at: Date }>(
      `SELECT n.event_id, a.started_at FROM attempts a JOIN notifications n ON n.id = a.notification_id
        WHERE a.attempt = 1`,
    );
    for (const r of att.rows) started.set(r.event_id, r.started_at.getTime());
    // When block n's events could go at the earliest: the node solidified it (light client
    // off), or the block that makes it final appeared at the node's full-node head (on), which is
    // when the node solidified block n + 18 - lag.
    const refAt = (n: number) =>
      report.solidifiedAt[lightClient ? n + FINALISING - report.lag : n] ?? Number.NaN;
    const perEvent: number[] = [];
    const perBlock = new Map<number, number>();
    // Each event's latency in three parts, ms: ingest (ref → its block committed), pickup
    // (commit → the worker started its attempt: wake, claim, mark, a free slot), send (attempt
    // started → the receiver has the POST: sign, HTTPS).
    const split: Array<{ ms: number; ingest: number; pickup: number; send: number }> = [];
    for (const [id, { at, block }] of firstSeen) {
      const ref = refAt(block);
      if (Number.isNaN(ref) || block > last) continue;
      const ms = at - ref;
      perEvent.push(ms);
      perBlock.set(block, Math.max(perBlock.get(block) ?? 0, ms));
      const c = committedAt.get(block);
      const s = started.get(id);
      if (c !== undefined && s !== undefined)
        split.push({ ms, ingest: c - ref, pickup: s - c, send: at - s });
    }
    perEvent.sort((a, b) => a - b);
    const part = (rows: typeof split, k: 'ingest' | 'pickup' | 'send', p: number) =>
      pct(
        rows.map((r) => r[k]).sort((a, b) => a - b),
        p,
      ).toFixed(0);
    // The slowest 1% of events (at or above the per-event p99): where their time went.
    const tail = split.filter((r) => r.ms >= pct(perEvent, 99));
    const blockLat = [...perBlock.values()].sort((a, b) => a - b);
    const commitLat = [...committedAt.entries()]
      .filter(([n]) => n >= CHAIN.firstBlock && n <= last)
      .map(([n, at]) => at - refAt(n))
      .filter((ms) => !Number.isNaN(ms))
      .sort((a, b) => a - b);
    const unverified = report.received.filter((r) => !r.verified).length;
    const from = lightClient
      ? 'finalising block at the full-node head (light client on)'
      : 'solidified (light client off)';
    // Every line names the pace: the same figures mean a load test at 150 ms, the goal at 3 s.
    const pace =
      intervalMs === MAINNET_INTERVAL_MS
        ? `mainnet's pace (${intervalMs} ms per block)`
        : `${intervalMs} ms per block (${(MAINNET_INTERVAL_MS / intervalMs).toFixed(0)}× mainnet's pace)`;
    return [
      `${lightClient ? 'light client on' : 'light client off'}, ${pace}: database: ${engine}; ${blocks} blocks of 600 txs, one every ${intervalMs} ms; 40 watches on the busiest addresses; node and receiver in a worker thread`,
      `[${pace}] events: ${expected} stored, ${firstSeen.size} delivered (${unverified} signature failures), over ${perBlock.size} blocks`,
      `[${pace}] latency ${from} → receiver, per event (${perEvent.length} events): p50 ${pct(perEvent, 50).toFixed(0)} ms, p99 ${pct(perEvent, 99).toFixed(0)} ms, max ${(perEvent.at(-1) ?? Number.NaN).toFixed(0)} ms`,
      `[${pace}] of which → committed (ingest, ${commitLat.length} blocks): p50 ${pct(commitLat, 50).toFixed(0)} ms, p99 ${pct(commitLat, 99).toFixed(0)} ms, max ${(commitLat.at(-1) ?? Number.NaN).toFixed(0)} ms`,
      `[${pace}] per event, split (${split.length} events): ingest → commit p50 ${part(split, 'ingest', 50)} ms, p99 ${part(split, 'ingest', 99)} ms; commit → attempt started (the worker's pickup: wake, claim, mark) p50 ${part(split, 'pickup', 50)} ms, p99 ${part(split, 'pickup', 99)} ms; attempt started → received (sign, HTTPS POST) p50 ${part(split, 'send', 50)} ms, p99 ${part(split, 'send', 99)} ms; the slowest 1% (${tail.length} events), medians: ingest ${part(tail, 'ingest', 50)} ms, pickup ${part(tail, 'pickup', 50)} ms, send ${part(tail, 'send', 50)} ms`,
      `[${pace}] latency per block (its last event, ${blockLat.length} blocks): p50 ${pct(blockLat, 50).toFixed(0)} ms, p99 ${pct(blockLat, 99).toFixed(0)} ms, max ${(blockLat.at(-1) ?? Number.NaN).toFixed(0)} ms  (goal: p99 < 1000 ms)`,
    ];
  } finally {
    await svc.stop();
    peers.postMessage({ op: 'close' });
    await next('closed');
    await peers.terminate();
    await t.drop();
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}

/**
 * One ingester reading `source` from a replay node at mainnet's pace (one block per 3 s, lag 18)
 * through gRPC (exact bytes, as tronwatch reads a single provider), for `seconds` after the
 * first commit (or, with `fromStart`, from the start: the first recorded block is then counted).
 * @returns the node's requests (total and per path), the blocks committed, and the requests
 *   naming each block (the request log's block numbers).
 */
async function paceRun(
  source: BlockSource,
  seconds: number,
  opts: {
    fromStart: boolean;
    startBefore: number;
    solidifyFirst?: boolean;
    /** The light client on, from this chain's checkpoint: the synthetic one, or the replay node's. */
    gate?: 'synthetic' | 'replay';
  },
) {
  const engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  const t = await emptyDb(engine);
  const { migrate } = await import('../src/db/migrate.js');
  await migrate(t.db);
  const node = await startReplayNode({
    source,
    intervalMs: 3000,
    lag: 18,
    startBefore: opts.startBefore,
    grpc: true,
    logRequests: true,
  });
  // The first recorded block solidified at once (the blocks after it then come every 3 s): the
  // ingester reads it as soon as it starts, not by asking for it ahead of its time.
  if (opts.solidifyFirst) node.advanceTo(node.first);
  const client = new NodeClient({ url: node.url, grpc: parseGrpcTarget(node.grpcUrl as string) });
  const ac = new AbortController();
  const ing = new Ingester({
    db: t.db,
    client,
    logger: silentLogger,
    config: {
      network: 'mainnet',
      node: { concurrency: 8 },
      // The first recorded block: the chain's checkpoint (a recorded block after fillers names its
      // real parent, which no filler hashes to).
      ingest: { startBlock: node.first, blockIntervalMs: 3000 },
    },
    // The light client on: blocks read up to the full-node head, final once 19 SRs built on them.
    ...(opts.gate
      ? {
          finality: new FinalityGate({
            checkpoint:
              opts.gate === 'synthetic'
                ? syntheticCheckpoint(CHAIN)
                : (node.checkpoint as Checkpoint),
            keyOf: async (a: string) => {
              throw new Error(`no SR is new on the synthetic chain (${a})`);
            },
          }),
        }
      : {}),
  });
  const run = ing.run(ac.signal);
  let r0 = 0;
  let b0 = 0;
  let l0 = 0;
  if (!opts.fromStart) {
    // Settle: the first blocks committed, the grid learned.
    const settle = Date.now() + 20_000;
    while (ing.stats.blocks < 2 && Date.now() < settle)
      await new Promise((r) => setTimeout(r, 100));
    await new Promise((r) => setTimeout(r, 4000));
    r0 = node.stats.requests.total;
    b0 = ing.stats.blocks;
    l0 = node.requestLog.length;
  }
  const t0 = performance.now();
  await new Promise((r) => setTimeout(r, seconds * 1000));
  const elapsed = (performance.now() - t0) / 1000;
  const reqs = node.stats.requests.total - r0;
  const blocks = ing.stats.blocks - b0;
  const log = node.requestLog.slice(l0);
  const headPolls = ing.stats.headPolls;
  ac.abort();
  await run;
  await client.close();
  await node.close();
  await t.drop();
  const byPath = new Map<string, number>();
  const byBlock = new Map<number, string[]>();
  for (const r of log) {
    byPath.set(r.path, (byPath.get(r.path) ?? 0) + 1);
    if (r.num !== undefined) byBlock.set(r.num, [...(byBlock.get(r.num) ?? []), r.path]);
  }
  if (blocks === 0) throw new Error(`mainnet pace: no block committed in ${elapsed.toFixed(0)} s`);
  return { reqs, blocks, elapsed, byPath, byBlock, headPolls, first: node.first };
}

const paths = (m: Map<string, number>) =>
  [...m.entries()]
    .sort((a, b) => b[1] - a[1])
    .map(([p, n]) => `${p} ${n}`)
    .join(', ');

/**
 * Node requests per committed block at mainnet's pace (3 s per block, lag 18), read as a single
 * provider with gRPC is (each block once as exact bytes, then its receipts): over the recorded
 * mainnet block 79,072,107 (test/fixtures/tron-mainnet/chain, with its exact bytes) and the empty
 * filler blocks the replay node chains after it, and over synthetic 600-transaction blocks (every
 * block full). Goal: ≤ 2.1 requests per block.
 */
export async function requestRate(seconds: number): Promise<string[]> {
  const real = await paceRun(dirSource(chainDir()), seconds, {
    fromStart: true,
    startBefore: 0,
    solidifyFirst: true,
  });
  const realBlock = real.byBlock.get(real.first) ?? [];
  // The block after it is the first asked before the ingester knows the chain's 3 s grid (asked
  // at once, then every 548 ms until it is there, and the one after from the last miss + 3 s
  // every 100 ms: src/ingest/loop.ts), a cost paid once at start.
  const firstAsked = real.byBlock.get(real.first + 1) ?? [];
  const rest = (real.reqs - realBlock.length - firstAsked.length) / Math.max(1, real.blocks - 2);
  const full = await paceRun(chainSource(Math.ceil(seconds / 3) + 25), seconds, {
    fromStart: false,
    startBefore: 0,
  });
  // The light client on: the same blocks read at the full-node head (18 above the solidified
  // head), so the source reaches 18 blocks further, plus the settling.
  const gated = await paceRun(chainSource(Math.ceil(seconds / 3) + 25 + 30), seconds, {
    fromStart: false,
    startBefore: 0,
    gate: 'synthetic',
  });
  const realGated = await paceRun(dirSource(chainDir()), seconds, {
    fromStart: true,
    startBefore: 0,
    solidifyFirst: true,
    gate: 'replay',
  });
  return [
    `mainnet pace, recorded mainnet block ${real.first} (619 txs, exact bytes) then empty blocks, 3 s per block, gRPC: ${real.reqs} requests over ${real.elapsed.toFixed(0)} s for ${real.blocks} blocks = ${(real.reqs / real.blocks).toFixed(2)} requests per block (goal: ≤ 2.1); block ${real.first} itself: ${realBlock.length} requests (${realBlock.sort().join(', ')}); block ${real.first + 1}, asked before the grid is known (once, at start): ${firstAsked.length} requests; every other request over the other ${real.blocks - 2} blocks: ${rest.toFixed(2)} per block; by path: ${paths(real.byPath)}`,
    `mainnet pace, synthetic blocks of 600 txs (every block full), 3 s per block, gRPC: ${full.reqs} requests over ${full.elapsed.toFixed(0)} s for ${full.blocks} blocks = ${(full.reqs / full.blocks).toFixed(2)} requests per block (goal: ≤ 2.1), ${(full.reqs / full.elapsed).toFixed(2)} requests/s; by path: ${paths(full.byPath)}; ${full.headPolls} head polls in total`,
    `mainnet pace, light client on (replayCheckpoint: the devnet SRs with block ${realGated.first}'s real one), recorded mainnet block ${realGated.first} then signed empty blocks, read at the full-node head (18 above the solidified one), 3 s per block, gRPC, from the start (the 18 blocks above the first, already at the head, caught up at once, then one per 3 s): ${realGated.reqs} requests over ${realGated.elapsed.toFixed(0)} s for ${realGated.byBlock.size} blocks read (${realGated.blocks} committed) = ${(realGated.reqs / realGated.byBlock.size).toFixed(2)} requests per block read; block ${realGated.first} itself: ${(realGated.byBlock.get(realGated.first) ?? []).length} requests (${(realGated.byBlock.get(realGated.first) ?? []).sort().join(', ')}); by path: ${paths(realGated.byPath)}`,
    `mainnet pace, light client on (read at the full-node head, 18 above the solidified one), same synthetic blocks, 3 s per block, gRPC: ${gated.reqs} requests over ${gated.elapsed.toFixed(0)} s for ${gated.blocks} blocks = ${(gated.reqs / gated.blocks).toFixed(2)} requests per block (goal: ≤ 2.1), ${(gated.reqs / gated.elapsed).toFixed(2)} requests/s (goal: ≤ 0.70); by path: ${paths(gated.byPath)}; ${gated.headPolls} head polls in total`,
  ];
}

/**
 * The end-to-end benchmarks (module doc): latency at `intervalMs` (the load test) over `blocks`,
 * latency at mainnet's pace over `paceLatencyBlocks` (0 skips it), each light client off then
 * on, and node requests at mainnet's pace for `paceSeconds` per run.
 * @returns the lines to print, in that order.
 */
export async function benchE2e(
  opts: {
    blocks?: number;
    intervalMs?: number;
    paceLatencyBlocks?: number;
    paceSeconds?: number;
  } = {},
): Promise<string[]> {
  const paceBlocks = opts.paceLatencyBlocks ?? 75;
  return [
    ...(await latency(opts.blocks ?? 510, opts.intervalMs ?? 150)),
    ...(await latency(opts.blocks ?? 510, opts.intervalMs ?? 150, true)),
    ...(paceBlocks > 0 ? await latency(paceBlocks, MAINNET_INTERVAL_MS) : []),
    ...(paceBlocks > 0 ? await latency(paceBlocks, MAINNET_INTERVAL_MS, true) : []),
    ...(await requestRate(opts.paceSeconds ?? 45)),
  ];
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await benchE2e({
    blocks: Number(process.env.BENCH_E2E_BLOCKS ?? 510),
    intervalMs: Number(process.env.BENCH_INTERVAL_MS ?? 150),
    paceLatencyBlocks: Number(process.env.BENCH_PACE_LATENCY_BLOCKS ?? 75),
    paceSeconds: Number(process.env.BENCH_PACE_SECONDS ?? 45),
  }))
    console.log(l);
}
