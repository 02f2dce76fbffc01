/**
 * Block verification: check a solidified block and its transaction infos against themselves
 * before anything in them is trusted, so that no single wrong answer (a lying or broken node, a
 * proxy in the middle, a provider backend on another fork) can produce a false deposit. What is
 * checked, and where java-tron defines it:
 *
 * 1. `blockID` = the block number as 8 big-endian bytes, then bytes 8–31 of SHA-256 of the
 *    protobuf encoding of the header's `raw_data` (java-tron `BlockCapsule.getBlockId()`:
 *    `new BlockId(Sha256Hash.of(blockHeader.getRawData().toByteArray()), number)`; `BlockId`
 *    overwrites the first 8 bytes of the hash with the number). The header is re-encoded from its
 *    JSON fields (protocol `BlockHeader.raw`: timestamp 1, txTrieRoot 2, parentHash 3, number 7,
 *    witness_id 8, witness_address 9, version 10, accountStateRoot 11).
 * 2. Every transaction: `txID` = SHA-256 of its `raw_data_hex` bytes (`TransactionCapsule
 *    .getTransactionId()`: `Sha256Hash.of(transaction.getRawData().toByteArray())`), and the
 *    fields matching reads (contract type; for TransferContract owner, recipient and amount; for
 *    TriggerSmartContract owner, contract address and call data) equal what those signed bytes
 *    say (protocol `Transaction.raw.contract` 11 → `Contract` {type 1, parameter 2: Any
 *    {type_url 1, value 2}}; `TransferContract` {owner_address 1, to_address 2, amount 3};
 *    `TriggerSmartContract` {owner_address 1, contract_address 2, call_value 3, data 4}).
 * 3. The transaction infos: exactly one per transaction (same ids, none twice), each of this
 *    block number and timestamp; logs only on transactions that run contract code
 *    (TriggerSmartContract, CreateSmartContract: nothing else enters the TVM); and a direct call of
 *    USDT's `transfer(to, amount)` (selector a9059cbb) or `transferFrom(from, to, amount)`
 *    (23b872dd) that succeeded has exactly one log: the USDT Transfer of the signed amount from
 *    the paying address to the signed recipient (the token's fee, if ever switched on, would add
 *    a second log to the token's owner: refused, see checkDirectUsdtCall); `approve` exactly one
 *    Approval; any other selector or short call data no USDT Transfer log.
 * 4. `txTrieRoot` = java-tron's Merkle root over SHA-256 of each transaction's WHOLE protobuf
 *    bytes (`BlockCapsule.calcMerkleRoot()`, `TransactionCapsule.getMerkleHash()`,
 *    `MerkleTree.createTree`: leaves paired left to right, parent = SHA-256(left ‖ right), an odd
 *    node carried up unchanged, no transactions = 32 zero bytes). The JSON does not always carry
 *    those bytes: `ret` may hold fields the JSON does not print (mainnet block 79072107's
 *    transaction 6e27bfe4… has a field 1002 there), so a root re-encoded from JSON can differ for
 *    a genuine block. With exact bytes (java-tron's gRPC `GetBlockByNum2`, tron/grpc.ts) the root
 *    is checked from them, after checking that they hold the same transactions as the JSON; from
 *    JSON alone a match proves the list, and a mismatch is reported as unverifiable (never a
 *    refusal: a genuine block must pass), which the node group answers with a second provider's
 *    agreement when it has one (tron/node-group.ts).
 *
 * The parent check (the block's `parentHash` = the `blockID` the cursor holds for the block
 * before) needs the cursor and lives in ingest/commit.ts; the quorum of providers in
 * tron/node-group.ts compares `fingerprint`s.
 *
 * What no single answer can prove, and the quorum must: transfer logs of calls to other contracts
 * (a DEX swap's USDT leg is only in the receipt, which is not hashed into the header); a whole
 * self-consistent block of another fork (its header is re-signed by whoever forged it: the SR
 * set is chain state this service does not track).
 */
import { createHash, hash } from 'node:crypto';
import { USDT_CONTRACT_HEX } from './address.js';
import { extractTransfers, MalformedBlockError, TRANSFER_TOPIC } from './extract.js';
import { toBigInt } from './json.js';
import { PbDecodeError, PbWriter, pbBytes, pbBytesAll, pbFields } from './protobuf.js';
import type {
  BlockJson,
  LogJson,
  TransactionInfoJson,
  TransactionJson,
  Transfer,
} from './types.js';

/** What a failed check was about (metrics label, log field). */
export type BlockCheck =
  | 'header'
  | 'block_id'
  | 'tx_id'
  | 'tx_fields'
  | 'receipts'
  | 'transfer_log'
  | 'tx_root'
  | 'exact_bytes'
  | 'parent'
  | 'checkpoint';

/**
 * A block or its transaction infos failed a check: the answer is wrong (forged, corrupted, or of
 * another fork). Never retried as is (`retryable` false): the ingester stalls on the block and
 * asks again, other providers first.
 */
export class BlockCheckError extends Error {
  readonly retryable = false;
  constructor(
    readonly check: BlockCheck,
    readonly blockNumber: number,
    detail: string,
  ) {
    super(`block ${blockNumber} failed verification (${check}): ${detail}`);
    this.name = 'BlockCheckError';
  }
}

/** How the transaction list was proved to be the one the header commits to. */
export type RootStatus = 'exact' | 'json' | 'unverifiable';

/** What verification established about a block. */
export interface VerifiedBlock {
  /** blockID, lowercase hex (checked). */
  id: string;
  /** The header's parentHash, lowercase hex (checked by the caller against the cursor). */
  parentHash: string;
  /** How txTrieRoot was checked (see the module doc, item 4). */
  root: RootStatus;
  /**
   * SHA-256 (hex) of a canonical, length-prefixed encoding of the blockID, parentHash,
   * timestamp and the extracted transfers (transfersFingerprint). Providers that agree on a
   * block agree on this, and then on its events.
   */
  fingerprint: string;
  /**
   * The block's transfers, extracted from this verified answer, lower-case ids; `proof` is
   * `signed` where signed bytes under a proven root imply them, else `provider` (the node group
   * raises it to `quorum` when k ≥ 2 providers agreed).
   */
  transfers: Transfer[];
}

/** A block as java-tron's gRPC sends it: the header's raw bytes and each transaction's bytes. */
export interface ExactBlock {
  /** `BlockHeader.raw` bytes (what the blockID hashes). */
  headerRaw: Uint8Array;
  /** Each `Transaction`'s whole bytes, block order (what the Merkle leaves hash). */
  transactions: Uint8Array[];
}

