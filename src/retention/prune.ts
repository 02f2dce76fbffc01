/**
 * The pruning job (issue 17 item 4: bounded growth). Every PRUNE_INTERVAL_SECONDS one process of
 * the deployment (the worker role; one at a time through the lease 'prune', lease.ts) removes what
 * outlived its retention (config `retention`, docs/operating.md "Retention"):
 *
 * | kind | what | when |
 * |---|---|---|
 * | console_sessions | a console session, deleted | TOKEN_RETENTION_HOURS after it expired or was revoked |
 * | console_invites | an invitation, deleted | TOKEN_RETENTION_HOURS after it was used or expired |
 * | telegram_link_tokens | a "Connect Telegram" token, deleted | TOKEN_RETENTION_HOURS after it was used or expired |
 * | console_password_resets | a password reset link, deleted | TOKEN_RETENTION_HOURS after it was used or expired |
 * | console_login_challenges | the step between password and second factor, deleted | TOKEN_RETENTION_HOURS after it was used or expired |
 * | attempt_details | an attempt's request headers, response headers and response body, cleared (set NULL) | ATTEMPT_DETAIL_RETENTION_DAYS after the attempt started |
 * | events (+ notifications, attempts) | an event with every notification and attempt of it, deleted | EVENT_RETENTION_DAYS after it was created, only when set, and never while its newest notification is PENDING or DEAD |
 *
 * Work is done in batches of at most PRUNE_BATCH_SIZE rows, each batch one statement (or, for
 * events, one short transaction), so no lock is held longer than one batch: a batch picks its rows
 * with FOR UPDATE SKIP LOCKED, never waiting for a row another transaction holds (that row is
 * simply left for the next pass). Each task repeats its batch until one comes back short. Every
 * statement is safe to run twice at once, so two passes that overlap (a lease that expired under
 * a stalled process) only duplicate work.
 *
 * Another table is added with one line in {@link pruneTasks}: {@link deleteEnded} builds the task
 * for "delete rows whose timestamp columns are older than a retention", counted under its kind.
 */
import { randomBytes } from 'node:crypto';
import { recordAudit, SYSTEM_ACTORS } from '../audit/audit.js';
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import { sleep } from '../common/retry.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import { releaseLease, takeLease } from './lease.js';

/** Rows pruned by one step or one pass, by kind (the metric's label). */
export type PruneCounts = Record<string, number>;

/** One kind of pruning, run step by step within a pass. A fresh task is made for every pass. */
export interface PruneTask {
  /** Short fixed name (logs); its counts carry their own kinds. */
  readonly name: string;
  /**
   * Prune at most `limit` rows in one statement or one short transaction.
   * @returns the rows pruned, by kind, and `done` when nothing more is due in this pass.
   * @throws the database error (the pass stops; the next one starts over).
   */
  step(db: Db, limit: number): Promise<{ pruned: PruneCounts; done: boolean }>;
}

const IDENT = /^[a-z_][a-z0-9_]*$/;

/**
 * A task deleting rows of `table` once any of `columns` (timestamptz; NULL = not ended) is older
 * than `keepMs`: e.g. `deleteEnded({ kind: 'audit_log', table: 'audit_log', columns:
 * ['created_at'], keepMs })`. Rows are picked by ctid with FOR UPDATE SKIP LOCKED, at most `limit`
 * per statement; an index on each column keeps a batch from scanning the table.
 * @param kind the metric label (pruned_rows_total{kind}); by convention the table's name.
 * @throws Error when a name is not a plain lowercase SQL identifier (they are spliced into SQL).
 */
export function deleteEnded(opts: {
  kind: string;
  table: string;
  columns: readonly string[];
  keepMs: number;
}): PruneTask {
  for (const id of [opts.table, ...opts.columns]) {
    if (!IDENT.test(id)) throw new Error(`deleteEnded: not a plain identifier: ${id}`);
  }
  if (opts.columns.length === 0) throw new Error('deleteEnded: no column');
  const ended = opts.columns
    .map((c) => `${c} < now() - make_interval(secs => $1::float8 / 1000)`)
    .join(' OR ');
  const sql = `DELETE FROM ${opts.table} WHERE ctid = ANY (ARRAY(
      SELECT ctid FROM ${opts.table} WHERE ${ended} LIMIT $2 FOR UPDATE SKIP LOCKED))`;
  return {
    name: opts.kind,
    async step(db, limit) {
      const { rowCount } = await db.query(sql, [opts.keepMs, limit]);
      return { pruned: { [opts.kind]: rowCount }, done: rowCount < limit };
    },
  };
}

/**
 * Clear the request and response details of attempts started more than `keepMs` ago (the row, its
 * times, status, error and class stay: the delivery history keeps its shape). Walks migration
 * 024's partial index: a cleared row leaves it.
 */
