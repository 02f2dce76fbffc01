/**
 * The block loop (DESIGN data flow): cursor → fetch solidified block → extract → match → one
 * transaction. Blocks are committed strictly in order; the cursor only moves with a commit, so a
 * crash at any instant resumes at the first uncommitted block (nothing lost, nothing twice).
 *
 * Head polling (`/wallet/getnodeinfo`, both heads in one request) is paced by the chain: the
 * solidified head advances once per block interval (3 s on mainnet), so when caught up the loop
 * polls again one interval after it last saw the head advance, a little earlier each time
 * (`creep`, 25 ms per hit) until a poll comes too early, then every `missGapMs` until the head
 * moves. That keeps the delay between a block's solidification and its commit to tens of ms while
 * sending ~1 request per second at mainnet's pace (one head poll, one block, one infos request
 * per block, plus an early miss every few blocks). While catching up it fetches
 * `TRON_NODE_CONCURRENCY` blocks ahead and refreshes the heads once per interval, so a watch
 * created meanwhile still gets a fresh activation head.
 *
 * Failures (node or database) never skip a block. Each is classified where it was born
 * (stall.ts reads the `retryable` flags, CONVENTIONS habit 5):
 * - transient (network, timeout, 429/5xx, empty answers, retryable SQLSTATEs, the cursor moved
 *   by another ingester): logged as a warning per attempt, retried after a jittered backoff
 *   (capped at 10 s); the loop resumes by itself when the dependency returns.
 * - permanent (a malformed block or transaction-info answer, one that cannot be extracted, a
 *   4xx, a bug): the block stalls. Logged ONCE per block at error level ('ingest stalled',
 *   `block_number`, `reason`), recorded on the cursor row for GET /healthz (stall.ts), shown as
 *   tronwatch_ingest_stalled_block, and retried every `permanentRetryMs` (default 10 block
 *   intervals, 30 s on mainnet), so a fixed node or a fixed bug resumes by itself ('ingest
 *   resumed'). The commit that gets the block through clears the stall.
 *
 * Leadership terms: run() is one term (leader.ts calls it once per term on the same Ingester).
 * Each term starts by forgetting the head-sighting times of the previous one, and every cursor
 * (re)read drops those at or below the cursor: blocks another leader committed (or that lie
 * below the first cursor) would otherwise keep their entries forever.
 */

import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { backoffDelay, sleep } from '../common/retry.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { extractTransfers } from '../tron/extract.js';
import type { ChainHeads, NodeClient } from '../tron/node-client.js';
import { fetchBlocks } from '../tron/scan.js';
import { saveChainHead } from './chain-head.js';
import { type CommitHooks, commitBlock, ensureCursor } from './commit.js';
import { classifyIngestFailure, clearStall, recordStall, stallReason } from './stall.js';

export interface IngesterOptions {
  db: Db;
  client: NodeClient;
  config: Pick<Config, 'network' | 'ingest' | 'node'>;
  logger: Logger;
  /** Called after each commit that created notifications (wakes the delivery worker). */
  onEvents?: (count: number) => void;
  /** Called after every committed block (metrics, tests, the demo). */
  onBlock?: (info: {
    blockNumber: number;
    transfers: number;
    events: number;
    solidifiedAtMs: number;
  }) => void;
  hooks?: CommitHooks;
  /** Chain gauges and ingest counters (src/common/metrics.ts). Default: none. */
  metrics?: Metrics;
  /** Blocks per fetch window while catching up. Default 100. */
  window?: number;
  /**
   * Delay between attempts at a block that failed permanently, ms. Default 10 block intervals
   * (30 s on mainnet): slow enough not to hammer a node that answers garbage or to flood the
   * logs, quick enough to resume soon after a fix.
   */
  permanentRetryMs?: number;
}

/** Running totals, read by metrics and benchmarks. */
export interface IngestStats {
  blocks: number;
  transfers: number;
  events: number;
  cursor: number;
  solidified: number;
  head: number;
  headPolls: number;
}

