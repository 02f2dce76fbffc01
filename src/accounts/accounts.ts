/**
 * Accounts: who owns API keys and watches, and under which plan (SPEC §Limits).
 *
 * An account is created by the operator (CLI `tronwatch accounts create`; the console's sign-up
 * comes later). E-mail addresses are stored trimmed and lowercased, so lookups are
 * case-insensitive and one mailbox cannot own two accounts. Business limits are per account
 * (`rate_limit_per_min`, `watch_quota`); NULL means "the plan's value" (src/accounts/plans.ts).
 */

import { newId } from '../common/ids.js';
import type { Queryable } from '../db/pool.js';
import { isUniqueViolation } from '../db/sqlstate.js';
import { PLANS, type Plan } from './plans.js';

/** An `accounts` row. */
export interface AccountRow {
  /** `acc_…` (src/common/ids.ts). */
  id: string;
  /** Trimmed, lowercased. */
  email: string;
  plan: Plan;
  /** Requests per sliding minute for this account; null = the plan's (PLAN_LIMITS). */
  rate_limit_per_min: number | null;
  /** Active watches per network for this account; null = the plan's. */
  watch_quota: number | null;
  /** The chat bound in the console; null while none is bound (then `telegram: true` → 400). */
  telegram_chat_id: string | null;
  created_at: Date;
}

/** Bad input to an account operation (unknown plan, malformed e-mail, e-mail taken, …). */
export class AccountInputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'AccountInputError';
  }
}

export interface CreateAccountInput {
  email: string;
  /** One of PLANS (`free`, `starter`, `pro`, `scale`, `business`), case-insensitive. */
  plan: string;
  /** Override of the plan's requests per minute (positive integer). Default: the plan's. */
  rateLimitPerMin?: number;
  /** Override of the plan's active-watch quota (integer ≥ 0). Default: the plan's. */
  watchQuota?: number;
}

const ACCOUNT_COLUMNS =
  'id, email, plan, rate_limit_per_min, watch_quota, telegram_chat_id, created_at';

// Deliberately loose: one @, no spaces, a dot in the domain. Deliverability is the mailer's job.
const EMAIL_RE = /^[^\s@]+@[^\s@]+\.[^\s@]+$/;

/** Canonical form of an e-mail address as stored (trimmed, lowercased). */
export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase();
}

/** True when `s` names a plan. */
export function isPlan(s: string): s is Plan {
  return (PLANS as readonly string[]).includes(s);
}

/**
 * Create an account.
 * @returns the new row (id `acc_…`).
 * @throws AccountInputError on a malformed e-mail, an unknown plan, a bad override, or an e-mail
 *   that already has an account.
 */
export async function createAccount(db: Queryable, input: CreateAccountInput): Promise<AccountRow> {
  const email = normaliseEmail(input.email);
  if (email.length > 320 || !EMAIL_RE.test(email)) {
    throw new AccountInputError(`not an e-mail address: ${JSON.stringify(input.email)}`);
  }
  const plan = input.plan.trim().toLowerCase();
  if (!isPlan(plan)) {
    throw new AccountInputError(
      `unknown plan ${JSON.stringify(input.plan)}: one of ${PLANS.join(', ')}`,
    );
  }
  if (
    input.rateLimitPerMin !== undefined &&
    (!Number.isSafeInteger(input.rateLimitPerMin) || input.rateLimitPerMin < 1)
  ) {
    throw new AccountInputError('rate limit must be a positive integer (requests per minute)');
  }
  if (
    input.watchQuota !== undefined &&
    (!Number.isSafeInteger(input.watchQuota) || input.watchQuota < 0)
  ) {
    throw new AccountInputError('watch quota must be an integer ≥ 0');
  }
  try {
    const { rows } = await db.query<AccountRow>(
      `INSERT INTO accounts (id, email, plan, rate_limit_per_min, watch_quota)
       VALUES ($1, $2, $3, $4, $5)
       RETURNING ${ACCOUNT_COLUMNS}`,
      [newId('acc'), email, plan, input.rateLimitPerMin ?? null, input.watchQuota ?? null],
    );
    return one(rows);
  } catch (err) {
    if (isUniqueViolation(err))
      throw new AccountInputError(`an account with e-mail ${email} already exists`);
    throw err;
  }
}

/** The account with this e-mail (compared in canonical form), or undefined. */
export async function findAccountByEmail(
  db: Queryable,
  email: string,
): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE email = $1`,
    [normaliseEmail(email)],
  );
  return rows[0];
}

/** The account with this id, or undefined. */
export async function findAccountById(db: Queryable, id: string): Promise<AccountRow | undefined> {
  const { rows } = await db.query<AccountRow>(
    `SELECT ${ACCOUNT_COLUMNS} FROM accounts WHERE id = $1`,
    [id],
  );
  return rows[0];
}

/**
 * The account named by an id (`acc_…`) or an e-mail address, or undefined.
 * Used by the CLI, where the operator types whichever they have at hand.
 */
export async function findAccount(
  db: Queryable,
  idOrEmail: string,
): Promise<AccountRow | undefined> {
  const s = idOrEmail.trim();
  return s.startsWith('acc_') ? findAccountById(db, s) : findAccountByEmail(db, s);
}

/** The single row of an INSERT … RETURNING. */
function one<R>(rows: R[]): R {
  const row = rows[0];
  if (row === undefined) throw new Error('INSERT … RETURNING returned no row');
  return row;
}
