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
 *    (23b872dd) that succeeded has USDT Transfer logs that all come from the paying address, sum
 *    to the signed amount, and exactly one of which pays the signed recipient (one log when the
 *    token charges no fee, as today; TetherToken's fee, if ever switched on, is a second log
 *    from the same sender to the token's owner).
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
import { createHash } from 'node:crypto';
import { USDT_CONTRACT_HEX } from './address.js';
import { extractTransfers, MalformedBlockError, TRANSFER_TOPIC } from './extract.js';
import { toBigInt } from './json.js';
import {
  PbDecodeError,
  type PbField,
  PbWriter,
  pbBytes,
  pbBytesAll,
  pbFields,
  pbVarint,
} from './protobuf.js';
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
const USDT20 = USDT_CONTRACT_HEX.slice(2);
/** protocol `Transaction.Contract.ContractType`: the two types matching reads. */
const TRANSFER_CONTRACT = 1n;
const CREATE_SMART_CONTRACT = 30n;
const TRIGGER_SMART_CONTRACT = 31n;
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

function sha256(data: Uint8Array): Buffer {
  return createHash('sha256').update(data).digest();
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
    sha256(headerRaw).toString('hex', 8, 32)
  );
}

/**
 * java-tron's Merkle root over `leaves` (32-byte hashes): pairs hashed left to right, an odd
 * node carried up unchanged; no leaves = 32 zero bytes. Hex.
 */
export function merkleRoot(leaves: readonly Uint8Array[]): string {
  if (leaves.length === 0) return ZERO_ROOT;
  let level: Uint8Array[] = [...leaves];
  const pair = Buffer.allocUnsafe(64); // left ‖ right, hashed in one call
  while (level.length > 1) {
    const next: Uint8Array[] = [];
    for (let i = 0; i < level.length; i += 2) {
      const left = level[i] as Uint8Array;
      const right = level[i + 1];
      if (!right) {
        next.push(left);
        continue;
      }
      pair.set(left, 0);
      pair.set(right, 32);
      next.push(createHash('sha256').update(pair).digest());
    }
    level = next;
  }
  return Buffer.from(level[0] as Uint8Array).toString('hex');
}

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
  const w = new PbWriter();
  const ints: ReadonlyArray<readonly [string, number]> = [
    ['withdraw_amount', 15],
    ['unfreeze_amount', 16],
    ['exchange_received_amount', 18],
    ['exchange_inject_another_amount', 19],
    ['exchange_withdraw_another_amount', 20],
    ['exchange_id', 21],
    ['shielded_transaction_fee', 22],
  ];
  const known = new Set([
    'fee',
    'ret',
    'contractRet',
    'assetIssueID',
    'orderId',
    'withdraw_expire_amount',
    'cancel_unfreezeV2_amount',
    ...ints.map(([k]) => k),
  ]);
  for (const k of Object.keys(r)) if (!known.has(k)) return undefined;
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
  type: bigint;
  owner: string;
  /** TransferContract: to_address; TriggerSmartContract: contract_address. */
  target: string;
  /** TransferContract: amount. */
  amount: bigint;
  /** TriggerSmartContract: call data, lowercase hex. */
  data: string;
}

function hex(b: Uint8Array | undefined): string {
  return b ? Buffer.from(b).toString('hex') : '';
}

