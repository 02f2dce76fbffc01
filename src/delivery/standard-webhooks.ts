/**
 * Replay-safe signatures, additive to SPEC's `X-Signature` (issue 5 item 5): the Standard
 * Webhooks headers (https://www.standardwebhooks.com/), so receivers can verify with any
 * Standard Webhooks library and reject replays.
 *
 *   webhook-id         the event id (`evt_…`), the same on every attempt of an event: dedupe on it
 *   webhook-timestamp  unix seconds of the attempt (a retry carries a new timestamp)
 *   webhook-signature  `v1,` + standard base64 of HMAC-SHA256(key, `${id}.${timestamp}.` ‖ body)
 *
 * The key is the watch secret as Standard Webhooks defines it: the bytes that the base64 after
 * `whsec_` decodes to (32 random bytes for every secret tronwatch issues). `X-Signature`, by
 * contrast, is keyed by the WHOLE `whsec_…` string as UTF-8 (SPEC §Webhook signature): the same
 * secret, two different HMAC keys. Both are published as known-answer vectors in
 * docs/signature-vectors.json.
 *
 * Nothing here logs; no function puts the secret or the key into an error message.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** The secret's prefix (newWebhookSecret in src/common/secrets.ts). */
export const SECRET_PREFIX = 'whsec_';

/** Receivers reject a `webhook-timestamp` further than this from their clock, seconds. */
export const TIMESTAMP_TOLERANCE_SECONDS = 5 * 60;

const BASE64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** The three Standard Webhooks headers, lowercase names (a type: it spreads into any header record). */
export type StandardWebhookHeaders = {
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
};

/**
 * The HMAC key of the Standard Webhooks scheme: base64-decoded bytes of the part after `whsec_`.
 * @throws RangeError when `secret` is not `whsec_` + canonical, non-empty standard base64 (the
 *   message never contains the secret).
 */
export function standardWebhookKey(secret: string): Buffer {
  const b64 = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret;
  if (b64 === '' || !BASE64_RE.test(b64)) {
    throw new RangeError('a webhook secret must be whsec_ followed by standard base64');
  }
  return Buffer.from(b64, 'base64');
}

/**
 * `v1,<base64 HMAC-SHA256>` over `${id}.${timestamp}.` followed by the exact body bytes.
 * @param timestamp unix seconds (an integer).
 * @throws RangeError on a malformed secret or a timestamp that is not a non-negative integer.
 */
export function standardWebhookSignature(
  secret: string,
  id: string,
  timestamp: number,
  body: Uint8Array,
): string {
  if (!Number.isSafeInteger(timestamp) || timestamp < 0) {
    throw new RangeError('webhook-timestamp must be a non-negative integer of seconds');
  }
  const mac = createHmac('sha256', standardWebhookKey(secret))
    .update(`${id}.${timestamp}.`, 'utf8')
    .update(body)
    .digest('base64');
  return `v1,${mac}`;
}

/**
 * The Standard Webhooks headers of one attempt, to send beside `X-Signature`.
 * @param secret the watch's `whsec_…` secret.
 * @param eventId the event id (`evt_…`), also sent as X-Event-Id.
 * @param body the exact body bytes sent (serializeEvent).
 * @param nowSeconds the attempt's time, unix seconds (fractions are dropped).
 * @throws RangeError on a malformed secret or time.
 */
export function standardWebhookHeaders(
  secret: string,
  eventId: string,
  body: Uint8Array,
  nowSeconds: number,
): StandardWebhookHeaders {
  const timestamp = Math.floor(nowSeconds);
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': standardWebhookSignature(secret, eventId, timestamp, body),
  };
}

/** Why {@link verifyStandardWebhook} refused a request. */
export type StandardWebhookRefusal =
  | 'missing_headers'
  | 'bad_timestamp'
  | 'timestamp_too_old'
  | 'timestamp_too_new'
  | 'bad_signature';

/**
 * The receiver's side (the logic docs/integrating.md's snippets follow): headers present, timestamp within
 * `toleranceSeconds` of `nowSeconds` in both directions, then any `v1,` signature in the
 * space-separated `webhook-signature` list equal in constant time to the expected one, computed
 * over the exact bytes received, before any parsing. Dedupe on `webhook-id` after this passes.
 * @returns null when the request is authentic and fresh, else the reason.
 */
export function verifyStandardWebhook(
  secret: string,
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  body: Uint8Array,
  nowSeconds: number,
  toleranceSeconds = TIMESTAMP_TOLERANCE_SECONDS,
): StandardWebhookRefusal | null {
  const header = (name: string): string | undefined => {
    const v = headers[name];
    return typeof v === 'string' ? v : undefined;
  };
  const id = header('webhook-id');
  const ts = header('webhook-timestamp');
  const sigs = header('webhook-signature');
  if (!id || !ts || !sigs) return 'missing_headers';
  if (!/^\d{1,15}$/.test(ts)) return 'bad_timestamp';
  const timestamp = Number(ts);
  if (nowSeconds - timestamp > toleranceSeconds) return 'timestamp_too_old';
  if (timestamp - nowSeconds > toleranceSeconds) return 'timestamp_too_new';
  const expected = Buffer.from(standardWebhookSignature(secret, id, timestamp, body).slice(3));
  for (const candidate of sigs.split(' ')) {
    if (!candidate.startsWith('v1,')) continue;
    const got = Buffer.from(candidate.slice(3));
    if (got.length === expected.length && timingSafeEqual(got, expected)) return null;
  }
  return 'bad_signature';
}
