/**
 * Numbered SQL migrations (`migrations/NNN.do.<name>.sql`, forward only), applied by
 * postgrator inside ONE transaction that first takes a transaction-scoped advisory lock:
 * two processes starting at once serialise on the lock, the second finds nothing to do, and a
 * failing migration leaves the schema exactly as it was. Checksums of applied files are
 * verified, so an edited migration fails loudly instead of drifting.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Postgrator from 'postgrator';
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
