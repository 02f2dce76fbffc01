/**
 * Node requests of the ingester (issue 14), against a replay node in a worker thread:
 * 1. At mainnet's pace, caught up: requests per block and requests/s scaled to the 3 s interval,
 *    on a compressed clock (BENCH_RATE_COMPRESSION, default 10: one block per 300 ms, and the
 *    ingester told so, so its waits scale alike), over BENCH_RATE_BLOCKS (300) blocks after the
 *    first 30. Floor: 2 per block (the block and its infos) = 0.67/s; goal ≤ 0.70/s. Before this
 *    change the head polls brought it to 1.09/s (≈3.27 per block).
 * 2. A stalled solidified head (BENCH_STALL_BLOCKS, 100 intervals: 5 minutes on mainnet): the
 *    requests sent meanwhile (goal ≤ 1 per interval), then the time to take the blocks the node
 *    releases at once.
 * 3. Catching up a day of mainnet (BENCH_CATCHUP_BLOCKS, 28,800 blocks of 2 transactions) under
 *    a cap of BENCH_CATCHUP_RPS (200) requests per second, the node refusing (429) anything
 *    above that in any second: the time taken next to the time the cap allows, requests per
 *    block, the busiest second seen by the node, and what TRON_NODE_MAX_RPS=10 (the default)
 *    makes of it.
 * PostgreSQL when DATABASE_URL is set (a fresh database), else PGlite.
 */
import { silentLogger } from '../src/common/logger.js';
import { Ingester } from '../src/ingest/loop.js';
import { NodeClient } from '../src/tron/node-client.js';
import { migratedDb } from '../test/helpers/db.js';
import { serveSyntheticInWorker } from '../test/helpers/replay-worker.js';

const MAINNET_INTERVAL_MS = 3000;
const engine = () => (process.env.DATABASE_URL ? 'postgres' : 'pglite') as 'postgres' | 'pglite';

async function pace(compression: number, blocks: number): Promise<string[]> {
  const interval = MAINNET_INTERVAL_MS / compression;
  const settle = 30;
  const t = await migratedDb(engine());
  const chain = await serveSyntheticInWorker(
    { seed: 9, firstBlock: 73_000_000, txPerBlock: 600, addresses: 10_000, count: settle + blocks },
    { intervalMs: interval, lag: 18, startBefore: 0, stopAtEnd: true, logRequests: true },
  );
  const client = new NodeClient({ url: chain.url, maxRps: 10 });
  const ing = new Ingester({
    db: t.db,
    client,
    logger: silentLogger,
    config: {
      network: 'mainnet',
      node: { concurrency: 8 },
      ingest: { startBlock: chain.first, blockIntervalMs: interval },
    },
  });
  const ac = new AbortController();
  const run = ing.run(ac.signal);
  while (ing.stats.cursor < chain.last) await new Promise((r) => setTimeout(r, 50));
  ac.abort();
  await run;
  const [from = 0, to = 0] = await chain.solidifiedAt([chain.first + settle - 1, chain.last]);
  const log = await chain.requestLog();
  // Requests from the solidification of the block before the measured ones to that of the last.
  const reqs = log.filter((r) => r.at > from && r.at <= to).length;
  await client.close();
  await chain.close();
  await t.drop();
  const perBlock = reqs / blocks;
  const perSecond = perBlock / (MAINNET_INTERVAL_MS / 1000);
  return [
    `database: ${engine()}; mainnet pace on a ${compression}× compressed clock (one block per ${interval} ms, 600 txs), ${blocks} blocks after ${settle}`,
    `${reqs} requests for ${blocks} blocks = ${perBlock.toFixed(3)} per block = ${perSecond.toFixed(3)} requests/s at 3 s per block (floor 0.667, goal ≤ 0.70; before: 1.09) = ${Math.round(perSecond * 86_400)} a day`,
    `next-block asks: ${ing.stats.nextBlockAsks} (${ing.stats.nextBlockMisses} too early, from the start); head polls: ${ing.stats.headPolls}`,
  ];
}

/**
 * A node whose solidified head stands still for `stallBlocks` intervals (100: 5 minutes on
 * mainnet), on the compressed clock, the ingester caught up: its requests during the stall (goal:
 * at most one per block interval), then the node releases the blocks it held all at once and the
 * time to commit them all, in mainnet seconds (goal: a few seconds, not the minute until the next
 * head poll).
 */
