/**
 * Endpoint health, alerts and the automatic pause of webhook watches (issue 19 items 1 and 2).
 *
 * Health is read from the `attempts` rows of a watch (migration 042: each carries its watch_id,
 * indexed with started_at). Throttled rows (a Bot API 429, not an attempt) are left out; a lost
 * attempt (its worker died) counts as failed. An attempt succeeded when it has no error (a 2xx).
 *
 * - {@link healthSummaries}: per watch, for the last hour, day and week: attempts, successes,
 *   success rate, p50 and p95 of the attempt's duration (ms, start to the answer's status or the
 *   failure), plus the streak kept on the watch row (last success, consecutive failures).
 * - {@link healthSeries}: one watch's attempts in time buckets, for the console's chart.
 * - {@link refreshWatchHealth}: run by the delivery worker after each recorded batch for the
 *   watches it moved. Under the watch's row lock, it recomputes the streak from the attempts
 *   (idempotent: two workers recomputing the same watch get the same answer) and moves the alert:
 *     - opens it (alert_state 'failing') when the streak reaches `failures` consecutive failed
 *       attempts, or a delivery of the watch went DEAD, and queues a 'failing' alert: every
 *       outage, the second of a day too (issue 29 item 1);
 *     - closes it on the first success, queuing one 'recovered' alert when the outage's start was
 *       queued (always since migration 055; not for an outage opened before it under the old
 *       one-per-24-hours rule and never alerted);
 *     - pauses an ACTIVE watch whose attempts have all failed for `autoPauseDays` (counted from the
 *       first failure after the last success, or from its last resume), with the reason kept
 *       (`paused_reason`, `auto_paused_at`) and an e-mail queued. 0 days: never.
 *   A watch on an endpoint (issue 30) keeps its streak and alert state, but queues no message and
 *   is never paused alone: the endpoint does both, once for all its watches
 *   (src/endpoints/health.ts refreshEndpointHealth, migration 092).
 *   An alert is a `watch_alerts` row plus one `alert_sends` row per target (e-mail and each
 *   enabled alert channel of the account) in the same transaction: the worker's alert loop
 *   (src/watches/alert-outbox.ts) sends them, paced per watch and target (a flapping endpoint gets
 *   one summary per pace, never silence), and never in the delivery worker's way.
 */
import type { Db, Queryable } from '../db/pool.js';
import { queueAlert } from './alert-outbox.js';
import { autoPauseIfDue } from './auto-pause.js';

/** Queue one alert (moved to src/watches/alert-outbox.ts, where its sends are queued). */
export { queueAlert };

/** What the alerts need from config (config.alerts). */
export interface AlertPolicy {
  /** Consecutive failed attempts that open the alert (WATCH_ALERT_FAILURES). */
  failures: number;
  /**
   * At most one alert message per watch and target within this many minutes; the changes in
   * between are sent as one summary (WATCH_ALERT_PACE_MINUTES; read by the alert loop).
   */
  paceMinutes: number;
  /** Pause after this many days of failures only; 0 = never (WATCH_AUTO_PAUSE_DAYS). */
  autoPauseDays: number;
}

/** The defaults of config.alerts (src/config.ts). */
export const DEFAULT_ALERT_POLICY: AlertPolicy = { failures: 5, paceMinutes: 5, autoPauseDays: 5 };

/** One window of a watch's health. */
export interface HealthWindow {
  attempts: number;
  succeeded: number;
  /** succeeded / attempts, 0..1; null without attempts. */
  success_rate: number | null;
  /** Median attempt duration, ms; null without attempts. */
  p50_ms: number | null;
  /** 95th percentile of the attempt duration, ms; null without attempts. */
  p95_ms: number | null;
}

/** The windows of {@link healthSummaries}, with their spans. */
export const HEALTH_WINDOWS = { hour: '1 hour', day: '1 day', week: '7 days' } as const;
export type HealthWindowName = keyof typeof HEALTH_WINDOWS;

const EMPTY: HealthWindow = {
  attempts: 0,
  succeeded: 0,
  success_rate: null,
  p50_ms: null,
  p95_ms: null,
};

interface WindowRow {
  watch_id: string;
  span: HealthWindowName;
  attempts: number;
  succeeded: number;
  p50: number | null;
  p95: number | null;
}

/**
 * Whose attempts a health figure counts: a watch's (attempts.watch_id, attempts_watch_started) or
 * an endpoint's, all its watches together (attempts.endpoint_id, migration 091's partial indexes).
 */
