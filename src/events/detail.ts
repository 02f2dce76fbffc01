/**
 * One event as the console explains it (issue 12 item 5): the Event, the exact body bytes every
 * attempt sent (serializeEvent: deterministic, so recomputed rather than stored), and every
 * notification (the ingester's, then one per redelivery), newest first, each with its attempts as
 * recorded (time, duration, HTTP status or error and its class, the headers sent — signatures,
 * never the secret — and the start of the answer).
 */
import type { Queryable } from '../db/pool.js';
import { errorClass } from '../delivery/error-class.js';
import { formatChatMessage } from '../telegram/message.js';
import {
  type Event,
  type EventRow,
  eventPayload,
  type HeldState,
  serializeEvent,
} from './event.js';

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
  /** When the next attempt is due (PENDING and not held), else null. */
  next_attempt_at: string | null;
  delivered_at: string | null;
  /**
   * Not null while the notification is held (issue 36 item 5, migration 095): why (HeldState's
   * reason), since when, and the confirmer's last words (which provider, by its position in
   * TRON_NODE_URL, said what; null before its first check).
   */
  held: { reason: HeldState['reason']; since: string; detail: string | null } | null;
  attempt_log: AttemptView[];
}

export interface EventDetail {
  event: Event;
  /** The webhook body exactly as sent, UTF-8 text (what a webhook watch POSTs). */
  payload: string;
  /** How the event's watch delivers (issue 19 item 7: a chat delivery is shown as one). */
  channel: 'webhook' | 'telegram';
  /** The label of the event's watch, as it is now (issue 29: shown beside its id); null: none. */
  watch_label: string | null;
  /**
   * A chat watch's delivery: the chat the account is bound to now (the one every attempt is sent
   * to: a chat that became a supergroup is followed), and the message sent, Bot API HTML
   * (src/telegram/message.ts, deterministic, so recomputed rather than stored). Null for a
   * webhook watch. The Bot API's answer of each attempt is its `response_body`.
   */
  telegram: {
    chat: { id: string; title: string | null; type: string | null } | null;
    message_html: string;
  } | null;
  notifications: NotificationView[];
}

