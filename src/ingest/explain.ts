/**
 * Explain a transaction for a watch (issue 20 item 3): did it produce an event for the watch, and
 * if not, why. The answer is computed the way ingest computes events, not guessed:
 *
 * 1. An event of the watch for this tx id already stored → `produced` (no node request): the
 *    transfers that made its events, and the final head the ingester last saw (the providers'
 *    solidified head or the light client's final block, whichever is higher).
 * 2. Otherwise the node group of the watch's network (mainnet's; Nile's for a test watch, issue 32)
 *    locates the transaction (`/wallet/gettransactioninfobyid`, the full-node view): unknown →
 *    `not_found` (also when the deployment follows no chain of that network: a test watch without
 *    TRON_TESTNET_NODE_URL, or a test transfer's `test_…` id); in a block above the solidified head →
 *    `unsolidified` (events are made from solidified blocks only, DESIGN invariant 1).
 * 3. The solidified block is read through NodeGroup.getSolidifiedBlock (verified, agreed by the
 *    quorum, as ingest reads it), its transfers extracted by extractTransfers (src/tron/extract.ts)
 *    and matched against the watch by matchTransfers (src/ingest/match.ts), with the candidate
 *    rules of the ingester's watch query (src/ingest/commit.ts: ACTIVE, `active_from_block <
 *    block`). The first rule that keeps the transaction out, in this order, is the reason:
 *    `failed` (the transaction or its receipt did not succeed), `not_usdt_or_trx` (it moves no USDT
 *    and no TRX: another contract, TRC-10, staking, a zero amount), `address_not_involved`,
 *    `asset_filtered`, `direction_filtered`, `before_activation` (in a block at or below the
 *    watch's activation block: created or resumed after it), `watch_paused`, `not_scanned_yet`
 *    (it matches; ingest has not committed that block yet), `not_recorded` (it matches and the
 *    block is behind the watermark, but no event is stored: the block was not ingested by this
 *    deployment, e.g. before INGEST_START_BLOCK).
 *
 * Addresses in answers are base58; amounts as in the Event (amount_raw: smallest units, decimal).
 */
import type { Queryable } from '../db/pool.js';
import { hexToBase58, usdtContractHexOf } from '../tron/address.js';
import { formatAmount } from '../tron/amount.js';
import { extractTransfers } from '../tron/extract.js';
import type { BlockJson, TransactionInfoJson, TransactionJson, Transfer } from '../tron/types.js';
import type { WatchRow } from '../watches/watches.js';
import { matchTransfers } from './match.js';

/** Why a transaction did or did not produce an event for a watch (module doc, in check order). */
export const EXPLAIN_REASONS = [
  'produced',
  'not_found',
  'unsolidified',
  'failed',
  'not_usdt_or_trx',
  'address_not_involved',
  'asset_filtered',
  'direction_filtered',
  'before_activation',
  'watch_paused',
  'not_scanned_yet',
  'not_recorded',
] as const;
export type ExplainReason = (typeof EXPLAIN_REASONS)[number];

/** One USDT or TRX transfer of the transaction, as extracted. */
export interface ExplainedTransfer {
  asset: 'USDT' | 'TRX';
  event_index: number;
  /** base58 */
  from: string;
  /** base58 */
  to: string;
  /** Smallest units (sun, or USDT base units), decimal string. */
  amount_raw: string;
  /** amount_raw / 10^6, shortest decimal form. */
  amount: string;
}

/** The answer (GET /v1/watches/{id}/transactions/{tx_id}, the MCP tool explain_transaction). */
export interface Explanation {
  tx_id: string;
  watch_id: string;
  produced_event: boolean;
  reason: ExplainReason;
  /** One or two sentences for a person. */
  message: string;
  /** The block the transaction is in; null when not found (or when answered from stored events). */
  block_number: number | null;
  /** The solidified head the answer was computed against; null when not asked. */
  solidified_head: number | null;
  /** The watch's events for this transaction (`evt_…`), when produced. */
  event_ids: string[];
  /** The transaction's USDT and TRX transfers, as ingest extracts them (empty when none/unread). */
  transfers: ExplainedTransfer[];
}

/** What explain needs of the chain: the node group (src/tron/node-group.ts) has this shape. */
export interface ChainReader {
  getHeads(signal?: AbortSignal): Promise<{ solidified: number; head: number }>;
  getTransactionBlock(txId: string, signal?: AbortSignal): Promise<number | undefined>;
  getSolidifiedBlock(
    n: number,
    signal?: AbortSignal,
  ): Promise<{ block: BlockJson; infos: TransactionInfoJson[] }>;
}

function transferView(t: Transfer): ExplainedTransfer {
  return {
    asset: t.asset,
    event_index: t.eventIndex,
    from: hexToBase58(t.from),
    to: hexToBase58(t.to),
    amount_raw: t.amountRaw.toString(),
    amount: formatAmount(t.amountRaw),
  };
}

