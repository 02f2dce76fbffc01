/**
 * Whether a provider's receipt confirms a transfer that one provider alone reported (issue 36
 * item 5; docs/trusting-the-node.md#held-events). A USDT Transfer log emitted inside another
 * contract's call (a router, a batch sender, a contract wallet) rests on the transaction's
 * receipt, which no block header commits to (java-tron hashes only the transactions into
 * `txTrieRoot`: `BlockCapsule.calcMerkleRoot`; receipts live in `TransactionInfo`, served by
 * `Wallet.getTransactionInfoById`). Such an event is `proof: provider` at quorum 1, and its
 * notifications are held until a second provider (and at least TRON_NODE_QUORUM) returns the same
 * facts: src/ingest/confirm.ts asks every provider with `/wallet/gettransactioninfobyid` and
 * counts, for each held event, the answers this module says confirm it.
 *
 * The facts compared are those matching and the payload read (DESIGN §Transfer extraction): the
 * transaction id, the block (number and time), success, and the log at `event_index` read as a
 * USDT Transfer (contract, from, to, value). Everything else in the receipt (fees, other logs)
 * is not part of the event and is not compared.
 */
import { usdtTransfer } from './extract.js';
import { toBigInt } from './json.js';
import type { LogJson, TransactionInfoJson } from './types.js';

/** A held event's transfer as stored (addresses lower-case 41-hex). */
export interface HeldTransfer {
  /** 64 lower-case hex. */
  txId: string;
  /** The log's position in the transaction's log list. */
  eventIndex: number;
  blockNumber: number;
  /** Block timestamp, ms since epoch. */
  blockTimestampMs: number;
  from: string;
  to: string;
  /** USDT base units (6 decimals). */
  amountRaw: bigint;
  /** The USDT contract, 41-hex. */
  contract: string;
}

/**
 * What one answer says about a held transfer:
 * - `confirms`: the same transaction, block, success and Transfer log;
 * - `unknown`: the provider does not know the transaction (`{}`: not synced that far, pruned):
 *   neither for nor against, asked again later;
 * - `contradicts`: a receipt that says otherwise (`why` in words, for the log and the console).
 */
export type ReceiptVerdict =
  | { kind: 'confirms' }
  | { kind: 'unknown'; why: string }
  | { kind: 'contradicts'; why: string };

function intOf(v: unknown): bigint | undefined {
  if (v === undefined || v === null) return undefined;
  try {
    return toBigInt(v);
  } catch {
    return undefined;
  }
}

/**
 * Compare a provider's `gettransactioninfobyid` answer with a held transfer.
 * @param info the answer; undefined when the node answered `{}`.
 * @param t the transfer as ingest stored it.
 * Never throws: a malformed answer is a contradiction (it does not say what ingest read).
 */
export function compareReceipt(
  info: TransactionInfoJson | undefined,
  t: HeldTransfer,
): ReceiptVerdict {
  if (info === undefined) return { kind: 'unknown', why: 'does not know the transaction' };
  if (String(info.id ?? '').toLowerCase() !== t.txId) {
    return { kind: 'contradicts', why: `answered another transaction (${String(info.id)})` };
  }
  const n = intOf(info.blockNumber);
  if (n !== BigInt(t.blockNumber)) {
    return {
      kind: 'contradicts',
      why: `puts it in block ${n === undefined ? 'none' : n.toString()}, not ${t.blockNumber}`,
    };
  }
  const ts = intOf(info.blockTimeStamp);
  if (ts !== BigInt(t.blockTimestampMs)) {
    return { kind: 'contradicts', why: `dates its block ${String(ts)}, not ${t.blockTimestampMs}` };
  }
  const result = info.receipt?.result;
  if (info.result === 'FAILED' || (result !== undefined && result !== 'SUCCESS')) {
    return {
      kind: 'contradicts',
      why: `says it did not succeed (${String(result ?? info.result)})`,
    };
  }
  const log = info.log?.[t.eventIndex] as LogJson | undefined;
  if (!log) {
    return {
      kind: 'contradicts',
      why: `has no log ${t.eventIndex} (${info.log?.length ?? 0} logs)`,
    };
  }
  let got: ReturnType<typeof usdtTransfer>;
  try {
    got = usdtTransfer(
      log,
      t.eventIndex,
      info,
      { number: t.blockNumber, id: '', timestamp: t.blockTimestampMs },
      t.contract,
    );
  } catch (err) {
    return { kind: 'contradicts', why: `log ${t.eventIndex} is malformed (${String(err)})` };
  }
  if (!got) {
    return { kind: 'contradicts', why: `log ${t.eventIndex} is not a USDT Transfer` };
  }
  const diff: string[] = [];
  if (got.from !== t.from) diff.push(`from ${got.from}`);
  if (got.to !== t.to) diff.push(`to ${got.to}`);
  if (got.amountRaw !== t.amountRaw) diff.push(`value ${got.amountRaw}`);
  if (diff.length > 0) {
    return { kind: 'contradicts', why: `log ${t.eventIndex} says ${diff.join(', ')}` };
  }
  return { kind: 'confirms' };
}
