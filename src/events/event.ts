/**
 * The one owner of the `transfer.confirmed` Event (SPEC §Event, §EventWithDelivery): its JSON
 * Schema (validation, serialisation and the OpenAPI document), its static type, the version and
 * type constants, the builder that turns a stored `events` row into the payload, and the writer
 * that turns a page row's text into EventWithDelivery JSON. Delivery signs what `serializeEvent`
 * gives; the API, the console, the demo and the tests import the schema and types from here.
 *
 * Glossary: an *event* is one confirmed transfer matched by one watch (`evt_…`, a pure function of
 * watch, tx_id and event_index; DESIGN invariant 2); its *notification* (`ntf_…`) is the outbox
 * row that delivers it; an *attempt* is one try of that delivery.
 */
import { type Static, Type as T } from '@sinclair/typebox';
import { isLivemode } from '../common/environment.js';
import { NullableString, StringEnum } from '../common/schema.js';
import { formatAmount, formatAmountDigits } from '../tron/amount.js';
import { EVENT_PROOFS, type EventProof } from '../tron/types.js';
import type { Metadata } from '../watches/metadata.js';

/** SPEC §Versioning: the payload's `api_version` and the OpenAPI document's `info.version`. */
export const API_VERSION = '2026-08';
/** SPEC §Events: the type of every event (a confirmed transfer). */
export const EVENT_TYPE = 'transfer.confirmed';
/**
 * Additive: the type of a test delivery (the console's "Send test event"). Never a transfer: a
 * receiver that checks `type` never credits it; it also says `test: true` and moves 0.
 */
export const TEST_EVENT_TYPE = 'webhook.test';

const eventMembers = {
  api_version: T.String({ description: 'Currently `2026-08`.', examples: [API_VERSION] }),
  event_id: T.String({ description: 'Deduplication key (`evt_…`).' }),
  type: StringEnum([EVENT_TYPE] as const),
  direction: StringEnum(['incoming', 'outgoing'] as const, {
    description: 'The side of the transfer that this watch matched.',
  }),
  network: StringEnum(['mainnet', 'nile'] as const, {
    description: 'The chain: `mainnet` for live events, `nile` (TRON’s testnet) for test events.',
  }),
  livemode: T.Boolean({
    description:
      'Additive (test mode): true for a live event (mainnet, real money); false for a test event (a `tw_test_` environment’s: a deposit triggered through POST /v1/test/transfers, or Nile). A receiver that credits real deposits refuses any event whose livemode is not true. Test deliveries also carry the header `Tronwatch-Test-Mode: true`.',
  }),
  asset: StringEnum(['USDT', 'TRX'] as const),
  tx_id: T.String({ description: 'Transaction identifier.' }),
  event_index: T.Integer({
    minimum: 0,
    description: 'Transfer log index. Always 0 for native TRX.',
  }),
  block_number: T.Integer({ minimum: 0 }),
  block_timestamp: T.String({
    format: 'date-time',
    description: 'ISO 8601, millisecond precision, UTC.',
  }),
  from: T.String({ description: 'Sender address (base58).' }),
  to: T.String({ description: 'Recipient address (base58).' }),
  amount_raw: T.String({
    pattern: '^[0-9]+$',
    description: 'Integer string in the smallest unit (6 decimals).',
  }),
  amount: T.String({
    pattern: '^[0-9]+(\\.[0-9]+)?$',
    description: 'Human-readable decimal string, never a float (amount_raw / 10^6, shortest form).',
  }),
  watch_id: T.String({ description: 'Id of the watch that matched.' }),
  contract: T.Optional(
    NullableString({ description: 'TRC-20 contract address in base58. Null for native TRX.' }),
  ),
  proof: StringEnum(EVENT_PROOFS, {
    description:
      'Additive. How the transfer was established: `signed` = read from signed transaction bytes whose list is proven against the block header, on mainnet in a block tronwatch itself proved final from the super representatives’ signatures (19 of the 27 SRs built on it; a TRX transfer, a direct USDT transfer/transferFrom); `quorum` = two or more node providers agreed on it, but no header commits to it (a USDT Transfer log emitted inside a call of another contract: routers, batch senders, contract wallets); `provider` = one provider’s word. Credit a large `provider` deposit only after a check of your own. `test` = a test deposit triggered through the API (`POST /v1/test/transfers`, test environment only): on no chain, never money.',
  }),
  metadata: T.Optional(
    T.Unsafe<Metadata>({
      type: 'object',
      additionalProperties: { type: 'string' },
      description:
        "Additive, present only when the watch had metadata when the transfer was matched: the watch's `metadata` (your customer, order or invoice reference, string values), as it was then.",
    }),
  ),
};

