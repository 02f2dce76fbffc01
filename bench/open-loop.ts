/**
 * An open-loop load generator (the method of wrk2): requests are started on a fixed schedule,
 * one every 1/rate s whatever the server is doing, and each latency is measured from the time the
 * request was DUE, not from when it was sent, so a server that stalls is charged for the requests
 * queued behind the stall (no "coordinated omission").
 *
 * Why not autocannon's `overallRate`: it lets each connection send back to back until it has
 * made its share of the second, then pauses until the next second. "1,000 requests/s" over 32
 * connections is then a burst of 1,000 requests at full speed followed by idleness, and its
 * percentiles are those of a saturated server (even a bare route shows a p99 of ~11 ms on 2 cores).
 *
 * Connections: an undici Pool of `connections` keep-alive connections (no pipelining); requests due
 * while all are busy wait in the pool's queue, and that wait counts in their latency.
 */
import { Pool } from 'undici';

export interface OpenLoopOptions {
  /** Origin, e.g. http://127.0.0.1:8080. */
  origin: string;
  /** Path and query, e.g. /v1/events?limit=50. */
  path: string;
  headers?: Record<string, string>;
  /** Requests per second (≥ 1). */
  rate: number;
  /** Length of the run, s. */
  seconds: number;
  /** Keep-alive connections (default 32). */
  connections?: number;
  /**
   * Seconds run on the same schedule before the measured ones, not recorded (default 2): the
   * pool's connections are opened and both sides' code is warm when measuring starts.
   */
  warmupSeconds?: number;
}

export interface OpenLoopResult {
  /** Requests completed per second of the run. */
  achievedRate: number;
  requests: number;
  /** Latency percentiles from the due time, ms. */
  p50: number;
  p90: number;
  p99: number;
  max: number;
  /** Answers with a status other than 2xx, and requests that failed. */
  non2xx: number;
  errors: number;
}

/** Run the schedule; resolves when every request has completed. */
export async function openLoop(opts: OpenLoopOptions): Promise<OpenLoopResult> {
  const pool = new Pool(opts.origin, { connections: opts.connections ?? 32, pipelining: 1 });
  const warmup = Math.round(opts.rate * (opts.warmupSeconds ?? 2));
  const total = warmup + Math.round(opts.rate * opts.seconds);
  const intervalMs = 1000 / opts.rate;
  const latencies: number[] = [];
  let non2xx = 0;
  let errors = 0;
  const inflight: Promise<void>[] = [];
  const start = performance.now();

  const fire = (due: number, recorded: boolean) =>
    pool
      .request({ path: opts.path, method: 'GET', headers: opts.headers })
      .then(async (res) => {
        await res.body.dump();
        if (!recorded) return;
        if (res.statusCode < 200 || res.statusCode >= 300) non2xx++;
        latencies.push(performance.now() - due);
      })
      .catch(() => {
        if (recorded) errors++;
      });

  let sent = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (sent < total && start + sent * intervalMs <= now) {
        inflight.push(fire(start + sent * intervalMs, sent >= warmup));
        sent++;
      }
      if (sent >= total) resolve();
      else setTimeout(tick, Math.max(0, start + sent * intervalMs - performance.now()));
    };
    tick();
  });
  await Promise.all(inflight);
  const elapsed = (performance.now() - start) / 1000 - (opts.warmupSeconds ?? 2);
  await pool.close();

  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    latencies.length === 0
      ? Number.NaN
      : Math.round(
          (latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0) * 10,
        ) / 10;
  return {
    achievedRate: latencies.length / elapsed,
    requests: latencies.length,
    p50: at(0.5),
    p90: at(0.9),
    p99: at(0.99),
    max: at(1),
    non2xx,
    errors,
  };
}
