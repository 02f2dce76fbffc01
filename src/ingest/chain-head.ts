/**
 * The chain heads as tronwatch last saw them (table chain_head, written by the ingester on every
 * head poll) and the activation block of a new watch (DESIGN invariant 5): the newest block the
 * node had produced, solidified or not, when the watch was created. The watch matches blocks
 * strictly above it, so no transfer that happened before the watch existed is reported, on live
 * chains and on replayed ones alike (block numbers, not wall-clock time).
 *
 * The stored head is at most one poll old while the ingester runs. When it is older (an API
 * replica whose ingester is down) the head is extrapolated by the elapsed time over the block
 * interval: the chain keeps producing one block per interval, and an underestimate would make
 * the watch match transfers that predate it.
 */
import type { Queryable } from '../db/pool.js';

export interface ChainHeadRow {
  solidified_block_number: number;
  head_block_number: number;
  observed_at: Date;
}

/** Record the heads just observed (upsert; a lower head never replaces a higher one). */
export async function saveChainHead(
  db: Queryable,
  network: string,
  heads: { solidified: number; head: number },
): Promise<void> {
  await db.query(
    `INSERT INTO chain_head (network, solidified_block_number, head_block_number, observed_at)
     VALUES ($1, $2, $3, now())
     ON CONFLICT (network) DO UPDATE SET
       solidified_block_number = GREATEST(chain_head.solidified_block_number, EXCLUDED.solidified_block_number),
       head_block_number = GREATEST(chain_head.head_block_number, EXCLUDED.head_block_number),
       observed_at = now()`,
    [network, heads.solidified, heads.head],
  );
}

export async function readChainHead(
  db: Queryable,
  network: string,
): Promise<ChainHeadRow | undefined> {
  const { rows } = await db.query<ChainHeadRow>(
    'SELECT solidified_block_number, head_block_number, observed_at FROM chain_head WHERE network = $1',
    [network],
  );
  return rows[0];
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
 * The activation block for a watch created now: the stored full-node head, extrapolated by
 * elapsed time when the observation is older than one block interval.
 * @param blockIntervalMs the chain's block interval (3000 on mainnet).
 * @throws ChainHeadUnknownError when no head was ever stored.
 */
export async function activationBlock(
  db: Queryable,
  network: string,
  blockIntervalMs: number,
  now: Date = new Date(),
): Promise<number> {
  const row = await readChainHead(db, network);
  if (!row) throw new ChainHeadUnknownError(network);
  const age = now.getTime() - row.observed_at.getTime();
  const extra = age > blockIntervalMs ? Math.floor(age / blockIntervalMs) : 0;
  return row.head_block_number + extra;
}
