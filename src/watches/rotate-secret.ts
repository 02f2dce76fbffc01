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
 * Concurrency: each function is one UPDATE on the watch row, so two rotations at the same instant
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

/**
 * Rotate the secret of the account's live webhook watch `id`.
 * @param graceSeconds how long the replaced secret keeps signing, seconds, integer in
 *   0..{@link MAX_GRACE_SECONDS} (0: the old secret stops signing at once).
 * @returns the watch after the change and the new plaintext secret (to show once), or undefined
 *   when there is no such live watch of this account (the caller answers 404).
 * @throws ApiError 400 when the watch delivers to Telegram (no secret) or graceSeconds is out of range.
 */
export async function rotateWatchSecret(
  db: Queryable,
  box: SecretBox,
  accountId: string,
  network: string,
  id: string,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): Promise<{ watch: WatchRow; secret: string } | undefined> {
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
  // with no grace the previous columns are cleared.
  // "webhook" below: a watch with its own URL and secret (not Telegram, not on an endpoint).
  const { rows } = await db.query<WatchRow & { is_webhook: boolean }>(
    `WITH own AS (
       SELECT id AS own_id, channel = 'webhook' AND endpoint_id IS NULL AS own_secret FROM watches
        WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL
     )
     UPDATE watches AS w
        SET previous_secret_key_id = CASE WHEN $6::int > 0 AND own.own_secret
                                          THEN w.secret_key_id END,
            previous_secret_ciphertext = CASE WHEN $6::int > 0 AND own.own_secret
                                              THEN w.secret_ciphertext END,
            previous_secret_expires_at = CASE WHEN $6::int > 0 AND own.own_secret
                                              THEN now() + make_interval(secs => $6::int) END,
            secret_key_id = CASE WHEN own.own_secret THEN $4 ELSE w.secret_key_id END,
            secret_ciphertext = CASE WHEN own.own_secret THEN $5::bytea
                                     ELSE w.secret_ciphertext END,
            secret_rotated_at = CASE WHEN own.own_secret THEN now()
                                     ELSE w.secret_rotated_at END
       FROM own
      WHERE w.id = own.own_id
      RETURNING ${WATCH_COLUMNS}, own.own_secret AS is_webhook`,
    [id, accountId, network, sealed.keyId, sealed.ciphertext, graceSeconds],
  );
  const row = rows[0];
  if (!row) return undefined;
  if (!row.is_webhook) {
    throw new ApiError(
      400,
      row.endpoint_id !== null
        ? "this watch delivers to an endpoint: its deliveries are signed with the endpoint's secret (POST /v1/endpoints/{id}/rotate-secret)"
        : 'this watch delivers to Telegram: only webhook watches have a secret',
    );
  }
  const { is_webhook: _, ...watch } = row;
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
  const { rows } = await db.query<WatchRow>(
    `UPDATE watches AS w
        SET previous_secret_key_id = NULL, previous_secret_ciphertext = NULL,
            previous_secret_expires_at = NULL
      WHERE w.id = $1 AND w.account_id = $2 AND w.network = $3 AND w.deleted_at IS NULL
      RETURNING ${WATCH_COLUMNS}`,
    [id, accountId, network],
  );
  return rows[0];
}
