/**
 * What the integration tests of ingest with the light client share
 * (test/integration/ingest-light-client.test.ts, ingest-light-client-lies.test.ts,
 * ingest-above-solidified.test.ts): the synthetic chains they serve, their watches, an Ingester on
 * a replay node with or without a FinalityGate (src/ingest/finality-gate.ts), running it until a
 * condition holds, and the rows they read back (the cursor, the highest event and notification).
 */
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import type { Metrics } from '../../src/common/metrics.js';
import type { Queryable } from '../../src/db/pool.js';
import type { ReplayNode } from '../../src/devnet/replay-node.js';
import {
  DEVNET_SRS,
  type SyntheticChainOptions,
  syntheticAddresses,
  syntheticBlock,
} from '../../src/devnet/synthetic.js';
import { FinalityGate } from '../../src/ingest/finality-gate.js';
import { Ingester } from '../../src/ingest/loop.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { parseGrpcTarget } from '../../src/tron/grpc.js';
import type { Checkpoint } from '../../src/tron/light-client/sr-set.js';
import { signWitnessHeader } from '../../src/tron/light-client/witness-signature.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { NodeGroup } from '../../src/tron/node-group.js';
import type { BlockJson, Transfer } from '../../src/tron/types.js';
import { encodeHeaderRaw } from '../../src/tron/verify.js';
import { eventKey, expectedEvents, type TestWatch } from './chain.js';
import type { TestDb } from './db.js';
import { blockJsonOf, signedHeader } from './sr-chain.js';

/**
 * The options of a synthetic chain these tests serve (src/devnet/synthetic.ts): `seed`, its first
 * block number, 40 transactions per block among 40 addresses (so every block has transfers to the
 * watched ones).
 */
export function lightClientChain(
  seed: number,
  firstBlock: number,
): SyntheticChainOptions & { seed: number; firstBlock: number } {
  return { seed, firstBlock, txPerBlock: 40, addresses: 40 };
}

/** The light client's key lookup for a chain without new SRs: any call is a test failure. */
export const noNewSrs = async (a: string): Promise<string> => {
  throw new Error(`no SR is new on this chain (${a})`);
};

/**
 * Four watches (all assets, both directions, webhook, network mainnet, active from block
 * `activeFrom`) on the first four addresses of the population of chain `o`, under a new pro
 * account; returned as TestWatch for expectedEvents.
 */
export async function insertWatches(
  db: Queryable,
  o: SyntheticChainOptions,
  activeFrom: number,
): Promise<TestWatch[]> {
  const acc = newId('acc');
  await db.query("INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'pro')", [
    acc,
    `${acc}@example.com`,
  ]);
  const out: TestWatch[] = [];
  for (const addressHex of syntheticAddresses(o).slice(0, 4)) {
    const id = newId('wh');
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel,
                            webhook_url, secret_key_id, secret_ciphertext, status, active_from_block)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://example.com/hook', 'k', '\\x00'::bytea, 'ACTIVE', $5)`,
      [id, acc, hexToBase58(addressHex), addressHex, activeFrom],
    );
    out.push({ id, addressHex, asset: 'ALL', direction: 'both', activeFrom });
  }
  return out;
}

/**
 * A client of a replay node (1 retry, 5 s timeout): reading each block as exact gRPC bytes (as the
 * ingest role requires of a provider alone: src/ingest/provable.ts), or as JSON only with `json`.
 * @throws Error when `grpc` is asked of a node that serves no gRPC.
 */
export function clientOf(node: ReplayNode, read: 'grpc' | 'json' = 'grpc'): NodeClient {
  if (read === 'grpc' && !node.grpcUrl) throw new Error(`${node.url} serves no gRPC`);
  return new NodeClient({
    url: node.url,
    retries: 1,
    timeoutMs: 5000,
    ...(read === 'grpc' && node.grpcUrl ? { grpc: parseGrpcTarget(node.grpcUrl) } : {}),
  });
}

/**
 * An Ingester on network mainnet reading from `client` from block `startBlock` on (4 blocks
 * ahead, block interval `blockIntervalMs`, default 50 ms: how often it polls, and, for a
 * NodeClient, the interval of the NodeGroup made around it; `permanentRetryMs` between retries of
 * a permanent failure, default 100 ms), with a FinalityGate from `checkpoint` (new SRs' keys from `keyOf`, default
 * noNewSrs), or `gate` when given (the service's, from finalityGateFor), or, without either,
 * without the light client (the solidified head's blocks only); `metrics` when given.
 */
export function lightClientIngester(
  db: TestDb['db'],
  client: NodeClient | NodeGroup,
  opts: {
    startBlock: number;
    checkpoint?: Checkpoint;
    keyOf?: (address: string, signal?: AbortSignal, epochEnd?: number) => Promise<string>;
    metrics?: Metrics;
    blockIntervalMs?: number;
    /** A gate built elsewhere (the service's: finalityGateFor), used instead of `checkpoint`. */
    gate?: FinalityGate;
    /**
     * Delay between retries of a permanent failure, ms. Default 100: shorter than a provider's
     * first pause (1 s), unlike production (30 s against 1 s): give it to test that proportion.
     */
    permanentRetryMs?: number;
  },
): Ingester {
  return new Ingester({
    db,
    client,
    config: {
      network: 'mainnet',
      node: { concurrency: 4 },
      ingest: { startBlock: opts.startBlock, blockIntervalMs: opts.blockIntervalMs ?? 50 },
    },
    logger: silentLogger,
    ...(opts.gate ? { finality: opts.gate } : {}),
    ...(opts.checkpoint && !opts.gate
      ? {
          finality: new FinalityGate({
            checkpoint: opts.checkpoint,
            keyOf: opts.keyOf ?? noNewSrs,
          }),
        }
      : {}),
    permanentRetryMs: opts.permanentRetryMs ?? 100,
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
  });
}

