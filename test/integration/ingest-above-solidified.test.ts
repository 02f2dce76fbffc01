/**
 * Ingest above the providers' solidified head with the light client on (issue 28 item 2,
 * src/ingest/loop.ts, src/ingest/finality-gate.ts `add`, src/tron/node-group.ts
 * getFullNodeBlock/getBlockIfProduced), through the whole path to the events table, on both
 * database engines, against a real replay node serving a synthetic chain signed by the 27 devnet
 * SRs (its full-node view: `/wallet/…` and gRPC `protocol.Wallet/GetBlockByNum2`):
 * - blocks are read up to the node's full-node head, far above its solidified head, each once
 *   (its exact bytes and its receipts: 2 requests per block, counted from the node's own log),
 *   and committed once the light client proved them final: every expected event exactly once;
 * - without the light client, nothing above the solidified head is read (as before);
 * - a fork at the unsolidified tip (the node serves 3 blocks of another branch, signed by the SRs
 *   of their slots and carrying transfers to the watched addresses, then switches back to the real
 *   chain) is followed by parent hash: the heights that changed are read again, once each; no
 *   event from the fork, every real event exactly once, no stall, no provider set aside, no
 *   refusal counted;
 * - a gRPC address that serves only the solidity service (java-tron's solidity port) is refused
 *   with a message naming the full node's port;
 * - receipts dated otherwise than their block (a node switching branches between the two reads)
 *   make the client read both once more; a node that keeps answering so is refused by
 *   verification as before.
 */
