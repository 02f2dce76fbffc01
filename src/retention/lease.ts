/**
 * Leases for periodic jobs that must run in one process at a time across replicas (migration 024,
 * table maintenance_leases): the pruning job (src/retention/prune.ts) first.
 *
 * A lease is one row per job: `holder` (a process's random id) and `expires_at`. Taking it and
 * renewing it is the same single statement, which succeeds only when the row is free, expired, or
 * already ours; time is the database's (`now()`), so the replicas' clocks do not matter. A holder
 * that dies or stalls stops renewing and the lease passes to another process once it expires; a
 * holder that finds its renewal refused has lost it and stops. Releasing deletes the row if it is
 * still ours. A table row rather than a session advisory lock (the ingester's choice,
 * src/db/leader.ts): a job that runs a few seconds every few minutes needs no dedicated
 * connection, and the statement is the same on PGlite.
 *
 * The lease saves duplicate work; it is not what keeps a job correct: the pruning job's
 * statements are each safe to run twice at once (SKIP LOCKED, idempotent deletes).
 */
import type { Queryable } from '../db/pool.js';

/**
 * Take or renew the lease `name` for `holder` until now + `ttlMs`.
 * @returns true when `holder` holds it now; false when another holder's lease has not expired.
 * @throws the database error.
 */
export async function takeLease(
  db: Queryable,
  name: string,
  holder: string,
  ttlMs: number,
): Promise<boolean> {
  const { rows } = await db.query<{ holder: string }>(
    `INSERT INTO maintenance_leases (name, holder, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3::float8 / 1000))
     ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
      WHERE maintenance_leases.expires_at <= now() OR maintenance_leases.holder = EXCLUDED.holder
     RETURNING holder`,
    [name, holder, ttlMs],
  );
  return rows[0]?.holder === holder;
}

/**
 * Give the lease `name` up if `holder` still holds it (another process may take it at once).
 * @throws the database error.
 */
export async function releaseLease(db: Queryable, name: string, holder: string): Promise<void> {
  await db.query('DELETE FROM maintenance_leases WHERE name = $1 AND holder = $2', [name, holder]);
}
