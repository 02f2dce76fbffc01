/**
 * Watches in bulk (issue 30 item 2), behind POST /v1/watches/batch and
 * POST /v1/watches/batch/{pause,resume,delete} (src/api/routes/watch-batch.ts):
 *
 * - Create: up to {@link MAX_BATCH_ITEMS} CreateWatch items in one request. Each item is
 *   validated against the CreateWatch schema on its own (a malformed item is that item's 400,
 *   never the whole batch's) and checked by prepareWatch, as POST /v1/watches checks it; then the
 *   valid items are created together by createWatches (the function behind POST /v1/watches too):
 *   one transaction, the account locked once, each item judged in order as if created alone after
 *   the ones before it (duplicate, quota: each watch takes a slot), one multi-row INSERT, one
 *   audit entry per watch. An item refused never stops another, and each result says what
 *   happened to it.
 * - The rate limit counts each item as one request (the batch's own request is the first item):
 *   the items beyond the window's room are answered 429 rate_limited, not created.
 * - Pause, resume, delete: a list of ids or one label (every live watch carrying it), each watch by
 *   the same domain function as its single route (quota on resume, audit entry per watch).
 */
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { InTransaction } from '../audit/audit.js';
import { ApiError, type FieldError } from '../common/errors.js';
import { isId } from '../common/ids.js';
import type { Db, Queryable } from '../db/pool.js';
import { prepareWatch, type WatchDeps } from './create.js';
import { type CreateWatchBody, CreateWatchSchema } from './schema.js';
import {
  createWatches,
  deleteWatch,
  type NewWatch,
  pauseWatch,
  resumeWatch,
  type WatchRow,
} from './watches.js';

/** Most items of one batch (issue 30: "up to 1,000"). */
export const MAX_BATCH_ITEMS = 1_000;
/** Most watches one label selects for a batch action (a label beyond is refused: use ids). */
export const MAX_LABEL_SELECTION = 10_000;

/** The error of one item: SPEC's error body, with its HTTP status. */
export interface ItemError {
  status: number;
  body: { error: string; code?: string; details?: unknown };
}

let validateItem: ValidateFunction | undefined;

/** The CreateWatch validator (ajv, as Fastify validates a single POST /v1/watches, no coercion). */
function itemValidator(): ValidateFunction {
  if (!validateItem) {
    const ajv = new Ajv({ allErrors: true, strict: false });
    // ajv-formats is CommonJS: under NodeNext its default import is module.exports.
    addFormatsModule.default(ajv);
    validateItem = ajv.compile({ ...CreateWatchSchema });
  }
  return validateItem;
}

/** An ajv error as a FieldError (`field`: the member, or `body` for the item as a whole). */
function fieldError(e: ErrorObject): FieldError {
  const member = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (e.keyword === 'additionalProperties') {
    const extra = String((e.params as { additionalProperty?: unknown }).additionalProperty);
    return { field: extra, message: 'is not a member of CreateWatch' };
  }
  if (e.keyword === 'required') {
    const missing = String((e.params as { missingProperty?: unknown }).missingProperty);
    return { field: missing, message: 'is required' };
  }
  return { field: member === '' ? 'body' : member, message: e.message ?? 'is invalid' };
}

/** The item as a CreateWatch body, or its 400. */
export function checkItem(item: unknown): { body: CreateWatchBody } | { error: ItemError } {
  const validate = itemValidator();
  if (validate(item)) return { body: item as CreateWatchBody };
  return {
    error: {
      status: 400,
      body: { error: 'invalid item', details: (validate.errors ?? []).map(fieldError) },
    },
  };
}

/** An ApiError (or anything else: rethrown) as an item's error. */
export function itemError(err: unknown): ItemError {
  if (!(err instanceof ApiError)) throw err;
  const body = err.body();
  return { status: err.status, body };
}

/** One item's outcome: created (with the view the caller makes of it), or its error. */
export type ItemOutcome<V> = { index: number; created: V } | { index: number; error: ItemError };

/**
 * Create the items: each is checked as POST /v1/watches would check it alone after the ones
 * before it, and the valid ones are created together.
 * 1. In order, without the database: the rate limit (`allow`), the CreateWatch schema, then
 *    prepareWatch (target, address, URL policy, label, metadata): an item refused here is its
 *    400/404/429.
 * 2. One chain-head refresh, then createWatches: one transaction for every valid item (account
 *    locked once, quota counted once plus the items accepted before each, duplicates against live
 *    watches and earlier items, one multi-row INSERT, `inTx` once with every row created).
 * @param allow counts one more request against the caller's rate limit; false: refused (the item
 *   and every later one are answered 429 rate_limited). Called for every item but the first (the
 *   batch's own request counted it).
 * @param view the answer of a created watch (its secret, once).
 * @param inTx the audit entries of the creations, in their transaction (rows in item order).
 * @returns one outcome per item, in order.
 * @throws only what is not an ApiError (the database down): then no item is created.
 */
