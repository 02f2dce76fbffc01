/**
 * The event stream that `tronwatch listen` forwards (issue 32 item 6): an account's new events of
 * one environment, each with the exact webhook request its watch's deliveries send (body bytes
 * and signed headers), so a developer can receive them on a local URL without a public one.
 *
 * How new events are found: by polling the account's events in creation order through the
 * `events_account_created` index (account_id, created_at), from a cursor. An event's created_at
 * is set inside the transaction that inserts it, so a row can become visible after one with a
 * later created_at has been read (two ingest transactions, or a test transfer beside a block).
 * Each poll therefore reads again the last {@link STREAM_LOOKBACK_MS} before the cursor and skips
 * the events it has already sent (their ids are kept for that window only): an event that commits
 * more than 60 s after its created_at was set would be missed. The ingester's transactions take
 * milliseconds to a few seconds.
 *
 * Only events whose watch signs its deliveries are streamed (a webhook watch, or a watch on an
 * endpoint): a chat (Telegram) watch has no secret to sign with. Redeliveries are not streamed
 * (they are the same event). The secret never leaves the server: only the signatures do.
 */

import type { EncryptedSecret, SecretBox } from '../common/secrets.js';
import type { Queryable } from '../db/pool.js';
import { environmentHeaders, signedRequestHeaders } from '../delivery/send.js';
import type { EventProof } from '../tron/types.js';
import type { Metadata } from '../watches/metadata.js';
import { type EventRow, eventPayload, serializeEvent } from './event.js';

/** How far before the cursor each poll reads again, ms (see the module's comment). */
export const STREAM_LOOKBACK_MS = 60_000;
/** Events read per poll, at most; a longer backlog is read over the following polls. */
export const STREAM_BATCH = 200;

/** One streamed event: what a delivery of it sends, byte for byte. */
export interface StreamedDelivery {
  /** The event (`evt_…`). */
  event_id: string;
  /** The watch that matched (`wh_…`). */
  watch_id: string;
  /** SPEC §Event `type`: `transfer.confirmed`. */
  type: string;
  /** `mainnet` or `nile`. */
  network: string;
  /** False for a test event (issue 32). */
  livemode: boolean;
  /** When the event was stored: ISO 8601 UTC, microseconds. Also the stream's resume cursor. */
  created_at: string;
  /**
   * The request headers a delivery sends: Content-Type, X-Signature (HMAC-SHA256 of `body` with
   * the watch's or its endpoint's secret), X-Event-Id, User-Agent, the Standard Webhooks headers
   * (webhook-timestamp = when this message was built), Tronwatch-Test-Mode for a test event.
   */
  headers: Record<string, string>;
  /** The request body exactly as signed (UTF-8 JSON text of SPEC §Event). */
  body: string;
}

interface StreamRow {
  id: string;
  account_id: string;
  watch_id: string;
  network: string;
  direction: string;
  asset: string;
  tx_id: string;
  event_index: number;
  block_number: number;
  block_timestamp: Date;
  from_address: string;
  to_address: string;
  amount_raw: string;
  contract: string | null;
  proof: EventProof;
  created_at: Date;
  metadata: Metadata | null;
  created_text: string;
  secret_key_id: string | null;
  secret_ciphertext: Buffer | Uint8Array | null;
  previous_secret_key_id: string | null;
  previous_secret_ciphertext: Buffer | Uint8Array | null;
}

/**
 * The events above `cursor - lookback` not in `skip`, oldest first, with the secrets that sign
 * them (the endpoint's when the watch is on one, as the delivery worker's claim does).
 */
