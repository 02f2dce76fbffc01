/**
 * Watches: create (with the plan quota and the duplicate rule), list, pause, resume, soft-delete.
 * Used by /v1/watches (src/api/routes/watches.ts) and the console (src/console/routes/watches.ts).
 *
 * Rules (SPEC §POST /v1/watches, §Limits; DESIGN decisions and invariants 5, 6):
 * - Identity (409): account, network, address (as 21 bytes, so base58 and hex spellings are the
 *   same address), asset_filter, direction, channel — among non-deleted watches. Checked before
 *   the quota, and enforced by the unique index `watches_identity` against races.
 * - Quota (402): ACTIVE, non-deleted watches of the account on this network, counted while the
 *   account row is locked (SELECT … FOR UPDATE), so two concurrent creations cannot both take the
 *   last slot. A PAUSED or deleted watch holds no slot.
 * - Activation: `active_from_block` = the chain head now (activationBlock); the watch matches
 *   strictly later blocks only. No head known yet → 503 with Retry-After.
 * - Secret: `whsec_…`, AES-256-GCM at rest (SecretBox), returned to the caller once. A watch on
 *   an endpoint (`endpoint_id`, issue 30) has none of its own: the endpoint's signs its deliveries.
 * - Delete: sets deleted_at; the watch stops matching at once and frees its slot; its events and
 *   pending notifications are kept and keep their schedule.
 */

import { limitsFor, type Plan } from '../accounts/plans.js';
import type { InTransaction } from '../audit/audit.js';
import { ApiError } from '../common/errors.js';
import { newId } from '../common/ids.js';
import { newWebhookSecret, type SecretBox } from '../common/secrets.js';
import type { Db, Queryable } from '../db/pool.js';
import { activationBlock, ChainHeadUnknownError } from '../ingest/chain-head.js';
import type { Metadata } from './metadata.js';

export type AssetFilter = 'USDT' | 'TRX' | 'ALL';
export type WatchDirection = 'incoming' | 'outgoing' | 'both';
export type Channel = 'webhook' | 'telegram';
export type WatchStatus = 'ACTIVE' | 'PAUSED';

/** A `watches` row without the secret columns. */
export interface WatchRow {
  id: string;
  account_id: string;
  network: string;
  /** As registered (base58 or 41-hex). */
  address: string;
  /** Lowercase 42-char hex: identity and match key. */
  address_hex: string;
  asset_filter: AssetFilter;
  direction: WatchDirection;
  channel: Channel;
  webhook_url: string | null;
  /** The endpoint it delivers to (migration 070; issue 30); null: its own webhook_url, or Telegram. */
  endpoint_id: string | null;
  status: WatchStatus;
  active_from_block: number;
  created_at: Date;
  /** The account's label for the watch (migration 041); null: none. */
  label: string | null;
  /** The account's reference for the watch (migration 085, src/watches/metadata.ts); null: none. */
  metadata: Metadata | null;
  /** When the current secret was issued by a rotation; null: the one given at creation. */
  secret_rotated_at: Date | null;
  /** End of a running rotation grace period (both secrets sign until then); null: none. */
  previous_secret_expires_at: Date | null;
  /** Why tronwatch paused the watch (migration 043); null: not paused by tronwatch. */
  paused_reason: string | null;
  auto_paused_at: Date | null;
  /** The streak (migration 042, src/watches/health.ts). */
  last_success_at: Date | null;
  consecutive_failures: number;
  failing_since: Date | null;
  /** The alert (migration 043): 'failing' while open. */
  alert_state: 'failing' | null;
  alert_since: Date | null;
  alert_reason: string | null;
}

export interface NewWatch {
  accountId: string;
  network: string;
  /** As the caller gave it. */
  address: string;
  /** Lowercase 42-char hex of the same address (src/tron/address.ts parseAddress). */
  addressHex: string;
  assetFilter: AssetFilter;
  direction: WatchDirection;
  channel: Channel;
  /** Already checked against the URL policy; null for telegram and endpoint watches. */
  webhookUrl: string | null;
  /**
   * The endpoint it delivers to (channel 'webhook', no URL or secret of its own): checked live and
   * the account's in the creation's transaction (404 otherwise). Null or absent: none.
   */
  endpointId?: string | null;
  /** Already normalised (normaliseLabel); null: none. */
  label?: string | null;
  /** Already checked (normaliseMetadata); null or absent: none. */
  metadata?: Metadata | null;
  /** The chain's block interval, ms (extrapolates a stale head; see activationBlock). */
  blockIntervalMs: number;
  /** When the stored head was known fresh (head-refresh.ts; activationBlock `asOf`). */
  headAsOf?: Date | undefined;
}

