/**
 * Prometheus metrics of one process (one Registry per process: service.ts makes it and hands it
 * to every role it runs; the metrics listener serves it at GET /metrics, src/api/metrics-app.ts,
 * never the API port).
 *
 * Every metric, name prefixed `tronwatch_`:
 *
 * | name | type | labels | unit | meaning |
 * |---|---|---|---|---|
 * | chain_solidified_block | gauge | – | block number | newest solidified block the ingester has seen |
 * | chain_cursor_block | gauge | – | block number | last block whose transfers are committed (the cursor) |
 * | chain_lag_blocks | gauge | – | blocks | solidified head minus cursor: 0 when caught up |
 * | chain_lag_seconds | gauge | – | seconds | now minus the timestamp of the last committed block; caught up on mainnet this is the solidification delay (~19 blocks, ~57 s); on a replayed recording it is the recording's age |
 * | blocks_ingested_total | counter | – | blocks | blocks committed by this process |
 * | chain_next_block_overdue_seconds | gauge | – | seconds | how long the next block has been awaited past its due time (the node's solidified head stands still, or the chain halted), 0 when blocks come on time; no sample before the ingester asked for one |
 * | ingest_stalled_block | gauge | – | block number | the block this process's ingester cannot commit because it failed permanently (malformed answer, 4xx, a bug), retried slowly and never skipped; 0 when not stalled; no sample before the ingester read its cursor |
 * | ingest_block_failures_total | counter | class (transient, permanent) | attempts | failed ingest steps by class (src/ingest/stall.ts): transient ones are retried with backoff, permanent ones stall the block |
 * | transfers_ingested_total | counter | asset (USDT, TRX) | transfers | transfers extracted from committed blocks, matched or not |
 * | events_matched_total | counter | – | events | events created (transfer × matching watch) |
 * | deliveries_total | counter | outcome | notifications | committed state moves: `delivered` (→ DELIVERED), `failed` (attempt failed, rescheduled), `dead` (sixth failure → DEAD); attempts whose lease was taken over are not counted |
 * | delivery_attempt_duration_seconds | histogram | – | seconds | wall time of one webhook attempt (buckets 10 ms … 10 s, the timeout) |
 * | outbox_pending | gauge | – | notifications | notifications in state PENDING (due, leased or scheduled), read at scrape |
 * | outbox_oldest_due_seconds | gauge | – | seconds | age of the oldest due, unclaimed PENDING notification (now − next_attempt_at), 0 when none; read at scrape |
 * | rate_limit_refusals_total | counter | scope (key, ip) | requests | `/v1/*` requests answered 429: per API key, or per client IP for unauthenticated ones |
 * | http_request_duration_seconds | histogram | method, route, status_code | seconds | API request latency; `route` is the route pattern (`/v1/watches/:id`), `unmatched` for a 404 without route |
 * | node_requests_total | counter | – | requests | HTTP requests sent to the TRON node by this process, retries included |
 * | block_verifications_total | counter | root (exact, json, unverifiable) | blocks | provider answers that passed verification (src/tron/verify.ts), by how the transaction root was checked: from exact gRPC bytes, from JSON, or not at all (JSON that cannot carry every byte; a second provider then confirms when configured) |
 * | node_answers_refused_total | counter | provider, check | answers | provider answers refused: a verification check failed (block_id, tx_id, tx_fields, receipts, transfer_log, tx_root, exact_bytes, parent), outvoted by the providers that agree, or, above the solidified head, other_branch (another block at a young height: a fork being settled, not a lie), or sr_answer (outvoted by the majority on an SR new after a maintenance: its key, isJobs, the next maintenance time; finality-gate.ts finalityGateFor) |
 * | node_heads_ignored_total | counter | provider | answers | head answers ignored as impossible (below the cursor, or beyond what the chain can have produced) |
 * | node_quorum_disagreements_total | counter | – | blocks | times the providers returned different versions of a block (it stalls until they agree) |
 * | node_provider_up | gauge | provider | 0/1 | 1 while the provider serves, 0 while it is set aside or unhealthy |
 * | pruned_rows_total | counter | kind | rows | rows the pruning job (src/retention/prune.ts) deleted or cleared, by kind: console_sessions, console_invites, telegram_link_tokens, attempt_details (request/response details cleared), events, notifications, attempts (deleted with their events); other kinds as registered |
 * | prune_passes_total | counter | outcome | passes | pruning passes by outcome: `ran` (this process held the lease and finished), `skipped` (another process holds it), `failed` (a database error; retried at the next interval) |
 * | process_*, nodejs_* | various | – | – | prom-client's default process metrics (CPU, memory, event-loop delay, GC); in the service's process only |
 *
 * Gauges read at scrape time (the chain_* ones from what the ingester reported, the outbox_* ones
 * from the database) never fail a scrape: an unknown value (no ingester in this process yet, the
 * database down or slower than 1 s) yields no sample, never a stale or zero one, and a warning.
 *
 * Counters are per process: with roles split over processes, each process counts its own work.
 * Labels have a small fixed set of values; nothing here carries a secret, key, address or URL
 * (`provider` is the provider's position in TRON_NODE_URL, from 0).
 */
