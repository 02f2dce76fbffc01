/**
 * The chat message of one event (issue 13 item 3): one message per event, Bot API parse mode
 * HTML, every value escaped (escapeHtml), amounts exact (formatAmountDigits: the stored integer
 * string, never a float). Example (incoming USDT):
 *
 * ```
 * ⬇️ Incoming 50 USDT
 * Address: TFim…            (the watched side: `to` when incoming, `from` when outgoing)
 * From: TRSqa…              (the counterparty: "To:" when outgoing)
 * Time: 2026-01-08 13:36:54 UTC   (the block's time)
 * Block: 79072107
 * Transaction (a link to https://tronscan.org/#/transaction/<tx_id>)
 * ```
 *
 * Source of every value: the stored event (SPEC §Event; src/events/event.ts EventRow).
 */
import { isLivemode } from '../common/environment.js';
import type { EventRow } from '../events/event.js';
import { formatAmountDigits } from '../tron/amount.js';

/** The explorer page of a transaction (issue 13: tronscan). */
export function explorerTxUrl(txId: string): string {
  return `https://tronscan.org/#/transaction/${encodeURIComponent(txId)}`;
}

/**
 * Escape text for Bot API HTML: `&`, `<`, `>` and, for attribute values, `"` (the only entities
 * the Bot API's HTML mode requires: https://core.telegram.org/bots/api#html-style).
 */
export function escapeHtml(s: string): string {
  return s
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** `2026-01-08 13:36:54 UTC` (the block time, seconds, UTC). */
export function utcTime(d: Date): string {
  return `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** What a chat message shows of an event. */
export interface ChatMessageParts {
  direction: 'incoming' | 'outgoing';
  asset: string;
  /** Exact decimal, e.g. "0.000001". */
  amount: string;
  /** The watched address (base58). */
  address: string;
  /** The other side of the transfer (base58). */
  counterparty: string;
  blockTime: string;
  blockNumber: number;
  txUrl: string;
}

/** The values a message shows, from a stored event. @throws RangeError on a malformed amount. */
export function messageParts(e: EventRow): ChatMessageParts {
  const incoming = e.direction !== 'outgoing';
  return {
    direction: incoming ? 'incoming' : 'outgoing',
    asset: e.asset,
    amount: formatAmountDigits(e.amount_raw),
    address: incoming ? e.to_address : e.from_address,
    counterparty: incoming ? e.from_address : e.to_address,
    blockTime: utcTime(e.block_timestamp),
    blockNumber: Number(e.block_number),
    txUrl: explorerTxUrl(e.tx_id),
  };
}

/**
 * The HTML text of an event's chat message (see the file's comment).
 * @throws RangeError on a malformed amount (a stored amount is always canonical).
 */
export function formatChatMessage(e: EventRow): string {
  const p = messageParts(e);
  const head = p.direction === 'incoming' ? '⬇️ Incoming' : '⬆️ Outgoing';
  const side = p.direction === 'incoming' ? 'From' : 'To';
  const lines = [
    `<b>${head} ${escapeHtml(p.amount)} ${escapeHtml(p.asset)}</b>`,
    `Address: <code>${escapeHtml(p.address)}</code>`,
    `${side}: <code>${escapeHtml(p.counterparty)}</code>`,
    `Time: ${escapeHtml(p.blockTime)}`,
    `Block: ${escapeHtml(String(p.blockNumber))}`,
  ];
  // A test-mode event (issue 32) is never money: it says so first, and links to no explorer.
  if (!isLivemode(e.network)) {
    return [
      '🧪 <b>TEST MODE</b>: not a real deposit',
      ...lines,
      `Transaction ${escapeHtml(e.tx_id)} (test)`,
    ].join('\n');
  }
  return [
    ...lines,
    `<a href="${escapeHtml(p.txUrl)}">Transaction ${escapeHtml(e.tx_id.slice(0, 16))}…</a>`,
  ].join('\n');
}
