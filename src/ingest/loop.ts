/**
 * The block loop (DESIGN data flow): cursor → fetch solidified block (with the light client: a
 * block up to the full-node head, proven final by it) → extract → match → one transaction.
 * Blocks are committed strictly in order; the cursor only moves with a commit, so a crash at any
 * instant resumes at the first uncommitted block (nothing lost, nothing twice).
 *
 * Caught up, the loop asks for the next block itself (`NodeClient.getBlockIfSolidified`: the
 * solidity endpoint answers `{}` until the block is solidified) instead of polling the heads
 * first, so a block costs two requests (the block, its transaction infos), the floor, plus the
 * asks that come too early. The asks are timed to the chain: the solidified head advances once
 * per block interval (3 s on mainnet) on a fixed grid of slot times (a missed slot delays a block
 * by whole intervals, never shifts the grid), so after a block came the next is asked one
 * interval later, a little earlier each time (`step`, from missGap/100 and doubling every 16
 * blocks, at most missGap) until an ask comes too early; then every `missGap` (interval/30,
 * 10–100 ms: 100 ms on mainnet) until the block is there, which sets the grid again. A block is
 * thus committed tens of ms after its solidification, with one early ask every ~30 blocks
 * (2.03–2.10 requests per block measured on the replay node, 0.67–0.70/s at 3 s per block). The full-node head (watch activation,
 * invariant 5) is polled every HEAD_REFRESH_INTERVALS (20) intervals, and between polls
 * chain-head.ts extrapolates it by the elapsed time; also after an ask that came late by a whole
 * interval or more (a slow commit: blocks may be waiting), and then the catch-up below takes
 * over if they are. Before the grid is known (at start, right after a catch-up) the next block is
 * asked at once (a node ahead of us answers it: no wait), and if it is not there yet the grid is
 * searched for in two steps instead of asking every missGap (up to 30 asks at start on mainnet):
 * the block is solidified at most one interval after that first ask (the block before it was
 * solidified by then), so it is asked every √(interval × missGap) (548 ms on mainnet) until it
 * comes, and the next block, then known to come within that gap plus one interval after the last
 * miss, is asked from there every missGap: about 2 × 5.5 asks in all on mainnet. (A block's
 * timestamp does not give this grid: a block is solidified about 19 blocks, ~57 s, after its
 * timestamp on mainnet, and the replay node's slot times are not on its blocks' timestamps.)
 *
 * A block still missing one interval after its first ask is overdue (the node's solidified head
 * stands still, or the chain halted): the asks then back off, missGap doubling per ask up to one
 * interval (at most one ask per block interval however long it lasts: 395 asks for one block in
 * 40 s before), the episode is logged once and shown as chain_next_block_overdue_seconds. When the
 * block comes, a node that held blocks back usually releases them all at once: the heads are read
 * at once and the catch-up takes the rest at full speed (before, they came one per interval until
 * the next head poll, up to a minute later); the grid is then found again.
 *
 * While catching up it fetches `TRON_NODE_CONCURRENCY` blocks ahead and refreshes the heads once
 * per interval, so a watch created meanwhile still gets a fresh activation head. Every request
 * waits for the client's TRON_NODE_MAX_RPS slots (node-client.ts), which paces the catch-up.
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
 * - a block the light client refused (a bad signature, …: its provider is set aside by
 *   NodeGroup.distrust) is read again AT ONCE from the other providers, up to one retry per
 *   provider in a row, and only then treated as permanent: one lying provider listed first does
 *   not hold ingest for permanentRetryMs per block.
 *
 * With the finality gate (the light client, finality-gate.ts), blocks are read from the full
 * node's view instead, up to the providers' full-node head (NodeGroup.getBlockIfProduced caught
 * up, getFullNodeBlock catching up), on the same grid and at the same cost: the head moves once
 * per interval as the solidified head does, so the asks above are unchanged, and the block read
 * is also the head stored for watch activation (saveHead), and once the light client checked its
 * signature, the verified block no head claim can move it past (chain-head.ts; issue 36 item 4;
 * also stored for the blocks read within ACTIVATION_WINDOW_BLOCKS of the head while catching up:
 * one statement per block near the head, as at the head). Each goes to the gate and is committed
 * once the light client proved it final, that is right after the block that made it final was
 * read (about 18 blocks above it), no longer after the node solidified it. When the node switches
 * branches above the final block, the gate steps back and the heights that changed are read again
 * one at a time (`rereading`), then reading goes on above (fork following; no stall). Without
 * the gate nothing above the solidified head is read.
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
import {
  type Checkpoint,
  MAINNET_BLOCK_INTERVAL_MS,
  MAINNET_CHECKPOINT,
} from '../tron/checkpoint.js';
import { LightClientError } from '../tron/light-client/finality.js';
import { HeaderError } from '../tron/light-client/header.js';
import { saveLightClientState } from '../tron/light-client/store.js';
import type { NodeClient } from '../tron/node-client.js';
import {
  ACTIVATION_WINDOW_BLOCKS,
  type GroupHeads,
  NodeGroup,
  type VerifiedSolidifiedBlock,
} from '../tron/node-group.js';
import { fetchBlocks } from '../tron/scan.js';
import { BlockCheckError } from '../tron/verify.js';
import { saveChainHead, saveHead, saveSolidifiedHead } from './chain-head.js';
import {
  type CommitHooks,
  type CursorRow,
  commitBlock,
  ensureCursor,
  readCursor,
} from './commit.js';
import type { FinalityGate } from './finality-gate.js';
import { saveProviderStates } from './providers.js';
import { classifyIngestFailure, clearStall, recordStall, stallReason } from './stall.js';

/**
 * Poll the full-node head at least this many block intervals apart while caught up (1 min on
 * mainnet: 0.05 requests per block); chain-head.ts extrapolates it in between.
 */
