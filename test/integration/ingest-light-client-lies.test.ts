/**
 * Ingest with tronwatch's own finality (issue 28, src/ingest/finality-gate.ts) against the lying
 * modes and SR-set changes of the issue's item 4 that ingest-light-client.test.ts does not cover,
 * through the whole path (a real replay node's answers → Ingester → events and notifications
 * tables), on both database engines:
 * - a block signed by an SR outside the set (the producer field names it): refused, stall
 *   recorded, no event from it or above; served truthfully again, ingest goes on, every event once;
 * - a provider that withholds a block: finality stops below it, nothing above is committed; when
 *   it serves the block again, or another provider serves it, every event exactly once;
 * - an SR key rotation (a type-46 transaction in a block): the very next block, signed with the
 *   new key, is accepted; the same block signed with the old key is refused;
 * - a maintenance with 1 new SR: its key comes from a quorum of providers, its block counts only
 *   once 19 known SRs built on it, and every event is delivered exactly once;
 * - a maintenance with 1 new SR, one provider of three (quorum 2, the service's gate and node
 *   group) answering another key for it, or calling it no active SR, or another next maintenance
 *   time (issue 36 item 2): the majority's answer is taken, the liar named in the log, counted
 *   (`sr_answer`) and set aside in the group ingest reads from; every event exactly once. One of
 *   two at quorum 1: no majority, the newcomer's block waits (a stall) until they agree;
 * - a maintenance with 9 new SRs: the 9th newcomer's block is refused (a branch, not a halt), the
 *   stall recorded with the reason, nothing of the new epoch committed;
 * - issue 36: one SR's block carrying 18 rotations of other SRs' keys, served by the only provider:
 *   nothing at or above it is committed; a real SR's side block in another SR's slot after a
 *   maintenance, and a lone provider's side branch of invented newcomers: the real chain goes on,
 *   every event once;
 * - a side block right after a maintenance signed by an ordinary account (its key agreed by the
 *   providers, but listed as no witness): refused, so it never takes a real SR's slot;
 * - a devnet run through a maintenance with key rotations and a new SR, with a restart inside the
 *   new epoch: every event exactly once;
 * - a restart with one provider of three on another chain at the stored final block: outvoted by
 *   the two that confirm it, ingest goes on, every event once; with one of two at quorum 1 (no
 *   majority), the signatures decide: the liar shows no signed child of the stored final block,
 *   it is set aside, no stall, every event once;
 * - a stale checkpoint halts, once the provider confirms the block that shows it; one provider
 *   alone serving such a block (another chain's, past the checkpoint's maintenance) cannot halt
 *   ingest: its block is refused, the other provider's chain delivers every event once.
 * Chains: test/helpers/chain.ts serveSynthetic, and test/helpers/sr-synthetic.ts (the synthetic
 * chain's transactions under headers produced by a SignedChain, for maintenances and rotations),
 * served with lag 0: the node's full-node head is its solidified head (ingest reads up to the
 * former with the light client on; reading above it is test/integration/ingest-above-solidified).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { type Logger, silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import { loadConfig } from '../../src/config.js';
import type { Queryable } from '../../src/db/pool.js';
import {
  memorySource,
  type ReplayNode,
  type ReplayRequestRecord,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { type SrNode, startSrNode } from '../../src/devnet/sr-node.js';
import {
  DEVNET_SRS,
  type DevnetSr,
  type SyntheticChainOptions,
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import {
  type FinalityGate,
  finalityGateFor,
  type SrDissentHandling,
} from '../../src/ingest/finality-gate.js';
import type { Ingester } from '../../src/ingest/loop.js';
import {
  newSrKeyFromProviders,
  witnessKeyFromProviders,
} from '../../src/tron/light-client/checkpoint-build.js';
import type { Checkpoint } from '../../src/tron/light-client/sr-set.js';
import { loadLightClientState } from '../../src/tron/light-client/store.js';
import { signWitnessHeader } from '../../src/tron/light-client/witness-signature.js';
import type { NodeClient } from '../../src/tron/node-client.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import type { BlockJson, Transfer } from '../../src/tron/types.js';
import { blockIdFromRaw, encodeHeaderRaw } from '../../src/tron/verify.js';
import {
  expectedEvents,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
  tronNodeUrl,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  clientOf,
  cursorRow,
  insertWatches,
  lightClientChain,
  lightClientIngester,
  maxEventBlock,
  noNewSrs,
  resignedJson,
  runUntil,
  signedForkBlock,
  start,
  waitFor,
  want,
} from '../helpers/light-client-ingest.js';
import { makeSr } from '../helpers/sr-chain.js';
import { serveSrSynthetic, srSyntheticChain } from '../helpers/sr-synthetic.js';

const FIRST = 72_000_000;
/** A synthetic chain's options (seed, size); every chain here starts at FIRST. */
const opts = (seed: number): SyntheticChainOptions => lightClientChain(seed, FIRST);
/** Blocks above a block that make it final when every SR signs in turn (19 − 1). */
const ABOVE = 18;
/** Slot length, ms. */
const SLOT = 3000;

/** An ingester on `client` from FIRST with the light client from `checkpoint` (keys: `keyOf`). */
function ingesterFor(
  db: TestDb['db'],
  client: NodeClient | NodeGroup,
  checkpoint: Checkpoint,
  keyOf: (address: string, signal?: AbortSignal, epochEnd?: number) => Promise<string> = noNewSrs,
  metrics?: Metrics,
): Ingester {
  return lightClientIngester(db, client, {
    startBlock: FIRST,
    checkpoint,
    keyOf,
    ...(metrics ? { metrics } : {}),
  });
}

/**
 * The service's finality gate (finalityGateFor, as `serve` and `ingest` build it) over `providers`
 * (TRON_NODE_URL, TRON_NODE_QUORUM) with `checkpoint` pinned through a file
 * (TRON_LIGHT_CLIENT_CHECKPOINT): its restart and halt checks ask these providers.
 */
async function serviceGate(
  providers: readonly ReplayNode[],
  checkpoint: Checkpoint,
  quorum: number,
  dissent: SrDissentHandling = {},
): Promise<FinalityGate> {
  const file = path.join(
    os.tmpdir(),
    `tw-lc-${checkpoint.block.id.slice(-12)}-${providers.map((p) => p.port).join('-')}.json`,
  );
  fs.writeFileSync(file, JSON.stringify(checkpoint));
  return finalityGateFor(
    loadConfig({
      TRON_NODE_URL: providers.map((p) => tronNodeUrl(p)).join(','),
      TRON_NODE_QUORUM: String(quorum),
      TRON_LIGHT_CLIENT_CHECKPOINT: file,
    }),
    'mainnet',
    dissent,
  );
}