async function stall(compression: number, stallBlocks: number): Promise<string[]> {
  const interval = MAINNET_INTERVAL_MS / compression;
  const t = await migratedDb(engine());
  const chain = await serveSyntheticInWorker(
    { seed: 12, firstBlock: 75_000_000, txPerBlock: 200, addresses: 1_000, count: 60 },
    { intervalMs: interval, lag: 18, startBefore: 0, logRequests: true },
  );
  const client = new NodeClient({ url: chain.url, maxRps: 10 });
  const ing = new Ingester({
    db: t.db,
    client,
    logger: silentLogger,
    config: {
      network: 'mainnet',
      node: { concurrency: 8 },
      ingest: { startBlock: chain.first, blockIntervalMs: interval },
    },
  });
  const ac = new AbortController();
  const run = ing.run(ac.signal);
  while (ing.stats.cursor < chain.first + 10) await new Promise((r) => setTimeout(r, 20));
  await chain.pause();
  const from = Date.now();
  await new Promise((r) => setTimeout(r, stallBlocks * interval));
  const to = Date.now();
  const during = (await chain.requestLog()).filter((r) => r.at > from && r.at <= to).length;
  // The node catches up: everything it held back is there at once.
  const h = (await chain.heads()).solidified;
  await chain.advanceTo(h + stallBlocks);
  const released = performance.now();
  while (ing.stats.cursor < h + stallBlocks) await new Promise((r) => setTimeout(r, 5));
  const caughtUpMs = performance.now() - released;
  ac.abort();
  await run;
  await client.close();
  await chain.close();
  await t.drop();
  const perInterval = during / stallBlocks;
  return [
    `database: ${engine()}; a solidified head standing still for ${stallBlocks} block intervals (${((stallBlocks * MAINNET_INTERVAL_MS) / 60_000).toFixed(0)} min on mainnet), ${compression}× compressed clock`,
    `${during} requests during the stall = ${perInterval.toFixed(2)} per block interval = ${(perInterval / (MAINNET_INTERVAL_MS / 1000)).toFixed(3)}/s at mainnet pace (goal ≤ 1 per interval; before: up to 30 per interval, one ask every 100 ms)`,
    `then the ${stallBlocks} blocks released at once were all committed in ${(caughtUpMs / 1000).toFixed(1)} s, where TRON_NODE_MAX_RPS=10 allows their ${2 * stallBlocks} requests in ${((2 * stallBlocks * 1.1) / 10).toFixed(0)} s (the client's window is 1.1 s) (before: one block per interval until the once-a-minute head poll)`,
  ];
}

async function catchUp(blocks: number, cap: number): Promise<string[]> {
  const t = await migratedDb(engine());
  const chain = await serveSyntheticInWorker(
    { seed: 11, firstBlock: 74_000_000, txPerBlock: 2, addresses: 1_000, count: blocks },
    { instant: true, rateLimit: { perSecond: cap }, logRequests: true },
  );
  const client = new NodeClient({ url: chain.url, maxRps: cap, connections: 10 });
  const ing = new Ingester({
    db: t.db,
    client,
    logger: silentLogger,
    config: {
      network: 'mainnet',
      node: { concurrency: 8 },
      ingest: { startBlock: chain.first, blockIntervalMs: MAINNET_INTERVAL_MS },
    },
  });
  const ac = new AbortController();
  const started = performance.now();
  const run = ing.run(ac.signal);
  while (ing.stats.cursor < chain.last) await new Promise((r) => setTimeout(r, 100));
  const seconds = (performance.now() - started) / 1000;
  ac.abort();
  await run;
  const log = await chain.requestLog();
  const stats = await chain.stats();
  let busiest = 0;
  for (let i = 0, j = 0; i < log.length; i++) {
    while (j < log.length && (log[j]?.at ?? 0) < (log[i]?.at ?? 0) + 1000) j++;
    busiest = Math.max(busiest, j - i);
  }
  await client.close();
  await chain.close();
  await t.drop();
  const perBlock = log.length / blocks;
  const allowed = log.length / cap;
  // The client's window is 1.1 s long (node-client.ts WINDOW_SLACK_MS): cap/1.1 on average.
  const atDefault = (blocks * perBlock) / (10 / 1.1) / 60;
  return [
    `database: ${engine()}; ${blocks} blocks (2 txs each) caught up under TRON_NODE_MAX_RPS=${cap}, the node refusing above ${cap} in any second`,
    `${seconds.toFixed(0)} s; ${log.length} requests = ${perBlock.toFixed(3)} per block (${ing.stats.headPolls} head polls); the cap allows ${allowed.toFixed(0)} s (ratio ${(seconds / allowed).toFixed(2)}); busiest second ${busiest} requests; ${stats.rateLimited} refused`,
    `at the default TRON_NODE_MAX_RPS=10: ${atDefault.toFixed(0)} min for these ${blocks} blocks`,
  ];
}

export async function benchIngestRate(
  opts: {
    compression?: number;
    blocks?: number;
    stallBlocks?: number;
    catchUpBlocks?: number;
    catchUpRps?: number;
  } = {},
): Promise<string[]> {
  return [
    ...(await pace(opts.compression ?? 10, opts.blocks ?? 300)),
    ...(await stall(opts.compression ?? 10, opts.stallBlocks ?? 100)),
    ...(await catchUp(opts.catchUpBlocks ?? 28_800, opts.catchUpRps ?? 200)),
  ];
}
