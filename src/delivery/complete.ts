/**
 * Record attempt outcomes and move their notifications (SPEC §States "Delivery status";
 * DESIGN invariant 3), a batch at a time, in ONE transaction (one statement, one round trip):
 *
 * 1. insert one `attempts` row per outcome (habit 8: every attempt is a row), FIRST (or fill in
 *    the attempt's lost-attempt row: see "Attempt numbers" below), with what the console shows
 *    of it (migration 009; issue 12 item 5): error_class (error-class.ts, NULL for a 2xx),
 *    request_headers (the headers sent: signatures, never the secret), response_headers and
 *    response_body (the first 4 KB of the answer, send.ts), NULL when there was no answer;
 * 2. move each notification whose attempt row was stored, that is still PENDING, and whose
 *    `lease_token` still matches the claim's (for a 2xx, whatever the token: see below):
 *    - 2xx → DELIVERED, delivered_at = now();
 *    - failure with attempts left → PENDING, next_attempt_at = now() + nextDelayMs (schedule.ts);
 *    - the sixth failure → DEAD;
 *    attempts + 1 (not for a lost attempt's late outcome: already counted), last_status /
 *    last_error of this attempt, lease_token cleared.
 *
 * The token guard: a worker that outlived its lease (stalled, partitioned, or cut off from the
 * database longer than the lease) and whose notification was claimed again by another worker
 * still records its attempt (it happened: the receiver may have seen it), but its FAILURE cannot
 * move the notification under the newer claim. Such outcomes are counted as `stale`. Its 2xx
 * does move a notification that is still PENDING to DELIVERED, whoever holds the lease: the
 * receiver has acknowledged the event, so putting it back on the retry schedule (or letting a
 * later failure make it DEAD) would misstate what happened; the newer claim's own outcome then
 * finds it DELIVERED and is recorded as stale.
 *
 * Attempt numbers (migration 006: one row per (notification_id, attempt)). An outcome is numbered
 * attemptsBefore + 1, as its claim read it; every claim gets its own number because a claim whose
 * lease ran out is counted as a lost attempt before the notification is claimed again (claim.ts).
 * So a stale outcome finds its number held by its own lost-attempt row (error WORKER_LOST_ERROR),
 * and fills that row in with what really happened (started_at, duration, status, error; its
 * lease_expired_at stays as the trace of the lost lease; error_class and the request and
 * response columns too): the attempt is one row, already counted,
 * so `attempts` is not incremented again, and a 2xx still marks a PENDING notification DELIVERED; a
 * failure moves nothing. DEAD is final (SPEC §States: no move out of DELIVERED or DEAD): when the
 * lost attempt was the sixth, the notification went DEAD when that loss was counted, and a 2xx
 * arriving later is recorded in the lost attempt's row (its status, duration and answer; its
 * lease_expired_at kept, so the attempt log shows "answered 2xx after its lease ran out") without
 * moving the notification: the receiver has the event, and a redelivery (same event_id, which
 * it deduplicates) is how an operator closes the dead letter. An outcome whose number holds a row with the same started_at is this batch again (a
 * commit whose answer was lost, retried): nothing is added. An outcome whose number holds another
 * outcome (only a worker of a version before migration 008 finishing during an upgrade) is kept as
 * its own row marked `duplicate`: never refused, never lost. Each notification's row is locked
 * first (`locked`), so a claim recording a lost attempt (which skips locked rows) and this
 * statement never wait on each other's attempt rows.
 *
 * Batch statements pass columns as arrays through unnest() (one round trip per statement,
 * whatever the batch size; works on PostgreSQL 15 and PGlite).
 */
import { isLivemode } from '../common/environment.js';
import type { Queryable } from '../db/pool.js';
import { WORKER_LOST_ERROR } from './claim.js';
import { errorClass } from './error-class.js';
import { nextDelayMs } from './schedule.js';
import type { AttemptResult } from './send.js';

/** One finished attempt of a claimed notification. */
export interface Completion {
  notificationId: string;
  /** The claim's token (claim.ts); the state moves only while it is still the notification's. */
  leaseToken: string;
  /**
   * Attempts made before this one, as read by the claim. This attempt's number is attempts + 1
   * (1..6); a stale attempt keeps the number it was made as.
   */
  attemptsBefore: number;
  result: AttemptResult;
}

