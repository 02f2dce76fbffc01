/**
 * Numbered SQL migrations (`migrations/NNN.do.<name>.sql`, forward only), applied by
 * postgrator inside ONE transaction that first takes a transaction-scoped advisory lock:
 * two processes starting at once serialise on the lock, the second finds nothing to do, and a
 * failing migration leaves the schema exactly as it was. Checksums of applied files are
 * verified, so an edited migration fails loudly instead of drifting. At start, processes call
 * migrateWhenReachable, which waits for an unreachable PostgreSQL instead of failing.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Postgrator from 'postgrator';
import type { Logger } from '../common/logger.js';
import { backoffDelay, sleep } from '../common/retry.js';
import { isRetryableDbError } from './errors.js';
import type { Db } from './pool.js';

/** Folder of the SQL files, next to src/ and dist/. */
export const MIGRATIONS_DIR = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '..',
  '..',
  'migrations',
);

/** Arbitrary, fixed: the advisory-lock key every tronwatch process uses for migrations. */
const MIGRATION_LOCK_KEY = 0x7477_6d69; // "twmi"

export interface MigrateResult {
  /** Versions applied by this call (empty when the schema was current). */
  applied: number[];
  /** Schema version after the call. */
  version: number;
}

/**
 * Apply every pending migration.
 * @param dir folder of the migration files (tests pass their own).
 * @throws the database error of the failing migration (nothing of it is kept).
 */
export async function migrate(db: Db, dir: string = MIGRATIONS_DIR): Promise<MigrateResult> {
  return db.transaction(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
    const postgrator = new Postgrator({
      migrationPattern: path.join(dir, '*.do.*.sql'),
      driver: 'pg',
      schemaTable: 'schema_migrations',
      validateChecksums: true,
      execQuery: async (sql: string) => {
        const r = await tx.query(sql);
        return { rows: r.rows };
      },
    });
    const applied = await postgrator.migrate();
    const version = Number(await postgrator.getDatabaseVersion());
    return { applied: applied.map((m) => Number(m.version)), version };
  });
}

/** Backoff of the start-up wait for the database: full jitter, ceiling 250 ms doubling to 5 s. */
export const START_BACKOFF = { baseMs: 250, capMs: 5_000 } as const;
/** Shortest pause between two start-up attempts, ms: full jitter may draw ~0. */
const START_MIN_DELAY_MS = 100;

export interface MigrateWhenReachableOptions {
  logger: Logger;
  /** Aborted: stop waiting (the process is shutting down); the call then rejects. */
  signal: AbortSignal;
  /** Folder of the migration files (tests). */
  dir?: string;
}

/**
 * `migrate`, waiting for the database first (issue 17 item 6): a process started while
 * PostgreSQL is down, restarting or still in crash recovery retries until it answers, instead of
 * exiting. Only errors that say the database is unreachable or not yet accepting sessions wait
 * (isRetryableDbError: refused, reset, timed out, host not found, 57P03, 08xxx, …); anything else
 * (wrong password, missing database, a failing migration) rejects at once, as a configuration
 * error a restart would not fix.
 *
 * Pauses: START_BACKOFF (full jitter, at most 5 s, at least 100 ms), so the process starts within
 * about 5 s of PostgreSQL returning, and replicas started together do not retry in step. Logs once
 * per episode: a warning at the first failure ('PostgreSQL unreachable: waiting to start'), each
 * retry at debug level, and 'PostgreSQL reachable: starting' (attempts, waited_ms) at the end.
 * @throws the first non-retryable error; `signal.reason` (or an Error) when aborted meanwhile.
 */
export async function migrateWhenReachable(
  db: Db,
  opts: MigrateWhenReachableOptions,
): Promise<MigrateResult> {
  const { logger, signal } = opts;
  const began = Date.now();
  for (let attempt = 1; ; attempt++) {
    if (signal.aborted) throw abortError(signal);
    try {
      const r = await migrate(db, opts.dir);
      if (attempt > 1) {
        logger.info(
          { attempts: attempt, waited_ms: Date.now() - began },
          'PostgreSQL reachable: starting',
        );
      }
      return r;
    } catch (err) {
      if (!isRetryableDbError(err) || signal.aborted)
        throw signal.aborted ? abortError(signal) : err;
      const delayMs = Math.max(START_MIN_DELAY_MS, backoffDelay(attempt, START_BACKOFF));
      const fields = {
        err: err instanceof Error ? err.message : String(err),
        attempt,
        delay_ms: delayMs,
      };
      if (attempt === 1) {
        logger.warn(
          { ...fields, max_delay_ms: START_BACKOFF.capMs },
          'PostgreSQL unreachable: waiting to start',
        );
      } else {
        logger.debug(fields, 'PostgreSQL still unreachable');
      }
      await sleep(delayMs, signal);
    }
  }
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error ? signal.reason : new Error('aborted while starting');
}
