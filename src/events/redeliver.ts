/**
 * Redelivery (issue 12 item 5; DESIGN decisions "redelivery"): a new notification for an event
 * already matched, with the same event_id and therefore the same payload bytes
 * (src/events/event.ts serializeEvent), attempts from 0 and the contract's schedule from now.
 * The earlier notifications and their attempts are kept (the console shows every chain);
 * GET /v1/events shows the newest. The worker claims the new row like any other (same outbox).
 *
 * One chain at a time: an event has at most one PENDING notification, enforced by the database
 * (migration 016, a partial unique index) and not only here. Two redeliveries at the same
 * instant (single and bulk, console and API) create one new notification: the insert skips an
 * event that already has a PENDING one (ON CONFLICT DO NOTHING), and the single redelivery then
 * answers 409 like a redelivery of an event still being delivered.
 */
import type { InTransaction } from '../audit/audit.js';
import { ApiError } from '../common/errors.js';
import { newId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { DEAD_EVENTS_SQL, type EventFilters, eventFilterClauses } from './list.js';

/**
 * Redeliver one event of the account.
 * @param inTx run in the redelivery's transaction with the new notification's id (the audit entry).
 * @returns the new notification's id.
 * @throws ApiError 404 when the event is not the account's (or does not exist); 409 when its
 *   newest notification is still PENDING (a delivery chain is running: wait for it or its DEAD).
 */
export async function redeliverEvent(
  db: Db,
  accountId: string,
  network: string,
  eventId: string,
  inTx?: InTransaction<string>,
): Promise<string> {
  const stillPending = () =>
    new ApiError(
      409,
      'this event is still being delivered (its newest notification is PENDING): redeliver it once it is DELIVERED or DEAD',
    );
  return db.transaction(async (tx) => {
    // Lock the event row first, then read its newest status in a statement of its own: under
    // READ COMMITTED a statement that waited for the lock would still see the status as it was
    // before the other redelivery committed.
    const { rows } = await tx.query(
      'SELECT 1 FROM events e WHERE e.id = $1 AND e.account_id = $2 AND e.network = $3 FOR UPDATE',
      [eventId, accountId, network],
    );
    if (rows.length === 0) throw new ApiError(404, 'event not found');
    const { rows: newest } = await tx.query<{ status: string }>(
      `SELECT n.status FROM notifications n WHERE n.event_id = $1
        ORDER BY n.created_at DESC, n.id DESC LIMIT 1`,
      [eventId],
    );
    if (newest[0]?.status === 'PENDING') throw stillPending();
    const [id] = await insertRedeliveries(tx, [eventId]);
    if (!id) throw stillPending(); // the unique index saw a PENDING chain committed meanwhile
    await inTx?.(tx, id);
    return id;
  });
}

/**
 * Which DEAD events a bulk redelivery takes: every one of the account, or narrowed by watch, time
 * range and the list's filters (search, asset, direction, channel), as the dead letters page
 * shows them.
 */
export interface RedeliveryScope extends EventFilters {
  /** Only this watch's events. */
  watchId?: string | undefined;
  /** Events created at or after this instant (ISO 8601). */
  since?: string | undefined;
  /** Events created before this instant (ISO 8601). */
  until?: string | undefined;
}

/** Most events one bulk redelivery takes (a larger backlog: run it again). */
export const BULK_REDELIVERY_LIMIT = 10_000;

/**
 * Redeliver every event of the account in `scope` whose newest notification is DEAD (the dead
 * letters), at most BULK_REDELIVERY_LIMIT, in one transaction.
 * @param inTx run in that transaction with how many were redelivered (the audit entry).
 * @returns how many were redelivered.
 * @throws the database's 22007/22008 when a bound is not a timestamp PostgreSQL can hold.
 */
export async function redeliverDead(
  db: Db,
  accountId: string,
  network: string,
  scope: RedeliveryScope,
  inTx?: InTransaction<number>,
): Promise<number> {
  return db.transaction(async (tx) => {
    const q = deadSelection(accountId, network, scope);
    const { rows } = await tx.query<{ id: string }>(q.text, q.values);
    const ids = await insertRedeliveries(
      tx,
      rows.map((r) => r.id),
    );
    await inTx?.(tx, ids.length);
    return ids.length;
  });
}

/**
 * How many events a bulk redelivery of `scope` would take now (what the console's confirmation
 * says before the user confirms): the same selection as {@link redeliverDead}, unlocked, so at
 * most BULK_REDELIVERY_LIMIT.
 * @throws the database's 22007/22008 when a bound is not a timestamp PostgreSQL can hold.
 */
export async function countDead(
  db: Queryable,
  accountId: string,
  network: string,
  scope: RedeliveryScope,
): Promise<number> {
  const q = deadSelection(accountId, network, scope, false);
  const { rows } = await db.query<{ n: string }>(
    `SELECT count(*)::text AS n FROM (${q.text}) AS s`,
    q.values,
  );
  return Number(rows[0]?.n ?? 0);
}

/**
 * The selection of a bulk redelivery: the account's events in `scope` whose newest notification is
 * DEAD, oldest first, at most BULK_REDELIVERY_LIMIT, locked (FOR UPDATE) unless `lock` is false
 * (a count). It starts from the account's DEAD notifications (DEAD_EVENTS_SQL, migration 023), not
 * from every event. Exported for the plan test.
 */
export function deadSelection(
  accountId: string,
  network: string,
  scope: RedeliveryScope,
  lock = true,
): { text: string; values: unknown[] } {
  const values: unknown[] = [accountId, network];
  const where = ['e.account_id = $1', 'e.network = $2'];
  if (scope.watchId !== undefined) {
    values.push(scope.watchId);
    where.push(`e.watch_id = $${values.length}`);
  }
  if (scope.since !== undefined) {
    values.push(scope.since);
    where.push(`e.created_at >= $${values.length}::text::timestamptz`);
  }
  if (scope.until !== undefined) {
    values.push(scope.until);
    where.push(`e.created_at < $${values.length}::text::timestamptz`);
  }
  eventFilterClauses(values, where, scope);
  return {
    text: `SELECT e.id FROM events e
        WHERE ${where.join(' AND ')}
          AND ${DEAD_EVENTS_SQL}
          AND (SELECT n.status FROM notifications n WHERE n.event_id = e.id
                ORDER BY n.created_at DESC LIMIT 1) = 'DEAD'
        ORDER BY e.created_at
        LIMIT ${BULK_REDELIVERY_LIMIT}${lock ? '\n          FOR UPDATE OF e' : ''}`,
    values,
  };
}

/**
 * Insert one new PENDING notification per event (channel and watch as the event's), skipping an
 * event that has a PENDING one already (migration 016's index).
 * @returns the ids inserted.
 */
export async function insertRedeliveries(tx: Queryable, eventIds: string[]): Promise<string[]> {
  if (eventIds.length === 0) return [];
  const ids = eventIds.map(() => newId('ntf'));
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                next_attempt_at, created_at, network)
     SELECT x.ntf, e.id, e.account_id, e.watch_id, w.channel, 'PENDING', 0, now(),
            clock_timestamp() + (x.ord - 1) * interval '1 microsecond', e.network
       FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS x(event_id, ntf, ord)
       JOIN events e ON e.id = x.event_id
       JOIN watches w ON w.id = e.watch_id
     ON CONFLICT (event_id) WHERE status = 'PENDING' DO NOTHING
     RETURNING id`,
    [eventIds, ids],
  );
  return rows.map((r) => r.id);
}
