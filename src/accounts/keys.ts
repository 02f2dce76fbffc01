/**
 * API keys (SPEC §Authentication): `tw_live_` (mainnet) or `tw_test_` (reserved for a future
 * testnet deployment) followed by base58 of 24 random bytes (192 bits; 24–33 characters, almost
 * always 32–33). The key is shown once, at creation; only its SHA-256 (lowercase hex) is stored,
 * with a display prefix (`tw_live_` + the first 4 characters of the random part) that lets the
 * operator recognise a key without being able to use it.
 *
 * Lookups go through the unique index on `key_hash`, every request, with no cache in front
 * (CONVENTIONS "Things we do not do"): a revoked key is refused from the very next request, on
 * every replica.
 *
 * Owner and role (issue 27 item 2; migration 050): every key records who made it (a console user,
 * with their e-mail as it was then, or NULL: the operator's CLI) and a role, the most it may do
 * (the roles of src/accounts/users.ts; the /v1 guard checks each route's least role, src/api/auth.ts).
 * A key is never more than its maker: made at most at the maker's role, narrowed to a lowered role
 * ({@link narrowKeysOf}) and revoked with the maker's removal ({@link revokeKeysOf}), each in the
 * transaction of that change. A later read-only "scope" is one more cap beside the role.
 */
import { createHash, randomBytes } from 'node:crypto';
import { base58 } from '@scure/base';
import { newId } from '../common/ids.js';
import type { Queryable } from '../db/pool.js';
import type { Plan } from './plans.js';
import { type Role, roleAtLeast } from './users.js';

/** Networks a key can be bound to, and the prefix of each. */
export const KEY_PREFIXES = { mainnet: 'tw_live_', nile: 'tw_test_' } as const;
export type KeyNetwork = keyof typeof KEY_PREFIXES;

/** Random bytes per key: 192 bits, well above the 128 bits that make guessing hopeless. */
const KEY_RANDOM_BYTES = 24;
/** Characters of the random part kept in the display prefix. */
const DISPLAY_CHARS = 4;

/**
 * The syntactic shape of a key: a known prefix and a base58 body. Lengths 20–64 accept every key
 * we issue (24–33 characters) and leave room for longer keys later; anything else is malformed
 * and refused without a database round trip.
 */
const KEY_RE = /^(tw_live_|tw_test_)([1-9A-HJ-NP-Za-km-z]{20,64})$/;

/**
 * What a key may do (issue 31 item 3): `full`, every operation its account may do; `read`, GET
 * requests only (and, over MCP, only the read-only tools): for agents and dashboards that must
 * not change anything. Enforced by the `/v1` guard (src/api/auth.ts), so by every route and tool.
 */
export type ApiKeyScope = 'full' | 'read';
export const API_KEY_SCOPES: readonly ApiKeyScope[] = ['full', 'read'];

/** An `api_keys` row without the hash. */
export interface ApiKeyInfo {
  /** `key_…` */
  id: string;
  account_id: string;
  /** `tw_live_` + the first 4 characters of the random part. */
  prefix: string;
  network: string;
  name: string | null;
  created_at: Date;
  /** When the key was revoked; null while it is usable. */
  revoked_at: Date | null;
  /** When the key was last used, to the minute (KeyUsage); null if never. */
  last_used_at: Date | null;
  /** The console user who made the key (`usr_…`); null: the operator's CLI. */
  created_by_user_id: string | null;
  /** Their e-mail when they made it; null for the CLI. */
  created_by_email: string | null;
  /** The most the key may do (never more than its maker's role). */
  role: Role;
  /** What it may do beside the role's cap: `full`, or `read` (GET only). */
  scope: ApiKeyScope;
}

/** Who makes a key in the console: the key is theirs, and at most their role. */
export interface KeyMaker {
  userId: string;
  email: string;
  role: Role;
}

/** A key role refused because it is above its maker's. */
export class KeyRoleError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'KeyRoleError';
  }
}

