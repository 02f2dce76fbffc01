/**
 * Catch-up within a provider's limits (issue 14), against a real replay node with a scripted
 * limit, on both database engines: the client's TRON_NODE_MAX_RPS cap is never exceeded (counted
 * in one-second windows of the node's own request log); a 429 with Retry-After, or a 403
 * suspension after a burst, pauses every request as asked and is logged once for the episode;
 * and once caught up, the ingester asks for the next block itself (two requests per block plus
 * the asks that come early) without ever skipping a block or asking past the solidified head + 1.
 */
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import type { Queryable } from '../../src/db/pool.js';
import type { ReplayRateLimit, ReplayRequestRecord } from '../../src/devnet/replay-node.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import { Ingester } from '../../src/ingest/loop.js';
import { NodeClient, parseRetryAfter } from '../../src/tron/node-client.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  storedEventKeys,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { serveSyntheticInWorker, type WorkerChain } from '../helpers/replay-worker.js';

const CHAIN = { seed: 21, firstBlock: 71_000_000, txPerBlock: 30, addresses: 40 };
/** Each test catches up or follows a chain for 5–15 s; PGlite on a busy machine takes longer. */
const TIMEOUT_MS = 180_000;

/** The most requests the node saw arrive in any window [t, t + 1000 ms) of its log. */
function maxPerSecond(log: readonly ReplayRequestRecord[]): number {
  let max = 0;
  let j = 0;
  for (let i = 0; i < log.length; i++) {
    const start = log[i]?.at ?? 0;
    if (j < i) j = i;
    while (j < log.length && (log[j]?.at ?? 0) < start + 1000) j++;
    max = Math.max(max, j - i);
  }
  return max;
}

async function insertAccount(db: Queryable): Promise<string> {
  const id = newId('acc');
  await db.query("INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'pro')", [
    id,
    `${id}@example.com`,
  ]);
  return id;
}

/** A logger that keeps its JSON lines (debug and up). */
function recordingLogger() {
  const lines: Array<{ level: number; msg: string } & Record<string, unknown>> = [];
  const logger = pino({ level: 'debug' }, { write: (s: string) => void lines.push(JSON.parse(s)) });
  return { logger, lines };
}

describe('parseRetryAfter', () => {
  it('reads delta-seconds and HTTP dates, and nothing else', () => {
    const now = Date.parse('2026-01-08T13:36:54Z');
    expect(parseRetryAfter('2', now)).toBe(2000);
    expect(parseRetryAfter(['0'], now)).toBe(0);
    expect(parseRetryAfter('Thu, 08 Jan 2026 13:37:04 GMT', now)).toBe(10_000);
    expect(parseRetryAfter('Thu, 08 Jan 2026 13:30:00 GMT', now)).toBe(0);
    expect(parseRetryAfter(undefined, now)).toBeUndefined();
    expect(parseRetryAfter('soon', now)).toBeUndefined();
  });
});

