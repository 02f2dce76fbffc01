/**
 * Synthetic chains served by a real replay node, and an independent expectation of the events
 * they should produce (the generator's own ground truth, matched by a loop written here, not by
 * src/ingest/match.ts).
 */
import { writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { newId } from '../../src/common/ids.js';
import type { Queryable } from '../../src/db/pool.js';
import {
  memorySource,
  type ReplayNode,
  type ReplayNodeOptions,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { type SyntheticChainOptions, syntheticBlock } from '../../src/devnet/synthetic.js';
import type { IngesterOptions } from '../../src/ingest/loop.js';
import { hexToBase58 } from '../../src/tron/address.js';
import type { Transfer } from '../../src/tron/types.js';

export interface SyntheticChain {
  node: ReplayNode;
  first: number;
  last: number;
  transfers: Transfer[];
}

/**
 * The Ingester configuration the integration tests use on a served chain: start at its first
 * block, poll every 50 ms, 4 blocks ahead, 3 retries of 5 s.
 */
export function testIngestConfig(chain: SyntheticChain): IngesterOptions['config'] {
  return {
    network: 'mainnet',
    node: { concurrency: 4 },
    ingest: { startBlock: chain.first, blockIntervalMs: 50 },
  };
}

/**
 * TRON_NODE_URL for a replay node: its HTTP URL with its gRPC address (`#grpc=`), so the service
 * reads exact bytes (the ingest role refuses one provider without gRPC: src/ingest/provable.ts).
 * @throws when the node was started without `grpc: true`.
 */
export function tronNodeUrl(node: { url: string; grpcUrl: string | undefined }): string {
  if (!node.grpcUrl)
    throw new Error(`replay node ${node.url} serves no gRPC (start it with grpc: true)`);
  return `${node.url}#grpc=${node.grpcUrl}`;
}

/**
 * Blocks on top of a block that make it final when every SR signs in turn, as on the devnet: 19
 * distinct SRs (its producer and 18 more) must have signed blocks at or above it
 * (src/tron/light-client/finality.ts). A test that steps a replay node by hand advances its
 * full-node head (solidified + lag) this far above the block it waits for.
 */
export const FINALITY_DEPTH = 18;

/**
 * A file holding the checkpoint from which a light client proves a replay node's chain (the node's
 * `checkpoint`: the block before its first one, with the devnet SRs in schedule order), for
 * TRON_LIGHT_CLIENT_CHECKPOINT. Named by the checkpoint's block, in the temporary folder.
 * @throws when the node has no checkpoint (a source it cannot build one for).
 */
export function checkpointFile(node: Pick<ReplayNode, 'url' | 'checkpoint'>): string {
  const cp = node.checkpoint;
  if (!cp) throw new Error(`replay node ${node.url} has no checkpoint`);
  const file = path.join(
    tmpdir(),
    `tw-checkpoint-${cp.block.number}-${cp.block.id.slice(-16)}.json`,
  );
  writeFileSync(file, `${JSON.stringify(cp, null, 2)}\n`);
  return file;
}

/**
 * The service's chain settings for a replay node: TRON_NODE_URL (tronNodeUrl: HTTP and gRPC) and
 * TRON_LIGHT_CLIENT_CHECKPOINT pinned at the node's checkpoint (checkpointFile), so the light
 * client proves every block the service commits from the devnet SRs' signatures.
 * @throws as tronNodeUrl and checkpointFile.
 */
export function nodeEnv(node: Pick<ReplayNode, 'url' | 'grpcUrl' | 'checkpoint'>): {
  TRON_NODE_URL: string;
  TRON_LIGHT_CLIENT_CHECKPOINT: string;
} {
  return { TRON_NODE_URL: tronNodeUrl(node), TRON_LIGHT_CLIENT_CHECKPOINT: checkpointFile(node) };
}

/** Serve blocks first..first+count-1 of a synthetic chain (with gRPC unless `grpc: false`). */
export async function serveSynthetic(
  chain: SyntheticChainOptions & { count: number },
  node: Omit<ReplayNodeOptions, 'source'> = { instant: true },
): Promise<SyntheticChain> {
  const first = chain.firstBlock ?? 70_000_000;
  const map = new Map<number, { block: string; infos: string }>();
  const transfers: Transfer[] = [];
  for (let n = first; n < first + chain.count; n++) {
    const b = syntheticBlock({ ...chain, firstBlock: first }, n);
    map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    transfers.push(...b.transfers);
  }
  const replay = await startReplayNode({ grpc: true, ...node, source: memorySource(map) });
  return { node: replay, first, last: first + chain.count - 1, transfers };
}

export interface ExpectedEvent {
  watchId: string;
  txId: string;
  eventIndex: number;
  direction: 'incoming' | 'outgoing';
  asset: 'USDT' | 'TRX';
  amountRaw: string;
}

export interface TestWatch {
  id: string;
  addressHex: string;
  asset: 'USDT' | 'TRX' | 'ALL';
  direction: 'incoming' | 'outgoing' | 'both';
  activeFrom: number;
}

/** The events SPEC says these watches must get for these transfers (independent of src/ingest). */
export function expectedEvents(
  transfers: readonly Transfer[],
  watches: readonly TestWatch[],
): ExpectedEvent[] {
  const out: ExpectedEvent[] = [];
  for (const t of transfers) {
    for (const w of watches) {
      if (t.blockNumber <= w.activeFrom) continue;
      if (w.asset !== 'ALL' && w.asset !== t.asset) continue;
      const inc = t.to === w.addressHex && (w.direction === 'incoming' || w.direction === 'both');
      const out_ =
        t.from === w.addressHex && (w.direction === 'outgoing' || w.direction === 'both');
      if (!inc && !out_) continue;
      out.push({
        watchId: w.id,
        txId: t.txId,
        eventIndex: t.eventIndex,
        direction: inc ? 'incoming' : 'outgoing',
        asset: t.asset,
        amountRaw: t.amountRaw.toString(),
      });
    }
  }
  return out;
}

/** A stable sort key for comparing event sets. */
export function eventKey(e: ExpectedEvent): string {
  return `${e.watchId}|${e.txId}|${e.eventIndex}|${e.direction}|${e.asset}|${e.amountRaw}`;
}

/** Every stored event as an {@link eventKey}, sorted (to compare with expectedEvents). */
export async function storedEventKeys(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{
    watch_id: string;
    tx_id: string;
    event_index: number;
    direction: 'incoming' | 'outgoing';
    asset: 'USDT' | 'TRX';
    amount_raw: string;
  }>(
    'SELECT watch_id, tx_id, event_index, direction, asset, amount_raw::text AS amount_raw FROM events',
  );
  return rows
    .map((r) =>
      eventKey({
        watchId: r.watch_id,
        txId: r.tx_id,
        eventIndex: r.event_index,
        direction: r.direction,
        asset: r.asset,
        amountRaw: r.amount_raw,
      }),
    )
    .sort();
}

/**
 * Insert one webhook watch per address (directly, bypassing the API), cycling asset filters
 * ALL/USDT/TRX and directions both/incoming/outgoing, all active from `activeFrom`.
 * `secret`: the encrypted secret to store (a placeholder when the test delivers nothing).
 */
export async function insertSyntheticWatches(
  db: Queryable,
  accountId: string,
  addresses: readonly string[],
  opts: { activeFrom: number; webhookUrl?: string; secret?: { keyId: string; ciphertext: Buffer } },
): Promise<TestWatch[]> {
  const watches: TestWatch[] = [];
  for (const [i, a] of addresses.entries()) {
    const w: TestWatch = {
      id: newId('wh'),
      addressHex: a,
      asset: (['ALL', 'USDT', 'TRX'] as const)[i % 3] ?? 'ALL',
      direction: (['both', 'incoming', 'outgoing'] as const)[i % 3] ?? 'both',
      activeFrom: opts.activeFrom,
    };
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       VALUES ($1, $2, 'mainnet', $3, $4, $5, $6, 'webhook', $7, $8, $9, $10)`,
      [
        w.id,
        accountId,
        hexToBase58(a),
        a,
        w.asset,
        w.direction,
        opts.webhookUrl ?? 'https://example.com/h',
        opts.secret?.keyId ?? 'k',
        opts.secret?.ciphertext ?? Buffer.from([0]),
        w.activeFrom,
      ],
    );
    watches.push(w);
  }
  return watches;
}
