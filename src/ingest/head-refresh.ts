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
 * A refresh answers the database time at which the stored head was known to be fresh, and the
 * activation measures the head's age up to that moment (chain-head.ts activationBlock `asOf`), not
 * up to the activation's own statement: the time between the two (a transaction, a quota check,
 * a loaded host) must not extrapolate a halted chain's head by a block the chain never produced.
 *
 * The head stored is the group's activation head (tron/node-group.ts GroupHeads.activation: the
 * lowest plausible head near the k-th highest, so that one provider's high head cannot activate a
 * watch past its first transfers); the cursor's last committed block, read first, bounds what is
 * plausible.
 */
import type { Logger } from '../common/logger.js';
import type { Queryable } from '../db/pool.js';
import type { NodeGroup } from '../tron/node-group.js';
import { saveChainHead } from './chain-head.js';
import { readCursor } from './commit.js';

/** The longest a watch's creation waits for a fresh head, ms. */
export const REFRESH_DEADLINE_MS = 2_000;

export class HeadRefresher {
  private inflight: Promise<Date | undefined> | undefined;
  /** performance.now() of the last poll started (0: none). */
  private lastPollAt = 0;
  /** Polls sent (tests, metrics). */
  polls = 0;
  /** The database time the stored head was last known fresh, and performance.now() then. */
  private lastFresh: { at: Date; perf: number } | undefined;

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
   * @returns the database time (PostgreSQL's clock) at which the stored head was known to be at
   *   most one interval old: the activation's `asOf`. Undefined when no node answered (activation
   *   then extrapolates the stored head up to its own statement's time).
   */
  async refresh(): Promise<Date | undefined> {
    if (this.inflight) return this.inflight;
    if (performance.now() - this.lastPollAt < this.o.blockIntervalMs) return this.freshAsOfNow();
    this.inflight = this.poll().finally(() => {
      this.inflight = undefined;
    });
    return this.inflight;
  }

  /** The last freshness moment moved on by the time elapsed since (one clock's durations). */
  private freshAsOfNow(): Date | undefined {
    const f = this.lastFresh;
    return f ? new Date(f.at.getTime() + (performance.now() - f.perf)) : undefined;
  }

  private note(at: Date): Date {
    this.lastFresh = { at, perf: performance.now() };
    return at;
  }

  private async poll(): Promise<Date | undefined> {
    const { db, network, group, logger } = this.o;
    try {
      const { rows } = await db.query<{ fresh: boolean; at: Date }>(
        `SELECT clock_timestamp() - observed_at < make_interval(secs => $2::float8 / 1000) AS fresh,
                clock_timestamp() AS at
           FROM chain_head WHERE network = $1`,
        [network, this.o.blockIntervalMs],
      );
      const row = rows[0];
      if (row?.fresh) return row.at;
      this.lastPollAt = performance.now();
      this.polls++;
      const cursor = await readCursor(db, network);
      if (cursor?.block_timestamp) {
        group.noteCommitted(cursor.block_number, cursor.block_timestamp.getTime());
      }
      const heads = await group.getHeads(AbortSignal.timeout(REFRESH_DEADLINE_MS));
      return this.note(
        await saveChainHead(db, network, { solidified: heads.solidified, head: heads.activation }),
      );
    } catch (err) {
      logger.debug(
        { err: err instanceof Error ? err.message : String(err) },
        'fresh chain head for a watch: no answer; activating on the stored head',
      );
      return undefined;
    }
  }
}
