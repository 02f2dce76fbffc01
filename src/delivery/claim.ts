/**
 * Claim due notifications from the outbox (DESIGN data flow "claim due notifications";
 * invariant 3), one channel at a time: the webhook worker claims `webhook` ones, the chat worker
 * (chat-worker.ts, issue 13) `telegram` ones, with the bound chat read in the same statement.
 * One statement: pick up to `limit` rows that are PENDING and not held (migration 095), on the channel and due (`next_attempt_at <= now()`), oldest due first, skipping rows another worker has locked
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
 * A lease that runs out on a started attempt is a lost attempt, and it counts (migrations 008 and
 * 014): a due notification whose `lease_token` is still set and whose `attempt_started_at` is set
 * (the worker marks it with {@link startClaims} just before sending) was attempted and never
 * recorded (its worker died, or stalled past the lease). The same statement that would claim it
 * records that attempt instead, numbered attempts + 1, started at `attempt_started_at`, error
 * {@link WORKER_LOST_ERROR}, and moves the
 * notification as a failed attempt failing at the lease's expiry: due again after the schedule's
 * delay from that expiry (schedule.ts), or DEAD when it was the sixth. So a notification whose
 * attempt kills the worker every time goes DEAD after six claims (SPEC §States; DESIGN invariant
 * 4), and each lost attempt is recorded exactly once: the row lock (SKIP LOCKED) lets one claim
 * see the expired lease, which it clears in the same commit, and the attempts key
 * (notification_id, attempt) refuses a second row. A notification whose lease simply expired is
 * therefore not re-sent at once: it waits for the schedule like any failed attempt. If the lost
 * worker does record its outcome later, complete.ts fills that attempt's row in.
 *
 * A lease that runs out before its attempt started (the claim waited in a worker's queue, and that
 * worker died) is no attempt: the next claim takes the notification like any due one, attempts
 * unchanged, nothing recorded ({@link ClaimResult.reclaimed} counts them). A worker claims ahead
 * of its free slots, so a killed worker holds many such claims; counting them would send innocent
 * notifications to DEAD through other notifications' crashes (found by the chaos soak).
 *
 * Works on PostgreSQL 15 and PGlite (gen_random_uuid is core since PostgreSQL 13).
 */
import { isLivemode } from '../common/environment.js';
import type { EncryptedSecret } from '../common/secrets.js';
import type { Queryable } from '../db/pool.js';
import type { EventRow } from '../events/event.js';
import { type ErrorClass, errorClass } from './error-class.js';
import { nextDelayMs, RETRY_DELAYS_MS } from './schedule.js';

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
  /**
   * The secret a rotation replaced, while its grace period runs (migration 040; issue 19 item 3):
   * the attempt is signed with both. Null outside a grace period.
   */
  previousSecret: EncryptedSecret | null;
  /**
   * Chat notifications: the chat bound to the account now (accounts.telegram_chat_id: a chat that
   * migrated is followed), null when none is bound (a failed attempt). Null for webhooks.
   */
  chatId: string | null;
  /**
   * The endpoint the watch delivers to (migration 070; issue 30), as it is at the claim: webhookUrl
   * and the secrets above are then the endpoint's. Null: the watch's own URL, or a chat.
   */
  endpoint: ClaimedEndpoint | null;
}