/** SPEC §Event: the webhook body and the stored record. */
export const EventSchema = T.Object(eventMembers, {
  $id: 'Event',
  description: 'A transfer.confirmed event (SPEC §Event): the webhook body and the stored record.',
});

/**
 * Additive: the body of a test delivery. The Event's fields (so a receiver exercises its parsing
 * and signature checks on the same shape), but `type` is `webhook.test`, `test` is true, the
 * amount is 0 and tx_id is 64 zeros: nothing about it can be mistaken for money.
 */
export const TestEventSchema = T.Object(
  {
    ...eventMembers,
    type: StringEnum([TEST_EVENT_TYPE] as const),
    test: T.Literal(true, { description: 'Always true: this is a test delivery, not a transfer.' }),
  },
  {
    $id: 'TestEvent',
    description:
      'A test delivery (webhook.test), sent by "Send test event": signed like a real delivery, never a transfer, never stored.',
  },
);

/** A test delivery's body. */
export type TestEvent = Static<typeof TestEventSchema> & { contract: string | null };

/** The body of a test delivery for `row` (its amount is forced to 0), fields in Event order. */
export function testEventPayload(row: EventRow): TestEvent {
  return { ...eventPayload({ ...row, amount_raw: '0' }), type: TEST_EVENT_TYPE, test: true };
}

/** Why a notification is held (migration 095; src/ingest/confirm.ts). */
export const HELD_REASONS = ['awaiting_confirmation', 'single_provider', 'contradicted'] as const;

/** `delivery.held` (additive, issue 36 item 5): why a PENDING notification is not delivered. */
export const HeldStateSchema = T.Object(
  {
    reason: StringEnum(HELD_REASONS, {
      description:
        '`awaiting_confirmation`: only one provider reported this transfer, a second is being asked; `single_provider`: only one provider is configured, so nothing can confirm it until the operator adds one (or opts in to delivering such events); `contradicted`: a provider answered a receipt that says otherwise: not delivered.',
    }),
    since: T.String({
      format: 'date-time',
      description: 'When the hold began. UTC, microseconds.',
    }),
  },
  { $id: 'HeldState' },
);
export type HeldState = Static<typeof HeldStateSchema>;

/** SPEC §EventWithDelivery `delivery`: the event's newest notification. */
export const DeliveryStateSchema = T.Object({
  notification_id: T.String(),
  status: StringEnum(['PENDING', 'DELIVERED', 'DEAD'] as const),
  attempts: T.Integer({ minimum: 0, description: 'Number of delivery attempts.' }),
  created_at: T.String({ format: 'date-time', description: 'UTC, microsecond precision.' }),
  held: T.Unsafe<HeldState | null>({
    anyOf: [HeldStateSchema, { type: 'null' }],
    description:
      "Additive (issue 36): not null while this PENDING notification is held, not delivered: the transfer is `proof: provider` (a USDT Transfer log inside another contract's call, reported by one provider; no block header commits to it) and waits for a second provider to confirm it. When one does, `proof` becomes `quorum`, `held` null and the delivery is made. `status` stays `PENDING` meanwhile.",
  }),
});

/** SPEC §EventWithDelivery. */
export const EventWithDeliverySchema = T.Object(
  {
    ...eventMembers,
    delivery: T.Unsafe<DeliveryState | null>({
      anyOf: [DeliveryStateSchema, { type: 'null' }],
      description:
        "The event's newest notification. Null only for an event whose notification row is missing (never written so by tronwatch: e.g. a partial restore), so that one such row never hides the rest of a page.",
    }),
  },
  { $id: 'EventWithDelivery', description: 'An Event plus its delivery state.' },
);

/**
 * SPEC §Event. Amounts are decimal strings; block_timestamp is ISO 8601 UTC with milliseconds;
 * `contract` is always written (null for TRX) although the schema lets a reader treat it as optional.
 */
export type Event = Static<typeof EventSchema> & { contract: string | null };
/** SPEC §EventWithDelivery `delivery`. `attempts` 0..6; `created_at` ISO 8601 UTC, microseconds. */
export type DeliveryState = Static<typeof DeliveryStateSchema>;
/** SPEC §EventWithDelivery. */
export type EventWithDelivery = Event & { delivery: DeliveryState | null };

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
  /** How the transfer was established (migration 048). */
  proof: EventProof;
  created_at: Date;
  /** The watch's metadata copied at ingest (migration 085); null or absent: none. */
  metadata?: Metadata | null;
}

