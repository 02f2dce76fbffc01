/**
 * Providers split at the tip by a fork, with a quorum (TRON_NODE_QUORUM > 1) and the light client
 * on (src/ingest/loop.ts, src/ingest/finality-gate.ts `add`, src/tron/node-group.ts collect:
 * "providers disagreeing on such a block while it is young is a fork being settled: asked again,
 * not stalled"), through the whole path to the events and notifications tables, on both database
 * engines, against real replay nodes over HTTP and gRPC serving one synthetic chain signed by the
 * 27 devnet SRs, and a fork of 3 blocks at the unsolidified tip signed by the SRs of their slots
 * and carrying transfers to the watched addresses (light-client-ingest.ts signedForkBlock, the
 * fork of ingest-above-solidified.test.ts):
 * - quorum 2 of 2, B on the fork while A serves the real chain, then B back on the real chain:
 *   nothing above the last agreed block is read while they disagree (asked again, no stall), then
 *   ingest goes on past the fork's heights;
 * - quorum 2 of 2, both on the fork (its blocks read and held by the light client, never final),
 *   then A switches to the real chain before B: the heights of the fork are read again by parent
 *   hash, held while the two disagree, then read from the branch they converge on;
 * - quorum 2 of 3, the preferred provider on the fork the whole time: ingest goes on with the two
 *   that agree (the one outvoted is set aside for a pause, node-group.ts `decided`, then serves;
 *   counted as `other_branch`, never as an `outvoted` lie);
 * - quorum 2 of 3, the two preferred on the fork (read and held) and the third on the real chain,
 *   then one of the two switches: the third outvotes the other while the fork heights are read
 *   again.
 * In each: no event from the fork, every real event exactly once with one notification, no stall
 * (no permanent failure counted), no refusal by the light client, no head ignored, and at the end
 * every provider serving (none set aside for good).
 *
 * Time: the node group tells a fork being settled (a young block, under SOLID_AGE_BLOCKS
 * intervals old) from a lie (an old block the providers still disagree on) by the block's
 * timestamp against the wall clock, and bounds heads by the same clock (HEAD_SLACK_BLOCKS). These
 * tests run at mainnet's interval (3000 ms, the synthetic chain's slot) with `Date` held at the
 * chain's own time (vi.useFakeTimers toFake Date only; timers and performance.now are real): one
 * second after the newest block served while the providers are split, so the split is at the
 * tip as it is on mainnet whatever the machine's speed, then one second after the last block once
 * they agree.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';

import { Metrics } from '../../src/common/metrics.js';
import type { Queryable } from '../../src/db/pool.js';
import type { ReplayNode, ReplayRequestRecord } from '../../src/devnet/replay-node.js';
import {
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import type { Ingester } from '../../src/ingest/loop.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import type { Transfer } from '../../src/tron/types.js';
import {
  eventKey,
  expectedEvents,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  clientOf,
  cursorRow,
  insertWatches,
  lightClientChain,
  lightClientIngester,
  signedForkBlock,
  start,
  waitFor,
  want,
} from '../helpers/light-client-ingest.js';

/** Slot length and the ingester's block interval, ms (mainnet's). */
const SLOT = 3000;
/** Blocks above a block that make it final when every SR signs in turn (19 - 1). */
const ABOVE = 18;
const FIRST = 74_000_000;
/**
 * The chain: 50 blocks, timestamped around this run's start (the clock is held at the chain's
 * time anyway; near the real one, the process and the database disagree by a minute at most).
 */
const OPTS = {
  ...lightClientChain(285, FIRST),
  startTimestamp: Math.floor(Date.now() / SLOT) * SLOT - 60 * SLOT,
};
const CHAIN = { ...OPTS, count: 50 };
const LAST = FIRST + CHAIN.count - 1;
/** The fork's first height and its tip (3 blocks, under the full-node head at first). */
const FORK = FIRST + 26;
const TIP = FORK + 2;
/** What ingest can prove final once the nodes serve the whole chain. */
const END = LAST - ABOVE;
/** Epoch ms of block n of the real chain. */
const tsOf = (n: number): number =>
  Number(syntheticBlock(OPTS, n).block.block_header?.raw_data?.timestamp);

/**
 * The fork: blocks FORK..TIP on the real block FORK - 1, each one slot later than the real block
 * of its height (another SR's), carrying the transactions of heights the nodes never serve.
 */
