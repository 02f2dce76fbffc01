/**
 * The operator's account and key commands, as functions of (db, args) returning plain printable
 * objects (ISO date strings, no Date, no hash). main.ts wires them to commander:
 *
 *   tronwatch accounts create --email E --plan P [--rate-limit N] [--watch-quota N]
 *   tronwatch keys create --account EMAIL_OR_ID [--name NAME]
 *   tronwatch keys list --account EMAIL_OR_ID
 *   tronwatch keys revoke KEY_ID
 *   tronwatch accounts invite --email E [--plan P] [--account EMAIL_OR_ID --role R]
 *
 * Every refusal is a CliError (or AccountInputError) whose message is fit to print as is.
 * Each change is recorded in the account's audit log (src/audit/audit.ts) as actor system `cli`.
 */

import { type AuditEntry, CLI_ACTOR, recordAudit } from '../audit/audit.js';
import { isId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { type AccountRow, createAccount, findAccount, findAccountByEmail } from './accounts.js';
import { createInvite, INVITE_TTL_SECONDS } from './credentials.js';
import {
  type ApiKeyInfo,
  type ApiKeyScope,
  createApiKey,
  listApiKeys,
  revokeApiKey,
} from './keys.js';
import { disableTwoFactor } from './two-factor.js';
import {
  createUser,
  ensureOwnerUser,
  findUserByEmail,
  isRole,
  ROLES,
  type UserRow,
} from './users.js';

/** Record a CLI change in the account's audit log (no client address: it ran on the host). */
function audit(
  db: Queryable,
  accountId: string,
  entry: AuditEntry,
  network?: string,
): Promise<void> {
  return recordAudit(db, { accountId, actor: CLI_ACTOR, clientIp: null, network }, entry);
}

/** A command refused with a message for the operator (unknown account, unknown key, bad number). */
export class CliError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CliError';
  }
}

export interface PrintableAccount {
  id: string;
  email: string;
  plan: string;
  rate_limit_per_min: number | null;
  watch_quota: number | null;
  created_at: string;
}

export interface PrintableKey {
  id: string;
  account_id: string;
  prefix: string;
  network: string;
  name: string | null;
  created_at: string;
  revoked_at: string | null;
  /** The most the key may do (issue 27): never more than its maker's role. */
  role: string;
  /** Who made it: a member's e-mail (as it was then), or `cli` (the operator). */
  made_by: string;
  /** `full`, or `read`: GET only (src/accounts/keys.ts ApiKeyScope). */
  scope: ApiKeyScope;
}

/** `keys create` output: the key appears here and nowhere else, ever. */
export interface PrintableNewKey {
  id: string;
  account_id: string;
  key: string;
  prefix: string;
  network: string;
  name: string | null;
  created_at: string;
  scope: ApiKeyScope;
  note: string;
}

export interface AccountsCreateArgs {
  email: string;
  /** free | starter | pro | scale | business */
  plan: string;
  /** Requests per minute overriding the plan's (positive integer; a string from argv is parsed). */
  rateLimit?: number | string;
  /** Active watches overriding the plan's (integer ≥ 0; a string from argv is parsed). */
  watchQuota?: number | string;
}

/** `tronwatch accounts create`. @throws AccountInputError, CliError. */
export async function accountsCreate(
  db: Queryable,
  args: AccountsCreateArgs,
): Promise<PrintableAccount> {
  const acc = await createAccount(db, {
    email: args.email,
    plan: args.plan,
    rateLimitPerMin: optionalInt('--rate-limit', args.rateLimit, 1),
    watchQuota: optionalInt('--watch-quota', args.watchQuota, 0),
  });
  await audit(db, acc.id, {
    action: 'account.created',
    targetId: acc.id,
    detail: { email: acc.email, plan: acc.plan },
  });
  return printableAccount(acc);
}

export interface KeysCreateArgs {
  /** Account id (`acc_…`) or e-mail address. */
  account: string;
  name?: string;
  /** `read` for a read-only key; default `full`. */
  scope?: ApiKeyScope;
  /** A test-mode key (`tw_test_…`, issue 32); default a live one (`tw_live_…`). */
  test?: boolean;
}