/**
 * The columns of a {@link WatchRow}, unqualified (any statement on `watches`, RETURNING included).
 * previous_secret_expires_at reads NULL once the grace period is over.
 */
export const WATCH_COLUMNS = `id, account_id, network, address, address_hex, asset_filter, direction,
  channel, webhook_url, endpoint_id, label, metadata, status, active_from_block, created_at, secret_rotated_at,
  CASE WHEN previous_secret_expires_at > now() THEN previous_secret_expires_at
  END AS previous_secret_expires_at, paused_reason, auto_paused_at, last_success_at,
  consecutive_failures, failing_since, alert_state, alert_since, alert_reason`;

/** Retry-After of the 503 answered while no chain head is known, seconds (one or two polls). */
const CHAIN_HEAD_RETRY_SECONDS = 5;

/**
 * Create a watch: {@link createWatches} with one item (the same rules and answers).
 * @param inTx run in the creation's transaction with the new row (the audit entry).
 * @returns the row and, for a webhook watch, the plaintext secret (to show once; null otherwise).
 * @throws ApiError 400 telegram_not_bound, 404 endpoint not found, 409 duplicate, 402
 *   quota_exceeded (with `usage`), 503 (no chain head observed yet, Retry-After: 5).
 */
export async function createWatch(
  db: Db,
  secrets: SecretBox,
  w: NewWatch,
  inTx?: InTransaction<WatchRow>,
): Promise<{ watch: WatchRow; secret: string | null }> {
  const [outcome] = await createWatches(
    db,
    secrets,
    [w],
    inTx ? async (tx, rows) => (rows[0] ? inTx(tx, rows[0]) : undefined) : undefined,
  );
  if (!outcome) throw new Error('createWatches returned no outcome');
  if ('error' in outcome) throw outcome.error;
  return outcome;
}

/** One watch's outcome in {@link createWatches}: created (with its secret, or null), or refused. */
export type CreateOutcome = { watch: WatchRow; secret: string | null } | { error: ApiError };

/** The identity of a watch (the unique index `watches_identity`) as one string. */
function identityKey(w: {
  address_hex: string;
  asset_filter: string;
  direction: string;
  channel: string;
}): string {
  return `${w.address_hex}|${w.asset_filter}|${w.direction}|${w.channel}`;
}

/**
 * `n` new ids of `prefix`, ascending: taken in this order, rows made in one transaction (one
 * `created_at`) still sort by (created_at, id) in the order they were made.
 */
function ascendingIds(prefix: 'wh', n: number): string[] {
  const ids = Array.from({ length: n }, () => newId(prefix));
  return ids.sort();
}

/**
 * Create watches of one account on one network together (POST /v1/watches for one, the batch for
 * up to 1,000): one transaction that locks the account row once, checks every item in order as
 * if it were created alone after the ones before it, and inserts the accepted ones in one
 * statement. Each item, in order:
 * - telegram without a bound chat: 400 telegram_not_bound;
 * - endpoint_id not a live endpoint of the account on the network: 404 (its row is then held FOR
 *   SHARE until COMMIT, so it cannot be deleted under the new watches);
 * - same identity as a live watch, or as an earlier item accepted here: 409 with `watch_id`;
 * - no free slot (ACTIVE watches, counted once with the account locked, plus the items accepted
 *   before it): 402 quota_exceeded with `usage`;
 * - no chain head known: 503 (Retry-After: 5);
 * - else accepted: `active_from_block` the chain head now (one activationBlock for all), a
 *   `whsec_…` secret sealed by `secrets` for a webhook watch without an endpoint.
 * A row that meets a live watch of the same identity at INSERT (made by a concurrent request
 * that did not lock the account) is not inserted: that item's 409.
 * @param ws the items; every one with the same accountId, network, blockIntervalMs and headAsOf.
 * @param inTx run in the transaction with the rows created, in item order (audit entries).
 * @returns one outcome per item, in order.
 * @throws what is not an item's refusal (the database down): then nothing is created.
 */
