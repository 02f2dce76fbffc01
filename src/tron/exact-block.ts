/**
 * A block read once, as exact bytes: java-tron's gRPC `GetBlockByNum2` answer (`BlockExtention`)
 * decoded into the JSON shape the rest of tronwatch reads (types.ts `BlockJson`, as
 * `/walletsolidity/getblockbynum` with visible=false prints it), so that a provider serving gRPC
 * is asked for each block once (its bytes) plus its receipts (HTTP), two requests, instead of the
 * JSON block, its receipts and the bytes again.
 *
 * Everything decoded here is a view of the signed or header-hashed bytes: the header fields
 * (hashed into the blockID), each transaction's `raw_data` (hashed into its txID) and `ret`
 * (hashed into the Merkle leaves the header's txTrieRoot commits to). tron/verify.ts then checks
 * the decoded block exactly as a JSON one, and its root from the same bytes; nothing here is
 * trusted before that.
 *
 * Protocol (java-tron `protocol/src/main/protos/api/api.proto` and `core/Tron.proto`):
 * - BlockExtention {transactions 1: TransactionExtention, block_header 2: BlockHeader, blockid 3};
 *   TransactionExtention {transaction 1: Transaction, txid 2, …}.
 * - BlockHeader {raw_data 1: raw, witness_signature 2}; raw {timestamp 1, txTrieRoot 2,
 *   parentHash 3, number 7, witness_id 8, witness_address 9, version 10, accountStateRoot 11}.
 * - Transaction {raw_data 1: raw, signature 2 (repeated), ret 5: Result (repeated)};
 *   Transaction.raw {…, contract 11: Contract {type 1, parameter 2: Any {type_url 1, value 2}}};
 *   Result {fee 1, ret 2 (SUCESS 0, FAILED 1), contractRet 3}.
 * - TransferContract {owner_address 1, to_address 2, amount 3};
 *   TriggerSmartContract {owner_address 1, contract_address 2, call_value 3, data 4,
 *   call_token_value 5, token_id 6}.
 * As java-tron's JSON does, fields at their protobuf default are left out; contract types other
 * than the two matching reads keep their type name and `type_url` only (their fields are read
 * from the exact bytes where needed: the light client's key rotations).
 */
import { createHash } from 'node:crypto';
import {
  PbDecodeError,
  type PbField,
  pbBytes,
  pbBytesAll,
  pbFields,
  pbVarint,
} from './protobuf.js';
import type { BlockHeaderRaw, BlockJson, ContractJson, NodeInt, TransactionJson } from './types.js';
import { blockIdFromRaw, CONTRACT_RESULT, type ExactBlock } from './verify.js';

/** protocol `Transaction.Contract.ContractType`, by the name java-tron's JSON prints. */
const CONTRACT_TYPE: ReadonlyMap<number, string> = new Map([
  [0, 'AccountCreateContract'],
  [1, 'TransferContract'],
  [2, 'TransferAssetContract'],
  [3, 'VoteAssetContract'],
  [4, 'VoteWitnessContract'],
  [5, 'WitnessCreateContract'],
  [6, 'AssetIssueContract'],
  [8, 'WitnessUpdateContract'],
  [9, 'ParticipateAssetIssueContract'],
  [10, 'AccountUpdateContract'],
  [11, 'FreezeBalanceContract'],
  [12, 'UnfreezeBalanceContract'],
  [13, 'WithdrawBalanceContract'],
  [14, 'UnfreezeAssetContract'],
  [15, 'UpdateAssetContract'],
  [16, 'ProposalCreateContract'],
  [17, 'ProposalApproveContract'],
  [18, 'ProposalDeleteContract'],
  [19, 'SetAccountIdContract'],
  [20, 'CustomContract'],
  [30, 'CreateSmartContract'],
  [31, 'TriggerSmartContract'],
  [32, 'GetContract'],
  [33, 'UpdateSettingContract'],
  [41, 'ExchangeCreateContract'],
  [42, 'ExchangeInjectContract'],
  [43, 'ExchangeWithdrawContract'],
  [44, 'ExchangeTransactionContract'],
  [45, 'UpdateEnergyLimitContract'],
  [46, 'AccountPermissionUpdateContract'],
  [48, 'ClearABIContract'],
  [49, 'UpdateBrokerageContract'],
  [51, 'ShieldedTransferContract'],
  [52, 'MarketSellAssetContract'],
  [53, 'MarketCancelOrderContract'],
  [54, 'FreezeBalanceV2Contract'],
  [55, 'UnfreezeBalanceV2Contract'],
  [56, 'WithdrawExpireUnfreezeContract'],
  [57, 'DelegateResourceContract'],
  [58, 'UnDelegateResourceContract'],
  [59, 'CancelAllUnfreezeV2Contract'],
]);

