/**
 * Claim due webhook notifications from the outbox (DESIGN data flow "claim due notifications";
 * invariant 3). One statement: pick up to `limit` rows that are PENDING, on the webhook channel
 * and due (`next_attempt_at <= now()`), oldest due first, skipping rows another worker has locked
 * (`FOR UPDATE SKIP LOCKED`), and in the same statement take a lease on them: `next_attempt_at`
 * moves to now() + lease and each row gets a fresh `lease_token`.
 *
 * The lease is the only lock that outlives the statement. A worker that dies holding
 * notifications simply stops; when their lease runs out they are due again and another worker
 * claims them (with a new token). The completion (complete.ts) only moves a notification whose
 * token still matches, so a worker that outlived its lease records its attempt but cannot
 * overwrite the newer claim's outcome. The lease must therefore cover one attempt (the webhook
 * timeout) plus the time to record it: see {@link leaseMs}.
 *
 * Works on PostgreSQL 15 and PGlite (gen_random_uuid is core since PostgreSQL 13).
 */
import type { EncryptedSecret } from '../common/secrets.js';
import type { Queryable } from '../db/pool.js';
import type { EventRow } from '../events/event.js';

/** What one delivery attempt needs, read with the claim (no second query per notification). */
export interface ClaimedNotification {
  /** ntf_… */
  notificationId: string;
  /** Attempts made before this claim (0 for the immediate attempt). */
  attempts: number;
  /** The token this claim holds; the completion must present it (complete.ts). */
  leaseToken: string;
  /** The event as stored (SPEC §Event source). */
  event: EventRow;
  /**
   * The watch's webhook_url as stored (re-checked at delivery, DESIGN invariant 7). Null only if
   * the watch is not a webhook watch (the schema's CHECKs make that a bug): a failed attempt.
   */
  webhookUrl: string | null;
  /** The encrypted whsec_ secret (src/common/secrets.ts), null as for webhookUrl. */
  secret: EncryptedSecret | null;
}

/** Margin added to the webhook timeout to form the lease, ms: time to record the attempt. */
export const LEASE_MARGIN_MS = 20_000;

/**
 * The lease for a webhook timeout: the timeout plus {@link LEASE_MARGIN_MS} (10 s + 20 s = 30 s
 * with SPEC's timeout). The worker starts a claimed notification within about a quarter of the
 * margin (it bounds its queue, and releases one that waited ¾ of the margin instead of starting
 * it), the attempt ends within the timeout, and it is recorded within the rest unless the
 * database is down.
 */
export function leaseMs(timeoutMs: number, marginMs = LEASE_MARGIN_MS): number {
  return timeoutMs + marginMs;
}

interface ClaimRow extends EventRow {
  notification_id: string;
  attempts: number;
  lease_token: string;
  webhook_url: string | null;
  secret_key_id: string | null;
  secret_ciphertext: Buffer | Uint8Array | null;
}

/**
 * The claim statement. The inner SELECT walks notifications_due (next_attempt_at, PENDING only)
 * in order and locks the first due rows it can (skipping locked ones); the UPDATE leases them
 * and returns, joined, everything a delivery needs. A watch without URL or secret cannot occur
 * on the webhook channel (CHECK constraints of migration 002); it would be a failed attempt.
 * With no statistics (a table just filled, never analysed) the planner may read every due row
 * and sort instead of walking the index: correct, slower; autovacuum's ANALYZE fixes it.
 */
const CLAIM_SQL = `
UPDATE notifications AS n
   SET next_attempt_at = now() + make_interval(secs => $2::float8 / 1000),
       lease_token = $3::text || ':' || gen_random_uuid()::text
  FROM (SELECT id
          FROM notifications
         WHERE status = 'PENDING' AND channel = 'webhook' AND next_attempt_at <= now()
         ORDER BY next_attempt_at
         LIMIT $1
           FOR UPDATE SKIP LOCKED) AS due,
       events AS e,
       watches AS w
 WHERE n.id = due.id AND e.id = n.event_id AND w.id = n.watch_id
RETURNING n.id AS notification_id, n.attempts, n.lease_token,
          w.webhook_url, w.secret_key_id, w.secret_ciphertext,
          e.id, e.account_id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
          e.event_index, e.block_number, e.block_timestamp, e.from_address, e.to_address,
          e.amount_raw::text AS amount_raw, e.contract, e.created_at`;

/**
 * Claim up to `limit` due webhook notifications and lease them for `leaseMs`.
 * @param limit maximum rows, ≥ 1 (the worker passes its free slots).
 * @param leaseMs lease duration, ms (see {@link leaseMs}).
 * @param owner a short worker id, prefixed to each lease token (visible when debugging).
 * @returns the claimed notifications, oldest due first; [] when none is due.
 * @throws the database error (the worker logs it, backs off and claims again).
 */
export async function claimNotifications(
  db: Queryable,
  opts: { limit: number; leaseMs: number; owner: string },
): Promise<ClaimedNotification[]> {
  const { rows } = await db.query<ClaimRow>(CLAIM_SQL, [opts.limit, opts.leaseMs, opts.owner]);
  return rows.map((r) => ({
    notificationId: r.notification_id,
    attempts: r.attempts,
    leaseToken: r.lease_token,
    webhookUrl: r.webhook_url,
    secret:
      r.secret_key_id === null || r.secret_ciphertext === null
        ? null
        : {
            keyId: r.secret_key_id,
            // node-postgres gives a Buffer, PGlite a Uint8Array: view the same bytes as a Buffer.
            ciphertext: Buffer.from(
              r.secret_ciphertext.buffer,
              r.secret_ciphertext.byteOffset,
              r.secret_ciphertext.byteLength,
            ),
          },
    event: {
      id: r.id,
      account_id: r.account_id,
      watch_id: r.watch_id,
      network: r.network,
      direction: r.direction,
      asset: r.asset,
      tx_id: r.tx_id,
      event_index: r.event_index,
      block_number: r.block_number,
      block_timestamp: r.block_timestamp,
      from_address: r.from_address,
      to_address: r.to_address,
      amount_raw: r.amount_raw,
      contract: r.contract,
      created_at: r.created_at,
    },
  }));
}