import {
  Counter,
  collectDefaultMetrics,
  Gauge,
  Histogram,
  type MetricObjectWithValues,
  type MetricValue,
  Registry,
} from 'prom-client';
import type { Queryable } from '../db/pool.js';
import type { Logger } from './logger.js';

/** Prefix of every metric name. */
export const METRIC_PREFIX = 'tronwatch_';

/** Deadline of the scrape-time database read, ms: a scrape must stay fast when Postgres is not. */
export const SCRAPE_QUERY_TIMEOUT_MS = 1_000;

/**
 * Webhook attempt buckets, seconds: a LAN receiver answers in ~10 ms, a distant one in ~0.1-1 s,
 * and the timeout is 10 s (SPEC), so the last finite bucket is the timeout.
 */
const ATTEMPT_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

/**
 * API request buckets, seconds: most answers are one indexed query (~1-5 ms); a slow database
 * shows in the upper buckets.
 */
const HTTP_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5];

/** Deliveries outcome label values (see the table above). */
export type DeliveryOutcome = 'delivered' | 'failed' | 'dead';

/**
 * Number of PENDING notifications (held ones included: they are PENDING, migration 095) and the
 * age of the oldest due one, seconds (a held notification is never due: no worker may claim it).
 */
const OUTBOX_SQL = `
SELECT count(*)::int8 AS pending,
       COALESCE(EXTRACT(EPOCH FROM now() - min(next_attempt_at) FILTER (WHERE next_attempt_at <= now() AND held_since IS NULL)), 0)::float8
         AS oldest_due_seconds
  FROM notifications
 WHERE status = 'PENDING' AND network = 'mainnet'`; // live only: test mode (issue 32) never counts

interface OutboxSnapshot {
  pending: number;
  oldestDueSeconds: number;
}

/**
 * A gauge whose value is read when scraped. `read` returning undefined (or throwing: logged by
 * the reader) leaves the gauge without a sample for that scrape.
 */
class ScrapedGauge extends Gauge {
  private readonly read: () => Promise<number | undefined>;

  constructor(
    registry: Registry,
    name: string,
    help: string,
    read: () => Promise<number | undefined>,
  ) {
    super({ name, help, registers: [registry] });
    this.read = read;
  }

  override async get(): Promise<MetricObjectWithValues<MetricValue<string>>> {
    let value: number | undefined;
    try {
      value = await this.read();
    } catch {
      value = undefined; // readers log their own failures; a scrape never fails
    }
    if (value === undefined || !Number.isFinite(value)) {
      const m = await super.get();
      return { ...m, values: [] };
    }
    this.set(value);
    return super.get();
  }
}

export interface MetricsOptions {
  /** Read at scrape time for the outbox gauges; without it they have no sample. */
  db?: Queryable;
  /** Where a failed scrape-time read is reported (warn). Default: nowhere. */
  logger?: Logger;
  /**
   * Include prom-client's default process metrics (CPU, memory, event-loop delay, GC). Default
   * false: they watch the whole process (an event-loop monitor, a GC observer), so only the
   * process's own Metrics (service.ts) turns them on, not every app a test builds.
   */
  processMetrics?: boolean;
}

export class Metrics {
  /** The registry GET /metrics serves. */
  readonly registry = new Registry();

