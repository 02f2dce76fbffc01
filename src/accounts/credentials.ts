/**
 * Console credentials of a user (issue 12 item 1, issue 18 items 2–3): the argon2id hash of its
 * password (src/console/passwords.ts computes it), one-time invitation links that let an invited
 * member (or the owner of an account made by the CLI) set its password, and one-time password
 * reset links. A link's token is random (32 bytes, base64url), shown once, stored as its SHA-256,
 * single use and short-lived: 7 days for an invitation, 30 minutes for a reset.
 *
 * One live link per user (issue 27 item 1): issuing a link, joining, a password change or reset,
 * a role change and removal cancel every other open link of the user ({@link cancelLinks}; a
 * removal deletes them). An invitation only ever sets the password of a user who has not joined:
 * using one is refused once the user has a password (joined), in the same statement that marks it
 * used, so an old link of a joined user can never take their login over. Only a reset link sets
 * a joined user's password, and for a user with a second factor only after the code
 * (src/console/routes/account.ts).
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
 * Every open link of the user is cancelled ({@link cancelLinks}).
 * @returns the user id.
 */
export async function setPasswordHash(db: Queryable, id: string, hash: string): Promise<string> {
  const userId = await userIdOf(db, id);
  await db.query(
    'UPDATE console_users SET password_hash = $2, joined_at = coalesce(joined_at, now()) WHERE id = $1',
    [userId, hash],
  );
  await cancelLinks(db, userId);
  return userId;
}

/**
 * Cancel every open invitation and reset link of the user but `keepHash` (the SHA-256 of a link
 * being issued). A cancelled link answers like a used one.
 * @returns how many links were cancelled.
 */
export async function cancelLinks(
  db: Queryable,
  userId: string,
  keepHash: string | null = null,
): Promise<number> {
  const a = await db.query(
    `UPDATE console_invites SET cancelled_at = now()
      WHERE user_id = $1 AND used_at IS NULL AND cancelled_at IS NULL
        AND token_hash IS DISTINCT FROM $2`,
    [userId, keepHash],
  );
  const b = await db.query(
    `UPDATE console_password_resets SET cancelled_at = now()
      WHERE user_id = $1 AND used_at IS NULL AND cancelled_at IS NULL
        AND token_hash IS DISTINCT FROM $2`,
    [userId, keepHash],
  );
  return a.rowCount + b.rowCount;
}

/** What an invitation link says before it is used: who invited whom, where, as what. */
export interface InviteInfo {
  email: string;
  role: Role;
  account_email: string;
  /** The e-mail of the member who issued the link, as it was then; null: the operator's CLI. */
  invited_by: string | null;
  expires_at: Date;
  /** A placeholder's link (the address had a user): its acceptance is refused. Never shown. */
  decoy: boolean;
}

/**
 * A one-time invitation for the user (or, given an account id, for the account's owner user):
 * valid INVITE_TTL_SECONDS, single use.
 * @returns the token (shown once; put it in the link `/console/invite#token=…`).
 */
export async function createInvite(
  db: Queryable,
  id: string,
  invitedBy: string | null = null,
): Promise<string> {
  const userId = await userIdOf(db, id);
  const token = newLinkToken();
  await db.query(
    `INSERT INTO console_invites (token_hash, account_id, user_id, expires_at, invited_by_email)
     SELECT $1, account_id, id, now() + make_interval(secs => $3), $4
       FROM console_users WHERE id = $2`,
    [sha256(token), userId, INVITE_TTL_SECONDS, invitedBy],
  );
  await cancelLinks(db, userId, sha256(token));
  return token;
}

const LIVE_INVITE = `i.token_hash = $1 AND i.used_at IS NULL AND i.cancelled_at IS NULL
        AND i.expires_at > now() AND u.id = i.user_id AND u.joined_at IS NULL`;

/**
 * Whether `token` names an invitation that is unused, not cancelled, not expired, for a user who
 * has not joined (nothing is changed).
 */
export async function inviteUsable(db: Queryable, token: string): Promise<boolean> {
  return (await inviteInfo(db, token)) !== undefined;
}

/**
 * What a usable invitation says (the invitation page shows it), or undefined. A placeholder's
 * link (an address that already had a user, src/accounts/membership.ts) says the same things
 * from its `console_invite_decoys` row, with `decoy` true (never shown: the preview answers alike,
 * issue 40 item 8).
 */
