/**
 * Webhook secrets that cannot be decrypted (issue 14 item 3): a replica missing a key during a
 * rotation (src/common/secrets.ts, docs/security.md "Secrets"), or a tampered ciphertext. Such a delivery is
 * not the receiver's failure and must not use up the contract's six attempts: the worker gives the
 * notification back with a backoff (holdClaims; attempts unchanged, no attempt row), logs an error
 * once per key id, counts it in a metric, and records the key id here so that GET /healthz on any
 * replica answers 503 naming it. Delivery resumes by itself when the key is configured: the next
 * claim decrypts, and the row is deleted.
 */
import type { Queryable } from '../db/pool.js';

/** How long a recorded problem keeps /healthz at 503 without being seen again, seconds. */
export const SECRET_PROBLEM_WINDOW_SECONDS = 300;

/** Record (or refresh) an undecryptable key id. `error` never holds the secret. */
export async function recordSecretProblem(
  db: Queryable,
  keyId: string,
  error: string,
): Promise<void> {
  await db.query(
    `INSERT INTO secret_problems (key_id, error) VALUES ($1, $2)
     ON CONFLICT (key_id) DO UPDATE SET last_seen = now(), error = EXCLUDED.error`,
    [keyId, error.slice(0, 500)],
  );
}

/** Forget a key id whose secrets decrypt again. */
export async function clearSecretProblem(db: Queryable, keyId: string): Promise<void> {
  await db.query('DELETE FROM secret_problems WHERE key_id = $1', [keyId]);
}

/** Key ids seen undecryptable within the window, oldest first. */
export async function recentSecretProblems(
  db: Queryable,
): Promise<Array<{ key_id: string; error: string; since: Date }>> {
  const { rows } = await db.query<{ key_id: string; error: string; since: Date }>(
    `SELECT key_id, error, first_seen AS since FROM secret_problems
      WHERE last_seen > now() - make_interval(secs => $1)
      ORDER BY first_seen, key_id`,
    [SECRET_PROBLEM_WINDOW_SECONDS],
  );
  return rows;
}

/**
 * Give claimed notifications back, due again in `delayMs`, without counting an attempt (the
 * lease token is cleared, so the claim is not counted as a lost attempt either), guarded by the
 * token like a completion. `reason` goes to last_error.
 * @returns how many were held (the others had been taken over already).
 */
export async function holdClaims(
  db: Queryable,
  claims: ReadonlyArray<{ notificationId: string; leaseToken: string }>,
  delayMs: number,
  reason: string,
): Promise<number> {
  if (claims.length === 0) return 0;
  const { rowCount } = await db.query(
    `UPDATE notifications AS n
        SET next_attempt_at = now() + make_interval(secs => $3::float8 / 1000),
            lease_token = NULL, last_error = $4
       FROM unnest($1::text[], $2::text[]) AS r(id, token)
      WHERE n.id = r.id AND n.lease_token = r.token AND n.status = 'PENDING'`,
    [claims.map((c) => c.notificationId), claims.map((c) => c.leaseToken), delayMs, reason],
  );
  return rowCount;
}