/** Why a transaction whose transfers extraction found none moved nothing. */
function failure(
  block: BlockJson,
  infos: readonly TransactionInfoJson[],
  txId: string,
): string | undefined {
  const tx = (block.transactions ?? []).find((t: TransactionJson) => t.txID === txId);
  const ret = tx?.ret?.[0]?.contractRet;
  if (ret !== undefined && ret !== 'SUCCESS') return `the transaction failed (${ret})`;
  const info = infos.find((i) => i.id === txId);
  if (info?.result === 'FAILED') {
    return `the transaction failed (${info.receipt?.result ?? 'FAILED'})`;
  }
  const receipt = info?.receipt?.result;
  if (typeof receipt === 'string' && receipt !== 'SUCCESS') {
    return `its receipt says ${receipt}`;
  }
  return undefined;
}

/**
 * The verdict on one solidified block for a watch that has no stored event of `txId`: pure (the
 * extraction and matching ingest uses). `scannedThrough`: the ingest watermark (null: none yet).
 * @throws MalformedBlockError as extractTransfers.
 */
export function explainInBlock(
  block: BlockJson,
  infos: readonly TransactionInfoJson[],
  txId: string,
  watch: Pick<
    WatchRow,
    | 'id'
    | 'account_id'
    | 'address_hex'
    | 'asset_filter'
    | 'direction'
    | 'channel'
    | 'status'
    | 'active_from_block'
    | 'network'
  >,
  blockNumber: number,
  scannedThrough: number | null,
): { reason: ExplainReason; message: string; transfers: ExplainedTransfer[] } {
  // The watch's network's USDT (Nile's for a test watch), as its ingester extracts it.
  const all = extractTransfers(block, infos, { usdt: usdtContractHexOf(watch.network) }).filter(
    (t) => t.txId === txId,
  );
  const transfers = all.map(transferView);
  if (all.length === 0) {
    const failed = failure(block, infos, txId);
    if (failed) {
      return {
        reason: 'failed',
        message: `${failed}: a failed transaction moves nothing, so no event is made.`,
        transfers,
      };
    }
    return {
      reason: 'not_usdt_or_trx',
      message:
        'The transaction moves no USDT (TRC-20 Transfer log of the USDT contract) and no TRX (TransferContract), or only a zero amount: nothing tronwatch reports.',
      transfers,
    };
  }
  const row = { ...watch };
  const involved = all.filter((t) => t.from === watch.address_hex || t.to === watch.address_hex);
  if (involved.length === 0) {
    return {
      reason: 'address_not_involved',
      message: `None of its transfers is from or to the watched address ${hexToBase58(watch.address_hex)}.`,
      transfers,
    };
  }
  if (matchTransfers(all, [{ ...row, asset_filter: 'ALL', direction: 'both' }]).length > 0) {
    if (matchTransfers(all, [{ ...row, direction: 'both' }]).length === 0) {
      const assets = [...new Set(involved.map((t) => t.asset))].join(' and ');
      return {
        reason: 'asset_filtered',
        message: `It moves ${assets} for the address, and the watch's asset_filter is ${watch.asset_filter}.`,
        transfers,
      };
    }
    if (matchTransfers(all, [row]).length === 0) {
      const dirs = [
        ...new Set(involved.map((t) => (t.to === watch.address_hex ? 'incoming' : 'outgoing'))),
      ].join(' and ');
      return {
        reason: 'direction_filtered',
        message: `It is ${dirs} for the address, and the watch's direction is ${watch.direction}.`,
        transfers,
      };
    }
  }
  if (blockNumber <= watch.active_from_block) {
    return {
      reason: 'before_activation',
      message: `It is in block ${blockNumber}, at or before the watch's activation block ${watch.active_from_block}: a watch matches only blocks after it was created or last resumed.`,
      transfers,
    };
  }
  if (watch.status !== 'ACTIVE') {
    return {
      reason: 'watch_paused',
      message:
        'The watch is paused: a paused watch matches nothing, and transfers made while it was paused are never reported.',
      transfers,
    };
  }
  if (scannedThrough === null || scannedThrough < blockNumber) {
    return {
      reason: 'not_scanned_yet',
      message: `It matches the watch; ingest has not committed block ${blockNumber} yet (scanned through ${scannedThrough ?? 'none'}): the event will follow.`,
      transfers,
    };
  }
  return {
    reason: 'not_recorded',
    message: `It matches the watch, but block ${blockNumber} was not ingested by this deployment (it starts later, INGEST_START_BLOCK), so no event was made.`,
    transfers,
  };
}