const ZERO_ROOT = '0'.repeat(64);
const HEX = /^(?:[0-9a-fA-F]{2})*$/;
/** protocol `Transaction.Contract.ContractType`: the two types matching reads. */
const TRANSFER_CONTRACT = 1;
const CREATE_SMART_CONTRACT = 30;
const TRIGGER_SMART_CONTRACT = 31;
const SEL_TRANSFER = 'a9059cbb';
const SEL_TRANSFER_FROM = '23b872dd';
const SEL_APPROVE = '095ea7b3';

/**
 * protocol `Transaction.Result.contractResult`, by the name java-tron's JSON prints (its enum
 * order in Tron.proto).
 */
export const CONTRACT_RESULT: Readonly<Record<string, number>> = {
  DEFAULT: 0,
  SUCCESS: 1,
  REVERT: 2,
  BAD_JUMP_DESTINATION: 3,
  OUT_OF_MEMORY: 4,
  PRECOMPILED_CONTRACT: 5,
  STACK_TOO_SMALL: 6,
  STACK_TOO_LARGE: 7,
  ILLEGAL_OPERATION: 8,
  STACK_OVERFLOW: 9,
  OUT_OF_ENERGY: 10,
  OUT_OF_TIME: 11,
  JVM_STACK_OVER_FLOW: 12,
  UNKNOWN: 13,
  TRANSFER_FAILED: 14,
  INVALID_CODE: 15,
};
const CONTRACT_RESULT_NAME = new Map(Object.entries(CONTRACT_RESULT).map(([k, v]) => [v, k]));

/**
 * SHA-256 of `data`, written into `out` at `at` (32 bytes). A block needs about three hashes per
 * transaction (its id, its Merkle leaf, a Merkle parent), each of a few hundred bytes at most, so
 * the per-call cost is what counts: node:crypto's one-shot `hash` with a string result, written
 * back as 'binary' (latin1: one character per byte), costs about a quarter of a call returning a Buffer,
 * and createHash or @noble/hashes' pure-JS compression cost more still (measured with
 * bench/scan.ts on block 79072107).
 */
function sha256Into(data: Uint8Array, out: Buffer, at: number): void {
  out.write(hash('sha256', data, 'binary'), at, 32, 'binary');
}

function hexBytes(v: unknown, what: string, block: number): Buffer {
  if (typeof v !== 'string' || !HEX.test(v)) {
    throw new BlockCheckError('header', block, `${what} is not hex`);
  }
  return Buffer.from(v, 'hex');
}

const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/**
 * A protobuf int64 field from JSON (absent = 0, its default).
 * @throws RangeError outside int64 (a value + 2^64 would encode to the same bytes); TypeError
 *   when it is not an integer.
 */
function int64(v: unknown): bigint {
  if (v === undefined) return 0n;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  const x = toBigInt(v);
  if (x < INT64_MIN || x > INT64_MAX) throw new RangeError(`${x} is outside int64`);
  return x;
}

/**
 * A header integer that must be a non-negative safe integer (number, timestamp in ms).
 * @throws BlockCheckError('header').
 */
function headerUint(raw: Record<string, unknown>, key: string, block: number): bigint {
  let x: bigint;
  try {
    x = int64(raw[key]);
  } catch (err) {
    throw new BlockCheckError('header', block, `${key}: ${(err as Error).message}`);
  }
  if (x < 0n || x > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new BlockCheckError('header', block, `${key} ${x} is out of range`);
  }
  return x;
}

/**
 * The protobuf bytes of a header's `raw_data` (protocol `BlockHeader.raw`), re-encoded from its
 * JSON fields in field-number order.
 * @throws BlockCheckError('header') on a field this encoder does not know (a newer java-tron:
 *   refusing is safer than hashing a guess) or a malformed value.
 */
export function encodeHeaderRaw(raw: Record<string, unknown>, block: number): Uint8Array {
  const known = new Set([
    'timestamp',
    'txTrieRoot',
    'parentHash',
    'number',
    'witness_id',
    'witness_address',
    'version',
    'accountStateRoot',
  ]);
  for (const k of Object.keys(raw)) {
    if (!known.has(k)) throw new BlockCheckError('header', block, `unknown header field ${k}`);
  }
  try {
    return new PbWriter()
      .varint(1, int64(raw.timestamp))
      .bytes(2, hexBytes(raw.txTrieRoot ?? '', 'txTrieRoot', block))
      .bytes(3, hexBytes(raw.parentHash ?? '', 'parentHash', block))
      .varint(7, int64(raw.number))
      .varint(8, int64(raw.witness_id))
      .bytes(9, hexBytes(raw.witness_address ?? '', 'witness_address', block))
      .varint(10, int64(raw.version))
      .bytes(11, hexBytes(raw.accountStateRoot ?? '', 'accountStateRoot', block))
      .finish();
  } catch (err) {
    if (err instanceof BlockCheckError) throw err;
    throw new BlockCheckError('header', block, `malformed header: ${(err as Error).message}`);
  }
}

/**
 * A blockID from the header's raw bytes: 8-byte big-endian number ‖ SHA-256(raw)[8..32], hex.
 */
export function blockIdFromRaw(number: bigint, headerRaw: Uint8Array): string {
  return (
    BigInt.asUintN(64, number).toString(16).padStart(16, '0') +
    hash('sha256', headerRaw, 'hex').slice(16)
  );
}

/**
 * java-tron's Merkle root over `leaves` (32-byte hashes): pairs hashed left to right, an odd
 * node carried up unchanged; no leaves = 32 zero bytes. Hex.
 */
export function merkleRoot(leaves: readonly Uint8Array[]): string {
  const level = Buffer.allocUnsafe(leaves.length * 32);
  for (let i = 0; i < leaves.length; i++) {
    const leaf = leaves[i] as Uint8Array;
    if (leaf.length !== 32)
      throw new RangeError(`Merkle leaf ${i} is ${leaf.length} bytes, not 32`);
    level.set(leaf, i * 32);
  }
  return merkleRootInPlace(level, leaves.length);
}

/**
 * merkleRoot over `count` leaves laid end to end in `level` (32 bytes each), computed in place
 * (`level` is overwritten): a pair is hashed straight from the buffer, its parent written over
 * the left half of the level, so a block's tree costs one hash call per parent and no copies.
 */
function merkleRootInPlace(level: Buffer, count: number): string {
  if (count === 0) return ZERO_ROOT;
  let n = count;
  while (n > 1) {
    const half = n >> 1;
    // Parent i is written at 32·i, after pair i (64·i … 64·i + 64) was read: never ahead of a read.
    for (let i = 0; i < half; i++) {
      sha256Into(new Uint8Array(level.buffer, level.byteOffset + 64 * i, 64), level, 32 * i);
    }
    if (n & 1) level.copyWithin(32 * half, 32 * (n - 1), 32 * n); // odd node carried up
    n = half + (n & 1);
  }
  return level.toString('hex', 0, 32);
}

