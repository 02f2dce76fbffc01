/**
 * Console users and their roles (issue 18 item 3). An account has several users, each with their
 * own e-mail (trimmed, lowercased, unique across the deployment: one mailbox signs in to one
 * account), password (src/console/passwords.ts) and sessions, and one role:
 *
 *   owner      everything, and the owners themselves (grant or take the owner role, remove one)
 *   admin      everything but the owners: members (invite, change a role, remove), Telegram
 *   developer  API keys, watches (create, pause, resume, delete, test sends), redelivery
 *   viewer     read-only
 *
 * Every role manages its own password and sessions, and chooses whether watch alerts are e-mailed
 * to it (`alert_emails`, migration 047: owners and admins start opted in, developers and viewers
 * out; a role change keeps the choice; src/watches/alert-mail.ts reads it). The last owner of an
 * account can neither
 * leave nor be demoted (409 last_owner): an account always has someone who can manage it.
 * Removing a user deletes it, its sessions (their next request answers 401 no_session) and its
 * open invitation and reset links (ON DELETE CASCADE).
 */
import { newId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { isUniqueViolation } from '../db/sqlstate.js';
import { AccountInputError, normaliseEmail } from './accounts.js';

/** The roles, most powerful first. */
export const ROLES = ['owner', 'admin', 'developer', 'viewer'] as const;
export type Role = (typeof ROLES)[number];

const RANK: Record<Role, number> = { owner: 3, admin: 2, developer: 1, viewer: 0 };

/** True when `role` grants at least what `needed` does (owner ⊇ admin ⊇ developer ⊇ viewer). */
export function roleAtLeast(role: Role, needed: Role): boolean {
  return RANK[role] >= RANK[needed];
}

/** True when `s` names a role. */
export function isRole(s: string): s is Role {
  return (ROLES as readonly string[]).includes(s);
}

/** A `console_users` row, without its password hash. */
export interface UserRow {
  /** `usr_…` */
  id: string;
  account_id: string;
  /** Trimmed, lowercased. */
  email: string;
  role: Role;
  created_at: Date;
  /** When the invitation was accepted; null while the user is invited and has no password. */
  joined_at: Date | null;
  /** Watch alerts are e-mailed to this user (once joined): their own choice (migration 047). */
  alert_emails: boolean;
  /** The user has a confirmed second factor (migration 046; src/accounts/two-factor.ts). */
  two_factor: boolean;
}

const COLUMNS =
  'id, account_id, email, role, created_at, joined_at, alert_emails, (totp_enabled_at IS NOT NULL) AS two_factor';

/**
 * Whether a new user of `role` starts opted in to alert e-mails: owners and admins, who can fix a
 * failing watch and were the recipients before the choice existed; developers and viewers opt in
 * themselves.
 */
export function alertEmailsByDefault(role: Role): boolean {
  return role === 'owner' || role === 'admin';
}

// The same loose check as accounts.ts: deliverability is the mailer's job.
const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** A refusal of a membership change: `code` says which (the routes map it to an ApiError). */
export class MemberError extends Error {
  constructor(
    readonly code: 'email_taken' | 'last_owner' | 'not_found' | 'insufficient_role',
    message: string,
  ) {
    super(message);
    this.name = 'MemberError';
  }
}

/**
 * Add a user to the account, without a password (it is set through an invitation link); its
 * alert e-mails start as {@link alertEmailsByDefault} says for its role.
 * @throws AccountInputError on a malformed e-mail; MemberError email_taken when a user (of any
 *   account) already has this e-mail.
 */
export async function createUser(
  db: Queryable,
  o: { accountId: string; email: string; role: Role },
): Promise<UserRow> {
  const email = normaliseEmail(o.email);
  if (email.length > 320 || !EMAIL_RE.test(email)) {
    throw new AccountInputError(`not an e-mail address: ${JSON.stringify(o.email)}`);
  }
  try {
    const { rows } = await db.query<UserRow>(
      `INSERT INTO console_users (id, account_id, email, role, alert_emails)
       VALUES ($1, $2, $3, $4, $5) RETURNING ${COLUMNS}`,
      [newId('usr'), o.accountId, email, o.role, alertEmailsByDefault(o.role)],
    );
    return rows[0] as UserRow;
  } catch (err) {
    if (isUniqueViolation(err)) {
      throw new MemberError('email_taken', `a user with e-mail ${email} already exists`);
    }
    throw err;
  }
}

/**
 * The owner user of an account whose login is its own e-mail (sign-up, `tronwatch accounts
 * create`/`invite`): the existing user with the account's e-mail, or a new owner user.
 * @throws MemberError email_taken when that e-mail is a user of another account;
 *   Error when the account does not exist.
 */
export async function ensureOwnerUser(db: Queryable, accountId: string): Promise<UserRow> {
  const { rows: acc } = await db.query<{ email: string }>(
    'SELECT email FROM accounts WHERE id = $1',
    [accountId],
  );
  const email = acc[0]?.email;
  if (email === undefined) throw new Error(`no account ${accountId}`);
  const existing = await findUserByEmail(db, email);
  if (existing) {
    if (existing.account_id !== accountId) {
      throw new MemberError('email_taken', `a user with e-mail ${email} already exists`);
    }
    return existing;
  }
  return createUser(db, { accountId, email, role: 'owner' });
}

/** The user with this e-mail (canonical form), or undefined. */
export async function findUserByEmail(db: Queryable, email: string): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(
    `SELECT ${COLUMNS} FROM console_users WHERE email = $1`,
    [normaliseEmail(email)],
  );
  return rows[0];
}

