/**
 * Signing the webhook body (SPEC §Webhook signature). The body is `serializeEvent(eventPayload(row))`
 * (src/events/event.ts: fields in SPEC order, serialised deterministically), so every attempt sends
 * the same bytes and `X-Signature` is computed over exactly those bytes.
 */
import { createHmac } from 'node:crypto';
import { type StandardWebhookHeaders, standardWebhookHeaders } from './standard-webhooks.js';

/**
 * SPEC §Webhook signature: lowercase hex HMAC-SHA256, key = the watch's secret string exactly as
 * returned at creation (`whsec_…`, UTF-8), message = the raw body bytes.
 */
export function signBody(secret: string, body: Buffer): string {
  return createHmac('sha256', secret).update(body).digest('hex');
}

/**
 * The headers sent beside X-Signature (issue 5 item 5): Standard Webhooks' `webhook-id` (the
 * event id), `webhook-timestamp` (unix seconds of the attempt's start) and `webhook-signature`
 * (src/delivery/standard-webhooks.ts), signed over the same body bytes.
 * @throws RangeError on a malformed secret (the message never contains it).
 */
export function extraSignatureHeaders(
  secret: string,
  eventId: string,
  body: Buffer,
  attemptStartedAt: Date,
): StandardWebhookHeaders {
  return standardWebhookHeaders(secret, eventId, body, attemptStartedAt.getTime() / 1000);
}

/**
 * Every signature header of one attempt (issue 19 item 3), signed with `secret` and, during a
 * rotation's grace period, also with `previousSecret` (the secret the rotation replaced):
 *
 *   x-signature           hex HMAC of the body keyed by `secret` (SPEC)
 *   x-signature-previous  the same keyed by `previousSecret` (additive; only during a grace period)
 *   webhook-id, webhook-timestamp
 *   webhook-signature     `v1,<new> v1,<previous>`: Standard Webhooks lets the header list
 *                         several space-separated signatures, a verifier accepts any match
 *
 * So a receiver still holding the old secret and one already holding the new one both verify
 * every delivery of the grace period, with either scheme.
 * @param previousSecret null (or absent) outside a grace period: only `secret` signs.
 * @throws RangeError on a malformed secret (the message never contains it).
 */
export function signatureHeaders(
  secret: string,
  previousSecret: string | null | undefined,
  eventId: string,
  body: Buffer,
  attemptStartedAt: Date,
): Record<string, string> {
  const std = extraSignatureHeaders(secret, eventId, body, attemptStartedAt);
  const headers: Record<string, string> = { 'x-signature': signBody(secret, body) };
  if (previousSecret) {
    headers['x-signature-previous'] = signBody(previousSecret, body);
    const old = extraSignatureHeaders(previousSecret, eventId, body, attemptStartedAt);
    std['webhook-signature'] = `${std['webhook-signature']} ${old['webhook-signature']}`;
  }
  return { ...headers, ...std };
}