const HEAD_REFRESH_INTERVALS = 20;
/** The next-block ask moves earlier by a step that doubles after this many blocks in a row. */
const STEP_DOUBLING_BLOCKS = 16;

export interface IngesterOptions {
  db: Db;
  /**
   * The node providers (tron/node-group.ts: verification, failover, quorum), or one client,
   * which is then a group of one with quorum 1 (every block is verified either way).
   */
  client: NodeGroup | NodeClient;
  /** Request caps, keys and the quorum are the group's business (nodeGroupFor), not the loop's. */
  /** `network`: the chain followed (`mainnet`, or `nile` for the test environment: issue 32). */
  config: { network: string } & {
    node: Pick<Config['node'], 'concurrency'>;
    /** The start block (and its checkpoint id) apply only when no cursor exists yet. */
    ingest: Pick<Config['ingest'], 'blockIntervalMs'> & {
      startBlock?: number | undefined;
      startBlockId?: string | undefined;
    };
  };
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
   * tronwatch's own finality (finality-gate.ts; TRON_LIGHT_CLIENT_CHECKPOINT): every block read
   * is checked by the light client and committed only once it proved it final; the providers'
   * solidified head then only says how far to read. Default: none (the providers' solidified
   * head decides, as before).
   */
  finality?: FinalityGate | undefined;
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
  /** Asks for the next block while caught up (getBlockIfSolidified), and those too early. */
  nextBlockAsks: number;
  nextBlockMisses: number;
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
    nextBlockAsks: 0,
    nextBlockMisses: 0,
  };
  private readonly o: IngesterOptions;
  /** The finality gate when the light client is on (IngesterOptions.finality). */
  readonly gate: FinalityGate | undefined;
  /** The providers, verifying every block (a single client is wrapped in a group of one). */
  readonly group: NodeGroup;
  /** blockID of the last committed block ('' when unknown): the next block's parent. */
  private lastId = '';
  /**
   * Local time at which each solidified head was first seen (latency measurements); an entry
   * lives until its block is committed, and the map is emptied when a term starts (run()).
   */
  private readonly seenAt = new Map<number, number>();
  /**
   * The next block while it is overdue (module doc): its number, since when (epoch ms of the
   * first ask that missed it) and the asks counted before; undefined while blocks come on time.
   */
  private overdue: { block: number; since: number; asksBefore: number } | undefined;
  /**
   * Blocks the light client refused in a row since it last accepted one (accept), and the error
   * of the last refusal. run() retries such a refusal AT ONCE, from the providers not set aside
   * (distrust paused the one that served it), up to one retry per provider in a row; only then,
   * or for any other permanent failure, it waits permanentRetryMs. Waiting 10 block intervals
   * after each refusal let one preferred provider serving garbage signatures stop ingest beside
   * honest ones: its pause ran out before the retry, which asked it first again.
   */
  private readonly refusals: { count: number; last: unknown } = { count: 0, last: undefined };
  /** The block failing permanently, as last logged and recorded (undefined: not stalled). */
  private stall: { block: number; reason: string; recorded: boolean } | undefined;
  /** performance.now() of the last head poll (0: none yet). */
  private lastHeadPollAt = 0;
  /**
   * The next-block asks' timing (see the module doc), performance.now() ms: `at` is the next ask
   * on the chain's grid, `step` how much earlier than one interval the next ask after a hit is,
   * `hits` blocks in a row that came on their first ask; `synced` false until an ask missed.
   */
  private readonly pace = { at: 0, step: 0, hits: 0, synced: false };

  constructor(opts: IngesterOptions) {
    this.o = opts;
    this.gate = opts.finality;
    this.group =
      opts.client instanceof NodeGroup
        ? opts.client
        : new NodeGroup({
            clients: [opts.client],
            blockIntervalMs: opts.config.ingest.blockIntervalMs,
            logger: opts.logger,
            metrics: opts.metrics,
          });
    // Heads are bounded from the first poll on: mainnet cannot be past the shipped checkpoint
    // plus one block per 3 s slot since (a stored cursor tightens this, openCursor).
    if (opts.config.network === 'mainnet') {
      this.group.noteAnchor(
        MAINNET_CHECKPOINT.number,
        MAINNET_CHECKPOINT.timestamp,
        MAINNET_BLOCK_INTERVAL_MS,
      );
    }
  }

  /**
   * Head-sighting times held (blocks seen solidified, or with the gate seen at the full-node
   * head, and not committed by this term yet): at most the blocks between the cursor and that
   * head (tests, diagnostics).
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
  private async pollHeads(signal: AbortSignal): Promise<GroupHeads> {
    let heads: GroupHeads;
    try {
      heads = await this.group.getHeads(signal);
    } finally {
      await this.saveProviders();
    }
    this.stats.headPolls++;
    this.lastHeadPollAt = performance.now();
    const now = Date.now();
    // The head blocks are read up to: the solidified one, or with the gate the full node's.
    const top = this.gate ? heads.head : heads.solidified;
    const seen = this.readBound;
    for (let n = Math.max(seen + 1, top - 1000); n <= top; n++) this.seenAt.set(n, now);
    if (heads.solidified > this.stats.solidified) {
      this.stats.solidified = heads.solidified;
      this.o.metrics?.chainHeads(heads.solidified);
    }
    this.stats.head = Math.max(this.stats.head, heads.head);
    // The head stored for watch activation is the group's lower `activation` (one provider's
    // high head must not activate watches past their first transfers); reading goes up to `head`.
    // With the light client, the newest block whose signature it checked (or its final block)
    // goes with it: activation never goes above a head claim's reach of it (chain-head.ts), and
    // the api role's polls (head-refresh.ts) leave it as stored. Without it: cleared.
    const verified = this.gate
      ? Math.max(this.verifiedRead, this.gate.committedNumber ?? -1)
      : null;
    await saveChainHead(this.o.db, this.o.config.network, {
      solidified: heads.solidified,
      head: heads.activation,
      verified: verified === null || verified >= 0 ? verified : undefined,
    });
    return heads;
  }

  /**
   * How far blocks are read: the providers' solidified head, or with the finality gate their
   * full-node head (the gate proves finality itself; module doc).
   */
  private get readBound(): number {
    return this.gate ? this.stats.head : this.stats.solidified;
  }

  /** Delay between asks while a block is not there yet, ms: interval/30, within 10–100. */
  private get missGapMs(): number {
    return Math.max(10, Math.min(100, this.interval / 30));
  }

  /**
   * Delay between asks while searching for the grid (module doc), ms: √(interval × missGap),
   * which makes the search's two parts cost about the same (548 ms on mainnet, 3000 ms per block
   * and missGap 100: ~5.5 asks each, against up to 30 at missGap).
   */
  private get searchGapMs(): number {
    const gap = this.missGapMs;
    return Math.max(gap, Math.min(this.interval, Math.round(Math.sqrt(this.interval * gap))));
  }

  /**
   * Wait for the solidified head to pass `cursor` when the next block cannot be asked for
   * directly (the cursor is above every solidified head seen): poll the heads once per interval.
   */
  private async waitForHeads(signal: AbortSignal): Promise<void> {
    const wait = this.lastHeadPollAt + this.interval - performance.now();
    if (this.lastHeadPollAt > 0 && wait > 0) await sleep(wait, signal);
    if (!signal.aborted) await this.pollHeads(signal);
  }

  /**
   * Block `n` (= the solidified head seen + 1) as soon as the node has solidified it, asked on
   * the chain's grid (module doc). Notes it as the solidified head. With the finality gate, block
   * n = the full-node head seen + 1 as soon as the node has it (getBlockIfProduced), noted as the
   * full-node head.
   * @returns the block and whether an early poll of the heads is due (the ask came late by a
   *   whole interval or more, or the grid is not known yet: blocks may be waiting); undefined
   *   when `signal` aborted.
   * @throws NodeError as the client's getBlockIfSolidified.
   */
  private async nextBlock(
    n: number,
    signal: AbortSignal,
  ): Promise<{ block: VerifiedSolidifiedBlock; late: boolean } | undefined> {
    const p = this.pace;
    const gap = this.missGapMs;
    let now = performance.now();
    let late = !p.synced;
    if (p.synced && p.at + this.interval <= now) {
      // Asked late (a slow commit, a stall): back to the newest grid point, blocks may wait.
      p.at += Math.floor((now - p.at) / this.interval) * this.interval;
      late = true;
    }
    if (!p.synced) p.at = now;
    let missed = false;
    // Send time of the last ask that missed (the block was solidified after it).
    let missedAt = 0;
    // Before the grid is known the asks after a miss are `searchGap` apart, not missGap: the
    // block is solidified at most one interval after the first ask (the one before it was there
    // by then), so this costs about interval/searchGap asks, and the next block, known then to
    // within searchGap, about searchGap/missGap more (module doc).
    const searchGap = p.synced ? gap : this.searchGapMs;
    // When the block is due: one interval after the first ask that missed it. Past that it is
    // overdue (the node's solidified head stands still, or the chain halted): the asks back off.
    let dueBy: number | undefined;
    let overdueMisses = 0;
    while (!signal.aborted) {
      const wait = p.at - performance.now();
      if (wait > 0) await sleep(wait, signal);
      if (signal.aborted) return undefined;
      const sentAt = performance.now();
      this.stats.nextBlockAsks++;
      const block = this.gate
        ? await this.group.getBlockIfProduced(n, signal)
        : await this.group.getBlockIfSolidified(n, signal);
      if (!block) {
        this.stats.nextBlockMisses++;
        missed = true;
        missedAt = sentAt;
        dueBy ??= sentAt + this.interval;
        const t = performance.now();
        if (t < dueBy) {
          p.at = t + searchGap;
          continue;
        }
        // Overdue: missGap doubling per ask, up to one interval (at most one ask per block
        // interval however long the stall), reported once per episode.
        overdueMisses++;
        p.at = t + Math.min(this.interval, gap * 2 ** Math.min(16, overdueMisses));
        if (!this.overdue) this.noteOverdue(n, Date.now() - (t - dueBy + this.interval));
        continue;
      }
      now = Date.now();
      if (this.overdue) {
        // Blocks flow again, and a node that held them back releases them at once: read the
        // heads now and catch up at full speed, then find the grid again.
        this.blocksFlowAgain(n);
        p.synced = false;
        late = true;
        missed = false;
      }
      if (missed && !p.synced) {
        // Found by the search: solidified between the last miss and this ask, so the next block
        // comes between those times plus one interval; ask from the earliest, every missGap.
        p.synced = true;
        p.at = missedAt + this.interval + gap;
        p.hits = 0;
        p.step = gap / 100;
      } else if (missed) {
        // Solidified between the last miss and this ask: the grid point is this ask's time.
        p.synced = true;
        p.at = sentAt + this.interval;
        p.hits = 0;
        p.step = gap / 100;
      } else if (p.synced) {
        p.hits++;
        if (p.hits % STEP_DOUBLING_BLOCKS === 0) p.step = Math.min(gap, p.step * 2);
        p.at += this.interval - p.step;
      }
      this.seenAt.set(n, now);
      if (this.gate) {
        if (n > this.stats.head) this.stats.head = n;
      } else if (n > this.stats.solidified) {
        this.stats.solidified = n;
        this.o.metrics?.chainHeads(n);
      }
      return { block, late: late && !missed };
    }
    return undefined;
  }

  private async firstBlock(signal: AbortSignal): Promise<number> {
    if (this.o.config.ingest.startBlock !== undefined) return this.o.config.ingest.startBlock;
    // The light client follows the chain from a pinned checkpoint: the first block is the next
    // one. Without a pin it takes one at the cursor made here (FinalityGate.open).
    if (this.gate?.pinned) return this.gate.pinned.block.number + 1;
    // Bounded: the heads are checked against the shipped checkpoint's time (constructor).
    const heads = await this.pollHeads(signal);
    return heads.solidified;
  }

  /**
   * The cursor in force: the stored one (its block bounds the heads from the first poll on),
   * else a new one at the configured start block or the solidified head (bounded by the shipped
   * checkpoint, see the constructor). A new cursor at INGEST_START_BLOCK=number:blockID keeps that
   * id as the checkpoint the first block must match (`this.checkpoint`).
   */
  private async openCursor(signal: AbortSignal): Promise<CursorRow> {
    const { db } = this.o;
    const network = this.o.config.network;
    const stored = await readCursor(db, network);
    if (stored?.block_timestamp) {
      this.group.noteCommitted(
        stored.block_number,
        stored.block_timestamp.getTime(),
        stored.block_id,
      );
    }
    const row = stored ?? (await ensureCursor(db, network, await this.firstBlock(signal)));
    const start = this.o.config.ingest;
    // With the light client the first block is anchored anyway: it must chain to the checkpoint
    // and carry its SR's signature.
    if (
      !stored &&
      !this.gate &&
      start.startBlock !== undefined &&
      start.startBlockId === undefined
    ) {
      this.o.logger.warn(
        { block_number: start.startBlock },
        'INGEST_START_BLOCK has no blockID: the first block is taken on the providers’ word; give number:blockID (a checkpoint) to anchor it',
      );
    }
    this.checkpoint =
      row.block_id === '' &&
      start.startBlockId !== undefined &&
      start.startBlock !== undefined &&
      row.block_number === Math.max(0, start.startBlock - 1)
        ? { number: start.startBlock, id: start.startBlockId }
        : undefined;
    return row;
  }

  /**
   * Run until `signal` aborts. Resolves after the block in progress is committed or abandoned
   * (an abandoned block's transaction is rolled back; the next run starts with it).
   */
  async run(signal: AbortSignal): Promise<void> {
    const { db, logger } = this.o;
    const network = this.o.config.network;
    // A new term: sightings of the previous one are of blocks another leader may have committed.
    this.seenAt.clear();
    // …and the light client's state may have moved with them: read it again at the cursor.
    this.gate?.close();
    let failures = 0;
    let cursor: number | undefined;
    while (!signal.aborted) {
      try {
        if (cursor === undefined) {
          const row = await this.openCursor(signal);
          cursor = row.block_number;
          this.lastId = row.block_id;
          if (row.block_timestamp) {
            this.group.noteCommitted(cursor, row.block_timestamp.getTime(), row.block_id);
          }
          this.group.expectCheckpoint(this.checkpoint);
          if (this.gate && this.gate.committedNumber !== cursor) await this.openGate(row, signal);
          this.stats.cursor = cursor;
          for (const n of this.seenAt.keys()) if (n <= cursor) this.seenAt.delete(n); // committed
          this.o.metrics?.chainCursor(cursor);
          this.o.metrics?.ingestStall(this.stall?.block);
          if (!this.overdue) this.o.metrics?.nextBlockOverdue(undefined);
          logger.info({ block_number: cursor + 1 }, 'ingest starting');
        }
        // The height read last: the cursor, or above it the light client's look-ahead.
        const read = this.gate?.readHeight ?? cursor;
        const bound = this.readBound;
        if (read >= bound) {
          if (bound < 0) await this.pollHeads(signal);
          else if (read > bound) await this.waitForHeads(signal);
          else {
            const next = await this.nextBlock(read + 1, signal);
            if (!next) continue;
            cursor = (await this.accept(next.block, signal)) ?? cursor;
            if (this.gate) await saveHead(db, network, next.block.ref.number);
            else await saveSolidifiedHead(db, network, next.block.ref.number);
            const due =
              performance.now() - this.lastHeadPollAt >= HEAD_REFRESH_INTERVALS * this.interval;
            if (next.late || due) await this.pollHeads(signal);
            failures = 0;
            continue;
          }
          if (this.stall) await this.resumed(false);
          failures = 0;
          continue;
        }
        // Heights read again for a branch switch (finality-gate.ts add): one at a time, the
        // blocks above them are held already.
        const to = Math.min(bound, read + (this.gate?.rereading ? 1 : (this.o.window ?? 100)));
        let lastPoll = Date.now();
        const group = this.group;
        const source = this.gate
          ? { getSolidifiedBlock: (n: number, s?: AbortSignal) => group.getFullNodeBlock(n, s) }
          : group;
        for await (const b of fetchBlocks(
          source,
          read + 1,
          to,
          this.o.config.node.concurrency,
          signal,
        )) {
          cursor = (await this.accept(b, signal)) ?? cursor;
          failures = 0;
          // Near the head the light client's newest block is the floor of watch activation
          // (chain-head.ts): stored as read, as at the head, not only at the next poll. A provider
          // claiming a head above the blocks it has keeps ingest here, never at the head; further
          // below, activation keeps to the head's window and the polls store it (no statement).
          if (this.gate && b.ref.number >= bound - ACTIVATION_WINDOW_BLOCKS) {
            await saveHead(db, network, b.ref.number);
          }
          if (signal.aborted) break;
          // A branch switch: the gate reads lower heights again, or has taken the blocks kept
          // aside above them; read from where it is unless the next block read ahead fits.
          if (this.gate && !this.gate.takes(b.ref.number + 1)) break;
          if (Date.now() - lastPoll >= this.interval) {
            lastPoll = Date.now();
            await this.pollHeads(signal); // fresh activation head while catching up
          }
        }
      } catch (err) {
        if (signal.aborted) break;
        failures++;
        await this.saveProviders();
        // The block that failed: the one after the last committed (blocks are yielded in order).
        const known = cursor ?? this.stats.cursor;
        cursor = undefined; // re-read: another ingester may have moved it
        const cls = classifyIngestFailure(err);
        this.o.metrics?.ingestFailed(cls);
        const refusal = err === this.refusals.last;
        this.refusals.last = undefined;
        if (refusal && this.refusals.count < this.group.clients.length) {
          // The light client refused one provider's block; the next provider is asked now
          // (`refusals` doc). Logged by accept; no stall: nothing is stuck yet.
          logger.warn(
            { block_number: known >= 0 ? known + 1 : undefined, refusals: this.refusals.count },
            'light client refused a block; reading it again at once from the other providers',
          );
          continue;
        }
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
   * Open the finality gate at the cursor `row` (restore the stored light client, cross-check it
   * against the cursor) and log how it starts.
   * @throws FinalityHaltError as FinalityGate.open.
   */
  private async openGate(row: CursorRow, signal: AbortSignal): Promise<void> {
    const g = this.gate;
    if (!g) return;
    const r = await g.open(this.o.db, this.o.config.network, row, signal);
    if (r.discarded !== undefined) {
      this.o.logger.warn(
        { reason: r.discarded },
        'light client: stored state left aside; starting from the checkpoint',
      );
    }
    if (r.dissent !== undefined) {
      this.o.logger.warn(
        { providers: r.dissent.providers, answers: r.dissent.detail, final_block: r.final },
        'light client: these providers hold another block at the final block stored; the others confirm it, so ingest goes on: check them',
      );
    }
    for (const x of r.setAside ?? []) {
      // Its chain does not continue the stored final block: refused like a block the light
      // client refused (counted in tronwatch_node_answers_refused_total), the others serve.
      this.group.distrust(
        x.provider,
        new BlockCheckError(
          'parent',
          r.final + 1,
          `${x.provider} does not continue the final block ${r.final}: ${x.reason}`,
        ),
      );
      this.o.logger.error(
        { provider: x.provider, final_block: r.final, reason: x.reason },
        'light client: this provider shows no block the SRs signed on the final block stored (another chain, or a lie); it is set aside and ingest goes on from the providers that do',
      );
    }
    if (r.from === 'taken') {
      this.o.logger.warn(
        { block_number: r.final, block_id: g.checkpoint?.block.id, srs: g.checkpoint?.witnesses },
        'light client: no checkpoint pinned (TRON_LIGHT_CLIENT_CHECKPOINT); took this one from the providers at the cursor (trust on first use): review it (GET /v1/status, tronwatch checkpoint) and pin one',
      );
    }
    this.o.logger.info(
      {
        from: r.from,
        final_block: r.final,
        checkpoint: g.checkpoint?.block.number,
        checkpoint_source: g.checkpoint?.source,
        cursor: row.block_number,
      },
      'light client: finality is proven from the SRs’ signatures; reading from its final block',
    );
  }

  /**
   * A block read at the next height: committed at once without the light client; with it,
   * checked and held until proven final, then every block it made final is committed in order.
   * A block the light client refuses sets its provider aside (distrust; the next attempt, at
   * once, asks another: run()); one it accepts is noted (NodeGroup.noteRead).
   * @returns the last block committed (the new cursor), or undefined when none was.
   * @throws as commit(), and FinalityGate.add's errors.
   */
  private async accept(
    b: VerifiedSolidifiedBlock,
    signal: AbortSignal,
  ): Promise<number | undefined> {
    const g = this.gate;
    if (!g) return this.commit(b);
    try {
      await g.add(b, signal);
    } catch (err) {
      const refused =
        err instanceof BlockCheckError ||
        err instanceof HeaderError ||
        (err instanceof LightClientError && !err.halt);
      if (refused) {
        this.o.metrics?.lightClientRefused(err instanceof LightClientError ? err.code : 'other');
        this.o.logger.error(
          { provider: b.provider, block_number: b.ref.number, err: (err as Error).message },
          'light client refused a block: not proven by the SRs’ signatures; its provider is set aside',
        );
        this.group.distrust(b.provider, err);
        this.refusals.count++;
        this.refusals.last = err;
      }
      throw err;
    }
    // Its signature checked: its provider is trusted again, and it bounds the heads.
    this.refusals.count = 0;
    this.group.noteRead(b.provider, b.ref.number, b.ref.timestamp);
    if (b.ref.number > this.verifiedRead) this.verifiedRead = b.ref.number;
    // The arrival of the block that made these final: when it was seen at the node's head.
    const arrivedAt = this.seenAt.get(b.ref.number) ?? Date.now();
    let last: number | undefined;
    for (let f = g.next(); f; f = g.next()) {
      last = await this.commit(f, arrivedAt);
      g.shift();
    }
    this.o.metrics?.lightClient(g.status());
    return last;
  }

  /**
   * Extract, match and commit one block (one transaction), then count it, call the hooks and
   * clear a stall it got through. `finalisedAtMs` (with the gate): when the block that made it
   * final was seen at the node's head, what onBlock reports as `solidifiedAtMs`. With the light client, the commit that reaches its final block
   * also stores its state (store.ts), in the same transaction.
   * @returns its number, the new cursor.
   * @throws as commitBlock, extractTransfers, or the stall's clearing.
   */
  private async commit(b: VerifiedSolidifiedBlock, finalisedAtMs?: number): Promise<number> {
    // The first block of a new cursor at INGEST_START_BLOCK=number:blockID must be that block.
    const cp = this.checkpoint;
    if (this.lastId === '' && cp && b.ref.number === cp.number && b.verified.id !== cp.id) {
      const err = new BlockCheckError(
        'checkpoint',
        b.ref.number,
        `blockID ${b.verified.id} is not the checkpoint's ${cp.id} (INGEST_START_BLOCK)`,
      );
      this.group.distrust(b.provider, err);
      throw err;
    }
    // The chain must go on from the block committed last (its blockID, held by the cursor row);
    // commitBlock checks it again under the cursor's lock. The first block has nothing to follow.
    if (this.lastId !== '' && b.verified.parentHash !== this.lastId.toLowerCase()) {
      const err = new BlockCheckError(
        'parent',
        b.ref.number,
        `parentHash ${b.verified.parentHash} is not the blockID of block ${b.ref.number - 1} (${this.lastId})`,
      );
      this.group.distrust(b.provider, err);
      throw err;
    }
    // Extracted from the agreed, verified answer (tron/verify.ts, tron/node-group.ts).
    const transfers = b.verified.transfers;
    const g = this.gate;
    const network = this.o.config.network;
    const r = await commitBlock(
      this.o.db,
      network,
      { ...b.ref, parentHash: b.verified.parentHash },
      transfers,
      this.o.hooks,
      g?.isFinalTip(b) ? (tx) => saveLightClientState(tx, network, g.snapshot()) : undefined,
    );
    const cursor = b.ref.number;
    this.lastId = b.ref.id;
    this.group.noteCommitted(cursor, b.ref.timestamp, b.ref.id);
    // Without the light client the committed block is the one read (accept notes it with it).
    if (!g) this.group.noteRead(b.provider, cursor, b.ref.timestamp);
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
      solidifiedAtMs: finalisedAtMs ?? this.seenAt.get(cursor) ?? Date.now(),
    });
    this.seenAt.delete(cursor);
    if (this.stall) await this.resumed(true);
    if (this.group.stateVersion !== this.savedProviders) await this.saveProviders();
    return cursor;
  }

  /**
   * The newest block the light client accepted (its SR signature checked: accept), −1 before the
   * first: stored as the chain's verified block for watch activation (pollHeads; saveHead stores
   * each block read at the head), which no provider's head claim can move.
   */
  private verifiedRead = -1;

  /** The checkpoint the first block of a new cursor must match (openCursor), if configured. */
  private checkpoint: Checkpoint | undefined;

  /** The group's stateVersion last stored (-1: never). */
  private savedProviders = -1;

  /**
   * The next block is overdue: log it once for this episode, show it in the metrics
   * (chain_next_block_overdue_seconds).
   * @param since epoch ms of the first ask that missed it.
   */
  private noteOverdue(n: number, since: number): void {
    this.overdue = { block: n, since, asksBefore: this.stats.nextBlockAsks };
    this.o.metrics?.nextBlockOverdue(since);
    this.o.logger.warn(
      { block_number: n, waiting_ms: Date.now() - since, interval_ms: this.interval },
      'the next block is overdue (the node’s solidified head stands still, or the chain halted); asking at most once per block interval until it comes',
    );
  }

  /** The overdue block came: end the episode (logged with its length and the asks it took). */
  private blocksFlowAgain(n: number): void {
    const o = this.overdue;
    if (!o) return;
    this.overdue = undefined;
    this.o.metrics?.nextBlockOverdue(undefined);
    this.o.logger.info(
      {
        block_number: n,
        overdue_ms: Date.now() - o.since,
        asks: this.stats.nextBlockAsks - o.asksBefore,
      },
      'blocks flow again; reading the heads and catching up',
    );
  }

  /** Store every provider's state for GET /healthz and /v1/status (never throws: logged). */
  private async saveProviders(): Promise<void> {
    try {
      const version = this.group.stateVersion;
      await saveProviderStates(this.o.db, this.o.config.network, this.group.states());
      this.savedProviders = version;
    } catch (e) {
      this.o.logger.debug(
        { err: e instanceof Error ? e.message : String(e) },
        'could not store the node providers’ states; trying again at the next poll',
      );
    }
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