/** What a batch did. */
export interface CompleteOutcome {
  /** Attempt rows inserted (= the batch size). */
  recorded: number;
  delivered: number;
  /** Failed, rescheduled (PENDING). */
  retried: number;
  dead: number;
  /** Test-mode notifications moved (any target): counted apart from the live ones above. */
  test: number;
  /** Recorded but not moved: the lease had been taken over (or the row was no longer PENDING). */
  stale: number;
  /**
   * The watches whose notifications moved (distinct), and of them those with a notification that
   * went DEAD: the worker refreshes their health and alerts (src/watches/health.ts).
   */
  watchIds: string[];
  deadWatchIds: string[];
  /**
   * The same for endpoints (migration 091): the endpoints of the watches moved, and those with a
   * notification that went DEAD (src/endpoints/health.ts refreshEndpointHealth).
   */
  endpointIds: string[];
  deadEndpointIds: string[];
}

type Target = 'DELIVERED' | 'PENDING' | 'DEAD';

/**
 * One statement, so one transaction and one round trip per batch. The attempt rows are inserted
 * first in the strongest sense: the UPDATE only moves notifications whose attempt row the INSERTs
 * returned (data dependency), and both commit together or not at all. `stored.late` marks an
 * outcome that filled in its lost-attempt row (already counted by the claim that found it lost).
 */
const COMPLETE_SQL = `
WITH r AS (
  SELECT *
    FROM unnest($1::text[], $2::text[], $3::int4[], $4::timestamptz[], $5::int4[], $6::int4[],
                $7::text[], $8::text[], $9::float8[], $11::text[], $12::text[], $13::text[],
                $14::text[])
         AS r(id, token, attempt, started_at, duration_ms, http_status, error, target, delay_ms,
              error_class, request_headers, response_headers, response_body)
), locked AS (
  -- endpoint_id: the endpoint the watch delivers to now (migration 091), kept on the attempt.
  SELECT n.id, n.watch_id, w.endpoint_id
    FROM notifications n LEFT JOIN watches w ON w.id = n.watch_id
   WHERE n.id IN (SELECT id FROM r) ORDER BY n.id FOR UPDATE OF n
), recorded AS (
  INSERT INTO attempts AS a (notification_id, attempt, started_at, duration_ms, http_status, error,
                             error_class, request_headers, response_headers, response_body,
                             watch_id, endpoint_id)
  SELECT r.id, r.attempt, r.started_at, r.duration_ms, r.http_status, r.error,
         r.error_class, r.request_headers::jsonb, r.response_headers::jsonb, r.response_body,
         locked.watch_id, locked.endpoint_id
    FROM r JOIN locked ON locked.id = r.id
  ON CONFLICT (notification_id, attempt) WHERE NOT duplicate AND NOT throttled DO UPDATE
     SET started_at = excluded.started_at, duration_ms = excluded.duration_ms,
         http_status = excluded.http_status, error = excluded.error,
         error_class = excluded.error_class, request_headers = excluded.request_headers,
         response_headers = excluded.response_headers, response_body = excluded.response_body
   WHERE (a.lease_expired_at IS NOT NULL AND a.http_status IS NULL AND a.error = $10::text)
      OR a.started_at = excluded.started_at
  RETURNING a.notification_id, a.attempt, a.lease_expired_at IS NOT NULL AS late
), kept AS (
  INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error,
                        error_class, request_headers, response_headers, response_body, duplicate,
                        watch_id, endpoint_id)
  SELECT r.id, r.attempt, r.started_at, r.duration_ms, r.http_status, r.error,
         r.error_class, r.request_headers::jsonb, r.response_headers::jsonb, r.response_body, true,
         locked.watch_id, locked.endpoint_id
    FROM r JOIN locked ON locked.id = r.id
   WHERE NOT EXISTS (SELECT 1 FROM recorded
                      WHERE recorded.notification_id = r.id AND recorded.attempt = r.attempt)
  RETURNING notification_id, attempt, false AS late
), stored AS (
  SELECT * FROM recorded UNION ALL SELECT * FROM kept
)
UPDATE notifications AS n
   SET status = r.target,
       attempts = CASE WHEN s.late THEN n.attempts ELSE n.attempts + 1 END,
       delivered_at = CASE WHEN r.target = 'DELIVERED' THEN now() ELSE n.delivered_at END,
       next_attempt_at = CASE WHEN r.target = 'PENDING'
                              THEN now() + make_interval(secs => r.delay_ms / 1000)
                              ELSE n.next_attempt_at END,
       last_status = r.http_status,
       last_error = r.error,
       lease_token = NULL
  FROM r JOIN stored AS s ON s.notification_id = r.id AND s.attempt = r.attempt
 WHERE n.id = r.id
   AND n.status = 'PENDING' AND (n.lease_token = r.token OR r.target = 'DELIVERED')
RETURNING r.target, n.watch_id, n.network,
          (SELECT l.endpoint_id FROM locked l WHERE l.id = n.id) AS endpoint_id`;

