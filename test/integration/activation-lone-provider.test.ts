/**
 * A LONE provider (quorum 1, TronGrid alone is an accepted mainnet setup) claiming its head 9
 * blocks high cannot move a new watch's activation past the chain (issue 36 item 4), through the
 * whole path on both database engines: one replay node serving a synthetic chain signed by the
 * devnet SRs, the light client on, the node's head reported LIE blocks above the blocks it has
 * (ReplayLies.heads; within the plausibility slack, so the group takes it: there is no one to
 * outvote it). Watches are created through POST /v1/watches, once on the head the ingester stored
 * and once through the api role's own HeadRefresher (another NodeGroup, with no light client and no
 * block read: src/ingest/head-refresh.ts), and the transfers of the blocks right above the real
 * head, made after the watches existed, produce their events exactly once.
 *
 * Before (activation = the stored head claim), both watches activated at HEAD + 9 or more and the
 * transfers of those blocks were never matched (a watch matches blocks strictly above it). Now
 * the ingester stores the newest block whose SR signature the light client checked
 * (chain_head.verified_block_number, written by src/ingest/loop.ts) and activation is
 * GREATEST(verified, head − ACTIVATION_WINDOW_BLOCKS) (src/ingest/chain-head.ts activationBlock).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import type { ReplayNode } from '../../src/devnet/replay-node.js';
import { syntheticAddresses, syntheticCheckpoint } from '../../src/devnet/synthetic.js';
import { HeadRefresher } from '../../src/ingest/head-refresh.js';
import type { Ingester } from '../../src/ingest/loop.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import { type ApiHarness, apiHarness, json } from '../helpers/api.js';
import {
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
} from '../helpers/chain.js';
import { dbEngines } from '../helpers/db.js';
import {
  clientOf,
  lightClientChain,
  lightClientIngester,
  start,
  waitFor,
  want,
} from '../helpers/light-client-ingest.js';

const FIRST = 74_100_000;
/** Blocks above a block that make it final when every SR signs in turn (19 − 1). */
const ABOVE = 18;
/** The test's block interval, ms (the groups' and the ingester's). */
const INTERVAL = 50;
/** How far the lone provider's head runs ahead of its real one: within HEAD_SLACK_BLOCKS (10). */
const LIE = 9;
/** The real head when the watches are created: the newest block the node has produced. */
const HEAD = FIRST + 40;