/**
 * Explain `txId` for `watch` (module doc). The caller has checked the watch is the caller's and
 * `txId` is 64 lowercase hex (or a test transfer's `test_…` id, which only stored events answer).
 * @param chain the node group of the watch's own network (mainnet's for a live watch, Nile's for a
 *   test watch, issue 32); null when this deployment follows no chain of that network (a test
 *   watch without TRON_TESTNET_NODE_URL): then only the stored events answer, else `not_found`
 *   saying so. Never another network's reader: its verdict would be about another chain.
 * @throws NodeError / BlockCheckError / QuorumDisagreementError from the node group (the route
 *   answers 503); MalformedBlockError.
 */
export async function explainTransaction(
  db: Queryable,
  chain: ChainReader | null,
  watch: WatchRow,
  txId: string,
  signal?: AbortSignal,
): Promise<Explanation> {
  const base = { tx_id: txId, watch_id: watch.id };
  const { rows: events } = await db.query<{
    id: string;
    block_number: number;
    asset: 'USDT' | 'TRX';
    event_index: number;
    from_address: string;
    to_address: string;
    amount_raw: string;
  }>(
    `SELECT id, block_number, asset, event_index, from_address, to_address,
            amount_raw::text AS amount_raw
       FROM events WHERE watch_id = $1 AND tx_id = $2 ORDER BY event_index`,
    [watch.id, txId],
  );
  if (events.length > 0) {
    // Answered from the stored events (no node request): their transfers, and the final head as
    // the ingester last saw it: the greater of the providers' solidified head (chain_head, polled)
    // and the block the light client last proved final itself (light_client_state, written with
    // the events). The light client may prove a block final before the next poll sees the
    // providers' head reach it; an event's block is never above the head reported with it.
    const { rows: head } = await db.query<{ solidified: string | null }>(
      `SELECT GREATEST(
                (SELECT solidified_block_number FROM chain_head WHERE network = $1),
                (SELECT final_number FROM light_client_state WHERE network = $1))::text
                AS solidified`,
      [watch.network],
    );
    const solidified = head[0]?.solidified ?? undefined;
    return {
      ...base,
      produced_event: true,
      reason: 'produced',
      message: `It produced ${events.length === 1 ? 'an event' : `${events.length} events`} for this watch.`,
      block_number: Number(events[0]?.block_number),
      solidified_head: solidified === undefined ? null : Number(solidified),
      event_ids: events.map((e) => e.id),
      transfers: events.map((e) => ({
        asset: e.asset,
        event_index: Number(e.event_index),
        from: e.from_address,
        to: e.to_address,
        amount_raw: e.amount_raw,
        amount: formatAmount(BigInt(e.amount_raw)),
      })),
    };
  }
  const notFound = (message: string): Explanation => ({
    ...base,
    produced_event: false,
    reason: 'not_found',
    message,
    block_number: null,
    solidified_head: null,
    event_ids: [],
    transfers: [],
  });
  if (chain === null || !/^[0-9a-f]{64}$/.test(txId)) {
    return notFound(
      chain === null
        ? `It produced no event for this watch, and this deployment follows no ${watch.network} chain (for the test network: TRON_TESTNET_NODE_URL is not set), so the transaction cannot be looked up: only test transfers (POST /v1/test/transfers) make its events.`
        : 'No test transfer of this watch has this id.',
    );
  }
  const blockNumber = await chain.getTransactionBlock(txId, signal);
  if (blockNumber === undefined) {
    return {
      ...base,
      produced_event: false,
      reason: 'not_found',
      message: `The node does not know this transaction: not on ${watch.network}, not yet in a block, or mistyped.`,
      block_number: null,
      solidified_head: null,
      event_ids: [],
      transfers: [],
    };
  }
  const heads = await chain.getHeads(signal);
  if (blockNumber > heads.solidified) {
    return {
      ...base,
      produced_event: false,
      reason: 'unsolidified',
      message: `It is in block ${blockNumber}, not solidified yet (solidified head ${heads.solidified}, ${blockNumber - heads.solidified} block(s) to go): events are made from solidified blocks only.`,
      block_number: blockNumber,
      solidified_head: heads.solidified,
      event_ids: [],
      transfers: [],
    };
  }
  const [b, cursor] = await Promise.all([
    chain.getSolidifiedBlock(blockNumber, signal),
    db.query<{ block_number: number }>(
      'SELECT block_number FROM chain_cursor WHERE network = $1 AND block_timestamp IS NOT NULL',
      [watch.network],
    ),
  ]);
  const scanned = cursor.rows[0]?.block_number;
  const verdict = explainInBlock(
    b.block,
    b.infos,
    txId,
    watch,
    blockNumber,
    scanned === undefined ? null : Number(scanned),
  );
  return {
    ...base,
    produced_event: false,
    ...verdict,
    block_number: blockNumber,
    solidified_head: heads.solidified,
    event_ids: [],
  };
}