  /** Blocks committed by the ingester. */
  readonly blocksIngested: Counter;
  /** Failed ingest steps, by class (transient | permanent). */
  readonly ingestFailures: Counter<'class'>;
  /** Transfers extracted from committed blocks, by asset (USDT | TRX). */
  readonly transfersIngested: Counter<'asset'>;
  /** Events created (a transfer matching a watch). */
  readonly eventsMatched: Counter;
  /** Committed notification state moves, by outcome (delivered | failed | dead). */
  readonly deliveries: Counter<'outcome'>;
  /** Claims held back because their webhook secret did not decrypt, by key id. */
  readonly secretDecryptFailures: Counter<'key_id'>;
  /** Wall time of one webhook attempt, seconds. */
  readonly attemptDuration: Histogram;
  /** `/v1/*` requests refused with 429, by scope (key | ip). */
  readonly rateLimitRefusals: Counter<'scope'>;
  /** Rows pruned (deleted, or details cleared), by kind: see {@link Metrics.pruned}. */
  private readonly prunedRows: Counter<'kind'>;
  private readonly prunePasses: Counter<'outcome'>;
  /** API request latency, seconds, by method, route pattern and status code. */
  readonly httpRequestDuration: Histogram<'method' | 'route' | 'status_code'>;
  private readonly blockVerifications: Counter<'root'>;
  private readonly nodeAnswersRefused: Counter<'provider' | 'check'>;
  private readonly nodeHeadsIgnored: Counter<'provider'>;
  private readonly quorumDisagreements: Counter;
  private readonly nodeProviderUp: Gauge<'provider'>;
  private readonly lightClientRefusals: Counter<'code'>;
  /** The light client's state as the ingester last reported it (undefined: off or not yet). */
  private lightClientState:
    | {
        final: number;
        finalTimestampMs: number;
        epoch: number;
        knownSrs: number;
        threshold: number;
        waiting: number;
      }
    | undefined;

  private readonly db: Queryable | undefined;
  private readonly logger: Logger | undefined;
  /** As last reported by the ingester; -1 until then. */
  private solidified = -1;
  private cursor = -1;
  /** Block the ingester is stalled on, 0 when not stalled; -1 until it reported. */
  private stalledBlock = -1;
  /** Epoch ms since when the next block is awaited overdue; null when on time, undefined before. */
  private overdueSince: number | null | undefined;
  /** Timestamp of the last committed block, ms since epoch (undefined until one is committed). */
  private lastBlockTimestampMs: number | undefined;
  /** Request counters of node clients, summed at scrape. */
  private readonly nodeRequestCounts: (() => number)[] = [];
  private nodeRequestsSeen = 0;
  /** The outbox read in flight: both outbox gauges of one scrape share it. */
  private outboxRead: Promise<OutboxSnapshot | undefined> | null = null;

