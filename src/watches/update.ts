/**
 * Editing a watch (issue 19 item 4), behind PATCH /v1/watches/{id} and the console's edit form:
 * its webhook URL (checked exactly as at creation: form, scheme, credentials, length and the
 * address policy with DNS, src/net/url-policy.ts) and its label. The identity (address, assets,
 * direction, channel), the secret and the schedule of deliveries already created stay as they
 * are; a pending delivery goes to the new URL from its next attempt on (the worker reads the URL
 * with each claim). `metadata` (issue 30; src/watches/metadata.ts) replaces the watch's whole
 * reference object (null or {} removes it), for the events matched from then on. `endpoint_id` (issue 30) moves a webhook watch onto an endpoint: its own URL
 * and secrets are dropped, the endpoint's URL and secret serve from the next attempt on.
 */
import { ApiError, type FieldError } from '../common/errors.js';
import { isId } from '../common/ids.js';
import type { Queryable } from '../db/pool.js';
import { checkWebhookUrl } from '../net/url-policy.js';
import { normaliseLabel, type WatchDeps } from './create.js';
import { normaliseMetadata } from './metadata.js';
import type { UpdateWatchBody } from './schema.js';
import { lockLiveEndpoint, WATCH_COLUMNS, type WatchRow } from './watches.js';

/**
 * Change the account's live watch `id` as `body` says (members left out stay).
 * @returns the watch after the change, or undefined when there is no such live watch of this
 *   account (the caller answers 404).
 * @param then runs in the change's transaction with the watch before and after (the audit
 *   entry, issue 27 item 6).
 * @throws ApiError 400 with `details` (URL refused by the policy, a label with control
 *   characters, a webhook_url for a Telegram or endpoint watch, an endpoint_id for a Telegram
 *   watch, an empty body); 404 when endpoint_id is not the account's live endpoint.
 */
export async function updateWatchFromRequest(
  deps: Pick<WatchDeps, 'db' | 'config' | 'resolver'>,
  accountId: string,
  network: string,
  id: string,
  body: UpdateWatchBody,
  then?: (tx: Queryable, before: WatchRow, after: WatchRow) => Promise<void>,
): Promise<WatchRow | undefined> {
  const current = await readWatch(deps.db, accountId, network, id);
  if (!current) return undefined;
  const problems: FieldError[] = [];
  const hasUrl = typeof body.webhook_url === 'string';
  const hasLabel = body.label !== undefined;
  const hasMetadata = body.metadata !== undefined;
  const endpointId = typeof body.endpoint_id === 'string' ? body.endpoint_id : null;
  if (!hasUrl && !hasLabel && !hasMetadata && endpointId === null) {
    problems.push({
      field: 'body',
      message: 'give webhook_url, endpoint_id, label or metadata to change',
    });
  }
  if (endpointId !== null && current.channel !== 'webhook') {
    problems.push({
      field: 'endpoint_id',
      message: 'this watch delivers to Telegram: only webhook watches move to an endpoint',
    });
  }
  if (hasUrl && endpointId !== null) {
    problems.push({ field: 'webhook_url', message: 'give webhook_url or endpoint_id, not both' });
  } else if (hasUrl && current.channel !== 'webhook') {
    problems.push({
      field: 'webhook_url',
      message: 'this watch delivers to Telegram: it has no webhook URL',
    });
  } else if (hasUrl && current.endpoint_id !== null) {
    problems.push({
      field: 'webhook_url',
      message:
        'this watch delivers to an endpoint: change the endpoint’s URL (PATCH /v1/endpoints/{id}), or move the watch to another endpoint',
    });
  } else if (hasUrl) {
    const check = await checkWebhookUrl(body.webhook_url as string, {
      allowCidrs: deps.config.delivery.allowCidrs,
      resolver: deps.resolver,
    });
    if (!check.ok) problems.push({ field: 'webhook_url', message: check.reason });
  }
  const label = normaliseLabel(body.label, problems);
  const metadata = normaliseMetadata(body.metadata, problems);
  if (endpointId !== null && !isId(endpointId, 'ep')) throw new ApiError(404, 'endpoint not found');
  if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);
  // Moving onto an endpoint drops the watch's own URL and secrets (migration 070's
  // watches_one_target): the endpoint's sign from the next attempt on.
  return deps.db.transaction(async (tx) => {
    if (endpointId !== null) await lockLiveEndpoint(tx, accountId, network, endpointId);
    // The row as it is now (locked): what the audit entry calls "before".
    const before = await readWatch(tx, accountId, network, id, true);
    if (!before) return undefined;
    const { rows } = await tx.query<WatchRow>(
      `UPDATE watches
          SET webhook_url = CASE WHEN $8::boolean THEN NULL
                                 WHEN $4::boolean THEN $5 ELSE webhook_url END,
              label = CASE WHEN $6::boolean THEN $7 ELSE label END,
              endpoint_id = CASE WHEN $8::boolean THEN $9 ELSE endpoint_id END,
              secret_key_id = CASE WHEN $8::boolean THEN NULL ELSE secret_key_id END,
              secret_ciphertext = CASE WHEN $8::boolean THEN NULL ELSE secret_ciphertext END,
              previous_secret_key_id = CASE WHEN $8::boolean THEN NULL
                                            ELSE previous_secret_key_id END,
              previous_secret_ciphertext = CASE WHEN $8::boolean THEN NULL
                                                ELSE previous_secret_ciphertext END,
              previous_secret_expires_at = CASE WHEN $8::boolean THEN NULL
                                                ELSE previous_secret_expires_at END,
              secret_rotated_at = CASE WHEN $8::boolean THEN NULL ELSE secret_rotated_at END,
              metadata = CASE WHEN $10::boolean THEN $11::jsonb ELSE metadata END
        WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL
        RETURNING ${WATCH_COLUMNS}`,
      [
        id,
        accountId,
        network,
        hasUrl,
        hasUrl ? body.webhook_url : null,
        hasLabel,
        label,
        endpointId !== null,
        endpointId,
        hasMetadata,
        metadata === null ? null : JSON.stringify(metadata),
      ],
    );
    const after = rows[0];
    if (after && then) await then(tx, before, after);
    return after;
  });
}

/** The account's live watch `id`, or undefined. */
async function readWatch(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
  lock = false,
): Promise<WatchRow | undefined> {
  const { rows } = await db.query<WatchRow>(
    `SELECT ${WATCH_COLUMNS} FROM watches
      WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL${lock ? ' FOR UPDATE' : ''}`,
    [id, accountId, network],
  );
  return rows[0];
}