/**
 * `tronwatch keys create`: issues a `tw_live_` key, or with `test` a `tw_test_` key (test mode).
 * @throws CliError (unknown account).
 */
export async function keysCreate(db: Queryable, args: KeysCreateArgs): Promise<PrintableNewKey> {
  const acc = await requireAccount(db, args.account);
  const k = await createApiKey(db, acc.id, {
    name: args.name,
    network: args.test ? 'nile' : 'mainnet',
    scope: args.scope ?? 'full',
  });
  await audit(
    db,
    acc.id,
    {
      action: 'api_key.created',
      targetId: k.id,
      detail: { name: k.name, prefix: k.prefix, network: k.network, scope: k.scope },
    },
    k.network,
  );
  return {
    id: k.id,
    account_id: acc.id,
    key: k.key,
    prefix: k.prefix,
    network: k.network,
    name: k.name,
    created_at: k.created_at.toISOString(),
    scope: k.scope,
    note: 'Store this key now: it is shown only once (only its SHA-256 is kept).',
  };
}

/** `tronwatch keys list`: the account's keys, newest first, never the keys themselves. */
export async function keysList(
  db: Queryable,
  args: { account: string },
): Promise<{ account_id: string; email: string; keys: PrintableKey[] }> {
  const acc = await requireAccount(db, args.account);
  const keys = await listApiKeys(db, acc.id);
  return { account_id: acc.id, email: acc.email, keys: keys.map(printableKey) };
}

/** `tronwatch keys revoke KEY_ID` (idempotent). @throws CliError (unknown key). */
export async function keysRevoke(db: Queryable, args: { keyId: string }): Promise<PrintableKey> {
  const id = args.keyId.trim();
  const row = isId(id, 'key') ? await revokeApiKey(db, id) : undefined;
  if (!row) throw new CliError(`no API key with id ${JSON.stringify(args.keyId)}`);
  // The key's own environment (issue 32), as keysCreate records it.
  await audit(
    db,
    row.account_id,
    { action: 'api_key.revoked', targetId: row.id, detail: { name: row.name, prefix: row.prefix } },
    row.network,
  );
  return printableKey(row);
}

async function requireAccount(db: Queryable, idOrEmail: string): Promise<AccountRow> {
  const acc = await findAccount(db, idOrEmail);
  if (!acc) throw new CliError(`no account with id or e-mail ${JSON.stringify(idOrEmail)}`);
  return acc;
}

function optionalInt(
  flag: string,
  v: number | string | undefined,
  min: number,
): number | undefined {
  if (v === undefined) return undefined;
  const n = typeof v === 'number' ? v : /^\d+$/.test(v.trim()) ? Number(v.trim()) : Number.NaN;
  if (!Number.isSafeInteger(n) || n < min)
    throw new CliError(`${flag} must be an integer ≥ ${min}`);
  return n;
}

function printableAccount(a: AccountRow): PrintableAccount {
  return {
    id: a.id,
    email: a.email,
    plan: a.plan,
    rate_limit_per_min: a.rate_limit_per_min,
    watch_quota: a.watch_quota,
    created_at: a.created_at.toISOString(),
  };
}

function printableKey(k: ApiKeyInfo): PrintableKey {
  return {
    id: k.id,
    account_id: k.account_id,
    prefix: k.prefix,
    network: k.network,
    name: k.name,
    created_at: k.created_at.toISOString(),
    revoked_at: k.revoked_at ? k.revoked_at.toISOString() : null,
    role: k.role,
    made_by: k.created_by_user_id === null ? 'cli' : (k.created_by_email ?? k.created_by_user_id),
    scope: k.scope,
  };
}

/** `accounts invite` output: the link works once, within its validity. */
export interface PrintableInvite {
  account: PrintableAccount;
  /** The console user the link is for. */
  user: { id: string; email: string; role: string };
  /** Whether this command created the account. */
  created: boolean;
  /** `<PUBLIC_URL>/console/invite#token=…`: the token is in the fragment, never sent to a server log. */
  link: string;
  expires_at: string;
  note: string;
}