  constructor(opts: MetricsOptions = {}) {
    this.db = opts.db;
    this.logger = opts.logger;
    const registers = [this.registry];
    const p = METRIC_PREFIX;

    if (opts.processMetrics ?? false) collectDefaultMetrics({ register: this.registry, prefix: p });

    new ScrapedGauge(
      this.registry,
      `${p}chain_solidified_block`,
      'Newest solidified block number the ingester has seen.',
      async () => (this.solidified >= 0 ? this.solidified : undefined),
    );
    new ScrapedGauge(
      this.registry,
      `${p}chain_cursor_block`,
      'Last block number whose transfers are committed (the ingest cursor).',
      async () => (this.cursor >= 0 ? this.cursor : undefined),
    );
    new ScrapedGauge(
      this.registry,
      `${p}chain_lag_blocks`,
      'Solidified head minus the ingest cursor, blocks (0 when caught up).',
      async () =>
        this.solidified >= 0 && this.cursor >= 0
          ? Math.max(0, this.solidified - this.cursor)
          : undefined,
    );
    new ScrapedGauge(
      this.registry,
      `${p}chain_lag_seconds`,
      'Now minus the timestamp of the last committed block, seconds (includes the ~57 s solidification delay of mainnet).',
      async () =>
        this.lastBlockTimestampMs === undefined
          ? undefined
          : (Date.now() - this.lastBlockTimestampMs) / 1000,
    );

    new ScrapedGauge(
      this.registry,
      `${p}chain_next_block_overdue_seconds`,
      'How long the next block has been awaited past its due time (the node’s solidified head stands still, or the chain halted), seconds; 0 when blocks come on time.',
      async () =>
        this.overdueSince === undefined
          ? undefined
          : this.overdueSince === null
            ? 0
            : (Date.now() - this.overdueSince) / 1000,
    );
    new ScrapedGauge(
      this.registry,
      `${p}ingest_stalled_block`,
      'Block number the ingester cannot commit because it failed permanently (retried slowly, never skipped); 0 when not stalled.',
      async () => (this.stalledBlock >= 0 ? this.stalledBlock : undefined),
    );
    this.ingestFailures = new Counter({
      name: `${p}ingest_block_failures_total`,
      help: 'Failed ingest steps by class: transient (retried with backoff) or permanent (the block stalls and is retried slowly).',
      labelNames: ['class'] as const,
      registers,
    });
    for (const c of ['transient', 'permanent'] as const) this.ingestFailures.inc({ class: c }, 0);

    this.blocksIngested = new Counter({
      name: `${p}blocks_ingested_total`,
      help: 'Solidified blocks committed by the ingester.',
      registers,
    });
    this.transfersIngested = new Counter({
      name: `${p}transfers_ingested_total`,
      help: 'Transfers extracted from committed blocks, matched or not, by asset.',
      labelNames: ['asset'] as const,
      registers,
    });
    this.eventsMatched = new Counter({
      name: `${p}events_matched_total`,
      help: 'Events created: a transfer matching a watch.',
      registers,
    });

    this.secretDecryptFailures = new Counter({
      name: `${p}secret_decrypt_failures_total`,
      help: 'Deliveries held back because the webhook secret could not be decrypted (a key missing from SECRET_ENCRYPTION_KEY / SECRET_ENCRYPTION_KEYS_OLD), by key id; no attempt is used.',
      labelNames: ['key_id'] as const,
      registers,
    });
    this.deliveries = new Counter({
      name: `${p}deliveries_total`,
      help: 'Committed notification state moves by outcome: delivered, failed (rescheduled), dead (sixth failure).',
      labelNames: ['outcome'] as const,
      registers,
    });
    for (const outcome of ['delivered', 'failed', 'dead'] as const) {
      this.deliveries.inc({ outcome }, 0); // every series exists from the start: rate() sees the first one
    }
    this.attemptDuration = new Histogram({
      name: `${p}delivery_attempt_duration_seconds`,
      help: 'Wall time of one webhook delivery attempt, seconds.',
      buckets: ATTEMPT_BUCKETS,
      registers,
    });
    new ScrapedGauge(
      this.registry,
      `${p}outbox_pending`,
      'Notifications in state PENDING (due, leased or scheduled for a retry).',
      async () => (await this.outbox())?.pending,
    );
    new ScrapedGauge(
      this.registry,
      `${p}outbox_oldest_due_seconds`,
      'Age of the oldest due, unclaimed PENDING notification (now - next_attempt_at), seconds; 0 when none.',
      async () => (await this.outbox())?.oldestDueSeconds,
    );

    this.prunedRows = new Counter({
      name: `${p}pruned_rows_total`,
      help: 'Rows deleted or cleared by the pruning job, by kind (table, or attempt_details).',
      labelNames: ['kind'],
      registers,
    });
    this.prunePasses = new Counter({
      name: `${p}prune_passes_total`,
      help: 'Pruning passes by outcome: ran, skipped (another process holds the lease), failed.',
      labelNames: ['outcome'],
      registers,
    });
    this.rateLimitRefusals = new Counter({
      name: `${p}rate_limit_refusals_total`,
      help: 'Requests under /v1 answered 429, by scope: key (an API key over its rate) or ip (unauthenticated).',
      labelNames: ['scope'] as const,
      registers,
    });
    this.httpRequestDuration = new Histogram({
      name: `${p}http_request_duration_seconds`,
      help: 'API request latency, seconds, by method, route pattern and status code.',
      labelNames: ['method', 'route', 'status_code'] as const,
      buckets: HTTP_BUCKETS,
      registers,
    });

    this.blockVerifications = new Counter({
      name: `${p}block_verifications_total`,
      help: 'Provider answers that passed block verification, by how the transaction root was checked: exact (gRPC bytes), json, unverifiable.',
      labelNames: ['root'] as const,
      registers,
    });
    for (const root of ['exact', 'json', 'unverifiable'] as const) {
      this.blockVerifications.inc({ root }, 0);
    }
    this.nodeAnswersRefused = new Counter({
      name: `${p}node_answers_refused_total`,
      help: 'Provider answers refused because a verification check failed, by provider (position in TRON_NODE_URL) and check.',
      labelNames: ['provider', 'check'] as const,
      registers,
    });
    this.nodeHeadsIgnored = new Counter({
      name: `${p}node_heads_ignored_total`,
      help: 'Head answers ignored as impossible, by provider (position in TRON_NODE_URL).',
      labelNames: ['provider'] as const,
      registers,
    });
    this.quorumDisagreements = new Counter({
      name: `${p}node_quorum_disagreements_total`,
      help: 'Times the providers returned different versions of a block (it stalls until they agree).',
      registers,
    });
    this.nodeProviderUp = new Gauge({
      name: `${p}node_provider_up`,
      help: '1 while the provider (position in TRON_NODE_URL) serves, 0 while set aside or unhealthy.',
      labelNames: ['provider'] as const,
      registers,
    });

    // The light client (issue 28, src/ingest/finality-gate.ts): reported only while it is on.
    const lc = (f: (s: NonNullable<Metrics['lightClientState']>) => number) => async () =>
      this.lightClientState ? f(this.lightClientState) : undefined;
    new ScrapedGauge(
      this.registry,
      `${p}light_client_final_block`,
      'Last block tronwatch proved final itself (19 of the 27 SRs signed blocks on top of it, signatures checked); only while the light client is on.',
      lc((s) => s.final),
    );
    new ScrapedGauge(
      this.registry,
      `${p}light_client_final_age_seconds`,
      'Now minus the timestamp of the last block proven final, seconds.',
      lc((s) => (Date.now() - s.finalTimestampMs) / 1000),
    );
    new ScrapedGauge(
      this.registry,
      `${p}light_client_known_srs`,
      'SRs of the current set whose signatures count toward finality (27 when the set is fully known).',
      lc((s) => s.knownSrs),
    );
    new ScrapedGauge(
      this.registry,
      `${p}light_client_threshold_srs`,
      'Distinct SRs whose signed blocks on top make a block final (19 of 27).',
      lc((s) => s.threshold),
    );
    new ScrapedGauge(
      this.registry,
      `${p}light_client_epoch`,
      'Maintenance epochs the light client followed since its checkpoint (0 = the checkpoint’s SR set).',
      lc((s) => s.epoch),
    );
    new ScrapedGauge(
      this.registry,
      `${p}light_client_waiting_blocks`,
      'Blocks read and signature-checked, waiting for finality (the look-ahead, about 18 on mainnet).',
      lc((s) => s.waiting),
    );
    this.lightClientRefusals = new Counter({
      name: `${p}light_client_refused_total`,
      help: 'Blocks the light client refused (bad-signature, outside-set, wrong-slot, bad-timestamp, not-chained, too-many-changes, bad-rotation, other), each from a provider then set aside.',
      labelNames: ['code'] as const,
      registers,
    });

    const nodeRequests = new Counter({
      name: `${p}node_requests_total`,
      help: 'HTTP requests sent to the TRON node, retries included.',
      registers,
      collect: () => {
        const total = this.nodeRequestCounts.reduce((sum, f) => sum + f(), 0);
        if (total > this.nodeRequestsSeen) nodeRequests.inc(total - this.nodeRequestsSeen);
        this.nodeRequestsSeen = Math.max(this.nodeRequestsSeen, total);
      },
    });
  }

