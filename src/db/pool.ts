/**
 * The database handle: a real PostgreSQL (node-postgres pool) when DATABASE_URL is set, an
 * embedded PostgreSQL (PGlite, WASM) in a local folder when it is not, held by one process at a
 * time (lockEmbeddedDir). Same SQL on both (PostgreSQL 15 features only; PGlite is 18).
 *
 * Type parsing is the same on both: int8 → JS number (every int8 we store — block numbers,
 * milliseconds, counters — is below 2^53), numeric → string (amounts never pass through a float),
 * timestamptz → Date.
 */
import fs from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import lockfile from 'proper-lockfile';
import type { Logger } from '../common/logger.js';
import { sqlState } from './sqlstate.js';

/** Options of one query. */
export interface QueryOptions {
  /**
   * Run as a named prepared statement (PostgreSQL extended protocol): parsed once per connection,
   * then only bound and executed; after five executions PostgreSQL keeps one generic plan when it
   * costs no more than planning for the values at hand. For the statements of the hot paths
   * (API-key lookup, the events page), where planning cost as much as executing (pgbench, events
   * page: 3,900 statements/s planned each time, 9,600 with one plan). The name must be unique per
   * SQL text in the process, and the statement's result columns must not change type under a
   * running process: PostgreSQL then refuses the connection's cached plan ("cached plan must not
   * change result type", before executing anything), node-postgres drops that connection, and
   * the query is run again on another (isStalePlan; as many times as the pool has connections),
   * so a migration such as 005 costs running processes no failed request.
   * Ignored by the embedded database (one connection).
   */
  name?: string;
}

/** Something that runs parameterised SQL: the pool, or a transaction's connection. */
export interface Queryable {
  query<R = Record<string, unknown>>(
    sql: string,
    params?: readonly unknown[],
    opts?: QueryOptions,
  ): Promise<{ rows: R[]; rowCount: number }>;
}

export interface Db extends Queryable {
  readonly kind: 'postgres' | 'pglite';
  /**
   * Run `fn` in one transaction on one connection (BEGIN … COMMIT, ROLLBACK on throw).
   * PGlite has one connection: the transaction holds it exclusively until it ends.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Close the pool or the embedded database. Idempotent. */
  close(): Promise<void>;
}

const INT8_OID = 20;

/**
 * PostgreSQL's refusal of a prepared statement whose result columns changed type or collation
 * under it (a migration ran while this process was up): SQLSTATE 0A000, raised while
 * revalidating the plan, before the statement runs, so running it again elsewhere is safe.
 */
function isStalePlan(err: unknown): boolean {
  return (
    sqlState(err) === '0A000' &&
    err instanceof Error &&
    err.message.includes('cached plan must not change result type')
  );
}

class PostgresDb implements Db {
  readonly kind = 'postgres' as const;
  readonly pool: pg.Pool;
  private readonly max: number;
  private closed = false;

  constructor(url: string, max: number) {
    this.max = max;
    this.pool = new pg.Pool({
      connectionString: url,
      max,
      // A dead server must surface as an error, not a hang (DESIGN: Postgres unreachable).
      connectionTimeoutMillis: 5_000,
      // A server that stops answering without closing the connection must not hang a request or
      // a loop forever: the query fails (retryable) after this long. Our statements take ms.
      query_timeout: 30_000,
      idleTimeoutMillis: 30_000,
      types: {
        getTypeParser: ((oid: number, format?: 'text' | 'binary') =>
          oid === INT8_OID
            ? (v: string) => Number(v)
            : pg.types.getTypeParser(oid, format ?? 'text')) as typeof pg.types.getTypeParser,
      },
    });
    // An idle client losing its connection (server restart) must not crash the process.
    this.pool.on('error', () => {});
  }

  async query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions) {
    const values = params as unknown[] | undefined;
    if (opts?.name === undefined) {
      const r = await this.pool.query(sql, values);
      return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
    }
    // A failed query's connection leaves the pool (pg-pool), so each stale plan is met once.
    for (let stale = 0; ; stale++) {
      try {
        const r = await this.pool.query({ name: opts.name, text: sql, values });
        return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
      } catch (err) {
        if (!isStalePlan(err) || stale >= this.max) throw err;
      }
    }
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    const client = await this.pool.connect();
    let broken = false;
    // pg-pool removes its idle 'error' listener from a client while it is checked out: a
    // connection that breaks during the transaction (a server restart, a reset) would emit an
    // unhandled 'error' and kill the process. The failure reaches `fn` through the query in
    // flight or the next one; here it only keeps the dead connection out of the pool.
    const onError = () => {
      broken = true;
    };
    client.on('error', onError);
    try {
      await client.query('BEGIN');
      const tx: Queryable = {
        async query<R>(sql: string, params?: readonly unknown[], opts?: QueryOptions) {
          const values = params as unknown[] | undefined;
          const r =
            opts?.name === undefined
              ? await client.query(sql, values)
              : await client.query({ name: opts.name, text: sql, values });
          return { rows: r.rows as R[], rowCount: r.rowCount ?? 0 };
        },
      };
      const result = await fn(tx);
      await client.query('COMMIT');
      return result;
    } catch (err) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true; // the connection is gone; do not return it to the pool
      }
      throw err;
    } finally {
      client.off('error', onError);
      client.release(broken);
    }
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    await this.pool.end();
  }
}