const RESULT_INTS: ReadonlyArray<readonly [string, number]> = [
  ['withdraw_amount', 15],
  ['unfreeze_amount', 16],
  ['exchange_received_amount', 18],
  ['exchange_inject_another_amount', 19],
  ['exchange_withdraw_another_amount', 20],
  ['exchange_id', 21],
  ['shielded_transaction_fee', 22],
];
const RESULT_KNOWN: ReadonlySet<string> = new Set([
  'fee',
  'ret',
  'contractRet',
  'assetIssueID',
  'orderId',
  'withdraw_expire_amount',
  'cancel_unfreezeV2_amount',
  ...RESULT_INTS.map(([k]) => k),
]);
const EMPTY = new Uint8Array(0);
/** `Transaction.Result` holding only contractRet = code (field 3, varint; every code is < 128). */
const RESULT_ONLY: readonly Uint8Array[] = Array.from({ length: 16 }, (_, code) =>
  Uint8Array.of(0x18, code),
);

/**
 * The protobuf bytes of one `Transaction.Result` from java-tron's JSON, or undefined when the
 * JSON holds a key this encoder does not know (the root is then unverifiable from JSON).
 * Fields (protocol Tron.proto `Transaction.Result`): fee 1, ret 2 (code: SUCESS 0, FAILED 1),
 * contractRet 3, assetIssueID 14, withdraw_amount 15, unfreeze_amount 16,
 * exchange_received_amount 18, exchange_inject_another_amount 19,
 * exchange_withdraw_another_amount 20, exchange_id 21, shielded_transaction_fee 22, orderId 25,
 * withdraw_expire_amount 27, cancel_unfreezeV2_amount 28 (map<string, int64>).
 */
function encodeResult(r: Record<string, unknown>): Uint8Array | undefined {
  const keys = Object.keys(r);
  // The common form on mainnet, `{"contractRet": "SUCCESS"}`: field 3 alone (or nothing for 0).
  if (keys.length === 1 && keys[0] === 'contractRet') {
    const code = typeof r.contractRet === 'string' ? CONTRACT_RESULT[r.contractRet] : undefined;
    if (code === undefined) return undefined;
    return code === 0 ? EMPTY : RESULT_ONLY[code];
  }
  for (const k of keys) if (!RESULT_KNOWN.has(k)) return undefined;
  const ints = RESULT_INTS;
  const w = new PbWriter();
  try {
    w.varint(1, int64(r.fee));
    if (r.ret !== undefined) {
      if (r.ret !== 'SUCESS' && r.ret !== 'FAILED') return undefined;
      w.varint(2, r.ret === 'FAILED' ? 1 : 0);
    }
    if (r.contractRet !== undefined) {
      const code = typeof r.contractRet === 'string' ? CONTRACT_RESULT[r.contractRet] : undefined;
      if (code === undefined) return undefined;
      w.varint(3, code);
    }
    if (r.assetIssueID !== undefined) {
      if (typeof r.assetIssueID !== 'string') return undefined;
      w.bytes(14, Buffer.from(r.assetIssueID, 'utf8'));
    }
    for (const [k, no] of ints) w.varint(no, int64(r[k]));
    if (r.orderId !== undefined) {
      if (typeof r.orderId !== 'string' || !HEX.test(r.orderId)) return undefined;
      w.bytes(25, Buffer.from(r.orderId, 'hex'));
    }
    w.varint(27, int64(r.withdraw_expire_amount));
    const m = r.cancel_unfreezeV2_amount;
    if (m !== undefined) {
      if (!m || typeof m !== 'object') return undefined;
      for (const [key, value] of Object.entries(m as Record<string, unknown>)) {
        const entry = new PbWriter()
          .bytes(1, Buffer.from(key, 'utf8'))
          .varint(2, int64(value))
          .finish();
        w.bytes(28, entry, true);
      }
    }
  } catch {
    return undefined;
  }
  return w.finish();
}

/**
 * A transaction's whole protobuf bytes (protocol `Transaction`: raw_data 1, signature 2, ret 5)
 * from its JSON: the exact `raw_data_hex`, the signatures, `ret` re-encoded. Undefined when `ret`
 * cannot be re-encoded (see encodeResult).
 */
export function encodeTransactionFromJson(tx: TransactionJson): Uint8Array | undefined {
  const w = new PbWriter().bytes(1, Buffer.from(tx.raw_data_hex ?? '', 'hex'));
  for (const s of tx.signature ?? []) {
    if (typeof s !== 'string' || !HEX.test(s)) return undefined;
    w.bytes(2, Buffer.from(s, 'hex'), true);
  }
  for (const r of tx.ret ?? []) {
    const b = encodeResult((r ?? {}) as Record<string, unknown>);
    if (!b) return undefined;
    w.bytes(5, b, true);
  }
  return w.finish();
}

/** The fields of one contract that matching reads, as the signed bytes say. */
interface SignedContract {
  /** protocol `Transaction.Contract.ContractType`. */
  type: number;
  owner: string;
  /** TransferContract: to_address; TriggerSmartContract: contract_address. */
  target: string;
  /** TransferContract: amount. */
  amount: bigint;
  /** TriggerSmartContract: call data, lowercase hex. */
  data: string;
}

/** One transaction's signed `raw_data`, decoded once and checked (checkTransaction). */
interface SignedTransaction {
  /** The `raw_data` bytes (what the txID hashes). */
  raw: Buffer;
  contracts: SignedContract[];
}

/*
 * A schema-less protobuf reader for the few messages verification reads, on ranges of one buffer
 * (no subarray, no object per field): the same wire rules as protobuf.ts's pbFields (truncation,
 * groups, unknown wire types and field 0 are refused; every field of a message is read, so a
 * malformed tail is refused too), the same "last occurrence wins" for singular fields.
 * `readMessage` records, for fields 1–15, the last length-delimited range and the last varint;
 * `repeated` collects every length-delimited range of one field.
 */
const MAX_FIELD = 16;
/** Start and end of the last length-delimited occurrence of each field (-1 when none). */
const lenStart = new Int32Array(MAX_FIELD);
const lenEnd = new Int32Array(MAX_FIELD);
/** Position of the last varint occurrence of each field (-1 when none). */
const varPos = new Int32Array(MAX_FIELD);
/** Position after the last varint read (readVarintNumber's second result). */
let after = 0;

/**
 * A varint at `pos` (before `end`) as a number: exact up to 2^53, which covers every tag, length,
 * enum and block number; longer values are rounded (only ever compared against small enums).
 * @throws PbDecodeError when it runs past `end` or past 10 bytes.
 */