/** A logger whose lines (parsed JSON) are kept in `lines`. */
function capturingLogger(): { logger: Logger; lines: Array<Record<string, unknown>> } {
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

/** Events whose notification count is not exactly one (each webhook event gets one delivery). */
async function eventsWithoutOneNotification(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ c: string }>(
    `SELECT count(*) AS c FROM (
       SELECT e.id FROM events e LEFT JOIN notifications n ON n.event_id = e.id
       GROUP BY e.id HAVING count(n.id) <> 1) x`,
  );
  return Number(rows[0]?.c ?? -1);
}

/**
 * Expect `ing` to have committed `chain` up to its last block but ABOVE (all it can prove there):
 * its cursor at that block, every event `watches` must have up to it stored exactly once, each
 * with exactly one notification.
 */
async function expectAllOnce(
  db: Queryable,
  ing: Ingester,
  chain: { transfers: readonly Transfer[]; last: number },
  watches: readonly TestWatch[],
): Promise<void> {
  expect(ing.stats.cursor).toBe(chain.last - ABOVE);
  expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, chain.last - ABOVE));
  expect(await eventsWithoutOneNotification(db)).toBe(0);
}

/** Events `watches` must have from block n alone. */
function eventsIn(transfers: readonly Transfer[], watches: readonly TestWatch[], n: number) {
  return expectedEvents(
    transfers.filter((t) => t.blockNumber === n),
    watches,
  ).length;
}

/** The schedule position of block n of a chain whose checkpoint is `cp` (before a maintenance). */
function slotOf(cp: Checkpoint, n: number): number {
  const t = cp.block.timestamp + (n - cp.block.number) * SLOT;
  return Math.floor(t / SLOT) % 27;
}

/** Whether a replay node's request asked for block n (JSON getblockbynum, or gRPC). */
function readsBlock(r: ReplayRequestRecord, n: number): boolean {
  // Either view: with the light client on, ingest reads the full node's (`/wallet/…`, gRPC
  // `Wallet/GetBlockByNum2`).
  return (r.path.endsWith('/getblockbynum') || r.path.endsWith('GetBlockByNum2')) && r.num === n;
}