  /** The next block is overdue since `sinceMs` (epoch ms), or on time again (undefined). */
  nextBlockOverdue(sinceMs: number | undefined): void {
    this.overdueSince = sinceMs ?? null;
  }

  /** The ingester saw the solidified head at `blockNumber`. */
  chainHeads(solidified: number): void {
    if (solidified > this.solidified) this.solidified = solidified;
  }

  /** The ingester (re)read its cursor: `blockNumber` is the last committed block. */
  chainCursor(blockNumber: number): void {
    this.cursor = blockNumber;
  }

  /**
   * The ingester's stall state: `block` is the block number that fails permanently, undefined
   * when ingest is not stalled (src/ingest/stall.ts).
   */
  ingestStall(block: number | undefined): void {
    this.stalledBlock = block ?? 0;
  }

  /** An ingest step failed; `cls` as classified by src/ingest/stall.ts. */
  ingestFailed(cls: 'transient' | 'permanent'): void {
    this.ingestFailures.inc({ class: cls });
  }

  /**
   * The ingester committed a block.
   * @param b.timestampMs the block's timestamp, ms since epoch (chain_lag_seconds).
   * @param b.transfers the block's transfers (only `asset` is read).
   * @param b.events events created by the commit.
   */
  blockCommitted(b: {
    blockNumber: number;
    timestampMs: number;
    transfers: readonly { asset: string }[];
    events: number;
  }): void {
    this.cursor = b.blockNumber;
    if (b.timestampMs > 0) this.lastBlockTimestampMs = b.timestampMs; // 0: header without one
    this.blocksIngested.inc();
    let usdt = 0;
    let trx = 0;
    for (const t of b.transfers) {
      if (t.asset === 'USDT') usdt++;
      else trx++;
    }
    if (usdt > 0) this.transfersIngested.inc({ asset: 'USDT' }, usdt);
    if (trx > 0) this.transfersIngested.inc({ asset: 'TRX' }, trx);
    if (b.events > 0) this.eventsMatched.inc(b.events);
  }

