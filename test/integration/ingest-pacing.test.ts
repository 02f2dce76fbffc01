/**
 * The caught-up ingester when the chain does not keep its pace (src/ingest/loop.ts, issue "Pacing
 * under stalls and jitter"), against a real replay node whose heads can stand still and then jump
 * (pause, advanceTo), on both engines:
 * 1. a stalled head is asked for at most about once per block interval, the episode logged once;
 * 2. blocks released at once after a stall are taken by the catch-up, not one per interval;
 * 3. a watch created while the chain is halted activates at the chain's head, not past it, and
 *    gets the first transfer made after the chain resumes;
 * 4. at start, before the chain's grid is known, the next blocks cost a few asks, not one every
 *    missGap.
 * Counts of requests, never durations, are asserted (the bound of item 1 is a rate: asks per
 * interval of the stall as it was measured).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createAccount } from '../../src/accounts/accounts.js';
import { createApiKey } from '../../src/accounts/keys.js';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import { loadConfig } from '../../src/config.js';
import { Ingester } from '../../src/ingest/loop.js';
import { type Service, startService } from '../../src/service.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { NodeClient } from '../../src/tron/node-client.js';
import { FINALITY_DEPTH, nodeEnv, type SyntheticChain, serveSynthetic } from '../helpers/chain.js';
import { dbEngines, emptyDb, migratedDb, type TestDb } from '../helpers/db.js';

const INTERVAL = 50;
const CHAIN = { seed: 41, firstBlock: 75_000_000, txPerBlock: 60, addresses: 40, count: 40 };

async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 60_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const l of chunk.toString().split('\n')) if (l) lines.push(JSON.parse(l));
        done();
      },
    }),
  );
  return { logger, lines };
}

describe.each(dbEngines)('caught-up ingest when the chain stalls, on %s', (engine) => {
  let t: TestDb | undefined;
  let chain: SyntheticChain | undefined;
  let client: NodeClient | undefined;
  let svc: Service | undefined;
  let dir: string | undefined;
  afterEach(async () => {
    await svc?.stop();
    await client?.close();
    await chain?.node.close();
    await t?.drop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
    svc = undefined;
    client = undefined;
    chain = undefined;
    t = undefined;
    dir = undefined;
  });

  async function caughtUpIngester() {
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN, { intervalMs: INTERVAL, lag: 2, startBefore: 0 });
    client = new NodeClient({ url: chain.node.url, retries: 3 });
    const metrics = new Metrics();
    const { logger, lines } = capture();
    const ing = new Ingester({
      db: t.db,
      client,
      logger,
      metrics,
      config: {
        network: 'mainnet',
        node: { concurrency: 4 },
        ingest: { startBlock: chain.first, blockIntervalMs: INTERVAL },
      },
    });
    const ac = new AbortController();
    const running = ing.run(ac.signal);
    // Caught up and on the chain's grid: a few blocks taken by asking for the next one.
    await until(
      'caught up',
      () => ing.stats.cursor >= chain!.first + 5 && ing.stats.nextBlockAsks > 5,
    );
    return {
      ing,
      metrics,
      lines,
      async stop() {
        ac.abort();
        await running;
      },
    };
  }

  it('asks a stalled head about once per block interval, says so once, and resumes', async () => {
    const run = await caughtUpIngester();
    const node = (chain as SyntheticChain).node;
    try {
      node.pause();
      const asksBefore = run.ing.stats.nextBlockAsks;
      const started = performance.now();
      await sleep(60 * INTERVAL);
      const asks = run.ing.stats.nextBlockAsks - asksBefore;
      const intervals = (performance.now() - started) / INTERVAL;
      // One interval of asks every missGap (10 ms) before it is overdue, the backoff's doubling
      // (10, 20, 40 ms), then one per interval: before the fix, one every 10 ms (~5 per interval).
      expect(asks).toBeLessThanOrEqual(Math.ceil(intervals) + 12);
      expect(asks).toBeGreaterThan(0);
      const overdue = run.lines.filter((l) =>
        String(l.msg).startsWith('the next block is overdue'),
      );
      expect(overdue).toHaveLength(1);
      const scrape = await run.metrics.render();
      const gauge = /^tronwatch_chain_next_block_overdue_seconds (\S+)$/m.exec(scrape)?.[1];
      expect(Number(gauge)).toBeGreaterThan(0);
      const at = run.ing.stats.cursor;
      node.resume();
      await until('the chain again', () => run.ing.stats.cursor >= at + 3);
      expect(run.lines.filter((l) => String(l.msg).startsWith('blocks flow again'))).toHaveLength(
        1,
      );
      expect(
        /^tronwatch_chain_next_block_overdue_seconds 0$/m.test(await run.metrics.render()),
      ).toBe(true);
    } finally {
      await run.stop();
    }
  });

  it('finds the chain grid at start in a few asks, not one every missGap', async () => {
    // Mainnet's pace: 3 s per block, missGap 100 ms. The first block is solidified at once, the
    // next one up to 3 s later: before, it was asked at once and then every 100 ms until it came
    // (about 27 misses here); now every 548 ms (at most 6 misses, the first ask included), and the
    // one after it from the last miss + 3 s every 100 ms (about 6 more).
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN, { intervalMs: 3000, lag: 2, startBefore: 0 });
    chain.node.advanceTo(chain.first);
    client = new NodeClient({ url: chain.node.url, retries: 3 });
    const ing = new Ingester({
      db: t.db,
      client,
      logger: silentLogger,
      config: {
        network: 'mainnet',
        node: { concurrency: 4 },
        ingest: { startBlock: chain.first, blockIntervalMs: 3000 },
      },
    });
    const ac = new AbortController();
    const running = ing.run(ac.signal);
    try {
      await until('two blocks taken by asking', () => ing.stats.cursor >= chain!.first + 2);
      expect(ing.stats.nextBlockAsks - ing.stats.nextBlockMisses).toBeGreaterThanOrEqual(2);
      expect(ing.stats.nextBlockMisses).toBeGreaterThan(0);
      expect(ing.stats.nextBlockMisses).toBeLessThanOrEqual(16);
    } finally {
      ac.abort();
      await running;
    }
  });

  it('takes blocks released at once after a stall by catching up, not one per interval', async () => {
    const run = await caughtUpIngester();
    const node = (chain as SyntheticChain).node;
    try {
      // Stall right after a head poll, for less than the 20 intervals after which the next poll
      // is due anyway: only the overdue block's arrival can tell the ingester it is behind.
      const polled = run.ing.stats.headPolls;
      await until('a head poll', () => run.ing.stats.headPolls > polled);
      node.pause();
      await sleep(8 * INTERVAL); // overdue, well before the next poll is due
      const h = node.heads().solidified;
      const asks = run.ing.stats.nextBlockAsks;
      const polls = run.ing.stats.headPolls;
      node.advanceTo(h + 20); // the node releases 20 blocks at once (its heads stay there)
      await until('the 20 released blocks', () => run.ing.stats.cursor >= h + 20);
      // The first one came by asking; it set off a head poll and the catch-up took the rest
      // (before: each of the 20 by its own ask, one per interval, until the next head poll).
      expect(run.ing.stats.nextBlockAsks - asks).toBeLessThanOrEqual(3);
      expect(run.ing.stats.headPolls - polls).toBeGreaterThanOrEqual(1);
    } finally {
      await run.stop();
    }
  });

  it('activates a watch created while the chain is halted at the chain, and matches the first transfer after', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-halt-'));
    const env: Record<string, string> = {
      DATA_DIR: dir,
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0',
      TRON_BLOCK_INTERVAL_MS: String(INTERVAL),
    };
    if (engine === 'postgres') {
      t = await emptyDb('postgres');
      env.DATABASE_URL = t.url as string;
    }
    // The full-node head runs FINALITY_DEPTH above the solidified one, as on mainnet: the light
    // client proves final what the node solidified.
    chain = await serveSynthetic(CHAIN, {
      intervalMs: INTERVAL,
      lag: FINALITY_DEPTH,
      startBefore: 0,
    });
    const c = chain;
    // The chain halts at first + 8 (its heads stand still there until resume).
    c.node.pause();
    c.node.advanceTo(c.first + 8);
    const halted = c.node.heads();
    Object.assign(env, nodeEnv(c.node));
    env.INGEST_START_BLOCK = String(c.first);
    svc = await startService(loadConfig(env), { roles: ['api', 'ingest'], logger: silentLogger });
    const s = svc;
    await until(
      'ingest up to the halt',
      () => (s.ingester?.stats.cursor ?? 0) >= halted.solidified,
    );
    // The first block a watch created now may match is the one after the head; find an address
    // paid in it (and the transfer it must be told of).
    const first = c.transfers.find((x) => x.blockNumber === halted.head + 1);
    if (!first) throw new Error(`no transfer in block ${halted.head + 1}`);
    await sleep(60 * INTERVAL); // a halt of 60 block intervals (a 3-minute halt on mainnet)
    const acc = await createAccount(s.db, { email: 'halt@example.com', plan: 'pro' });
    const { key } = await createApiKey(s.db, acc.id);
    const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const created = await fetch(`${s.url}/v1/watches`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        address: hexToBase58(first.to),
        asset_filter: first.asset,
        direction: 'incoming',
        webhook_url: 'https://93.184.215.14/hook',
      }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const watch = (await created.json()) as { id: string };
    const { rows } = await s.db.query<{ active_from_block: string }>(
      'SELECT active_from_block FROM watches WHERE id = $1',
      [watch.id],
    );
    // At the chain as it stands (before: the head extrapolated by 60 intervals of halt).
    expect(Number(rows[0]?.active_from_block)).toBe(halted.head);
    c.node.resume();
    await until(
      'the block after the halt',
      () => (s.ingester?.stats.cursor ?? 0) >= halted.head + 1,
    );
    const events = (await (
      await fetch(`${s.url}/v1/events?watch_id=${watch.id}`, { headers })
    ).json()) as { data: Array<{ tx_id: string; block_number: number }> };
    expect(events.data.map((e) => [e.tx_id, e.block_number])).toContainEqual([
      first.txId,
      halted.head + 1,
    ]);
  });
});