describe.each(dbEngines)(
  `activation with a lone provider claiming its head ${LIE} blocks high, on %s`,
  { timeout: 240_000 },
  (engine) => {
    let h: ApiHarness | undefined;
    let chain: SyntheticChain | undefined;
    const groups: NodeGroup[] = [];
    afterEach(async () => {
      for (const g of groups.splice(0)) await g.close();
      await chain?.node.close();
      await h?.close();
      chain = undefined;
      h = undefined;
    });

    /**
     * The node has produced HEAD and says HEAD + LIE; it cannot serve the blocks above HEAD (no SR
     * signed them yet). Its claimed head block stays readable (the replay node builds getnodeinfo's
     * answer from it); ingest never asks for it (blocks are read in order).
     */
    function lieAbove(node: ReplayNode, head: number): void {
      node.setLies({
        heads: (x) => ({ ...x, head: x.head + LIE }),
        blocks: new Map(
          Array.from({ length: LIE - 1 }, (_, i) => [head + 1 + i, { block: '{}', infos: '[]' }]),
        ),
      });
    }

    /**
     * The API on a fresh database (refreshing heads with `refresher()` when it gives one), the lone
     * node at HEAD lying, and the ingester (light client on, quorum 1) run until it has read every
     * block up to HEAD and heard the claim, then stopped.
     */
    async function setUp(refresher: () => HeadRefresher | undefined): Promise<{
      h: ApiHarness;
      chain: SyntheticChain;
      ing: Ingester;
      o: ReturnType<typeof lightClientChain>;
    }> {
      const o = lightClientChain(361, FIRST);
      h = await apiHarness(engine, {
        chainHead: false,
        refreshHead: async () => refresher()?.refresh(),
      });
      chain = await serveSynthetic({ ...o, count: 80 }, { instant: true, lag: 0 });
      chain.node.advanceTo(HEAD);
      lieAbove(chain.node, HEAD);
      const group = new NodeGroup({
        clients: [clientOf(chain.node)],
        blockIntervalMs: INTERVAL,
        logger: silentLogger,
      });
      groups.push(group);
      const ing = lightClientIngester(h.db, group, {
        startBlock: FIRST,
        checkpoint: syntheticCheckpoint(o),
        blockIntervalMs: INTERVAL,
      });
      const run = start(ing);
      await waitFor(() => ing.gate?.readHeight === HEAD && ing.stats.head === HEAD + LIE);
      await run.stop();
      // Every block up to the real head read, each signature checked; the claim was plausible
      // (the only answer), so reading goes up to it and the stored head is the claim.
      expect(ing.gate?.readHeight).toBe(HEAD);
      expect(ing.stats.head).toBe(HEAD + LIE);
      expect(await storedHeads(h)).toEqual({ head: HEAD + LIE, verified: HEAD });
      return { h, chain, ing, o };
    }

    async function storedHeads(x: ApiHarness): Promise<{ head: number; verified: number | null }> {
      const { rows } = await x.db.query<{ head: string; verified: string | null }>(
        `SELECT head_block_number AS head, verified_block_number AS verified
           FROM chain_head WHERE network = 'mainnet'`,
      );
      const r = rows[0];
      return { head: Number(r?.head), verified: r?.verified == null ? null : Number(r.verified) };
    }

    /** Four watches (all assets, both directions) on the chain's first addresses, via the API. */
    async function createWatches(
      x: ApiHarness,
      o: ReturnType<typeof lightClientChain>,
    ): Promise<TestWatch[]> {
      const c = await x.caller({ plan: 'pro' });
      const out: TestWatch[] = [];
      for (const addressHex of syntheticAddresses(o).slice(0, 4)) {
        const res = await x.app.inject({
          method: 'POST',
          url: '/v1/watches',
          headers: c.headers,
          payload: {
            address: hexToBase58(addressHex),
            asset_filter: 'ALL',
            direction: 'both',
            webhook_url: 'https://hooks.example.com/tron',
          },
        });
        expect(res.statusCode).toBe(201);
        // The activation is in the answer (additive `active_from_block`) and in GET /v1/watches.
        const { id, active_from_block } = json<{ id: string; active_from_block: number }>(res);
        const { rows } = await x.db.query<{ from: string }>(
          'SELECT active_from_block AS from FROM watches WHERE id = $1',
          [id],
        );
        expect(active_from_block).toBe(Number(rows[0]?.from));
        const listed = await x.app.inject({ url: '/v1/watches', headers: c.headers });
        expect(
          json<{ data: { id: string; active_from_block: number }[] }>(listed).data.find(
            (w) => w.id === id,
          )?.active_from_block,
        ).toBe(active_from_block);
        out.push({
          id,
          addressHex,
          asset: 'ALL',
          direction: 'both',
          activeFrom: Number(rows[0]?.from),
        });
      }
      return out;
    }

    /**
     * The chain goes on to its last block (the node still claiming LIE above it), the ingester
     * runs until the light client has proven all it can, and every transfer above HEAD to the
     * watches is an event, exactly once.
     */
    async function expectEveryTransferAboveHead(
      c: SyntheticChain,
      ing: Ingester,
      x: ApiHarness,
      watches: TestWatch[],
    ): Promise<void> {
      // Every transfer above the real head is one the watches must report: made after they were
      // created (the chain had produced HEAD, not one block more). The blocks the claim would
      // have skipped carry some.
      const truth = watches.map((w) => ({ ...w, activeFrom: HEAD }));
      expect(want(c.transfers, truth, HEAD + LIE).length).toBeGreaterThan(0);
      c.node.advanceTo(c.last);
      lieAbove(c.node, c.last);
      const run = start(ing);
      await waitFor(() => ing.stats.cursor >= c.last - ABOVE);
      await run.stop();
      expect(ing.stats.cursor).toBe(c.last - ABOVE);
      expect(await storedEventKeys(x.db)).toEqual(want(c.transfers, truth, c.last - ABOVE));
    }

    it(`on the head the ingester stored (claim HEAD + ${LIE}): the watches activate at the verified block, and the next blocks' transfers produce their events once`, async () => {
      const s = await setUp(() => undefined);
      const watches = await createWatches(s.h, s.o);
      expect(watches.map((w) => w.activeFrom)).toEqual([HEAD, HEAD, HEAD, HEAD]);
      await expectEveryTransferAboveHead(s.chain, s.ing, s.h, watches);
    });

    it(`through the api role's HeadRefresher (its own group, no light client) polling the claim HEAD + ${LIE}: the verified block stays the floor`, async () => {
      let refresher: HeadRefresher | undefined;
      const s = await setUp(() => refresher);
      // The api role's own group over the same lone provider: no block read, no light client.
      const apiGroup = new NodeGroup({
        clients: [clientOf(s.chain.node)],
        blockIntervalMs: INTERVAL,
        logger: silentLogger,
      });
      groups.push(apiGroup);
      refresher = new HeadRefresher({
        db: s.h.db,
        network: 'mainnet',
        group: apiGroup,
        blockIntervalMs: INTERVAL,
        logger: silentLogger,
      });
      await new Promise((r) => setTimeout(r, 2 * INTERVAL)); // the stored head is no longer fresh
      const watches = await createWatches(s.h, s.o);
      // The refresher asked the provider and stored its claim, leaving the verified block as it was.
      expect(refresher.polls).toBeGreaterThanOrEqual(1);
      expect(await storedHeads(s.h)).toEqual({ head: HEAD + LIE, verified: HEAD });
      expect(watches.map((w) => w.activeFrom)).toEqual([HEAD, HEAD, HEAD, HEAD]);
      await expectEveryTransferAboveHead(s.chain, s.ing, s.h, watches);
    });
  },
);