export type AttemptsOf = 'watch_id' | 'endpoint_id';

/**
 * The hour, day and week windows of each of `watchIds` (one statement; three index ranges per
 * watch on attempts_watch_started), or of each endpoint of `ids` with `by` = 'endpoint_id'.
 * @returns id → windows (every id present; empty windows for one without attempts).
 */
export async function healthSummaries(
  db: Queryable,
  watchIds: readonly string[],
  by: AttemptsOf = 'watch_id',
): Promise<Map<string, Record<HealthWindowName, HealthWindow>>> {
  const out = new Map<string, Record<HealthWindowName, HealthWindow>>();
  for (const id of watchIds) out.set(id, { hour: EMPTY, day: EMPTY, week: EMPTY });
  if (watchIds.length === 0) return out;
  const { rows } = await db.query<WindowRow>(
    `SELECT x.id AS watch_id, s.span, count(a.*)::int AS attempts,
            (count(a.*) FILTER (WHERE a.error IS NULL))::int AS succeeded,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS p95
       FROM unnest($1::text[]) AS x(id)
      CROSS JOIN (VALUES ('hour', interval '1 hour'), ('day', interval '1 day'),
                         ('week', interval '7 days')) AS s(span, len)
       JOIN attempts a ON a.${by} = x.id AND a.started_at > now() - s.len AND NOT a.throttled
      GROUP BY x.id, s.span`,
    [watchIds],
  );
  for (const r of rows) {
    const w = out.get(r.watch_id);
    if (!w) continue;
    w[r.span] = windowOf(r.attempts, r.succeeded, r.p50, r.p95);
  }
  return out;
}

function windowOf(
  attempts: number,
  succeeded: number,
  p50: number | null,
  p95: number | null,
): HealthWindow {
  return {
    attempts,
    succeeded,
    success_rate: attempts > 0 ? succeeded / attempts : null,
    p50_ms: p50 === null ? null : Math.round(Number(p50)),
    p95_ms: p95 === null ? null : Math.round(Number(p95)),
  };
}

/** One bucket of {@link healthSeries}. */
export interface HealthBucket extends HealthWindow {
  /** Start of the bucket, ISO 8601. */
  start: string;
}

/** Bucket width per window, seconds: 5 min over an hour, 1 h over a day, 6 h over a week. */
export const BUCKET_SECONDS: Record<HealthWindowName, number> = {
  hour: 5 * 60,
  day: 60 * 60,
  week: 6 * 60 * 60,
};

/**
 * One watch's attempts over `window` (an endpoint's with `by` = 'endpoint_id'), in buckets of
 * {@link BUCKET_SECONDS} aligned to the epoch, oldest first, every bucket present (empty ones
 * with 0 attempts).
 */
export async function healthSeries(
  db: Queryable,
  watchId: string,
  window: HealthWindowName,
  by: AttemptsOf = 'watch_id',
): Promise<{ bucket_seconds: number; buckets: HealthBucket[] }> {
  const step = BUCKET_SECONDS[window];
  const { rows } = await db.query<{
    start: Date;
    attempts: number;
    succeeded: number;
    p50: number | null;
    p95: number | null;
  }>(
    `WITH b AS (
       SELECT generate_series(
                to_timestamp(floor(extract(epoch FROM now() - $2::interval) / $3) * $3),
                now(), make_interval(secs => $3)) AS start
     )
     SELECT b.start, count(a.*)::int AS attempts,
            (count(a.*) FILTER (WHERE a.error IS NULL))::int AS succeeded,
            percentile_cont(0.5) WITHIN GROUP (ORDER BY a.duration_ms) AS p50,
            percentile_cont(0.95) WITHIN GROUP (ORDER BY a.duration_ms) AS p95
       FROM b
       LEFT JOIN attempts a
         ON a.${by} = $1 AND NOT a.throttled
        AND a.started_at >= b.start AND a.started_at < b.start + make_interval(secs => $3)
      GROUP BY b.start ORDER BY b.start`,
    [watchId, HEALTH_WINDOWS[window], step],
  );
  return {
    bucket_seconds: step,
    buckets: rows.map((r) => ({
      start: new Date(r.start).toISOString(),
      ...windowOf(r.attempts, r.succeeded, r.p50, r.p95),
    })),
  };
}