function readVarintNumber(buf: Uint8Array, pos: number, end: number): number {
  let x = 0;
  let mul = 1;
  for (let i = 0; i < 10; i++) {
    if (pos + i >= end) throw new PbDecodeError('varint runs past the end');
    const b = buf[pos + i] as number;
    x += (b & 0x7f) * mul;
    if (b < 0x80) {
      after = pos + i + 1;
      return x;
    }
    mul *= 128;
  }
  throw new PbDecodeError('varint longer than 10 bytes');
}

/** The varint at `pos` as a uint64 bigint (the caller read it once already: it is well formed). */
function readVarintBig(buf: Uint8Array, pos: number): bigint {
  let result = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    const b = buf[pos + i] as number;
    result |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) break;
    shift += 7n;
  }
  return BigInt.asUintN(64, result);
}

/**
 * Read every field of the message in `buf[start, end)`, recording fields 1–15 (see above) and
 * pushing the [start, end) of each length-delimited occurrence of `repeated` onto `ranges`.
 * @throws PbDecodeError on malformed bytes.
 */
function readMessage(
  buf: Uint8Array,
  start: number,
  end: number,
  repeated = 0,
  ranges?: number[],
): void {
  lenStart.fill(-1);
  varPos.fill(-1);
  let pos = start;
  while (pos < end) {
    const tag = readVarintNumber(buf, pos, end);
    pos = after;
    // Exact for any tag below 2^53; a longer one is refused (field numbers end at 2^29 − 1).
    if (tag > Number.MAX_SAFE_INTEGER) throw new PbDecodeError('tag out of range');
    const field = Math.floor(tag / 8);
    const wire = tag % 8;
    if (field === 0) throw new PbDecodeError('field number 0');
    if (wire === 0) {
      if (field < MAX_FIELD) varPos[field] = pos;
      readVarintNumber(buf, pos, end);
      pos = after;
    } else if (wire === 2) {
      const len = readVarintNumber(buf, pos, end);
      const q = after;
      if (len > end - q) throw new PbDecodeError(`field ${field}: length ${len} runs past the end`);
      if (field < MAX_FIELD) {
        lenStart[field] = q;
        lenEnd[field] = q + len;
      }
      if (field === repeated) ranges?.push(q, q + len);
      pos = q + len;
    } else if (wire === 1 || wire === 5) {
      pos += wire === 1 ? 8 : 4;
      if (pos > end) throw new PbDecodeError(`field ${field}: fixed value runs past the end`);
    } else {
      throw new PbDecodeError(`field ${field}: wire type ${wire} is not supported`);
    }
  }
}

/** The last varint of `field` read by readMessage as a number, 0 (proto3 default) when absent. */
function varintOf(buf: Uint8Array, field: number): number {
  const p = varPos[field] as number;
  return p < 0 ? 0 : readVarintNumber(buf, p, buf.length);
}

/**
 * The lower-case hex of the last length-delimited `field` readMessage recorded in `raw`: only
 * the field's own bytes are hex-encoded (never the whole message's hex lower-cased for it).
 */
function fieldHex(raw: Buffer, field: number): string {
  const start = lenStart[field] as number;
  return start < 0 ? '' : raw.toString('hex', start, lenEnd[field] as number);
}

/**
 * The contracts of a `Transaction.raw` (`raw`), their fields as lower-case hex of the signed bytes.
 * @throws PbDecodeError on malformed bytes.
 */
function signedContracts(raw: Buffer): SignedContract[] {
  const ranges: number[] = [];
  readMessage(raw, 0, raw.length, 11, ranges);
  const out: SignedContract[] = [];
  for (let c = 0; c < ranges.length; c += 2) {
    readMessage(raw, ranges[c] as number, ranges[c + 1] as number); // Contract
    const type = varintOf(raw, 1);
    const anyStart = lenStart[2] as number;
    let vs = -1;
    let ve = -1;
    if (anyStart >= 0) {
      readMessage(raw, anyStart, lenEnd[2] as number); // Any
      vs = lenStart[2] as number;
      ve = lenEnd[2] as number;
    }
    if (vs >= 0) {
      readMessage(raw, vs, ve); // the contract's own message
    } else {
      lenStart.fill(-1);
      varPos.fill(-1);
    }
    if (type === TRANSFER_CONTRACT) {
      const ap = varPos[3] as number;
      out.push({
        type,
        owner: fieldHex(raw, 1),
        target: fieldHex(raw, 2),
        amount: ap < 0 ? 0n : BigInt.asIntN(64, readVarintBig(raw, ap)),
        data: '',
      });
    } else if (type === TRIGGER_SMART_CONTRACT) {
      out.push({
        type,
        owner: fieldHex(raw, 1),
        target: fieldHex(raw, 2),
        amount: 0n,
        data: fieldHex(raw, 4),
      });
    } else {
      out.push({ type, owner: '', target: '', amount: 0n, data: '' });
    }
  }
  return out;
}

function lower(v: unknown): string {
  return typeof v === 'string' ? v.toLowerCase() : '';
}

/**
 * Check one transaction's JSON against its signed bytes (module doc, item 2), its raw_data
 * decoded by transactionBytes.
 * @returns its raw_data bytes and its contracts as signed.
 * @throws BlockCheckError('tx_id' | 'tx_fields').
 */
function checkTransaction(
  tx: TransactionJson,
  i: number,
  block: number,
  bytes: TransactionBytes,
): SignedTransaction {
  const at = bytes.rawAt[i] as number;
  if (at < 0) throw new BlockCheckError('tx_id', block, `transaction ${i} has no raw_data_hex`);
  // rawAt ≥ 0: raw_data_hex is a non-empty even-length hex string, written at `at`.
  const raw = bytes.buf.subarray(at, at + ((tx.raw_data_hex as string).length >> 1));
  const id = hash('sha256', raw, 'hex');
  if (lower(tx.txID) !== id) {
    throw new BlockCheckError(
      'tx_id',
      block,
      `transaction ${i}: txID ${String(tx.txID)} is not the SHA-256 of its raw_data (${id})`,
    );
  }
  let signed: SignedContract[];
  try {
    signed = signedContracts(raw);
  } catch (err) {
    if (!(err instanceof PbDecodeError)) throw err;
    throw new BlockCheckError('tx_fields', block, `tx ${id}: raw_data is not protobuf`);
  }
  const json = tx.raw_data?.contract ?? [];
  if (json.length !== signed.length) {
    throw new BlockCheckError(
      'tx_fields',
      block,
      `tx ${id}: ${json.length} contracts in JSON, ${signed.length} signed`,
    );
  }
  for (let c = 0; c < json.length; c++) {
    const j = json[c];
    const s = signed[c] as SignedContract;
    const jType = j?.type;
    const isTransfer = jType === 'TransferContract';
    const isTrigger = jType === 'TriggerSmartContract';
    if (
      isTransfer !== (s.type === TRANSFER_CONTRACT) ||
      isTrigger !== (s.type === TRIGGER_SMART_CONTRACT)
    ) {
      throw new BlockCheckError(
        'tx_fields',
        block,
        `tx ${id}: contract type ${String(jType)} in JSON, type ${s.type} signed`,
      );
    }
    const v = j?.parameter?.value ?? {};
    let same = true;
    if (isTransfer) {
      let amount: bigint;
      try {
        amount = int64(v.amount);
      } catch {
        amount = -1n;
      }
      same =
        lower(v.owner_address) === s.owner &&
        lower(v.to_address) === s.target &&
        amount === s.amount;
    } else if (isTrigger) {
      same =
        lower(v.owner_address) === s.owner &&
        lower(v.contract_address) === s.target &&
        lower(v.data ?? '') === s.data;
    }
    if (!same) {
      throw new BlockCheckError(
        'tx_fields',
        block,
        `tx ${id}: the JSON ${String(jType)} fields differ from the signed raw_data`,
      );
    }
  }
  return { raw, contracts: signed };
}