/** The contracts of a `Transaction.raw`. @throws PbDecodeError on malformed bytes. */
function signedContracts(raw: Uint8Array): SignedContract[] {
  const out: SignedContract[] = [];
  for (const c of pbBytesAll(pbFields(raw), 11)) {
    const cf = pbFields(c);
    const type = pbVarint(cf, 1);
    const any = pbBytes(cf, 2);
    const value = any ? pbBytes(pbFields(any), 2) : undefined;
    const vf: PbField[] = value ? pbFields(value) : [];
    if (type === TRANSFER_CONTRACT) {
      out.push({
        type,
        owner: hex(pbBytes(vf, 1)),
        target: hex(pbBytes(vf, 2)),
        amount: BigInt.asIntN(64, pbVarint(vf, 3)),
        data: '',
      });
    } else if (type === TRIGGER_SMART_CONTRACT) {
      out.push({
        type,
        owner: hex(pbBytes(vf, 1)),
        target: hex(pbBytes(vf, 2)),
        amount: 0n,
        data: hex(pbBytes(vf, 4)),
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
 * Check one transaction's JSON against its signed bytes (module doc, item 2).
 * @returns its contracts as signed.
 * @throws BlockCheckError('tx_id' | 'tx_fields').
 */
function checkTransaction(tx: TransactionJson, i: number, block: number): SignedContract[] {
  const rawHex = tx.raw_data_hex;
  if (typeof rawHex !== 'string' || rawHex === '' || !HEX.test(rawHex)) {
    throw new BlockCheckError('tx_id', block, `transaction ${i} has no raw_data_hex`);
  }
  const raw = Buffer.from(rawHex, 'hex');
  const id = sha256(raw).toString('hex');
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
  return signed;
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

/**
 * Decode a signed call of USDT (TetherToken, compiled with solc 0.4: `onlyPayloadSize` refuses
 * call data shorter than its arguments, and an address argument is the low 20 bytes of its word).
 */
function usdtCall(s: SignedContract): UsdtCall {
  const sel = s.data.slice(0, 8);
  const word = (i: number) => s.data.slice(8 + 64 * i, 8 + 64 * (i + 1));
  if (sel === SEL_TRANSFER && s.data.length >= 8 + 128) {
    return {
      kind: 'transfer',
      from: s.owner.slice(2),
      to: word(0).slice(24),
      amount: BigInt(`0x${word(1)}`),
    };
  }
  if (sel === SEL_TRANSFER_FROM && s.data.length >= 8 + 192) {
    return {
      kind: 'transfer',
      from: word(0).slice(24),
      to: word(1).slice(24),
      amount: BigInt(`0x${word(2)}`),
    };
  }
  if (sel === SEL_APPROVE && s.data.length >= 8 + 128) {
    return {
      kind: 'approve',
      owner: s.owner.slice(2),
      spender: word(0).slice(24),
      amount: BigInt(`0x${word(1)}`),
    };
  }
  return { kind: 'other' };
}

/**
 * A successful direct call of the USDT contract: its logs must be exactly those its selector
 * implies (module doc, item 3). TetherToken (TRON's USDT, the Ethereum TetherToken's code):
 * `transfer(to, v)` and `transferFrom(from, to, v)` emit `Transfer(from, to, v − fee)`, preceded
 * by `Transfer(from, owner, fee)` when the fee is not 0 (basisPointsRate, 0 on TRON since launch);
 * `approve(spender, v)` emits one `Approval(owner, spender, v)`; nothing else emits a Transfer.
 * The token's owner and fee rate are chain state this service does not read, so only the
 * fee-less form is accepted: a fee log (or any other extra log) is refused, and ingest stalls
 * loudly rather than guess (to revisit if Tether ever switches the fee on).
 * @throws BlockCheckError('transfer_log').
 */
function checkDirectUsdtCall(s: SignedContract, info: TransactionInfoJson, block: number): void {
  const call = usdtCall(s);
  const logs = (info.log ?? []).map((l) => ({
    usdt: lower(l.address) === USDT20,
    log: usdtLog(l),
  }));
  const refuse = (why: string) => {
    throw new BlockCheckError('transfer_log', block, `tx ${lower(info.id)}: ${why}`);
  };
  if (call.kind === 'transfer') {
    const only = logs[0];
    if (
      logs.length !== 1 ||
      !only?.usdt ||
      only.log.kind !== 'transfer' ||
      only.log.a !== call.from ||
      only.log.b !== call.to ||
      only.log.amount !== call.amount
    ) {
      refuse(
        `its logs (${logs.length}) are not the one USDT Transfer of ${call.amount} from 41${call.from} to 41${call.to} the signed call makes`,
      );
    }
  } else if (call.kind === 'approve') {
    const only = logs[0];
    if (
      logs.length !== 1 ||
      !only?.usdt ||
      only.log.kind !== 'approval' ||
      only.log.a !== call.owner ||
      only.log.b !== call.spender
    ) {
      refuse(`a signed USDT approve has logs (${logs.length}) other than its one Approval`);
    }
  } else if (logs.some((l) => l.usdt && l.log.kind === 'transfer')) {
    refuse(
      'a USDT Transfer log on a call of USDT that is not transfer or transferFrom (or whose call data is too short)',
    );
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
  signed: readonly SignedContract[][],
  infos: readonly TransactionInfoJson[],
  block: number,
  timestamp: bigint,
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
    const contracts = signed[i] ?? [];
    const runsCode = contracts.some(
      (c) => c.type === TRIGGER_SMART_CONTRACT || c.type === CREATE_SMART_CONTRACT,
    );
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
        if (c.type === TRIGGER_SMART_CONTRACT && c.target === USDT_CONTRACT_HEX) {
          checkDirectUsdtCall(c, info, block);
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
 * @throws BlockCheckError('exact_bytes' | 'tx_root').
 */
function checkExact(
  exact: ExactBlock,
  txs: readonly TransactionJson[],
  headerRaw: Uint8Array,
  txTrieRoot: string,
  block: number,
): void {
  if (Buffer.compare(Buffer.from(exact.headerRaw), Buffer.from(headerRaw)) !== 0) {
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
  const leaves: Uint8Array[] = [];
  for (let i = 0; i < txs.length; i++) {
    const bytes = exact.transactions[i] as Uint8Array;
    let raw: Uint8Array | undefined;
    let contractRet: string | undefined;
    try {
      const f = pbFields(bytes);
      raw = pbBytes(f, 1);
      const ret = pbBytesAll(f, 5)[0];
      contractRet = ret ? CONTRACT_RESULT_NAME.get(Number(pbVarint(pbFields(ret), 3))) : 'DEFAULT';
    } catch (err) {
      if (!(err instanceof PbDecodeError)) throw err;
      throw new BlockCheckError('exact_bytes', block, `transaction ${i}: not protobuf`);
    }
    const tx = txs[i];
    if (!raw || hex(raw) !== lower(tx?.raw_data_hex)) {
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
    leaves.push(sha256(bytes));
  }
  const root = merkleRoot(leaves);
  if (root !== txTrieRoot) {
    throw new BlockCheckError(
      'tx_root',
      block,
      `txTrieRoot ${txTrieRoot} is not the Merkle root of the transactions (${root})`,
    );
  }
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
  const signed = txs.map((tx, i) => checkTransaction(tx, i, blockNumber));
  if (txs.length === 0 && infos.length === 0) return [];
  return checkInfos(txs, signed, infos, blockNumber, timestamp);
}

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
  const h = createHash('sha256');
  field(h, 'tronwatch-block-v1');
  field(h, id);
  field(h, parentHash);
  field(h, String(timestamp));
  field(h, String(transfers.length));
  for (const t of transfers) {
    field(h, t.txId);
    field(h, String(t.eventIndex));
    field(h, t.asset);
    field(h, t.from);
    field(h, t.to);
    field(h, t.amountRaw.toString());
    field(h, t.contract ?? '');
    field(h, t.proof === 'signed' ? 'signed' : 'unsigned');
  }
  return h.digest('hex');
}

/**
 * Verify a solidified block and its transaction infos (module doc, items 1–4), then extract its
 * transfers from the verified answer.
 * @param exact the same block's exact protobuf bytes (gRPC), when a provider serves them: the
 *   transaction root is then checked from them; without, from JSON where it can be.
 * @returns what was established; the infos are then known to be one per transaction.
 * @throws BlockCheckError naming the failed check (never retryable as the same answer).
 */
export function verifyBlock(
  block: BlockJson,
  infos: readonly TransactionInfoJson[],
  exact?: ExactBlock,
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
  verifyTransactions(txs, infos, n, timestamp);
  const txTrieRoot = lower(raw.txTrieRoot ?? '') || ZERO_ROOT;
  let root: RootStatus;
  if (exact) {
    checkExact(exact, txs, headerRaw, txTrieRoot, n);
    root = 'exact';
  } else {
    const leaves: Uint8Array[] = [];
    for (const tx of txs) {
      const bytes = encodeTransactionFromJson(tx);
      if (!bytes) break;
      leaves.push(sha256(bytes));
    }
    root =
      leaves.length === txs.length && merkleRoot(leaves) === txTrieRoot ? 'json' : 'unverifiable';
  }
  let transfers: Transfer[];
  try {
    transfers = extractTransfers(block, infos, { proof: true });
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
