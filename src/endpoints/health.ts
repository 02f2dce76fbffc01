/**
 * An endpoint's delivery health, alert and automatic pause (issue 30 item 1: "health, failure
 * alerts, auto-pause, redelivery and dead letters work per endpoint as well as per watch").
 *
 * Every attempt records the endpoint it went to (attempts.endpoint_id, migration 091), and two
 * partial indexes list an endpoint's successful and failed attempts by time, so everything here
 * is a few index probes per endpoint, whatever the number of watches on it (a gateway's endpoint
 * with 100,000 deposit addresses costs what one with a single watch costs).
 *
 * - {@link endpointHealth}: the last day's attempts, successes and newest success per endpoint
 *   (the console's Endpoints page).
 * - {@link refreshEndpointHealth}: run by the delivery worker after each recorded batch for the
 *   endpoints it moved, beside the watches' refresh (src/watches/health.ts, same policy). Under
 *   the endpoint's row lock it recomputes the streak from the attempts (idempotent: two workers
 *   get the same answer) and moves the endpoint's alert and pause:
 *     - opens the alert (alert_state 'failing') at `failures` consecutive failed attempts, or when
 *       a delivery to it went DEAD; closes it at the first success;
 *     - switches an enabled endpoint off (enabled = false, `paused_reason`, `auto_paused_at`, an
 *       audit entry by the system) when all its attempts have failed for `autoPauseDays` (from
 *       the first failure after the last success, or from when it was last enabled again). Its
 *       deliveries then wait in the outbox without using attempts (as for an endpoint switched off
 *       by its owner) until it is enabled again: nothing is lost and no attempt is burnt on a
 *       receiver that is gone. 0 days: never.
 *   Each of these changes queues ONE alert message for the endpoint (migration 092: e-mail and
 *   each alert channel, through the watches' outbox and pace, src/watches/alert-outbox.ts), named
 *   by the endpoint's host and label with the number of its watches. The watches on the endpoint
 *   keep their own streak and alert state but queue no message and are not paused one by one
 *   (src/watches/health.ts): a receiver that goes down under 10,000 deposit addresses is one
 *   'failing' message, not 10,000.
 */
import type { Db, Queryable } from '../db/pool.js';
import { queueAlert } from '../watches/alert-outbox.js';
import { autoPauseIfDue } from '../watches/auto-pause.js';
import type { AlertPolicy } from '../watches/health.js';

/** The last day of deliveries to one endpoint. */
export interface EndpointHealth {
  /** Attempts started in the last 24 h (all watches on the endpoint). */
  attempts: number;
  /** Of them, answered 2xx. */
  succeeded: number;
  /** Start of the newest 2xx attempt in the window; null: none. */
  last_success_at: string | null;
}

/**
 * Health of each endpoint of `ids` over the last day (absent from the map: no attempts). Two
 * index ranges per endpoint (attempts_endpoint_ok, attempts_endpoint_failed).
 */
export async function endpointHealth(
  db: Queryable,
  ids: readonly string[],
): Promise<Map<string, EndpointHealth>> {
  if (ids.length === 0) return new Map();
  const { rows } = await db.query<{
    endpoint_id: string;
    succeeded: number;
    failed: number;
    last_success_at: Date | null;
  }>(
    `SELECT x.id AS endpoint_id,
            (SELECT count(*) FROM attempts a
              WHERE a.endpoint_id = x.id AND a.error IS NULL AND NOT a.throttled
                AND a.started_at > now() - interval '1 day')::int AS succeeded,
            (SELECT count(*) FROM attempts a
              WHERE a.endpoint_id = x.id AND a.error IS NOT NULL AND NOT a.throttled
                AND a.started_at > now() - interval '1 day')::int AS failed,
            (SELECT max(a.started_at) FROM attempts a
              WHERE a.endpoint_id = x.id AND a.error IS NULL AND NOT a.throttled
                AND a.started_at > now() - interval '1 day') AS last_success_at
       FROM unnest($1::text[]) AS x(id)`,
    [ids],
  );
  return new Map(
    rows
      .filter((r) => r.succeeded + r.failed > 0)
      .map((r) => [
        r.endpoint_id,
        {
          attempts: r.succeeded + r.failed,
          succeeded: r.succeeded,
          last_success_at: r.last_success_at ? new Date(r.last_success_at).toISOString() : null,
        },
      ]),
  );
}