export class Ingester {
  readonly stats: IngestStats = {
    blocks: 0,
    transfers: 0,
    events: 0,
    cursor: -1,
    solidified: -1,
    head: -1,
    headPolls: 0,
  };
  private readonly o: IngesterOptions;
  /**
   * Local time at which each solidified head was first seen (latency measurements); an entry
   * lives until its block is committed, and the map is emptied when a term starts (run()).
   */
  private readonly seenAt = new Map<number, number>();
  /** The block failing permanently, as last logged and recorded (undefined: not stalled). */
  private stall: { block: number; reason: string; recorded: boolean } | undefined;
  private lastAdvanceAt = 0;
  private creepMs = 0;

  constructor(opts: IngesterOptions) {
    this.o = opts;
  }

  /**
   * Head-sighting times held (blocks seen solidified and not committed by this term yet): at
   * most the blocks between the cursor and the solidified head (tests, diagnostics).
   */
  get heldSightings(): number {
    return this.seenAt.size;
  }

  private get interval(): number {
    return this.o.config.ingest.blockIntervalMs;
  }

  private get permanentRetryMs(): number {
    return this.o.permanentRetryMs ?? 10 * this.interval;
  }

  /** Poll both heads, remember when the solidified head advanced, store them for the API. */
  private async pollHeads(signal: AbortSignal): Promise<ChainHeads> {
    const heads = await this.o.client.getHeads(signal);
    this.stats.headPolls++;
    const now = Date.now();
    if (heads.solidified > this.stats.solidified) {
      for (
        let n = Math.max(this.stats.solidified + 1, heads.solidified - 1000);
        n <= heads.solidified;
        n++
      ) {
        this.seenAt.set(n, now);
      }
      this.stats.solidified = heads.solidified;
      this.o.metrics?.chainHeads(heads.solidified);
      this.lastAdvanceAt = now;
    }
    this.stats.head = Math.max(this.stats.head, heads.head);
    await saveChainHead(this.o.db, this.o.config.network, heads);
    return heads;
  }

  /** Wait for the solidified head to pass `cursor` (see module doc for the pacing). */
  private async waitForNextHead(cursor: number, signal: AbortSignal): Promise<void> {
    const missGapMs = Math.max(10, Math.min(100, Math.floor(this.interval / 10)));
    let nextAt = this.lastAdvanceAt + this.interval - this.creepMs;
    let missed = false;
    while (!signal.aborted) {
      const wait = nextAt - Date.now();
      if (wait > 0) await sleep(wait, signal);
      if (signal.aborted) return;
      const heads = await this.pollHeads(signal);
      if (heads.solidified > cursor) {
        this.creepMs = missed ? 0 : Math.min(this.creepMs + 25, Math.floor(this.interval / 3));
        return;
      }
      missed = true;
      nextAt = Date.now() + missGapMs;
    }
  }

  private async firstBlock(signal: AbortSignal): Promise<number> {
    if (this.o.config.ingest.startBlock !== undefined) return this.o.config.ingest.startBlock;
    const heads = await this.pollHeads(signal);
    return heads.solidified;
  }

