/**
 * The `transfer.confirmed` event as stored and as delivered (SPEC §Event). The webhook body is
 * the JSON of `EventPayload` with its fields in SPEC order, serialised deterministically, so every
 * attempt sends the same bytes and `X-Signature` is computed over exactly those bytes.
 */
import { createHmac } from 'node:crypto';
import { formatAmount } from '../tron/amount.js';
import { type StandardWebhookHeaders, standardWebhookHeaders } from './standard-webhooks.js';

export const API_VERSION = '2026-08';
export const EVENT_TYPE = 'transfer.confirmed';

/** SPEC §Event. Amounts are decimal strings; block_timestamp is ISO 8601 UTC with milliseconds. */
export interface EventPayload {
  api_version: string;
  event_id: string;
  type: 'transfer.confirmed';
  direction: 'incoming' | 'outgoing';
  network: 'mainnet' | 'nile';
  asset: 'USDT' | 'TRX';
  tx_id: string;
  event_index: number;
  block_number: number;
  block_timestamp: string;
  from: string;
  to: string;
  amount_raw: string;
  amount: string;
  watch_id: string;
  contract: string | null;
}

/** An `events` row as read by `SELECT * FROM events` (amount_raw numeric → string). */
export interface EventRow {
  id: string;
  account_id: string;
  watch_id: string;
  network: string;
  direction: string;
  asset: string;
  tx_id: string;
  event_index: number;
  block_number: number;
  block_timestamp: Date;
  from_address: string;
  to_address: string;
  amount_raw: string;
  contract: string | null;
  created_at: Date;
}

/** Shape a stored event as SPEC's Event. */
export function eventPayload(row: EventRow): EventPayload {
  return {
    api_version: API_VERSION,
    event_id: row.id,
    type: EVENT_TYPE,
    direction: row.direction as EventPayload['direction'],
    network: row.network as EventPayload['network'],
    asset: row.asset as EventPayload['asset'],
    tx_id: row.tx_id,
    event_index: row.event_index,
    block_number: row.block_number,
    block_timestamp: row.block_timestamp.toISOString(),
    from: row.from_address,
    to: row.to_address,
    amount_raw: row.amount_raw,
    amount: formatAmount(BigInt(row.amount_raw)),
    watch_id: row.watch_id,
    contract: row.contract,
  };
}

/** The webhook body: UTF-8 JSON of the payload (deterministic: fixed key order). */
export function serializeEvent(e: EventPayload): Buffer {
  return Buffer.from(JSON.stringify(e), 'utf8');
}

/**
 * SPEC §Webhook signature: lowercase hex HMAC-SHA256, key = the watch's secret string exactly as
 * returned at creation (`whsec_…`, UTF-8), message = the raw body bytes.
 */
export function signBody(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * The headers sent beside X-Signature (issue 5 item 5): Standard Webhooks' `webhook-id` (the
 * event id), `webhook-timestamp` (unix seconds of the attempt's start) and `webhook-signature`
 * (src/delivery/standard-webhooks.ts), signed over the same body bytes.
 * @throws RangeError on a malformed secret (the message never contains it).
 */
export function extraSignatureHeaders(
  secret: string,
  eventId: string,
  body: Buffer,
  attemptStartedAt: Date,
): StandardWebhookHeaders {
  return standardWebhookHeaders(secret, eventId, body, attemptStartedAt.getTime() / 1000);
}
