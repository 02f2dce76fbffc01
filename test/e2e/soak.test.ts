/**
 * The chaos soak's small version (bench/soak.ts; the full one is `npm run soak`): two ingest, two
 * worker and two API processes on the machine's PostgreSQL (a database of its own) and Redis, a
 * receiver failing about 20 % of requests (500, held past the timeout, connection closed), five
 * SIGKILLs of a random ingest or worker process, each restarted; no server restarts. The soak
 * computes the expected events itself from the synthetic chain's ground truth and the watches as
 * stored, and checks the stored events, the deliveries and the paged API against them.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { runSoak } from '../../bench/soak.js';
import { emptyDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

if (!POSTGRES_URL) console.warn('soak.test.ts skipped: DATABASE_URL is unset (needs PostgreSQL)');

describe.skipIf(!POSTGRES_URL)('chaos soak, small (PostgreSQL)', () => {
  let t: TestDb | undefined;
  afterAll(async () => {
    await t?.drop();
  });

  it('five kills: every expected event stored once, acknowledged, listed; nothing else', async () => {
    t = await emptyDb('postgres');
    const lines: string[] = [];
    const r = await runSoak({
      seed: 14,
      kills: 5,
      blocks: 30,
      servers: { databaseUrl: t.url ?? '', redisUrl: process.env.REDIS_URL },
      print: (l) => lines.push(l),
    });
    const f = r.figures;
    expect(f.kills.ingest + f.kills.worker, r.line).toBe(5);
    expect(f.expected, r.line).toBeGreaterThan(100);
    expect(f.cursorReachedEnd, r.line).toBe(true);
    expect(f.crashes, lines.join('\n')).toBe(0);
    expect({ missing: f.missing, extra: f.extra, duplicated: f.duplicated }, r.line).toEqual({
      missing: 0,
      extra: 0,
      duplicated: 0,
    });
    expect(f.stored).toBe(f.expected);
    expect(f.notificationMismatch).toBe(0);
    expect(f.unacknowledged + f.dead, r.line).toBe(0);
    expect(f.acknowledged).toBe(f.stored);
    expect(f.badSignatures).toBe(0);
    expect(f.bodyMismatch).toBe(0);
    expect(f.faults.status500 + f.faults.hang + f.faults.reset, r.line).toBeGreaterThan(0);
    expect({ pending: f.pending, overdue: f.overdue }).toEqual({ pending: 0, overdue: 0 });
    expect({ paged: f.paged, repeats: f.pageRepeats, missing: f.pageMissing }).toEqual({
      paged: f.stored,
      repeats: 0,
      missing: 0,
    });
    expect(f.pageExtra).toBe(0);
    expect(r.pass, r.line).toBe(true);
    expect(lines.at(-1)).toBe(r.line);
  }, 240_000);
});