/** What createApiKey returns: the key itself, which exists nowhere else afterwards. */
export interface CreatedApiKey {
  id: string;
  /** The whole key. Shown once: only its SHA-256 is stored. */
  key: string;
  prefix: string;
  network: KeyNetwork;
  name: string | null;
  created_at: Date;
  created_by_user_id: string | null;
  created_by_email: string | null;
  role: Role;
  scope: ApiKeyScope;
}

/** SHA-256 of the whole key, lowercase hex: the value stored in `api_keys.key_hash`. */
export function hashApiKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex');
}

/** The network a well-formed key is bound to, or null when `key` is malformed. */
export function keyNetwork(key: string): KeyNetwork | null {
  const m = KEY_RE.exec(key);
  if (!m) return null;
  return m[1] === KEY_PREFIXES.mainnet ? 'mainnet' : 'nile';
}

/**
 * Issue a key for an account.
 * @param opts.network the network the key is for (its prefix); default `mainnet` (`tw_live_`).
 * @param opts.maker the console user making it (absent: the operator's CLI).
 * @param opts.role the key's role; default the maker's role (owner for the CLI).
 * @param opts.scope what it may do beside its role (ApiKeyScope); default `full`.
 * @returns the key (shown once) and its metadata.
 * @throws KeyRoleError when `role` is above the maker's; the database error when the account
 *   does not exist (foreign key violation 23503).
 */
export async function createApiKey(
  db: Queryable,
  accountId: string,
  opts: {
    name?: string;
    network?: KeyNetwork;
    maker?: KeyMaker;
    role?: Role;
    scope?: ApiKeyScope;
  } = {},
): Promise<CreatedApiKey> {
  const network = opts.network ?? 'mainnet';
  const scope = opts.scope ?? 'full';
  const role: Role = opts.role ?? opts.maker?.role ?? 'owner';
  if (opts.maker && !roleAtLeast(opts.maker.role, role)) {
    throw new KeyRoleError(`a ${opts.maker.role} cannot make a key with the ${role} role`);
  }
  const body = base58.encode(randomBytes(KEY_RANDOM_BYTES));
  const prefix = KEY_PREFIXES[network];
  const key = `${prefix}${body}`;
  const display = `${prefix}${body.slice(0, DISPLAY_CHARS)}`;
  const { rows } = await db.query<{ id: string; created_at: Date }>(
    `INSERT INTO api_keys (id, account_id, key_hash, key_prefix, network, name,
                           created_by_user_id, created_by_email, role, scope)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
     RETURNING id, created_at`,
    [
      newId('key'),
      accountId,
      hashApiKey(key),
      display,
      network,
      opts.name ?? null,
      opts.maker?.userId ?? null,
      opts.maker?.email ?? null,
      role,
      scope,
    ],
  );
  const row = rows[0];
  if (!row) throw new Error('INSERT … RETURNING returned no row');
  return {
    id: row.id,
    key,
    prefix: display,
    network,
    name: opts.name ?? null,
    created_at: row.created_at,
    created_by_user_id: opts.maker?.userId ?? null,
    created_by_email: opts.maker?.email ?? null,
    role,
    scope,
  };
}

const INFO_COLUMNS =
  'id, account_id, key_prefix AS prefix, network, name, created_at, revoked_at, last_used_at, created_by_user_id, created_by_email, role, scope';

/**
 * The account's keys, newest first, revoked ones included. Never the key or its hash.
 * @param opts.madeBy only the keys this user made (`usr_…`), or `cli` for the operator's.
 */
export async function listApiKeys(
  db: Queryable,
  accountId: string,
  opts: { madeBy?: string } = {},
): Promise<ApiKeyInfo[]> {
  const madeBy = opts.madeBy;
  const { rows } = await db.query<ApiKeyInfo>(
    `SELECT ${INFO_COLUMNS} FROM api_keys WHERE account_id = $1
        AND ($2::text IS NULL OR ($2 = 'cli' AND created_by_user_id IS NULL)
             OR created_by_user_id = $2)
      ORDER BY created_at DESC, id DESC`,
    [accountId, madeBy ?? null],
  );
  return rows;
}