/** The Transfer and Approval logs a USDT call emitted, as [kind, from20/owner20, to20/spender20, amount]. */
interface UsdtLog {
  kind: 'transfer' | 'approval' | 'other';
  a: string;
  b: string;
  amount: bigint;
}

/** keccak256("Approval(address,address,uint256)"). */
const APPROVAL_TOPIC = '8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925';
const HEX_DATA = /^[0-9a-fA-F]*$/;

function usdtLog(l: LogJson): UsdtLog {
  const t = l.topics ?? [];
  const data = typeof l.data === 'string' && HEX_DATA.test(l.data) ? l.data : '';
  const amount = data === '' ? 0n : BigInt(`0x${data}`);
  const t0 = lower(t[0]);
  const kind =
    t.length === 3 && t0 === TRANSFER_TOPIC
      ? 'transfer'
      : t.length === 3 && t0 === APPROVAL_TOPIC
        ? 'approval'
        : 'other';
  return { kind, a: lower(t[1]).slice(24), b: lower(t[2]).slice(24), amount };
}

/** What a direct call of the USDT contract is, from its signed call data. */
type UsdtCall =
  | { kind: 'transfer'; from: string; to: string; amount: bigint }
  | { kind: 'approve'; owner: string; spender: string; amount: bigint }
  | { kind: 'other' };

/** Argument word `i` (64 hex digits) of call data `data` (hex, after the 4-byte selector). */
function callWord(data: string, i: number): string {
  return data.slice(8 + 64 * i, 8 + 64 * (i + 1));
}

/**
 * Decode a signed call of USDT (TetherToken, compiled with solc 0.4: `onlyPayloadSize` refuses
 * call data shorter than its arguments, and an address argument is the low 20 bytes of its word).
 */
function usdtCall(s: SignedContract): UsdtCall {
  const word = callWord;
  const sel = s.data.slice(0, 8);
  if (sel === SEL_TRANSFER && s.data.length >= 8 + 128) {
    return {
      kind: 'transfer',
      from: s.owner.slice(2),
      to: word(s.data, 0).slice(24),
      amount: BigInt(`0x${word(s.data, 1)}`),
    };
  }
  if (sel === SEL_TRANSFER_FROM && s.data.length >= 8 + 192) {
    return {
      kind: 'transfer',
      from: word(s.data, 0).slice(24),
      to: word(s.data, 1).slice(24),
      amount: BigInt(`0x${word(s.data, 2)}`),
    };
  }
  if (sel === SEL_APPROVE && s.data.length >= 8 + 128) {
    return {
      kind: 'approve',
      owner: s.owner.slice(2),
      spender: word(s.data, 0).slice(24),
      amount: BigInt(`0x${word(s.data, 1)}`),
    };
  }
  return { kind: 'other' };
}

/**
 * A successful direct call of the USDT contract: its logs must be exactly those its selector
 * implies (module doc, item 3). The rule follows the source of TRON's USDT, TetherToken at
 * TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t (published on Tronscan, tronscan.io/#/token20/
 * TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t/code; read in a public copy that links there:
 * github.com/molecula-fi/molecula-public, blockchain/solidity/contracts/test/MockUsdtTron.sol,
 * commit 8556b7e): its StandardTokenWithFees computes fee = min(v × basisPointsRate / 10000,
 * maximumFee), and `transfer(to, v)` and `transferFrom(from, to, v)` emit
 * `Transfer(from, to, v − fee)` and then, when the fee is not 0, `Transfer(from, owner, fee)` to
 * the token's `owner`; `setParams` (owner only) can set basisPointsRate below 20 and maximumFee
 * below 50 USDT, both 0 in the code as deployed; `approve(spender, v)` emits one
 * `Approval(owner, spender, v)`; nothing else in it emits a Transfer. Whether the rate is still 0
 * today, and who `owner` is, are chain state this service does not read (we found no source we
 * could cite for the current values), so only the fee-less form is accepted: a fee log (or any
 * other extra log) is refused, and ingest stalls loudly rather than guess.
 * @throws BlockCheckError('transfer_log').
 */
function checkDirectUsdtCall(
  s: SignedContract,
  info: TransactionInfoJson,
  block: number,
  usdt20: string,
): void {
  const call = usdtCall(s);
  const logs = info.log ?? [];
  const only = logs.length === 1 ? (logs[0] as LogJson) : undefined;
  const onlyLog = only && lower(only.address) === usdt20 ? usdtLog(only) : undefined;
  let why: string | undefined;
  if (call.kind === 'transfer') {
    if (
      onlyLog?.kind !== 'transfer' ||
      onlyLog.a !== call.from ||
      onlyLog.b !== call.to ||
      onlyLog.amount !== call.amount
    ) {
      why = `its logs (${logs.length}) are not the one USDT Transfer of ${call.amount} from 41${call.from} to 41${call.to} the signed call makes`;
    }
  } else if (call.kind === 'approve') {
    if (onlyLog?.kind !== 'approval' || onlyLog.a !== call.owner || onlyLog.b !== call.spender) {
      why = `a signed USDT approve has logs (${logs.length}) other than its one Approval`;
    }
  } else {
    for (const l of logs) {
      if (lower(l.address) === usdt20 && usdtLog(l).kind === 'transfer') {
        why =
          'a USDT Transfer log on a call of USDT that is not transfer or transferFrom (or whose call data is too short)';
        break;
      }
    }
  }
  if (why !== undefined) {
    throw new BlockCheckError('transfer_log', block, `tx ${lower(info.id)}: ${why}`);
  }
}

