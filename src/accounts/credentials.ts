/**
 * Console credentials of an account (issue 12 item 1): the argon2id hash of its password
 * (src/console/passwords.ts computes it), and one-time invitation links that let an account made
 * by the CLI (`tronwatch accounts invite`) set its password. An invitation token is random, shown
 * once, stored as its SHA-256, single use and short-lived.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';

/** How long an invitation link works, seconds (7 days: it goes by e-mail or chat). */
export const INVITE_TTL_SECONDS = 7 * 24 * 3600;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');

/** The account's password hash (PHC string) and id by e-mail, for a login. */
export async function passwordHashByEmail(
  db: Queryable,
  email: string,
): Promise<{ id: string; password_hash: string | null } | undefined> {
  const { rows } = await db.query<{ id: string; password_hash: string | null }>(
    'SELECT id, password_hash FROM accounts WHERE email = $1',
    [email.trim().toLowerCase()],
  );
  return rows[0];
}

/** The account's password hash by id (a password change checks the current one). */
export async function passwordHashById(db: Queryable, id: string): Promise<string | null> {
  const { rows } = await db.query<{ password_hash: string | null }>(
    'SELECT password_hash FROM accounts WHERE id = $1',
    [id],
  );
  return rows[0]?.password_hash ?? null;
}

/** Store a new password hash for the account. */
export async function setPasswordHash(db: Queryable, id: string, hash: string): Promise<void> {
  await db.query('UPDATE accounts SET password_hash = $2 WHERE id = $1', [id, hash]);
}

/**
 * A one-time invitation for the account: valid INVITE_TTL_SECONDS, single use.
 * @returns the token (shown once; put it in the link `/console/invite#token=…`).
 */
export async function createInvite(db: Queryable, accountId: string): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query(
    `INSERT INTO console_invites (token_hash, account_id, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [sha256(token), accountId, INVITE_TTL_SECONDS],
  );
  return token;
}

/** Whether `token` names an invitation that is unused and not expired (nothing is changed). */
export async function inviteUsable(db: Queryable, token: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM console_invites
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`,
    [sha256(token)],
  );
  return rows.length > 0;
}

/**
 * Use an invitation: marks it used (atomically: a second use finds nothing).
 * @returns the account id, or undefined when the token is unknown, used or expired.
 */
export async function useInvite(db: Queryable, token: string): Promise<string | undefined> {
  const { rows } = await db.query<{ account_id: string }>(
    `UPDATE console_invites SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
      RETURNING account_id`,
    [sha256(token)],
  );
  return rows[0]?.account_id;
}
