/**
 * FallbackRateLimiter transitions (src/rate-limit/limiter.ts): shared limiter → in-process windows
 * while it fails → back, each switch logged once. The primary here is a MemoryRateLimiter behind
 * a switch that makes it fail like an unreachable Redis; the real Redis path (a relay closed and
 * reopened) is in test/integration/rate-limit-redis.test.ts.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  FallbackRateLimiter,
  MemoryRateLimiter,
  type RateLimiter,
  type RateLimitResult,
  type Reservation,
  type WindowLimit,
} from '../../src/rate-limit/limiter.js';

/** A working limiter that throws while `down`, counting the calls that reached it. */
class SwitchableLimiter implements RateLimiter {
  down = false;
  calls = 0;
  /** When set, the next call waits for this promise before answering (or failing). */
  gate: Promise<void> | undefined;
  readonly inner = new MemoryRateLimiter();

  async hit(id: string, limit: number, nowMs?: number): Promise<RateLimitResult> {
    this.calls++;
    const down = this.down;
    const gate = this.gate;
    this.gate = undefined;
    if (gate) await gate;
    if (down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    return this.inner.hit(id, limit, nowMs);
  }

  async peek(id: string, limit: number, nowMs?: number): Promise<RateLimitResult> {
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    return this.inner.peek(id, limit, nowMs);
  }

  async reserve(windows: readonly WindowLimit[], nowMs?: number): Promise<Reservation> {
    this.calls++;
    if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
    const r = await this.inner.reserve(windows, nowMs);
    return {
      ...r,
      release: async () => {
        if (this.down) throw new Error('connect ECONNREFUSED 127.0.0.1:6379');
        await r.release();
      },
    };
  }
}

function setup(probeIntervalMs = 1_000) {
  const lines: { msg: string; level: number; err?: string }[] = [];
  const logger = pino(
    { level: 'info' },
    {
      write(line: string) {
        lines.push(JSON.parse(line) as { msg: string; level: number });
      },
    },
  );
  const primary = new SwitchableLimiter();
  const fallback = new MemoryRateLimiter();
  const rl = new FallbackRateLimiter(primary, { logger, fallback, probeIntervalMs });
  return { rl, primary, fallback, lines };
}

describe('FallbackRateLimiter', () => {
  it('uses the primary while it answers', async () => {
    const { rl, primary, fallback, lines } = setup();
    for (let t = 0; t < 3; t++) expect((await rl.hit('k', 2, t)).allowed).toBe(t < 2);
    expect(primary.calls).toBe(3);
    expect(fallback.size).toBe(0);
    expect(rl.degraded).toBe(false);
    expect(lines).toEqual([]);
  });

  it('falls back on failure, logs once, probes once per interval, returns and logs once', async () => {
    const { rl, primary, fallback, lines } = setup(1_000);
    expect((await rl.hit('k', 3, 0)).remaining).toBe(2);
    primary.down = true;

    // The failing request itself is answered by the fallback (its own, fresh window).
    expect(await rl.hit('k', 3, 100)).toMatchObject({ allowed: true, remaining: 2 });
    expect(rl.degraded).toBe(true);
    expect(primary.calls).toBe(2);
    // Within the probe interval the primary is not tried.
    expect((await rl.hit('k', 3, 500)).remaining).toBe(1);
    expect((await rl.hit('k', 3, 1_099)).remaining).toBe(0);
    expect(await rl.hit('k', 3, 1_099)).toMatchObject({ allowed: false, retryAfterSeconds: 60 });
    expect(primary.calls).toBe(2);
    // At the interval one request probes (and fails: no new log line); the next does not probe.
    expect((await rl.hit('k', 3, 1_100)).allowed).toBe(false);
    expect((await rl.hit('k', 3, 1_200)).allowed).toBe(false);
    expect(primary.calls).toBe(3);
    expect(fallback.size).toBe(1);

    primary.down = false;
    expect((await rl.hit('k', 3, 1_500)).allowed).toBe(false); // not yet time to probe
    expect(primary.calls).toBe(3);
    // The probe at 2 100 succeeds: back on the primary, whose window holds the request at 0.
    expect(await rl.hit('k', 3, 2_100)).toMatchObject({ allowed: true, remaining: 1 });
    expect(rl.degraded).toBe(false);
    expect((await rl.hit('k', 3, 2_200)).remaining).toBe(0);
    expect(primary.calls).toBe(5);

    expect(lines.map((l) => [l.level, l.msg])).toEqual([
      [40, expect.stringMatching(/^redis unreachable: .*in-process/)],
      [40, expect.stringMatching(/^redis reachable again/)],
    ]);
    expect(lines[0]?.err).toContain('ECONNREFUSED');
  });

  it('probes with one request at a time: concurrent requests use the fallback meanwhile', async () => {
    const { rl, primary } = setup(1_000);
    primary.down = true;
    await rl.hit('k', 10, 0);
    expect(rl.degraded).toBe(true);
    primary.down = false;
    let open = () => {};
    primary.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const probe = rl.hit('k', 10, 1_000);
    const others = await Promise.all([rl.hit('k', 10, 1_001), rl.hit('k', 10, 1_002)]);
    expect(others.every((r) => r.allowed)).toBe(true);
    expect(primary.calls).toBe(2); // the first failure and the probe
    open();
    await probe;
    expect(rl.degraded).toBe(false);
  });

  it('ignores late outcomes of requests begun before the last switch', async () => {
    const { rl, primary, lines } = setup(1_000);
    // A request begun while up, answered only after the outage was noticed: no flip back.
    let open = () => {};
    primary.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const slow = rl.hit('k', 10, 0);
    primary.down = true;
    await rl.hit('k', 10, 1);
    expect(rl.degraded).toBe(true);
    primary.down = false;
    open();
    await slow;
    expect(rl.degraded).toBe(true);

    // Back up through a probe; then a failure begun before the recovery does not flip it down.
    primary.down = true;
    primary.gate = new Promise<void>((resolve) => {
      open = resolve;
    });
    const lateFailure = rl.hit('k', 10, 1_001); // probe, fails late
    primary.down = false;
    await rl.hit('k', 10, 2_001); // next probe succeeds first
    expect(rl.degraded).toBe(false);
    open();
    await lateFailure;
    expect(rl.degraded).toBe(false);
    expect(lines.map((l) => l.msg)).toEqual([
      expect.stringMatching(/unreachable/),
      expect.stringMatching(/reachable again/),
    ]);
  });

  it('markDown at start: logged at once, the first request probes; markUp: back at once, logged once', async () => {
    const { rl, primary, fallback, lines } = setup(1_000);
    primary.down = true;
    rl.markDown('not connected after 1000 ms');
    rl.markDown('again'); // no-op
    expect(rl.degraded).toBe(true);
    expect(lines.map((l) => l.msg)).toEqual([
      'redis unreachable: rate limits fall back to in-process windows (per replica)',
    ]);
    // The first request tries the primary (fails quietly), then the fallback answers.
    expect((await rl.hit('k', 3, 10)).remaining).toBe(2);
    expect(primary.calls).toBe(1);
    expect((await rl.hit('k', 3, 20)).remaining).toBe(1);
    expect(primary.calls).toBe(1);
    expect(fallback.size).toBe(1);
    primary.down = false;
    rl.markUp();
    rl.markUp(); // no-op
    expect(rl.degraded).toBe(false);
    // Within the probe interval, yet on the primary: no request had to probe it.
    expect((await rl.hit('k', 3, 30)).remaining).toBe(2);
    expect(primary.calls).toBe(2);
    expect(lines.map((l) => l.msg)).toEqual([
      'redis unreachable: rate limits fall back to in-process windows (per replica)',
      'redis reachable again: rate limits are shared between replicas again',
    ]);
  });

  it('reserves on the primary or the fallback, and gives each reservation back where it was made', async () => {
    const { rl, primary, fallback } = setup();
    const w = [{ id: 'login:{a}:e', limit: 2, windowMs: 60_000 }];
    const onPrimary = await rl.reserve(w, 0);
    expect(onPrimary.allowed).toBe(true);
    expect((await primary.inner.peek('login:{a}:e', 2, 0, 60_000)).remaining).toBe(1);
    await onPrimary.release();
    expect((await primary.inner.peek('login:{a}:e', 2, 0, 60_000)).remaining).toBe(2);

    const stranded = await rl.reserve(w, 10);
    primary.down = true;
    // Redis went away: the entry stays there (it expires with its window); no error for the caller.
    await expect(stranded.release()).resolves.toBeUndefined();
    const onFallback = await rl.reserve(w, 20);
    expect(rl.degraded).toBe(true);
    expect(onFallback.allowed).toBe(true);
    expect((await fallback.peek('login:{a}:e', 2, 20, 60_000)).remaining).toBe(1);
    await onFallback.release();
    expect((await fallback.peek('login:{a}:e', 2, 20, 60_000)).remaining).toBe(2);
  });
});