function theFork(): {
  blocks: Map<number, { block: string; infos: string }>;
  transfers: Transfer[];
} {
  const blocks = new Map<number, { block: string; infos: string }>();
  const transfers: Transfer[] = [];
  let parent = syntheticBlockId(OPTS, FORK - 1);
  for (let k = 0; k < 3; k++) {
    const f = signedForkBlock(OPTS, FORK + k, parent, tsOf(FORK) + SLOT * (k + 1), LAST + 10 + k);
    blocks.set(FORK + k, { block: f.block, infos: f.infos });
    transfers.push(...f.transfers);
    parent = f.id;
  }
  return { blocks, transfers };
}

/** Whether a replay node's request asked for block n (JSON getblockbynum, or gRPC). */
function readsBlock(r: ReplayRequestRecord, n: number): boolean {
  return (r.path.endsWith('/getblockbynum') || r.path.endsWith('GetBlockByNum2')) && r.num === n;
}

/** Requests for block n in `node`'s log from entry `from` on. */
function readsOf(node: ReplayNode, n: number, from = 0): number {
  return node.requestLog.slice(from).filter((r) => readsBlock(r, n)).length;
}

/** Move every node's full-node head to `head` (solidified head ABOVE below it). */
function headAt(chains: readonly SyntheticChain[], head: number): void {
  for (const c of chains) c.node.advanceTo(head - ABOVE);
}

/** Events whose notification count is not exactly one (each webhook event gets one delivery). */
async function eventsWithoutOneNotification(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ c: string }>(
    `SELECT count(*) AS c FROM (
       SELECT e.id FROM events e LEFT JOIN notifications n ON n.event_id = e.id
       GROUP BY e.id HAVING count(n.id) <> 1) x`,
  );
  return Number(rows[0]?.c ?? -1);
}