/** A FIFO mutex: PGlite has a single connection, so one transaction at a time owns it. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  async run<T>(fn: () => Promise<T>): Promise<T> {
    const prev = this.tail;
    let release = () => {};
    this.tail = new Promise<void>((r) => {
      release = r;
    });
    await prev;
    try {
      return await fn();
    } finally {
      release();
    }
  }
}

/**
 * PGlite's `query` is the extended protocol (one statement); a query without parameters goes
 * through `exec` (simple protocol), so multi-statement SQL such as a migration file runs as on
 * node-postgres. The rows returned are those of the last statement.
 */
async function pgliteQuery<R>(
  conn: Pick<PGlite, 'query' | 'exec'>,
  sql: string,
  params?: readonly unknown[],
): Promise<{ rows: R[]; rowCount: number }> {
  if (params && params.length > 0) {
    const r = await conn.query<R>(sql, params as unknown[]);
    return { rows: r.rows, rowCount: r.affectedRows ?? r.rows.length };
  }
  const results = await conn.exec(sql);
  const last = results[results.length - 1];
  return {
    rows: (last?.rows ?? []) as R[],
    rowCount: last?.affectedRows ?? last?.rows.length ?? 0,
  };
}

/** The embedded database (PGlite): one connection, serialised by a FIFO mutex; `pg` is the cluster. */
export class PgliteDb implements Db {
  readonly kind = 'pglite' as const;
  private readonly mutex = new Mutex();
  private closed = false;
  /** @param unlock releases the data folder's lock (none for an in-memory database). */
  constructor(
    readonly pg: PGlite,
    private readonly unlock?: () => Promise<void>,
  ) {}

  query<R>(sql: string, params?: readonly unknown[]) {
    return this.mutex.run(() => pgliteQuery<R>(this.pg, sql, params));
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return this.mutex.run(() =>
      this.pg.transaction(async (t) => {
        const tx: Queryable = { query: (sql, params) => pgliteQuery(t, sql, params) };
        return fn(tx);
      }),
    );
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    try {
      await this.mutex.run(() => this.pg.close());
    } finally {
      await this.unlock?.();
    }
  }
}

/** The embedded data folder is open in another process (EmbeddedDbLockedError.dir). */
export class EmbeddedDbLockedError extends Error {
  constructor(readonly dir: string) {
    super(
      `the embedded database in ${dir} is open in another tronwatch process: stop that process ` +
        'first (the embedded database serves one process; to run several, use PostgreSQL through DATABASE_URL)',
    );
    this.name = 'EmbeddedDbLockedError';
  }
}

/**
 * Hold the embedded data folder for this process: PGlite keeps the database in the memory of
 * the one process that opened it and writes it back to the folder, so two processes on one
 * folder (a second `serve`, or `tronwatch accounts create` while the service runs) would each
 * work on a copy and one's commits would be lost. The lock is `<dir>.lock` (proper-lockfile: a
 * directory created atomically, its mtime refreshed every 2 s; a lock not refreshed for 10 s,
 * its process dead, is taken over; released on close and on exit).
 * @throws EmbeddedDbLockedError when another live process holds the folder.
 */
async function lockEmbeddedDir(dir: string, logger?: Logger): Promise<() => Promise<void>> {
  try {
    return await lockfile.lock(dir, {
      stale: 10_000,
      update: 2_000,
      retries: 0,
      realpath: false,
      // A lock found refreshed by someone else (this process stalled past `stale`): the
      // folder may now be open twice. Logged (error), the process goes on (nothing else to do).
      onCompromised: (err) => {
        if (logger) {
          logger.error({ dir, err: err.message }, 'embedded database lock lost');
          return;
        }
        process.stderr.write(
          `${JSON.stringify({ level: 50, msg: 'embedded database lock lost', dir, err: err.message })}\n`,
        );
      },
    });
  } catch (err) {
    if ((err as { code?: string }).code === 'ELOCKED') throw new EmbeddedDbLockedError(dir);
    throw err;
  }
}

export interface OpenDbOptions {
  /** PostgreSQL URL; undefined selects the embedded database. */
  url: string | undefined;
  /** Folder of the embedded database; `memory://` keeps it in memory (tests). */
  embeddedDir: string;
  /** PostgreSQL connections in the pool, at most (DATABASE_POOL_SIZE). Default 10. */
  poolSize?: number;
  /**
   * Embedded only: start from this data folder image (a tarball from PGlite's `dumpDataDir`)
   * instead of an empty cluster. Tests start each in-memory database from one migrated image:
   * about 0.35 s instead of 1.5–3 s for a new cluster plus migrations.
   */
  embeddedImage?: Blob;
}

/**
 * Open the database selected by `url` (see module doc). Does not run migrations.
 * @param logger where the embedded database's lost-lock error goes (default: a JSON line on stderr).
 */
export async function openDb(opts: OpenDbOptions, logger?: Logger): Promise<Db> {
  if (opts.url) return new PostgresDb(opts.url, opts.poolSize ?? 10);
  let unlock: (() => Promise<void>) | undefined;
  if (!opts.embeddedDir.startsWith('memory://')) {
    await fs.mkdir(opts.embeddedDir, { recursive: true });
    unlock = await lockEmbeddedDir(opts.embeddedDir, logger);
  }
  try {
    const db = await PGlite.create(opts.embeddedDir, {
      parsers: { [INT8_OID]: (v) => Number(v) },
      ...(opts.embeddedImage ? { loadDataDir: opts.embeddedImage } : {}),
    });
    return new PgliteDb(db, unlock);
  } catch (err) {
    await unlock?.();
    throw err;
  }
}
