import { describe, expect, it } from 'vitest';
import { clientAddressKey, MemoryRateLimiter, WINDOW_MS } from '../../src/rate-limit/limiter.js';

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

describe('MemoryRateLimiter.reserve (several windows, all or nothing)', () => {
  const pair = { id: 'login:{a}:e', limit: 2, windowMs: 60_000 };
  const address = { id: 'login-ip:{a}', limit: 3, windowMs: 60_000 };

  it('records in every window when each has room, in none when one is full', async () => {
    const rl = new MemoryRateLimiter();
    expect((await rl.reserve([pair, address], 0)).allowed).toBe(true);
    expect((await rl.reserve([pair, address], 10_000)).allowed).toBe(true);
    // The pair is full: refused, and the address window is not charged for it.
    expect(await rl.reserve([pair, address], 20_000)).toMatchObject({
      allowed: false,
      retryAfterSeconds: 40, // the entry at 0 leaves at 60 000
    });
    expect((await rl.peek(address.id, 3, 20_000, 60_000)).remaining).toBe(1);
    // Another pair on the same address takes the last slot; then the address is full for all.
    const other = { ...pair, id: 'login:{a}:f' };
    expect((await rl.reserve([other, address], 30_000)).allowed).toBe(true);
    expect(await rl.reserve([{ ...pair, id: 'login:{a}:g' }, address], 30_000)).toMatchObject({
      allowed: false,
      retryAfterSeconds: 30,
    });
    // The latest of the full windows decides Retry-After.
    expect((await rl.reserve([pair, address], 30_000)).retryAfterSeconds).toBe(30);
  });

  it('gives a reservation back to every window, once', async () => {
    const rl = new MemoryRateLimiter();
    const first = await rl.reserve([pair, address], 0);
    const second = await rl.reserve([pair, address], 1_000);
    expect((await rl.reserve([pair, address], 2_000)).allowed).toBe(false);
    await second.release();
    await second.release(); // idempotent: takes no other entry with it
    expect((await rl.peek(pair.id, 2, 2_000, 60_000)).remaining).toBe(1);
    expect((await rl.peek(address.id, 3, 2_000, 60_000)).remaining).toBe(2);
    expect((await rl.reserve([pair, address], 3_000)).allowed).toBe(true);
    // A refused reservation has nothing to give back.
    const refused = await rl.reserve([pair, address], 4_000);
    expect(refused.allowed).toBe(false);
    await refused.release();
    expect((await rl.peek(pair.id, 2, 4_000, 60_000)).allowed).toBe(false);
    await first.release();
    expect((await rl.peek(pair.id, 2, 4_000, 60_000)).remaining).toBe(1);
  });

  it('takes nothing from a window when the reservation has left it already', async () => {
    const rl = new MemoryRateLimiter();
    const old = await rl.reserve([address], 0);
    expect((await rl.reserve([address], 61_000)).allowed).toBe(true);
    await old.release();
    expect((await rl.peek(address.id, 3, 61_000, 60_000)).remaining).toBe(2);
  });

  it('lets exactly `limit` of many concurrent reservations through', async () => {
    const rl = new MemoryRateLimiter();
    const all = await Promise.all(Array.from({ length: 50 }, () => rl.reserve([pair, address])));
    expect(all.filter((r) => r.allowed)).toHaveLength(2);
  });
});

describe('clientAddressKey', () => {
  it('counts IPv4 as it is and IPv6 by its /64', () => {
    expect(clientAddressKey('198.51.100.7')).toBe('198.51.100.7');
    expect(clientAddressKey('::ffff:198.51.100.7')).toBe('198.51.100.7');
    expect(clientAddressKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd')).toBe('2001:db8:1:2::/64');
    expect(clientAddressKey('2001:0db8:0001:0002::1')).toBe('2001:db8:1:2::/64');
    expect(clientAddressKey('2001:db8:1:3::1')).toBe('2001:db8:1:3::/64');
    expect(clientAddressKey('::1')).toBe('0:0:0:0::/64');
    expect(clientAddressKey('not an address')).toBe('not an address');
  });
});