/** The contractRet the signed (root-bound) `ret` says, 'DEFAULT' when absent. */
function signedRet(tx: TransactionJson | undefined): string {
  return String(tx?.ret?.[0]?.contractRet ?? 'DEFAULT');
}

/**
 * Check the transaction infos against the block (module doc, item 3).
 * @returns the infos in block order.
 * @throws BlockCheckError('receipts' | 'transfer_log').
 */
function checkInfos(
  txs: readonly TransactionJson[],
  signed: readonly SignedTransaction[],
  infos: readonly TransactionInfoJson[],
  block: number,
  timestamp: bigint,
  usdt: string = USDT_CONTRACT_HEX,
): TransactionInfoJson[] {
  if (infos.length !== txs.length) {
    throw new BlockCheckError(
      'receipts',
      block,
      `${infos.length} transaction infos for ${txs.length} transactions`,
    );
  }
  const byId = new Map<string, TransactionInfoJson>();
  for (const info of infos) {
    const id = lower(info?.id);
    if (byId.has(id)) throw new BlockCheckError('receipts', block, `two infos for ${id}`);
    byId.set(id, info);
  }
  const ordered: TransactionInfoJson[] = [];
  for (let i = 0; i < txs.length; i++) {
    const tx = txs[i];
    const id = lower(tx?.txID);
    const info = byId.get(id);
    if (!info) throw new BlockCheckError('receipts', block, `no info for transaction ${id}`);
    let infoBlock: bigint;
    let infoTime: bigint;
    try {
      if (info.blockNumber === undefined || info.blockTimeStamp === undefined) {
        throw new TypeError('blockNumber and blockTimeStamp are required');
      }
      infoBlock = int64(info.blockNumber);
      infoTime = int64(info.blockTimeStamp);
    } catch (err) {
      throw new BlockCheckError('receipts', block, `the info of ${id}: ${(err as Error).message}`);
    }
    if (infoBlock !== BigInt(block)) {
      throw new BlockCheckError('receipts', block, `the info of ${id} names block ${infoBlock}`);
    }
    if (infoTime !== timestamp) {
      throw new BlockCheckError('receipts', block, `the info of ${id} has another block time`);
    }
    const contracts = signed[i]?.contracts ?? [];
    let runsCode = false;
    for (const c of contracts) {
      if (c.type === TRIGGER_SMART_CONTRACT || c.type === CREATE_SMART_CONTRACT) runsCode = true;
    }
    const logCount = info.log?.length ?? 0;
    if (logCount > 0 && !runsCode) {
      throw new BlockCheckError(
        'transfer_log',
        block,
        `tx ${id} runs no contract code but its info has ${logCount} logs`,
      );
    }
    // Success is what the signed ret says (bound by txTrieRoot); the unsigned receipt must agree
    // (java-tron sets both from the same run: receipt.result = contractRet, result FAILED unless
    // it succeeded).
    const ret = signedRet(tx);
    const receipt = info.receipt?.result;
    if (runsCode ? receipt !== ret : receipt !== undefined && receipt !== ret) {
      throw new BlockCheckError(
        'receipts',
        block,
        `tx ${id}: its receipt says ${String(receipt)}, its signed ret says ${ret}`,
      );
    }
    const failedInfo = info.result === 'FAILED';
    if ((failedInfo && ret === 'SUCCESS') || (runsCode && ret !== 'SUCCESS' && !failedInfo)) {
      throw new BlockCheckError(
        'receipts',
        block,
        `tx ${id}: its info's result ${String(info.result)} disagrees with its signed ret ${ret}`,
      );
    }
    if (ret !== 'SUCCESS' && logCount > 0) {
      throw new BlockCheckError('transfer_log', block, `tx ${id} failed (${ret}) but has logs`);
    }
    if (ret === 'SUCCESS') {
      for (const c of contracts) {
        if (c.type === TRIGGER_SMART_CONTRACT && c.target === usdt) {
          checkDirectUsdtCall(c, info, block, usdt.slice(2));
        }
      }
    }
    ordered.push(info);
  }
  return ordered;
}

/**
 * The exact block's transactions must be the JSON's, in order (same raw_data bytes, same
 * contractRet), then its Merkle root is the header's.
 * @param signed each JSON transaction's raw_data bytes, as checkTransaction decoded them.
 * @throws BlockCheckError('exact_bytes' | 'tx_root').
 */
function checkExact(
  exact: ExactBlock,
  txs: readonly TransactionJson[],
  signed: readonly SignedTransaction[],
  headerRaw: Uint8Array,
  txTrieRoot: string,
  block: number,
): void {
  if (Buffer.compare(exact.headerRaw, headerRaw) !== 0) {
    throw new BlockCheckError(
      'exact_bytes',
      block,
      'the exact header differs from the JSON header',
    );
  }
  if (exact.transactions.length !== txs.length) {
    throw new BlockCheckError(
      'exact_bytes',
      block,
      `${exact.transactions.length} transactions in the exact bytes, ${txs.length} in JSON`,
    );
  }
  const level = Buffer.allocUnsafe(txs.length * 32);
  for (let i = 0; i < txs.length; i++) {
    const bytes = exact.transactions[i] as Uint8Array;
    let rawStart: number;
    let rawEnd: number;
    let contractRet: string | undefined;
    try {
      const rets: number[] = [];
      readMessage(bytes, 0, bytes.length, 5, rets); // Transaction: raw_data 1, ret 5
      rawStart = lenStart[1] as number;
      rawEnd = lenEnd[1] as number;
      if (rets.length === 0) {
        contractRet = 'DEFAULT';
      } else {
        readMessage(bytes, rets[0] as number, rets[1] as number); // the first Result
        contractRet = CONTRACT_RESULT_NAME.get(varintOf(bytes, 3));
      }
    } catch (err) {
      if (!(err instanceof PbDecodeError)) throw err;
      throw new BlockCheckError('exact_bytes', block, `transaction ${i}: not protobuf`);
    }
    const tx = txs[i];
    const raw = signed[i]?.raw;
    if (
      rawStart < 0 ||
      !raw ||
      rawEnd - rawStart !== raw.length ||
      raw.compare(bytes, rawStart, rawEnd) !== 0
    ) {
      throw new BlockCheckError(
        'exact_bytes',
        block,
        `transaction ${i}: the exact raw_data differs from the JSON's (${String(tx?.txID)})`,
      );
    }
    // java-tron's JSON omits a contractRet of DEFAULT (0), as protobuf omits defaults.
    const jsonRet = tx?.ret?.[0]?.contractRet ?? 'DEFAULT';
    if ((contractRet ?? 'DEFAULT') !== jsonRet) {
      throw new BlockCheckError(
        'exact_bytes',
        block,
        `tx ${String(tx?.txID)}: contractRet ${String(jsonRet)} in JSON, ${String(contractRet)} in the exact bytes`,
      );
    }
    sha256Into(bytes, level, 32 * i);
  }
  const root = merkleRootInPlace(level, txs.length);
  if (root !== txTrieRoot) {
    throw new BlockCheckError(
      'tx_root',
      block,
      `txTrieRoot ${txTrieRoot} is not the Merkle root of the transactions (${root})`,
    );
  }
}