describe.each(dbEngines)('node rate limits on %s', (engine) => {
  let t: TestDb | undefined;
  let chain: WorkerChain | undefined;
  let client: NodeClient | undefined;
  afterEach(async () => {
    await client?.close();
    await chain?.close();
    await t?.drop();
    client = undefined;
    chain = undefined;
    t = undefined;
  });

  /** The integration tests' ingest settings (4 blocks ahead, 3 retries) on `c`. */
  const ingestConfig = (c: WorkerChain, intervalMs = 50, startBlock = c.first) => ({
    network: 'mainnet' as const,
    node: { url: c.url, apiKey: undefined, timeoutMs: 5000, retries: 3, concurrency: 4 },
    ingest: { startBlock, blockIntervalMs: intervalMs },
  });

  /** Run `ing` until its cursor reaches `last`, then stop it. */
  async function ingestUntil(ing: Ingester, last: number): Promise<void> {
    const ac = new AbortController();
    const run = ing.run(ac.signal);
    while (ing.stats.cursor < last) await new Promise((r) => setTimeout(r, 20));
    ac.abort();
    await run;
  }

  /** Watches on every synthetic address, active from before the chain: events to expect. */
  async function watchEverything(db: Queryable, c: WorkerChain) {
    const acc = await insertAccount(db);
    const watches = await insertSyntheticWatches(db, acc, syntheticAddresses(CHAIN), {
      activeFrom: c.first - 1,
    });
    return expectedEvents(c.transfers, watches).map(eventKey).sort();
  }

  it(
    'catches up at the cap and never sends more than TRON_NODE_MAX_RPS in any second',
    async () => {
      const CAP = 10;
      t = await migratedDb(engine);
      chain = await serveSyntheticInWorker(
        { ...CHAIN, count: 24 },
        { instant: true, rateLimit: { perSecond: CAP }, logRequests: true },
      );
      const expected = await watchEverything(t.db, chain);
      client = new NodeClient({ url: chain.url, retries: 3, maxRps: CAP, connections: 6 });
      const committed: number[] = [];
      const ing = new Ingester({
        db: t.db,
        client,
        logger: silentLogger,
        config: ingestConfig(chain),
        onBlock: (b) => committed.push(b.blockNumber),
      });
      await ingestUntil(ing, chain.last);

      const log = await chain.requestLog();
      expect((await chain.stats()).rateLimited).toBe(0); // the node never had to refuse one
      expect(maxPerSecond(log)).toBeLessThanOrEqual(CAP);
      // Every HTTP request the node saw was counted (and at most the few aborted at the stop more).
      expect(client.requestCount).toBeGreaterThanOrEqual(log.length);
      expect(client.requestCount).toBeLessThanOrEqual(log.length + 6);
      // Two requests per block (block, infos) while catching up; head polls on top.
      expect(log.length).toBeGreaterThanOrEqual(2 * 24);
      expect(committed).toEqual(Array.from({ length: 24 }, (_, i) => chain!.first + i));
      expect(await storedEventKeys(t.db)).toEqual(expected);
    },
    TIMEOUT_MS,
  );

  it.each<[string, ReplayRateLimit]>([
    ['429 with Retry-After: 1 above 4 requests per second', { perSecond: 4, retryAfterSeconds: 1 }],
    [
      '403 for 2 s after a burst above 5 per second',
      { perSecond: 5, status: 403, penaltyMs: 2_000 },
    ],
  ])(
    'honours the provider on %s, logs it once, never loops on it',
    async (_name, limit) => {
      t = await migratedDb(engine);
      chain = await serveSyntheticInWorker(
        { ...CHAIN, count: 12 },
        { instant: true, rateLimit: limit, logRequests: true },
      );
      const expected = await watchEverything(t.db, chain);
      const { logger, lines } = recordingLogger();
      // No cap of our own (a provider whose limit is unknown): the refusals pace the client.
      client = new NodeClient({ url: chain.url, retries: 6, maxRps: 0, logger });
      const committed: number[] = [];
      const ing = new Ingester({
        db: t.db,
        client,
        logger,
        config: ingestConfig(chain), // 4 blocks ahead
        onBlock: (b) => committed.push(b.blockNumber),
      });
      await ingestUntil(ing, chain.last);

      expect(committed).toEqual(Array.from({ length: 12 }, (_, i) => chain!.first + i));
      expect(await storedEventKeys(t.db)).toEqual(expected);
      const log = await chain.requestLog();
      const refused = log.filter((r) => r.status === 429 || r.status === 403);
      expect(refused.length).toBeGreaterThan(0);
      // Each refusal seen by the client (a refusal in flight at the stop may not be).
      expect(client.refusedCount).toBeLessThanOrEqual(refused.length);
      expect(client.refusedCount).toBeGreaterThanOrEqual(refused.length - 6);
      expect(client.requestCount).toBeGreaterThanOrEqual(log.length);
      expect(client.requestCount).toBeLessThanOrEqual(log.length + 6);
      // Once per episode (the test lasts less than one), never per refusal or per retry.
      const warned = lines.filter((l) => l.msg.includes('the provider refuses requests'));
      expect(warned).toHaveLength(1);
      const retryWarnings = lines.filter(
        (l) => l.level >= 40 && l.msg === 'node request failed, retrying',
      );
      expect(retryWarnings).toHaveLength(0);
      // After a refusal, only the requests already in flight arrive within the pause (4 blocks
      // ahead and a head poll: at most 5 more), never a loop of retries. The pause asked is 1 s
      // (429) or what is left of the 2 s suspension; 900 ms leaves time for the answer to arrive.
      for (const r of refused) {
        const pauseMs =
          limit.penaltyMs !== undefined ? 900 : (limit.retryAfterSeconds ?? 1) * 1000 - 100;
        const within = log.filter((x) => x.at > r.at && x.at < r.at + pauseMs).length;
        expect(within).toBeLessThanOrEqual(5);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'caught up, asks for the next block itself: about two requests per block, never past solidified + 1, none skipped',
    async () => {
      const INTERVAL = 300;
      const COUNT = 40;
      t = await migratedDb(engine);
      chain = await serveSyntheticInWorker(
        { ...CHAIN, count: COUNT },
        { intervalMs: INTERVAL, lag: 18, startBefore: 2, stopAtEnd: true, logRequests: true },
      );
      const expected = await watchEverything(t.db, chain);
      // A cap well above the pace (2 requests per 300 ms block): the asks are paced by the chain.
      client = new NodeClient({ url: chain.url, retries: 3, maxRps: 20 });
      const committed: number[] = [];
      const ing = new Ingester({
        db: t.db,
        client,
        logger: silentLogger,
        config: ingestConfig(chain, INTERVAL),
        onBlock: (b) => committed.push(b.blockNumber),
      });
      await ingestUntil(ing, chain.last);

      expect(committed).toEqual(Array.from({ length: COUNT }, (_, i) => chain!.first + i));
      expect(await storedEventKeys(t.db)).toEqual(expected);
      const log = await chain.requestLog();
      expect(client.requestCount).toBeGreaterThanOrEqual(log.length);
      expect(client.requestCount).toBeLessThanOrEqual(log.length + 6);
      // Never asked for a block whose predecessor was not solidified yet (the node's timeline).
      const asked = log.filter((r) => r.path === '/walletsolidity/getblockbynum');
      const prevAt = await chain.solidifiedAt(asked.map((r) => (r.num ?? 0) - 1));
      for (const [i, r] of asked.entries()) {
        expect(prevAt[i] ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(r.at + 1);
      }
      // Requests per block once the chain's phase was found (the first 10 blocks learn it):
      // the block and its infos, the early asks, a head poll every 20 intervals. The old head
      // polling took 3 per block and more; mainnet-pace figures are in `BENCH=ingest-rate`.
      const [from = 0, to = 0] = await chain.solidifiedAt([chain.first + 10, chain.last]);
      const inWindow = log.filter((r) => r.at > from && r.at <= to + 50);
      const perBlock = inWindow.length / (COUNT - 11);
      console.log(
        `${engine}: ${perBlock.toFixed(2)} requests per block at ${INTERVAL} ms per block (${ing.stats.nextBlockMisses} early asks of ${ing.stats.nextBlockAsks}, ${ing.stats.headPolls} head polls)`,
      );
      expect(perBlock).toBeLessThan(2.6);
    },
    TIMEOUT_MS,
  );
});