/** Roles from least to most, as SQL (array_position gives the rank). */
const RANKS_SQL = "ARRAY['viewer', 'developer', 'admin', 'owner']";

/**
 * Narrow the live keys `userId` made to at most `role` (their role was lowered). Pass the
 * transaction of the role change. @returns the keys narrowed, as they are now.
 */
export async function narrowKeysOf(
  db: Queryable,
  userId: string,
  role: Role,
): Promise<ApiKeyInfo[]> {
  const { rows } = await db.query<ApiKeyInfo>(
    `UPDATE api_keys SET role = $2
      WHERE created_by_user_id = $1 AND revoked_at IS NULL
        AND array_position(${RANKS_SQL}, role) > array_position(${RANKS_SQL}, $2::text)
     RETURNING ${INFO_COLUMNS}`,
    [userId, role],
  );
  return rows;
}

/**
 * Revoke every live key `userId` made (they were removed). Pass the transaction of the removal.
 * @returns the keys revoked.
 */
export async function revokeKeysOf(db: Queryable, userId: string): Promise<ApiKeyInfo[]> {
  const { rows } = await db.query<ApiKeyInfo>(
    `UPDATE api_keys SET revoked_at = now()
      WHERE created_by_user_id = $1 AND revoked_at IS NULL
     RETURNING ${INFO_COLUMNS}`,
    [userId],
  );
  return rows;
}

/**
 * Revoke a key: from the next request on it gets 401 `revoked_api_key`. Idempotent: revoking a
 * revoked key keeps the first revocation time.
 * @returns the key's row after the update, or undefined when no key has this id.
 */
export async function revokeApiKey(db: Queryable, keyId: string): Promise<ApiKeyInfo | undefined> {
  const { rows } = await db.query<ApiKeyInfo>(
    `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1
     RETURNING ${INFO_COLUMNS}`,
    [keyId],
  );
  return rows[0];
}

/** A key found by its hash, with what the API needs of its account (one query per request). */
export interface ApiKeyLookup {
  key_id: string;
  account_id: string;
  network: string;
  revoked_at: Date | null;
  /** The most the key may do. */
  role: Role;
  plan: Plan;
  rate_limit_per_min: number | null;
  watch_quota: number | null;
  scope: ApiKeyScope;
}

/** The key whose SHA-256 is `keyHash`, joined with its account, or undefined (unknown key). */
export async function findKeyByHash(
  db: Queryable,
  keyHash: string,
): Promise<ApiKeyLookup | undefined> {
  const { rows } = await db.query<ApiKeyLookup>(
    `SELECT k.id AS key_id, k.account_id, k.network, k.revoked_at, k.role, k.scope,
            a.plan, a.rate_limit_per_min, a.watch_quota
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.key_hash = $1`,
    [keyHash],
    // Run on most /v1 requests: a named statement, parsed once per connection (src/db/pool.ts).
    { name: 'api_key_by_hash' },
  );
  return rows[0];
}

/** How often one process writes a key's last_used_at at most, ms (a minute's precision). */
export const KEY_USAGE_WRITE_MS = 60_000;

/**
 * Records when API keys are used (`api_keys.last_used_at`, shown in the console), without a write
 * per request on the hot path: each process writes a key's time at most once a minute, after the
 * answer's statement and outside the request (a failed write is only logged by the caller).
 */
export class KeyUsage {
  private readonly written = new Map<string, number>();

  constructor(
    private readonly db: Queryable,
    private readonly now: () => number = Date.now,
  ) {}

  /**
   * Note a use of `keyId`. @returns the write's promise when one was started (tests wait for it),
   * else undefined. Never rejects: a failure resolves to false.
   */
  touch(keyId: string): Promise<boolean> | undefined {
    const t = this.now();
    const last = this.written.get(keyId);
    if (last !== undefined && t - last < KEY_USAGE_WRITE_MS) return undefined;
    if (this.written.size >= 100_000) this.written.clear(); // bounded; the next writes are early
    this.written.set(keyId, t);
    return this.db.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [keyId]).then(
      () => true,
      () => false,
    );
  }
}
