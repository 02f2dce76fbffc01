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
 * Every event has one notification created with it by the ingester, and one more per redelivery; a
 * page shows the newest (src/events/event.ts EVENT_ROW_SQL).
 */

import type { Queryable } from '../db/pool.js';
import type { EventProof } from '../tron/types.js';
import {
  EVENT_ROW_SQL,
  type EventWithDelivery,
  eventRowJson,
  isoFromPgTimestamp,
  splitEventRow,
} from './event.js';

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
  /** Exclusive upper bound on created_at like `before` (the console's time range). */
  until?: string;
  /** Only events whose newest notification has this status (the console's filter). */
  status?: 'PENDING' | 'DELIVERED' | 'DEAD';
  /**
   * Exclusive lower bound on created_at (ISO 8601 text), for paging towards newer events (the
   * console's "Newer"): the page is the `limit` events just above it, still returned newest first.
   */
  after?: string;
  /** One event, transaction or address (the console's search box; parseEventSearch). */
  search?: EventSearch;
  /** Only this asset (the console's filters). */
  asset?: 'USDT' | 'TRX';
  /** Only this side of the transfer. */
  direction?: 'incoming' | 'outgoing';
  /** Only events of watches delivering through this channel. */
  channel?: 'webhook' | 'telegram';
  /** Only events established at this proof level (SPEC §Event `proof`). */
  proof?: EventProof;
  /** Only events with (true) or without (false) a held notification (EventFilters.held). */
  held?: boolean;
  /** Only events of the watches delivering to this endpoint now (EventFilters.endpointId). */
  endpointId?: string;
  /**
   * Return rows only while this API key is not revoked, checked by the page's own statement (an
   * API caller taken from the key cache, src/api/auth.ts). No row then means: an empty page, or
   * the key revoked; the caller asks the key lookup which.
   */
  activeKeyId?: string;
}

/**
 * What the console's search box looks for, by the shape of the term: an event id (`evt_…`), a
 * transaction id (64 hex digits, any case) or a base58 address (34 characters starting with T:
 * either side of the transfer). Each is an index probe (migration 045, and the primary key).
 */
export type EventSearch =
  | { kind: 'event'; value: string }
  | { kind: 'tx'; value: string }
  | { kind: 'address'; value: string };

/**
 * The search of a term typed by a person (trimmed), or undefined when it is none of the three
 * shapes (the caller answers 400 saying what it accepts).
 */
export function parseEventSearch(term: string): EventSearch | undefined {
  const t = term.trim();
  if (/^evt_[0-9A-Za-z_-]{1,60}$/.test(t)) return { kind: 'event', value: t };
  if (/^(0x)?[0-9a-fA-F]{64}$/.test(t)) {
    return { kind: 'tx', value: t.replace(/^0x/, '').toLowerCase() };
  }
  if (/^T[1-9A-HJ-NP-Za-km-z]{33}$/.test(t)) return { kind: 'address', value: t };
  return undefined;
}

/** SPEC §GET /v1/events 200 body. */
export interface EventPage {
  data: EventWithDelivery[];
  /** created_at of the last item (microseconds) when more events follow; null at the end. */
  next_before: string | null;
  /** The watermark (eventsPageJson): null before the first block is committed. */
  scanned_through: ScannedThrough | null;
}

/** The newest block whose events are all committed (issue 14 item 1). */
export interface ScannedThrough {
  block_number: number;
  /** ISO 8601 UTC, milliseconds. */
  block_timestamp: string;
}

/**
 * Rows fetched for a page of `limit`: the first bucket above it (a page and one row more, which
 * tells whether another page follows). The common sizes (1, 10, 20, 50, 100, 200) fetch exactly
 * limit + 1; others at most about twice that. Bounded so that clients cannot make PostgreSQL keep
 * one prepared statement per possible limit.
 */
const LIMIT_BUCKETS = [2, 11, 21, 51, 101, 201] as const;

/**
 * `e.id` is among the account's ($1) events that have a DEAD notification: a condition implied by
 * "the newest notification is DEAD", added so that PostgreSQL can start from the DEAD
 * notifications (notifications_dead_account, migration 023: a few rows) instead of walking every
 * event of the account and asking each for its newest notification (issue 17 item 5: with
 * 10,000,000 events and 1,000 DEAD the walk read hundreds of thousands of events per page). The
 * status is a literal, not a parameter, so that a generic plan can use the partial index. Where
 * most events are DEAD the planner may still walk the events in order; both plans are correct.
 * Used by the events page (status DEAD) and by bulk redelivery (src/events/redeliver.ts).
 */
export const DEAD_EVENTS_SQL = `e.id IN (SELECT d.event_id FROM notifications d
                  WHERE d.account_id = $1 AND d.status = 'DEAD')`;

/** The page statement: SQL text, parameters, and the name it is prepared under. */
export interface PageQuery {
  text: string;
  values: unknown[];
  name: string;
}