export function clearAttemptDetails(keepMs: number): PruneTask {
  const details =
    '(request_headers IS NOT NULL OR response_headers IS NOT NULL OR response_body IS NOT NULL)';
  return {
    name: 'attempt_details',
    async step(db, limit) {
      const { rowCount } = await db.query(
        `UPDATE attempts SET request_headers = NULL, response_headers = NULL, response_body = NULL
          WHERE id IN (SELECT id FROM attempts
                        WHERE started_at < now() - make_interval(secs => $1::float8 / 1000)
                          AND ${details}
                        LIMIT $2 FOR UPDATE SKIP LOCKED)`,
        [keepMs, limit],
      );
      return { pruned: { attempt_details: rowCount }, done: rowCount < limit };
    },
  };
}

/**
 * Delete events created more than `keepMs` ago with their notifications and attempts, except an
 * event whose newest notification is PENDING or DEAD (still being delivered, or a dead letter the
 * user may redeliver: kept until it is DELIVERED, then pruned like the others).
 *
 * Account by account, oldest first, on the events page's own index (account_id, created_at):
 * each step locks a window of at most `limit` of the account's old events (FOR UPDATE SKIP
 * LOCKED: a redelivery locks the event first, src/events/redeliver.ts, so the two never cross),
 * deletes those eligible in the same transaction, and moves a cursor past the window, so events
 * that must stay are read once per pass, not once per step.
 */
export function deleteOldEvents(keepMs: number): PruneTask {
  let accounts: string[] | undefined;
  let i = 0;
  let after: string | null = null;
  return {
    name: 'events',
    async step(db, limit) {
      if (accounts === undefined) {
        accounts = (await db.query<{ id: string }>('SELECT id FROM accounts ORDER BY id')).rows.map(
          (r) => r.id,
        );
      }
      const account = accounts[i];
      if (account === undefined) return { pruned: {}, done: true };
      const pruned = await db.transaction(async (tx) => {
        const { rows: window } = await tx.query<{ id: string; created_at: string }>(
          `SELECT e.id, e.created_at::text AS created_at FROM events e
            WHERE e.account_id = $1
              AND e.created_at < now() - make_interval(secs => $2::float8 / 1000)
              AND ($3::text IS NULL OR e.created_at > $3::text::timestamptz)
            ORDER BY e.created_at
            LIMIT $4
              FOR UPDATE SKIP LOCKED`,
          [account, keepMs, after, limit],
        );
        const last = window[window.length - 1];
        if (window.length < limit || !last) {
          i++;
          after = null;
        } else {
          after = last.created_at;
        }
        if (window.length === 0) return { events: 0, notifications: 0, attempts: 0 };
        const { rows: eligible } = await tx.query<{ id: string }>(
          `SELECT x.id FROM unnest($1::text[]) AS x(id)
            WHERE NOT EXISTS (SELECT 1 FROM notifications p
                               WHERE p.event_id = x.id AND p.status = 'PENDING')
              AND (SELECT n.status FROM notifications n WHERE n.event_id = x.id
                    ORDER BY n.created_at DESC, n.id DESC LIMIT 1) IS DISTINCT FROM 'DEAD'`,
          [window.map((r) => r.id)],
        );
        const ids = eligible.map((r) => r.id);
        if (ids.length === 0) return { events: 0, notifications: 0, attempts: 0 };
        const a = await tx.query(
          `DELETE FROM attempts WHERE notification_id IN
             (SELECT id FROM notifications WHERE event_id = ANY ($1::text[]))`,
          [ids],
        );
        const n = await tx.query('DELETE FROM notifications WHERE event_id = ANY ($1::text[])', [
          ids,
        ]);
        const e = await tx.query('DELETE FROM events WHERE id = ANY ($1::text[])', [ids]);
        return { events: e.rowCount, notifications: n.rowCount, attempts: a.rowCount };
      });
      return { pruned, done: i >= accounts.length };
    },
  };
}

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;

/**
 * The tasks of one pass, in order, for the configured retention. Add a table here (an audit log,
 * …) with {@link deleteEnded} or a task of its own; its kind appears in pruned_rows_total.
 */
export function pruneTasks(r: Config['retention'] & { auditDays?: number }): PruneTask[] {
  const tokensMs = r.tokenHours * HOUR_MS;
  const tasks: PruneTask[] = [
    deleteEnded({
      kind: 'console_sessions',
      table: 'console_sessions',
      columns: ['expires_at', 'revoked_at'],
      keepMs: tokensMs,
    }),
    deleteEnded({
      kind: 'console_invites',
      table: 'console_invites',
      columns: ['expires_at', 'used_at'],
      keepMs: tokensMs,
    }),
    deleteEnded({
      kind: 'telegram_link_tokens',
      table: 'telegram_link_tokens',
      columns: ['expires_at', 'used_at'],
      keepMs: tokensMs,
    }),
    deleteEnded({
      kind: 'console_password_resets',
      table: 'console_password_resets',
      columns: ['expires_at', 'used_at'],
      keepMs: tokensMs,
    }),
    deleteEnded({
      kind: 'console_login_challenges',
      table: 'console_login_challenges',
      columns: ['expires_at', 'used_at'],
      keepMs: tokensMs,
    }),
    clearAttemptDetails(r.attemptDetailDays * DAY_MS),
  ];
  // The audit log (issue 18 item 5): AUDIT_RETENTION_DAYS, on its index audit_log_at.
  if (r.auditDays !== undefined) {
    tasks.push(
      deleteEnded({
        kind: 'audit_log',
        table: 'audit_log',
        columns: ['at'],
        keepMs: r.auditDays * DAY_MS,
      }),
    );
  }
  if (r.eventDays !== undefined) tasks.push(deleteOldEvents(r.eventDays * DAY_MS));
  return tasks;
}

