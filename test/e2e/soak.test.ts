/**
 * The chaos soak's small version (bench/soak.ts; the full one is `npm run soak`): two ingest, two
 * worker and two API processes on a throwaway PostgreSQL 15 and Redis of the soak's own
 * (test/helpers/servers.ts: the machine's shared servers are never touched); three node providers
 * read with a quorum of two, misbehaving in phases (503s and empty answers, a stalled provider,
 * one falling behind, one refusing with 403, one dying); a receiver failing about 20 % of requests
 * (500, held past the timeout, connection closed); an API client under steady load that retries
 * what a killed API process lost; six SIGKILLs, two of each role, each process restarted; Redis
 * SIGKILLed and restarted once, the PostgreSQL postmaster SIGKILLed and restarted once. The soak
 * computes the expected events itself from the synthetic chain's ground truth and the watches as
 * stored, and checks the stored events, the deliveries and the paged API against them.
 */
import { describe, expect, it } from 'vitest';
import { NODE_PHASES, runSoak } from '../../bench/soak.js';
import { throwawayServersAvailable } from '../helpers/servers.js';

const available = throwawayServersAvailable();
if (!available) console.warn('soak.test.ts skipped: initdb/postgres or redis-server missing');

describe.skipIf(!available)('chaos soak, small (throwaway PostgreSQL and Redis)', () => {
  it('six kills of every role, PostgreSQL and Redis SIGKILLed, node faults: every expected event once, acknowledged, listed; nothing else', async () => {
    const lines: string[] = [];
    const r = await runSoak({
      seed: 14,
      kills: 6,
      blocks: 30,
      servers: 'own',
      print: (l) => lines.push(l),
    });
    const f = r.figures;
    expect(f.kills, r.line).toMatchObject({ ingest: 2, worker: 2, api: 2 });
    expect(f.restarts, r.line).toEqual({ redis: 1, postgres: 1 });
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
    // The API client: every request answered in the end, as expected.
    expect(f.api.requests, r.line).toBeGreaterThan(0);
    expect({ failed: f.api.failed, unexpected: f.api.unexpected }, r.line).toEqual({
      failed: 0,
      unexpected: 0,
    });
    // The node providers misbehaved as planned, and ingest went through every phase.
    expect(f.node.phases, r.line).toBe(NODE_PHASES.length);
    expect(f.node.providerDied, r.line).toBe(true);
    expect(f.node.status503 + f.node.empty, r.line).toBeGreaterThan(0);
    expect({ pending: f.pending, overdue: f.overdue }).toEqual({ pending: 0, overdue: 0 });
    expect({ paged: f.paged, repeats: f.pageRepeats, missing: f.pageMissing }).toEqual({
      paged: f.stored,
      repeats: 0,
      missing: 0,
    });
    expect(f.pageExtra).toBe(0);
    expect(r.pass, r.line).toBe(true);
    expect(lines.at(-1)).toBe(r.line);
  }, 1_200_000);
});
