/**
 * The events list (SPEC §GET /v1/events): an account's matched events with their delivery
 * state, newest first, paged backwards by creation time.
 *
 * Paging never skips or repeats (DESIGN invariant 8): `events.created_at` is unique and strictly
 * increasing with MICROSECOND precision (hundreds of events of one block share a commit but not a
 * created_at). So the cursor must keep all six fractional digits end to end: `next_before` and
 * `delivery.created_at` are rendered by PostgreSQL (to_char … US), and `before`/`since` reach SQL
 * as text cast to timestamptz — never through a JavaScript Date, which holds milliseconds only and
 * would make a page boundary inside one millisecond skip or repeat events.
 *
 * Every event has exactly one notification (created in the same transaction by the ingester),
 * so the join is inner.
 */

import type { Queryable } from '../db/pool.js';
import { type EventPayload, type EventRow, eventPayload } from '../delivery/payload.js';

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
}

export interface EventPage {
  data: EventWithDelivery[];
  /** created_at of the last item (microseconds) when more events follow; null at the end. */
  next_before: string | null;
}

/** to_char pattern of a microsecond ISO 8601 UTC instant: 2026-01-08T13:36:54.123456Z. */
const ISO_US = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;

interface Row extends EventRow {
  created_at_us: string;
  notification_id: string;
  delivery_status: DeliveryState['status'];
  attempts: number;
  delivery_created_at_us: string;
}

/**
 * One page of events.
 * @throws the database error 22007/22008 (data exception) when a bound is not a timestamp
 *   PostgreSQL can hold (e.g. year 0000); the caller answers 400.
 */
export async function listEvents(db: Queryable, q: ListEventsQuery): Promise<EventPage> {
  const params: unknown[] = [q.accountId, q.network];
  const where = ['e.account_id = $1', 'e.network = $2'];
  if (q.before !== undefined) {
    params.push(q.before);
    where.push(`e.created_at < $${params.length}::text::timestamptz`);
  }
  if (q.since !== undefined) {
    params.push(q.since);
    where.push(`e.created_at >= $${params.length}::text::timestamptz`);
  }
  if (q.watchId !== undefined) {
    params.push(q.watchId);
    where.push(`e.watch_id = $${params.length}`);
  }
  // One row more than the page tells whether another page follows.
  params.push(q.limit + 1);
  const { rows } = await db.query<Row>(
    `SELECT e.id, e.account_id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
            e.event_index, e.block_number, e.block_timestamp, e.from_address, e.to_address,
            e.amount_raw::text AS amount_raw, e.contract, e.created_at,
            to_char(e.created_at AT TIME ZONE 'UTC', ${ISO_US}) AS created_at_us,
            n.id AS notification_id, n.status AS delivery_status, n.attempts,
            to_char(n.created_at AT TIME ZONE 'UTC', ${ISO_US}) AS delivery_created_at_us
       FROM events e JOIN notifications n ON n.event_id = e.id
      WHERE ${where.join(' AND ')}
      ORDER BY e.created_at DESC
      LIMIT $${params.length}`,
    params,
  );
  const page = rows.slice(0, q.limit);
  const last = page[page.length - 1];
  return {
    data: page.map((r) => ({
      ...eventPayload(r),
      delivery: {
        notification_id: r.notification_id,
        status: r.delivery_status,
        attempts: r.attempts,
        created_at: r.delivery_created_at_us,
      },
    })),
    next_before: rows.length > q.limit && last ? last.created_at_us : null,
  };
}
