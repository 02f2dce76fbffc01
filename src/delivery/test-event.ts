/**
 * The console's "Send test event" (issue 12 item 5; DESIGN decisions "test event"): one POST to a
 * webhook watch's URL, signed with that watch's secret exactly as a delivery is (X-Signature and
 * the Standard Webhooks headers), through the same sender (address policy, deadline). It is never
 * stored: no event, no notification, no attempt row; GET /v1/events never lists it.
 *
 * It can never be credited: its body is a `webhook.test` (events/event.ts TestEventSchema), not a
 * `transfer.confirmed`, with `test: true`, an amount of 0 and a tx_id of 64 zeros, and the header
 * `X-Tronwatch-Test: 1` marks it too (and, for a test-mode watch, `Tronwatch-Test-Mode: true`
 * and `livemode: false`, as on its real deliveries: issue 32). A receiver that follows
 * docs/integrating.md's snippets (check the signature, then the type) acknowledges it without
 * crediting anything. Otherwise it has an
 * event's fields: the watched address on the watch's side (incoming unless outgoing-only), USDT
 * (TRX for a TRX-only watch), the newest block tronwatch has seen, event_id `evt_test_…`.
 *
 * Limited per account: TEST_SENDS_PER_MINUTE in a sliding minute (the rate limiter shared by
 * replicas), so a click loop cannot turn a receiver into a target.
 */
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { type EventRow, serializeEvent, testEventPayload } from '../events/event.js';
import { hexToBase58, USDT_CONTRACT_HEX } from '../tron/address.js';
import type { Metadata } from '../watches/metadata.js';
import { errorClass } from './error-class.js';
import { environmentHeaders, WebhookSender } from './send.js';

/** The header that marks a test delivery. */
export const TEST_HEADER = 'x-tronwatch-test';

/** Test deliveries one account may send per sliding minute (console and API together). */
export const TEST_SENDS_PER_MINUTE = 10;

/** What the console shows of a test delivery. */
export interface TestOutcome {
  ok: boolean;
  http_status: number | null;
  error: string | null;
  error_class: string | null;
  duration_ms: number;
  response_headers: Record<string, string> | null;
  response_body: string | null;
  request: { url: string; headers: Record<string, string>; body: string };
}

/** A fixed counterparty of test events (the USDT contract's own address: clearly not a user). */
const COUNTERPARTY_HEX = USDT_CONTRACT_HEX;

/**
 * Send a test event to the account's webhook watch `watchId`.
 * @returns the outcome, or undefined when the account has no such live webhook watch (404).
 */
export async function sendTestEvent(
  deps: {
    db: Queryable;
    secrets: SecretBox;
    config: Pick<Config, 'delivery'>;
  },
  accountId: string,
  network: string,
  watchId: string,
): Promise<TestOutcome | undefined> {
  const { rows } = await deps.db.query<{
    address_hex: string;
    asset_filter: string;
    direction: string;
    webhook_url: string | null;
    secret_key_id: string | null;
    secret_ciphertext: Uint8Array | null;
    previous_secret_key_id: string | null;
    previous_secret_ciphertext: Uint8Array | null;
    head: number | null;
    metadata: Metadata | null;
  }>(
    `SELECT w.address_hex, w.asset_filter, w.direction, w.metadata,
            -- A watch on an endpoint (migration 070): the endpoint's URL and secrets.
            COALESCE(ep.url, w.webhook_url) AS webhook_url,
            CASE WHEN ep.id IS NULL THEN w.secret_key_id ELSE ep.secret_key_id END
              AS secret_key_id,
            CASE WHEN ep.id IS NULL THEN w.secret_ciphertext ELSE ep.secret_ciphertext END
              AS secret_ciphertext,
            CASE WHEN ep.id IS NULL AND w.previous_secret_expires_at > now()
                 THEN w.previous_secret_key_id
                 WHEN ep.previous_secret_expires_at > now() THEN ep.previous_secret_key_id
            END AS previous_secret_key_id,
            CASE WHEN ep.id IS NULL AND w.previous_secret_expires_at > now()
                 THEN w.previous_secret_ciphertext
                 WHEN ep.previous_secret_expires_at > now() THEN ep.previous_secret_ciphertext
            END AS previous_secret_ciphertext,
            (SELECT h.head_block_number FROM chain_head h WHERE h.network = w.network) AS head
       FROM watches w LEFT JOIN endpoints ep ON ep.id = w.endpoint_id
      WHERE w.id = $1 AND w.account_id = $2 AND w.network = $3 AND w.deleted_at IS NULL
        AND w.channel = 'webhook'`,
    [watchId, accountId, network],
  );
  const w = rows[0];
  if (!w?.webhook_url || !w.secret_key_id || !w.secret_ciphertext) return undefined;
  const secret = deps.secrets.decrypt({
    keyId: w.secret_key_id,
    ciphertext: Buffer.from(w.secret_ciphertext),
  });
  // During a rotation's grace period the test event is signed with both secrets, as deliveries are.
  let previous: string | null = null;
  if (w.previous_secret_key_id && w.previous_secret_ciphertext) {
    try {
      previous = deps.secrets.decrypt({
        keyId: w.previous_secret_key_id,
        ciphertext: Buffer.from(w.previous_secret_ciphertext),
      });
    } catch {
      previous = null;
    }
  }
  const usdt = w.asset_filter !== 'TRX';
  const outgoing = w.direction === 'outgoing';
  const watched = hexToBase58(w.address_hex);
  const other = hexToBase58(COUNTERPARTY_HEX);
  const event: EventRow = {
    id: `evt_test_${randomBytes(10).toString('hex')}`,
    account_id: accountId,
    watch_id: watchId,
    network,
    direction: outgoing ? 'outgoing' : 'incoming',
    asset: usdt ? 'USDT' : 'TRX',
    tx_id: '0'.repeat(64),
    event_index: 0,
    block_number: Number(w.head ?? 0),
    block_timestamp: new Date(Math.floor(Date.now() / 1000) * 1000),
    from_address: outgoing ? watched : other,
    to_address: outgoing ? other : watched,
    amount_raw: '0',
    contract: usdt ? hexToBase58(USDT_CONTRACT_HEX) : null,
    // A test delivery claims nothing: never money.
    proof: 'provider',
    created_at: new Date(),
    // The watch's metadata, as its real events will carry it (a receiver tests its lookup too).
    metadata: w.metadata,
  };
  const sender = new WebhookSender({
    timeoutMs: deps.config.delivery.timeoutMs,
    allowCidrs: deps.config.delivery.allowCidrs,
    caFile: deps.config.delivery.caFile,
    connections: 1,
  });
  const body = serializeEvent(testEventPayload(event));
  try {
    const r = await sender.sendBody(
      w.webhook_url,
      event.id,
      body,
      secret,
      undefined,
      // A test-mode watch's (issue 32): `Tronwatch-Test-Mode: true` too, as on its deliveries.
      { ...environmentHeaders(network), [TEST_HEADER]: '1' },
      previous,
    );
    return {
      ok: r.ok,
      http_status: r.status ?? null,
      error: r.error ?? null,
      error_class: errorClass(r.status, r.error),
      duration_ms: r.durationMs,
      response_headers: r.responseHeaders ?? null,
      response_body: r.responseBody ?? null,
      request: {
        url: w.webhook_url,
        headers: r.requestHeaders ?? {},
        body: body.toString('utf8'),
      },
    };
  } finally {
    await sender.close();
  }
}
