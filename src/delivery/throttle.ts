/**
 * The two ways a claimed chat notification goes back to the outbox WITHOUT using one of its six
 * attempts (issue 13 item 3; DESIGN decisions "chat deliveries"; SPEC §States: the count only moves
 * on an attempt that was made and failed):
 *
 * - deferClaims: no pacing slot within the worker's wait bound (src/telegram/pacing.ts). Nothing was
 *   sent, nothing is recorded: due again after the wait, lease cleared, attempts unchanged.
 * - recordThrottled: the Bot API answered 429 with `retry_after`. The request was made and
 *   answered, so it is recorded (one `attempts` row, `throttled`, outside the key: migration 012;
 *   numbered attempts + 1, the attempt it would have been; status 429, its error and answer, error
 *   class 'http'), and the notification is due again after retry_after with attempts unchanged.
 *
 * Both are guarded by the claim's lease token like a completion (complete.ts): a worker whose lease
 * was taken over moves nothing (the throttled row is still recorded: it happened). Both run on
 * PostgreSQL 15 and PGlite.
 */
import type { Queryable } from '../db/pool.js';

/** One claimed notification to put back. */
export interface PutBack {
  notificationId: string;
  leaseToken: string;
  /** Due again after this long, ms (≥ 0). */
  delayMs: number;
}

/**
 * Put claimed, unattempted notifications back, each due after its delay (no attempt row).
 * @returns how many moved (the others' lease had been taken over).
 * @throws the database error (the lease then expires and the claim counts a lost attempt: the
 *   caller retries, see chat-worker.ts).
 */
export async function deferClaims(db: Queryable, items: readonly PutBack[]): Promise<number> {
  if (items.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE notifications AS n
        SET next_attempt_at = now() + make_interval(secs => r.delay_ms / 1000), lease_token = NULL
       FROM unnest($1::text[], $2::text[], $3::float8[]) AS r(id, token, delay_ms)
      WHERE n.id = r.id AND n.lease_token = r.token AND n.status = 'PENDING'`,
    [
      items.map((i) => i.notificationId),
      items.map((i) => i.leaseToken),
      items.map((i) => i.delayMs),
    ],
  );
  return rowCount;
}

/** A 429 answer to record (see the file's comment). */
export interface Throttled extends PutBack {
  /** Attempts made before (as the claim read them): the row is numbered attemptsBefore + 1. */
  attemptsBefore: number;
  startedAt: Date;
  durationMs: number;
  /** One line, e.g. "Bot API 429: Too Many Requests: retry after 5". */
  error: string;
  /** The Bot API's answer (JSON text, ≤ 4 KB). */
  responseBody: string | null;
}

/**
 * Record one 429 (a `throttled` attempt row) and reschedule its notification after `delayMs`
 * (retry_after), attempts unchanged, in one statement.
 * @returns true when the notification moved (false: its lease had been taken over).
 */
export async function recordThrottled(db: Queryable, t: Throttled): Promise<boolean> {
  const { rows } = await db.query<{ moved: boolean }>(
    `WITH row AS (
       INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error,
                             error_class, response_body, throttled, watch_id)
       VALUES ($1, $2, $3, $4, 429, $5, 'http', $6, true,
               (SELECT watch_id FROM notifications WHERE id = $1))
       RETURNING notification_id
     ), moved AS (
       UPDATE notifications AS n
          SET next_attempt_at = now() + make_interval(secs => $7::float8 / 1000),
              lease_token = NULL, last_status = 429, last_error = $5
         FROM row
        WHERE n.id = row.notification_id AND n.lease_token = $8 AND n.status = 'PENDING'
       RETURNING n.id
     )
     SELECT EXISTS (SELECT 1 FROM moved) AS moved`,
    [
      t.notificationId,
      t.attemptsBefore + 1,
      t.startedAt,
      Math.max(0, Math.round(t.durationMs)),
      t.error,
      t.responseBody,
      t.delayMs,
      t.leaseToken,
    ],
  );
  return rows[0]?.moved === true;
}
