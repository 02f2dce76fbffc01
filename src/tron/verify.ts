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
import { TRANSFER_TOPIC } from './extract.js';
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
import type { BlockJson, LogJson, TransactionInfoJson, TransactionJson } from './types.js';

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
  | 'parent';

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
   * SHA-256 (hex) over the blockID and, per transaction in block order, what matching reads: its
   * id and contractRet, and its info's result, receipt.result and logs (address, topics, data).
   * Providers that agree on a block agree on this.
   */
  fingerprint: string;
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

/**
 * protocol `Transaction.Result.contractResult`, by the name java-tron's JSON prints (its enum
 * order in Tron.proto).
 */
const CONTRACT_RESULT: Readonly<Record<string, number>> = {
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

function int64(v: unknown): bigint {
  return v === undefined ? 0n : toBigInt(v);
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

function infoSucceeded(info: TransactionInfoJson): boolean {
  return info.result !== 'FAILED' && info.receipt?.result === 'SUCCESS';
}

/** The USDT Transfer logs of an info: [from20, to20, amount]. */
function usdtTransferLogs(logs: readonly LogJson[]): Array<[string, string, bigint]> {
  const out: Array<[string, string, bigint]> = [];
  for (const l of logs) {
    const t = l.topics ?? [];
    if (lower(l.address) !== USDT20 || t.length !== 3 || lower(t[0]) !== TRANSFER_TOPIC) continue;
    const data = l.data ?? '';
    const amount = data === '' || !/^[0-9a-fA-F]+$/.test(data) ? 0n : BigInt(`0x${data}`);
    out.push([lower(t[1]).slice(24), lower(t[2]).slice(24), amount]);
  }
  return out;
}

/**
 * A successful direct USDT transfer/transferFrom call: its Transfer logs must say what the signed
 * call data says (module doc, item 3). Calls with other selectors, or too short to decode, are
 * not direct transfers and are not checked here.
 */
function checkDirectUsdtCall(s: SignedContract, info: TransactionInfoJson, block: number): void {
  if (s.type !== TRIGGER_SMART_CONTRACT || s.target !== USDT_CONTRACT_HEX) return;
  const sel = s.data.slice(0, 8);
  let from: string;
  let to: string;
  let amount: bigint;
  // Addresses in call data: the low 20 bytes of a 32-byte word (the token ignores the rest).
  if (sel === SEL_TRANSFER && s.data.length >= 8 + 128) {
    from = s.owner.slice(2);
    to = s.data.slice(8 + 24, 8 + 64);
    amount = BigInt(`0x${s.data.slice(8 + 64, 8 + 128)}`);
  } else if (sel === SEL_TRANSFER_FROM && s.data.length >= 8 + 192) {
    from = s.data.slice(8 + 24, 8 + 64);
    to = s.data.slice(8 + 64 + 24, 8 + 128);
    amount = BigInt(`0x${s.data.slice(8 + 128, 8 + 192)}`);
  } else return;
  if (!infoSucceeded(info)) return;
  const logs = usdtTransferLogs(info.log ?? []);
  let sum = 0n;
  let toRecipient = 0;
  for (const [f, t, a] of logs) {
    if (f !== from) {
      throw new BlockCheckError(
        'transfer_log',
        block,
        `tx ${info.id}: a USDT Transfer log from 41${f} in a signed transfer from 41${from}`,
      );
    }
    sum += a;
    if (t === to) toRecipient++;
  }
  if (sum !== amount || toRecipient !== 1) {
    throw new BlockCheckError(
      'transfer_log',
      block,
      `tx ${info.id}: USDT Transfer logs (${logs.length}, sum ${sum}) do not match the signed transfer of ${amount} to 41${to}`,
    );
  }
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
    const id = lower(txs[i]?.txID);
    const info = byId.get(id);
    if (!info) throw new BlockCheckError('receipts', block, `no info for transaction ${id}`);
    if (info.blockNumber !== undefined && int64(info.blockNumber) !== BigInt(block)) {
      throw new BlockCheckError(
        'receipts',
        block,
        `the info of ${id} names block ${String(info.blockNumber)}`,
      );
    }
    if (info.blockTimeStamp !== undefined && int64(info.blockTimeStamp) !== timestamp) {
      throw new BlockCheckError('receipts', block, `the info of ${id} has another block time`);
    }
    const contracts = signed[i] ?? [];
    const runsCode = contracts.some(
      (c) => c.type === TRIGGER_SMART_CONTRACT || c.type === CREATE_SMART_CONTRACT,
    );
    if ((info.log?.length ?? 0) > 0 && !runsCode) {
      throw new BlockCheckError(
        'transfer_log',
        block,
        `tx ${id} runs no contract code but its info has ${info.log?.length} logs`,
      );
    }
    for (const c of contracts) checkDirectUsdtCall(c, info, block);
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

/** SHA-256 over what matching reads (VerifiedBlock.fingerprint). */
function fingerprintOf(
  id: string,
  txs: readonly TransactionJson[],
  infos: readonly TransactionInfoJson[],
): string {
  const h = createHash('sha256').update(id);
  for (let i = 0; i < txs.length; i++) {
    const tx = txs[i];
    const info = infos[i];
    h.update(`|${lower(tx?.txID)}:${String(tx?.ret?.[0]?.contractRet ?? '')}`);
    h.update(`:${String(info?.result ?? '')}:${String(info?.receipt?.result ?? '')}`);
    for (const l of info?.log ?? []) {
      h.update(`;${lower(l.address)}/${(l.topics ?? []).map(lower).join(',')}/${lower(l.data)}`);
    }
  }
  return h.digest('hex');
}

/**
 * Verify a solidified block and its transaction infos (module doc, items 1–4).
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
  let number: bigint;
  try {
    number = int64(raw.number);
  } catch {
    throw new BlockCheckError('header', -1, 'no block number');
  }
  const n = Number(number);
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
  const ordered = verifyTransactions(txs, infos, n, int64(raw.timestamp));
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
  return {
    id,
    parentHash: lower(raw.parentHash ?? ''),
    root,
    fingerprint: fingerprintOf(id, txs, ordered),
  };
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