/** Shape a stored event as SPEC's Event, fields in SPEC order (the signed bytes depend on it). */
export function eventPayload(row: EventRow): Event {
  return {
    api_version: API_VERSION,
    event_id: row.id,
    type: EVENT_TYPE,
    direction: row.direction as Event['direction'],
    network: row.network as Event['network'],
    livemode: isLivemode(row.network),
    asset: row.asset as Event['asset'],
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
    proof: row.proof,
    // Only when set (additive): a payload without metadata is byte for byte what it was before.
    ...(row.metadata ? { metadata: row.metadata } : {}),
  };
}

/** The webhook body: UTF-8 JSON of the payload (deterministic: fixed key order). */
export function serializeEvent(e: Event | TestEvent): Buffer {
  return Buffer.from(JSON.stringify(e), 'utf8');
}

// ---------------------------------------------------------------------------------------------
// Page rows: one text column per event, written straight into JSON (src/events/list.ts explains
// why: the API's hot path).

/**
 * `timestamp` text as PostgreSQL writes it in the ISO DateStyle (its default, and what
 * node-postgres and PGlite assume): `2026-01-08 13:36:54.123456`, trailing fractional zeros
 * dropped (`…:54.1`, or no fraction at all).
 */
const PG_TIMESTAMP_RE = /^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?$/;

/**
 * ISO 8601 UTC instant from PostgreSQL's text of `ts AT TIME ZONE 'UTC'`, with `digits`
 * fractional digits (6: microseconds, for cursors; 3: milliseconds, SPEC §Event
 * block_timestamp), truncated as `to_char`'s US/MS would. Formatting here rather than with
 * to_char in SQL: three to_char per row cost PostgreSQL about a third of the page's time
 * (pgbench, prepared: 6,100 vs 9,000 pages/s).
 * @throws Error when the text is not ISO DateStyle (a server configured with another DateStyle)
 *   or the year has more than 4 digits.
 */
export function isoFromPgTimestamp(text: string, digits: 3 | 6): string {
  // test, not exec, then fixed positions: no match array and capture strings per timestamp.
  if (!PG_TIMESTAMP_RE.test(text))
    throw new Error(`unexpected timestamp text from PostgreSQL (DateStyle must be ISO): ${text}`);
  const fraction = text.length === 19 ? '000000' : `${text.slice(20)}00000`;
  return `${text.slice(0, 10)}T${text.slice(11, 19)}.${fraction.slice(0, digits)}Z`;
}

/**
 * Field separator of a row's single text column: the ASCII unit separator, which no field can
 * hold (ids, hex, base58, enum words, digits and timestamps only).
 */
const SEP = '\x1f';

/**
 * The SQL expression of one page row, for a query over `events e`: the event's fields and its
 * newest notification's, joined by SEP, timestamps as UTC text (no Date, so microseconds are
 * kept). Always EVENT_ROW_FIELDS fields: NULL columns are coalesced to '' (concat_ws would drop
 * them and shift every later field), and an event without a notification row gets four empty
 * delivery fields. The notification is a scalar subquery rather than a join: half the planning
 * time. An event has one notification per delivery chain (the ingester's, then one per
 * redelivery: DESIGN decisions "redelivery"); the newest is shown, read in index order
 * (notifications_event_created, migration 009), so no sort.
 */
export const EVENT_ROW_SQL = `concat_ws(E'\\x1f', e.id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
              e.event_index, e.block_number, e.block_timestamp AT TIME ZONE 'UTC', e.from_address,
              e.to_address, e.amount_raw, coalesce(e.contract, ''), e.created_at AT TIME ZONE 'UTC',
              coalesce((SELECT concat_ws(E'\\x1f', n.id, n.status, n.attempts, n.created_at AT TIME ZONE 'UTC',
                                       coalesce(n.held_reason, ''),
                                       coalesce((n.held_since AT TIME ZONE 'UTC')::text, ''))
                 FROM notifications n WHERE n.event_id = e.id
                ORDER BY n.created_at DESC LIMIT 1), E'\\x1f\\x1f\\x1f\\x1f\\x1f'), e.proof,
              coalesce(e.metadata::text, ''))`;

/** Fields of EVENT_ROW_SQL's text. */
const EVENT_ROW_FIELDS = 22;

/** The fields of one row, in EVENT_ROW_SQL's order. */
export type EventRowFields = [
  id: string,
  watchId: string,
  network: string,
  direction: string,
  asset: string,
  txId: string,
  eventIndex: string,
  blockNumber: string,
  blockTs: string,
  from: string,
  to: string,
  amountRaw: string,
  contract: string,
  createdAt: string,
  notificationId: string,
  status: string,
  attempts: string,
  deliveryCreatedAt: string,
  /** The notification's held_reason (migration 095), '' when not held. */
  heldReason: string,
  /** Its held_since, '' when not held. */
  heldSince: string,
  proof: string,
  /** jsonb text of the event's metadata (its control characters escaped: never SEP); '' none. */
  metadata: string,
];

