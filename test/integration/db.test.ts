import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { MIGRATIONS_DIR, migrate } from '../../src/db/migrate.js';
import { EmbeddedDbLockedError, openDb } from '../../src/db/pool.js';
import { runCli } from '../helpers/cli.js';
import { dbEngines, emptyDb, type TestDb } from '../helpers/db.js';

const migrationCount = fs
  .readdirSync(MIGRATIONS_DIR)
  .filter((f) => /^\d+\.do\..*\.sql$/.test(f)).length;

describe.each(dbEngines)('database layer on %s', (engine) => {
  let t: TestDb | undefined;
  afterEach(async () => {
    await t?.drop();
    t = undefined;
  });

  it('applies every migration once, then nothing', async () => {
    t = await emptyDb(engine);
    const first = await migrate(t.db);
    expect(first.applied).toHaveLength(migrationCount);
    expect(first.version).toBe(Math.max(...first.applied));
    const second = await migrate(t.db);
    expect(second.applied).toEqual([]);
    expect(second.version).toBe(first.version);
    const { rows } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM chain_cursor',
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('makes every identifier column compare as bytes, free text not (migration 005)', async () => {
    t = await emptyDb(engine);
    await migrate(t.db);
    const { rows } = await t.db.query<{ col: string; collation: string | null }>(
      `SELECT table_name || '.' || column_name AS col, collation_name AS collation
         FROM information_schema.columns
        WHERE table_schema = current_schema() AND data_type = 'text' AND table_name <> 'schema_migrations'`,
    );
    // Identifiers by name: ids, references, hashes, hex, base58 and network names. A new column
    // named like one must be created COLLATE "C" too.
    const identifier = (col: string) =>
      /\.(id|[a-z_]+_id|key_hash|network|address|address_hex|tx_id|from_address|to_address|contract|block_id|lease_token)$/.test(
        col,
      );
    const ids = rows.filter((r) => identifier(r.col));
    expect(ids.map((r) => r.col)).toEqual(
      expect.arrayContaining(['events.id', 'events.account_id', 'notifications.event_id']),
    );
    expect(ids.length).toBeGreaterThanOrEqual(29);
    expect(ids.filter((r) => r.collation !== 'C')).toEqual([]);
    // Free text keeps the database's collation.
    const email = rows.find((r) => r.col === 'accounts.email');
    expect(email?.collation).not.toBe('C');
  });

  it("leaves a fresh installation's tables unanalyzed (analyzed empty, they would plan as empty)", async () => {
    t = await emptyDb(engine);
    await migrate(t.db);
    const { rows } = await t.db.query<{ relname: string; reltuples: number }>(
      `SELECT relname, reltuples::int8 AS reltuples FROM pg_class
        WHERE relnamespace = current_schema()::regnamespace AND relkind = 'r'
          AND relname <> 'schema_migrations' ORDER BY relname`,
    );
    expect(rows.map((r) => r.relname)).toContain('events');
    expect(rows.filter((r) => r.reltuples !== -1)).toEqual([]);
  });

  it('keeps the planner statistics through migration 005 (its type changes drop them)', async () => {
    t = await emptyDb(engine);
    const db = t.db;
    const upTo4 = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-migrations-'));
    for (const f of fs.readdirSync(MIGRATIONS_DIR).filter((f) => /^00[1-4]\.do\./.test(f)))
      fs.copyFileSync(path.join(MIGRATIONS_DIR, f), path.join(upTo4, f));
    expect((await migrate(db, upTo4)).version).toBe(4);
    fs.rmSync(upTo4, { recursive: true, force: true });
    await db.query(
      "INSERT INTO accounts (id, email, plan) VALUES ('acc_s', 's@example.com', 'free')",
    );
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction,
                            channel, webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       VALUES ('wh_s', 'acc_s', 'mainnet', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
               '41a614f803b6fd780986a42c78ec9c7f77e6ded13c', 'ALL', 'both', 'webhook',
               'https://example.com/hook', 'k', '\\x00'::bytea, 1)`,
    );
    await db.query(
      `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                           block_number, block_timestamp, from_address, to_address, amount_raw, created_at)
       SELECT 'evt_' || g, 'acc_s', 'wh_s', 'mainnet', 'incoming', 'TRX', md5(g::text), 0, g, now(),
              'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', g,
              timestamptz '2026-01-01' + g * interval '1 microsecond'
         FROM generate_series(1, 500) g`,
    );
    await db.query('ANALYZE events');
    const statsColumns = async () =>
      (
        await db.query<{ attname: string }>(
          `SELECT attname FROM pg_stats
            WHERE schemaname = current_schema() AND tablename = 'events'
              AND attname IN ('id', 'account_id', 'created_at') ORDER BY attname`,
        )
      ).rows.map((r) => r.attname);
    expect(await statsColumns()).toEqual(['account_id', 'created_at', 'id']);
    expect((await migrate(db)).applied).toContain(5);
    expect(await statsColumns()).toEqual(['account_id', 'created_at', 'id']);
  });

  it('is safe when several migrators start at once', async () => {
    t = await emptyDb(engine);
    // On PostgreSQL each migrator has its own pool (as separate processes would); PGlite has one connection.
    const dbs =
      engine === 'postgres'
        ? await Promise.all([1, 2, 3].map(() => openDb({ url: t!.url, embeddedDir: '' })))
        : [t.db, t.db, t.db];
    try {
      const results = await Promise.all(dbs.map((d) => migrate(d)));
      const applied = results.flatMap((r) => r.applied).sort();
      expect(applied).toHaveLength(migrationCount);
      expect(new Set(results.map((r) => r.version)).size).toBe(1);
    } finally {
      if (engine === 'postgres') await Promise.all(dbs.map((d) => d.close()));
    }
  });

  it.runIf(engine === 'postgres')(
    'runs a named statement again when a migration changed its result under the pool',
    async () => {
      t = await emptyDb(engine);
      await t.db.query('CREATE TABLE stale_t (id text PRIMARY KEY, v int)');
      await t.db.query("INSERT INTO stale_t VALUES ('a', 1)");
      const pool = await openDb({ url: t.url, embeddedDir: '', poolSize: 3 });
      try {
        const sql = 'SELECT id, v, pg_sleep(0.05) IS NULL AS slept FROM stale_t';
        const named = () => pool.query<{ id: string }>(sql, [], { name: 'stale_test' });
        // Three at once: the statement is prepared on each of the pool's three connections.
        await Promise.all([named(), named(), named()]);
        // What migration 005 does to a result column, from another connection.
        await t.db.query('ALTER TABLE stale_t ALTER COLUMN id TYPE text COLLATE "C"');
        const rows = await Promise.all([named(), named(), named(), named()]);
        expect(rows.map((r) => r.rows[0]?.id)).toEqual(['a', 'a', 'a', 'a']);
        // An unnamed statement's errors are not retried (the rule is for stale plans only).
        await expect(pool.query('SELECT no_such_column FROM stale_t')).rejects.toThrow(
          /no_such_column/,
        );
      } finally {
        await pool.close();
      }
    },
  );

  it('rolls a failing migration back entirely', async () => {
    t = await emptyDb(engine);
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-mig-'));
    fs.writeFileSync(path.join(dir, '001.do.good.sql'), 'CREATE TABLE good (id int);');
    fs.writeFileSync(
      path.join(dir, '002.do.bad.sql'),
      'CREATE TABLE half (id int); SELECT no_such_function();',
    );
    await expect(migrate(t.db, dir)).rejects.toThrow(/no_such_function/);
    const { rows } = await t.db.query<{ n: number }>(
      "SELECT count(*)::int8 AS n FROM information_schema.tables WHERE table_name IN ('good', 'half', 'schema_migrations')",
    );
    expect(rows[0]?.n).toBe(0);
  });

  it('returns int8 as number and numeric as an exact string', async () => {
    t = await emptyDb(engine);
    const { rows } = await t.db.query<{ a: number; b: string }>(
      "SELECT 79072107::int8 AS a, '115792089237316195423570985008687907853269984665640564039457584007913129639935'::numeric AS b",
    );
    expect(rows[0]).toEqual({
      a: 79072107,
      b: '115792089237316195423570985008687907853269984665640564039457584007913129639935',
    });
  });

  it('commits or rolls back a transaction as a whole', async () => {
    t = await emptyDb(engine);
    await t.db.query('CREATE TABLE t (id int PRIMARY KEY)');
    await expect(
      t.db.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (1)');
        await tx.query('INSERT INTO t VALUES (1)'); // duplicate key
      }),
    ).rejects.toThrow();
    await t.db.transaction(async (tx) => {
      await tx.query('INSERT INTO t VALUES (2)');
    });
    const { rows } = await t.db.query<{ id: number }>('SELECT id FROM t');
    expect(rows).toEqual([{ id: 2 }]);
  });

  it.skipIf(engine !== 'postgres')(
    'a transaction whose connection is terminated rejects; the process does not crash',
    async () => {
      // Found by the chaos soak: pg-pool drops its 'error' listener from a checked-out client,
      // so a connection ended by the server mid-transaction (a restart) was an unhandled 'error'
      // event that killed the process. Vitest fails the file on such an uncaught error.
      t = await emptyDb(engine);
      const db = t.db;
      await db.query('CREATE TABLE t (id int PRIMARY KEY)');
      await expect(
        db.transaction(async (tx) => {
          const { rows } = await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
          await db.query('SELECT pg_terminate_backend($1)', [rows[0]?.pid]);
          // Let the 'error' event arrive while no query of this transaction is in flight.
          await new Promise((r) => setTimeout(r, 200));
          await tx.query('INSERT INTO t VALUES (1)');
        }),
      ).rejects.toThrow();
      await db.transaction(async (tx) => {
        await tx.query('INSERT INTO t VALUES (2)');
      });
      const { rows } = await db.query<{ id: number }>('SELECT id FROM t');
      expect(rows).toEqual([{ id: 2 }]);
    },
  );
});

describe('the embedded data folder', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
  });

  it('is held by one process: another open is refused (in-process and a CLI), then allowed once closed', {
    timeout: 120_000,
  }, async () => {
    const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-embedded-'));
    dirs.push(dataDir);
    const embeddedDir = path.join(dataDir, 'pgdata');
    const first = await openDb({ url: undefined, embeddedDir });
    try {
      await migrate(first);
      await first.query(
        "INSERT INTO accounts (id, email, plan) VALUES ('acc_1', 'a@example.com', 'pro')",
      );
      await expect(openDb({ url: undefined, embeddedDir })).rejects.toBeInstanceOf(
        EmbeddedDbLockedError,
      );
      // The CLI in another process: refused with the reason, nothing written.
      const cli = await runCli(
        ['accounts', 'create', '--email', 'b@example.com', '--plan', 'pro'],
        {
          DATA_DIR: dataDir,
          DATABASE_URL: '',
        },
      );
      expect(cli.code).toBe(1);
      expect(cli.stderr).toContain('is open in another tronwatch process');
    } finally {
      await first.close();
    }
    // Closed: the folder opens again, with what the first process committed and nothing else.
    const again = await openDb({ url: undefined, embeddedDir });
    try {
      const { rows } = await again.query<{ email: string }>('SELECT email FROM accounts');
      expect(rows).toEqual([{ email: 'a@example.com' }]);
    } finally {
      await again.close();
    }
  });
});
