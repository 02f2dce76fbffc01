/**
 * The pacing windows count a message from the end of its send (issue 21 item 4;
 * src/telegram/pacing.ts), in process and in Redis (src/redis/pacing.lua, pacing-release.lua), on
 * explicit clocks: a granted slot counts in flight until released, then the window's interval runs
 * from the release; a refusal by a send in flight waits the window's length; an unreleased slot
 * ends at its provisional end; a release only ever moves an end earlier; sliding windows of
 * several messages free in order of their ends. No database: these are the pacers alone.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { closeRedis, createRedis, type Redis, waitReady } from '../../src/redis/client.js';
import { RedisPacer } from '../../src/redis/pacing.js';
import { MemoryPacer, type Pacer, type PacingWindow } from '../../src/telegram/pacing.js';

const REDIS_URL = process.env.REDIS_URL;
const clients: Redis[] = [];
afterAll(async () => {
  for (const c of clients) await closeRedis(c);
});

async function redisPacer(): Promise<Pacer> {
  const c = createRedis(REDIS_URL as string);
  clients.push(c);
  expect(await waitReady(c, 5_000)).toBe(true);
  return new RedisPacer(c, { prefix: `tw:test:pacing:${randomBytes(4).toString('hex')}:` });
}

const PACERS: Array<[string, () => Promise<Pacer>]> = [
  ['in process', async () => new MemoryPacer()],
  ...(REDIS_URL ? [['Redis', redisPacer] as [string, () => Promise<Pacer>]] : []),
];

/** A base time (ms since the epoch) and the windows of one private chat: 1 per 1000 ms. */
const T = Date.now();
const chat = (id: string): PacingWindow[] => [{ id, limit: 1, windowMs: 1_000 }];

describe.each(PACERS)('pacing windows on send ends (%s)', (_, make) => {
  it('counts a slot in flight until released, then one interval from the release', async () => {
    const p = await make();
    const w = chat('a');
    const a = await p.take(w, 10_000, T);
    expect(a).toMatchObject({ granted: true, atMs: T, waitMs: 0 });
    expect(a.token).not.toBe('');
    // In flight: the least the chat can wait is one interval.
    expect(await p.take(w, 10_000, T + 500)).toMatchObject({ granted: false, waitMs: 1_000 });
    // Its answer came at T + 700: the chat's next message goes no earlier than T + 1700.
    await p.release(w, a.token, 0, T + 700);
    expect(await p.take(w, 10_000, T + 1_000)).toMatchObject({ granted: false, waitMs: 700 });
    expect(await p.take(w, 10_000, T + 1_699)).toMatchObject({ granted: false, waitMs: 1 });
    const b = await p.take(w, 10_000, T + 1_700);
    expect(b).toMatchObject({ granted: true, atMs: T + 1_700 });
    expect(b.token).not.toBe(a.token);
  });

  it('an unreleased slot ends at its provisional end; a release never moves an end later', async () => {
    const p = await make();
    const w = chat('b');
    const a = await p.take(w, 3_000, T);
    expect(a.granted).toBe(true);
    // Released with a linger past its provisional end: still ends at T + 3000.
    await p.release(w, a.token, 5_000, T + 100);
    expect(await p.take(w, 0, T + 3_999)).toMatchObject({ granted: false, waitMs: 1 });
    const b = await p.take(w, 2_000, T + 4_000);
    expect(b.granted).toBe(true);
    // Released twice: the earlier end stays (T + 4300, not T + 4800).
    await p.release(w, b.token, 300, T + 4_000);
    await p.release(w, b.token, 0, T + 4_800);
    expect(await p.take(w, 0, T + 5_299)).toMatchObject({ granted: false, waitMs: 1 });
    expect((await p.take(w, 0, T + 5_300)).granted).toBe(true);
    // An unknown token is ignored.
    await p.release(w, 'no-such-slot', 0, T + 5_300);
  });

  it('a window of several frees in the order of its sends’ ends, and every window at once', async () => {
    const p = await make();
    const group: PacingWindow = { id: 'g', limit: 2, windowMs: 1_000 };
    const one = [{ id: 'c1', limit: 1, windowMs: 100 }, group];
    const two = [{ id: 'c2', limit: 1, windowMs: 100 }, group];
    const three = [{ id: 'c3', limit: 1, windowMs: 100 }, group];
    const a = await p.take(one, 10_000, T);
    const b = await p.take(two, 10_000, T + 10);
    expect([a.granted, b.granted]).toEqual([true, true]);
    // The group is full of sends in flight.
    expect(await p.take(three, 10_000, T + 20)).toMatchObject({ granted: false, waitMs: 1_000 });
    // b ends first (T + 50), then a (T + 100): the group has room at T + 1050.
    await p.release(two, b.token, 0, T + 50);
    await p.release(one, a.token, 0, T + 100);
    expect(await p.take(three, 10_000, T + 60)).toMatchObject({ granted: false, waitMs: 990 });
    // Refused by the group, the third chat's own window took nothing.
    const c = await p.take(three, 10_000, T + 1_050);
    expect(c).toMatchObject({ granted: true, atMs: T + 1_050 });
    // Its chat's window (100 ms) is in flight now, the group full again until a's end + 1000.
    expect(await p.take(three, 10_000, T + 1_060)).toMatchObject({ granted: false, waitMs: 100 });
    expect(await p.take(one, 10_000, T + 1_060)).toMatchObject({ granted: false, waitMs: 40 });
  });
});
