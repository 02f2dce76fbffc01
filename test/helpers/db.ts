/**
 * A fresh database per test file, on both engines: PGlite (in memory) always, PostgreSQL when
 * DATABASE_URL is set (a new database on that server, dropped afterwards). The database tests
 * run once per engine through `dbEngines`.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { migrate } from '../../src/db/migrate.js';
import { type Db, openDb } from '../../src/db/pool.js';

export type Engine = 'pglite' | 'postgres';

export const POSTGRES_URL = process.env.DATABASE_URL;

/** Engines to run the database tests on. */
export const dbEngines: Engine[] = POSTGRES_URL ? ['pglite', 'postgres'] : ['pglite'];

if (!POSTGRES_URL) {
  if (process.env.CI === 'true')
    throw new Error('CI=true but DATABASE_URL is unset: the PostgreSQL tests must run in CI');
  console.warn(
    'DATABASE_URL is unset: database tests run on PGlite only (PostgreSQL tests skipped)',
  );
}

function withDatabase(url: string, database: string): string {
  const u = new URL(url);
  u.pathname = `/${database}`;
  return u.toString();
}

export interface TestDb {
  db: Db;
  engine: Engine;
  /** URL of the test database (postgres only). */
  url: string | undefined;
  drop(): Promise<void>;
}

/** Create an empty database (no migrations). */
export async function emptyDb(engine: Engine): Promise<TestDb> {
  if (engine === 'pglite') {
    const db = await openDb({ url: undefined, embeddedDir: 'memory://' });
    return { db, engine, url: undefined, drop: () => db.close() };
  }
  if (!POSTGRES_URL) throw new Error('DATABASE_URL unset');
  const name = `tw_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = withDatabase(POSTGRES_URL, name);
  const db = await openDb({ url, embeddedDir: '', poolSize: 10 });
  return {
    db,
    engine,
    url,
    async drop() {
      await db.close();
      const a = new pg.Client({ connectionString: POSTGRES_URL });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await a.end();
    },
  };
}

/** Create a database with every migration applied. */
export async function migratedDb(engine: Engine): Promise<TestDb> {
  const t = await emptyDb(engine);
  await migrate(t.db);
  return t;
}
