/**
 * Ingest stalls: the block after the cursor failed for a reason no retry can fix, so the cursor
 * cannot move (DESIGN invariant 2 forbids skipping it). The ingester keeps retrying that block
 * slowly (a fixed node or a fixed bug resumes by itself) and records the stall on the cursor row
 * (chain_cursor.stalled_block / stalled_reason / stalled_since, migration 007), where every API
 * replica reads it for GET /healthz whichever process ingests. The commit that moves the cursor
 * clears it in its own transaction (commit.ts), so a stall never outlives the block, even when
 * another leader gets the block through.
 *
 * Which failures are permanent is decided where each error is born (CONVENTIONS habit 5): a
 * `retryable` flag (NodeError, MalformedBlockError, …) or the database's SQLSTATE
 * (db/errors.ts); this module only reads them.
 */
import { isRetryable } from '../common/retry.js';
import { isRetryableDbError } from '../db/errors.js';
import type { Queryable } from '../db/pool.js';
import { CursorMovedError } from './commit.js';

/** Longest stall reason stored and shown, characters (node answers are quoted at most 200). */
export const STALL_REASON_MAX = 300;

/**
 * How an ingest step failure is handled:
 * - `transient`: a network or node hiccup, a retryable database error, or the cursor moved by
 *   another ingester (CursorMovedError: the loop re-reads the cursor, nothing is stuck); retried
 *   with backoff.
 * - `permanent`: anything else: a malformed or inconsistent answer that fails the same way every
 *   time, a 4xx from the node, an error without a retryable flag (a bug). The block stalls.
 */
export type IngestFailureClass = 'transient' | 'permanent';

/** Classify an ingest step failure (see {@link IngestFailureClass}). */
export function classifyIngestFailure(err: unknown): IngestFailureClass {
  if (isRetryable(err) || isRetryableDbError(err) || err instanceof CursorMovedError) {
    return 'transient';
  }
  return 'permanent';
}

/** A stall as stored: the block that cannot be committed, why, and since when. */
export interface IngestStall {
  /** The block number that fails (the cursor is at block - 1). */
  block: number;
  /** The last failure's message, at most STALL_REASON_MAX characters. */
  reason: string;
  /** When this block first failed permanently (database clock). */
  since: Date;
}

/** `message` cut to STALL_REASON_MAX characters. */
export function stallReason(err: unknown): string {
  const m = err instanceof Error ? err.message : String(err);
  return m.length > STALL_REASON_MAX ? `${m.slice(0, STALL_REASON_MAX - 1)}…` : m;
}

/**
 * Record that `block` fails permanently. `since` keeps its value while the same block stays
 * stalled. Written only while the cursor sits at block - 1: a stale report (the block went
 * through meanwhile) changes nothing.
 * @returns true when the stall is recorded.
 */
export async function recordStall(
  db: Queryable,
  network: string,
  block: number,
  reason: string,
): Promise<boolean> {
  const { rows } = await db.query(
    `UPDATE chain_cursor
        SET stalled_since = CASE WHEN stalled_block = $2 THEN stalled_since ELSE now() END,
            stalled_block = $2, stalled_reason = $3
      WHERE network = $1 AND block_number = $2::int8 - 1
      RETURNING 1`,
    [network, block, reason],
  );
  return rows.length > 0;
}

/**
 * Forget the network's stall (the ingester made progress without a commit, e.g. a head poll
 * that failed permanently answers again). A commit clears it by itself.
 */
export async function clearStall(db: Queryable, network: string): Promise<void> {
  await db.query(
    `UPDATE chain_cursor SET stalled_block = NULL, stalled_reason = NULL, stalled_since = NULL
      WHERE network = $1 AND stalled_block IS NOT NULL`,
    [network],
  );
}

/**
 * The network's current stall, or undefined when ingest is not stalled (or has no cursor yet).
 * @throws the database error (callers decide what an unreadable state means).
 */
export async function readStall(db: Queryable, network: string): Promise<IngestStall | undefined> {
  const { rows } = await db.query<{
    stalled_block: number;
    stalled_reason: string | null;
    stalled_since: Date | string;
  }>(
    `SELECT stalled_block, stalled_reason, stalled_since FROM chain_cursor
      WHERE network = $1 AND stalled_block IS NOT NULL`,
    [network],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    block: Number(r.stalled_block),
    reason: r.stalled_reason ?? '',
    since: new Date(r.stalled_since),
  };
}