import { Server as GrpcServer, ServerCredentials } from '@grpc/grpc-js';
import { afterEach, describe, expect, it } from 'vitest';
import { Metrics } from '../../src/common/metrics.js';
import type { ReplayNode, ReplayRequestRecord } from '../../src/devnet/replay-node.js';
import {
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import type { Ingester } from '../../src/ingest/loop.js';
import {
  GET_BLOCK_BY_NUM2,
  GET_FULL_BLOCK_BY_NUM2,
  GrpcBlockClient,
  parseGrpcTarget,
} from '../../src/tron/grpc.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { Transfer } from '../../src/tron/types.js';
import { BlockCheckError, verifyBlock } from '../../src/tron/verify.js';
import {
  eventKey,
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
  runUntil,
  signedForkBlock,
  start,
  waitFor,
  want,
} from '../helpers/light-client-ingest.js';

const OPTS = lightClientChain(281, 73_000_000);
const CHAIN = { ...OPTS, count: 60 };
/** Blocks above a block that make it final on a chain where every SR signs in turn (19 - 1). */
const ABOVE = 18;

/**
 * An ingester on `node` with the light client (`gate`: from the chain's checkpoint) or without,
 * reading exact gRPC bytes (`grpc`) or JSON.
 */
function ingesterFor(
  db: TestDb['db'],
  node: ReplayNode,
  opts: { gate: boolean; grpc: boolean; metrics?: Metrics },
): Ingester {
  return lightClientIngester(db, clientOf(node, opts.grpc ? 'grpc' : 'json'), {
    startBlock: CHAIN.firstBlock,
    ...(opts.gate ? { checkpoint: syntheticCheckpoint(OPTS) } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  });
}

/** Requests naming block numbers from..to in `log`, by path, per block. */
function readsPerBlock(
  log: readonly ReplayRequestRecord[],
  from: number,
  to: number,
): Map<number, string[]> {
  const out = new Map<number, string[]>();
  for (const r of log) {
    if (r.num === undefined || r.num < from || r.num > to) continue;
    out.set(r.num, [...(out.get(r.num) ?? []), r.path].sort());
  }
  return out;
}

describe.each(dbEngines)(
  'ingest above the solidified head on %s',
  { timeout: 240_000 },
  (engine) => {
    let t: TestDb | undefined;
    let chain: SyntheticChain | undefined;
    afterEach(async () => {
      await chain?.node.close();
      await t?.drop();
      chain = undefined;
      t = undefined;
    });

    it('reads each block once up to the full-node head and commits what the light client proved, exactly once', async () => {
      t = await migratedDb(engine);
      // The node's full-node head runs 40 blocks above its solidified head.
      chain = await serveSynthetic(CHAIN, { instant: true, lag: 40, logRequests: true });
      const db = t.db;
      const watches = await insertWatches(db, OPTS, chain.first - 1);
      const solid = chain.first + 5;
      chain.node.advanceTo(solid);
      const head = solid + 40;
      expect(chain.node.heads()).toEqual({ solidified: solid, head });
      const ing = ingesterFor(db, chain.node, { gate: true, grpc: true });
      await runUntil(ing, () => ing.stats.cursor >= head - ABOVE);
      // Read up to the full-node head; proven (and committed) up to 18 below it, far above the
      // node's solidified head.
      expect(ing.gate?.readHeight).toBe(head);
      expect(ing.stats.cursor).toBe(head - ABOVE);
      expect(ing.stats.cursor).toBeGreaterThan(solid);
      expect(want(chain.transfers, watches, head - ABOVE).length).toBeGreaterThan(0);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, head - ABOVE));
      expect((await cursorRow(db)).stalled_reason).toBeNull();
      // Each block read once: its exact bytes from the full node, then its receipts (40 txs each).
      const reads = readsPerBlock(chain.node.requestLog, chain.first, head);
      for (let n = chain.first; n <= head; n++) {
        expect(reads.get(n), `block ${n}`).toEqual([
          '/wallet/gettransactioninfobyblocknum',
          'grpc Wallet/GetBlockByNum2',
        ]);
      }
      const blockReads = [...reads.values()].reduce((a, r) => a + r.length, 0);
      expect(blockReads / (head - chain.first + 1)).toBeLessThanOrEqual(2.1);
      // Nothing asked of the solidity view's blocks.
      expect(
        chain.node.requestLog.filter(
          (r) => r.path.startsWith('/walletsolidity/') || r.path === 'grpc GetBlockByNum2',
        ),
      ).toEqual([]);
    });

    it('without the light client, reads nothing above the solidified head (as before)', async () => {
      t = await migratedDb(engine);
      chain = await serveSynthetic(CHAIN, { instant: true, lag: 40, logRequests: true });
      const db = t.db;
      const watches = await insertWatches(db, OPTS, chain.first - 1);
      const solid = chain.first + 5;
      chain.node.advanceTo(solid);
      const ing = ingesterFor(db, chain.node, { gate: false, grpc: true });
      await runUntil(ing, () => ing.stats.cursor >= solid);
      // A little longer: it keeps asking for the next solidified block, never above.
      await runUntil(ing, async () => {
        await new Promise((r) => setTimeout(r, 200));
        return true;
      });
      expect(ing.stats.cursor).toBe(solid);
      expect(await storedEventKeys(db)).toEqual(want(chain.transfers, watches, solid));
      const above = chain.node.requestLog.filter(
        (r) =>
          r.path.startsWith('/wallet/getblockbynum') ||
          r.path === '/wallet/gettransactioninfobyblocknum' ||
          r.path === 'grpc Wallet/GetBlockByNum2' ||
          (r.num !== undefined && r.num > solid + 1),
      );
      expect(above).toEqual([]);
    });

    it.each([
      ['gRPC', true],
      ['JSON', false],
    ])(
      'a fork at the unsolidified tip, then the real chain again (%s): no event from the fork, every real event once, no stall',
      async (_, grpc) => {
        t = await migratedDb(engine);
        chain = await serveSynthetic(CHAIN, { instant: true, lag: ABOVE, logRequests: true });
        const db = t.db;
        const watches = await insertWatches(db, OPTS, chain.first - 1);
        // The node's head at first+28; its last 3 blocks on another branch from first+26 on.
        chain.node.advanceTo(chain.first + 10);
        const fork = chain.first + 26;
        const tipBefore = fork + 2;
        const blocks = new Map<number, { block: string; infos: string }>();
        const forkTransfers: Transfer[] = [];
        let parent = syntheticBlockId(OPTS, fork - 1);
        const realTs = Number(syntheticBlock(OPTS, fork).block.block_header?.raw_data?.timestamp);
        for (let k = 0; k < 3; k++) {
          // One slot later than the real block of that height: another SR's block.
          const f = signedForkBlock(
            OPTS,
            fork + k,
            parent,
            realTs + 3000 * (k + 1),
            chain.last + 10 + k,
          );
          blocks.set(fork + k, { block: f.block, infos: f.infos });
          forkTransfers.push(...f.transfers);
          parent = f.id;
        }
        const forkEvents = expectedEvents(forkTransfers, watches);
        expect(forkEvents.length).toBeGreaterThan(0);
        chain.node.setLies({ blocks });
        const metrics = new Metrics();
        const ing = ingesterFor(db, chain.node, { gate: true, grpc, metrics });
        const run = start(ing);
        try {
          await waitFor(() => (ing.gate?.readHeight ?? 0) >= tipBefore);
          expect(ing.gate?.readHeight).toBe(tipBefore);
          // The fork's blocks are read, never final.
          expect(ing.stats.cursor).toBeLessThan(fork);
          // The node switches back to the real chain, which goes on.
          chain.node.setLies(undefined);
          const end = chain.last - ABOVE;
          chain.node.advanceTo(end);
          await waitFor(() => ing.stats.cursor >= end);
        } finally {
          await run.stop();
        }
        const end = chain.last - ABOVE;
        expect(ing.stats.cursor).toBe(end);
        const stored = await storedEventKeys(db);
        expect(stored).toEqual(want(chain.transfers, watches, end));
        const forkKeys = new Set(forkEvents.map(eventKey));
        expect(stored.filter((k) => forkKeys.has(k))).toEqual([]);
        // A fork switch, not an attack: no stall, no provider set aside, no refusal counted.
        expect((await cursorRow(db)).stalled_reason).toBeNull();
        expect(ing.group.states().map((s) => s.state)).toEqual(['ok']);
        expect(await metrics.registry.metrics()).not.toMatch(
          /tronwatch_light_client_refused_total\{[^}]*\} [1-9]/,
        );
        // The heights of the fork were read twice (its block, then the real one), every other
        // height once.
        const blockPath = grpc ? 'grpc Wallet/GetBlockByNum2' : '/wallet/getblockbynum';
        const reads = readsPerBlock(chain.node.requestLog, chain.first, chain.last);
        for (let n = chain.first; n <= chain.last; n++) {
          const times = (reads.get(n) ?? []).filter((p) => p === blockPath).length;
          // The block above the fork's tip was asked for while it was not there yet (misses).
          if (n === tipBefore + 1) expect(times).toBeGreaterThanOrEqual(1);
          else expect(times, `block ${n}`).toBe(n >= fork && n <= tipBefore ? 2 : 1);
        }
      },
    );
  },
);