const CONTRACT_RESULT_NAME: ReadonlyMap<number, string> = new Map(
  Object.entries(CONTRACT_RESULT).map(([name, code]) => [code, name]),
);

/** A block decoded from its exact bytes: the JSON view, and the bytes verification hashes. */
export interface DecodedBlock {
  block: BlockJson;
  exact: ExactBlock;
}

function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/** An int64 field as java-tron's JSON gives it: a number when safe, else a bigint. */
function int64(fields: readonly PbField[], field: number): NodeInt {
  const v = BigInt.asIntN(64, pbVarint(fields, field));
  return v >= BigInt(Number.MIN_SAFE_INTEGER) && v <= BigInt(Number.MAX_SAFE_INTEGER)
    ? Number(v)
    : v;
}

/** Set `key` on `o` unless `v` is the protobuf default (0, empty). */
function put(o: Record<string, unknown>, key: string, v: NodeInt | string): void {
  if (v === 0 || v === 0n || v === '') return;
  o[key] = v;
}

/** The header's raw fields (protocol `BlockHeader.raw`), defaults left out. */
function headerJson(raw: Uint8Array): Record<string, unknown> {
  const f = pbFields(raw);
  const o: Record<string, unknown> = {};
  put(o, 'timestamp', int64(f, 1));
  put(o, 'txTrieRoot', hex(pbBytes(f, 2) ?? new Uint8Array(0)));
  put(o, 'parentHash', hex(pbBytes(f, 3) ?? new Uint8Array(0)));
  put(o, 'number', int64(f, 7));
  put(o, 'witness_id', int64(f, 8));
  put(o, 'witness_address', hex(pbBytes(f, 9) ?? new Uint8Array(0)));
  put(o, 'version', int64(f, 10));
  put(o, 'accountStateRoot', hex(pbBytes(f, 11) ?? new Uint8Array(0)));
  // A field this decoder does not know: left out, so the header re-encoded by verify.ts differs
  // from these bytes and the block is refused (never a guess hashed).
  return o;
}

/** One contract of a `Transaction.raw` (see the module doc for which fields). */
function contractJson(c: Uint8Array): ContractJson {
  const cf = pbFields(c);
  const type = Number(pbVarint(cf, 1));
  const any = pbBytes(cf, 2);
  const af = any ? pbFields(any) : [];
  const typeUrl = pbBytes(af, 1);
  const value = pbBytes(af, 2);
  const vf = value ? pbFields(value) : [];
  const v: Record<string, unknown> = {};
  const bytes = (n: number) => hex(pbBytes(vf, n) ?? new Uint8Array(0));
  if (type === 1) {
    put(v, 'owner_address', bytes(1));
    put(v, 'to_address', bytes(2));
    put(v, 'amount', int64(vf, 3));
  } else if (type === 31) {
    put(v, 'owner_address', bytes(1));
    put(v, 'contract_address', bytes(2));
    put(v, 'call_value', int64(vf, 3));
    put(v, 'data', bytes(4));
    put(v, 'call_token_value', int64(vf, 5));
    put(v, 'token_id', int64(vf, 6));
  }
  const parameter: NonNullable<ContractJson['parameter']> = { value: v };
  if (typeUrl) parameter.type_url = Buffer.from(typeUrl).toString('utf8');
  return { type: CONTRACT_TYPE.get(type) ?? `ContractType${type}`, parameter };
}

