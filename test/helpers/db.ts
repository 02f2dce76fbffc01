/**
 * A fresh database per test file, on both engines: PGlite (in memory) always, PostgreSQL when
 * DATABASE_URL is set (a new database on that server, dropped afterwards). The database tests
 * run once per engine through `dbEngines`.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { type Db, openDb, PgliteDb } from '../../src/db/pool.js';

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

/**
 * A tarball of an in-memory PGlite cluster with every migration applied, made once per migration
 * set and PGlite version and kept in the system's temporary folder for every test process (file
 * name: a hash of both). A new PGlite cluster costs 1.5–3 s of CPU (its initdb) plus the
 * migrations; one loaded from this image about 0.35 s. Each database loaded from it is still its
 * own: nothing is shared after the load.
 */
let pgliteImage: Promise<Blob> | undefined;

async function migratedPgliteImage(): Promise<Blob> {
  pgliteImage ??= (async () => {
    const files = (await fs.readdir(MIGRATIONS_DIR)).sort();
    const hash = createHash('sha256');
    const pkg = path.resolve(
      MIGRATIONS_DIR,
      '..',
      'node_modules/@electric-sql/pglite/package.json',
    );
    hash.update(JSON.parse(await fs.readFile(pkg, 'utf8')).version as string);
    for (const f of files) {
      hash
        .update(f)
        .update('\0')
        .update(await fs.readFile(path.join(MIGRATIONS_DIR, f)));
    }
    const file = path.join(
      os.tmpdir(),
      `tronwatch-test-pglite-${hash.digest('hex').slice(0, 16)}.tar`,
    );
    try {
      return new Blob([await fs.readFile(file)]);
    } catch {
      // Not made yet (or unreadable): make it and publish it atomically for the next processes.
    }
    const db = await openDb({ url: undefined, embeddedDir: 'memory://' });
    try {
      await migrate(db);
      if (!(db instanceof PgliteDb)) throw new Error('expected the embedded database');
      const image = await db.pg.dumpDataDir('none');
      const bytes = Buffer.from(await image.arrayBuffer());
      const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
      await fs.writeFile(tmp, bytes);
      await fs.rename(tmp, file);
      return new Blob([bytes]);
    } finally {
      await db.close();
    }
  })();
  return pgliteImage;
}

/** Create a database with every migration applied. */
export async function migratedDb(engine: Engine): Promise<TestDb> {
  if (engine === 'pglite') {
    const db = await openDb({
      url: undefined,
      embeddedDir: 'memory://',
      embeddedImage: await migratedPgliteImage(),
    });
    return { db, engine, url: undefined, drop: () => db.close() };
  }
  const t = await emptyDb(engine);
  await migrate(t.db);
  return t;
}