export async function createWatches(
  db: Db,
  secrets: SecretBox,
  ws: readonly NewWatch[],
  inTx?: InTransaction<readonly WatchRow[]>,
): Promise<CreateOutcome[]> {
  const first = ws[0];
  if (!first) return [];
  const { accountId, network, blockIntervalMs, headAsOf } = first;
  if (ws.some((w) => w.accountId !== accountId || w.network !== network)) {
    throw new Error('createWatches: items of one account and network only');
  }
  return db.transaction(async (tx) => {
    const account = await lockAccount(tx, accountId);
    const endpointIds = [...new Set(ws.flatMap((w) => (w.endpointId ? [w.endpointId] : [])))];
    const liveEndpoints = new Set(
      endpointIds.length === 0 ? [] : await lockLiveEndpoints(tx, accountId, network, endpointIds),
    );
    const { rows: live } = await tx.query<{
      id: string;
      address_hex: string;
      asset_filter: string;
      direction: string;
      channel: string;
    }>(
      `SELECT id, address_hex, asset_filter, direction, channel FROM watches
        WHERE account_id = $1 AND network = $2 AND address_hex = ANY($3::text[])
          AND deleted_at IS NULL`,
      [accountId, network, [...new Set(ws.map((w) => w.addressHex))]],
    );
    const taken = new Map(live.map((r) => [identityKey(r), r.id]));
    const limits = limitsFor(account);
    let active = await countActiveWatches(tx, accountId, network);
    let fromBlock: number | 'unknown' | undefined;
    const out: Array<CreateOutcome | { accept: number }> = [];
    const accepted: Array<{ w: NewWatch; secret: string | null }> = [];
    const ids = ascendingIds('wh', ws.length);
    for (const w of ws) {
      const endpointId = w.endpointId ?? null;
      const key = identityKey({
        address_hex: w.addressHex,
        asset_filter: w.assetFilter,
        direction: w.direction,
        channel: w.channel,
      });
      const dup = taken.get(key);
      if (w.channel === 'telegram' && account.telegram_chat_id === null) {
        out.push({
          error: ApiError.coded(
            'telegram_not_bound',
            'no chat is connected to this account: connect one in the console, or give a webhook_url',
          ),
        });
      } else if (endpointId !== null && !liveEndpoints.has(endpointId)) {
        out.push({ error: new ApiError(404, 'endpoint not found') });
      } else if (dup !== undefined) {
        out.push({
          error: new ApiError(
            409,
            `duplicate watch: ${dup} already watches this address with the same asset_filter, direction and channel`,
            undefined,
            undefined,
            { watch_id: dup },
          ),
        });
      } else if (active >= limits.activeWatches) {
        out.push({
          error: ApiError.coded(
            'quota_exceeded',
            `the ${limits.name} plan allows ${limits.activeWatches} active watches on ${network}; delete one or upgrade`,
            undefined,
            { usage: { active_watches: active, limit: limits.activeWatches, plan: limits.name } },
          ),
        });
      } else {
        if (fromBlock === undefined) {
          try {
            fromBlock = await activationBlock(tx, network, blockIntervalMs, headAsOf);
          } catch (err) {
            if (!(err instanceof ChainHeadUnknownError)) throw err;
            fromBlock = 'unknown';
          }
        }
        if (fromBlock === 'unknown') {
          out.push({ error: chainHeadUnknown() });
        } else {
          const secret = w.channel === 'webhook' && endpointId === null ? newWebhookSecret() : null;
          taken.set(key, ids[accepted.length] as string);
          active++;
          out.push({ accept: accepted.length });
          accepted.push({ w, secret });
        }
      }
    }
    const created = new Map<string, WatchRow>();
    if (accepted.length > 0 && typeof fromBlock === 'number') {
      const sealed = accepted.map(({ secret }) =>
        secret === null ? null : secrets.encrypt(secret),
      );
      const { rows } = await tx.query<WatchRow>(
        `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                              channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block,
                              label, endpoint_id, metadata)
         SELECT r.id, $1::text, $2::text, r.address, r.address_hex, r.asset_filter, r.direction, r.channel,
                r.webhook_url, r.secret_key_id, decode(r.secret_hex, 'hex'), $3::int8, r.label, r.endpoint_id,
                r.metadata::jsonb
           FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[],
                       $10::text[], $11::text[], $12::text[], $13::text[], $14::text[], $15::text[])
                WITH ORDINALITY AS r(id, address, address_hex, asset_filter, direction, channel,
                                     webhook_url, secret_key_id, secret_hex, label,
                                     endpoint_id, metadata, ord)
          ORDER BY r.ord
         ON CONFLICT (account_id, network, address_hex, asset_filter, direction, channel)
            WHERE deleted_at IS NULL DO NOTHING
         RETURNING ${WATCH_COLUMNS}`,
        [
          accountId,
          network,
          fromBlock,
          accepted.map((_, i) => ids[i] as string),
          accepted.map(({ w }) => w.address),
          accepted.map(({ w }) => w.addressHex),
          accepted.map(({ w }) => w.assetFilter),
          accepted.map(({ w }) => w.direction),
          accepted.map(({ w }) => w.channel),
          accepted.map(({ w }) => w.webhookUrl),
          sealed.map((s) => s?.keyId ?? null),
          sealed.map((s) => s?.ciphertext.toString('hex') ?? null),
          accepted.map(({ w }) => w.label ?? null),
          accepted.map(({ w }) => w.endpointId ?? null),
          accepted.map(({ w }) => (w.metadata ? JSON.stringify(w.metadata) : null)),
        ],
      );
      for (const row of rows) created.set(row.id, row);
    }
    const outcomes: CreateOutcome[] = out.map((o) => {
      if (!('accept' in o)) return o;
      const row = created.get(ids[o.accept] as string);
      // A concurrent request created the same watch between our check and our insert.
      if (!row) {
        return {
          error: new ApiError(
            409,
            'duplicate watch: the same watch was just created by another request',
          ),
        };
      }
      return { watch: row, secret: accepted[o.accept]?.secret ?? null };
    });
    const rows = outcomes.flatMap((o) => ('watch' in o ? [o.watch] : []));
    if (rows.length > 0) await inTx?.(tx, rows);
    return outcomes;
  });
}

