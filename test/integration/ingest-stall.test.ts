/**
 * A block that fails for a reason no retry can fix (src/ingest/stall.ts), on both database
 * engines, against a real replay node: ingest stops before it (never skips it), logs it once,
 * reports it in GET /healthz (503, block and reason, read from the database) and in
 * tronwatch_ingest_stalled_block, keeps retrying it slowly, and resumes with no gap once the node
 * serves the block correctly.
 */
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { buildMetricsApp } from '../../src/api/metrics-app.js';
import { silentLogger } from '../../src/common/logger.js';
import {
  type BlockEntry,
  type BlockSource,
  memorySource,
  type ReplayNode,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { syntheticAddresses, syntheticBlock } from '../../src/devnet/synthetic.js';
import { readCursor } from '../../src/ingest/commit.js';
import { Ingester } from '../../src/ingest/loop.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { BlockJson, Transfer } from '../../src/tron/types.js';
import {
  type ApiHarness,
  apiHarness,
  json,
  openapiDocument,
  responseChecker,
} from '../helpers/api.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  storedEventKeys,
  testIngestConfig,
} from '../helpers/chain.js';
import { dbEngines } from '../helpers/db.js';

const CHAIN = { seed: 23, firstBlock: 71_000_000, txPerBlock: 60, addresses: 30, count: 10 };

/** Wait until `cond` holds, polling every 20 ms; fail after `ms` (a bound, not a measurement). */
async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 30_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * The block's JSON with one TRX transfer's owner_address made invalid: verification refuses it
 * (the JSON no longer says what the signed bytes say), before extraction would.
 */
function corrupt(blockJson: string): { bytes: string; txId: string } {
  const b = JSON.parse(blockJson) as BlockJson;
  const tx = (b.transactions ?? []).find(
    (t) =>
      t.raw_data?.contract?.[0]?.type === 'TransferContract' &&
      Number(t.raw_data.contract[0].parameter?.value?.amount ?? 0) > 0,
  );
  const value = tx?.raw_data?.contract?.[0]?.parameter?.value;
  if (!tx || !value) throw new Error('the synthetic block has no TRX transfer to corrupt');
  value.owner_address = '41zz';
  return { bytes: JSON.stringify(b), txId: tx.txID };
}