interface NotificationRow {
  id: string;
  status: NotificationView['status'];
  attempts: number;
  created_at: Date;
  next_attempt_at: Date;
  delivered_at: Date | null;
  held_reason: HeldState['reason'] | null;
  held_since: Date | null;
  held_detail: string | null;
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

/** One row of the detail statement: the event, a notification (or nulls), an attempt (or nulls). */
interface JoinedRow extends EventRow {
  n_id: string | null;
  n_status: string | null;
  n_attempts: number | null;
  n_created_at: Date | null;
  n_next_attempt_at: Date | null;
  n_delivered_at: Date | null;
  n_held_reason: HeldState['reason'] | null;
  n_held_since: Date | null;
  n_held_detail: string | null;
  a_attempt: number | null;
  a_started_at: Date | null;
  a_duration_ms: number | null;
  a_http_status: number | null;
  a_error: string | null;
  a_error_class: string | null;
  a_request_headers: Record<string, string> | null;
  a_response_headers: Record<string, string> | null;
  a_response_body: string | null;
  a_throttled: boolean | null;
  w_channel: 'webhook' | 'telegram';
  w_label: string | null;
  chat_id: string | null;
  chat_title: string | null;
  chat_type: string | null;
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
  // One statement (named, so prepared once per connection): the event, each of its notifications and each of
  // their attempts, one row per attempt (an event row without notifications, a notification row
  // without attempts, through the LEFT JOINs), newest notification first. Three statements cost
  // the console's event page about twice the time of a GET /v1/events page (BENCH=api).
  const { rows } = await db.query<JoinedRow>(
    `SELECT e.id, e.account_id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
                    e.event_index, e.block_number, e.block_timestamp, e.from_address, e.to_address,
                    e.amount_raw::text AS amount_raw, e.contract, e.proof, e.created_at, e.metadata,
                    n.id AS n_id, n.status AS n_status, n.attempts AS n_attempts,
                    n.created_at AS n_created_at, n.next_attempt_at AS n_next_attempt_at,
                    n.delivered_at AS n_delivered_at, n.held_reason AS n_held_reason,
                    n.held_since AS n_held_since, n.held_detail AS n_held_detail,
                    a.attempt AS a_attempt, a.started_at AS a_started_at,
                    a.duration_ms AS a_duration_ms, a.http_status AS a_http_status,
                    a.error AS a_error, a.error_class AS a_error_class,
                    a.request_headers AS a_request_headers,
                    a.response_headers AS a_response_headers,
                    a.response_body AS a_response_body, a.throttled AS a_throttled,
                    w.channel AS w_channel, w.label AS w_label, acc.telegram_chat_id AS chat_id,
                    acc.telegram_chat_title AS chat_title, acc.telegram_chat_type AS chat_type
               FROM events e
               JOIN watches w ON w.id = e.watch_id
               JOIN accounts acc ON acc.id = e.account_id
               LEFT JOIN notifications n ON n.event_id = e.id
               LEFT JOIN attempts a ON a.notification_id = n.id
              WHERE e.id = $1 AND e.account_id = $2 AND e.network = $3
              -- A throttled row shares its number with the real attempt made after it: first.
              ORDER BY n.created_at DESC, n.id, a.attempt, a.throttled DESC, a.id`,
    [eventId, accountId, network],
    { name: 'console_event_detail' },
  );
  const row = rows[0];
  if (!row) return undefined;
  const event = eventPayload({ ...row, block_number: Number(row.block_number) });
  const ntfs: NotificationRow[] = [];
  const attempts: AttemptRow[] = [];
  for (const r of rows) {
    if (r.n_id === null) continue;
    if (ntfs[ntfs.length - 1]?.id !== r.n_id) {
      ntfs.push({
        id: r.n_id,
        status: r.n_status as NotificationRow['status'],
        attempts: Number(r.n_attempts),
        created_at: r.n_created_at as Date,
        next_attempt_at: r.n_next_attempt_at as Date,
        delivered_at: r.n_delivered_at,
        held_reason: r.n_held_reason,
        held_since: r.n_held_since,
        held_detail: r.n_held_detail,
      });
    }
    if (r.a_attempt === null) continue;
    attempts.push({
      notification_id: r.n_id,
      attempt: r.a_attempt,
      started_at: r.a_started_at as Date,
      duration_ms: Number(r.a_duration_ms),
      http_status: r.a_http_status,
      error: r.a_error,
      error_class: r.a_error_class,
      request_headers: r.a_request_headers,
      response_headers: r.a_response_headers,
      response_body: r.a_response_body,
      throttled: r.a_throttled === true,
    });
  }
  const eventRow = { ...row, block_number: Number(row.block_number) };
  return {
    event,
    payload: serializeEvent(event).toString('utf8'),
    channel: row.w_channel,
    watch_label: row.w_label,
    telegram:
      row.w_channel === 'telegram'
        ? {
            chat:
              row.chat_id === null
                ? null
                : { id: row.chat_id, title: row.chat_title, type: row.chat_type },
            message_html: formatChatMessage(eventRow),
          }
        : null,
    notifications: ntfs.map((n) => ({
      id: n.id,
      status: n.status,
      attempts: n.attempts,
      created_at: n.created_at.toISOString(),
      next_attempt_at:
        n.status === 'PENDING' && n.held_reason === null ? n.next_attempt_at.toISOString() : null,
      delivered_at: n.delivered_at?.toISOString() ?? null,
      held:
        n.held_reason === null || n.held_since === null
          ? null
          : { reason: n.held_reason, since: n.held_since.toISOString(), detail: n.held_detail },
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