/** The lease every pruning process competes for (maintenance_leases.name). */
export const PRUNE_LEASE = 'prune';

/** How long one step may run before the lease it renewed could pass to another process, ms. */
const STEP_LEASE_MS = 120_000;

export interface PrunerOptions {
  db: Db;
  /** The retention settings, with AUDIT_RETENTION_DAYS as `auditDays` (unset: audit kept). */
  retention: Config['retention'] & { auditDays?: number };
  logger: Logger;
  metrics?: Metrics;
  /** This process's lease holder id; default a random one. */
  holder?: string;
  /** The tasks of a pass; default {@link pruneTasks} of `retention`. */
  tasks?: (r: Config['retention'] & { auditDays?: number }) => PruneTask[];
}

/** What one pass did: null when another process held the lease. */
export type PassResult = { pruned: PruneCounts; steps: number } | null;

/**
 * The pruning loop of one process. Each tick it takes the lease 'prune' (lease.ts); holding it, it
 * runs every task to completion (renewing the lease before each step), then keeps the lease until
 * the next interval, so across replicas one pass runs per interval; a process that stops releases
 * it. Errors are logged and counted; the next tick tries again.
 */
export class Pruner {
  readonly holder: string;
  private readonly o: PrunerOptions;
  private stopping: AbortController | undefined;
  private loop: Promise<void> | undefined;

  constructor(o: PrunerOptions) {
    this.o = o;
    this.holder = o.holder ?? `prune-${randomBytes(6).toString('hex')}`;
  }

  /**
   * One pass, now, if this process gets the lease.
   * @returns what was pruned, or null when another process holds the lease.
   * @throws the database error of the step that failed (what ran before it is kept).
   */
  async runOnce(signal?: AbortSignal): Promise<PassResult> {
    const { db, retention, metrics } = this.o;
    const intervalMs = retention.intervalSeconds * 1000;
    if (!(await takeLease(db, PRUNE_LEASE, this.holder, Math.max(STEP_LEASE_MS, intervalMs)))) {
      metrics?.prunePass('skipped');
      return null;
    }
    const pruned: PruneCounts = {};
    let steps = 0;
    try {
      for (const task of (this.o.tasks ?? pruneTasks)(retention)) {
        for (;;) {
          if (signal?.aborted) return { pruned, steps };
          if (!(await takeLease(db, PRUNE_LEASE, this.holder, STEP_LEASE_MS))) {
            this.o.logger.warn({ holder: this.holder }, 'prune lease lost: pass stopped');
            return { pruned, steps };
          }
          const r = await task.step(db, retention.batchSize);
          steps++;
          for (const [kind, n] of Object.entries(r.pruned)) {
            pruned[kind] = (pruned[kind] ?? 0) + n;
            metrics?.pruned(kind, n);
          }
          if (r.done) break;
        }
      }
      // Held until the next interval: one pass per interval across the deployment.
      await takeLease(db, PRUNE_LEASE, this.holder, intervalMs);
      metrics?.prunePass('ran');
      if (Object.values(pruned).some((n) => n > 0)) {
        this.o.logger.info({ pruned, steps }, 'pruned');
        // A pass that deleted something is the system's act in the audit log (issue 29 item 2):
        // deployment-wide, as the CLI's secret rotation, with what it deleted of each kind.
        await recordAudit(
          db,
          { accountId: null, actor: SYSTEM_ACTORS.retention, clientIp: null },
          { action: 'retention.pruned', detail: { ...pruned, steps } },
        );
      }
      return { pruned, steps };
    } catch (err) {
      metrics?.prunePass('failed');
      throw err;
    }
  }

  /**
   * Run a pass now and every PRUNE_INTERVAL_SECONDS until `signal` aborts or {@link stop}.
   * @returns when the loop has ended. Never rejects (failures are logged).
   */
  start(signal: AbortSignal): Promise<void> {
    const ac = new AbortController();
    this.stopping = ac;
    const both = AbortSignal.any([signal, ac.signal]);
    const intervalMs = this.o.retention.intervalSeconds * 1000;
    this.loop = (async () => {
      while (!both.aborted) {
        try {
          await this.runOnce(both);
        } catch (err) {
          this.o.logger.warn(
            { err: err instanceof Error ? err.message : String(err) },
            'prune pass failed; retried at the next interval',
          );
        }
        await sleep(intervalMs, both);
      }
      await releaseLease(this.o.db, PRUNE_LEASE, this.holder).catch(() => undefined);
    })();
    return this.loop;
  }

  /** Stop the loop: the step in progress finishes, the lease is released. Idempotent. */
  async stop(): Promise<void> {
    this.stopping?.abort();
    await this.loop;
  }
}