/** An endpoint's on/off and pace, read with the claim. */
export interface ClaimedEndpoint {
  /** ep_… */
  id: string;
  /** False: the delivery waits in the outbox, no attempt used (worker.ts). */
  enabled: boolean;
  /** Deliveries per second at most, across workers; null: none of its own. */
  ratePerSecond: number | null;
  /** Deliveries in flight at most, across workers; null: none of its own. */
  maxConcurrency: number | null;
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

/**
 * The error of an attempt whose lease ran out before it was recorded (the worker died or stalled):
 * its row in `attempts` and the notification's last_error. complete.ts recognises the row by it.
 */
export const WORKER_LOST_ERROR = 'worker_lost: the lease expired before an outcome was recorded';

/** The error_class of a lost attempt's row: 'lost' (error-class.ts, derived from the error). */
const WORKER_LOST_CLASS: ErrorClass | null = errorClass(null, WORKER_LOST_ERROR);

interface ClaimRow extends EventRow {
  notification_id: string;
  attempts: number;
  lease_token: string;
  webhook_url: string | null;
  secret_key_id: string | null;
  secret_ciphertext: Buffer | Uint8Array | null;
  previous_secret_key_id: string | null;
  previous_secret_ciphertext: Buffer | Uint8Array | null;
  chat_id: string | null;
  endpoint_id: string | null;
  endpoint_enabled: boolean | null;
  endpoint_rate_limit_per_second: number | null;
  endpoint_max_concurrency: number | null;
  /** The row is a lost attempt, recorded and rescheduled (or DEAD), not claimed. */
  lost: boolean;
  /** Claimed again: its previous lease ran out before its attempt started. */
  reclaimed: boolean;
  status: 'PENDING' | 'DEAD';
}

/**
 * The claim statement. `due` walks notifications_due_channel (channel, next_attempt_at; PENDING
 * and not held only; migrations 023 and 095: a held notification, one provider's word, is never
 * claimed: src/ingest/confirm.ts releases it) in order within the claimed channel, so due rows of the other channel (a
 * Telegram backlog) are never read by a webhook claim, and locks the first due rows it can (skipping locked ones). The UPDATE leases those whose
 * lease_token is NULL and returns, joined, everything a delivery needs; those whose token is set
 * are lost attempts (the lease ran out: next_attempt_at is its expiry): counted, rescheduled from
 * the expiry by the delays in $4 (ms, index = attempts made, 1-based; NULL past the end → DEAD),
 * token cleared, and recorded by `lost`. The normal path is unchanged: attempts is not touched by
 * a claim. A watch without URL or secret cannot occur on the webhook channel (CHECK constraints of
 * migration 002); it would be a failed attempt. With no statistics (a table just filled, never
 * analysed) the planner may read every due row and sort instead of walking the index: correct,
 * slower; autovacuum's ANALYZE fixes it.
 */
const CLAIM_SQL = `
WITH due AS (
  SELECT id, lease_token IS NOT NULL AND attempt_started_at IS NOT NULL AS lost,
         lease_token IS NOT NULL AND attempt_started_at IS NULL AS reclaimed,
         attempt_started_at AS lost_started_at, next_attempt_at AS due_at
    FROM notifications
   WHERE status = 'PENDING' AND held_since IS NULL AND channel = $7::text
     AND next_attempt_at <= now()
   ORDER BY next_attempt_at
   LIMIT $1
     FOR UPDATE SKIP LOCKED
), moved AS (
  UPDATE notifications AS n
     SET attempts = CASE WHEN due.lost THEN n.attempts + 1 ELSE n.attempts END,
         status = CASE WHEN due.lost AND ($4::float8[])[n.attempts + 1] IS NULL THEN 'DEAD'
                       ELSE n.status END,
         next_attempt_at = CASE
           WHEN NOT due.lost THEN now() + make_interval(secs => $2::float8 / 1000)
           WHEN ($4::float8[])[n.attempts + 1] IS NULL THEN n.next_attempt_at
           ELSE n.next_attempt_at + make_interval(secs => ($4::float8[])[n.attempts + 1] / 1000)
         END,
         lease_token = CASE WHEN due.lost THEN NULL
                            ELSE $3::text || ':' || gen_random_uuid()::text END,
         claimed_at = CASE WHEN due.lost THEN n.claimed_at ELSE now() END,
         attempt_started_at = NULL,
         last_status = CASE WHEN due.lost THEN NULL ELSE n.last_status END,
         last_error = CASE WHEN due.lost THEN $5::text ELSE n.last_error END
    FROM due, events AS e, watches AS w LEFT JOIN endpoints AS ep ON ep.id = w.endpoint_id
   WHERE n.id = due.id AND e.id = n.event_id AND w.id = n.watch_id
  RETURNING n.id AS notification_id, n.attempts, n.lease_token, n.status, due.lost,
            due.reclaimed, due.lost_started_at, due.due_at,
            -- A watch on an endpoint (migration 070) delivers to the endpoint's URL, signed with
            -- the endpoint's secrets; any other webhook watch with its own.
            CASE WHEN ep.id IS NULL THEN w.webhook_url ELSE ep.url END AS webhook_url,
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
            ep.id AS endpoint_id, ep.enabled AS endpoint_enabled,
            ep.rate_limit_per_second AS endpoint_rate_limit_per_second,
            ep.max_concurrency AS endpoint_max_concurrency,
            CASE WHEN n.channel = 'telegram'
                 THEN (SELECT a.telegram_chat_id FROM accounts AS a WHERE a.id = n.account_id)
            END AS chat_id,
            e.id, e.account_id, e.watch_id, e.network, e.direction, e.asset, e.tx_id,
            e.event_index, e.block_number, e.block_timestamp, e.from_address, e.to_address,
            e.amount_raw::text AS amount_raw, e.contract, e.proof, e.created_at, e.metadata
), lost AS (
  -- started_at: when the attempt began (attempt_started_at); duration_ms: from then to the
  -- lease's expiry (unknown how long the attempt really ran); error_class 'lost' ($6, migration
  -- 009); nothing known of a request or an answer.
  INSERT INTO attempts (notification_id, attempt, started_at, duration_ms, http_status, error,
                        error_class, lease_expired_at, watch_id, endpoint_id)
  SELECT notification_id, attempts, lost_started_at,
         GREATEST(0, round(extract(epoch FROM due_at - lost_started_at) * 1000)),
         NULL, $5::text, $6::text, due_at, watch_id, endpoint_id
    FROM moved
   WHERE lost
  ON CONFLICT (notification_id, attempt) WHERE NOT duplicate AND NOT throttled DO NOTHING
)
SELECT * FROM moved ORDER BY due_at`;

/** What one claim statement did. */
export interface ClaimResult {
  /** The notifications claimed (leased), oldest due first. */
  claimed: ClaimedNotification[];
  /**
   * Lost attempts of live notifications recorded (leases found expired), DEAD ones included:
   * what tronwatch_deliveries_total counts. Test-mode ones (issue 32) are in `test` only, as in
   * complete.ts's CompleteOutcome, so that they never count in a live metric.
   */
  lost: number;
  /** Of `lost`, those that were the sixth attempt: now DEAD. */
  dead: number;
  /** Lost attempts of test-mode notifications recorded (DEAD ones included): no live metric. */
  test: number;
  /**
   * Of `claimed`, those whose previous lease ran out before its attempt started (a worker died
   * holding them queued): taken again, no attempt counted.
   */
  reclaimed: number;
}

/**
 * The claim statement and its parameters for {@link claimDue}'s options (exported for the plan
 * test and the benchmark, which EXPLAIN it).
 * @throws RangeError for a bad scheduleScale.
 */
export function claimStatement(opts: {
  limit: number;
  leaseMs: number;
  owner: string;
  scheduleScale?: number;
  channel?: 'webhook' | 'telegram';
}): { text: string; values: unknown[] } {
  const scale = opts.scheduleScale ?? 1;
  const delays = RETRY_DELAYS_MS.map((_, i) => nextDelayMs(i + 1, scale));
  return {
    text: CLAIM_SQL,
    values: [
      opts.limit,
      opts.leaseMs,
      opts.owner,
      delays,
      WORKER_LOST_ERROR,
      WORKER_LOST_CLASS,
      opts.channel ?? 'webhook',
    ],
  };
}

/**
 * Claim up to `limit` due notifications of one channel and lease them for `leaseMs`; in the same
 * statement, record as lost attempts those of the due rows whose previous lease ran out (see the
 * file's comment). Lost attempts take places in `limit`.
 * @param limit maximum rows, ≥ 1 (the worker passes its free slots).
 * @param leaseMs lease duration, ms (see {@link leaseMs}).
 * @param owner a short worker id, prefixed to each lease token (visible when debugging).
 * @param scheduleScale multiplier of the retry delays after a lost attempt, > 0; default 1 (SPEC;
 *   config.delivery.scheduleScale, as for failed attempts in complete.ts).
 * @param channel which notifications: 'webhook' (default) or 'telegram' (chat deliveries).
 * @returns the claimed notifications and the lost attempts recorded (live ones in `lost`/`dead`,
 *   test-mode ones in `test`); `claimed` is [] when none is due.
 * @throws the database error (the worker logs it, backs off and claims again); RangeError for a
 *   bad scheduleScale.
 */
export async function claimDue(
  db: Queryable,
  opts: {
    limit: number;
    leaseMs: number;
    owner: string;
    scheduleScale?: number;
    channel?: 'webhook' | 'telegram';
  },
): Promise<ClaimResult> {
  const { text, values } = claimStatement(opts);
  const { rows } = await db.query<ClaimRow>(text, values);
  const result: ClaimResult = { claimed: [], lost: 0, dead: 0, test: 0, reclaimed: 0 };
  for (const r of rows) {
    if (r.lost && !isLivemode(r.network)) {
      result.test++;
    } else if (r.lost) {
      result.lost++;
      if (r.status === 'DEAD') result.dead++;
    } else {
      if (r.reclaimed) result.reclaimed++;
      result.claimed.push(toClaimed(r));
    }
  }
  return result;
}

/**
 * Mark claimed notifications as attempted, just before their requests are sent (migration 014):
 * from now on a lease that runs out on one of them is a lost attempt that counts (see the file's
 * comment). One statement for the whole batch, guarded by each claim's lease token.
 * @param claims the claims about to be sent (notification id and the lease token of the claim).
 * @returns the ids of those marked: the claims still held. A claim missing from it was taken over
 *   (its lease ran out and another worker claimed it) or completed: it must not be sent.
 * @throws the database error (the worker keeps the claims queued and tries again, or releases them).
 */
export async function startClaims(
  db: Queryable,
  claims: ReadonlyArray<{ notificationId: string; leaseToken: string }>,
): Promise<Set<string>> {
  if (claims.length === 0) return new Set();
  const { rows } = await db.query<{ id: string }>(
    `UPDATE notifications AS n SET attempt_started_at = now()
       FROM unnest($1::text[], $2::text[]) AS r(id, token)
      WHERE n.id = r.id AND n.lease_token = r.token AND n.status = 'PENDING'
     RETURNING n.id`,
    [claims.map((c) => c.notificationId), claims.map((c) => c.leaseToken)],
  );
  return new Set(rows.map((r) => r.id));
}

/**
 * Claim up to `limit` due webhook notifications and lease them for `leaseMs` ({@link claimDue},
 * without its count of lost attempts).
 * @param limit maximum rows, ≥ 1.
 * @param leaseMs lease duration, ms (see {@link leaseMs}).
 * @param owner a short worker id, prefixed to each lease token (visible when debugging).
 * @param scheduleScale as for {@link claimDue}; default 1 (SPEC).
 * @returns the claimed notifications, oldest due first; [] when none is due.
 * @throws the database error (the worker logs it, backs off and claims again).
 */
export async function claimNotifications(
  db: Queryable,
  opts: { limit: number; leaseMs: number; owner: string; scheduleScale?: number },
): Promise<ClaimedNotification[]> {
  return (await claimDue(db, opts)).claimed;
}

/** A stored secret's columns as an EncryptedSecret; null when either is NULL. */
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

function toClaimed(r: ClaimRow): ClaimedNotification {
  return {
    notificationId: r.notification_id,
    attempts: r.attempts,
    leaseToken: r.lease_token,
    webhookUrl: r.webhook_url,
    chatId: r.chat_id,
    secret: encrypted(r.secret_key_id, r.secret_ciphertext),
    previousSecret: encrypted(r.previous_secret_key_id, r.previous_secret_ciphertext),
    endpoint:
      r.endpoint_id === null
        ? null
        : {
            id: r.endpoint_id,
            enabled: r.endpoint_enabled !== false,
            ratePerSecond: r.endpoint_rate_limit_per_second,
            maxConcurrency: r.endpoint_max_concurrency,
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
      proof: r.proof,
      created_at: r.created_at,
      metadata: r.metadata ?? null,
    },
  };
}
