/**
 * A fresh chain head for a watch about to be created or resumed (issue "Pacing under stalls"
 * item 3): the head chain-head.ts stores is polled once a minute by the ingester and extrapolated
 * in between, which activates a watch past the chain when the chain halts (or a node's head stands
 * still). So before activation the API asks the node group for the heads itself when the stored
 * observation is older than one block interval: at most one poll per interval per process,
 * concurrent callers sharing it, within REFRESH_DEADLINE_MS. A poll that fails or times out is
 * logged at debug level and ignored: activation then extrapolates the stored head by a few blocks
 * at most (MAX_EXTRAPOLATED_BLOCKS).
 *
 * The group's heads are the k-th highest plausible ones (tron/node-group.ts); the cursor's last
 * committed block, read first, bounds what is plausible.
 */
import type { Logger } from '../common/logger.js';
import type { Queryable } from '../db/pool.js';
import type { NodeGroup } from '../tron/node-group.js';
import { saveChainHead } from './chain-head.js';
import { readCursor } from './commit.js';

/** The longest a watch's creation waits for a fresh head, ms. */
export const REFRESH_DEADLINE_MS = 2_000;

export class HeadRefresher {
  private inflight: Promise<void> | undefined;
  /** performance.now() of the last poll started (0: none). */
  private lastPollAt = 0;
  /** Polls sent (tests, metrics). */
  polls = 0;

  constructor(
    private readonly o: {
      db: Queryable;
      network: string;
      group: NodeGroup;
      blockIntervalMs: number;
      logger: Logger;
    },
  ) {}

  /**
   * Make the stored head at most one block interval old, if a node answers within
   * REFRESH_DEADLINE_MS. Never throws.
   */
  async refresh(): Promise<void> {
    if (this.inflight) return this.inflight;
    if (performance.now() - this.lastPollAt < this.o.blockIntervalMs) return;
    this.inflight = this.poll().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  private async poll(): Promise<void> {
    const { db, network, group, logger } = this.o;
    try {
      const { rows } = await db.query<{ fresh: boolean }>(
        `SELECT clock_timestamp() - observed_at < make_interval(secs => $2::float8 / 1000) AS fresh
           FROM chain_head WHERE network = $1`,
        [network, this.o.blockIntervalMs],
      );
      if (rows[0]?.fresh) return;
      this.lastPollAt = performance.now();
      this.polls++;
      const cursor = await readCursor(db, network);
      if (cursor?.block_timestamp) {
        group.noteCommitted(cursor.block_number, cursor.block_timestamp.getTime());
      }
      const heads = await group.getHeads(AbortSignal.timeout(REFRESH_DEADLINE_MS));
      await saveChainHead(db, network, heads);
    } catch (err) {
      logger.debug(
        { err: err instanceof Error ? err.message : String(err) },
        'fresh chain head for a watch: no answer; activating on the stored head',
      );
    }
  }
}
