/**
 * Rotating a webhook watch's secret without downtime (issue 19 item 3), behind
 * POST /v1/watches/{id}/rotate-secret, POST /v1/watches/{id}/previous-secret/expire and the
 * console's equivalents.
 *
 * A rotation issues a new `whsec_…` secret (returned once, like at creation) and keeps the secret
 * it replaces, encrypted the same way (migration 040), for a grace period chosen per rotation
 * (default {@link DEFAULT_GRACE_SECONDS}, at most {@link MAX_GRACE_SECONDS}; 0 = none). While the
 * period runs, every delivery and test event is signed with both (src/delivery/payload.ts
 * signatureHeaders): `X-Signature` with the new secret, `X-Signature-Previous` with the old one,
 * and `webhook-signature` lists `v1,<new> v1,<old>`. The period can be ended early
 * ({@link expirePreviousSecret}); it also ends by itself (the columns are then ignored).
 *
 * At most two secrets sign: rotating again during a grace period replaces the older one (the
 * current secret becomes the previous one, the one before is dropped at once).
 *
 * One function rotates watches' and endpoints' secrets alike ({@link rotateSecret}; issue 30: the
 * endpoint's rotation in src/endpoints/endpoints.ts calls it too), one ends a grace period
 * ({@link expirePreviousSecretOf}).
 *
 * Concurrency: each change is one UPDATE on the row, so two rotations at the same instant
 * serialise on its row lock; each returns the secret it wrote. Nothing here logs.
 */
import { ApiError } from '../common/errors.js';
import { newWebhookSecret, type SecretBox } from '../common/secrets.js';
import type { Queryable } from '../db/pool.js';
import { WATCH_COLUMNS, type WatchRow } from './watches.js';

/** Default grace period of a rotation, seconds (24 h, issue 19). */
export const DEFAULT_GRACE_SECONDS = 24 * 60 * 60;
/** Longest grace period a rotation may choose, seconds (7 days). */
export const MAX_GRACE_SECONDS = 7 * 24 * 60 * 60;

/** Whose secret a rotation changes: a watch's own, or an endpoint's (same columns). */
export type SecretHolder = 'watches' | 'endpoints';

/** The live row `id` of the account on the network, in either table of {@link SecretHolder}. */
export interface SecretScope {
  accountId: string;
  network: string;
  id: string;
}

/**
 * THE rotation (watches and endpoints alike; migrations 040 and 070 give both tables the same
 * secret columns): check the grace period, issue a new `whsec_…` sealed with `box`, and in one
 * UPDATE move the current secret to the previous columns (expiring `graceSeconds` from now; with
 * 0 the previous columns are cleared) and store the new one.
 * @param only an extra SQL condition on the row `t` (a watch must have a secret of its own).
 * @returns the new plaintext secret (to show once), or undefined when no live row of the account
 *   matched (nor `only`).
 * @throws ApiError 400 (details: grace_period_seconds) when graceSeconds is not an integer in
 *   0..{@link MAX_GRACE_SECONDS}.
 */
export async function rotateSecret(
  db: Queryable,
  box: SecretBox,
  table: SecretHolder,
  scope: SecretScope,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
  only = 'true',
): Promise<string | undefined> {
  if (!Number.isSafeInteger(graceSeconds) || graceSeconds < 0 || graceSeconds > MAX_GRACE_SECONDS) {
    throw new ApiError(400, 'invalid request body', undefined, [
      {
        field: 'grace_period_seconds',
        message: `must be a whole number of seconds from 0 to ${MAX_GRACE_SECONDS} (7 days)`,
      },
    ]);
  }
  const secret = newWebhookSecret();
  const sealed = box.encrypt(secret);
  // The current secret becomes the previous one (the old previous one, if any, is dropped);
  // with no grace the previous columns are cleared. One statement: two rotations at the same
  // instant serialise on the row lock, each keeping the secret it wrote.
  const { rows } = await db.query<{ id: string }>(
    `UPDATE ${table} AS t
        SET previous_secret_key_id = CASE WHEN $6::int > 0 THEN t.secret_key_id END,
            previous_secret_ciphertext = CASE WHEN $6::int > 0 THEN t.secret_ciphertext END,
            previous_secret_expires_at = CASE WHEN $6::int > 0
                                              THEN now() + make_interval(secs => $6::int) END,
            secret_key_id = $4, secret_ciphertext = $5::bytea, secret_rotated_at = now()
      WHERE t.id = $1 AND t.account_id = $2 AND t.network = $3 AND t.deleted_at IS NULL
        AND (${only})
      RETURNING t.id`,
    [scope.id, scope.accountId, scope.network, sealed.keyId, sealed.ciphertext, graceSeconds],
  );
  return rows[0] ? secret : undefined;
}

/**
 * End the rotation grace period of a live watch or endpoint now (see {@link rotateSecret}): the
 * replaced secret stops signing from the next attempt on and its ciphertext is deleted.
 * @returns false when no live row of the account matched (404).
 */
export async function expirePreviousSecretOf(
  db: Queryable,
  table: SecretHolder,
  scope: SecretScope,
): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE ${table}
        SET previous_secret_key_id = NULL, previous_secret_ciphertext = NULL,
            previous_secret_expires_at = NULL
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
    [scope.id, scope.accountId, scope.network],
  );
  return rowCount > 0;
}

/**
 * Rotate the secret of the account's live webhook watch `id` ({@link rotateSecret}).
 * @param graceSeconds how long the replaced secret keeps signing, seconds, integer in
 *   0..{@link MAX_GRACE_SECONDS} (0: the old secret stops signing at once).
 * @returns the watch after the change and the new plaintext secret (to show once), or undefined
 *   when there is no such live watch of this account (the caller answers 404).
 * @throws ApiError 400 when the watch has no secret of its own (Telegram, or on an endpoint) or
 *   graceSeconds is out of range.
 */
export async function rotateWatchSecret(
  db: Queryable,
  box: SecretBox,
  accountId: string,
  network: string,
  id: string,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): Promise<{ watch: WatchRow; secret: string } | undefined> {
  const scope = { accountId, network, id };
  // "Its own secret": a webhook watch with its own URL (not Telegram, not on an endpoint).
  const secret = await rotateSecret(
    db,
    box,
    'watches',
    scope,
    graceSeconds,
    `t.channel = 'webhook' AND t.endpoint_id IS NULL`,
  );
  const watch = await readLiveWatch(db, scope);
  if (!watch) return undefined;
  if (secret === undefined) {
    throw new ApiError(
      400,
      watch.endpoint_id !== null
        ? "this watch delivers to an endpoint: its deliveries are signed with the endpoint's secret (POST /v1/endpoints/{id}/rotate-secret)"
        : 'this watch delivers to Telegram: only webhook watches have a secret',
    );
  }
  return { watch, secret };
}

/**
 * End the grace period of the account's live watch `id` now: the replaced secret stops signing
 * from the next attempt on and its ciphertext is deleted. Without a grace period running,
 * nothing changes.
 * @returns the watch, or undefined when there is no such live watch of this account (404).
 */
export async function expirePreviousSecret(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
): Promise<WatchRow | undefined> {
  const scope = { accountId, network, id };
  if (!(await expirePreviousSecretOf(db, 'watches', scope))) return undefined;
  return readLiveWatch(db, scope);
}

async function readLiveWatch(db: Queryable, s: SecretScope): Promise<WatchRow | undefined> {
  const { rows } = await db.query<WatchRow>(
    `SELECT ${WATCH_COLUMNS} FROM watches
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
    [s.id, s.accountId, s.network],
  );
  return rows[0];
}
