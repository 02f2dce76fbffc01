/**
 * A synthetic chain (src/devnet/synthetic.ts: its transactions, receipts and transfers) whose
 * headers are produced by a SignedChain (sr-chain.ts), so that ingest tests can run the light
 * client through what the plain synthetic chain cannot express: a maintenance that changes the SR
 * set (newcomers, a new order, the 2 skipped slots), and SR signing-key rotations carried by a
 * real type-46 transaction in a block.
 *
 * Block n keeps synthetic block n's transactions and infos (so its transfers, and the events they
 * should give, are the generator's ground truth) and its time; its header is rebuilt: parentHash
 * the block before in this chain, witness the SR the schedule in force names, txTrieRoot over its
 * transactions (java-tron `BlockCapsule.calcMerkleRoot`, verify.ts merkleRoot), signed by that
 * SR's current key. Before any maintenance or rotation the headers are the synthetic chain's own
 * (same SRs, same roots, same ids). Served by a replay node from a memorySource.
 */
import { createHash } from 'node:crypto';
import { memorySource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import {
  DEVNET_SRS,
  type DevnetSr,
  type SyntheticChainOptions,
  syntheticBlock,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import type { SignedHeader } from '../../src/tron/light-client/header.js';
import { type Checkpoint, MAINTENANCE_INTERVAL_MS } from '../../src/tron/light-client/sr-set.js';
import { signWitnessHeader } from '../../src/tron/light-client/witness-signature.js';
import { PbWriter } from '../../src/tron/protobuf.js';
import type {
  BlockJson,
  TransactionInfoJson,
  TransactionJson,
  Transfer,
} from '../../src/tron/types.js';
import { encodeTransactionFromJson, merkleRoot } from '../../src/tron/verify.js';
import { blockJsonOf, SignedChain, testCheckpoint } from './sr-chain.js';

/** A signing-key change: in block `block`, SR `owner` sets its witness key to `to`'s. */
export interface PlannedRotation {
  block: number;
  /** The SR account (42 hex) whose witness permission changes. */
  owner: string;
  /** The new key (its signingKey and privateKey; its address is not used). */
  to: DevnetSr;
}

/** Options of srSyntheticChain. */
export interface SrSyntheticOptions {
  chain: SyntheticChainOptions & { count: number };
  /**
   * The maintenance block: the checkpoint's nextMaintenanceTime is its time, and its child starts
   * the schedule `nextOrder` (skipping 2 slots). Default none (the set never changes).
   */
  maintenanceBlock?: number;
  /** The active SRs in schedule order after the maintenance (27). Default DEVNET_SRS. */
  nextOrder?: readonly DevnetSr[];
  /** Key rotations (type-46 transactions by the owner, appended to their block). Default none. */
  rotations?: readonly PlannedRotation[];
}

/** A chain made by srSyntheticChain. */
export interface SrSyntheticChain {
  first: number;
  last: number;
  /** The checkpoint at the block before `first` (DEVNET_SRS, the planned maintenance time). */
  checkpoint: Checkpoint;
  /** The node's answers per block: getblockbynum JSON and gettransactioninfobyblocknum JSON. */
  blocks: Map<number, { block: string; infos: string }>;
  /** The signed header of each block. */
  headers: Map<number, SignedHeader>;
  /** The producer (SR account) of each block. */
  producers: Map<number, string>;
  /** Every transfer of the chain, in block order (synthetic ground truth). */
  transfers: Transfer[];
}

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest();

/**
 * An AccountPermissionUpdateContract (type 46) value as java-tron accepts it for an SR
 * (AccountPermissionUpdateActuator.validate): `owner`'s Owner permission (its own address, weight
 * 1, threshold 1), one Active permission (32 bytes of operations), and a Witness permission of one
 * key, `key`. `mutate` may change the three permissions' bytes (tests of refused contracts).
 * Protocol: contract {owner_address 1, owner 2, witness 3, actives 4: Permission {type 1, id 2,
 * permission_name 3, threshold 4, parent_id 5, operations 6, keys 7: Key {address 1, weight 2}}}.
 */
export function accountPermissionUpdateValue(
  owner: string,
  key: string,
  mutate: {
    owner?: (w: PbWriter) => PbWriter;
    witness?: (w: PbWriter) => PbWriter;
    actives?: number;
    witnessKeys?: string[];
  } = {},
): Uint8Array {
  const keyOf = (a: string) => new PbWriter().bytes(1, Buffer.from(a, 'hex')).varint(2, 1).finish();
  const ownerW = new PbWriter().bytes(3, Buffer.from('owner')).varint(4, 1);
  const ownerP = (mutate.owner ? mutate.owner(ownerW) : ownerW).bytes(7, keyOf(owner)).finish();
  let witnessW = new PbWriter()
    .varint(1, 1)
    .varint(2, 1)
    .bytes(3, Buffer.from('witness'))
    .varint(4, 1);
  witnessW = mutate.witness ? mutate.witness(witnessW) : witnessW;
  for (const k of mutate.witnessKeys ?? [key]) witnessW.bytes(7, keyOf(k));
  const witnessP = witnessW.finish();
  const active = new PbWriter()
    .varint(1, 2)
    .varint(2, 2)
    .bytes(3, Buffer.from('active'))
    .varint(4, 1)
    .bytes(6, Buffer.alloc(32, 0xff))
    .bytes(7, keyOf(owner))
    .finish();
  const value = new PbWriter()
    .bytes(1, Buffer.from(owner, 'hex'))
    .bytes(2, ownerP)
    .bytes(3, witnessP);
  for (let i = 0; i < (mutate.actives ?? 1); i++) value.bytes(4, active);
  return value.finish();
}

/**
 * A `Transaction.raw` with one AccountPermissionUpdateContract (type 46) setting `owner`'s witness
 * permission to one key (accountPermissionUpdateValue; raw {contract 11 {type 1, parameter 2: Any
 * {type_url 1, value 2}}, timestamp 14}).
 * @param value the contract's bytes. Default: accountPermissionUpdateValue(owner, key).
 */
export function accountPermissionUpdateRaw(
  owner: string,
  key: string,
  timestamp?: number,
  value: Uint8Array = accountPermissionUpdateValue(owner, key),
): Uint8Array {
  const any = new PbWriter()
    .bytes(1, Buffer.from('type.googleapis.com/protocol.AccountPermissionUpdateContract'))
    .bytes(2, value)
    .finish();
  const contract = new PbWriter().varint(1, 46).bytes(2, any).finish();
  const raw = new PbWriter().bytes(11, contract);
  if (timestamp !== undefined) raw.varint(14, timestamp);
  return raw.finish();
}

/**
 * A successful type-46 transaction by `owner` (signed with `ownerKey`) giving it witness key
 * `key`, as java-tron's JSON (visible=false), and its transaction info in `block` at `timestamp`.
 */
export function rotationTransaction(
  owner: string,
  ownerKey: Uint8Array,
  key: string,
  block: number,
  timestamp: number,
): { tx: TransactionJson; info: TransactionInfoJson } {
  const raw = accountPermissionUpdateRaw(owner, key, timestamp);
  const txID = sha256(raw).toString('hex');
  const tx: TransactionJson = {
    ret: [{ contractRet: 'SUCCESS' }],
    signature: [Buffer.from(signWitnessHeader(raw, ownerKey)).toString('hex')],
    txID,
    raw_data: {
      contract: [
        {
          parameter: {
            value: {
              owner_address: owner,
              witness: {
                type: 'Witness',
                permission_name: 'witness',
                threshold: 1,
                keys: [{ address: key, weight: 1 }],
              },
            },
            type_url: 'type.googleapis.com/protocol.AccountPermissionUpdateContract',
          },
          type: 'AccountPermissionUpdateContract',
        },
      ] as unknown as NonNullable<TransactionJson['raw_data']>['contract'],
      timestamp,
    },
    raw_data_hex: Buffer.from(raw).toString('hex'),
  };
  const info: TransactionInfoJson = {
    id: txID,
    fee: 100_000_000,
    blockNumber: block,
    blockTimeStamp: timestamp,
    contractResult: [''],
    receipt: { net_fee: 100_000 },
  } as TransactionInfoJson;
  return { tx, info };
}

/** Replace `owner`'s key in an order (a rotation). */
function rotated(order: readonly DevnetSr[], r: PlannedRotation): DevnetSr[] {
  return order.map((s) =>
    s.address === r.owner
      ? { address: s.address, signingKey: r.to.signingKey, privateKey: r.to.privateKey }
      : s,
  );
}

/**
 * Build the chain (see the module doc): blocks `chain.firstBlock` … `+ count − 1`.
 * @throws Error when a planned rotation's owner is not in the schedule.
 */
export function srSyntheticChain(o: SrSyntheticOptions): SrSyntheticChain {
  const opts: SyntheticChainOptions = { ...o.chain };
  const first = o.chain.firstBlock ?? 70_000_000;
  const last = first + o.chain.count - 1;
  const base = syntheticCheckpoint(opts).block;
  const maintenanceTime =
    o.maintenanceBlock === undefined
      ? base.timestamp + MAINTENANCE_INTERVAL_MS - 3000 * 1000
      : base.timestamp + (o.maintenanceBlock - base.number) * 3000;
  const checkpoint = testCheckpoint(base, DEVNET_SRS, maintenanceTime, MAINTENANCE_INTERVAL_MS);
  const signer = new SignedChain(
    base,
    [...DEVNET_SRS],
    maintenanceTime,
    [...(o.nextOrder ?? DEVNET_SRS)],
    MAINTENANCE_INTERVAL_MS,
  );
  const blocks = new Map<number, { block: string; infos: string }>();
  const headers = new Map<number, SignedHeader>();
  const producers = new Map<number, string>();
  const transfers: Transfer[] = [];
  for (let n = first; n <= last; n++) {
    const sb = syntheticBlock(opts, n);
    const ts = Number(sb.block.block_header?.raw_data?.timestamp);
    const txs = [...(sb.block.transactions ?? [])];
    const infos = [...sb.infos];
    const here = (o.rotations ?? []).filter((r) => r.block === n);
    for (const r of here) {
      const owner = [...signer.order, ...signer.nextOrder].find((s) => s.address === r.owner);
      if (!owner?.privateKey) {
        throw new Error(`rotation in block ${n}: ${r.owner} is not an SR with a key here`);
      }
      const made = rotationTransaction(r.owner, owner.privateKey, r.to.signingKey, n, ts);
      txs.push(made.tx);
      infos.push(made.info);
    }
    const leaves = txs.map((tx) => {
      const bytes = encodeTransactionFromJson(tx);
      if (!bytes) throw new Error(`block ${n}: a transaction cannot be encoded`);
      return sha256(bytes);
    });
    const h = signer.next(undefined, {}, merkleRoot(leaves));
    if (h.timestamp !== ts) throw new Error(`block ${n}: produced at ${h.timestamp}, not ${ts}`);
    const json: BlockJson = blockJsonOf(h);
    if (txs.length > 0) json.transactions = txs;
    blocks.set(n, { block: JSON.stringify(json), infos: JSON.stringify(infos) });
    headers.set(n, h);
    producers.set(n, h.witness);
    transfers.push(...sb.transfers);
    // A rotation applies from the next block on (sr-set.ts, finality.ts rule 6).
    for (const r of here) {
      signer.order = rotated(signer.order as DevnetSr[], r);
      signer.nextOrder = rotated(signer.nextOrder as DevnetSr[], r);
    }
  }
  return { first, last, checkpoint, blocks, headers, producers, transfers };
}

/**
 * srSyntheticChain served by a replay node, solidified to its last block, with gRPC (its exact
 * bytes encoded from the JSON, which holds every byte of these blocks); lag 0: its full-node
 * head, up to which ingest reads with the light client on, is its last block too.
 */
export async function serveSrSynthetic(
  o: SrSyntheticOptions,
): Promise<SrSyntheticChain & { node: ReplayNode }> {
  const c = srSyntheticChain(o);
  const node = await startReplayNode({
    instant: true,
    lag: 0,
    grpc: true,
    source: memorySource(c.blocks),
  });
  return { ...c, node };
}
