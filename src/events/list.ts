/**
 * The events list (SPEC §GET /v1/events): an account's matched events with their delivery
 * state, newest first, paged backwards by creation time.
 *
 * Paging never skips or repeats (DESIGN invariant 8): `events.created_at` is unique per account
 * (migration 004) and strictly increasing with MICROSECOND precision (hundreds of events of one
 * block share a commit but not a created_at). So the cursor must keep all six fractional digits
 * end to end: `next_before` and `delivery.created_at` come from PostgreSQL's own text of the UTC
 * instant (isoFromPgTimestamp), and `before`/`since` reach SQL as text cast to timestamptz —
 * never through a JavaScript Date, which holds milliseconds only and would make a page boundary
 * inside one millisecond skip or repeat events.
 *
 * This is the API's hot path (issue 4: ≥ 3,000 pages of 50 per second on 2 cores), so the page is
 * written as JSON text straight from PostgreSQL's row text (eventsPageJson), without building
 * objects and serialising them again; listEvents parses that text for callers that want objects.
 * What it costs and saves is measured in the comments below and in `BENCH=api npm run bench`.
 *
 * Every event has exactly one notification (created in the same transaction by the ingester).
 */

import type { Queryable } from '../db/pool.js';
import { API_VERSION, EVENT_TYPE, type EventPayload } from '../delivery/payload.js';
import { formatAmountDigits } from '../tron/amount.js';

/** SPEC §EventWithDelivery `delivery`. */
export interface DeliveryState {
  notification_id: string;
  status: 'PENDING' | 'DELIVERED' | 'DEAD';
  /** Delivery attempts made so far (0..6). */
  attempts: number;
  /** When the notification was created: ISO 8601 UTC with microseconds. */
  created_at: string;
}

export type EventWithDelivery = EventPayload & { delivery: DeliveryState };

export interface ListEventsQuery {
  accountId: string;
  network: string;
  /** Page size, 1..200 (validated by the caller). */
  limit: number;
  /** Exclusive upper bound on created_at, as the caller wrote it (ISO 8601 text). */
  before?: string;
  /** Inclusive lower bound on created_at (ISO 8601 text). */
  since?: string;
  /** Only this watch's events (an unknown or foreign id simply matches nothing). */
  watchId?: string;
  /**
   * Return rows only while this API key is not revoked, checked by the page's own statement (an
   * API caller taken from the key cache, src/api/auth.ts). No row then means: an empty page, or
   * the key revoked; the caller asks the key lookup which.
   */
  activeKeyId?: string;
}

/** SPEC §GET /v1/events 200 body. */
export interface EventPage {
  data: EventWithDelivery[];
  /** created_at of the last item (microseconds) when more events follow; null at the end. */
  next_before: string | null;
}

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
 * hold (ids, hex, base58, enum words, digits and timestamps only). A row that does not split into
 * exactly ROW_FIELDS fields is refused loudly rather than misread.
 */
const SEP = '\x1f';
const ROW_FIELDS = 18;

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

/**
 * Rows fetched for a page of `limit`: the first bucket above it (a page and one row more, which
 * tells whether another page follows). The common sizes (1, 10, 20, 50, 100, 200) fetch exactly
 * limit + 1; others at most about twice that. Bounded so that clients cannot make PostgreSQL keep
 * one prepared statement per possible limit.
 */
const LIMIT_BUCKETS = [2, 11, 21, 51, 101, 201] as const;

/** The fields of one row, in the SELECT's concat_ws order. */
type RowFields = [
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
];

function splitRow(line: string): RowFields {
  const f = line.split(SEP);
  if (f.length !== ROW_FIELDS)
    throw new Error(`events page row has ${f.length} fields, not ${ROW_FIELDS}`);
  return f as RowFields;
}

/** The row as SPEC's EventWithDelivery object, fields in SPEC order (as eventPayload has them). */
function rowObject(f: RowFields): EventWithDelivery {
  return {
    api_version: API_VERSION,
    event_id: f[0],
    type: EVENT_TYPE,
    direction: f[3] as EventPayload['direction'],
    network: f[2] as EventPayload['network'],
    asset: f[4] as EventPayload['asset'],
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
    delivery: {
      notification_id: f[14],
      status: f[15] as DeliveryState['status'],
      attempts: Number(f[16]),
      created_at: isoFromPgTimestamp(f[17], 6),
    },
  };
}

/**
 * The row as JSON text: exactly JSON.stringify(rowObject(f)) (a test holds the two equal), but
 * written directly. Serialising 50 objects through the route's schema cost ~105 µs per page and
 * building them ~100 µs more, on a page whose whole budget is ~300 µs (2 cores, 3,000 pages/s).
 * The integer fields are PostgreSQL's text of integer columns, i.e. JSON numbers.
 */
function rowJson(line: string, f: RowFields): string {
  if (NOT_PLAIN.test(line)) return JSON.stringify(rowObject(f));
  const contract = f[12] === '' ? 'null' : `"${f[12]}"`;
  return (
    `{"api_version":"${API_VERSION}","event_id":"${f[0]}","type":"${EVENT_TYPE}",` +
    `"direction":"${f[3]}","network":"${f[2]}","asset":"${f[4]}","tx_id":"${f[5]}",` +
    `"event_index":${f[6]},"block_number":${f[7]},` +
    `"block_timestamp":"${isoFromPgTimestamp(f[8], 3)}","from":"${f[9]}","to":"${f[10]}",` +
    `"amount_raw":"${f[11]}","amount":"${formatAmountDigits(f[11])}","watch_id":"${f[1]}",` +
    `"contract":${contract},"delivery":{"notification_id":"${f[14]}","status":"${f[15]}",` +
    `"attempts":${f[16]},"created_at":"${isoFromPgTimestamp(f[17], 6)}"}}`
  );
}