/** The alert and pause columns of a watch row. */
interface HealthState {
  id: string;
  account_id: string;
  /** The watch's environment (issue 32): `mainnet` live, `nile` test. */
  network: string;
  status: 'ACTIVE' | 'PAUSED';
  channel: string;
  /** The endpoint it delivers to (issue 30); null: its own URL. */
  endpoint_id: string | null;
  alert_state: 'failing' | null;
  alert_since: Date | null;
  alert_mailed_at: Date | null;
  failures_counted_from: Date | null;
  deleted: boolean;
}

/** What {@link refreshWatchHealth} changed (tests, logs). */
export interface HealthChanges {
  opened: string[];
  recovered: string[];
  paused: string[];
}

/**
 * Recompute the streak of each watch in `watchIds` and move its alert and pause (see the file's
 * comment). Each watch in its own short transaction, its row locked.
 * @param deadWatchIds those of `watchIds` with a delivery that went DEAD in the batch.
 * @throws the database error (the worker logs it; the next batch of the watch recomputes).
 */
export async function refreshWatchHealth(
  db: Db,
  watchIds: readonly string[],
  deadWatchIds: readonly string[],
  policy: AlertPolicy,
): Promise<HealthChanges> {
  const changes: HealthChanges = { opened: [], recovered: [], paused: [] };
  const dead = new Set(deadWatchIds);
  for (const id of new Set(watchIds)) {
    await db.transaction(async (tx) => {
      const { rows } = await tx.query<HealthState>(
        `SELECT id, account_id, network, status, channel, endpoint_id, alert_state, alert_since,
                alert_mailed_at,
                failures_counted_from, deleted_at IS NOT NULL AS deleted
           FROM watches WHERE id = $1 FOR UPDATE`,
        [id],
      );
      const w = rows[0];
      if (w?.channel !== 'webhook') return;
      // A watch on an endpoint keeps its streak and alert state, but its messages and its pause
      // are the endpoint's (src/endpoints/health.ts): one for all the watches on it.
      const own = w.endpoint_id === null;
      const { rows: s } = await tx.query<{
        last_ok: Date | null;
        failures: number;
        first_failure: Date | null;
        now: Date;
      }>(
        `WITH ok AS (
           SELECT max(started_at) AS t FROM attempts
            WHERE watch_id = $1 AND error IS NULL AND NOT throttled
         )
         SELECT ok.t AS last_ok, count(a.*)::int AS failures, min(a.started_at) AS first_failure,
                now() AS now
           FROM ok LEFT JOIN attempts a
             ON a.watch_id = $1 AND NOT a.throttled AND a.error IS NOT NULL
            AND a.started_at > coalesce(ok.t, '-infinity'::timestamptz)
          GROUP BY ok.t`,
        [id],
      );
      const st = s[0];
      if (!st) return;
      const now = new Date(st.now);
      const failures = st.failures;
      await tx.query(
        `UPDATE watches SET last_success_at = $2, consecutive_failures = $3, failing_since = $4
          WHERE id = $1`,
        [id, st.last_ok, failures, failures > 0 ? st.first_failure : null],
      );
      if (failures === 0 && w.alert_state === 'failing') {
        const mailed =
          w.alert_mailed_at !== null &&
          w.alert_since !== null &&
          new Date(w.alert_mailed_at).getTime() >= new Date(w.alert_since).getTime();
        await tx.query(
          `UPDATE watches SET alert_state = NULL, alert_since = NULL, alert_reason = NULL
            WHERE id = $1`,
          [id],
        );
        if (mailed && own) {
          await queueAlert(tx, w, 'recovered', 'Deliveries succeed again.');
        }
        changes.recovered.push(id);
        return;
      }
      if (failures === 0 || w.deleted) return;
      if (w.alert_state === null && (failures >= policy.failures || dead.has(id))) {
        const reason = dead.has(id)
          ? `a delivery failed all its attempts and went DEAD (${failures} failed attempts in a row)`
          : `${failures} delivery attempts in a row failed`;
        // Every outage is alerted (issue 29 item 1); alert_mailed_at records that this one was,
        // so its end is alerted too.
        await tx.query(
          `UPDATE watches SET alert_state = 'failing', alert_since = $2, alert_reason = $3,
                  alert_mailed_at = $2
            WHERE id = $1`,
          [id, now, reason],
        );
        if (own) await queueAlert(tx, w, 'failing', `Deliveries are failing: ${reason}.`);
        changes.opened.push(id);
      }
      if (
        own &&
        w.status === 'ACTIVE' &&
        (await autoPauseIfDue(
          tx,
          { kind: 'watch', ...w },
          { failures, firstFailure: st.first_failure, now },
          policy,
        ))
      ) {
        changes.paused.push(id);
      }
    });
  }
  return changes;
}
