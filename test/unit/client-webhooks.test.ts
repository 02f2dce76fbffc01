/**
 * The typed client's verifyWebhook never verifies a replay (issue 40 item 7): a captured delivery
 * (the known-answer vectors of docs/signature-vectors.json, signed as the service signs) is
 * accepted within five minutes of its signed timestamp, refused an hour later with its
 * `webhook-*` headers, and refused an hour later WITHOUT them (X-Signature alone dates nothing)
 * unless the receiver opts in with `allowXSignatureOnly`. The clock is set with vitest's fake Date
 * (the standardwebhooks library reads Date.now()).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { verifyWebhook, WebhookVerificationError } from '../../clients/typescript/src/index.js';

interface Vector {
  name: string;
  secret: string;
  webhook_id: string;
  webhook_timestamp: number;
  body: string;
  x_signature: string;
  webhook_signature: string;
}

const vectors = (
  JSON.parse(
    readFileSync(path.resolve(import.meta.dirname, '../../docs/signature-vectors.json'), 'utf8'),
  ) as { vectors: Vector[] }
).vectors;

/** Verify `v` with the clock at its signed timestamp + `afterSeconds`. */
function verifyAt(
  v: Vector,
  headers: Record<string, string>,
  afterSeconds: number,
  options?: { allowXSignatureOnly?: boolean },
) {
  vi.useFakeTimers({ toFake: ['Date'] });
  vi.setSystemTime((v.webhook_timestamp + afterSeconds) * 1000);
  try {
    return verifyWebhook(v.body, headers, v.secret, options);
  } finally {
    vi.useRealTimers();
  }
}

describe('verifyWebhook (clients/typescript)', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('has vectors to check', () => {
    expect(vectors.length).toBeGreaterThan(0);
  });

  for (const v of vectors) {
    const all = {
      'x-signature': v.x_signature,
      'webhook-id': v.webhook_id,
      'webhook-timestamp': String(v.webhook_timestamp),
      'webhook-signature': v.webhook_signature,
    };
    const xOnly = { 'x-signature': v.x_signature };

    it(`${v.name}: accepts the delivery within five minutes, refuses it replayed an hour later`, () => {
      expect(verifyAt(v, all, 10)).toEqual(JSON.parse(v.body));
      expect(() => verifyAt(v, all, 3600)).toThrow(WebhookVerificationError);
      expect(() => verifyAt(v, all, 3600)).toThrow(/timestamp/i);
    });

    it(`${v.name}: refuses X-Signature alone (the replay without its webhook-* headers) unless opted in`, () => {
      expect(() => verifyAt(v, xOnly, 3600)).toThrow(WebhookVerificationError);
      expect(() => verifyAt(v, xOnly, 3600)).toThrow(
        /no webhook-id, webhook-timestamp, webhook-signature header/,
      );
      expect(() => verifyAt(v, xOnly, 10)).toThrow(WebhookVerificationError);
      // Dropping only the timestamp is refused too (a partial set is not a signed timestamp).
      const { 'webhook-timestamp': _t, ...noTimestamp } = all;
      expect(() => verifyAt(v, noTimestamp, 10)).toThrow(/no webhook-timestamp header/);
      expect(() => verifyAt(v, noTimestamp, 10, { allowXSignatureOnly: true })).toThrow(
        /no webhook-timestamp header/,
      );
      // The explicit opt-in: X-Signature alone, still checked against the body.
      expect(verifyAt(v, xOnly, 3600, { allowXSignatureOnly: true })).toEqual(JSON.parse(v.body));
      expect(() =>
        verifyAt(v, { 'x-signature': '0'.repeat(64) }, 10, { allowXSignatureOnly: true }),
      ).toThrow(/X-Signature does not match/);
    });
  }
});
