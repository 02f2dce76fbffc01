import { describe, expect, it } from 'vitest';
import { MemoryRateLimiter, WINDOW_MS } from '../../src/rate-limit/limiter.js';

describe('MemoryRateLimiter (true sliding 60 s window)', () => {
  it('allows `limit` requests in any 60 s and frees a slot exactly 60 s after each', async () => {
    const rl = new MemoryRateLimiter();
    expect(await rl.hit('k', 2, 0)).toEqual({
      allowed: true,
      limit: 2,
      remaining: 1,
      retryAfterSeconds: 0,
    });
    expect(await rl.hit('k', 2, 30_000)).toEqual({
      allowed: true,
      limit: 2,
      remaining: 0,
      retryAfterSeconds: 0,
    });
    // The first request leaves the window at 60 000 (window is (t − 60 s, t]).
    expect(await rl.hit('k', 2, 59_999)).toEqual({
      allowed: false,
      limit: 2,
      remaining: 0,
      retryAfterSeconds: 1,
    });
    expect((await rl.hit('k', 2, 60_000)).allowed).toBe(true);
    // Now 30 000 and 60 000 are in the window: the next slot frees at 90 000.
    const r = await rl.hit('k', 2, 61_000);
    expect(r).toEqual({ allowed: false, limit: 2, remaining: 0, retryAfterSeconds: 29 });
  });

  it('has no fixed-bucket boundary burst', async () => {
    const rl = new MemoryRateLimiter();
    for (let i = 0; i < 5; i++) expect((await rl.hit('k', 5, 59_000 + i)).allowed).toBe(true);
    // A fixed one-minute bucket would reset at 60 000; a sliding window does not.
    for (let t = 60_000; t < 119_000; t += 10_000)
      expect((await rl.hit('k', 5, t)).allowed).toBe(false);
    expect((await rl.hit('k', 5, 119_000)).allowed).toBe(true);
  });

  it('does not count refused requests', async () => {
    const rl = new MemoryRateLimiter();
    expect((await rl.hit('k', 1, 0)).allowed).toBe(true);
    for (let t = 1_000; t < WINDOW_MS; t += 1_000) {
      const r = await rl.hit('k', 1, t);
      expect(r.allowed).toBe(false);
      expect(r.retryAfterSeconds).toBe(Math.ceil((WINDOW_MS - t) / 1000));
    }
    // Had the refusals counted, the window would still be full here.
    expect((await rl.hit('k', 1, WINDOW_MS)).allowed).toBe(true);
  });

  it('keeps ids apart and honours a lowered limit exactly', async () => {
    const rl = new MemoryRateLimiter();
    for (const t of [0, 1_000, 2_000]) expect((await rl.hit('a', 3, t)).allowed).toBe(true);
    expect((await rl.hit('b', 3, 2_500)).remaining).toBe(2);
    // Limit lowered to 1 with 3 in the window: room appears when all three have left, at 62 000.
    expect(await rl.hit('a', 1, 3_000)).toEqual({
      allowed: false,
      limit: 1,
      remaining: 0,
      retryAfterSeconds: 59,
    });
    expect((await rl.hit('a', 1, 61_000)).allowed).toBe(false);
    expect((await rl.hit('a', 1, 62_000)).allowed).toBe(true);
  });

  it('forgets ids idle for a whole window', async () => {
    const rl = new MemoryRateLimiter();
    for (let i = 0; i < 100; i++) await rl.hit(`ip:${i}`, 60, 1_000);
    expect(rl.size).toBe(100);
    await rl.hit('k', 60, 1_000 + 2 * WINDOW_MS);
    expect(rl.size).toBe(1);
  });
});