export async function createWatchBatch<V>(
  deps: WatchDeps,
  accountId: string,
  items: readonly unknown[],
  opts: {
    allow: () => Promise<{ allowed: boolean; retryAfterSeconds: number }>;
    view: (watch: WatchRow, secret: string | null) => V;
    inTx?: InTransaction<readonly WatchRow[]>;
  },
): Promise<Array<ItemOutcome<V>>> {
  const out: Array<ItemOutcome<V> | { index: number; valid: number }> = [];
  const valid: NewWatch[] = [];
  let refused: ItemError | undefined;
  for (const [index, item] of items.entries()) {
    if (index > 0 && !refused) {
      const r = await opts.allow();
      if (!r.allowed) {
        refused = {
          status: 429,
          body: {
            error: `rate limit exceeded at this item: retry it and the following ones in ${r.retryAfterSeconds} s`,
            code: 'rate_limited',
          },
        };
      }
    }
    if (refused) {
      out.push({ index, error: refused });
      continue;
    }
    const checked = checkItem(item);
    if ('error' in checked) {
      out.push({ index, error: checked.error });
      continue;
    }
    try {
      const w = await prepareWatch(deps, accountId, checked.body);
      out.push({ index, valid: valid.length });
      valid.push(w);
    } catch (err) {
      out.push({ index, error: itemError(err) });
    }
  }
  if (valid.length === 0) return out as Array<ItemOutcome<V>>;
  // One fresh chain head for the whole batch, not one per item.
  const headAsOf = await deps.refreshHead?.(deps.network ?? deps.config.network);
  const created = await createWatches(
    deps.db,
    deps.secrets,
    valid.map((w) => ({ ...w, headAsOf })),
    opts.inTx,
  );
  return out.map((o) => {
    if (!('valid' in o)) return o;
    const c = created[o.valid];
    if (!c) throw new Error('createWatches returned fewer outcomes than items');
    return 'error' in c
      ? { index: o.index, error: itemError(c.error) }
      : { index: o.index, created: opts.view(c.watch, c.secret) };
  });
}

export type BatchAction = 'pause' | 'resume' | 'delete';

/**
 * The account's live watch ids that carry `label` (exactly, after the same trimming as at
 * creation), oldest first.
 * @throws ApiError 400 when more than MAX_LABEL_SELECTION carry it.
 */
export async function idsWithLabel(
  db: Queryable,
  accountId: string,
  network: string,
  label: string,
): Promise<string[]> {
  const { rows } = await db.query<{ id: string }>(
    `SELECT id FROM watches
      WHERE account_id = $1 AND network = $2 AND label = $3 AND deleted_at IS NULL
      ORDER BY created_at, id LIMIT $4`,
    [accountId, network, label.trim(), MAX_LABEL_SELECTION + 1],
  );
  if (rows.length > MAX_LABEL_SELECTION) {
    throw new ApiError(400, 'invalid request body', undefined, [
      {
        field: 'label',
        message: `more than ${MAX_LABEL_SELECTION} watches carry this label: act on them by ids, ${MAX_BATCH_ITEMS} at a time`,
      },
    ]);
  }
  return rows.map((r) => r.id);
}

/** One id's outcome of a batch action. */
export type ActionOutcome =
  | { id: string; watch: WatchRow | null }
  | { id: string; error: ItemError };

/**
 * Pause, resume or delete each watch of `ids`, in order, each by its single route's domain
 * function. An id that is malformed, missing, deleted or another account's is that id's 404.
 * @param record the audit entry of each change, in its transaction.
 * @returns one outcome per id (`watch` null after a delete).
 */
export async function applyBatchAction(
  db: Db,
  accountId: string,
  network: string,
  action: BatchAction,
  ids: readonly string[],
  opts: { blockIntervalMs: number; record: InTransaction<WatchRow>; headAsOf?: Date | undefined },
): Promise<ActionOutcome[]> {
  const notFound: ItemError = { status: 404, body: { error: 'watch not found' } };
  const out: ActionOutcome[] = [];
  for (const id of ids) {
    if (!isId(id, 'wh')) {
      out.push({ id, error: notFound });
      continue;
    }
    try {
      let watch: WatchRow | undefined;
      if (action === 'resume') {
        watch = await resumeWatch(
          db,
          accountId,
          network,
          id,
          opts.blockIntervalMs,
          opts.record,
          opts.headAsOf,
        );
      } else {
        watch = await db.transaction(async (tx) => {
          if (action === 'pause') {
            const w = await pauseWatch(tx, accountId, network, id);
            if (w) await opts.record(tx, w);
            return w;
          }
          const { rows } = await tx.query<WatchRow>(
            `SELECT id, status FROM watches WHERE id = $1 AND account_id = $2 AND network = $3
                AND deleted_at IS NULL`,
            [id, accountId, network],
          );
          const w = rows[0];
          if (!w || !(await deleteWatch(tx, accountId, network, id))) return undefined;
          await opts.record(tx, w);
          return w;
        });
      }
      if (!watch) out.push({ id, error: notFound });
      else out.push({ id, watch: action === 'delete' ? null : watch });
    } catch (err) {
      out.push({ id, error: itemError(err) });
    }
  }
  return out;
}