/** Bytes of `v` as a protobuf varint. */
function varintSize(v: number): number {
  let n = 1;
  for (let x = v; x >= 0x80; x = Math.floor(x / 128)) n++;
  return n;
}

/** Write `v` as a varint at `pos`; returns the position after it. */
function writeVarint(buf: Buffer, pos: number, v: number): number {
  let x = v;
  let p = pos;
  while (x >= 0x80) {
    buf[p++] = (x % 128) | 0x80;
    x = Math.floor(x / 128);
  }
  buf[p++] = x;
  return p;
}

/**
 * A block's transactions as bytes, decoded from their hex once into one buffer: each one's
 * `raw_data` (what its txID hashes), and, when `leaves` is asked for, the whole `Transaction`
 * around it as encodeTransactionFromJson writes it (raw_data, signatures, ret re-encoded: what a
 * Merkle leaf hashes when the root is checked from JSON), so no transaction is copied twice.
 */
interface TransactionBytes {
  buf: Buffer;
  /**
   * Start of transaction i's raw_data in `buf` (its length is raw_data_hex.length / 2), or −1
   * when raw_data_hex is missing, empty or not hex.
   */
  rawAt: number[];
  /**
   * [start, end) of transaction i's whole JSON-encoded bytes in `buf`; start −1 when its JSON
   * cannot be re-encoded (encodeResult, a signature that is not hex). Empty without `leaves`.
   */
  leafAt: number[];
  leafEnd: number[];
}

/**
 * Lay out and decode `txs` (TransactionBytes). Buffer#write stops at the first pair that is not
 * hex, so a write shorter than the hex says is malformed hex.
 */
function transactionBytes(txs: readonly TransactionJson[], leaves: boolean): TransactionBytes {
  const n = txs.length;
  const rawAt: number[] = new Array(n);
  const leafAt: number[] = leaves ? new Array(n) : [];
  const leafEnd: number[] = leaves ? new Array(n) : [];
  const rets: Array<Uint8Array[] | undefined> = leaves ? new Array(n) : [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const tx = txs[i] as TransactionJson;
    const hexLen = typeof tx.raw_data_hex === 'string' ? tx.raw_data_hex.length : 0;
    const rawLen = hexLen >> 1;
    let size = rawLen;
    if (leaves) {
      let encodable = true;
      let extra = 1 + varintSize(rawLen);
      for (const sig of tx.signature ?? []) {
        if (typeof sig !== 'string' || sig.length % 2 !== 0) encodable = false;
        else extra += 1 + varintSize(sig.length / 2) + sig.length / 2;
      }
      const encoded: Uint8Array[] = [];
      for (const r of tx.ret ?? []) {
        const b = encodeResult((r ?? {}) as Record<string, unknown>);
        if (!b) encodable = false;
        else {
          encoded.push(b);
          extra += 1 + varintSize(b.length) + b.length;
        }
      }
      if (encodable) {
        rets[i] = encoded;
        size += extra;
      }
    }
    total += size;
  }
  const buf = Buffer.allocUnsafe(total);
  let pos = 0;
  for (let i = 0; i < n; i++) {
    const tx = txs[i] as TransactionJson;
    const rawHex = typeof tx.raw_data_hex === 'string' ? tx.raw_data_hex : '';
    const rawLen = rawHex.length >> 1;
    const encoded = rets[i];
    const rawOk = rawHex.length > 0 && rawHex.length % 2 === 0;
    if (!encoded) {
      if (leaves) leafAt[i] = -1;
      rawAt[i] = rawOk && buf.write(rawHex, pos, rawLen, 'hex') === rawLen ? pos : -1;
      pos += rawLen;
      continue;
    }
    leafAt[i] = pos;
    buf[pos] = 0x0a; // raw_data: field 1, length-delimited
    pos = writeVarint(buf, pos + 1, rawLen);
    rawAt[i] = rawOk && buf.write(rawHex, pos, rawLen, 'hex') === rawLen ? pos : -1;
    pos += rawLen;
    for (const sig of (tx.signature ?? []) as string[]) {
      const len = sig.length / 2;
      buf[pos] = 0x12; // signature: field 2, length-delimited
      pos = writeVarint(buf, pos + 1, len);
      // write stops at the first pair that is not hex: then this leaf cannot be the JSON's.
      if (buf.write(sig, pos, len, 'hex') !== len) leafAt[i] = -1;
      pos += len;
    }
    for (const b of encoded) {
      buf[pos] = 0x2a; // ret: field 5, length-delimited
      pos = writeVarint(buf, pos + 1, b.length);
      buf.set(b, pos);
      pos += b.length;
    }
    leafEnd[i] = pos;
  }
  return { buf, rawAt, leafAt, leafEnd };
}

/**
 * Items 2 and 3 of the module doc for a block's transactions and their infos, without the
 * header: each txID and matched field against the signed bytes, one info per transaction of this
 * block number and timestamp, logs only where code runs, direct USDT transfers' logs against
 * their call data.
 * @param timestamp the block's timestamp, ms since epoch (the infos' blockTimeStamp).
 * @returns the infos in transaction order.
 * @throws BlockCheckError ('tx_id' | 'tx_fields' | 'receipts' | 'transfer_log').
 */
export function verifyTransactions(
  txs: readonly TransactionJson[],
  infos: readonly TransactionInfoJson[],
  blockNumber: number,
  timestamp: bigint,
): TransactionInfoJson[] {
  return checkTransactionsAndInfos(txs, infos, blockNumber, timestamp).infos;
}

/** verifyTransactions, also returning each transaction's decoded raw_data (for the root). */
function checkTransactionsAndInfos(
  txs: readonly TransactionJson[],
  infos: readonly TransactionInfoJson[],
  blockNumber: number,
  timestamp: bigint,
  bytes = transactionBytes(txs, false),
  usdt: string = USDT_CONTRACT_HEX,
): { signed: SignedTransaction[]; infos: TransactionInfoJson[] } {
  const signed: SignedTransaction[] = new Array(txs.length);
  for (let i = 0; i < txs.length; i++) {
    signed[i] = checkTransaction(txs[i] as TransactionJson, i, blockNumber, bytes);
  }
  if (txs.length === 0 && infos.length === 0) return { signed, infos: [] };
  return { signed, infos: checkInfos(txs, signed, infos, blockNumber, timestamp, usdt) };
}