  /** A completion batch committed (complete.ts CompleteOutcome: delivered, retried, dead). */
  deliveriesCompleted(o: { delivered: number; retried: number; dead: number }): void {
    if (o.delivered > 0) this.deliveries.inc({ outcome: 'delivered' }, o.delivered);
    if (o.retried > 0) this.deliveries.inc({ outcome: 'failed' }, o.retried);
    if (o.dead > 0) this.deliveries.inc({ outcome: 'dead' }, o.dead);
  }

  /** A provider answer passed verification; `root`: how its transaction root was checked. */
  blockVerified(root: 'exact' | 'json' | 'unverifiable'): void {
    this.blockVerifications.inc({ root });
  }

  /** Provider `index`'s answer failed the verification `check`. */
  nodeAnswerRefused(index: number, check: string): void {
    this.nodeAnswersRefused.inc({ provider: String(index), check });
  }

  /**
   * The light client's state after a block it checked (src/ingest/finality-gate.ts status()).
   */
  lightClient(s: {
    final: { number: number; timestamp: number };
    epoch: number;
    knownSrs: number;
    threshold: number;
    waiting: number;
  }): void {
    this.lightClientState = {
      final: s.final.number,
      finalTimestampMs: s.final.timestamp,
      epoch: s.epoch,
      knownSrs: s.knownSrs,
      threshold: s.threshold,
      waiting: s.waiting,
    };
  }

  /** The light client refused a block; `code`: its LightClientError code, or `other`. */
  lightClientRefused(code: string): void {
    this.lightClientRefusals.inc({ code });
  }

  /** Provider `index` reported an impossible head (ignored). */
  nodeHeadIgnored(index: number): void {
    this.nodeHeadsIgnored.inc({ provider: String(index) });
  }

  /** The providers disagreed on a block. */
  quorumDisagreement(): void {
    this.quorumDisagreements.inc();
  }

  /** Provider `index` serves (true) or is set aside or unhealthy (false). */
  nodeProvider(index: number, up: boolean): void {
    this.nodeProviderUp.set({ provider: String(index) }, up ? 1 : 0);
  }

  /** Count a node client's requests (its running `requestCount`, read at scrape). */
  /**
   * Count rows the pruning job removed: `kind` is the table (or `attempt_details`), a short fixed
   * name chosen where the kind is registered (src/retention/prune.ts), never a value from data.
   * A count of 0 still creates the series (so a dashboard sees 0, not no data).
   */
  pruned(kind: string, rows: number): void {
    this.prunedRows.inc({ kind }, rows);
  }

  /** Count one pruning pass: ran (held the lease), skipped (another process held it), failed. */
  prunePass(outcome: 'ran' | 'skipped' | 'failed'): void {
    this.prunePasses.inc({ outcome });
  }

  countNodeRequests(requestCount: () => number): void {
    this.nodeRequestCounts.push(requestCount);
  }

  /** The Prometheus text exposition of every metric. Never rejects on a database failure. */
  render(): Promise<string> {
    return this.registry.metrics();
  }

  /** Content-Type of {@link render}'s output. */
  get contentType(): string {
    return this.registry.contentType;
  }

  /** The outbox gauges' values: one query per scrape, undefined when it fails or times out. */
  private outbox(): Promise<OutboxSnapshot | undefined> {
    const db = this.db;
    if (!db) return Promise.resolve(undefined);
    this.outboxRead ??= readWithin(async () => {
      const { rows } = await db.query<{ pending: number; oldest_due_seconds: number }>(OUTBOX_SQL);
      const r = rows[0];
      return r
        ? { pending: Number(r.pending), oldestDueSeconds: Math.max(0, r.oldest_due_seconds) }
        : undefined;
    }, SCRAPE_QUERY_TIMEOUT_MS)
      .catch((err: unknown) => {
        this.logger?.warn(
          { err: err instanceof Error ? err.message : String(err) },
          'metrics: outbox gauges unavailable (database read failed)',
        );
        return undefined;
      })
      .finally(() => {
        this.outboxRead = null;
      });
    return this.outboxRead;
  }
}

/** `fn()`, or a rejection after `ms` (the read itself is left to finish or fail on its own). */
async function readWithin<T>(fn: () => Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([fn(), deadline]);
  } finally {
    clearTimeout(timer);
  }
}
