/**
 * Endpoints (issue 30 item 1; DESIGN decisions "endpoints"): one receiver — URL, secret, pace,
 * on/off — shared by every watch that targets it (`endpoint_id`). Used by /v1/endpoints
 * (src/api/routes/endpoints.ts) and the console.
 *
 * Rules:
 * - URL: the watch's webhook_url rules exactly (src/net/url-policy.ts checkWebhookUrl: https or
 *   http, no credentials, at most 2048 characters, no private or reserved address after DNS), at
 *   creation and on change; the worker re-checks the address it connects to (DESIGN invariant 7).
 * - Secret: `whsec_…`, AES-256-GCM at rest (SecretBox; migration 070), returned once at creation
 *   and once per rotation. Every delivery of every watch on the endpoint is signed with it
 *   (src/delivery/claim.ts reads the endpoint's URL and secrets for such watches). A rotation keeps
 *   the replaced secret signing for a grace period, as a watch's rotation (src/watches/rotate-secret.ts).
 * - Ownership: an endpoint belongs to one account and network; another account's endpoint, a
 *   deleted one and a missing one are answered alike (404).
 * - Delete: refused while any live watch (active or paused) targets it (409
 *   endpoint_watches_active, SPEC's error body); otherwise soft: deleted_at is set, the row and its
 *   secret stay so notifications created before are still delivered and signed.
 * - enabled = false: deliveries to it wait in the outbox, no attempt used, until it is enabled
 *   (src/delivery/worker.ts).
 */
import type { InTransaction } from '../audit/audit.js';
import { ApiError, type FieldError } from '../common/errors.js';
import { newId } from '../common/ids.js';
import { newWebhookSecret, type SecretBox } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Db, Queryable } from '../db/pool.js';
import { redeliverDead } from '../events/redeliver.js';
import type { Resolver } from '../net/dns.js';
import { checkWebhookUrl } from '../net/url-policy.js';
import { normaliseLabel } from '../watches/create.js';
import {
  DEFAULT_GRACE_SECONDS,
  expirePreviousSecretOf,
  rotateSecret,
} from '../watches/rotate-secret.js';

/** An `endpoints` row without its secret columns. */
export interface EndpointRow {
  /** ep_… */
  id: string;
  account_id: string;
  network: string;
  url: string;
  label: string | null;
  enabled: boolean;
  /** Deliveries started per second at most, across every worker; null: no limit of its own. */
  rate_limit_per_second: number | null;
  /** Deliveries in flight at most, across every worker; null: no cap of its own. */
  max_concurrency: number | null;
  created_at: Date;
  secret_rotated_at: Date | null;
  /** End of a running rotation grace period; null when none runs. */
  previous_secret_expires_at: Date | null;
  /** Live watches (active or paused) targeting it. */
  watch_count: number;
  /** The streak (migration 091, src/endpoints/health.ts): newest 2xx and failed attempt starts. */
  last_success_at: Date | null;
  last_failure_at: Date | null;
  /** Failed attempts since the newest success. */
  consecutive_failures: number;
  /** Start of the first of them; null when none. */
  failing_since: Date | null;
  /** 'failing' while its alert is open. */
  alert_state: 'failing' | null;
  alert_since: Date | null;
  alert_reason: string | null;
  /** Why tronwatch switched it off (its deliveries all failed for days); null otherwise. */
  paused_reason: string | null;
  auto_paused_at: Date | null;
}

/** The columns of an {@link EndpointRow} read from `endpoints AS e`. */
export const ENDPOINT_COLUMNS = `e.id, e.account_id, e.network, e.url, e.label, e.enabled,
  e.rate_limit_per_second, e.max_concurrency, e.created_at, e.secret_rotated_at,
  CASE WHEN e.previous_secret_expires_at > now() THEN e.previous_secret_expires_at
  END AS previous_secret_expires_at,
  e.last_success_at, e.last_failure_at, e.consecutive_failures, e.failing_since, e.alert_state,
  e.alert_since, e.alert_reason, e.paused_reason, e.auto_paused_at,
  (SELECT count(*)::int FROM watches AS w
    WHERE w.endpoint_id = e.id AND w.deleted_at IS NULL) AS watch_count`;

/** What the endpoint functions need from the process. */
export interface EndpointDeps {
  db: Db;
  secrets: SecretBox;
  config: Pick<Config, 'network' | 'delivery'>;
  /** Resolves host names for the URL policy; default the system resolver. */
  resolver?: Resolver | undefined;
  /** The caller's environment as a network (issue 32); absent: config.network (live). */
  network?: string | undefined;
}

/** POST /v1/endpoints's body, validated by its schema (src/endpoints/schema.ts). */
export interface NewEndpointBody {
  url: string;
  label?: string | null | undefined;
  enabled?: boolean | undefined;
  rate_limit_per_second?: number | null | undefined;
  max_concurrency?: number | null | undefined;
}

/** PATCH /v1/endpoints/{id}'s body: the members to change. */
export type EndpointChanges = Partial<NewEndpointBody>;