/**
 * `tronwatch accounts invite`: a one-time link that sets the console password of the user with
 * this e-mail (issue 18: the same invitation the console's Members page makes).
 * - Without `account`: the user with this e-mail (a forgotten password, when e-mail is off), or
 *   the owner user of the account with this e-mail (created on `plan`, default free, when it does
 *   not exist yet; also an account made by `accounts create`).
 * - With `account` (id or e-mail) and `role`: a new member of that account.
 * @param args.publicUrl where users reach the console (config.console.publicUrl).
 * @throws AccountInputError (malformed e-mail, unknown plan), CliError (unknown account or role,
 *   an e-mail that is already a user of another account).
 */
export async function accountsInvite(
  db: Queryable,
  args: { email: string; plan?: string; account?: string; role?: string; publicUrl: string },
): Promise<PrintableInvite> {
  let acc: AccountRow;
  let user: UserRow;
  let created = false;
  const existingUser = await findUserByEmail(db, args.email);
  if (args.account !== undefined) {
    acc = await requireAccount(db, args.account);
    const role = (args.role ?? 'viewer').trim().toLowerCase();
    if (!isRole(role)) throw new CliError(`--role must be one of ${ROLES.join(', ')}`);
    if (existingUser) {
      if (existingUser.account_id !== acc.id) {
        throw new CliError(`${existingUser.email} is already a user of another account`);
      }
      user = existingUser;
    } else {
      user = await createUser(db, { accountId: acc.id, email: args.email, role });
    }
  } else if (existingUser) {
    user = existingUser;
    acc = await requireAccount(db, existingUser.account_id);
  } else {
    const existing = await findAccountByEmail(db, args.email);
    acc = existing ?? (await createAccount(db, { email: args.email, plan: args.plan ?? 'free' }));
    created = existing === undefined;
    try {
      user = await ensureOwnerUser(db, acc.id);
    } catch {
      throw new CliError(`${acc.email} is already a user of another account`);
    }
  }
  const token = await createInvite(db, user.id);
  if (created) {
    await audit(db, acc.id, {
      action: 'account.created',
      targetId: acc.id,
      detail: { email: acc.email, plan: acc.plan },
    });
  }
  // The link is the credential: only its expiry is recorded.
  await audit(db, acc.id, {
    action: 'account.invited',
    targetId: user.id,
    detail: { role: user.role, expires_in_seconds: INVITE_TTL_SECONDS },
  });
  return {
    account: printableAccount(acc),
    user: { id: user.id, email: user.email, role: user.role },
    created,
    link: `${args.publicUrl}/console/invite#token=${token}`,
    expires_at: new Date(Date.now() + INVITE_TTL_SECONDS * 1000).toISOString(),
    note: 'Send this link to the user: it sets their console password once, then stops working.',
  };
}

/** What `tronwatch accounts two-factor-reset` printed. */
export interface PrintableTwoFactorReset {
  user: { id: string; email: string; role: string };
  /** False when the user had no second factor (nothing changed). */
  reset: boolean;
  note: string;
}

/**
 * `tronwatch accounts two-factor-reset --email …` (issue 18 item 4): turn off the second factor of
 * the user with this e-mail, for the operator of a deployment whose only owner lost both their
 * device and their recovery codes (an owner does this for a member from the console). The user
 * then signs in with the password alone and sets up a new device. Audited as the CLI.
 * @throws CliError for an unknown e-mail.
 */
export async function accountsResetTwoFactor(
  db: Db,
  args: { email: string },
): Promise<PrintableTwoFactorReset> {
  const user = await findUserByEmail(db, args.email);
  if (!user) throw new CliError(`no console user has the e-mail ${args.email}`);
  const reset = await db.transaction(async (tx) => {
    const done = await disableTwoFactor(tx, user.id);
    if (done) {
      await audit(tx, user.account_id, {
        action: 'two_factor.reset_for_member',
        targetId: user.id,
      });
    }
    return done;
  });
  return {
    user: { id: user.id, email: user.email, role: user.role },
    reset,
    note: reset
      ? 'The second factor is off: the user signs in with the password and should set up a new device on the Security page. If the account requires a second factor, the console asks for it first.'
      : 'This user had no second factor: nothing changed.',
  };
}