/**
 * Record a batch of attempts and move their notifications, in one transaction.
 * @param db the pool or a transaction's connection.
 * @param scale the schedule scale (config.delivery.scheduleScale; 1 = SPEC).
 * @throws the database error; nothing of the batch is then recorded (the caller retries it).
 */
export async function completeAttempts(
  db: Queryable,
  batch: readonly Completion[],
  scale: number,
): Promise<CompleteOutcome> {
  const outcome: CompleteOutcome = {
    recorded: 0,
    delivered: 0,
    retried: 0,
    dead: 0,
    test: 0,
    stale: 0,
    watchIds: [],
    deadWatchIds: [],
    endpointIds: [],
    deadEndpointIds: [],
  };
  if (batch.length === 0) return outcome;
  const ids: string[] = [];
  const numbers: number[] = [];
  const started: Date[] = [];
  const durations: number[] = [];
  const statuses: Array<number | null> = [];
  const errors: Array<string | null> = [];
  const tokens: string[] = [];
  const targets: Target[] = [];
  const delays: number[] = [];
  const classes: Array<string | null> = [];
  // jsonb columns travel as JSON text (one text[] per column), cast in the statement: the same
  // on node-postgres and PGlite.
  const sentHeaders: Array<string | null> = [];
  const answerHeaders: Array<string | null> = [];
  const answerBodies: Array<string | null> = [];
  for (const c of batch) {
    const made = c.attemptsBefore + 1;
    const delay = c.result.ok ? null : nextDelayMs(made, scale);
    ids.push(c.notificationId);
    numbers.push(made);
    started.push(c.result.startedAt);
    durations.push(Math.max(0, Math.round(c.result.durationMs)));
    const status = c.result.status ?? null;
    const error = c.result.ok ? null : (c.result.error ?? 'failed');
    statuses.push(status);
    errors.push(error);
    tokens.push(c.leaseToken);
    targets.push(c.result.ok ? 'DELIVERED' : delay === null ? 'DEAD' : 'PENDING');
    delays.push(delay ?? 0);
    classes.push(errorClass(status, error));
    sentHeaders.push(jsonOrNull(c.result.requestHeaders));
    answerHeaders.push(jsonOrNull(c.result.responseHeaders));
    answerBodies.push(c.result.responseBody ?? null);
  }
  const { rows: moved } = await db.query<{
    target: Target;
    watch_id: string;
    network: string;
    endpoint_id: string | null;
  }>(COMPLETE_SQL, [
    ids,
    tokens,
    numbers,
    started,
    durations,
    statuses,
    errors,
    targets,
    delays,
    WORKER_LOST_ERROR,
    classes,
    sentHeaders,
    answerHeaders,
    answerBodies,
  ]);
  outcome.recorded = batch.length;
  for (const r of moved) {
    // Test-mode deliveries (issue 32) never count in the live figures (metrics).
    if (!isLivemode(r.network)) outcome.test++;
    else if (r.target === 'DELIVERED') outcome.delivered++;
    else if (r.target === 'DEAD') outcome.dead++;
    else outcome.retried++;
  }
  outcome.stale = batch.length - moved.length;
  outcome.watchIds = [...new Set(moved.map((r) => r.watch_id))];
  outcome.deadWatchIds = [
    ...new Set(moved.filter((r) => r.target === 'DEAD').map((r) => r.watch_id)),
  ];
  const endpoints = (rows: typeof moved) =>
    [...new Set(rows.map((r) => r.endpoint_id))].filter((e): e is string => e !== null);
  outcome.endpointIds = endpoints(moved);
  outcome.deadEndpointIds = endpoints(moved.filter((r) => r.target === 'DEAD'));
  return outcome;
}

/** A header map as JSON text for a jsonb column; null when absent. */
function jsonOrNull(headers: Record<string, string> | undefined): string | null {
  return headers === undefined ? null : JSON.stringify(headers);
}

/**
 * Give back claimed notifications that were never attempted (the worker is stopping): due at
 * once, lease cleared, attempts unchanged, guarded by the token like a completion.
 * @returns how many were released (the others had been taken over already).
 */
export async function releaseClaims(
  db: Queryable,
  claims: ReadonlyArray<{ notificationId: string; leaseToken: string }>,
): Promise<number> {
  if (claims.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE notifications AS n SET next_attempt_at = now(), lease_token = NULL
       FROM unnest($1::text[], $2::text[]) AS r(id, token)
      WHERE n.id = r.id AND n.lease_token = r.token AND n.status = 'PENDING'`,
    [claims.map((c) => c.notificationId), claims.map((c) => c.leaseToken)],
  );
  return rowCount;
}