describe('the full node gRPC service', () => {
  it('a gRPC address without protocol.Wallet is refused with a message naming the full node port', async () => {
    // A server that serves neither service: every method is UNIMPLEMENTED.
    const server = new GrpcServer();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const client = new GrpcBlockClient({ host: '127.0.0.1', port, tls: false }, undefined);
    try {
      const full = await client.getBlockByNum2(1, 5000, undefined, GET_FULL_BLOCK_BY_NUM2).then(
        () => undefined,
        (e: unknown) => e as Error & { retryable?: boolean },
      );
      expect(full?.message).toContain("does not serve the full node's protocol.Wallet");
      expect(full?.message).toContain('50051');
      expect(full?.message).toContain('#grpc_full=grpc://host:port');
      expect(full?.retryable).toBe(false);
      // The solidity method's refusal has no such hint.
      const solid = await client.getBlockByNum2(1, 5000, undefined, GET_BLOCK_BY_NUM2).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(solid?.message).toContain('UNIMPLEMENTED');
      expect(solid?.message).not.toContain('protocol.Wallet:');
    } finally {
      client.close();
      server.forceShutdown();
    }
  });

  it('#grpc_full: blocks above the solidified head are read from the full node port, solidified ones from #grpc', async () => {
    // The solidity port answers UNIMPLEMENTED to everything; the full node's is a replay node.
    const server = new GrpcServer();
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
    const chain = await serveSynthetic(
      { seed: 5, firstBlock: 73_000_000, txPerBlock: 5, addresses: 10, count: 3 },
      { instant: true, lag: 2 },
    );
    const full = parseGrpcTarget(chain.node.grpcUrl as string);
    const client = new NodeClient({
      url: chain.node.url,
      retries: 0,
      timeoutMs: 5000,
      grpc: { host: '127.0.0.1', port, tls: false },
      grpcFull: full,
    });
    try {
      const b = await client.getFullNodeBlock(chain.first + 1, false);
      expect(b?.ref.number).toBe(chain.first + 1);
      expect(b?.exact).toBeDefined();
      await client.getHeads(); // the solidified head (HTTP), which bounds solidified reads
      await expect(client.getSolidifiedBlock(chain.first)).rejects.toThrow(
        /protocol\.WalletSolidity\/GetBlockByNum2 73000000: UNIMPLEMENTED/,
      );
    } finally {
      await client.close();
      await chain.node.close();
      server.forceShutdown();
    }
  });
});

describe('receipts of a block above the solidified head', () => {
  it('dated otherwise than the block: block and receipts read once more, then verification judges', async () => {
    const chain = await serveSynthetic(CHAIN, { instant: true, lag: ABOVE, logRequests: true });
    try {
      chain.node.advanceTo(chain.first);
      const n = chain.first + 5;
      const real = syntheticBlock(OPTS, n);
      // Receipts of a block at n one slot later (another branch's), for every transaction.
      const infos = real.infos.map((i) => ({
        ...i,
        blockTimeStamp: Number(i.blockTimeStamp) + 3000,
      }));
      chain.node.setLies({ blocks: new Map([[n, { infos: JSON.stringify(infos) }]]) });
      const client = new NodeClient({ url: chain.node.url, retries: 1, timeoutMs: 5000 });
      try {
        const got = await client.getFullNodeBlock(n, false);
        // The liar's answer after the second read: verification refuses it.
        expect(() => verifyBlock(got?.block ?? {}, got?.infos ?? [])).toThrow(BlockCheckError);
        // A truthful block next to it: read once.
        const ok = await client.getFullNodeBlock(n + 1, false);
        expect(ok?.ref.number).toBe(n + 1);
        const reads = readsPerBlock(chain.node.requestLog, n, n + 1);
        expect(reads.get(n)).toEqual([
          '/wallet/getblockbynum',
          '/wallet/getblockbynum',
          '/wallet/gettransactioninfobyblocknum',
          '/wallet/gettransactioninfobyblocknum',
        ]);
        expect(reads.get(n + 1)).toEqual([
          '/wallet/getblockbynum',
          '/wallet/gettransactioninfobyblocknum',
        ]);
      } finally {
        await client.close();
      }
    } finally {
      await chain.node.close();
    }
  });
});