/** The 503 answered while no chain head is known (Retry-After: one or two polls). */
function chainHeadUnknown(): ApiError {
  return new ApiError(
    503,
    'chain head not known yet; retry shortly',
    undefined,
    undefined,
    {},
    {
      'Retry-After': String(CHAIN_HEAD_RETRY_SECONDS),
    },
  );
}

interface LockedAccount {
  plan: Plan;
  rate_limit_per_min: number | null;
  watch_quota: number | null;
  telegram_chat_id: string | null;
}

/** Lock the account row for the rest of the transaction (serialises quota checks). */
async function lockAccount(tx: Queryable, accountId: string): Promise<LockedAccount> {
  const { rows } = await tx.query<LockedAccount>(
    `SELECT plan, rate_limit_per_min, watch_quota, telegram_chat_id
       FROM accounts WHERE id = $1 FOR UPDATE`,
    [accountId],
  );
  const row = rows[0];
  if (!row) throw new Error(`account ${accountId} vanished`);
  return row;
}

/**
 * Check that `endpointId` is a live endpoint of the account on the network and hold its row (FOR
 * SHARE) until the transaction ends, so it cannot be deleted under a watch being created on it
 * (src/endpoints/endpoints.ts deleteEndpoint locks it FOR UPDATE).
 * @throws ApiError 404 "endpoint not found" (missing, deleted, another account's: alike).
 */
export async function lockLiveEndpoint(
  tx: Queryable,
  accountId: string,
  network: string,
  endpointId: string,
): Promise<void> {
  const { rows } = await tx.query<{ id: string }>(
    `SELECT id FROM endpoints
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL
      FOR SHARE`,
    [endpointId, accountId, network],
  );
  if (!rows[0]) throw new ApiError(404, 'endpoint not found');
}

/**
 * The ids among `endpointIds` of live endpoints of the account on the network, their rows held
 * FOR SHARE until the transaction ends (as lockLiveEndpoint; the others are missing, deleted or
 * another account's).
 */
async function lockLiveEndpoints(
  tx: Queryable,
  accountId: string,
  network: string,
  endpointIds: readonly string[],
): Promise<string[]> {
  const { rows } = await tx.query<{ id: string }>(
    `SELECT id FROM endpoints
      WHERE id = ANY($1::text[]) AND account_id = $2 AND network = $3 AND deleted_at IS NULL
      ORDER BY id
      FOR SHARE`,
    [endpointIds, accountId, network],
  );
  return rows.map((r) => r.id);
}

