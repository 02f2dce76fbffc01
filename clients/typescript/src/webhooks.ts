/**
 * Verify a tronwatch webhook delivery before trusting it. Every delivery carries two signatures
 * over the exact body bytes (docs/api.md "Webhook deliveries"):
 *
 * - `X-Signature`: lowercase hex HMAC-SHA256 of the body, keyed by the whole secret string
 *   `whsec_…` (UTF-8);
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature`), checked with the
 *   `standardwebhooks` library: HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed by the base64 after
 *   `whsec_`, the timestamp within 5 minutes of now (replays are refused).
 *
 * By default the Standard Webhooks headers are REQUIRED: only they sign a timestamp, so only they
 * let a receiver refuse a captured delivery replayed later (an X-Signature alone verifies the
 * same body for ever). `X-Signature` alone is accepted only with `{ allowXSignatureOnly: true }`,
 * for a receiver behind something that strips the `webhook-*` headers and that deduplicates on
 * `event_id` itself. Every scheme whose headers are present must verify.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import type { components } from './schema.js';

/** A delivered event: `transfer.confirmed`, or the console's `webhook.test` (credit neither twice). */
export type WebhookEvent = components['schemas']['Event'] | components['schemas']['TestEvent'];

/** The delivery is not authentic (or too old): answer it 401 and do not act on it. */
export class WebhookVerificationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WebhookVerificationError';
  }
}

type HeaderSource = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

function lowerCaseHeaders(headers: HeaderSource): Record<string, string> {
  const out: Record<string, string> = {};
  const entries: Iterable<[string, unknown]> =
    typeof (headers as Headers).entries === 'function' &&
    typeof (headers as Headers).get === 'function'
      ? (headers as Headers).entries()
      : Object.entries(headers);
  for (const [k, v] of entries) {
    const value = typeof v === 'string' ? v : Array.isArray(v) ? v[0] : undefined;
    if (typeof value === 'string') out[k.toLowerCase()] = value;
  }
  return out;
}

/** Options of {@link verifyWebhook}. */
export interface VerifyWebhookOptions {
  /**
   * Accept a delivery that carries `X-Signature` but none of the Standard Webhooks headers.
   * Default false: such a delivery is refused, since nothing in it dates it and a captured one
   * could be replayed at any time. Opt in only if your receiver deduplicates on `event_id`.
   */
  allowXSignatureOnly?: boolean;
}

/** The Standard Webhooks headers, all three required unless `allowXSignatureOnly`. */
const STANDARD_HEADERS = ['webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;

/**
 * Verify a delivery and return its event.
 * @param body the raw request body, exactly as received (before any JSON parsing).
 * @param headers the request headers (a fetch `Headers`, or Node's `req.headers`).
 * @param secret the watch's (or endpoint's) `whsec_…` secret, as returned when it was created.
 * @param options see {@link VerifyWebhookOptions}.
 * @throws WebhookVerificationError when the Standard Webhooks headers are missing (and
 *   `allowXSignatureOnly` is not set), when a present signature does not verify, or when the
 *   signed `webhook-timestamp` is more than five minutes from now (a replay, or a late delivery).
 */
export function verifyWebhook(
  body: string | Uint8Array,
  headers: HeaderSource,
  secret: string,
  options: VerifyWebhookOptions = {},
): WebhookEvent {
  const h = lowerCaseHeaders(headers);
  const bytes = typeof body === 'string' ? Buffer.from(body, 'utf8') : Buffer.from(body);
  const xSignature = h['x-signature'];
  const missing = STANDARD_HEADERS.filter((name) => h[name] === undefined);
  const standard = missing.length < STANDARD_HEADERS.length;
  if (xSignature === undefined && !standard) {
    throw new WebhookVerificationError('no X-Signature and no webhook-signature header');
  }
  if (missing.length > 0 && (standard || !options.allowXSignatureOnly)) {
    throw new WebhookVerificationError(
      `no ${missing.join(', ')} header: the signed timestamp is required (it refuses replays); pass { allowXSignatureOnly: true } to accept X-Signature alone`,
    );
  }
  if (xSignature !== undefined) {
    const expected = Buffer.from(createHmac('sha256', secret).update(bytes).digest('hex'));
    const got = Buffer.from(xSignature.trim().toLowerCase());
    if (got.length !== expected.length || !timingSafeEqual(got, expected)) {
      throw new WebhookVerificationError('X-Signature does not match the body');
    }
  }
  if (standard) {
    try {
      new Webhook(secret).verify(bytes, h);
    } catch (err) {
      throw new WebhookVerificationError(
        `webhook-signature: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }
  return JSON.parse(bytes.toString('utf8')) as WebhookEvent;
}