const STREAM_SQL = `
SELECT e.id, e.account_id, e.watch_id, e.network, e.direction, e.asset, e.tx_id, e.event_index,
       e.block_number, e.block_timestamp, e.from_address, e.to_address,
       e.amount_raw::text AS amount_raw, e.contract, e.proof, e.created_at, e.metadata,
       to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_text,
       CASE WHEN ep.id IS NULL THEN w.secret_key_id ELSE ep.secret_key_id END AS secret_key_id,
       CASE WHEN ep.id IS NULL THEN w.secret_ciphertext ELSE ep.secret_ciphertext END
         AS secret_ciphertext,
       CASE WHEN ep.id IS NULL AND w.previous_secret_expires_at > now()
            THEN w.previous_secret_key_id
            WHEN ep.previous_secret_expires_at > now() THEN ep.previous_secret_key_id
       END AS previous_secret_key_id,
       CASE WHEN ep.id IS NULL AND w.previous_secret_expires_at > now()
            THEN w.previous_secret_ciphertext
            WHEN ep.previous_secret_expires_at > now() THEN ep.previous_secret_ciphertext
       END AS previous_secret_ciphertext
  FROM events AS e
  JOIN watches AS w ON w.id = e.watch_id
  LEFT JOIN endpoints AS ep ON ep.id = w.endpoint_id
 WHERE e.account_id = $1 AND e.network = $2
   AND e.created_at > $3::timestamptz - make_interval(secs => $4::float8 / 1000)
   AND NOT (e.id = ANY($5::text[]))
   AND (CASE WHEN ep.id IS NULL THEN w.secret_ciphertext ELSE ep.secret_ciphertext END) IS NOT NULL
 ORDER BY e.created_at, e.id
 LIMIT $6`;

function encrypted(
  keyId: string | null,
  ciphertext: Buffer | Uint8Array | null,
): EncryptedSecret | null {
  if (keyId === null || ciphertext === null) return null;
  // node-postgres gives a Buffer, PGlite a Uint8Array: view the same bytes as a Buffer.
  return {
    keyId,
    ciphertext: Buffer.from(ciphertext.buffer, ciphertext.byteOffset, ciphertext.byteLength),
  };
}

/** The database's current instant as the stream's first cursor (ISO 8601 UTC, microseconds). */
export async function streamStart(db: Queryable): Promise<string> {
  const { rows } = await db.query<{ t: string }>(
    `SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS t`,
  );
  return rows[0]?.t ?? new Date().toISOString();
}

/**
 * One account's stream of new events in one environment. Call {@link poll} repeatedly; each
 * call returns the events not returned before, oldest first.
 */
export class EventStream {
  /** Event ids already returned → their created_at (ms), kept for the lookback window. */
  private readonly sent = new Map<string, number>();

  /**
   * @param cursor ISO 8601 instant: events created after it (less the lookback, deduplicated)
   *   are streamed; {@link streamStart} for "from now", or a client's Last-Event-ID to resume.
   */
  constructor(
    private readonly db: Queryable,
    private readonly secrets: SecretBox,
    private readonly accountId: string,
    private readonly network: string,
    private cursor: string,
  ) {}

  /** The newest created_at returned so far (or the start): the resume point of the stream. */
  get position(): string {
    return this.cursor;
  }

  /**
   * Read the events not yet returned and build their signed requests.
   * @throws the database error (the route logs it and polls again); an event whose secret does
   *   not decrypt on this replica is skipped with the others returned (the delivery worker holds
   *   such deliveries too).
   */
  async poll(now = new Date()): Promise<StreamedDelivery[]> {
    const { rows } = await this.db.query<StreamRow>(STREAM_SQL, [
      this.accountId,
      this.network,
      this.cursor,
      STREAM_LOOKBACK_MS,
      [...this.sent.keys()],
      STREAM_BATCH,
    ]);
    const out: StreamedDelivery[] = [];
    for (const r of rows) {
      this.sent.set(r.id, r.created_at.getTime());
      if (r.created_text > this.cursor) this.cursor = r.created_text;
      const secret = encrypted(r.secret_key_id, r.secret_ciphertext);
      if (!secret) continue;
      let plain: string;
      let previous: string | null = null;
      try {
        plain = this.secrets.decrypt(secret);
        const prev = encrypted(r.previous_secret_key_id, r.previous_secret_ciphertext);
        if (prev) previous = this.secrets.decrypt(prev);
      } catch {
        continue;
      }
      const row: EventRow = { ...r, metadata: r.metadata ?? null };
      const payload = eventPayload(row);
      const body = serializeEvent(payload);
      out.push({
        event_id: r.id,
        watch_id: r.watch_id,
        type: payload.type,
        network: r.network,
        livemode: payload.livemode,
        created_at: r.created_text,
        headers: signedRequestHeaders(
          r.id,
          body,
          plain,
          previous,
          now,
          environmentHeaders(r.network),
        ),
        body: body.toString('utf8'),
      });
    }
    // Forget what fell out of the lookback window: it can no longer be read again.
    const horizon = Date.parse(this.cursor) - STREAM_LOOKBACK_MS;
    for (const [id, at] of this.sent) if (at < horizon) this.sent.delete(id);
    return out;
  }
}
