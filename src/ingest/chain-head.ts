/**
 * The chain heads as tronwatch last saw them (table chain_head, written by the ingester on every
 * head poll) and the activation block of a new watch (DESIGN invariant 5): the newest block the
 * node had produced, solidified or not, when the watch was created. The watch matches blocks
 * strictly above it, so no transfer that happened before the watch existed is reported, on live
 * chains and on replayed ones alike (block numbers, not wall-clock time).
 *
 * The stored head is at most one poll old while the ingester runs, and a watch's creation asks
 * for a fresh one (head-refresh.ts). When it is older all the same (no node answered) the head is
 * extrapolated by the elapsed time over the block interval, by a few blocks at most
 * (MAX_EXTRAPOLATED_BLOCKS): the chain normally produces one block per interval, but may halt.
 */
import { isLivemode } from '../common/environment.js';
import type { Queryable } from '../db/pool.js';

/**
 * Record the heads just observed, as they are (upsert). They come from the node group
 * (tron/node-group.ts getHeads: the k-th highest of the providers' plausible solidified heads, and
 * as the head its `activation`, the lowest plausible head near the highest), so a lower head
 * replaces a higher one: a wrong head that once got through is not kept forever.
 * @returns the stored `observed_at` (the database's time of the observation).
 */
export async function saveChainHead(
  db: Queryable,
  network: string,
  heads: { solidified: number; head: number },
): Promise<Date> {
  const { rows } = await db.query<{ observed_at: Date }>(
    `INSERT INTO chain_head (network, solidified_block_number, head_block_number, observed_at)
     VALUES ($1, $2, $3, now())
     ON CONFLICT (network) DO UPDATE SET
       solidified_block_number = EXCLUDED.solidified_block_number,
       head_block_number = EXCLUDED.head_block_number,
       observed_at = now()
     RETURNING observed_at`,
    [network, heads.solidified, heads.head],
  );
  const row = rows[0];
  if (!row) throw new Error('chain_head upsert returned no row');
  return row.observed_at;
}

/** No head has ever been observed for this network: the ingester has not run yet. */
export class ChainHeadUnknownError extends Error {
  readonly retryable = true;
  constructor(network: string) {
    super(`the ${network} chain head is not known yet (is the ingester running?)`);
    this.name = 'ChainHeadUnknownError';
  }
}

/**
 * How far past the last reported head a new watch's activation block may be extrapolated without
 * a fresh head, blocks (9 s on mainnet). Watch creation asks for a fresh head first
 * (head-refresh.ts), so this only matters when no node answers then: a chain that halted (or a
 * node whose head stands still) must not make a watch activate at a block the chain has not
 * produced, whose transfers, made after the watch was created, would never be matched. The cost of
 * the cap: an API whose head is older than this may activate a watch up to (age / interval − 3)
 * blocks early, reporting transfers made just before it existed rather than missing any after.
 */
export const MAX_EXTRAPOLATED_BLOCKS = 3;

/**
 * The activation block for a watch created now: the stored full-node head, extrapolated by
 * elapsed time when the observation is older than one block interval, by MAX_EXTRAPOLATED_BLOCKS
 * at most. The elapsed time is measured on ONE clock, the database's (`clock_timestamp() -
 * observed_at`, both PostgreSQL's): an API host whose clock runs ahead of the database's would
 * otherwise push the activation block up by a block per interval of skew and make the watch miss
 * its first transfers (DESIGN invariant 5: clock skew cannot drop a transfer).
 * @param blockIntervalMs the chain's block interval (3000 on mainnet).
 * @param asOf the database time at which the caller established that the stored head was fresh
 *   (head-refresh.ts): the head's age is measured up to it instead of up to this statement, so the
 *   time spent between the two never extrapolates a halted chain. Absent: this statement's time.
 * @returns a block number (int8).
 * @throws ChainHeadUnknownError when no head was ever stored (the test environment's network
 *   without one: 0, its watches only see triggered deposits).
 */
export async function activationBlock(
  db: Queryable,
  network: string,
  blockIntervalMs: number,
  asOf?: Date,
): Promise<number> {
  const { rows } = await db.query<{ block: number }>(
    `SELECT (head_block_number
             + CASE WHEN age_ms > $2 THEN LEAST(floor(age_ms / $2), $3) ELSE 0 END)::int8 AS block
       FROM (SELECT head_block_number,
                    extract(epoch FROM LEAST(clock_timestamp(), COALESCE($4::timestamptz,
                      clock_timestamp())) - observed_at) * 1000 AS age_ms
               FROM chain_head WHERE network = $1) h`,
    [network, blockIntervalMs, MAX_EXTRAPOLATED_BLOCKS, asOf ?? null],
  );
  const row = rows[0];
  // The test environment (issue 32) without a testnet node has no chain to follow: its watches
  // match only the deposits triggered through the API, so they are active from block 0.
  if (!row && !isLivemode(network)) return 0;
  if (!row) throw new ChainHeadUnknownError(network);
  return row.block;
}

/**
 * Record a newer solidified head alone (the ingester, after a block it asked for directly):
 * the full-node head and `observed_at` stay as last polled, so activationBlock keeps
 * extrapolating the head from that poll's time instead of taking it as fresh. No row yet: nothing.
 */
export async function saveSolidifiedHead(
  db: Queryable,
  network: string,
  solidified: number,
): Promise<void> {
  await db.query(
    `UPDATE chain_head SET solidified_block_number = $2
      WHERE network = $1 AND solidified_block_number < $2`,
    [network, solidified],
  );
}

/**
 * Record a newer full-node head alone (the ingester with the finality gate, after it read block
 * `head` at the node's head): the node had that block now, so `observed_at` moves to now and
 * activationBlock starts extrapolating from here; the solidified head stays as last polled. A
 * lower head leaves the row as it is. No row yet: nothing.
 */
export async function saveHead(db: Queryable, network: string, head: number): Promise<void> {
  await db.query(
    `UPDATE chain_head SET head_block_number = $2, observed_at = now()
      WHERE network = $1 AND head_block_number <= $2`,
    [network, head],
  );
}
