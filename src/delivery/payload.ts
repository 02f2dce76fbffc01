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