describe.each(dbEngines)(
  'providers split at the tip by a fork, on %s',
  { timeout: 240_000 },
  (engine) => {
    let t: TestDb | undefined;
    const chains: SyntheticChain[] = [];
    afterEach(async () => {
      vi.useRealTimers();
      for (const c of chains.splice(0)) await c.node.close();
      await t?.drop();
      t = undefined;
    });

    /** `n` replay nodes serving CHAIN, full-node heads at FORK - 1, requests logged. */
    async function providers(n: number): Promise<SyntheticChain[]> {
      for (let i = 0; i < n; i++) {
        chains.push(await serveSynthetic(CHAIN, { instant: true, lag: ABOVE, logRequests: true }));
      }
      headAt(chains, FORK - 1);
      return chains;
    }

    /**
     * A node group over `chains` (quorum `quorum`, mainnet's interval) and an ingester on it with
     * the light client from the chain's checkpoint, started with `Date` at the chain's time while
     * the fork is the tip (module doc).
     */
    function ingest(
      db: Queryable,
      quorum: number,
    ): { ing: Ingester; group: NodeGroup; metrics: Metrics; stop: () => Promise<void> } {
      vi.useFakeTimers({ toFake: ['Date'], now: tsOf(TIP) + 1000 });
      const metrics = new Metrics();
      const group = new NodeGroup({
        clients: chains.map((c) => clientOf(c.node)),
        quorum,
        blockIntervalMs: SLOT,
        logger: silentLogger,
        metrics,
      });
      const ing = lightClientIngester(db as TestDb['db'], group, {
        startBlock: FIRST,
        checkpoint: syntheticCheckpoint(OPTS),
        metrics,
        blockIntervalMs: SLOT,
      });
      const run = start(ing);
      return {
        ing,
        group,
        metrics,
        stop: async () => {
          await run.stop();
          await group.close();
        },
      };
    }

    /**
     * The providers agree and the chain stood still at the tip for more than an interval (the
     * ingester's next block overdue: chain_next_block_overdue_seconds > 0); then every node serves
     * the whole chain at once, with `Date` at its last block's time. (While the next block comes
     * on time, blocks released at once are read one per interval until the next head poll, a
     * minute on mainnet: loop.ts module doc. Overdue, they are caught up at full speed.)
     */
    async function serveToTheEnd(metrics: Metrics): Promise<void> {
      const overdue = async () =>
        Number(
          /tronwatch_chain_next_block_overdue_seconds ([-\d.e]+)/.exec(
            await metrics.registry.metrics(),
          )?.[1] ?? 0,
        );
      await waitFor(async () => (await overdue()) > 0);
      expect(await overdue()).toBeGreaterThan(0);
      vi.setSystemTime(tsOf(LAST) + 1000);
      headAt(chains, LAST);
    }

    /**
     * Expect the converged end state: cursor at END, every real event up to it exactly once with one
     * notification, none of the fork's, no stall, no light-client refusal, no head ignored.
     */
    async function expectAllOnceNoneOfTheFork(
      db: Queryable,
      ing: Ingester,
      metrics: Metrics,
      watches: readonly TestWatch[],
      forkTransfers: readonly Transfer[],
    ): Promise<void> {
      expect(ing.stats.cursor).toBe(END);
      const stored = await storedEventKeys(db);
      expect(stored).toEqual(want(chains[0]?.transfers ?? [], watches, END));
      const forkKeys = new Set(expectedEvents(forkTransfers, watches).map(eventKey));
      expect(forkKeys.size).toBeGreaterThan(0);
      expect(stored.filter((k) => forkKeys.has(k))).toEqual([]);
      expect(await eventsWithoutOneNotification(db)).toBe(0);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      const text = await metrics.registry.metrics();
      expect(text).not.toMatch(/tronwatch_ingest_block_failures_total\{class="permanent"\} [1-9]/);
      expect(text).toMatch(/tronwatch_node_quorum_disagreements_total 0\b/);
      expect(text).not.toMatch(/tronwatch_light_client_refused_total\{[^}]*\} [1-9]/);
      expect(text).not.toMatch(/tronwatch_node_heads_ignored_total\{[^}]*\} [1-9]/);
    }

    it('quorum 2 of 2, B on a signed fork at the tip while A serves the real chain, then B on the real chain: every real event once, nothing of the fork', async () => {
      t = await migratedDb(engine);
      const db = t.db;
      const [a, b] = await providers(2);
      if (!a || !b) throw new Error('two providers');
      const fork = theFork();
      b.node.setLies({ blocks: fork.blocks });
      const watches = await insertWatches(db, OPTS, FIRST - 1);
      const { ing, group, metrics, stop } = ingest(db, 2);
      try {
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= FORK - 1);
        expect(ing.gate?.readHeight).toBe(FORK - 1);
        // The fork's 3 blocks appear at B's tip, the real ones at A's.
        const from = [a.node.requestLog.length, b.node.requestLog.length];
        headAt(chains, TIP);
        // Both asked for FORK more than once: a disagreement, asked again.
        await waitFor(
          () => readsOf(a.node, FORK, from[0]) >= 2 && readsOf(b.node, FORK, from[1]) >= 2,
        );
        expect(readsOf(b.node, FORK, from[1])).toBeGreaterThanOrEqual(2);
        // Nothing read past the last block they agree on, nothing stalled, no one set aside.
        expect(ing.gate?.readHeight).toBe(FORK - 1);
        expect(ing.stats.cursor).toBeLessThan(FORK);
        expect((await cursorRow(db)).stalled_reason).toBeNull();
        expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok']);
        // B goes back to the real chain: they agree, ingest reads on to the tip, then to the end.
        b.node.setLies(undefined);
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP);
        expect(ing.gate?.readHeight).toBe(TIP);
        await serveToTheEnd(metrics);
        await waitFor(() => ing.stats.cursor >= END);
      } finally {
        await stop();
      }
      await expectAllOnceNoneOfTheFork(db, ing, metrics, watches, fork.transfers);
      // The split was met and asked again (transient failures), and no one was refused or set aside.
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/tronwatch_ingest_block_failures_total\{class="transient"\} [1-9]/);
      expect(text).not.toMatch(/tronwatch_node_answers_refused_total\{[^}]*\} [1-9]/);
      expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok']);
    });

    it('quorum 2 of 2, both on a signed fork, then A on the real chain before B: the fork heights read again, held while they disagree; every real event once, nothing of the fork', async () => {
      t = await migratedDb(engine);
      const db = t.db;
      const [a, b] = await providers(2);
      if (!a || !b) throw new Error('two providers');
      const fork = theFork();
      a.node.setLies({ blocks: fork.blocks });
      b.node.setLies({ blocks: fork.blocks });
      headAt(chains, TIP);
      const watches = await insertWatches(db, OPTS, FIRST - 1);
      const { ing, group, metrics, stop } = ingest(db, 2);
      try {
        // Both serve the fork: its blocks are agreed, read and held (never final: 19 SRs must sign
        // on top of them first).
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP);
        expect(ing.gate?.readHeight).toBe(TIP);
        expect(ing.stats.cursor).toBeLessThan(FORK);
        // A switches to the real chain, which grows a block; B has not switched yet.
        const fromA = a.node.requestLog.length;
        a.node.setLies(undefined);
        headAt(chains, TIP + 1);
        // The real block TIP + 1 does not follow the fork's tip: TIP is read again, and A and B
        // disagree on it (asked more than once).
        await waitFor(() => readsOf(a.node, TIP, fromA) >= 2);
        expect(readsOf(a.node, TIP, fromA)).toBeGreaterThanOrEqual(2);
        expect(ing.gate?.rereading).toBe(true);
        expect(ing.gate?.readHeight).toBe(TIP - 1);
        expect(ing.stats.cursor).toBeLessThan(FORK);
        expect((await cursorRow(db)).stalled_reason).toBeNull();
        expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok']);
        // B switches too: they converge on the real chain.
        b.node.setLies(undefined);
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP + 1 && !ing.gate?.rereading);
        expect(ing.gate?.readHeight).toBe(TIP + 1);
        await serveToTheEnd(metrics);
        await waitFor(() => ing.stats.cursor >= END);
      } finally {
        await stop();
      }
      await expectAllOnceNoneOfTheFork(db, ing, metrics, watches, fork.transfers);
      const text = await metrics.registry.metrics();
      expect(text).toMatch(/tronwatch_ingest_block_failures_total\{class="transient"\} [1-9]/);
      expect(text).not.toMatch(/tronwatch_node_answers_refused_total\{[^}]*\} [1-9]/);
      expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok']);
    });

    it('quorum 2 of 3, the preferred provider on a signed fork the whole time: goes on with the two that agree; every real event once, nothing of the fork', async () => {
      t = await migratedDb(engine);
      const db = t.db;
      const [c] = await providers(3);
      if (!c) throw new Error('three providers');
      const fork = theFork();
      c.node.setLies({ blocks: fork.blocks });
      const watches = await insertWatches(db, OPTS, FIRST - 1);
      const { ing, group, metrics, stop } = ingest(db, 2);
      try {
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= FORK - 1);
        headAt(chains, TIP);
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP);
        expect(ing.gate?.readHeight).toBe(TIP);
        // The provider on the fork was asked for its heights (it is preferred) and served the fork.
        expect(readsOf(c.node, FORK)).toBeGreaterThan(0);
        await serveToTheEnd(metrics);
        await waitFor(() => ing.stats.cursor >= END);
      } finally {
        await stop();
      }
      await expectAllOnceNoneOfTheFork(db, ing, metrics, watches, fork.transfers);
      // Outvoted on young blocks of another branch: counted as such, never as a lie.
      const refusedText = await metrics.registry.metrics();
      expect(refusedText).toMatch(
        /node_answers_refused_total\{provider="\d",check="other_branch"\} [1-9]/,
      );
      expect(refusedText).not.toMatch(/check="outvoted"/);
      // Not set aside for good: serving again once its pause (if any) is over.
      await waitFor(() => group.states().every((s) => s.state === 'ok'));
      expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok', 'ok']);
    });

    it('quorum 2 of 3, the two preferred on a signed fork (read and held) and the third on the real chain, then one of the two switches: the third outvotes the other, the fork heights read again; every real event once, nothing of the fork', async () => {
      t = await migratedDb(engine);
      const db = t.db;
      const [a, b, c] = await providers(3);
      if (!a || !b || !c) throw new Error('three providers');
      const fork = theFork();
      a.node.setLies({ blocks: fork.blocks });
      b.node.setLies({ blocks: fork.blocks });
      const watches = await insertWatches(db, OPTS, FIRST - 1);
      const { ing, group, metrics, stop } = ingest(db, 2);
      try {
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= FORK - 1);
        headAt(chains, TIP);
        // A and B agree on the fork: its blocks are read and held (never final).
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP);
        expect(ing.gate?.readHeight).toBe(TIP);
        expect(ing.stats.cursor).toBeLessThan(FORK);
        // A switches to the real chain, which grows a block; B stays on the fork.
        a.node.setLies(undefined);
        headAt(chains, TIP + 1);
        await waitFor(() => (ing.gate?.readHeight ?? 0) >= TIP + 1 && !ing.gate?.rereading);
        expect(ing.gate?.readHeight).toBe(TIP + 1);
        // The fork's heights were read again, C's answers among them.
        expect(readsOf(c.node, TIP)).toBeGreaterThan(0);
        await serveToTheEnd(metrics);
        await waitFor(() => ing.stats.cursor >= END);
      } finally {
        await stop();
      }
      await expectAllOnceNoneOfTheFork(db, ing, metrics, watches, fork.transfers);
      // Outvoted on young blocks of another branch: counted as such, never as a lie.
      const refusedText = await metrics.registry.metrics();
      expect(refusedText).toMatch(
        /node_answers_refused_total\{provider="\d",check="other_branch"\} [1-9]/,
      );
      expect(refusedText).not.toMatch(/check="outvoted"/);
      // Not set aside for good: serving again once its pause (if any) is over.
      await waitFor(() => group.states().every((s) => s.state === 'ok'));
      expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok', 'ok']);
    });
  },
);