/** The page statement: SQL text, parameters, and the name it is prepared under. */
export interface PageQuery {
  text: string;
  values: unknown[];
  name: string;
}

/** The statement of one page (exported for the plan test). */
export function pageQuery(q: ListEventsQuery): PageQuery {
  const values: unknown[] = [q.accountId, q.network];
  const where = ['e.account_id = $1', 'e.network = $2'];
  if (q.before !== undefined) {
    values.push(q.before);
    where.push(`e.created_at < $${values.length}::text::timestamptz`);
  }
  if (q.since !== undefined) {
    values.push(q.since);
    where.push(`e.created_at >= $${values.length}::text::timestamptz`);
  }
  if (q.watchId !== undefined) {
    values.push(q.watchId);
    where.push(`e.watch_id = $${values.length}`);
  }
  if (q.activeKeyId !== undefined) {
    // Evaluated once per execution (an InitPlan), in the statement's snapshot.
    values.push(q.activeKeyId);
    where.push(
      `EXISTS (SELECT 1 FROM api_keys k WHERE k.id = $${values.length} AND k.revoked_at IS NULL)`,
    );
  }
  const fetchRows = LIMIT_BUCKETS.find((b) => b > q.limit) ?? q.limit + 1;
  // Each row as ONE text column, its fields joined by SEP, timestamps as UTC text (no Date, so
  // microseconds are kept). node-postgres decodes every column of every row into a string of its
  // own: 51 rows × 18 columns cost the API ~200 µs per page, one column per row ~60 µs, at the
  // same cost to PostgreSQL. The notification is a scalar subquery rather than a join: half the
  // planning time.
  //
  // Planning: a named statement per WHERE shape and LIMIT bucket (at most 16 × 6 per connection).
  // With the LIMIT a literal, PostgreSQL's generic plan costs what a custom one does, so after five
  // executions it stops planning (a parameter LIMIT is costed as 10% of the table and kept it
  // planning at every request: ~0.15 ms of PostgreSQL CPU per page). The generic plan is good for
  // every account because a single index gives this order (migration 004).
  const shape =
    (q.before === undefined ? 0 : 1) |
    (q.since === undefined ? 0 : 2) |
    (q.watchId === undefined ? 0 : 4) |
    (q.activeKeyId === undefined ? 0 : 8);
  return {
    text: `SELECT concat_ws(E'\\x1f', e.id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
              e.event_index, e.block_number, e.block_timestamp AT TIME ZONE 'UTC', e.from_address,
              e.to_address, e.amount_raw, coalesce(e.contract, ''), e.created_at AT TIME ZONE 'UTC',
              (SELECT concat_ws(E'\\x1f', n.id, n.status, n.attempts, n.created_at AT TIME ZONE 'UTC')
                 FROM notifications n WHERE n.event_id = e.id)) AS r
       FROM events e
      WHERE ${where.join(' AND ')}
      ORDER BY e.created_at DESC
      LIMIT ${fetchRows}`,
    values,
    name: `events_page_${shape}_${fetchRows}`,
  };
}

/**
 * One page of events as the JSON text of SPEC's 200 body (`{"data":[…],"next_before":…}`),
 * ready to send: what GET /v1/events answers. Null when no event matched (with `activeKeyId`:
 * or the key is revoked); the empty page is then `{"data":[],"next_before":null}`.
 * @throws the database error 22007/22008 (data exception) when a bound is not a timestamp
 *   PostgreSQL can hold (e.g. year 0000); the caller answers 400. Error when a row is not what
 *   the query writes (a notification missing, a timestamp not in ISO DateStyle).
 */
export async function eventsPageJson(db: Queryable, q: ListEventsQuery): Promise<string | null> {
  const page = pageQuery(q);
  const rows = (await db.query<{ r: string }>(page.text, page.values, { name: page.name })).rows;
  if (rows.length === 0) return null;
  const n = Math.min(rows.length, q.limit);
  let json = '{"data":[';
  let lastCreated = '';
  for (let i = 0; i < n; i++) {
    const line = (rows[i] as { r: string }).r;
    const f = splitRow(line);
    json += i === 0 ? rowJson(line, f) : `,${rowJson(line, f)}`;
    lastCreated = f[13];
  }
  const next = rows.length > q.limit ? `"${isoFromPgTimestamp(lastCreated, 6)}"` : 'null';
  return `${json}],"next_before":${next}}`;
}

/**
 * One page of events as objects (eventsPageJson, parsed).
 * @throws as eventsPageJson.
 */
export async function listEvents(db: Queryable, q: ListEventsQuery): Promise<EventPage> {
  const json = await eventsPageJson(db, q);
  return json === null ? { data: [], next_before: null } : (JSON.parse(json) as EventPage);
}

/** For tests: the object and the direct JSON writer of one row text (they must agree). */
export const rowWritersForTest = {
  object: (line: string): EventWithDelivery => rowObject(splitRow(line)),
  json: (line: string): string => rowJson(line, splitRow(line)),
};
