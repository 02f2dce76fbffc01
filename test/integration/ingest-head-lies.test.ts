/**
 * A provider that lies about its head within the plausibility slack (src/tron/node-group.ts
 * getHeads `activation`, headBound) cannot move a new watch's activation past the chain, through
 * the whole path on both database engines: two real replay nodes serving one synthetic chain signed
 * by the devnet SRs, the light client on, quorum 1, the liar listed first and reporting its head
 * 9 blocks high (ReplayLies.heads); the head the ingester stores and the one a watch's creation
 * refreshes (src/ingest/head-refresh.ts, src/ingest/chain-head.ts activationBlock) are the honest
 * head, and the transfers of the blocks right above it produce their events, exactly once.
 * Before, the group took the highest plausible head at quorum 1: the watch activated 9 blocks
 * late and those transfers were never matched (a watch matches blocks strictly above it).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import type { ReplayNode } from '../../src/devnet/replay-node.js';
import { syntheticCheckpoint } from '../../src/devnet/synthetic.js';
import { activationBlock } from '../../src/ingest/chain-head.js';
import { HeadRefresher } from '../../src/ingest/head-refresh.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import { serveSynthetic, storedEventKeys } from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  clientOf,
  insertWatches,
  lightClientChain,
  lightClientIngester,
  start,
  waitFor,
  want,
} from '../helpers/light-client-ingest.js';

const FIRST = 74_000_000;
/** Blocks above a block that make it final when every SR signs in turn (19 − 1). */
const ABOVE = 18;
/** The test's block interval, ms (the group's and the ingester's). */
const INTERVAL = 50;
/** How far the liar's head runs ahead of its real one: within HEAD_SLACK_BLOCKS (10). */
const LIE = 9;

describe.each(dbEngines)(
  'the activation head with one provider lying about its head on %s',
  { timeout: 240_000 },
  (engine) => {
    let t: TestDb | undefined;
    const nodes: ReplayNode[] = [];
    let group: NodeGroup | undefined;
    afterEach(async () => {
      await group?.close();
      for (const n of nodes.splice(0)) await n.close();
      await t?.drop();
      group = undefined;
      t = undefined;
    });

    it(`quorum 1 of 2, the liar first with its head ${LIE} blocks high: ingest stores the honest head, a watch created now activates there, and the next blocks' transfers produce their events`, async () => {
      t = await migratedDb(engine);
      const db = t.db;
      const o = lightClientChain(292, FIRST);
      const liar = await serveSynthetic({ ...o, count: 80 }, { instant: true, lag: 0 });
      const honest = await serveSynthetic({ ...o, count: 80 }, { instant: true, lag: 0 });
      nodes.push(liar.node, honest.node);
      // Both nodes have produced the chain up to HEAD; the liar says HEAD + LIE, and cannot serve
      // the blocks above HEAD (no one can: no SR has signed them yet). Its claimed head block
      // itself stays readable: the replay node builds getnodeinfo's answer from it, and ingest
      // never gets to ask for it (blocks are read in order, the first above HEAD is missing).
      const lieAbove = (head: number) =>
        liar.node.setLies({
          heads: (h) => ({ ...h, head: h.head + LIE }),
          blocks: new Map(
            Array.from({ length: LIE - 1 }, (_, i) => [head + 1 + i, { block: '{}', infos: '[]' }]),
          ),
        });
      const HEAD = FIRST + 40;
      for (const n of nodes) n.advanceTo(HEAD);
      lieAbove(HEAD);
      group = new NodeGroup({
        clients: [clientOf(liar.node), clientOf(honest.node)],
        blockIntervalMs: INTERVAL,
        logger: silentLogger,
      });
      const ing = lightClientIngester(db, group, {
        startBlock: FIRST,
        checkpoint: syntheticCheckpoint(o),
        blockIntervalMs: INTERVAL,
      });
      let run = start(ing);
      // Ingest reads every block up to the honest head (each signature checked by the light
      // client) and heard the liar's head: it was plausible (reading goes up to the highest).
      await waitFor(() => ing.gate?.readHeight === HEAD && ing.stats.head === HEAD + LIE);
      await run.stop();
      expect(ing.gate?.readHeight).toBe(HEAD);
      expect(ing.stats.head).toBe(HEAD + LIE);
      // What the ingester stored for activation is the honest head.
      const stored = await db.query<{ head: string }>(
        "SELECT head_block_number AS head FROM chain_head WHERE network = 'mainnet'",
      );
      expect(Number(stored.rows[0]?.head)).toBe(HEAD);
      // A watch's creation: a fresh head from the group (both providers asked: wait until the
      // liar, set aside for the blocks above HEAD it claimed and did not have, is asked again),
      // then the activation block.
      await waitFor(() => group?.states().every((s) => s.state === 'ok') ?? false);
      expect(group.states().map((s) => s.state)).toEqual(['ok', 'ok']);
      const heads = new HeadRefresher({
        db,
        network: 'mainnet',
        group,
        blockIntervalMs: INTERVAL,
        logger: silentLogger,
      });
      await new Promise((r) => setTimeout(r, 2 * INTERVAL)); // the stored head is no longer fresh
      const asOf = await heads.refresh();
      expect(heads.polls).toBe(1);
      expect(asOf).toBeDefined();
      const activation = await activationBlock(db, 'mainnet', INTERVAL, asOf);
      expect(activation).toBe(HEAD);
      const watches = await insertWatches(db, o, activation);
      // The blocks the liar's head would have skipped carry transfers of these watches.
      expect(want(honest.transfers, watches, HEAD + LIE).length).toBeGreaterThan(0);
      // The chain goes on: every transfer above HEAD up to what the light client proves is an
      // event, exactly once.
      for (const n of nodes) n.advanceTo(honest.last);
      lieAbove(honest.last);
      run = start(ing);
      await waitFor(() => ing.stats.cursor >= honest.last - ABOVE);
      await run.stop();
      expect(ing.stats.cursor).toBe(honest.last - ABOVE);
      const atHonestHead = watches.map((w) => ({ ...w, activeFrom: HEAD }));
      expect(await storedEventKeys(db)).toEqual(
        want(honest.transfers, atHonestHead, honest.last - ABOVE),
      );
    });
  },
);