export async function inviteInfo(db: Queryable, token: string): Promise<InviteInfo | undefined> {
  const { rows } = await db.query<InviteInfo>(
    `SELECT u.email, u.role, a.email AS account_email, i.invited_by_email AS invited_by,
            i.expires_at, false AS decoy
       FROM console_invites i, console_users u JOIN accounts a ON a.id = u.account_id
      WHERE ${LIVE_INVITE}
     UNION ALL
     SELECT d.email, d.role, a.email, d.invited_by_email, d.expires_at, true
       FROM console_invite_decoys d JOIN accounts a ON a.id = d.account_id
      WHERE d.token_hash = $1 AND d.expires_at > now()`,
    [sha256(token)],
  );
  return rows[0];
}

/**
 * A link for a placeholder (`console_invite_decoys` row `decoyId`): stored as its hash like any
 * invitation, valid INVITE_TTL_SECONDS, replacing the placeholder's earlier link. Its preview
 * reads like any invitation's ({@link inviteInfo}); it never signs anyone in
 * ({@link spendDecoyInvite}).
 * @returns the token (shown once).
 */
export async function createDecoyInvite(
  db: Queryable,
  decoyId: string,
  invitedBy: string | null,
): Promise<string> {
  const token = newLinkToken();
  await db.query(
    `UPDATE console_invite_decoys
        SET token_hash = $2, invited_by_email = $3, expires_at = now() + make_interval(secs => $4)
      WHERE id = $1`,
    [decoyId, sha256(token), invitedBy, INVITE_TTL_SECONDS],
  );
  return token;
}

/** Use up a placeholder's link (its acceptance is refused): it then answers as a used link. */
export async function spendDecoyInvite(db: Queryable, token: string): Promise<void> {
  await db.query('UPDATE console_invite_decoys SET token_hash = NULL WHERE token_hash = $1', [
    sha256(token),
  ]);
}

/**
 * Use an invitation: marks it used (atomically: a second use finds nothing), only while its user
 * has not joined. Pass the transaction that then sets the password.
 * @returns the user id, or undefined when the token is unknown, used, cancelled or expired, or
 *   its user has joined.
 */
export async function useInvite(db: Queryable, token: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    `UPDATE console_invites i SET used_at = now()
       FROM console_users u
      WHERE ${LIVE_INVITE}
      RETURNING i.user_id`,
    [sha256(token)],
  );
  return rows[0]?.user_id;
}

/**
 * Set the password of an invited user who has not joined yet, and mark them joined (the
 * invitation's use, in the same transaction). @returns false when the user has joined meanwhile.
 */
export async function setFirstPassword(
  db: Queryable,
  userId: string,
  hash: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_users SET password_hash = $2, joined_at = now()
      WHERE id = $1 AND joined_at IS NULL`,
    [userId, hash],
  );
  if (rowCount === 0) return false;
  await cancelLinks(db, userId);
  return true;
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
  await cancelLinks(db, userId, sha256(token));
  return token;
}

/** The SHA-256 of a link token (what is stored), hex. */
export const linkTokenHash = sha256;

/**
 * The user of a reset link that is unused, not cancelled and not expired (nothing is changed),
 * or undefined.
 */
export async function resetUser(db: Queryable, token: string): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    `SELECT user_id FROM console_password_resets
      WHERE token_hash = $1 AND used_at IS NULL AND cancelled_at IS NULL AND expires_at > now()`,
    [sha256(token)],
  );
  return rows[0]?.user_id;
}

/** Whether `token` names a reset link that is unused and not expired (nothing is changed). */
export async function resetUsable(db: Queryable, token: string): Promise<boolean> {
  return (await resetUser(db, token)) !== undefined;
}

/**
 * Use a reset link by its token's SHA-256: marks it used (atomically: a second use finds
 * nothing). The caller then sets the password, which cancels every other link of the user.
 * @returns the user id, or undefined when the link is unknown, used, cancelled or expired.
 */
export async function useResetByHash(
  db: Queryable,
  tokenHash: string,
): Promise<string | undefined> {
  const { rows } = await db.query<{ user_id: string }>(
    `UPDATE console_password_resets SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND cancelled_at IS NULL AND expires_at > now()
      RETURNING user_id`,
    [tokenHash],
  );
  return rows[0]?.user_id;
}

/** {@link useResetByHash} by the token itself. */
export function useReset(db: Queryable, token: string): Promise<string | undefined> {
  return useResetByHash(db, sha256(token));
}
