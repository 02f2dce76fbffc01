/**
 * Ingest with tronwatch's own finality (issue 28, src/ingest/finality-gate.ts), through the whole
 * path to the events and notifications tables, on both database engines, against a real replay
 * node serving a synthetic chain signed by the 27 devnet SRs:
 * - a block is committed only once 19 SRs signed blocks on top of it (the node's solidified head
 *   only says how far to read): every expected event of the proven blocks exactly once, none of
 *   the 18 blocks above; the light client's state is stored with the cursor, and a new ingester
 *   resumes from it (cross-checked) without committing anything twice;
 * - a provider that serves a block with a forged signature (signed by another SR's key), an
 *   unsigned block, or a fork signed by only 18 SRs gets no event row and no notification from
 *   it: ingest stops below it, its provider is set aside, the stall is recorded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/common/metrics.js';
import {
  DEVNET_SRS,
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { loadLightClientState } from '../../src/tron/light-client/store.js';
import type { NodeClient } from '../../src/tron/node-client.js';
import {
  expectedEvents,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  clientOf,
  cursorRow,
  insertWatches,
  lightClientChain,
  lightClientIngester,
  maxEventBlock,
  resignedJson,
  runUntil,
  want,
} from '../helpers/light-client-ingest.js';
import { blockJsonOf, SignedChain } from '../helpers/sr-chain.js';

const OPTS = lightClientChain(28, 71_000_000);
const CHAIN = { ...OPTS, count: 60 };
/** Blocks above a block that make it final on a chain where every SR signs in turn (19 - 1). */
const ABOVE = 18;

/** An ingester with the light client from the chain's checkpoint, reading `client`. */
function ingesterFor(db: TestDb['db'], client: NodeClient, metrics?: Metrics) {
  return lightClientIngester(db, client, {
    startBlock: CHAIN.firstBlock,
    checkpoint: syntheticCheckpoint(OPTS),
    ...(metrics ? { metrics } : {}),
  });
}

/** Block n of the chain with its header re-signed by `privateKey` (same id: verify.ts passes it). */
function resigned(n: number, privateKey: Uint8Array | undefined): string {
  return resignedJson(JSON.stringify(syntheticBlock(OPTS, n).block), n, privateKey);
}

