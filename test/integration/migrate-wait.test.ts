/**
 * migrateWhenReachable (src/db/migrate.ts, issue 17 item 6), in process: it waits for a PostgreSQL
 * that refuses connections (one warning, retries at debug level) until its signal aborts; it
 * rejects at once, without waiting, when PostgreSQL answers with a refusal no wait can fix (a
 * database that does not exist). The whole process-level behaviour (a server started later, the
 * API's 503s) is test/e2e/dependencies.test.ts.
 */
import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, describe, expect, it } from 'vitest';
import { migrateWhenReachable } from '../../src/db/migrate.js';
import { type Db, openDb } from '../../src/db/pool.js';
import { sqlState } from '../../src/db/sqlstate.js';
import { POSTGRES_URL } from '../helpers/db.js';
import { freePort } from '../helpers/servers.js';

function capture() {
  const lines: Array<{ msg: string; level: number }> = [];
  const logger = pino(
    { level: 'debug' },
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        for (const l of chunk.toString('utf8').split('\n').filter(Boolean))
          lines.push(JSON.parse(l) as { msg: string; level: number });
        cb();
      },
    }),
  );
  return { logger, lines };
}

const dbs: Db[] = [];
afterAll(async () => {
  for (const db of dbs) await db.close();
});

async function pool(url: string): Promise<Db> {
  const db = await openDb({ url, embeddedDir: '', poolSize: 1 });
  dbs.push(db);
  return db;
}

describe('migrateWhenReachable', () => {
  it('waits while PostgreSQL refuses connections: one warning, retries at debug, until aborted', async () => {
    const db = await pool(`postgres://postgres@127.0.0.1:${await freePort()}/x`);
    const { logger, lines } = capture();
    const ac = new AbortController();
    const waiting = migrateWhenReachable(db, { logger, signal: ac.signal });
    const outcome = waiting.then(
      () => 'resolved',
      (err: unknown) => err,
    );
    for (let i = 0; i < 400 && lines.filter((l) => l.level === 20).length < 3; i++)
      await new Promise((r) => setTimeout(r, 50));
    const stop = new Error('stop');
    ac.abort(stop);
    expect(await outcome).toBe(stop);
    const warnings = lines.filter((l) => l.level === 40).map((l) => l.msg);
    expect(warnings).toEqual(['PostgreSQL unreachable: waiting to start']);
    expect(
      lines.filter((l) => l.msg === 'PostgreSQL still unreachable').length,
    ).toBeGreaterThanOrEqual(3);
  });

  it.skipIf(!POSTGRES_URL)('rejects at once when the database does not exist (3D000)', async () => {
    const u = new URL(POSTGRES_URL ?? '');
    u.pathname = `/tw_missing_${randomBytes(4).toString('hex')}`;
    const db = await pool(u.toString());
    const { logger, lines } = capture();
    const err = await migrateWhenReachable(db, {
      logger,
      signal: new AbortController().signal,
    }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(sqlState(err)).toBe('3D000');
    expect(lines).toEqual([]);
  });
});