/** The URL through the watch's webhook_url policy; a refusal is pushed to `problems`. */
async function checkUrl(
  deps: Pick<EndpointDeps, 'config' | 'resolver'>,
  url: string,
  problems: FieldError[],
): Promise<void> {
  const check = await checkWebhookUrl(url, {
    allowCidrs: deps.config.delivery.allowCidrs,
    resolver: deps.resolver,
  });
  if (!check.ok) problems.push({ field: 'url', message: check.reason });
}

/**
 * Create an endpoint for `accountId` on the deployment's network.
 * @param inTx run in the creation's transaction with the new row (the audit entry).
 * @returns the row and its plaintext secret (to show once).
 * @throws ApiError 400 with `details` (URL refused by the policy, a label with control characters).
 */
export async function createEndpoint(
  deps: EndpointDeps,
  accountId: string,
  body: NewEndpointBody,
  inTx?: InTransaction<EndpointRow>,
): Promise<{ endpoint: EndpointRow; secret: string }> {
  const problems: FieldError[] = [];
  await checkUrl(deps, body.url, problems);
  const label = normaliseLabel(body.label, problems);
  if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);
  const secret = newWebhookSecret();
  const sealed = deps.secrets.encrypt(secret);
  const endpoint = await deps.db.transaction(async (tx) => {
    const id = newId('ep');
    await tx.query(
      `INSERT INTO endpoints (id, account_id, network, url, label, enabled, rate_limit_per_second,
                              max_concurrency, secret_key_id, secret_ciphertext)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [
        id,
        accountId,
        deps.network ?? deps.config.network,
        body.url,
        label,
        body.enabled ?? true,
        body.rate_limit_per_second ?? null,
        body.max_concurrency ?? null,
        sealed.keyId,
        sealed.ciphertext,
      ],
    );
    const row = await getEndpoint(tx, accountId, deps.network ?? deps.config.network, id);
    if (!row) throw new Error('the endpoint just inserted is not readable');
    await inTx?.(tx, row);
    return row;
  });
  return { endpoint, secret };
}

/** The account's live endpoints on `network`, newest first. */
export async function listEndpoints(
  db: Queryable,
  accountId: string,
  network: string,
): Promise<EndpointRow[]> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints AS e
      WHERE e.account_id = $1 AND e.network = $2 AND e.deleted_at IS NULL
      ORDER BY e.created_at DESC, e.id DESC`,
    [accountId, network],
  );
  return rows;
}

/**
 * The account's live endpoint `id` on `network`, or undefined (missing, someone else's, deleted,
 * or not an `ep_` id: the caller answers 404 for all alike).
 * @param lock take the row's lock for the rest of the transaction (FOR SHARE): a watch created on
 *   it then cannot race its deletion.
 */
export async function getEndpoint(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
  lock = false,
): Promise<EndpointRow | undefined> {
  const { rows } = await db.query<EndpointRow>(
    `SELECT ${ENDPOINT_COLUMNS} FROM endpoints AS e
      WHERE e.id = $1 AND e.account_id = $2 AND e.network = $3 AND e.deleted_at IS NULL
      ${lock ? 'FOR SHARE OF e' : ''}`,
    [id, accountId, network],
  );
  return rows[0];
}

/**
 * Change the account's live endpoint `id` as `changes` says (members left out stay; null clears
 * a limit or the label). A new URL is checked as at creation; deliveries already created go to it
 * from their next attempt on (the worker reads the URL with each claim).
 * @param inTx run in the change's transaction with the row after it (the audit entry).
 * @returns the endpoint after the change, or undefined when there is no such live endpoint (404).
 * @throws ApiError 400 with `details` (URL refused, a label with control characters).
 */
export async function updateEndpoint(
  deps: Pick<EndpointDeps, 'db' | 'config' | 'resolver'>,
  accountId: string,
  network: string,
  id: string,
  changes: EndpointChanges,
  inTx?: InTransaction<EndpointRow>,
): Promise<EndpointRow | undefined> {
  const problems: FieldError[] = [];
  if (changes.url !== undefined) await checkUrl(deps, changes.url, problems);
  const label = normaliseLabel(changes.label, problems);
  if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);
  const has = (k: keyof EndpointChanges) => changes[k] !== undefined;
  return deps.db.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE endpoints
          SET url = CASE WHEN $4::boolean THEN $5 ELSE url END,
              label = CASE WHEN $6::boolean THEN $7 ELSE label END,
              enabled = CASE WHEN $8::boolean THEN $9::boolean ELSE enabled END,
              rate_limit_per_second = CASE WHEN $10::boolean THEN $11::int
                                           ELSE rate_limit_per_second END,
              max_concurrency = CASE WHEN $12::boolean THEN $13::int ELSE max_concurrency END,
              -- Switched on again (by its owner): tronwatch's pause reason goes, and the
              -- failures before now no longer count towards the next automatic pause.
              paused_reason = CASE WHEN $8::boolean AND $9::boolean THEN NULL
                                   ELSE paused_reason END,
              auto_paused_at = CASE WHEN $8::boolean AND $9::boolean THEN NULL
                                    ELSE auto_paused_at END,
              failures_counted_from = CASE WHEN $8::boolean AND $9::boolean AND NOT enabled
                                           THEN now() ELSE failures_counted_from END
        WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL`,
      [
        id,
        accountId,
        network,
        has('url'),
        changes.url ?? null,
        has('label'),
        label,
        has('enabled'),
        changes.enabled ?? null,
        has('rate_limit_per_second'),
        changes.rate_limit_per_second ?? null,
        has('max_concurrency'),
        changes.max_concurrency ?? null,
      ],
    );
    if (rowCount === 0) return undefined;
    const row = await getEndpoint(tx, accountId, network, id);
    if (row) await inTx?.(tx, row);
    return row;
  });
}

/**
 * Soft-delete the account's endpoint `id`, refused while live watches target it.
 * @param inTx run in the deletion's transaction (the audit entry).
 * @returns false when there is no such live endpoint (404).
 * @throws ApiError 409 endpoint_watches_active (details: `watch_count`) while any live watch
 *   (active or paused) targets it: delete those watches first, or move them.
 */
export async function deleteEndpoint(
  db: Db,
  accountId: string,
  network: string,
  id: string,
  inTx?: InTransaction<EndpointRow>,
): Promise<boolean> {
  return db.transaction(async (tx) => {
    // The row lock serialises with createWatch's FOR SHARE on the endpoint: a watch created on it
    // concurrently either commits first (and is counted here) or finds it deleted.
    const { rows } = await tx.query<EndpointRow>(
      `SELECT ${ENDPOINT_COLUMNS} FROM endpoints AS e
        WHERE e.id = $1 AND e.account_id = $2 AND e.network = $3 AND e.deleted_at IS NULL
        FOR UPDATE OF e`,
      [id, accountId, network],
    );
    const row = rows[0];
    if (!row) return false;
    if (row.watch_count > 0) {
      throw ApiError.coded(
        'endpoint_watches_active',
        `${row.watch_count} watch${row.watch_count === 1 ? '' : 'es'} (active or paused) still target this endpoint: delete them or move them to another endpoint first`,
        { watch_count: row.watch_count },
      );
    }
    await tx.query(`UPDATE endpoints SET deleted_at = now() WHERE id = $1`, [id]);
    await inTx?.(tx, row);
    return true;
  });
}

/**
 * Rotate the endpoint's secret: a new `whsec_…` (returned once); the replaced one keeps signing
 * beside it for `graceSeconds` (X-Signature-Previous, a second webhook-signature entry), as a
 * watch's rotation (the same function: src/watches/rotate-secret.ts rotateSecret). Rotating again
 * during a grace period drops the oldest secret.
 * @param graceSeconds integer 0..MAX_GRACE_SECONDS (7 days); default 24 h; 0: the old secret
 *   stops signing at once.
 * @returns the endpoint after the change and its new secret, or undefined (404).
 * @throws ApiError 400 when graceSeconds is out of range.
 */
export async function rotateEndpointSecret(
  db: Queryable,
  box: SecretBox,
  accountId: string,
  network: string,
  id: string,
  graceSeconds: number = DEFAULT_GRACE_SECONDS,
): Promise<{ endpoint: EndpointRow; secret: string } | undefined> {
  const secret = await rotateSecret(db, box, 'endpoints', { accountId, network, id }, graceSeconds);
  if (secret === undefined) return undefined;
  const endpoint = await getEndpoint(db, accountId, network, id);
  return endpoint ? { endpoint, secret } : undefined;
}

/**
 * End the endpoint's rotation grace period now: the replaced secret stops signing from the next
 * attempt on and its ciphertext is deleted. Without a grace period running, nothing changes.
 * @returns the endpoint, or undefined (404).
 */
export async function expirePreviousEndpointSecret(
  db: Queryable,
  accountId: string,
  network: string,
  id: string,
): Promise<EndpointRow | undefined> {
  if (!(await expirePreviousSecretOf(db, 'endpoints', { accountId, network, id }))) {
    return undefined;
  }
  return getEndpoint(db, accountId, network, id);
}

/**
 * Redeliver the endpoint's dead letters (issue 30 item 1): every event of a watch that delivers to
 * the endpoint now whose newest notification is DEAD gets a new notification (same event_id and
 * payload bytes, attempts from 0, the schedule from now), at most BULK_REDELIVERY_LIMIT (10,000)
 * per call, as the account's bulk redelivery (src/events/redeliver.ts redeliverDead, which this
 * narrows to the endpoint). Deleted watches' events stay out (their watch no longer targets it).
 * @param inTx run in the redelivery's transaction with how many were queued (the audit entry).
 * @returns how many were queued, or undefined when there is no such live endpoint (404).
 */
export async function redeliverEndpointDead(
  db: Db,
  accountId: string,
  network: string,
  id: string,
  inTx?: InTransaction<number>,
): Promise<number | undefined> {
  if (!(await getEndpoint(db, accountId, network, id))) return undefined;
  return redeliverDead(db, accountId, network, { endpointId: id }, inTx);
}