/** The user with this id, or undefined. */
export async function findUserById(db: Queryable, id: string): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(`SELECT ${COLUMNS} FROM console_users WHERE id = $1`, [
    id,
  ]);
  return rows[0];
}

/** The account's users: owners first, then by role, then by e-mail. */
export async function listUsers(db: Queryable, accountId: string): Promise<UserRow[]> {
  const { rows } = await db.query<UserRow>(
    `SELECT ${COLUMNS} FROM console_users WHERE account_id = $1
      ORDER BY CASE role WHEN 'owner' THEN 0 WHEN 'admin' THEN 1 WHEN 'developer' THEN 2 ELSE 3 END,
               email`,
    [accountId],
  );
  return rows;
}

/** Who asks for a membership change: their user id and role. */
export interface Actor {
  userId: string;
  role: Role;
}

/**
 * The target user of a change by `actor`, locked for the transaction, and the account's owner
 * count. @throws MemberError not_found (no such user in this account), insufficient_role (an
 * admin acting on an owner; anyone below admin acting on someone else).
 */
async function lockTarget(
  tx: Queryable,
  accountId: string,
  actor: Actor,
  userId: string,
): Promise<{ target: UserRow; owners: number }> {
  // Lock every owner row of the account: two concurrent demotions of the last two owners
  // serialise here, and the second sees one owner left.
  const { rows: owners } = await tx.query<{ id: string }>(
    `SELECT id FROM console_users WHERE account_id = $1 AND role = 'owner' ORDER BY id FOR UPDATE`,
    [accountId],
  );
  const { rows } = await tx.query<UserRow>(
    `SELECT ${COLUMNS} FROM console_users WHERE id = $1 AND account_id = $2 FOR UPDATE`,
    [userId, accountId],
  );
  const target = rows[0];
  if (!target) throw new MemberError('not_found', 'member not found');
  const self = target.id === actor.userId;
  if (!self && !roleAtLeast(actor.role, 'admin')) {
    throw new MemberError('insufficient_role', 'only an owner or an admin manages members');
  }
  if (!self && target.role === 'owner' && actor.role !== 'owner') {
    throw new MemberError('insufficient_role', 'only an owner changes or removes an owner');
  }
  return { target, owners: owners.length };
}

/**
 * Change a member's role. An owner may set any role; an admin any role but owner, on members who
 * are not owners; anyone may lower their own role (not raise it).
 * @param then runs in the change's transaction with the user before and after (its audit entry,
 *   its keys narrowed: src/accounts/membership.ts).
 * @returns the updated user.
 * @throws MemberError not_found, insufficient_role, last_owner (the account's only owner would
 *   stop being one).
 */
export async function changeRole(
  db: Db,
  accountId: string,
  actor: Actor,
  userId: string,
  role: Role,
  then?: (tx: Queryable, before: UserRow, after: UserRow) => Promise<void>,
): Promise<UserRow> {
  return db.transaction(async (tx) => {
    const { target, owners } = await lockTarget(tx, accountId, actor, userId);
    if (!roleAtLeast(actor.role, role)) {
      throw new MemberError('insufficient_role', `a ${actor.role} cannot grant the ${role} role`);
    }
    if (target.role === 'owner' && role !== 'owner' && owners <= 1) {
      throw new MemberError(
        'last_owner',
        'the last owner cannot be demoted: make another owner first',
      );
    }
    const { rows } = await tx.query<UserRow>(
      `UPDATE console_users SET role = $2 WHERE id = $1 RETURNING ${COLUMNS}`,
      [userId, role],
    );
    const after = rows[0] as UserRow;
    if (then) await then(tx, target, after);
    return after;
  });
}

/**
 * Remove a member from the account (or leave it, `userId` = the actor's): the user, its sessions
 * and its links are deleted. @returns the removed user.
 * @throws MemberError not_found, insufficient_role, last_owner.
 */
export async function removeUser(
  db: Db,
  accountId: string,
  actor: Actor,
  userId: string,
  then?: (tx: Queryable, removed: UserRow) => Promise<void>,
): Promise<UserRow> {
  return db.transaction(async (tx) => {
    const { target, owners } = await lockTarget(tx, accountId, actor, userId);
    if (target.role === 'owner' && owners <= 1) {
      throw new MemberError(
        'last_owner',
        'the last owner cannot leave or be removed: make another owner first',
      );
    }
    await tx.query('DELETE FROM console_users WHERE id = $1', [userId]);
    if (then) await then(tx, target);
    return target;
  });
}

/**
 * Turn watch alert e-mails on or off for one user (each member decides for themselves: the
 * console route passes the signed-in user). @returns the updated user, or undefined when no user
 * `userId` belongs to `accountId`.
 */
export async function setAlertEmails(
  db: Queryable,
  accountId: string,
  userId: string,
  on: boolean,
): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(
    `UPDATE console_users SET alert_emails = $3 WHERE id = $1 AND account_id = $2
     RETURNING ${COLUMNS}`,
    [userId, accountId, on],
  );
  return rows[0];
}
