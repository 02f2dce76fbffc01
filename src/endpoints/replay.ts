/**
 * Replay an endpoint's failed deliveries since a time (issue 40 item 1; the Svix "recover failed
 * messages since"): POST /v1/endpoints/{id}/replay and the endpoint page's "Replay failed since…".
 *
 * What it takes: every event of a watch that delivers to the endpoint now, created at or after
 * `since`, whose newest delivery is DEAD (all six attempts failed). Each gets a new delivery
 * exactly as a redelivery (src/events/redeliver.ts: the same event_id and body bytes, attempts
 * from 0, the retry schedule from now); events still being delivered (PENDING) or delivered are
 * left alone.
 *
 * Bounded: at most BULK_REDELIVERY_LIMIT (10,000) events per call, oldest first; when the bound
 * cuts it short the answer's `next_since` is the creation instant of the last event taken (call
 * again with it: that event is being delivered again, so it is not taken twice). `since` may be
 * at most REPLAY_MAX_AGE_DAYS (30) days back and not in the future.
 *
 * Idempotent: a replay is a row (migration 096). The same endpoint and the same `since` again
 * within REPEAT_WINDOW_HOURS (24) of a replay answer that replay (`repeated: true`) and queue
 * nothing, so a client that retries after a lost answer replays once. The endpoint's row lock
 * (FOR UPDATE) makes two identical requests at the same instant wait for each other.
 *
 * Audited: a replay that ran writes `endpoint.replayed` (its id, since, how many, next_since) in
 * its own transaction; a repeat writes nothing (nothing changed).
 */
import type { InTransaction } from '../audit/audit.js';
import { ApiError } from '../common/errors.js';
import { newId } from '../common/ids.js';
import type { Db } from '../db/pool.js';
import { BULK_REDELIVERY_LIMIT, deadSelection, insertRedeliveries } from '../events/redeliver.js';

/** How far back `since` may reach, days (older dead letters: POST …/redeliver, all of them). */
export const REPLAY_MAX_AGE_DAYS = 30;
/** How long the same (endpoint, since) answers the first replay instead of replaying, hours. */
export const REPEAT_WINDOW_HOURS = 24;

/** One replay, as stored and answered (EndpointReplay in src/endpoints/schema.ts). */
export interface EndpointReplay {
  /** rpl_… */
  id: string;
  endpoint_id: string;
  /** The `since` of the request, ISO 8601 UTC with microseconds. */
  since: string;
  /** Deliveries queued again by this replay. */
  replayed: number;
  /** Set when the bound (10,000) cut it short: call again with since = next_since. */
  next_since: string | null;
  /** When it ran, ISO 8601 UTC with microseconds. */
  created_at: string;
  /** True when this answer is an earlier identical request's replay (nothing queued now). */
  repeated: boolean;
}

const ISO = `'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'`;
const REPLAY_COLUMNS = `id, endpoint_id, to_char(since AT TIME ZONE 'UTC', ${ISO}) AS since, replayed,
  next_since, to_char(created_at AT TIME ZONE 'UTC', ${ISO}) AS created_at`;

/** The SPEC error body for a `since` out of bounds. */
function badSince(message: string): ApiError {
  return new ApiError(400, 'invalid request body', undefined, [{ field: 'since', message }]);
}

/**
 * Replay the failed deliveries of the account's live endpoint `id` created at or after `since`
 * (see the file's comment).
 * @param since RFC 3339 date-time text (validated as such by the route's schema); reaches SQL as
 *   text, so its microseconds are kept.
 * @param inTx run in the replay's transaction with the new replay (the audit entry); not run for
 *   a repeat.
 * @returns the replay, or undefined when there is no such live endpoint of the account on
 *   `network` (missing, deleted, another account's or environment's: 404 alike).
 * @throws ApiError 400 (`details[0].field` = since) when `since` is in the future, more than
 *   REPLAY_MAX_AGE_DAYS back, or not a timestamp PostgreSQL can hold.
 */
export async function replayEndpoint(
  db: Db,
  accountId: string,
  network: string,
  id: string,
  since: string,
  inTx?: InTransaction<EndpointReplay>,
): Promise<EndpointReplay | undefined> {
  return db.transaction(async (tx) => {
    let bounds: { future: boolean; too_old: boolean } | undefined;
    try {
      const { rows } = await tx.query<{ future: boolean; too_old: boolean }>(
        `SELECT $1::text::timestamptz > now() AS future,
                $1::text::timestamptz < now() - make_interval(days => $2) AS too_old`,
        [since, REPLAY_MAX_AGE_DAYS],
      );
      bounds = rows[0];
    } catch (err) {
      // 22007/22008: a date-time the format admits but PostgreSQL cannot hold (year 0000).
      const code = (err as { code?: unknown }).code;
      if (code === '22007' || code === '22008') throw badSince('not a representable timestamp');
      throw err;
    }
    if (bounds?.future) throw badSince('is in the future: give the instant to replay from');
    if (bounds?.too_old) {
      throw badSince(
        `is more than ${REPLAY_MAX_AGE_DAYS} days back: replay from a later instant, or redeliver all the endpoint's dead letters (POST /v1/endpoints/{id}/redeliver)`,
      );
    }
    // The endpoint, locked: identical requests at the same instant run one after the other.
    const { rows: ep } = await tx.query(
      `SELECT 1 FROM endpoints
        WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL
        FOR UPDATE`,
      [id, accountId, network],
    );
    if (ep.length === 0) return undefined;
    const { rows: earlier } = await tx.query<Omit<EndpointReplay, 'repeated'>>(
      `SELECT ${REPLAY_COLUMNS} FROM endpoint_replays
        WHERE endpoint_id = $1 AND since = $2::text::timestamptz
          AND created_at > now() - make_interval(hours => $3)
        ORDER BY created_at DESC LIMIT 1`,
      [id, since, REPEAT_WINDOW_HOURS],
    );
    if (earlier[0]) return { ...earlier[0], repeated: true };

    const q = deadSelection(accountId, network, { endpointId: id, since });
    const { rows: dead } = await tx.query<{ id: string }>(q.text, q.values);
    const ids = dead.map((r) => r.id);
    const queued = await insertRedeliveries(tx, ids);
    let nextSince: string | null = null;
    if (ids.length >= BULK_REDELIVERY_LIMIT) {
      const { rows } = await tx.query<{ last: string }>(
        `SELECT to_char(max(created_at) AT TIME ZONE 'UTC', ${ISO}) AS last
           FROM events WHERE id = ANY($1::text[])`,
        [ids],
      );
      nextSince = rows[0]?.last ?? null;
    }
    const { rows: stored } = await tx.query<Omit<EndpointReplay, 'repeated'>>(
      `INSERT INTO endpoint_replays (id, account_id, network, endpoint_id, since, replayed,
                                     next_since)
       VALUES ($1, $2, $3, $4, $5::text::timestamptz, $6, $7)
       RETURNING ${REPLAY_COLUMNS}`,
      [newId('rpl'), accountId, network, id, since, queued.length, nextSince],
    );
    const row = stored[0];
    if (!row) throw new Error('the replay just inserted is not readable');
    const replay = { ...row, replayed: Number(row.replayed), repeated: false };
    await inTx?.(tx, replay);
    return replay;
  });
}
