/**
 * Console credentials of a user (issue 12 item 1, issue 18 items 2–3): the argon2id hash of its
 * password (src/console/passwords.ts computes it), one-time invitation links that let an invited
 * member (or the owner of an account made by the CLI) set its password, and one-time password
 * reset links. A link's token is random (32 bytes, base64url), shown once, stored as its SHA-256,
 * single use and short-lived: 7 days for an invitation, 30 minutes for a reset.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { ensureOwnerUser, type Role } from './users.js';

/** How long an invitation link works, seconds (7 days: it goes by e-mail or chat). */
export const INVITE_TTL_SECONDS = 7 * 24 * 3600;
/** How long a password reset link works, seconds (30 minutes). */
export const RESET_TTL_SECONDS = 30 * 60;

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const newLinkToken = () => randomBytes(32).toString('base64url');

/** A user id, or an account id standing for its owner user (created when it has none). */
async function userIdOf(db: Queryable, id: string): Promise<string> {
  return id.startsWith('acc_') ? (await ensureOwnerUser(db, id)).id : id;
}

/** What a login needs of the user with this e-mail: ids, role and password hash. */
export interface LoginRow {
  id: string;
  account_id: string;
  role: Role;
  password_hash: string | null;
}

/** The user's password hash (PHC string), ids and role by e-mail, for a login. */
export async function passwordHashByEmail(
  db: Queryable,
  email: string,
): Promise<LoginRow | undefined> {
  const { rows } = await db.query<LoginRow>(
    'SELECT id, account_id, role, password_hash FROM console_users WHERE email = $1',
    [email.trim().toLowerCase()],
  );
  return rows[0];
}

/** The user's password hash by id (a password change checks the current one). */
export async function passwordHashById(db: Queryable, userId: string): Promise<string | null> {
  const { rows } = await db.query<{ password_hash: string | null }>(
    'SELECT password_hash FROM console_users WHERE id = $1',
    [userId],
  );
  return rows[0]?.password_hash ?? null;
}

/**
 * Store a new password hash for the user (an account id: its owner user), and mark it joined.
 * @returns the user id.
 */
export async function setPasswordHash(db: Queryable, id: string, hash: string): Promise<string> {
  const userId = await userIdOf(db, id);
  await db.query(
    'UPDATE console_users SET password_hash = $2, joined_at = coalesce(joined_at, now()) WHERE id = $1',
    [userId, hash],
  );
  return userId;
}

/**
 * A one-time invitation for the user (or, given an account id, for the account's owner user):
 * valid INVITE_TTL_SECONDS, single use.
 * @returns the token (shown once; put it in the link `/console/invite#token=…`).
 */
export async function createInvite(db: Queryable, id: string): Promise<string> {
  const userId = await userIdOf(db, id);
  const token = newLinkToken();
  await db.query(
    `INSERT INTO console_invites (token_hash, account_id, user_id, expires_at)
     SELECT $1, account_id, id, now() + make_interval(secs => $3) FROM console_users WHERE id = $2`,
    [sha256(token), userId, INVITE_TTL_SECONDS],
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
 * @returns the user id, or undefined when the token is unknown, used or expired.
 */
export async function useInvite(db: Queryable, token: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    `UPDATE console_invites SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
      RETURNING user_id`,
    [sha256(token)],
  );
  return rows[0]?.user_id;
}

/**
 * A one-time password reset link for the user: valid RESET_TTL_SECONDS, single use.
 * @returns the token (shown once, in the e-mail: `/console/reset#token=…`).
 */
export async function createPasswordReset(db: Queryable, userId: string): Promise<string> {
  const token = newLinkToken();
  await db.query(
    `INSERT INTO console_password_resets (token_hash, user_id, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [sha256(token), userId, RESET_TTL_SECONDS],
  );
  return token;
}

/** Whether `token` names a reset link that is unused and not expired (nothing is changed). */
export async function resetUsable(db: Queryable, token: string): Promise<boolean> {
  const { rows } = await db.query(
    `SELECT 1 FROM console_password_resets
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`,
    [sha256(token)],
  );
  return rows.length > 0;
}

/**
 * Use a reset link: marks it used, and every other open link of the same user too (one reset
 * ends them all). Atomic: a second use finds nothing.
 * @returns the user id, or undefined when the token is unknown, used or expired.
 */
export async function useReset(db: Queryable, token: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    `UPDATE console_password_resets SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
      RETURNING user_id`,
    [sha256(token)],
  );
  const userId = rows[0]?.user_id;
  if (userId !== undefined) {
    await db.query(
      'UPDATE console_password_resets SET used_at = now() WHERE user_id = $1 AND used_at IS NULL',
      [userId],
    );
  }
  return userId;
}