/**
 * Split a row text of EVENT_ROW_SQL.
 * @throws Error when it does not have EVENT_ROW_FIELDS fields (a row not written by
 *   EVENT_ROW_SQL: a bug, refused loudly rather than misread).
 */
export function splitEventRow(line: string): EventRowFields {
  const f = line.split(SEP);
  if (f.length !== EVENT_ROW_FIELDS)
    throw new Error(`event row has ${f.length} fields, not ${EVENT_ROW_FIELDS}`);
  return f as EventRowFields;
}

/**
 * Any character outside those a row may be written with as is: a character JSON requires to be
 * escaped (RFC 8259 §7: quotation mark, reverse solidus, U+0000–U+001F) other than SEP, or a
 * UTF-16 surrogate (JSON.stringify escapes a lone one). No stored field holds one (they are ids,
 * hex, base58, enum words, digits and timestamps), so a row is written into the page as is; a row
 * that does hold one is written through JSON.stringify instead (correct, slower), never as broken
 * or forged JSON. (A negated class: ~35% cheaper than the positive one on 400-character rows.)
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: SEP (U+001F) is allowed by name.
const NOT_PLAIN = /[^\x1f-\x21\x23-\x5b\x5d-\ud7ff\ue000-\uffff]/;

/** The row as SPEC's EventWithDelivery object, fields in SPEC order (as eventPayload has them). */
export function eventRowObject(f: EventRowFields): EventWithDelivery {
  return {
    api_version: API_VERSION,
    event_id: f[0],
    type: EVENT_TYPE,
    direction: f[3] as Event['direction'],
    network: f[2] as Event['network'],
    livemode: isLivemode(f[2]),
    asset: f[4] as Event['asset'],
    tx_id: f[5],
    event_index: Number(f[6]),
    block_number: Number(f[7]),
    block_timestamp: isoFromPgTimestamp(f[8], 3),
    from: f[9],
    to: f[10],
    amount_raw: f[11],
    amount: formatAmountDigits(f[11]),
    watch_id: f[1],
    contract: f[12] === '' ? null : f[12],
    proof: f[20] as EventProof,
    ...(f[21] === '' ? {} : { metadata: JSON.parse(f[21]) as Metadata }),
    delivery:
      f[14] === ''
        ? null
        : {
            notification_id: f[14],
            status: f[15] as DeliveryState['status'],
            attempts: Number(f[16]),
            created_at: isoFromPgTimestamp(f[17], 6),
            held:
              f[18] === ''
                ? null
                : {
                    reason: f[18] as HeldState['reason'],
                    since: isoFromPgTimestamp(f[19], 6),
                  },
          },
  };
}

/**
 * The row as JSON text: exactly JSON.stringify(eventRowObject(f)) (a test holds the two equal),
 * but written directly. Serialising 50 objects through the route's schema cost ~105 µs per page
 * and building them ~100 µs more, on a page whose whole budget is ~300 µs (2 cores, 3,000
 * pages/s). The integer fields are PostgreSQL's text of integer columns, i.e. JSON numbers.
 * Total: every row EVENT_ROW_SQL writes gives valid JSON (a missing notification: delivery null).
 */
export function eventRowJson(line: string, f: EventRowFields): string {
  // An event with metadata (free text of the account's) goes through JSON.stringify too.
  if (f[21] !== '' || NOT_PLAIN.test(line) || f[14] === '') {
    return JSON.stringify(eventRowObject(f));
  }
  const contract = f[12] === '' ? 'null' : `"${f[12]}"`;
  return (
    `{"api_version":"${API_VERSION}","event_id":"${f[0]}","type":"${EVENT_TYPE}",` +
    `"direction":"${f[3]}","network":"${f[2]}","livemode":${isLivemode(f[2])},` +
    `"asset":"${f[4]}","tx_id":"${f[5]}",` +
    `"event_index":${f[6]},"block_number":${f[7]},` +
    `"block_timestamp":"${isoFromPgTimestamp(f[8], 3)}","from":"${f[9]}","to":"${f[10]}",` +
    `"amount_raw":"${f[11]}","amount":"${formatAmountDigits(f[11])}","watch_id":"${f[1]}",` +
    `"contract":${contract},"proof":"${f[20]}","delivery":{"notification_id":"${f[14]}","status":"${f[15]}",` +
    `"attempts":${f[16]},"created_at":"${isoFromPgTimestamp(f[17], 6)}",` +
    `"held":${f[18] === '' ? 'null' : `{"reason":"${f[18]}","since":"${isoFromPgTimestamp(f[19], 6)}"}`}}}`
  );
}