/** One `Transaction`'s JSON view; `txid` from its TransactionExtention when given. */
function transactionJson(bytes: Uint8Array, txid: Uint8Array | undefined): TransactionJson {
  const f = pbFields(bytes);
  const raw = pbBytes(f, 1) ?? new Uint8Array(0);
  const contract = pbBytesAll(pbFields(raw), 11).map(contractJson);
  const tx: TransactionJson = {
    txID: txid?.length ? hex(txid) : createHash('sha256').update(raw).digest('hex'),
    raw_data: { contract },
    raw_data_hex: hex(raw),
  };
  const signature = pbBytesAll(f, 2).map(hex);
  if (signature.length > 0) tx.signature = signature;
  const ret = pbBytesAll(f, 5).map((r) => {
    const rf = pbFields(r);
    const o: { contractRet?: string; fee?: NodeInt; ret?: string } = {};
    const fee = int64(rf, 1);
    if (fee !== 0 && fee !== 0n) o.fee = fee;
    if (pbVarint(rf, 2) === 1n) o.ret = 'FAILED';
    // An unknown code reads as DEFAULT, as verify.ts reads the exact bytes (the receipt's name
    // for it will then disagree, and the block is refused rather than guessed at).
    const name = CONTRACT_RESULT_NAME.get(Number(pbVarint(rf, 3)));
    if (name !== undefined && name !== 'DEFAULT') o.contractRet = name;
    return o;
  });
  if (ret.length > 0) tx.ret = ret;
  return tx;
}

/**
 * Decode a gRPC `BlockExtention` answer into the block's JSON view and its exact bytes (module
 * doc). The JSON view holds what matching, verification and the light client read: blockID, the
 * header (with `witness_signature`), and per transaction `txID`, `raw_data_hex`, `signature`,
 * `ret` and the contracts (type; TransferContract and TriggerSmartContract fields).
 * @param bytes the answer's bytes, as GrpcBlockClient.getBlockByNum2 returns them.
 * @returns undefined for an empty answer or one without a header (java-tron's answer for a block
 *   it does not have, e.g. above its solidified head).
 * @throws PbDecodeError on bytes that are not a BlockExtention.
 */
export function decodeBlockExtention(bytes: Uint8Array): DecodedBlock | undefined {
  if (bytes.length === 0) return undefined;
  const f = pbFields(bytes);
  const header = pbBytes(f, 2);
  if (!header) return undefined;
  const hf = pbFields(header);
  const headerRaw = pbBytes(hf, 1) ?? new Uint8Array(0);
  const raw = headerJson(headerRaw);
  const transactions: Uint8Array[] = [];
  const txs: TransactionJson[] = [];
  for (const t of pbBytesAll(f, 1)) {
    const tf = pbFields(t);
    const tx = pbBytes(tf, 1);
    if (!tx) throw new PbDecodeError('a TransactionExtention without its transaction');
    transactions.push(tx);
    txs.push(transactionJson(tx, pbBytes(tf, 2)));
  }
  const blockid = pbBytes(f, 3);
  const number = BigInt(raw.number === undefined ? 0 : (raw.number as NodeInt));
  const block: BlockJson = {
    blockID: blockid?.length ? hex(blockid) : blockIdFromRaw(number, headerRaw),
    block_header: { raw_data: raw as BlockHeaderRaw },
  };
  const sig = pbBytes(hf, 2);
  if (sig?.length && block.block_header) block.block_header.witness_signature = hex(sig);
  // java-tron's JSON has no `transactions` key for an empty block.
  if (txs.length > 0) block.transactions = txs;
  return { block, exact: { headerRaw, transactions } };
}