/** The value of one sample line of the Prometheus text (`name{labels} value`). */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe.each(dbEngines)('ingest stall on %s', (engine) => {
  let h: ApiHarness | undefined;
  let node: ReplayNode | undefined;
  let client: NodeClient | undefined;
  let metricsApp: FastifyInstance | undefined;
  afterEach(async () => {
    await metricsApp?.close();
    metricsApp = undefined;
    await client?.close();
    await node?.close();
    await h?.close();
    client = undefined;
    node = undefined;
    h = undefined;
  });

  it('stops before a corrupt block, says so once, in /healthz and /metrics, and resumes with no gap once it is fixed', async () => {
    h = await apiHarness(engine);
    const first = CHAIN.firstBlock;
    const last = first + CHAIN.count - 1;
    const bad = first + 4;
    const good = new Map<number, { block: string; infos: string }>();
    const transfers: Transfer[] = [];
    for (let n = first; n <= last; n++) {
      const b = syntheticBlock(CHAIN, n);
      good.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
      transfers.push(...b.transfers);
    }
    // The node serves the corrupt bytes of `bad` until the test "fixes the node".
    const broken = new Map<number, BlockEntry>();
    const goodBad = good.get(bad);
    if (!goodBad) throw new Error('no block');
    const c = corrupt(goodBad.block);
    broken.set(bad, { block: Buffer.from(c.bytes), infos: Buffer.from(goodBad.infos) });
    const base = memorySource(good);
    const source: BlockSource = {
      first: base.first,
      last: base.last,
      recorded: base.recorded ?? [],
      get: async (n) => broken.get(n) ?? base.get(n),
    };
    node = await startReplayNode({ source, instant: true });

    const { accountId } = await h.caller();
    const watches = await insertSyntheticWatches(
      h.db,
      accountId,
      syntheticAddresses(CHAIN).slice(0, 8),
      { activeFrom: first - 1 },
    );
    const expected = expectedEvents(transfers, watches);
    expect(
      expected.some((e) => transfers.find((t) => t.txId === e.txId)?.blockNumber === bad),
    ).toBe(true); // the corrupt block holds events: skipping it would lose them

    const logs: Array<Record<string, unknown>> = [];
    const logger = pino(
      { level: 'debug' },
      new Writable({
        write(chunk: Buffer, _enc, done) {
          for (const line of chunk.toString().split('\n')) if (line) logs.push(JSON.parse(line));
          done();
        },
      }),
    );
    const logged = (msg: string) =>
      logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith(msg));
    const metrics = h.app.metrics;
    if (!metrics) throw new Error('buildApp set no metrics');
    // GET /metrics is the metrics listener's (src/api/metrics-app.ts), not the API app's.
    const scraper = await buildMetricsApp(metrics, silentLogger);
    metricsApp = scraper;
    const permanentFailures = async () =>
      (await metrics.ingestFailures.get()).values.find((v) => v.labels.class === 'permanent')
        ?.value ?? 0;

    client = new NodeClient({ url: node.url, retries: 3 });
    const committed: number[] = [];
    const ing = new Ingester({
      db: h.db,
      client,
      logger,
      metrics,
      config: testIngestConfig({ node, first, last, transfers }),
      permanentRetryMs: 50,
      onBlock: (b) => committed.push(b.blockNumber),
    });
    const ac = new AbortController();
    const running = ing.run(ac.signal);
    try {
      // Reported by /healthz, and retried several times (so "logged once" means something).
      await until(
        '/healthz 503',
        async () => (await h!.app.inject({ url: '/healthz' })).statusCode === 503,
      );
      await until('three permanent failures', async () => (await permanentFailures()) >= 3);

      expect((await readCursor(h.db, 'mainnet'))?.block_number).toBe(bad - 1);
      expect(committed).toEqual(Array.from({ length: bad - first }, (_, i) => first + i));

      const down = await h.app.inject({ url: '/healthz' });
      expect(down.statusCode).toBe(503);
      const body = json<{ ingest: { since: string } }>(down);
      expect(body).toEqual({
        ok: false,
        network: 'mainnet',
        // The only provider's answer was refused: it is set aside (and asked again) meanwhile.
        checks: { postgres: true, redis: true, ingest: false, node: false },
        node: {
          providers: [
            {
              index: 0,
              state: 'set_aside',
              reason: 'verification: tx_fields',
              since: expect.any(String),
              until: expect.any(String),
            },
          ],
        },
        ingest: {
          stalled_block: bad,
          reason: `block ${bad} failed verification (tx_fields): tx ${c.txId}: the JSON TransferContract fields differ from the signed raw_data`,
          since: expect.any(String),
        },
      });
      expect(new Date(body.ingest.since).toISOString()).toBe(body.ingest.since);
      const check = responseChecker(await openapiDocument(h.app));
      expect(check('/healthz', 'get', down)).toEqual([]);

      const scrape = (await scraper.inject({ url: '/metrics' })).body;
      expect(sample(scrape, 'tronwatch_ingest_stalled_block')).toBe(bad);
      expect(
        sample(scrape, 'tronwatch_ingest_block_failures_total{class="permanent"}'),
      ).toBeGreaterThanOrEqual(3);

      const stalledLines = logged('ingest stalled');
      expect(stalledLines).toHaveLength(1);
      expect(stalledLines[0]).toMatchObject({
        level: 50,
        block_number: bad,
        reason: `block ${bad} failed verification (tx_fields): tx ${c.txId}: the JSON TransferContract fields differ from the signed raw_data`,
      });

      // The node is fixed: the same block now goes through, and nothing is skipped or repeated.
      broken.delete(bad);
      await until('the cursor at the last block', () => ing.stats.cursor >= last);
    } finally {
      ac.abort();
      await running;
    }
    expect(committed).toEqual(Array.from({ length: last - first + 1 }, (_, i) => first + i));
    expect(await storedEventKeys(h.db)).toEqual(expected.map(eventKey).sort());

    const up = await h.app.inject({ url: '/healthz' });
    expect(up.statusCode).toBe(200);
    expect(json(up)).toEqual({
      ok: true,
      network: 'mainnet',
      checks: { postgres: true, redis: true },
    });
    const scrape = (await scraper.inject({ url: '/metrics' })).body;
    expect(sample(scrape, 'tronwatch_ingest_stalled_block')).toBe(0);
    expect(logged('ingest stalled')).toHaveLength(1);
    expect(logged('ingest resumed')).toEqual([
      expect.objectContaining({ level: 30, block_number: bad }),
    ]);
  });
});