describe.each(dbEngines)(
  'ingest with the light client on %s: lying modes and SR set changes',
  {
    timeout: 240_000,
  },
  (engine) => {
    let t: TestDb | undefined;
    const nodes: Array<ReplayNode | SrNode> = [];
    afterEach(async () => {
      for (const n of nodes.splice(0)) await n.close();
      await t?.drop();
      t = undefined;
    });

    /**
     * Two devnet nodes in the epoch after the maintenance of `cp` (its next maintenance time one
     * interval later): /wallet/listwitnesses lists `accounts` as active SRs beside the devnet's,
     * /wallet/getaccount answers for them and for the ordinary accounts `plain`; keyOf asks both
     * (quorum 2) as the service does (newSrKeyFromProviders: active SR, then its key).
     */
    async function keyProviders(
      o: SyntheticChainOptions,
      cp: Checkpoint,
      accounts: readonly DevnetSr[],
      reportKey?: (address: string) => string | undefined,
      plain: readonly string[] = [],
    ): Promise<{
      keyOf: (a: string, s?: AbortSignal, epochEnd?: number) => Promise<string>;
      srNodes: SrNode[];
    }> {
      const srNodes: SrNode[] = [];
      for (let i = 0; i < 2; i++) {
        const n = await startSrNode({
          chain: o,
          head: FIRST,
          accounts,
          plainAccounts: plain,
          nextMaintenanceTime: cp.nextMaintenanceTime + cp.maintenanceIntervalMs,
          ...(reportKey ? { reportKey } : {}),
        });
        nodes.push(n);
        srNodes.push(n);
      }
      const providers = srNodes.map((n, i) => ({ url: n.url, name: `sr-node-${i}` }));
      const ask = (signal?: AbortSignal) => ({
        quorum: 2,
        timeoutMs: 5000,
        ...(signal ? { signal } : {}),
      });
      return {
        srNodes,
        keyOf: (a, signal, epochEnd) =>
          epochEnd === undefined
            ? witnessKeyFromProviders(providers, a, ask(signal))
            : newSrKeyFromProviders(providers, a, epochEnd, ask(signal)),
      };
    }

    it('a block signed by an SR outside the set (named as its producer) gets no event; served truthfully again, every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(281);
      const chain = await serveSynthetic({ ...o, count: 60 }, { instant: true, lag: 0 });
      nodes.push(chain.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const bad = FIRST + 40;
      expect(eventsIn(chain.transfers, watches, bad)).toBeGreaterThan(0);
      // Block `bad` as produced and signed by an SR that is not one of the 27 (its own key).
      const outsider = makeSr('outside the devnet set');
      const b = structuredClone(syntheticBlock(o, bad).block) as BlockJson;
      const raw = b.block_header?.raw_data as Record<string, unknown>;
      raw.witness_address = outsider.address;
      const bytes = encodeHeaderRaw(raw, bad);
      b.blockID = blockIdFromRaw(BigInt(bad), bytes);
      (b.block_header as { witness_signature: string }).witness_signature = Buffer.from(
        signWitnessHeader(bytes, outsider.privateKey),
      ).toString('hex');
      chain.node.setLies({ blocks: new Map([[bad, { block: JSON.stringify(b) }]]) });
      const metrics = new Metrics();
      const ing = ingesterFor(db, clientOf(chain.node), syntheticCheckpoint(o), noNewSrs, metrics);
      const run = start(ing);
      await waitFor(async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(`block ${bad}`);
      expect(row.stalled_reason).toContain(`producer ${outsider.address} is not an active SR`);
      expect(row.block_number).toBe(bad - 1 - ABOVE);
      const max = await maxEventBlock(db);
      expect(max.events).toBeLessThan(bad);
      expect(max.notifications).toBeLessThan(bad);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, bad - 1 - ABOVE));
      expect(await metrics.registry.metrics()).toMatch(
        /tronwatch_light_client_refused_total\{code="outside-set"\} [1-9]/,
      );
      // The provider tells the truth again: the same ingester goes on, nothing twice.
      chain.node.setLies(undefined);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
    });

    it('a provider that withholds a block: finality stops below it and nothing above is committed; served again, every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(282);
      const chain = await serveSynthetic(
        { ...o, count: 60 },
        { instant: true, lag: 0, logRequests: true },
      );
      nodes.push(chain.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const gap = FIRST + 30;
      // The node says it has solidified the whole chain, but answers nothing for `gap`.
      chain.node.setLies({ blocks: new Map([[gap, { block: '{}', infos: '[]' }]]) });
      const ing = ingesterFor(db, clientOf(chain.node), syntheticCheckpoint(o));
      const run = start(ing);
      const asked = () => chain.node.requestLog.filter((r) => readsBlock(r, gap)).length;
      await waitFor(() => asked() >= 4 && ing.stats.cursor >= gap - 1 - ABOVE);
      expect(asked()).toBeGreaterThanOrEqual(4);
      // Read up to the block below the gap; what 19 SRs proved under it is committed, no more.
      expect(ing.gate?.readHeight).toBe(gap - 1);
      expect(ing.stats.cursor).toBe(gap - 1 - ABOVE);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, gap - 1 - ABOVE));
      expect((await maxEventBlock(db)).notifications).toBeLessThanOrEqual(gap - 1 - ABOVE);
      // The block is served again: ingest goes on from there, every event exactly once.
      chain.node.setLies(undefined);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
    });

    it('a provider that withholds a block while another serves it: every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(283);
      const withholding = await serveSynthetic(
        { ...o, count: 60 },
        { instant: true, lag: 0, logRequests: true },
      );
      nodes.push(withholding.node);
      const honest = await serveSynthetic({ ...o, count: 60 }, { instant: true, lag: 0 });
      nodes.push(honest.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const gap = FIRST + 30;
      withholding.node.setLies({ blocks: new Map([[gap, { block: '{}', infos: '[]' }]]) });
      const group = new NodeGroup({
        clients: [clientOf(withholding.node), clientOf(honest.node)],
        blockIntervalMs: 50,
        logger: silentLogger,
        asideBaseMs: 0,
      });
      const ing = ingesterFor(db, group, syntheticCheckpoint(o));
      await runUntil(ing, () => ing.stats.cursor >= honest.last - ABOVE);
      // The withholding provider was asked for the block (it is preferred) and answered nothing.
      expect(withholding.node.requestLog.some((r) => readsBlock(r, gap))).toBe(true);
      await expectAllOnce(db, ing, honest, watches);
    });

    it.each([
      [1, 2],
      [2, 3],
    ] as const)(
      'a preferred provider serving every block with a garbage signature, quorum %i of %i, at production proportions (retry 30 s, pause 1 s): ingest goes on from the honest ones, every event exactly once',
      async (quorum, providers) => {
        t = await migratedDb(engine);
        const o = opts(291);
        const liar = await serveSynthetic(
          { ...o, count: 60 },
          { instant: true, lag: 0, logRequests: true },
        );
        nodes.push(liar.node);
        const honest: Array<Awaited<ReturnType<typeof serveSynthetic>>> = [];
        for (let i = 1; i < providers; i++) {
          const h = await serveSynthetic({ ...o, count: 60 }, { instant: true, lag: 0 });
          nodes.push(h.node);
          honest.push(h);
        }
        const truth = honest[0] as Awaited<ReturnType<typeof serveSynthetic>>;
        const db = t.db;
        const watches = await insertWatches(db, o, FIRST - 1);
        // The true block, header and id unchanged, with a signature of no one's: it passes the
        // node group's checks (and at quorum 2 shares a vote with the honest copy) and only the
        // light client refuses it.
        const lies = new Map<number, { block: string }>();
        for (let n = FIRST; n <= liar.last; n++) {
          lies.set(n, {
            block: resignedJson(JSON.stringify(syntheticBlock(o, n).block), n, undefined),
          });
        }
        liar.node.setLies({ blocks: lies });
        const group = new NodeGroup({
          clients: [clientOf(liar.node), ...honest.map((h) => clientOf(h.node))],
          quorum,
          blockIntervalMs: 50,
          logger: silentLogger,
        });
        const metrics = new Metrics();
        // Production's proportions: a permanent failure is retried after 10 block intervals
        // (30 s on mainnet), far longer than a provider's first pause (1 s, the default here).
        const ing = lightClientIngester(db, group, {
          startBlock: FIRST,
          checkpoint: syntheticCheckpoint(o),
          metrics,
          permanentRetryMs: 30_000,
        });
        await runUntil(ing, () => ing.stats.cursor >= truth.last - ABOVE);
        // The liar was asked (it is preferred) and its blocks refused by the light client.
        expect(liar.node.requestLog.some((r) => readsBlock(r, FIRST))).toBe(true);
        expect(await metrics.registry.metrics()).toMatch(
          /tronwatch_light_client_refused_total\{code="bad-signature"\} [1-9]/,
        );
        await expectAllOnce(db, ing, truth, watches);
        expect((await cursorRow(db)).stalled_reason).toBeNull();
      },
    );

    it.each([
      ['exact gRPC bytes', 'grpc'],
      ['JSON', 'json'],
    ] as const)(
      'an SR key rotation (type 46), read as %s: the next block signed with the old key is refused, signed with the new key it is accepted; every event exactly once',
      async (_, read) => {
        t = await migratedDb(engine);
        const o = opts(284);
        const sr = DEVNET_SRS[22] as DevnetSr; // signs with a key other than its address
        const cp = syntheticCheckpoint(o);
        // The rotation in the block right before one of SR 22's own.
        let r = FIRST + 20;
        while (slotOf(cp, r + 1) !== 22) r++;
        const to = makeSr('rotated key of devnet SR 22');
        const chain = await serveSrSynthetic({
          chain: { ...o, count: r - FIRST + 40 },
          rotations: [{ block: r, owner: sr.address, to }],
        });
        nodes.push(chain.node);
        expect(chain.producers.get(r + 1)).toBe(sr.address);
        const db = t.db;
        const watches = await insertWatches(db, o, FIRST - 1);
        expect(eventsIn(chain.transfers, watches, r + 1)).toBeGreaterThan(0);
        // A provider serving block r + 1 signed with SR 22's old key (the header is the true one).
        const truth = chain.blocks.get(r + 1)?.block as string;
        chain.node.setLies({
          blocks: new Map([[r + 1, { block: resignedJson(truth, r + 1, sr.privateKey) }]]),
        });
        const metrics = new Metrics();
        const ing = ingesterFor(
          db,
          clientOf(chain.node, read),
          chain.checkpoint,
          noNewSrs,
          metrics,
        );
        const run = start(ing);
        await waitFor(async () => (await cursorRow(db)).stalled_reason !== null);
        const row = await cursorRow(db);
        expect(row.stalled_reason).toContain(`block ${r + 1}`);
        expect(row.stalled_reason).toContain(`but ${sr.address}'s signing key is ${to.signingKey}`);
        expect(row.block_number).toBe(r - ABOVE);
        expect((await maxEventBlock(db)).events).toBeLessThanOrEqual(r - ABOVE);
        expect((await maxEventBlock(db)).notifications).toBeLessThanOrEqual(r - ABOVE);
        expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, r - ABOVE));
        expect(await metrics.registry.metrics()).toMatch(
          /tronwatch_light_client_refused_total\{code="bad-signature"\} [1-9]/,
        );
        // The true block r + 1, signed with the new key, is accepted: ingest goes on.
        chain.node.setLies(undefined);
        await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
        await run.stop();
        await expectAllOnce(db, ing, chain, watches);
        // The rotation is part of the stored SR set (its block is final).
        const stored = await loadLightClientState(db, 'mainnet');
        const member = stored?.snapshot.epochs
          .find((e) => e.index === 0)
          ?.members.find((m) => m.address === sr.address);
        expect(member?.key).toBe(to.signingKey);
      },
    );

    it('a maintenance with 1 new SR: its key from a quorum of providers, its block counted only once 19 known SRs built on it; every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(285);
      const cp = syntheticCheckpoint(o);
      const m = FIRST + 20;
      // After the maintenance block m, block m + k (k ≥ 2) is scheduled at position (slot(m) + k)
      // mod 27 (only m + 1 skips 2 slots): the newcomer takes the position of block m + 22, so that
      // the 20 blocks around its first one are all of the new epoch.
      const pos = (slotOf(cp, m) + 22) % 27;
      const newcomer = makeSr('voted in at the maintenance', true);
      const nextOrder = DEVNET_SRS.map((s, i) => (i === pos ? newcomer : s));
      const chain = await serveSrSynthetic({
        chain: { ...o, count: 90 },
        maintenanceBlock: m,
        nextOrder,
      });
      nodes.push(chain.node);
      const n = m + 22;
      expect(chain.producers.get(n)).toBe(newcomer.address);
      expect([...chain.producers].find(([, w]) => w === newcomer.address)?.[0]).toBe(n);
      const { keyOf, srNodes } = await keyProviders(o, chain.checkpoint, [newcomer]);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      expect(eventsIn(chain.transfers, watches, n)).toBeGreaterThan(0);
      // 18 blocks of known SRs above the newcomer's: with it counted, its block would be final.
      chain.node.advanceTo(n + ABOVE);
      const a = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(a, () => (a.gate?.readHeight ?? 0) >= n + ABOVE);
      expect(a.gate?.readHeight).toBe(n + ABOVE);
      expect(a.stats.cursor).toBe(n - 1);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, n - 1));
      for (const s of srNodes) expect(s.requests.get('/wallet/getaccount')).toBeGreaterThan(0);
      // One more known SR on top: the newcomer's block is final, and the newcomer counts from now on.
      chain.node.advanceTo(chain.last);
      const b = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(b, () => b.stats.cursor >= chain.last - ABOVE);
      await expectAllOnce(db, b, chain, watches);
      const stored = await loadLightClientState(db, 'mainnet');
      expect(stored?.snapshot.final.epoch).toBe(1);
      const e1 = stored?.snapshot.epochs.find((e) => e.index === 1);
      expect(e1?.members.find((x) => x.address === newcomer.address)).toEqual({
        address: newcomer.address,
        key: newcomer.signingKey,
        known: true,
      });
    });

    it('a side block right after a maintenance, signed by an ordinary account in a slot a real SR uses later, is refused (the providers list it as no witness): it cannot take that slot; every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(292);
      const m = FIRST + 20;
      const chain = await serveSrSynthetic({ chain: { ...o, count: 80 }, maintenanceBlock: m });
      nodes.push(chain.node);
      // An ordinary account (about 1 TRX to activate): its key is its own address, which the
      // providers' /wallet/getaccount agree on; only listwitnesses says it is no SR.
      const attacker = makeSr('an ordinary account, not a witness');
      const { keyOf } = await keyProviders(o, chain.checkpoint, [], undefined, [attacker.address]);
      const parent = chain.headers.get(m);
      const later = chain.headers.get(m + 5);
      if (!parent || !later) throw new Error('no header');
      // At height m + 1 on block m, dated in the slot of block m + 5's (real) producer, carrying
      // transfers of a height the node never serves.
      const side = signedForkBlock(o, m + 1, parent.id, later.timestamp, chain.last + 40, attacker);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      expect(expectedEvents(side.transfers, watches).length).toBeGreaterThan(0);
      chain.node.setLies({
        blocks: new Map([[m + 1, { block: side.block, infos: side.infos }]]),
      });
      chain.node.advanceTo(m + 1);
      const metrics = new Metrics();
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf, metrics);
      const run = start(ing);
      await waitFor(
        async () =>
          (ing.gate?.readHeight ?? 0) >= m + 1 || (await cursorRow(db)).stalled_reason !== null,
      );
      expect(ing.gate?.readHeight).toBe(m);
      expect((await cursorRow(db)).stalled_reason).toContain(`is not a witness`);
      expect(await metrics.registry.metrics()).toMatch(
        /tronwatch_light_client_refused_total\{code="outside-set"\} [1-9]/,
      );
      // The real chain from then on: the slot was never given away, so its SR's block passes.
      chain.node.setLies(undefined);
      chain.node.advanceTo(chain.last);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      // And after a restart from what was stored.
      const again = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(again, () => again.stats.cursor >= chain.last - ABOVE);
      await expectAllOnce(db, again, chain, watches);
    });

    it('a maintenance with 1 new SR whose key the providers report wrong: its block is refused, nothing from it; once they report the right key, every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(289);
      const cp = syntheticCheckpoint(o);
      const m = FIRST + 20;
      const pos = (slotOf(cp, m) + 5) % 27;
      const newcomer = makeSr('voted in, its key misreported');
      const nextOrder = DEVNET_SRS.map((s, i) => (i === pos ? newcomer : s));
      const chain = await serveSrSynthetic({
        chain: { ...o, count: 70 },
        maintenanceBlock: m,
        nextOrder,
      });
      nodes.push(chain.node);
      const n = m + 5;
      expect(chain.producers.get(n)).toBe(newcomer.address);
      // Both key providers agree on a key that is not the newcomer's (quorum 2 holds).
      const wrong = makeSr('not the newcomer key').signingKey;
      let lying = true;
      const { keyOf } = await keyProviders(o, chain.checkpoint, [newcomer], (a) =>
        lying && a === newcomer.address ? wrong : undefined,
      );
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      expect(eventsIn(chain.transfers, watches, n)).toBeGreaterThan(0);
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      const run = start(ing);
      await waitFor(async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(`block ${n}`);
      expect(row.stalled_reason).toContain(`signing key is ${wrong}`);
      expect((await maxEventBlock(db)).events).toBeLessThan(n);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, row.block_number));
      // The providers report the right key: ingest goes on, nothing twice.
      lying = false;
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
    });

    /**
     * A chain with a maintenance at FIRST + 20 that brings one newcomer (its first block at m + 5),
     * served by `count` replay nodes that answer the SR questions as a node past that
     * maintenance does (the newcomer listed active, the next maintenance time one interval on).
     */
    async function newcomerChain(seed: number, count: number) {
      const o = opts(seed);
      const cp = syntheticCheckpoint(o);
      const m = FIRST + 20;
      const pos = (slotOf(cp, m) + 5) % 27;
      const newcomer = makeSr(`voted in at the maintenance ${seed}`, true);
      const nextOrder = DEVNET_SRS.map((s, i) => (i === pos ? newcomer : s));
      const chain = srSyntheticChain({
        chain: { ...o, count: 70 },
        maintenanceBlock: m,
        nextOrder,
      });
      const srAnswers = {
        accounts: [newcomer],
        nextMaintenanceTime:
          chain.checkpoint.nextMaintenanceTime + chain.checkpoint.maintenanceIntervalMs,
      };
      const served: ReplayNode[] = [];
      for (let i = 0; i < count; i++) {
        const node = await startReplayNode({
          instant: true,
          lag: 0,
          grpc: true,
          source: memorySource(chain.blocks),
          srAnswers,
        });
        nodes.push(node);
        served.push(node);
      }
      return { o, chain, newcomer, n: m + 5, served, srAnswers };
    }

    it.each([
      ['another key for it', 'signing key of', 1],
      ['that it is no active SR (not listed)', '/wallet/listwitnesses isJobs', 2],
      ['another next maintenance time', '/wallet/getnextmaintenancetime', 3],
    ] as const)(
      'a maintenance with 1 new SR, one provider of three (quorum 2) answering %s: the majority’s answer is taken, the liar named, counted (sr_answer) and set aside; every event exactly once',
      async (_what, asked, variant) => {
        t = await migratedDb(engine);
        const { o, chain, newcomer, n, served, srAnswers } = await newcomerChain(293 + variant, 3);
        const [liar, one, two] = served as [ReplayNode, ReplayNode, ReplayNode];
        expect(chain.producers.get(n)).toBe(newcomer.address);
        const wrong = makeSr('not the newcomer key').signingKey;
        liar.setLies({
          srAnswers:
            variant === 1
              ? { reportKey: (a) => (a === newcomer.address ? wrong : undefined) }
              : variant === 2
                ? { hide: [newcomer.address] }
                : { nextMaintenanceTime: srAnswers.nextMaintenanceTime + 21_600_000 },
        });
        const db = t.db;
        const watches = await insertWatches(db, o, FIRST - 1);
        expect(eventsIn(chain.transfers, watches, n)).toBeGreaterThan(0);
        const metrics = new Metrics();
        const { logger, lines } = capturingLogger();
        // The service's wiring: the gate sets providers aside in the group ingest reads from.
        const group = new NodeGroup({
          clients: [clientOf(liar), clientOf(one), clientOf(two)],
          quorum: 2,
          blockIntervalMs: 50,
          logger,
          metrics,
        });
        const gate = await serviceGate([liar, one, two], chain.checkpoint, 2, { group, logger });
        const ing = lightClientIngester(db, group, { startBlock: FIRST, gate, metrics });
        await runUntil(ing, () => ing.stats.cursor >= chain.last - ABOVE);
        await expectAllOnce(db, ing, chain, watches);
        expect((await cursorRow(db)).stalled_reason).toBeNull();
        // The light client learned the majority's key for the newcomer.
        const stored = await loadLightClientState(db, 'mainnet');
        const e1 = stored?.snapshot.epochs.find((e) => e.index === 1);
        expect(e1?.members.find((x) => x.address === newcomer.address)?.key).toBe(
          newcomer.signingKey,
        );
        // The liar (provider 0) named in the log with both answers, counted and set aside.
        const liarName = new URL(liar.url).origin;
        const said = lines.filter((l) => l.provider === liarName && l.asked !== undefined);
        expect(said.length).toBeGreaterThan(0);
        expect(String(said[0]?.asked)).toContain(asked);
        expect(said[0]?.agreed_by).toEqual([new URL(one.url).origin, new URL(two.url).origin]);
        expect(said[0]?.answer).not.toBe(said[0]?.agreed);
        expect(lines.filter((l) => l.asked !== undefined && l.provider !== liarName)).toEqual([]);
        expect(
          lines.some(
            (l) =>
              l.provider === liarName &&
              l.reason === 'verification: sr_answer' &&
              String(l.msg).startsWith('node provider set aside'),
          ),
        ).toBe(true);
        const text = await metrics.registry.metrics();
        expect(text).toMatch(
          /tronwatch_node_answers_refused_total\{provider="0",check="sr_answer"\} [1-9]/,
        );
        expect(text).not.toMatch(
          /tronwatch_node_answers_refused_total\{provider="[12]",check="sr_answer"\}/,
        );
      },
    );

    it('a maintenance with 1 new SR, one provider of two at quorum 1 answering another key: no majority, its block waits (a stall, nothing from it); once they agree, every event exactly once', async () => {
      t = await migratedDb(engine);
      const { o, chain, newcomer, n, served } = await newcomerChain(297, 2);
      const [liar, honest] = served as [ReplayNode, ReplayNode];
      const wrong = makeSr('not the newcomer key').signingKey;
      liar.setLies({
        srAnswers: { reportKey: (a) => (a === newcomer.address ? wrong : undefined) },
      });
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const metrics = new Metrics();
      const group = new NodeGroup({
        clients: [clientOf(liar), clientOf(honest)],
        blockIntervalMs: 50,
        logger: silentLogger,
        metrics,
      });
      const gate = await serviceGate([liar, honest], chain.checkpoint, 1, { group });
      const ing = lightClientIngester(db, group, { startBlock: FIRST, gate, metrics });
      const run = start(ing);
      await waitFor(async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain('providers disagree, no majority');
      expect((await maxEventBlock(db)).events).toBeLessThan(n);
      // Nobody is set aside for it: nothing says which of the two is honest.
      expect(await metrics.registry.metrics()).not.toMatch(/check="sr_answer"/);
      liar.setLies(undefined);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
    });

    it('a maintenance with 9 new SRs: the 9th newcomer’s block is refused (no halt on a branch), the stall is recorded with its reason, nothing of the new epoch is committed', async () => {
      t = await migratedDb(engine);
      const o = opts(286);
      const m = FIRST + 20;
      const newcomers = Array.from({ length: 9 }, (_, i) => makeSr(`one of nine new SRs ${i}`));
      const nextOrder = DEVNET_SRS.map((s, i) =>
        i % 3 === 0 ? (newcomers[i / 3] as DevnetSr) : s,
      );
      const chain = await serveSrSynthetic({
        chain: { ...o, count: 60 },
        maintenanceBlock: m,
        nextOrder,
      });
      nodes.push(chain.node);
      // The first block of the ninth newcomer to produce.
      const firstOf = newcomers.map(
        (s) => [...chain.producers].find(([, w]) => w === s.address)?.[0] ?? Infinity,
      );
      const ninth = Math.max(...firstOf);
      expect(ninth).toBeLessThan(chain.last);
      const { keyOf } = await keyProviders(o, chain.checkpoint, newcomers);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(ing, async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(
        `block ${ninth}: more than 8 new SRs since the maintenance of epoch 1 on this block's branch: refused`,
      );
      // Only 18 known SRs produce in the new epoch: none of its blocks can be final.
      expect(row.block_number).toBeLessThanOrEqual(m);
      expect(ing.gate?.readHeight).toBe(ninth - 1);
      const max = await maxEventBlock(db);
      expect(max.events).toBeLessThanOrEqual(m);
      expect(max.notifications).toBeLessThanOrEqual(m);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, row.block_number));
      // Every provider's block there is refused: ingest does not get past it by retrying.
      const again = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(again, () => (again.gate?.readHeight ?? 0) >= ninth - 1);
      expect((await cursorRow(db)).block_number).toBe(row.block_number);
      expect((await cursorRow(db)).stalled_reason).toContain('more than 8 new SRs');
    });

    it('a devnet run through a maintenance with key rotations and a new SR, restarted inside the new epoch, delivers every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(287);
      const cp = syntheticCheckpoint(o);
      const m = FIRST + 30;
      const pos = (slotOf(cp, m) + 10) % 27;
      const newcomer = makeSr('voted in during the devnet run');
      const nextOrder = DEVNET_SRS.map((s, i) => (i === pos ? newcomer : s));
      // SR 22 rotates before the maintenance, SR 3 (which signs with its own address) after it.
      const before = makeSr('devnet run: SR 22 rotated');
      const after = makeSr('devnet run: SR 3 rotated');
      const sr22 = DEVNET_SRS[22] as DevnetSr;
      const sr3 = DEVNET_SRS[3] as DevnetSr;
      const chain = await serveSrSynthetic({
        chain: { ...o, count: 110 },
        maintenanceBlock: m,
        nextOrder,
        rotations: [
          { block: FIRST + 10, owner: sr22.address, to: before },
          { block: m + 5, owner: sr3.address, to: after },
        ],
      });
      nodes.push(chain.node);
      const { keyOf } = await keyProviders(o, chain.checkpoint, [newcomer]);
      // Each changed key signs blocks of the run after its change.
      const signers = (addr: string, from: number) =>
        [...chain.producers].filter(([n, w]) => w === addr && n > from).map(([n]) => n);
      expect(signers(sr22.address, FIRST + 10).length).toBeGreaterThan(1);
      expect(signers(sr3.address, m + 5).length).toBeGreaterThan(0);
      expect(signers(newcomer.address, m)[0]).toBe(m + 10);
      expect(signers(newcomer.address, m).length).toBeGreaterThan(1);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      // A first ingester up to a few blocks into the new epoch, then a restart.
      chain.node.advanceTo(m + 25);
      const a = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(a, () => (a.gate?.readHeight ?? 0) >= m + 25);
      expect(a.stats.cursor).toBeGreaterThan(m);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, a.stats.cursor));
      chain.node.advanceTo(chain.last);
      const b = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(b, () => b.stats.cursor >= chain.last - ABOVE);
      await expectAllOnce(db, b, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      const e1 = (await loadLightClientState(db, 'mainnet'))?.snapshot.epochs.find(
        (e) => e.index === 1,
      );
      const keyOfMember = (a: string) => e1?.members.find((x) => x.address === a);
      expect(keyOfMember(sr22.address)?.key).toBe(before.signingKey);
      expect(keyOfMember(sr3.address)?.key).toBe(after.signingKey);
      expect(keyOfMember(newcomer.address)).toMatchObject({
        key: newcomer.signingKey,
        known: true,
      });
    });

    it('restarted at every block across a maintenance with a new SR and a rotation, delivers every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(290);
      const cp = syntheticCheckpoint(o);
      const m = FIRST + 20;
      const newcomer = makeSr('voted in, restarts all around');
      const pos = (slotOf(cp, m) + 3) % 27;
      const nextOrder = DEVNET_SRS.map((s, i) => (i === pos ? newcomer : s));
      const sr22 = DEVNET_SRS[22] as DevnetSr;
      const to = makeSr('restarts: SR 22 rotated');
      const chain = await serveSrSynthetic({
        chain: { ...o, count: 80 },
        maintenanceBlock: m,
        nextOrder,
        rotations: [{ block: m - 2, owner: sr22.address, to }],
      });
      nodes.push(chain.node);
      expect(chain.producers.get(m + 3)).toBe(newcomer.address);
      const { keyOf } = await keyProviders(o, chain.checkpoint, [newcomer]);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      // A new ingester per block read, from blocks before the maintenance until the newcomer's
      // first block is final.
      for (let head = m + 10; head <= m + 3 + 24; head++) {
        chain.node.advanceTo(head);
        const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
        await runUntil(ing, () => (ing.gate?.readHeight ?? 0) >= head);
        expect(ing.gate?.readHeight).toBe(head);
        expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, ing.stats.cursor));
      }
      chain.node.advanceTo(chain.last);
      const last = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      await runUntil(last, () => last.stats.cursor >= chain.last - ABOVE);
      await expectAllOnce(db, last, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
    });

    it('a stale checkpoint (6 h older than the chain served, its block not on it) halts with its reason; no event', async () => {
      t = await migratedDb(engine);
      const o = opts(288);
      const chain = await serveSynthetic({ ...o, count: 40 }, { instant: true, lag: 0 });
      nodes.push(chain.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      expect(want(chain.transfers, watches, chain.last).length).toBeGreaterThan(0);
      const real = syntheticCheckpoint(o);
      // Its block is another chain's at that height; the chain served is past its maintenance.
      const stale: Checkpoint = {
        ...real,
        block: {
          number: FIRST - 1,
          id: syntheticBlockId({ ...o, seed: 9999 }, FIRST - 1),
          timestamp: real.block.timestamp - 21_600_000,
        },
        nextMaintenanceTime: real.block.timestamp - 21_600_000 + 3_600_000,
        maintenanceIntervalMs: 21_600_000,
      };
      // The service's gate (finalityGateFor): the node confirms the block that shows it.
      const ing = lightClientIngester(db, clientOf(chain.node), {
        startBlock: FIRST,
        gate: await serviceGate([chain.node], stale, 1),
      });
      await runUntil(ing, async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(
        `block ${FIRST}: the checkpoint (block ${FIRST - 1}) is older than the maintenance`,
      );
      expect(row.stalled_reason).toContain('build a fresh one with `tronwatch checkpoint`');
      expect(row.block_number).toBe(FIRST - 1);
      expect(await storedEventKeys(db)).toEqual([]);
      expect((await maxEventBlock(db)).notifications).toBe(-1);
    });

    it('a restart with one provider of three on another chain at the stored final block: the two that confirm it outvote it; every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(290);
      const [liar, one, two] = [
        await serveSynthetic({ ...o, count: 50 }, { instant: true, lag: 0 }),
        await serveSynthetic({ ...o, count: 50 }, { instant: true, lag: 0 }),
        await serveSynthetic({ ...o, count: 50 }, { instant: true, lag: 0 }),
      ] as const;
      nodes.push(liar.node, one.node, two.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const cp = syntheticCheckpoint(o);
      // A first run on one honest provider stores the light client's state at its final block.
      const first = lightClientIngester(db, clientOf(one.node), {
        startBlock: FIRST,
        gate: await serviceGate([one.node], cp, 1),
      });
      await runUntil(first, () => first.stats.cursor >= FIRST + 15);
      const stored = await loadLightClientState(db, 'mainnet');
      expect(stored?.snapshot.final.number).toBeGreaterThan(FIRST);
      const final = stored?.snapshot.final.number as number;
      // The liar is on another fork from below that block on: its block there is another one.
      liar.node.setLies({ forkFrom: FIRST + 5 });
      // Restarted with the liar first among three, quorum 1, the service's gate.
      const group = new NodeGroup({
        clients: [clientOf(liar.node), clientOf(one.node), clientOf(two.node)],
        blockIntervalMs: 50,
        logger: silentLogger,
      });
      const ing = lightClientIngester(db, group, {
        startBlock: FIRST,
        gate: await serviceGate([liar.node, one.node, two.node], cp, 1),
      });
      await runUntil(ing, () => ing.stats.cursor >= one.last - ABOVE);
      expect(ing.stats.cursor).toBeGreaterThan(final);
      await expectAllOnce(db, ing, one, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
    });

    it('a restart with two providers at quorum 1, one of them on another chain at the stored final block: the signatures decide, the liar is set aside, no stall; every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(291);
      const [liar, honest] = [
        await serveSynthetic({ ...o, count: 50 }, { instant: true, lag: 0 }),
        await serveSynthetic({ ...o, count: 50 }, { instant: true, lag: 0 }),
      ] as const;
      nodes.push(liar.node, honest.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const cp = syntheticCheckpoint(o);
      // A first run on the honest provider stores the light client's state at its final block.
      const first = lightClientIngester(db, clientOf(honest.node), {
        startBlock: FIRST,
        gate: await serviceGate([honest.node], cp, 1),
      });
      await runUntil(first, () => first.stats.cursor >= FIRST + 15);
      const final = (await loadLightClientState(db, 'mainnet'))?.snapshot.final.number as number;
      expect(final).toBeGreaterThan(FIRST + 5);
      // The liar is on another fork from below that block on: at the final height it names
      // another block (one answer against one: no majority), and its child of it is no child.
      liar.node.setLies({ forkFrom: FIRST + 5 });
      const metrics = new Metrics();
      const group = new NodeGroup({
        clients: [clientOf(liar.node), clientOf(honest.node)],
        blockIntervalMs: 50,
        logger: silentLogger,
        metrics,
      });
      const ing = lightClientIngester(db, group, {
        startBlock: FIRST,
        gate: await serviceGate([liar.node, honest.node], cp, 1),
        metrics,
      });
      let stalled = false;
      const run = start(ing);
      await waitFor(async () => {
        stalled ||= (await cursorRow(db)).stalled_reason !== null;
        return ing.stats.cursor >= honest.last - ABOVE;
      });
      await run.stop();
      expect(stalled).toBe(false);
      expect(ing.stats.cursor).toBeGreaterThan(final);
      await expectAllOnce(db, ing, honest, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      // The liar (provider 0) was set aside: its refusals counted, none of the honest one's.
      const text = await metrics.registry.metrics();
      expect(text).toMatch(
        /tronwatch_node_answers_refused_total\{provider="0",check="parent"\} [1-9]/,
      );
      expect(text).not.toMatch(/tronwatch_node_answers_refused_total\{provider="1"/);
    });

    it('one provider serving a block past the checkpoint’s maintenance, not chained to it, cannot halt ingest: refused and set aside, the other provider’s chain delivers every event exactly once', async () => {
      t = await migratedDb(engine);
      const o = opts(289);
      const liar = await serveSynthetic(
        { ...o, count: 40 },
        { instant: true, lag: 0, logRequests: true },
      );
      nodes.push(liar.node);
      const honest = await serveSynthetic({ ...o, count: 40 }, { instant: true, lag: 0 });
      nodes.push(honest.node);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const cp = syntheticCheckpoint(o);
      // What a stale checkpoint would look like from here: the first block read is another
      // chain's, produced after the checkpoint's next maintenance (consistent infos, so it passes
      // the node group's checks and reaches the light client).
      const forged = syntheticBlock(
        { ...o, seed: 9998, startTimestamp: cp.nextMaintenanceTime + SLOT },
        FIRST,
      );
      const raw = forged.block.block_header?.raw_data as { parentHash: string; timestamp: number };
      expect(raw.parentHash).not.toBe(cp.block.id);
      expect(raw.timestamp).toBeGreaterThan(cp.nextMaintenanceTime);
      liar.node.setLies({
        blocks: new Map([
          [FIRST, { block: JSON.stringify(forged.block), infos: JSON.stringify(forged.infos) }],
        ]),
      });
      const group = new NodeGroup({
        clients: [clientOf(liar.node), clientOf(honest.node)],
        blockIntervalMs: 50,
        logger: silentLogger,
      });
      const metrics = new Metrics();
      const ing = lightClientIngester(db, group, {
        startBlock: FIRST,
        gate: await serviceGate([liar.node, honest.node], cp, 1),
        metrics,
      });
      await runUntil(ing, () => ing.stats.cursor >= honest.last - ABOVE);
      // The liar was asked for the block (it is preferred) and its answer refused, not obeyed.
      expect(liar.node.requestLog.some((r) => readsBlock(r, FIRST))).toBe(true);
      expect(await metrics.registry.metrics()).toMatch(
        /tronwatch_light_client_refused_total\{code="not-chained"\} [1-9]/,
      );
      await expectAllOnce(db, ing, honest, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
    });

    it('one SR key, the only provider: a block of that SR carrying 18 rotations of other SRs’ keys, then blocks signed with them in their slots: nothing at or above it is committed (issue 36, finding 1)', async () => {
      t = await migratedDb(engine);
      const o = opts(293);
      const cp = syntheticCheckpoint(o);
      const r = FIRST + 25;
      const attacker = DEVNET_SRS[slotOf(cp, r)] as DevnetSr;
      const victims = DEVNET_SRS.filter((s) => s.address !== attacker.address).slice(0, 18);
      // The 18 "rotations" in the attacker's own block r: from r + 1 on the victims' slots are
      // signed with the attacker's keys (the chain the liar serves).
      const chain = await serveSrSynthetic({
        chain: { ...o, count: r - FIRST + 40 },
        rotations: victims.map((v) => ({
          block: r,
          owner: v.address,
          to: makeSr(`attacker's key for ${v.address}`),
        })),
      });
      nodes.push(chain.node);
      expect(chain.producers.get(r)).toBe(attacker.address);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      expect(eventsIn(chain.transfers, watches, r)).toBeGreaterThan(0);
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint);
      // Everything is read and verified (the keys are the block's word), nothing refused.
      await runUntil(ing, () => (ing.gate?.readHeight ?? 0) >= chain.last);
      expect(ing.gate?.readHeight).toBe(chain.last);
      // Blocks signed with a rotated key count only once the rotation is final, which needs 19
      // SRs with the keys in force before it: the 9 that were not rotated are not enough.
      expect(ing.stats.cursor).toBeLessThan(r);
      const max = await maxEventBlock(db);
      expect(max.events).toBeLessThan(r);
      expect(max.notifications).toBeLessThan(r);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, ing.stats.cursor));
    });

    it('after a maintenance, a real SR’s side block in the next real block’s slot, then the real chain: no wrong-slot stall, every event exactly once (issue 36, finding 3)', async () => {
      t = await migratedDb(engine);
      const o = opts(294);
      const m = FIRST + 20;
      const chain = await serveSrSynthetic({ chain: { ...o, count: 80 }, maintenanceBlock: m });
      nodes.push(chain.node);
      const parent = chain.headers.get(m);
      const real = chain.headers.get(m + 1);
      if (!parent || !real) throw new Error('no header');
      // A, a real SR of the set with its real key, signs a block at the time of P's (real) block.
      const a = DEVNET_SRS.find(
        (s) => s.address !== real.witness && s.address !== parent.witness,
      ) as DevnetSr;
      const side = signedForkBlock(o, m + 1, parent.id, real.timestamp, chain.last + 40, a);
      chain.node.setLies({ blocks: new Map([[m + 1, { block: side.block, infos: side.infos }]]) });
      chain.node.advanceTo(m + 1);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint);
      const run = start(ing);
      await waitFor(() => (ing.gate?.readHeight ?? 0) >= m + 1);
      // The side block is verified (A signed it), never final.
      expect(ing.gate?.readHeight).toBe(m + 1);
      // The provider serves the real chain again: P's block is P's slot's, not A's.
      chain.node.setLies(undefined);
      chain.node.advanceTo(chain.last);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      expect(expectedEvents(side.transfers, watches).length).toBeGreaterThan(0);
    });

    it('a lone provider’s side branch after a maintenance, made of 9 newcomers it invents (and vouches for): the 9th is refused, no halt; back on the real chain, every event exactly once (issue 36, finding 3)', async () => {
      t = await migratedDb(engine);
      const o = opts(295);
      const m = FIRST + 20;
      const chain = await serveSrSynthetic({ chain: { ...o, count: 80 }, maintenanceBlock: m });
      nodes.push(chain.node);
      const invented = Array.from({ length: 9 }, (_, i) => makeSr(`invented newcomer ${i}`));
      // The only provider answers for them: listed as active SRs, with their keys.
      const { keyOf } = await keyProviders(o, chain.checkpoint, invented);
      const lies = new Map<number, { block: string; infos: string }>();
      let parentId = chain.headers.get(m)?.id as string;
      invented.forEach((sr, i) => {
        const at = chain.headers.get(m + 1 + i);
        if (!at) throw new Error('no header');
        const b = signedForkBlock(o, m + 1 + i, parentId, at.timestamp, chain.last + 40 + i, sr);
        lies.set(m + 1 + i, { block: b.block, infos: b.infos });
        parentId = b.id;
      });
      chain.node.setLies({ blocks: lies });
      chain.node.advanceTo(m + 9);
      const db = t.db;
      const watches = await insertWatches(db, o, FIRST - 1);
      const ing = ingesterFor(db, clientOf(chain.node), chain.checkpoint, keyOf);
      const run = start(ing);
      await waitFor(async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(`block ${m + 9}: more than 8 new SRs`);
      expect(row.stalled_reason).not.toContain('halts');
      expect(row.block_number).toBeLessThanOrEqual(m);
      // The provider tells the truth again: the real chain's SRs hold their slots.
      chain.node.setLies(undefined);
      chain.node.advanceTo(chain.last);
      await waitFor(() => ing.stats.cursor >= chain.last - ABOVE);
      await run.stop();
      await expectAllOnce(db, ing, chain, watches);
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      const stored = await loadLightClientState(db, 'mainnet');
      const e1 = stored?.snapshot.epochs.find((e) => e.index === 1);
      expect(e1?.newcomers).toEqual([]);
    });
  },
);
