/**
 * Membership changes with everything they carry, each in one transaction (issue 27 items 1, 2,
 * 4 and 6): the change (src/accounts/users.ts), the member's open links cancelled
 * (credentials.ts), their API keys narrowed or revoked (keys.ts) and the audit entries (the
 * actor's, and the system's for each key), so none commits without the others.
 *
 * Invitations do not tell whether an address is registered (issue 27 item 4): inviting an
 * address that already has a user (of this account or another) answers exactly as any invitation
 * (201, a member shown as invited, listed until removed), while the existing user is told by
 * e-mail instead. Such a placeholder is a row of `console_invite_decoys` (migration 050): it can
 * be re-sent, given another role and removed like an invited member, and never signs in. Its
 * link (migration 098, shown when e-mail is off) previews as any invitation's until it is used
 * (issue 40 item 8); using it is refused as an invalid link.
 */

import { type AuditContext, recordAudit, SYSTEM_ACTORS } from '../audit/audit.js';
import { newId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { isUniqueViolation } from '../db/sqlstate.js';
import { normaliseEmail } from './accounts.js';
import { cancelLinks, createDecoyInvite, createInvite } from './credentials.js';
import { type ApiKeyInfo, narrowKeysOf, revokeKeysOf } from './keys.js';
import {
  type Actor,
  changeRole,
  createUser,
  findUserByEmail,
  MemberError,
  type Role,
  removeUser,
  type UserRow,
} from './users.js';

/** A key as the console tells the owner it changed with its maker. */
export interface KeyChange {
  id: string;
  name: string | null;
  prefix: string;
  role: Role;
}

const keyChange = (k: ApiKeyInfo): KeyChange => ({
  id: k.id,
  name: k.name,
  prefix: k.prefix,
  role: k.role,
});

/**
 * The system's audit context beside an actor's (same account and client address), about an
 * object of environment `network` (issue 32): a key's entry records the key's own environment,
 * never the console switch's (removing a member from a live-mode page revokes their test keys
 * too, each recorded as test).
 */
const systemOf = (audit: AuditContext, network: string): AuditContext => ({
  ...audit,
  actor: SYSTEM_ACTORS.members,
  network,
});

/**
 * Change a member's role (users.ts changeRole's rules), cancel their open links, narrow the keys
 * they made to the new role, and record it all (the actor's entry with the previous and new role;
 * one system entry per key narrowed).
 * @returns the member after the change and the keys narrowed.
 * @throws MemberError as changeRole.
 */
export async function changeMemberRole(
  db: Db,
  accountId: string,
  actor: Actor,
  userId: string,
  role: Role,
  audit: AuditContext,
): Promise<{ user: UserRow; keysNarrowed: KeyChange[] }> {
  let narrowed: ApiKeyInfo[] = [];
  const user = await changeRole(db, accountId, actor, userId, role, async (tx, before, after) => {
    await cancelLinks(tx, userId);
    narrowed = await narrowKeysOf(tx, userId, after.role);
    await recordAudit(tx, audit, {
      action: 'member.role_changed',
      targetId: userId,
      detail: {
        email: after.email,
        previous_role: before.role,
        role: after.role,
        keys_narrowed: narrowed.length,
      },
    });
    for (const k of narrowed) {
      await recordAudit(tx, systemOf(audit, k.network), {
        action: 'api_key.narrowed',
        targetId: k.id,
        detail: {
          name: k.name,
          prefix: k.prefix,
          role: k.role,
          reason: 'maker_role_changed',
          maker: after.email,
        },
      });
    }
  });
  return { user, keysNarrowed: narrowed.map(keyChange) };
}

/**
 * Remove a member (or leave): the user, sessions and links go (users.ts removeUser), every key
 * they made is revoked, and it is recorded (the actor's entry; one system entry per key).
 * @returns the removed member and the keys revoked.
 * @throws MemberError as removeUser.
 */
export async function removeMember(
  db: Db,
  accountId: string,
  actor: Actor,
  userId: string,
  audit: AuditContext,
): Promise<{ user: UserRow; keysRevoked: KeyChange[] }> {
  let revoked: ApiKeyInfo[] = [];
  const user = await removeUser(db, accountId, actor, userId, async (tx, removed) => {
    revoked = await revokeKeysOf(tx, userId);
    // A member who leaves is gone by the time their entry is written: it keeps their e-mail.
    const own =
      userId === actor.userId
        ? { ...audit, actor: { ...audit.actor, label: removed.email } }
        : audit;
    await recordAudit(tx, own, {
      action: 'member.removed',
      targetId: userId,
      detail: {
        email: removed.email,
        role: removed.role,
        left: userId === actor.userId,
        keys_revoked: revoked.length,
      },
    });
    for (const k of revoked) {
      await recordAudit(tx, systemOf(audit, k.network), {
        action: 'api_key.revoked',
        targetId: k.id,
        detail: { name: k.name, prefix: k.prefix, reason: 'maker_removed', maker: removed.email },
      });
    }
  });
  return { user, keysRevoked: revoked.map(keyChange) };
}

/** What an invitation made: the member as listed, and who to tell what. */
export interface Invitation {
  member: UserRow;
  /**
   * The link's token (shown once). When the address already had a user, the placeholder's link
   * (its preview reads alike, it signs nobody in).
   */
  token: string;
  /** The address already had a user: e-mail them a notice instead of the link. */
  existing: boolean;
}

/**
 * Invite `email` with `role` to the account: a new user and its link, with the audit entry, in
 * one transaction. An address that already has a user gets a placeholder instead (module doc),
 * answered alike.
 * @throws AccountInputError on a malformed e-mail.
 */
export async function inviteMember(
  db: Db,
  accountId: string,
  o: { email: string; role: Role; invitedBy: string },
  audit: AuditContext,
): Promise<Invitation> {
  return db.transaction(async (tx) => {
    let member: UserRow;
    let token = '';
    let existing = false;
    try {
      // A savepoint: a taken address leaves the transaction usable.
      await tx.query('SAVEPOINT invite');
      member = await createUser(tx, { accountId, email: o.email, role: o.role });
      await tx.query('RELEASE SAVEPOINT invite');
      token = await createInvite(tx, member.id, o.invitedBy);
    } catch (err) {
      if (!(err instanceof MemberError) || err.code !== 'email_taken') throw err;
      await tx.query('ROLLBACK TO SAVEPOINT invite');
      // A member of this very account is in its list already: saying so tells nothing new.
      const user = await findUserByEmail(tx, o.email);
      if (user?.account_id === accountId) throw err;
      member = await upsertDecoy(tx, accountId, o.email, o.role);
      // A link of its own, whose preview reads as any invitation's (issue 40 item 8).
      token = await createDecoyInvite(tx, member.id, o.invitedBy);
      existing = true;
    }
    // The same entry either way: the log says who was invited, not whether they had a user.
    await recordAudit(tx, audit, {
      action: 'member.invited',
      targetId: member.id,
      detail: { email: member.email, role: o.role },
    });
    return { member, token, existing };
  });
}

const DECOY_COLUMNS = `id, account_id, email, role, created_at, NULL::timestamptz AS joined_at,
  false AS alert_emails, false AS two_factor`;

/** The placeholder of `email` in the account (made, or its role updated). */
async function upsertDecoy(
  db: Queryable,
  accountId: string,
  email: string,
  role: Role,
): Promise<UserRow> {
  const e = normaliseEmail(email);
  try {
    const { rows } = await db.query<UserRow>(
      `INSERT INTO console_invite_decoys (id, account_id, email, role) VALUES ($1, $2, $3, $4)
       ON CONFLICT (account_id, email) DO UPDATE SET role = EXCLUDED.role
       RETURNING ${DECOY_COLUMNS}`,
      [newId('usr'), accountId, e, role],
    );
    return rows[0] as UserRow;
  } catch (err) {
    if (isUniqueViolation(err)) throw new MemberError('email_taken', 'retry');
    throw err;
  }
}

/** The account's placeholders, listed with its members as invited. */
export async function listDecoys(db: Queryable, accountId: string): Promise<UserRow[]> {
  const { rows } = await db.query<UserRow>(
    `SELECT ${DECOY_COLUMNS} FROM console_invite_decoys WHERE account_id = $1`,
    [accountId],
  );
  return rows;
}

/** The account's placeholder with this id, or undefined. */
export async function findDecoy(
  db: Queryable,
  accountId: string,
  id: string,
): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(
    `SELECT ${DECOY_COLUMNS} FROM console_invite_decoys WHERE account_id = $1 AND id = $2`,
    [accountId, id],
  );
  return rows[0];
}

/** Give a placeholder another role. @returns it, or undefined. */
export async function setDecoyRole(
  db: Queryable,
  accountId: string,
  id: string,
  role: Role,
): Promise<UserRow | undefined> {
  const { rows } = await db.query<UserRow>(
    `UPDATE console_invite_decoys SET role = $3 WHERE account_id = $1 AND id = $2
     RETURNING ${DECOY_COLUMNS}`,
    [accountId, id, role],
  );
  return rows[0];
}

/** Remove a placeholder. @returns whether there was one. */
export async function removeDecoy(db: Queryable, accountId: string, id: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'DELETE FROM console_invite_decoys WHERE account_id = $1 AND id = $2',
    [accountId, id],
  );
  return rowCount > 0;
}