/** What {@link refreshEndpointHealth} changed (tests, logs). */
export interface EndpointHealthChanges {
  opened: string[];
  recovered: string[];
  paused: string[];
}

interface EndpointState {
  id: string;
  account_id: string;
  /** The endpoint's environment (issue 32): `mainnet` live, `nile` test. */
  network: string;
  enabled: boolean;
  alert_state: 'failing' | null;
  failures_counted_from: Date | null;
  deleted: boolean;
}

/**
 * Recompute the streak of each endpoint of `endpointIds` and move its alert and pause (see the
 * file's comment). Each endpoint in its own short transaction, its row locked.
 * @param deadEndpointIds those with a delivery that went DEAD in the batch.
 * @param policy the watches' alert policy (WATCH_ALERT_FAILURES, WATCH_AUTO_PAUSE_DAYS).
 * @throws the database error (the worker logs it; the endpoint's next batch recomputes).
 */
export async function refreshEndpointHealth(
  db: Db,
  endpointIds: readonly string[],
  deadEndpointIds: readonly string[],
  policy: AlertPolicy,
): Promise<EndpointHealthChanges> {
  const changes: EndpointHealthChanges = { opened: [], recovered: [], paused: [] };
  const dead = new Set(deadEndpointIds);
  for (const id of new Set(endpointIds)) {
    await db.transaction(async (tx) => {
      const { rows } = await tx.query<EndpointState>(
        `SELECT id, account_id, network, enabled, alert_state, failures_counted_from,
                deleted_at IS NOT NULL AS deleted
           FROM endpoints WHERE id = $1 FOR UPDATE`,
        [id],
      );
      const e = rows[0];
      if (!e) return;
      // The newest success (one probe), the newest failure (one probe), and the failures since
      // that success (one range of the failed index).
      const { rows: s } = await tx.query<{
        last_ok: Date | null;
        last_failed: Date | null;
        failures: number;
        first_failure: Date | null;
        now: Date;
      }>(
        `WITH ok AS (
           SELECT max(started_at) AS t FROM attempts
            WHERE endpoint_id = $1 AND error IS NULL AND NOT throttled
         )
         SELECT ok.t AS last_ok,
                (SELECT max(started_at) FROM attempts
                  WHERE endpoint_id = $1 AND error IS NOT NULL AND NOT throttled) AS last_failed,
                count(a.*)::int AS failures, min(a.started_at) AS first_failure, now() AS now
           FROM ok LEFT JOIN attempts a
             ON a.endpoint_id = $1 AND a.error IS NOT NULL AND NOT a.throttled
            AND a.started_at > coalesce(ok.t, '-infinity'::timestamptz)
          GROUP BY ok.t`,
        [id],
      );
      const st = s[0];
      if (!st) return;
      const now = new Date(st.now);
      const failures = st.failures;
      await tx.query(
        `UPDATE endpoints SET last_success_at = $2, last_failure_at = $3,
                consecutive_failures = $4, failing_since = $5
          WHERE id = $1`,
        [id, st.last_ok, st.last_failed, failures, failures > 0 ? st.first_failure : null],
      );
      if (failures === 0) {
        if (e.alert_state === 'failing') {
          await tx.query(
            `UPDATE endpoints SET alert_state = NULL, alert_since = NULL, alert_reason = NULL
              WHERE id = $1`,
            [id],
          );
          await queueAlert(tx, e, 'recovered', 'Deliveries to the endpoint succeed again.');
          changes.recovered.push(id);
        }
        return;
      }
      if (e.deleted) return;
      if (e.alert_state === null && (failures >= policy.failures || dead.has(id))) {
        const reason = dead.has(id)
          ? `a delivery failed all its attempts and went DEAD (${failures} failed attempts in a row)`
          : `${failures} delivery attempts in a row failed`;
        await tx.query(
          `UPDATE endpoints SET alert_state = 'failing', alert_since = $2, alert_reason = $3
            WHERE id = $1`,
          [id, now, reason],
        );
        await queueAlert(tx, e, 'failing', `Deliveries to the endpoint are failing: ${reason}.`);
        changes.opened.push(id);
      }
      if (
        e.enabled &&
        (await autoPauseIfDue(
          tx,
          { kind: 'endpoint', ...e },
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