  /**
   * Run until `signal` aborts. Resolves after the block in progress is committed or abandoned
   * (an abandoned block's transaction is rolled back; the next run starts with it).
   */
  async run(signal: AbortSignal): Promise<void> {
    const { db, client, logger } = this.o;
    const network = this.o.config.network;
    // A new term: sightings of the previous one are of blocks another leader may have committed.
    this.seenAt.clear();
    let failures = 0;
    let cursor: number | undefined;
    while (!signal.aborted) {
      try {
        if (cursor === undefined) {
          cursor = (await ensureCursor(db, network, await this.firstBlock(signal))).block_number;
          this.stats.cursor = cursor;
          for (const n of this.seenAt.keys()) if (n <= cursor) this.seenAt.delete(n); // committed
          this.o.metrics?.chainCursor(cursor);
          this.o.metrics?.ingestStall(this.stall?.block);
          logger.info({ block_number: cursor + 1 }, 'ingest starting');
        }
        if (cursor >= this.stats.solidified) {
          if (this.stats.solidified < 0) await this.pollHeads(signal);
          else await this.waitForNextHead(cursor, signal);
          if (this.stall) await this.resumed(false);
          failures = 0;
          continue;
        }
        const to = Math.min(this.stats.solidified, cursor + (this.o.window ?? 100));
        let lastPoll = Date.now();
        for await (const b of fetchBlocks(
          client,
          cursor + 1,
          to,
          this.o.config.node.concurrency,
          signal,
        )) {
          const transfers = extractTransfers(b.block, b.infos);
          const r = await commitBlock(db, network, b.ref, transfers, this.o.hooks);
          cursor = b.ref.number;
          this.stats.cursor = cursor;
          this.stats.blocks++;
          this.stats.transfers += transfers.length;
          this.stats.events += r.events;
          this.o.metrics?.blockCommitted({
            blockNumber: cursor,
            timestampMs: b.ref.timestamp,
            transfers,
            events: r.events,
          });
          if (r.events > 0) this.o.onEvents?.(r.events);
          this.o.onBlock?.({
            blockNumber: cursor,
            transfers: transfers.length,
            events: r.events,
            solidifiedAtMs: this.seenAt.get(cursor) ?? Date.now(),
          });
          this.seenAt.delete(cursor);
          if (this.stall) await this.resumed(true);
          failures = 0;
          if (signal.aborted) break;
          if (Date.now() - lastPoll >= this.interval) {
            lastPoll = Date.now();
            await this.pollHeads(signal); // fresh activation head while catching up
          }
        }
      } catch (err) {
        if (signal.aborted) break;
        failures++;
        // The block that failed: the one after the last committed (blocks are yielded in order).
        const known = cursor ?? this.stats.cursor;
        cursor = undefined; // re-read: another ingester may have moved it
        const cls = classifyIngestFailure(err);
        this.o.metrics?.ingestFailed(cls);
        if (cls === 'permanent') {
          await this.stalled(known >= 0 ? known + 1 : undefined, err, failures);
          await sleep(this.permanentRetryMs, signal);
          continue;
        }
        const delay = backoffDelay(failures, { baseMs: 200, capMs: 10_000 });
        logger.warn(
          {
            err: err instanceof Error ? err.message : String(err),
            attempt: failures,
            delay_ms: delay,
          },
          'ingest step failed; retrying the same block',
        );
        await sleep(delay, signal);
      }
    }
    logger.info({ block_number: this.stats.cursor }, 'ingest stopped');
  }

  /**
   * A permanent failure at `block` (undefined when no cursor was ever read): log it once per
   * block, record it on the cursor row (again when the reason changes or the write failed), and
   * show it in the metrics. Never throws: a database that is down is retried on the next attempt.
   */
  private async stalled(block: number | undefined, err: unknown, attempt: number): Promise<void> {
    const { logger, db } = this.o;
    const reason = stallReason(err);
    const retryMs = this.permanentRetryMs;
    if (block === undefined || this.stall?.block !== block) {
      logger.error(
        { block_number: block, reason, retry_in_ms: retryMs },
        'ingest stalled: the block failed for a reason retrying cannot fix; retrying it slowly, never skipping it',
      );
      if (block === undefined) return;
      this.stall = { block, reason, recorded: false };
      this.o.metrics?.ingestStall(block);
    } else {
      logger.debug({ block_number: block, reason, attempt }, 'ingest still stalled');
      if (this.stall.reason !== reason) this.stall = { block, reason, recorded: false };
    }
    if (this.stall.recorded) return;
    try {
      // false: the cursor is no longer at block - 1 (another leader); the next attempt re-reads it.
      this.stall.recorded = await recordStall(db, this.o.config.network, block, reason);
    } catch (e) {
      logger.warn(
        { block_number: block, err: e instanceof Error ? e.message : String(e) },
        'ingest stall: could not record it in the database; trying again on the next attempt',
      );
    }
  }

  /**
   * The stalled step went through: forget the stall. After a commit the database record is
   * already gone (the commit cleared it); otherwise clear it here.
   * @throws the database error of that clear (the loop retries as for any step).
   */
  private async resumed(committed: boolean): Promise<void> {
    const s = this.stall;
    if (!s) return;
    if (!committed) await clearStall(this.o.db, this.o.config.network);
    this.stall = undefined;
    this.o.metrics?.ingestStall(undefined);
    this.o.logger.info({ block_number: s.block }, 'ingest resumed after a stall');
  }
}
