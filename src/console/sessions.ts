/**
 * Console sessions (SPEC §Authentication, Console; DESIGN "The console"): an opaque random id in
 * the HttpOnly cookie `tw_session`, only its SHA-256 stored, with a sliding expiry (each use moves
 * it to now + the lifetime, 7 days by default). Each session has its own CSRF token, sent in the
 * page-readable cookie `tw_csrf` and echoed by the page as `X-CSRF-Token`; only its SHA-256 is
 * stored, binding the cookie to the session. A session belongs to a user (issue 18 item 3): it is
 * found with the user's current role, so a role change applies from the next request, and a
 * removed user's sessions (deleted with it) answer nothing.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { SessionRow } from '../accounts/callers.js';
import type { Role } from '../accounts/users.js';
import { newId } from '../common/ids.js';
import type { Queryable } from '../db/pool.js';

/** SHA-256 hex of a token (session or CSRF): what is stored. */
export function tokenHash(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** A new random token: 32 bytes, base64url (43 characters). */
export function newToken(): string {
  return randomBytes(32).toString('base64url');
}

export type { SessionRow } from '../accounts/callers.js';

/** A session just opened: the tokens exist only here and in the cookies. */
export interface OpenedSession {
  session: SessionRow;
  /** The `tw_session` cookie value. */
  token: string;
  /** The `tw_csrf` cookie value. */
  csrf: string;
}

const COLUMNS = 'id, account_id, user_id, created_at, last_used_at, expires_at, user_agent, ip';
const S_COLUMNS = COLUMNS.split(', ')
  .map((c) => `s.${c}`)
  .join(', ');

/** Open a session for the user `userId`, valid `ttlSeconds` from now (and from every later use). */
export async function openSession(
  db: Queryable,
  o: { userId: string; ttlSeconds: number; userAgent?: string | undefined; ip?: string },
): Promise<OpenedSession> {
  const token = newToken();
  const csrf = newToken();
  const { rows } = await db.query<SessionRow>(
    `INSERT INTO console_sessions (id, token_hash, csrf_hash, account_id, user_id, expires_at, user_agent, ip)
     SELECT $1, $2, $3, account_id, id, now() + make_interval(secs => $5), $6, $7
       FROM console_users WHERE id = $4
     RETURNING ${COLUMNS}`,
    [
      newId('ses'),
      tokenHash(token),
      tokenHash(csrf),
      o.userId,
      o.ttlSeconds,
      o.userAgent?.slice(0, 512) ?? null,
      o.ip ?? null,
    ],
  );
  const session = rows[0];
  if (!session) throw new Error('INSERT … RETURNING returned no row');
  return { session, token, csrf };
}

/**
 * The live session of `token` (not revoked, not expired), its expiry moved to now + ttl (the
 * sliding window) and its last use recorded. The write is skipped while the last one is fresher
 * than a minute (a tenth of the lifetime when that is shorter): a page that polls every few
 * seconds then costs a read, not a committed write (a WAL flush) per request, and the expiry
 * still slides to within that much of "now + ttl".
 * @returns the session, its CSRF hash, the user's current role and whether the user lacks a
 *   second factor its account requires (migration 046), or undefined (unknown, revoked or
 *   expired).
 */
export async function useSession(
  db: Queryable,
  token: string,
  ttlSeconds: number,
): Promise<
  { session: SessionRow; csrfHash: string; role: Role; secondFactorMissing: boolean } | undefined
> {
  const hash = tokenHash(token);
  const { rows } = await db.query<
    SessionRow & { csrf_hash: string; fresh: boolean; role: Role; missing: boolean }
  >(
    `SELECT ${S_COLUMNS}, s.csrf_hash, u.role,
            s.last_used_at > now() - make_interval(secs => least(60, $2::float8 / 10)) AS fresh,
            (a.require_two_factor AND u.totp_enabled_at IS NULL) AS missing
       FROM console_sessions s JOIN console_users u ON u.id = s.user_id
       JOIN accounts a ON a.id = u.account_id
      WHERE s.token_hash = $1 AND s.revoked_at IS NULL AND s.expires_at > now()`,
    [hash, ttlSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  const { csrf_hash, fresh, role, missing, ...session } = row;
  const secondFactorMissing = missing === true;
  if (fresh) return { session, csrfHash: csrf_hash, role, secondFactorMissing };
  const { rows: moved } = await db.query<SessionRow>(
    `UPDATE console_sessions
        SET last_used_at = now(), expires_at = now() + make_interval(secs => $2)
      WHERE token_hash = $1 AND revoked_at IS NULL AND expires_at > now()
      RETURNING ${COLUMNS}`,
    [hash, ttlSeconds],
  );
  const updated = moved[0];
  return updated ? { session: updated, csrfHash: csrf_hash, role, secondFactorMissing } : undefined;
}

/** The user's live sessions, most recently used first. */
export async function listSessions(db: Queryable, userId: string): Promise<SessionRow[]> {
  const { rows } = await db.query<SessionRow>(
    `SELECT ${COLUMNS} FROM console_sessions
      WHERE user_id = $1 AND revoked_at IS NULL AND expires_at > now()
      ORDER BY last_used_at DESC, id DESC`,
    [userId],
  );
  return rows;
}

/** Revoke one of the user's sessions. @returns false when it has no such live session. */
export async function revokeSession(db: Queryable, userId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_sessions SET revoked_at = now()
      WHERE id = $1 AND user_id = $2 AND revoked_at IS NULL`,
    [id, userId],
  );
  return rowCount > 0;
}

/** Revoke every live session of the user but `keepId` (undefined: all). @returns how many. */
export async function revokeOtherSessions(
  db: Queryable,
  userId: string,
  keepId: string | undefined,
): Promise<number> {
  const { rowCount } = await db.query(
    `UPDATE console_sessions SET revoked_at = now()
      WHERE user_id = $1 AND revoked_at IS NULL AND id IS DISTINCT FROM $2`,
    [userId, keepId ?? null],
  );
  return rowCount;
}
