/**
 * One event as the console explains it (issue 12 item 5): the Event, the exact body bytes every
 * attempt sent (serializeEvent: deterministic, so recomputed rather than stored), and every
 * notification (the ingester's, then one per redelivery), newest first, each with its attempts as
 * recorded (time, duration, HTTP status or error and its class, the headers sent — signatures,
 * never the secret — and the start of the answer).
 */
import type { Queryable } from '../db/pool.js';
import { errorClass } from '../delivery/error-class.js';
import { type Event, type EventRow, eventPayload, serializeEvent } from './event.js';

/** One attempt row (SPEC §Events "Logging": the HTTP status of every attempt is inspectable). */
export interface AttemptView {
  /**
   * 1..6 within its notification. A throttled row carries the number of the attempt it would
   * have been, which the next real attempt then takes (migration 012): it is listed before it.
   */
  attempt: number;
  /**
   * True for a Bot API 429 on a chat delivery (migration 012): the request was made and answered
   * "retry after", the notification was rescheduled at retry_after, and it is NOT one of the six
   * attempts (the console labels it "rate limited, not counted").
   */
  throttled: boolean;
  /** ISO 8601 UTC. */
  started_at: string;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  /** timeout | tls | refused | dns | blocked | network | http | lost, null on success. */
  error_class: string | null;
  /** Headers sent (X-Signature and webhook-* included, never the secret). */
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  /** First 4 KB of the answer's body, as text. */
  response_body: string | null;
}

/** One delivery chain of the event. */
export interface NotificationView {
  id: string;
  status: 'PENDING' | 'DELIVERED' | 'DEAD';
  attempts: number;
  created_at: string;
  /** When the next attempt is due (PENDING), else null. */
  next_attempt_at: string | null;
  delivered_at: string | null;
  attempt_log: AttemptView[];
}

export interface EventDetail {
  event: Event;
  /** The webhook body exactly as sent, UTF-8 text. */
  payload: string;
  notifications: NotificationView[];
}

interface NotificationRow {
  id: string;
  status: NotificationView['status'];
  attempts: number;
  created_at: Date;
  next_attempt_at: Date;
  delivered_at: Date | null;
}

interface AttemptRow {
  notification_id: string;
  attempt: number;
  started_at: Date;
  duration_ms: number;
  http_status: number | null;
  error: string | null;
  error_class: string | null;
  request_headers: Record<string, string> | null;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  throttled: boolean;
}

/**
 * The account's event `eventId` with its delivery history.
 * @returns undefined when there is no such event of this account on `network`.
 */
export async function eventDetail(
  db: Queryable,
  accountId: string,
  network: string,
  eventId: string,
): Promise<EventDetail | undefined> {
  const { rows } = await db.query<EventRow>(
    `SELECT id, account_id, watch_id, network, direction, asset, tx_id, event_index, block_number,
            block_timestamp, from_address, to_address, amount_raw::text AS amount_raw, contract,
            created_at
       FROM events WHERE id = $1 AND account_id = $2 AND network = $3`,
    [eventId, accountId, network],
  );
  const row = rows[0];
  if (!row) return undefined;
  const event = eventPayload({ ...row, block_number: Number(row.block_number) });
  const { rows: ntfs } = await db.query<NotificationRow>(
    `SELECT id, status, attempts, created_at, next_attempt_at, delivered_at
       FROM notifications WHERE event_id = $1 ORDER BY created_at DESC`,
    [eventId],
  );
  const { rows: attempts } = await db.query<AttemptRow>(
    `SELECT a.notification_id, a.attempt, a.started_at, a.duration_ms, a.http_status, a.error,
            a.error_class, a.request_headers, a.response_headers, a.response_body, a.throttled
       FROM attempts a JOIN notifications n ON n.id = a.notification_id
      WHERE n.event_id = $1
      -- A throttled row shares its number with the real attempt made after it: it comes first.
      ORDER BY a.notification_id, a.attempt, a.throttled DESC, a.id`,
    [eventId],
  );
  return {
    event,
    payload: serializeEvent(event).toString('utf8'),
    notifications: ntfs.map((n) => ({
      id: n.id,
      status: n.status,
      attempts: n.attempts,
      created_at: n.created_at.toISOString(),
      next_attempt_at: n.status === 'PENDING' ? n.next_attempt_at.toISOString() : null,
      delivered_at: n.delivered_at?.toISOString() ?? null,
      attempt_log: attempts
        .filter((a) => a.notification_id === n.id)
        .map((a) => ({
          attempt: a.attempt,
          started_at: a.started_at.toISOString(),
          duration_ms: a.duration_ms,
          http_status: a.http_status,
          error: a.error,
          error_class: a.error_class ?? errorClass(a.http_status, a.error),
          request_headers: a.request_headers,
          response_headers: a.response_headers,
          response_body: a.response_body,
          throttled: a.throttled,
        })),
    })),
  };
}