/** The filters of the console's lists that narrow events by their own fields. */
export interface EventFilters {
  search?: EventSearch | undefined;
  asset?: 'USDT' | 'TRX' | undefined;
  direction?: 'incoming' | 'outgoing' | undefined;
  channel?: 'webhook' | 'telegram' | undefined;
  proof?: EventProof | undefined;
  /**
   * true: only events with a held notification (issue 36 item 5: provider-proof, waiting for a
   * second provider); false: only events without one.
   */
  held?: boolean | undefined;
  /**
   * Only events of the watches that deliver to this endpoint now (`ep_…`; issue 40 item 1: the
   * endpoint filter of Events and Dead letters, and the endpoint page). An unknown or foreign id
   * matches nothing.
   */
  endpointId?: string | undefined;
}

/**
 * Append the WHERE clauses of `f` (on events aliased `e`) to `where`, their parameters to
 * `values` (numbered after those already there). Shared by the list, its export and the bulk
 * redelivery (redeliver.ts), so "Redeliver all" takes exactly what the filtered list shows.
 */
export function eventFilterClauses(values: unknown[], where: string[], f: EventFilters): void {
  if (f.search !== undefined) {
    values.push(f.search.value);
    const p = `$${values.length}`;
    where.push(
      f.search.kind === 'event'
        ? `e.id = ${p}`
        : f.search.kind === 'tx'
          ? `e.tx_id = ${p}`
          : `(e.from_address = ${p} OR e.to_address = ${p})`,
    );
  }
  if (f.asset !== undefined) {
    values.push(f.asset);
    where.push(`e.asset = $${values.length}`);
  }
  if (f.direction !== undefined) {
    values.push(f.direction);
    where.push(`e.direction = $${values.length}`);
  }
  if (f.proof !== undefined) {
    values.push(f.proof);
    where.push(`e.proof = $${values.length}`);
  }
  if (f.held !== undefined) {
    // Few rows are held: the partial index notifications_held_check (migration 095) is not
    // needed here, the event's own notifications are read by notifications_event_created.
    where.push(
      `${f.held ? '' : 'NOT '}EXISTS (SELECT 1 FROM notifications hn WHERE hn.event_id = e.id AND hn.held_since IS NOT NULL)`,
    );
  }
  if (f.channel !== undefined) {
    values.push(f.channel);
    where.push(
      `EXISTS (SELECT 1 FROM watches w WHERE w.id = e.watch_id AND w.channel = $${values.length})`,
    );
  }
  if (f.endpointId !== undefined) {
    values.push(f.endpointId);
    where.push(
      `EXISTS (SELECT 1 FROM watches w WHERE w.id = e.watch_id AND w.endpoint_id = $${values.length})`,
    );
  }
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
  if (q.until !== undefined) {
    values.push(q.until);
    where.push(`e.created_at < $${values.length}::text::timestamptz`);
  }
  if (q.status !== undefined) {
    values.push(q.status);
    where.push(
      `(SELECT n.status FROM notifications n WHERE n.event_id = e.id ORDER BY n.created_at DESC LIMIT 1) = $${values.length}`,
    );
    // The dead letters start from the account's DEAD notifications (migration 023's partial
    // index), not from every event of the account: see DEAD_EVENTS_SQL.
    if (q.status === 'DEAD') where.push(DEAD_EVENTS_SQL);
  }
  if (q.after !== undefined) {
    values.push(q.after);
    where.push(`e.created_at > $${values.length}::text::timestamptz`);
  }
  eventFilterClauses(values, where, q);
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
  // Planning: a named statement per WHERE shape and LIMIT bucket (at most 96 × 6 per connection).
  // With the LIMIT a literal, PostgreSQL's generic plan costs what a custom one does, so after five
  // executions it stops planning (a parameter LIMIT is costed as 10% of the table and kept it
  // planning at every request: ~0.15 ms of PostgreSQL CPU per page). The generic plan is good for
  // every account because a single index gives this order (migration 004).
  const shape =
    (q.before === undefined ? 0 : 1) |
    (q.since === undefined ? 0 : 2) |
    (q.watchId === undefined ? 0 : 4) |
    (q.activeKeyId === undefined ? 0 : 8) |
    (q.until === undefined ? 0 : 16) |
    (q.status === undefined ? 0 : 32) |
    (q.status === 'DEAD' ? 64 : 0) |
    (q.after === undefined ? 0 : 4096) |
    (q.search === undefined ? 0 : { event: 128, tx: 256, address: 384 }[q.search.kind]) |
    (q.asset === undefined ? 0 : 512) |
    (q.direction === undefined ? 0 : 1024) |
    (q.channel === undefined ? 0 : 2048) |
    (q.proof === undefined ? 0 : 8192) |
    (q.endpointId === undefined ? 0 : 16384) |
    (q.held === undefined ? 0 : q.held ? 32768 : 65536);
  // Towards newer events (`after`): the rows just above the bound, oldest first; the page writer
  // turns them around.
  return {
    text: `SELECT ${EVENT_ROW_SQL} AS r, ${WATERMARK_SQL} AS w
       FROM events e
      WHERE ${where.join(' AND ')}
      ORDER BY e.created_at ${q.after === undefined ? 'DESC' : 'ASC'}
      LIMIT ${fetchRows}`,
    values,
    name: `events_page_${shape}_${fetchRows}`,
  };
}