/** Wait until `done()` holds (checked every 20 ms, at most 60 s; then returns all the same). */
export async function waitFor(done: () => Promise<boolean> | boolean): Promise<void> {
  for (let i = 0; i < 3000 && !(await done()); i++) await new Promise((r) => setTimeout(r, 20));
}

/** A running ingester: stop() aborts it and waits until its block in progress is done. */
export function start(ing: Ingester): { stop: () => Promise<void> } {
  const ac = new AbortController();
  const running = ing.run(ac.signal);
  return {
    stop: async () => {
      ac.abort();
      await running;
    },
  };
}

/** Run `ing` until `done()` holds (as waitFor), then stop it. */
export async function runUntil(
  ing: Ingester,
  done: () => Promise<boolean> | boolean,
): Promise<void> {
  const r = start(ing);
  await waitFor(done);
  await r.stop();
}

/** The mainnet cursor row: its block number (−1: no row) and stall reason (null: none). */
export async function cursorRow(
  db: Queryable,
): Promise<{ block_number: number; stalled_reason: string | null }> {
  const { rows } = await db.query<{ block_number: string; stalled_reason: string | null }>(
    "SELECT block_number, stalled_reason FROM chain_cursor WHERE network = 'mainnet'",
  );
  return {
    block_number: Number(rows[0]?.block_number ?? -1),
    stalled_reason: rows[0]?.stalled_reason ?? null,
  };
}

/** The highest block of a stored event and of a notification (−1: none). */
export async function maxEventBlock(
  db: Queryable,
): Promise<{ events: number; notifications: number }> {
  const e = await db.query<{ m: string | null }>('SELECT max(block_number) AS m FROM events');
  const n = await db.query<{ m: string | null }>(
    'SELECT max(e.block_number) AS m FROM notifications n JOIN events e ON e.id = n.event_id',
  );
  return { events: Number(e.rows[0]?.m ?? -1), notifications: Number(n.rows[0]?.m ?? -1) };
}

/** The events `watches` must have for the transfers of blocks ≤ `upTo`, as sorted eventKeys. */
export function want(
  transfers: readonly Transfer[],
  watches: readonly TestWatch[],
  upTo: number,
): string[] {
  return expectedEvents(
    transfers.filter((t) => t.blockNumber <= upTo),
    watches,
  )
    .map(eventKey)
    .sort();
}

/**
 * Block `json` (java-tron's JSON, block number `n`) with its header re-signed by `privateKey`
 * (secp256k1, 32 bytes), or with a signature of no one's (65 bytes) without it: the header, so the
 * block id, unchanged (verify.ts accepts the id; the light client judges the signature).
 */
export function resignedJson(json: string, n: number, privateKey: Uint8Array | undefined): string {
  const b = JSON.parse(json) as BlockJson;
  const raw = b.block_header?.raw_data as Record<string, unknown>;
  (b.block_header as { witness_signature: string }).witness_signature = privateKey
    ? Buffer.from(signWitnessHeader(encodeHeaderRaw(raw, n), privateKey)).toString('hex')
    : `${'11'.repeat(64)}00`; // not a signature of anyone's
  return JSON.stringify(b);
}

/**
 * Block `n` of another branch of synthetic chain `o`, on `parentId`, at `timestamp` (epoch ms),
 * signed by the devnet SR of that slot (DEVNET_SRS[(timestamp / 3000) mod 27]: a real fork, every
 * check passes), carrying the transactions of synthetic block `txsOf` (a height the node never
 * serves, so its transfers are the fork's alone) with their receipts re-dated to this block.
 * `producer`: named and signing instead of that SR (an account outside the set, for lies).
 * Serve it with ReplayNode.setLies({ blocks }) (`block`, `infos`: the node's JSON answers).
 * @returns its blockID (64 hex), the two answers, and the transfers it carries.
 */
export function signedForkBlock(
  o: SyntheticChainOptions,
  n: number,
  parentId: string,
  timestamp: number,
  txsOf: number,
  producer?: { address: string; privateKey: Uint8Array },
): { id: string; block: string; infos: string; transfers: Transfer[] } {
  const src = syntheticBlock(o, txsOf);
  const sr = producer ?? DEVNET_SRS[Math.floor(timestamp / 3000) % 27];
  if (!sr) throw new Error('no SR');
  const h = signedHeader({
    number: n,
    timestamp,
    parentId,
    witness: sr.address,
    privateKey: sr.privateKey,
    txTrieRoot: String(src.block.block_header?.raw_data?.txTrieRoot),
  });
  const block: BlockJson = { ...blockJsonOf(h), transactions: src.block.transactions ?? [] };
  const infos = src.infos.map((i) => ({ ...i, blockNumber: n, blockTimeStamp: timestamp }));
  return {
    id: h.id,
    block: JSON.stringify(block),
    infos: JSON.stringify(infos),
    transfers: src.transfers,
  };
}