/**
 * Append `v` as a 4-byte big-endian length, then its bytes, to `out` (a string of byte values):
 * unambiguous. Only for ASCII values shorter than 128 characters, whose UTF-8 bytes are their
 * characters and whose length prefix is three 0 bytes and one below 128 (the fingerprint's
 * fields, checked by its caller), so that the whole encoding is one ASCII string hashed once.
 */
function asciiField(out: string, v: string): string {
  return `${out}\0\0\0${String.fromCharCode(v.length)}${v}`;
}

/** Any character that is not ASCII (128 and above, surrogates included). */
const NON_ASCII = /[\u0080-\uffff]/;

/** Append `v` to the hash as a 4-byte big-endian length, then its UTF-8 bytes (unambiguous). */
function field(h: ReturnType<typeof createHash>, v: string): void {
  const b = Buffer.from(v, 'utf8');
  const len = Buffer.allocUnsafe(4);
  len.writeUInt32BE(b.length, 0);
  h.update(len).update(b);
}

/**
 * The canonical fingerprint (VerifiedBlock.fingerprint): SHA-256 over a length-prefixed encoding
 * of the blockID, parentHash, timestamp and every extracted transfer (tx id, event index, asset,
 * from, to, amount, contract, and whether its evidence is signed), in block order. Two answers
 * with the same fingerprint yield the same events, whatever else differs in their JSON.
 */
export function transfersFingerprint(
  id: string,
  parentHash: string,
  timestamp: number,
  transfers: readonly Transfer[],
): string {
  const values: string[] = [id, parentHash, String(timestamp), String(transfers.length)];
  for (const t of transfers) {
    values.push(
      t.txId,
      String(t.eventIndex),
      t.asset,
      t.from,
      t.to,
      t.amountRaw.toString(),
      t.contract ?? '',
      t.proof === 'signed' ? 'signed' : 'unsigned',
    );
  }
  // Every field is ASCII and short in practice (hex, decimal, names): one string, one hash.
  let ascii = asciiField('', 'tronwatch-block-v1');
  for (const v of values) {
    if (v.length >= 128) {
      ascii = '';
      break;
    }
    ascii = asciiField(ascii, v);
  }
  if (ascii !== '' && !NON_ASCII.test(ascii)) return hash('sha256', ascii, 'hex');
  const h = createHash('sha256');
  field(h, 'tronwatch-block-v1');
  for (const v of values) field(h, v);
  return h.digest('hex');
}

/**
 * Verify a solidified block and its transaction infos (module doc, items 1–4), then extract its
 * transfers from the verified answer.
 * @param exact the same block's exact protobuf bytes (gRPC), when a provider serves them: the
 *   transaction root is then checked from them; without, from JSON where it can be.
 * @param usdt the chain's USDT contract, 41-hex (default mainnet's; Nile's for the test network:
 *   address.ts usdtContractHexOf): whose logs are transfers and whose direct calls are checked.
 * @returns what was established; the infos are then known to be one per transaction.
 * @throws BlockCheckError naming the failed check (never retryable as the same answer).
 */
export function verifyBlock(
  block: BlockJson,
  infos: readonly TransactionInfoJson[],
  exact?: ExactBlock,
  usdt: string = USDT_CONTRACT_HEX,
): VerifiedBlock {
  const raw = (block.block_header?.raw_data ?? {}) as Record<string, unknown>;
  if (raw.number === undefined && raw.timestamp === undefined && !block.blockID) {
    throw new BlockCheckError('header', -1, 'no block header');
  }
  const number = headerUint(raw, 'number', -1);
  const n = Number(number);
  const timestamp = headerUint(raw, 'timestamp', n);
  const headerRaw = encodeHeaderRaw(raw, n);
  const id = blockIdFromRaw(number, headerRaw);
  if (lower(block.blockID) !== id) {
    throw new BlockCheckError(
      'block_id',
      n,
      `blockID ${String(block.blockID)} is not the hash of its header (${id})`,
    );
  }
  const txs = block.transactions ?? [];
  const bytes = transactionBytes(txs, !exact);
  const { signed } = checkTransactionsAndInfos(txs, infos, n, timestamp, bytes, usdt);
  const txTrieRoot = lower(raw.txTrieRoot ?? '') || ZERO_ROOT;
  let root: RootStatus;
  if (exact) {
    checkExact(exact, txs, signed, headerRaw, txTrieRoot, n);
    root = 'exact';
  } else {
    const level = Buffer.allocUnsafe(txs.length * 32);
    const { buf, leafAt, leafEnd } = bytes;
    let i = 0;
    for (; i < txs.length; i++) {
      const at = leafAt[i] as number;
      if (at < 0) break;
      sha256Into(
        new Uint8Array(buf.buffer, buf.byteOffset + at, (leafEnd[i] as number) - at),
        level,
        32 * i,
      );
    }
    root =
      i === txs.length && merkleRootInPlace(level, txs.length) === txTrieRoot
        ? 'json'
        : 'unverifiable';
  }
  let transfers: Transfer[];
  try {
    transfers = extractTransfers(block, infos, { proof: true, usdt });
  } catch (err) {
    if (!(err instanceof MalformedBlockError)) throw err;
    throw new BlockCheckError('receipts', n, err.message);
  }
  const parentHash = lower(raw.parentHash ?? '');
  const fingerprint = transfersFingerprint(id, parentHash, Number(timestamp), transfers);
  // Without a proven root nothing is signed: only the providers' agreement can vouch for it.
  if (root === 'unverifiable') for (const t of transfers) t.proof = 'provider';
  return { id, parentHash, root, fingerprint, transfers };
}

/**
 * The exact block in a gRPC `BlockExtention` answer (protocol api.proto: transactions 1
 * (TransactionExtention {transaction 1, txid 2, …}), block_header 2 (BlockHeader {raw_data 1,
 * witness_signature 2}), blockid 3) or a `Block` answer (transactions 1 (Transaction),
 * block_header 2). Empty input (java-tron's answer for a block it does not have) gives undefined.
 * @throws PbDecodeError on malformed bytes.
 */
export function parseExactBlock(
  bytes: Uint8Array,
  shape: 'extention' | 'block',
): ExactBlock | undefined {
  if (bytes.length === 0) return undefined;
  const f = pbFields(bytes);
  const header = pbBytes(f, 2);
  if (!header) return undefined;
  const headerRaw = pbBytes(pbFields(header), 1) ?? new Uint8Array(0);
  const transactions = pbBytesAll(f, 1).map((t) => {
    if (shape === 'block') return t;
    const tx = pbBytes(pbFields(t), 1);
    if (!tx) throw new PbDecodeError('a TransactionExtention without its transaction');
    return tx;
  });
  return { headerRaw, transactions };
}