/**
 * The scanned-through watermark as one text column (issue 14 item 1): the cursor's block number and
 * block timestamp joined by SEP, or NULL before the first block. Uncorrelated, so PostgreSQL
 * evaluates it once per statement (an InitPlan), in the statement's snapshot: the page and the
 * watermark are read together, so every matching event of a block up to it is in the page's view.
 */
const WATERMARK_SQL = `(SELECT concat_ws(E'\\x1f', c.block_number, c.block_timestamp AT TIME ZONE 'UTC')
          FROM chain_cursor c WHERE c.network = $2 AND c.block_timestamp IS NOT NULL)`;

/** `scanned_through` JSON of a watermark text (WATERMARK_SQL), `null` without one. */
function watermarkJson(w: string | null | undefined): string {
  if (!w) return 'null';
  const [n, ts] = w.split('\x1f');
  if (n === undefined || ts === undefined) return 'null';
  return `{"block_number":${n},"block_timestamp":"${isoFromPgTimestamp(ts, 3)}"}`;
}

/** A page: the JSON text of SPEC's 200 body, and whether it holds no event. */
export interface PageJson {
  json: string;
  empty: boolean;
  /** created_at of the page's newest event (ISO, microseconds), undefined when empty. */
  newest?: string;
  /**
   * With `after` only: whether events newer than the page's newest follow (the page is the
   * `limit` events just above `after`). The page's `next_before` is then its oldest event's
   * created_at whenever it holds one (the page it was reached from lies below).
   */
  moreAfter?: boolean;
}

/**
 * One page of events as the JSON text of SPEC's 200 body (`{"data":[…],"next_before":…,
 * "scanned_through":…}`), ready to send: what GET /v1/events answers. `scanned_through` (additive)
 * is the newest block whose events are all committed, `{ block_number, block_timestamp }` or null
 * before the first block: every matching transfer of a block up to it that falls in the page's
 * filters is in this answer's view. An empty result reads the watermark first and the page again,
 * so an empty page never claims a block whose events it did not see. `empty` with `activeKeyId`:
 * no event, or the key was revoked (the caller asks the key lookup which).
 * @throws the database error 22007/22008 (data exception) when a bound is not a timestamp
 *   PostgreSQL can hold (e.g. year 0000); the caller answers 400. Error when a row is not what
 *   the query writes (a timestamp not in ISO DateStyle).
 */
export async function eventsPageJson(db: Queryable, q: ListEventsQuery): Promise<PageJson> {
  const page = pageQuery(q);
  const run = async () =>
    (await db.query<{ r: string; w: string | null }>(page.text, page.values, { name: page.name }))
      .rows;
  let rows = await run();
  if (rows.length === 0) {
    const { rows: wm } = await db.query<{ w: string | null }>(
      `SELECT ${WATERMARK_SQL.replace('$2', '$1')} AS w`,
      [q.network],
    );
    rows = await run();
    if (rows.length === 0) {
      return {
        json: `{"data":[],"next_before":null,"scanned_through":${watermarkJson(wm[0]?.w)}}`,
        empty: true,
      };
    }
  }
  const n = Math.min(rows.length, q.limit);
  const more = rows.length > q.limit;
  // Newest first: an `after` page was read oldest first, so its n rows are walked backwards.
  const upward = q.after !== undefined;
  let json = '{"data":[';
  let firstCreated = '';
  let lastCreated = '';
  for (let i = 0; i < n; i++) {
    const line = (rows[upward ? n - 1 - i : i] as { r: string }).r;
    const f = splitEventRow(line);
    json += i === 0 ? eventRowJson(line, f) : `,${eventRowJson(line, f)}`;
    if (i === 0) firstCreated = f[13];
    lastCreated = f[13];
  }
  const next = more || upward ? `"${isoFromPgTimestamp(lastCreated, 6)}"` : 'null';
  return {
    json: `${json}],"next_before":${next},"scanned_through":${watermarkJson(rows[0]?.w)}}`,
    empty: false,
    newest: isoFromPgTimestamp(firstCreated, 6),
    ...(upward ? { moreAfter: more } : {}),
  };
}

/**
 * One page of events as objects (eventsPageJson, parsed).
 * @throws as eventsPageJson.
 */
export async function listEvents(db: Queryable, q: ListEventsQuery): Promise<EventPage> {
  return JSON.parse((await eventsPageJson(db, q)).json) as EventPage;
}
