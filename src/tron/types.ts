/**
 * Core types and glossary.
 *
 * - block: a java-tron block as `/walletsolidity/getblockbynum` returns it (visible=false: every
 *   address is 21-byte hex with the 0x41 prefix). Numbered from 0; one every 3 s on mainnet.
 * - solidified block: a block confirmed by 2/3+ of the super representatives, final and never
 *   reverted; the solidified head runs ~18 blocks (~54 s) behind the newest produced block.
 *   tronwatch reads nothing above the solidified head (DESIGN invariant 1).
 * - transaction info: `/walletsolidity/gettransactioninfobyblocknum`'s entry for one transaction:
 *   its receipt (`receipt.result`) and event logs (`log`). One entry per transaction of the block.
 * - transfer log: a TRC-20 `Transfer(address,address,uint256)` event log; for USDT it is the only
 *   record of a token movement (covers transfer, transferFrom and transfers made by contracts).
 * - transfer: one movement of TRX or USDT that tronwatch reports (see extract.ts for the rules).
 * - sun: 10^-6 TRX, the unit of TRX amounts. USDT also has 6 decimals.
 * - base58check: the user-facing address encoding (version byte 0x41, `T…`); internally
 *   addresses are compared as lowercase 42-char hex (21 bytes).
 *
 * java-tron's JSON omits every field that holds its protobuf default (0, "", false, empty list),
 * so every field below is optional unless the node always sends it; integers may exceed 2^53 and
 * are then parsed as bigint (see json.ts).
 */

/** An integer from node JSON: a number when it is safe (< 2^53), a bigint otherwise. */
export type NodeInt = number | bigint;

export interface BlockHeaderRaw {
  number?: NodeInt;
  timestamp?: NodeInt;
  parentHash?: string;
  txTrieRoot?: string;
  witness_address?: string;
  version?: number;
}

export interface ContractJson {
  type?: string;
  parameter?: { value?: Record<string, unknown>; type_url?: string };
}

export interface TransactionJson {
  txID: string;
  ret?: Array<{ contractRet?: string; fee?: NodeInt }>;
  signature?: string[];
  raw_data?: { contract?: ContractJson[]; timestamp?: NodeInt; [k: string]: unknown };
  raw_data_hex?: string;
}

export interface BlockJson {
  blockID?: string;
  block_header?: { raw_data?: BlockHeaderRaw; witness_signature?: string };
  transactions?: TransactionJson[];
}

export interface LogJson {
  /** 20-byte hex of the emitting contract, WITHOUT the 0x41 prefix. */
  address?: string;
  topics?: string[];
  data?: string;
}

export interface TransactionInfoJson {
  id: string;
  blockNumber?: NodeInt;
  blockTimeStamp?: NodeInt;
  contractResult?: string[];
  contract_address?: string;
  /** 'FAILED' when the transaction failed; absent on success. */
  result?: string;
  resMessage?: string;
  receipt?: { result?: string; [k: string]: unknown };
  log?: LogJson[];
  internal_transactions?: unknown[];
  [k: string]: unknown;
}

export type Asset = 'USDT' | 'TRX';

/**
 * How a transfer was established (the `proof` field of events and webhooks, SPEC §Events):
 * - `signed`: read from signed bytes whose transaction list was proven against the block header
 *   (a TRX TransferContract, or a direct USDT transfer/transferFrom whose one Transfer log is
 *   exactly what its signed call data implies);
 * - `quorum`: k ≥ 2 providers agreed on it, but no header commits to it (a Transfer log emitted
 *   inside a call of another contract, or a block whose root only the providers' agreement vouches for);
 * - `provider`: one provider's word (such a log with quorum 1).
 */
export type ProofLevel = 'signed' | 'quorum' | 'provider';
export const PROOF_LEVELS: readonly ProofLevel[] = ['signed', 'quorum', 'provider'];

/**
 * The `proof` of a stored event: a {@link ProofLevel} for a transfer read from a chain, or `test`
 * for a test deposit triggered through the API (`POST /v1/test/transfers`, issue 40 item 11): on
 * no chain, established by nobody, never money. Only a test watch's events can carry it.
 */
export type EventProof = ProofLevel | 'test';
export const EVENT_PROOFS: readonly EventProof[] = [...PROOF_LEVELS, 'test'];

/** One transfer extracted from a solidified block. Addresses are lowercase 41-hex (42 chars). */
export interface Transfer {
  blockNumber: number;
  /** Block timestamp, ms since epoch (UTC). */
  blockTimestamp: number;
  txId: string;
  /** Index of the transfer log in the transaction's log list; 0 for native TRX. */
  eventIndex: number;
  asset: Asset;
  from: string;
  to: string;
  /** Amount in the smallest unit (sun, or USDT base units); always > 0. */
  amountRaw: bigint;
  /** 41-hex of the TRC-20 contract; null for TRX. */
  contract: string | null;
  /** How it was established (ProofLevel); set by extractTransfers' `proof` option. */
  proof?: ProofLevel;
}

/** A block's identity and time, as extraction and the cursor need them. */
export interface BlockRef {
  number: number;
  id: string;
  timestamp: number;
}
