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
 *
 * The head is a provider's claim, and one provider alone (quorum 1) can claim a head up to the
 * plausibility slack past the real one (tron/node-group.ts HEAD_SLACK_BLOCKS, ~10 blocks), which
 * would activate every watch created then past the transfers of the blocks in between (issue 36
 * item 4). With the light client on, the ingester also stores the newest block whose SR signature
 * it checked (`verified_block_number`, migration 094): that block exists, so the chain's head is
 * at least there, and no provider can raise it without an SR's key. The activation is then
 * GREATEST(verified, head − ACTIVATION_WINDOW_BLOCKS) (activationBlock): a head claim moves it
 * only down to the verified block (a watch activating a block or two early reports a transfer
 * made just before it existed: accepted), never past the chain; while the ingester is behind
 * (catching up, stalled, stopped) the claim keeps it within ACTIVATION_WINDOW_BLOCKS (60 s on
 * mainnet) below the head instead of at an old verified block. Without the light client (no
 * verified block): the stored head, as the group chose it (GroupHeads.activation).
 */
import { isLivemode } from '../common/environment.js';
import type { Queryable } from '../db/pool.js';
import { ACTIVATION_WINDOW_BLOCKS } from '../tron/node-group.js';

/**
 * Record the heads just observed, as they are (upsert). They come from the node group
 * (tron/node-group.ts getHeads: the k-th highest of the providers' plausible solidified heads, and
 * as the head its `activation`, the lowest plausible head near the highest), so a lower head
 * replaces a higher one: a wrong head that once got through is not kept forever.
 * @param heads.verified the newest block whose SR signature the light client checked (the
 *   ingester with the light client): kept if higher than the stored one (a verified block exists,
 *   so it never has to be taken back). Undefined: the stored one stays (the API role, which has no
 *   light client, and an ingester that has not read a block yet: a head claim never overwrites
 *   it). Null: cleared (the ingester without the light client: activation is the head, as before).
 * @returns the stored `observed_at` (the database's time of the observation).
 */
export async function saveChainHead(
  db: Queryable,
  network: string,
  heads: { solidified: number; head: number; verified?: number | null | undefined },
): Promise<Date> {
  const { rows } = await db.query<{ observed_at: Date }>(
    `INSERT INTO chain_head (network, solidified_block_number, head_block_number, observed_at,
                             verified_block_number)
     VALUES ($1, $2, $3, now(), $4)
     ON CONFLICT (network) DO UPDATE SET
       solidified_block_number = EXCLUDED.solidified_block_number,
       head_block_number = EXCLUDED.head_block_number,
       observed_at = now(),
       verified_block_number = CASE WHEN $5 THEN GREATEST(chain_head.verified_block_number, $4)
                                    WHEN $6 THEN NULL
                                    ELSE chain_head.verified_block_number END
     RETURNING observed_at`,
    [
      network,
      heads.solidified,
      heads.head,
      heads.verified ?? null,
      typeof heads.verified === 'number',
      heads.verified === null,
    ],
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
 * at most; with a verified block stored (the light client: module doc),
 * GREATEST(verified, that head − ACTIVATION_WINDOW_BLOCKS), so that no head claim can push it
 * past the chain. The elapsed time is measured on ONE clock, the database's (`clock_timestamp() -
 * observed_at`, both PostgreSQL's): an API host whose clock runs ahead of the database's would
 * otherwise push the activation block up by a block per interval of skew and make the watch miss
 * its first transfers (DESIGN invariant 5: clock skew cannot drop a transfer).
 *
 * Why the verified block bounds it from both sides: it was read (its signature checked) before
 * this statement, so every block produced after the watch existed is above it, and the watch
 * misses none of their transfers; a claimed head can exceed the real one by at most the
 * plausibility slack plus the extrapolation (HEAD_SLACK_BLOCKS + 1 + MAX_EXTRAPOLATED_BLOCKS = 14
 * < ACTIVATION_WINDOW_BLOCKS), so head − ACTIVATION_WINDOW_BLOCKS is below the real head too.
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
    `SELECT (CASE WHEN verified_block_number IS NULL THEN head
                  ELSE GREATEST(verified_block_number, head - $5) END)::int8 AS block
       FROM (SELECT verified_block_number,
                    head_block_number
                      + CASE WHEN age_ms > $2 THEN LEAST(floor(age_ms / $2), $3) ELSE 0 END AS head
               FROM (SELECT head_block_number, verified_block_number,
                            extract(epoch FROM LEAST(clock_timestamp(), COALESCE($4::timestamptz,
                              clock_timestamp())) - observed_at) * 1000 AS age_ms
                       FROM chain_head WHERE network = $1) o) h`,
    [network, blockIntervalMs, MAX_EXTRAPOLATED_BLOCKS, asOf ?? null, ACTIVATION_WINDOW_BLOCKS],
  );
  const row = rows[0];
  // The test environment (issue 32) without a testnet node has no chain to follow: its watches
  // match only the deposits triggered through the API, so they are active from block 0.
  if (!row && !isLivemode(network)) return 0;
  if (!row) throw new ChainHeadUnknownError(network);
  return Number(row.block);
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
 * Record a block the ingester read at the node's head and the light client accepted (its SR
 * signature checked: ingest/loop.ts with the finality gate), in one statement: it is the newest
 * verified block (`verified_block_number`, never lowered), and a newer full-node head when it is
 * at or above the stored one (`observed_at` moves to now, so activationBlock starts extrapolating
 * from here; the solidified head stays as last polled). A lower block leaves the head as it is
 * (a provider's higher claim stays until the next poll replaces it: activationBlock bounds it by
 * this verified block). No row yet: nothing.
 */
export async function saveHead(db: Queryable, network: string, head: number): Promise<void> {
  await db.query(
    `UPDATE chain_head SET
       verified_block_number = GREATEST(verified_block_number, $2),
       observed_at = CASE WHEN head_block_number <= $2 THEN now() ELSE observed_at END,
       head_block_number = GREATEST(head_block_number, $2)
      WHERE network = $1`,
    [network, head],
  );
}
