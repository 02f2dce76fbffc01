/**
 * One domain function behind POST /v1/watches and the console's "create watch" (issue 12 item 4):
 * the request's rules that need code (SPEC §POST /v1/watches rules 1–3: exactly one target, the
 * address, the webhook URL policy), then createWatch for the rest (telegram binding, duplicate,
 * quota, activation, secret). Both routes give the same answers because they run this.
 */
import type { InTransaction } from '../audit/audit.js';
import { ApiError, type FieldError } from '../common/errors.js';
import { isId } from '../common/ids.js';
import type { SecretBox } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { Resolver } from '../net/dns.js';
import { checkWebhookUrl } from '../net/url-policy.js';
import { InvalidAddressError, parseAddress } from '../tron/address.js';
import { normaliseMetadata } from './metadata.js';
import type { CreateWatchBody } from './schema.js';
import { createWatch, type NewWatch, type WatchRow } from './watches.js';

/** Control characters (C0, DEL, C1) and line or paragraph separators: refused in a label. */
const LABEL_REFUSED = /[\p{Cc}\u2028\u2029]/u;

/**
 * A label as stored: spaces around it dropped; null, undefined or empty → null. A label with a
 * control character is refused (pushed to `problems` as a `label` field error).
 */
export function normaliseLabel(
  label: string | null | undefined,
  problems: FieldError[],
): string | null {
  if (label === null || label === undefined) return null;
  const t = label.trim();
  if (t === '') return null;
  if (LABEL_REFUSED.test(t)) {
    problems.push({
      field: 'label',
      message: 'a label is one line of text, without control characters',
    });
    return null;
  }
  return t;
}

/** What creating a watch needs from the process. */
export interface WatchDeps {
  db: Db;
  secrets: SecretBox;
  config: Pick<Config, 'network' | 'delivery' | 'ingest'>;
  /**
   * The caller's environment as a network (issue 32: `nile` for a test key or the console in test
   * mode); absent: config.network (live).
   */
  network?: string | undefined;
  /** Resolves webhook host names (URL policy); default the system resolver. */
  resolver?: Resolver | undefined;
  /**
   * Make the stored chain head fresh before activation (ingest/head-refresh.ts); never throws.
   * Absent: activation uses the stored head as it is.
   * @returns the database time the head was known fresh (activationBlock's `asOf`), or undefined.
   */
  refreshHead?: ((network?: string) => Promise<Date | undefined>) | undefined;
}

/**
 * Create a watch for `accountId` from a CreateWatch body already validated against its schema:
 * {@link prepareWatch}, a fresh chain head, then createWatch.
 * @param inTx run in the creation's transaction with the new row (the audit entry).
 * @returns the row and the plaintext secret (webhook watches; to show once) or null.
 * @throws prepareWatch's ApiErrors, and createWatch's 400 telegram_not_bound, 404, 402, 409, 503.
 */
export async function createWatchFromRequest(
  deps: WatchDeps,
  accountId: string,
  body: CreateWatchBody,
  inTx?: InTransaction<WatchRow>,
): Promise<{ watch: WatchRow; secret: string | null }> {
  const w = await prepareWatch(deps, accountId, body);
  // A fresh head, so the watch activates at the chain as it is now (a halted chain included).
  const headAsOf = await deps.refreshHead?.(w.network);
  return createWatch(deps.db, deps.secrets, { ...w, headAsOf }, inTx);
}

/**
 * The request's rules that need code but no database (SPEC §POST /v1/watches rules 1–3), on a
 * CreateWatch body already validated against its schema: the watch to create (without
 * `headAsOf`), for createWatch or createWatches.
 * @throws ApiError 400 invalid_target (not exactly one of webhook_url, telegram: true,
 *   endpoint_id), 400 with `details` (bad address, webhook URL refused by the policy, label with
 *   a control character, metadata beyond its limits: src/watches/metadata.ts), 404 (an
 *   endpoint_id that is not an endpoint id at all).
 */
export async function prepareWatch(
  deps: WatchDeps,
  accountId: string,
  body: CreateWatchBody,
): Promise<NewWatch> {
  const hasUrl = typeof body.webhook_url === 'string';
  const hasTelegram = body.telegram === true;
  const endpointId = typeof body.endpoint_id === 'string' ? body.endpoint_id : null;
  const targets = Number(hasUrl) + Number(hasTelegram) + Number(endpointId !== null);
  if (targets !== 1) {
    throw ApiError.coded(
      'invalid_target',
      targets === 0
        ? 'give exactly one target: webhook_url, telegram: true or endpoint_id'
        : 'give exactly one target: webhook_url, telegram: true or endpoint_id, not several',
    );
  }
  // A malformed id names no endpoint of the caller: 404 like another account's.
  if (endpointId !== null && !isId(endpointId, 'ep')) {
    throw new ApiError(404, 'endpoint not found');
  }
  const problems: FieldError[] = [];
  let addressHex = '';
  try {
    addressHex = parseAddress(body.address).hex;
  } catch (err) {
    if (!(err instanceof InvalidAddressError)) throw err;
    problems.push({ field: 'address', message: err.message });
  }
  const url = typeof body.webhook_url === 'string' ? body.webhook_url : null;
  if (url !== null) {
    const check = await checkWebhookUrl(url, {
      allowCidrs: deps.config.delivery.allowCidrs,
      resolver: deps.resolver,
    });
    if (!check.ok) problems.push({ field: 'webhook_url', message: check.reason });
  }
  const label = normaliseLabel(body.label, problems);
  const metadata = normaliseMetadata(body.metadata, problems);
  if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);
  return {
    accountId,
    network: deps.network ?? deps.config.network,
    address: body.address,
    addressHex,
    assetFilter: body.asset_filter,
    direction: body.direction ?? 'incoming',
    channel: url !== null || endpointId !== null ? 'webhook' : 'telegram',
    webhookUrl: url,
    endpointId,
    label,
    metadata,
    blockIntervalMs: deps.config.ingest.blockIntervalMs,
  };
}