describe.each(dbEngines)('ingest with the light client on %s', { timeout: 240_000 }, (engine) => {
  let t: TestDb | undefined;
  let chain: SyntheticChain | undefined;
  afterEach(async () => {
    await chain?.node.close();
    await t?.drop();
    chain = undefined;
    t = undefined;
  });

  it('commits a block only once 19 SRs signed on top of it, stores the light client with the cursor, and resumes from it', async () => {
    t = await migratedDb(engine);
    // lag 0: the node's full-node head is its solidified head (ingest reads up to the former).
    chain = await serveSynthetic(CHAIN, { instant: true, lag: 0 });
    const db = t.db;
    const watches = await insertWatches(db, OPTS, chain.first - 1);
    // The node has solidified only the first 30 blocks: 12 of them can be proven.
    const firstHead = chain.first + 29;
    chain.node.advanceTo(firstHead);
    const metrics = new Metrics();
    const a = ingesterFor(db, clientOf(chain.node, 'json'), metrics);
    await runUntil(a, () => a.stats.cursor >= firstHead - ABOVE);
    expect(a.stats.cursor).toBe(firstHead - ABOVE);
    expect(a.gate?.readHeight).toBe(firstHead);
    expect(want(chain.transfers, watches, firstHead - ABOVE).length).toBeGreaterThan(0);
    // Exactly the proven blocks' events: none of the 18 read above them.
    expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, firstHead - ABOVE));
    const stored = await loadLightClientState(db, 'mainnet');
    expect(stored?.snapshot.final.number).toBe(firstHead - ABOVE);
    expect(stored?.snapshot.final.id).toBe(syntheticBlockId(OPTS, firstHead - ABOVE));
    const text = await metrics.registry.metrics();
    expect(text).toContain(`tronwatch_light_client_final_block ${firstHead - ABOVE}`);
    expect(text).toContain('tronwatch_light_client_known_srs 27');
    expect(text).toContain('tronwatch_light_client_threshold_srs 19');

    // A new ingester (a restart): resumes from the stored light client, nothing twice.
    chain.node.advanceTo(chain.last);
    const b = ingesterFor(db, clientOf(chain.node, 'json'));
    await runUntil(b, () => b.stats.cursor >= chain!.last - ABOVE);
    expect(b.stats.cursor).toBe(chain.last - ABOVE);
    expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, chain.last - ABOVE));
    expect((await loadLightClientState(db, 'mainnet'))?.snapshot.final.number).toBe(
      chain.last - ABOVE,
    );
  });

  it.each([
    [
      'a forged signature (another SR’s key)',
      (n: number) => resigned(n, DEVNET_SRS[3]?.privateKey),
    ],
    ['an unsigned block', (n: number) => resigned(n, undefined)],
  ])(
    'a provider serving %s gets no event and no notification from it or above it',
    async (_, forge) => {
      t = await migratedDb(engine);
      chain = await serveSynthetic(CHAIN, { instant: true });
      const db = t.db;
      const watches = await insertWatches(db, OPTS, chain.first - 1);
      const bad = chain.first + 40;
      // The forged block carries transfers to the watched addresses: events if it got through.
      expect(
        expectedEvents(
          chain.transfers.filter((x) => x.blockNumber === bad),
          watches,
        ).length,
      ).toBeGreaterThan(0);
      chain.node.setLies({ blocks: new Map([[bad, { block: forge(bad) }]]) });
      const metrics = new Metrics();
      const ing = ingesterFor(db, clientOf(chain.node, 'json'), metrics);
      await runUntil(ing, async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(`block ${bad}`);
      expect(row.stalled_reason).toMatch(/signed by|signature|recover/);
      // Below it: what 19 SRs proved (bad - 1 - 18); at it and above: nothing.
      expect(row.block_number).toBe(bad - 1 - ABOVE);
      const max = await maxEventBlock(db);
      expect(max.events).toBeLessThan(bad);
      expect(max.notifications).toBeLessThan(bad);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, bad - 1 - ABOVE));
      expect(await metrics.registry.metrics()).toMatch(
        /tronwatch_light_client_refused_total\{code="bad-signature"\} [1-9]/,
      );
    },
  );

  it('a provider serving a fork signed by only 18 SRs gets nothing of it committed', async () => {
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN, { instant: true });
    const db = t.db;
    const watches = await insertWatches(db, OPTS, chain.first - 1);
    const fork = chain.first + 20;
    const below = syntheticBlock(OPTS, fork - 1).block.block_header?.raw_data;
    const liars = new Set(DEVNET_SRS.slice(0, 18).map((s) => s.address));
    const signed = new SignedChain(
      {
        number: fork - 1,
        id: syntheticBlockId(OPTS, fork - 1),
        timestamp: Number(below?.timestamp),
      },
      DEVNET_SRS,
    );
    const blocks = new Map<number, { block: string; infos: string }>();
    for (let n = fork; n <= chain.last; n++) {
      blocks.set(n, {
        block: JSON.stringify(blockJsonOf(signed.next((s) => liars.has(s.address)))),
        infos: '[]',
      });
    }
    chain.node.setLies({ blocks });
    const ing = ingesterFor(db, clientOf(chain.node, 'json'));
    // Everything is read (the fork's blocks pass every check but finality)…
    await runUntil(ing, () => (ing.gate?.readHeight ?? 0) >= chain!.last);
    expect(ing.gate?.readHeight).toBe(chain.last);
    // …and nothing of the fork is final: at most the block below it.
    expect(ing.stats.cursor).toBeLessThan(fork);
    expect((await maxEventBlock(db)).events).toBeLessThan(fork);
    expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, ing.stats.cursor));
  });
});