/** Active, non-deleted watches of an account on a network: what the quota counts. */
export async function countActiveWatches(
  db: Queryable,
  accountId: string,
  network: string,
): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int8 AS n FROM watches
      WHERE account_id = $1 AND network = $2 AND status = 'ACTIVE' AND deleted_at IS NULL`,
    [accountId, network],
  );
  return rows[0]?.n ?? 0;
}

/** The account's non-deleted watches on a network, newest first. */
export async function listWatches(
  db: Queryable,
  accountId: string,
  network: string,
): Promise<WatchRow[]> {
  const { rows } = await db.query<WatchRow>(
    `SELECT ${WATCH_COLUMNS} FROM watches
      WHERE account_id = $1 AND network = $2 AND deleted_at IS NULL
      ORDER BY created_at DESC, id DESC`,
    [accountId, network],
  );
  return rows;
}

/** The account's live (non-deleted) watch `id` on `network`, or undefined (missing, someone else's, deleted). */
export async function getWatch(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
): Promise<WatchRow | undefined> {
  const { rows } = await db.query<WatchRow>(
    `SELECT ${WATCH_COLUMNS} FROM watches
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
    [id, accountId, network],
  );
  return rows[0];
}

/**
 * Soft-delete the account's watch `id` on `network`.
 * @returns false when there is no such live watch of this account (missing, someone else's,
 *   already deleted): the caller answers 404 for all three alike.
 */
export async function deleteWatch(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE watches SET deleted_at = now()
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
    [id, accountId, network],
  );
  return rowCount > 0;
}

/**
 * Pause the account's live watch `id` (DESIGN decisions "PAUSED"): it matches nothing from the
 * next block the ingester reads (the match index holds ACTIVE watches only) and frees its quota
 * slot. Pausing a paused watch changes nothing. Notifications already created keep their schedule.
 * @returns the watch after the change, or undefined when there is no such live watch of this
 *   account (missing, someone else's, deleted: the caller answers 404 alike).
 */
export async function pauseWatch(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
): Promise<WatchRow | undefined> {
  const { rows } = await db.query<WatchRow>(
    `UPDATE watches
        SET paused_reason = CASE WHEN status = 'PAUSED' THEN paused_reason END,
            auto_paused_at = CASE WHEN status = 'PAUSED' THEN auto_paused_at END,
            status = 'PAUSED'
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL
      RETURNING ${WATCH_COLUMNS}`,
    [id, accountId, network],
  );
  return rows[0];
}

/**
 * Resume the account's paused watch `id`: it needs a free quota slot, checked with the account
 * row locked, as at creation. It matches blocks the ingester reads from then on; transfers that
 * happened while it was paused are not reported (no retroactive matching, DESIGN invariant 5,
 * with `active_from_block` moved to the chain head now). Resuming an active watch changes nothing.
 * @param inTx run in the transaction with the watch after the change (also when it was already
 *   active), not when there is no such watch (the audit entry).
 * @returns the watch, or undefined as pauseWatch.
 * @throws ApiError 402 quota_exceeded (with `usage`) when the plan has no free slot; 503 when no
 *   chain head is known yet.
 */
export async function resumeWatch(
  db: Db,
  accountId: string,
  network: string,
  id: string,
  blockIntervalMs: number,
  inTx?: InTransaction<WatchRow>,
  headAsOf?: Date,
): Promise<WatchRow | undefined> {
  try {
    return await db.transaction(async (tx) => {
      const account = await lockAccount(tx, accountId);
      const { rows: found } = await tx.query<WatchRow>(
        `SELECT ${WATCH_COLUMNS} FROM watches
          WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
        [id, accountId, network],
      );
      const watch = found[0];
      if (!watch) return undefined;
      if (watch.status === 'ACTIVE') {
        await inTx?.(tx, watch);
        return watch;
      }
      const limits = limitsFor(account);
      const active = await countActiveWatches(tx, accountId, network);
      if (active >= limits.activeWatches) {
        throw ApiError.coded(
          'quota_exceeded',
          `the ${limits.name} plan allows ${limits.activeWatches} active watches on ${network}; pause or delete one, or upgrade`,
          undefined,
          { usage: { active_watches: active, limit: limits.activeWatches, plan: limits.name } },
        );
      }
      const fromBlock = await activationBlock(tx, network, blockIntervalMs, headAsOf);
      const { rows } = await tx.query<WatchRow>(
        `UPDATE watches SET status = 'ACTIVE', active_from_block = GREATEST(active_from_block, $2),
                paused_reason = NULL, auto_paused_at = NULL, failures_counted_from = now()
          WHERE id = $1 RETURNING ${WATCH_COLUMNS}`,
        [id, fromBlock],
      );
      const resumed = rows[0];
      if (resumed) await inTx?.(tx, resumed);
      return resumed;
    });
  } catch (err) {
    if (err instanceof ChainHeadUnknownError) throw chainHeadUnknown();
    throw err;
  }
}
