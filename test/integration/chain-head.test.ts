/**
 * The activation block of a new watch (DESIGN invariant 5, src/ingest/chain-head.ts) on both
 * database engines: exactly the stored head while the observation is fresh, extrapolated by one
 * block per elapsed interval when it is stale, and measured on the database's clock only, so an
 * API host whose clock runs ahead cannot push a watch past its first transfers. With a verified
 * block stored (the light client: migration 094), GREATEST(verified, head − ACTIVATION_WINDOW_BLOCKS),
 * which a head claim cannot push past the chain (issue 36 item 4); the api role's head polls never
 * overwrite it, the ingester without the light client clears it.
 */
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  activationBlock,
  ChainHeadUnknownError,
  MAX_EXTRAPOLATED_BLOCKS,
  saveChainHead,
  saveHead,
} from '../../src/ingest/chain-head.js';
import { ACTIVATION_WINDOW_BLOCKS } from '../../src/tron/node-group.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const INTERVAL_MS = 3_000;

describe.each(dbEngines)('activation block on %s', (engine) => {
  let t: TestDb | undefined;
  afterEach(async () => {
    vi.useRealTimers();
    await t?.drop();
    t = undefined;
  });

  /** Store heads 1,000 / 1,018 (once), dated `ageMs` back on the database clock. */
  async function headObservedAgo(ageMs: number): Promise<TestDb> {
    if (!t) {
      t = await migratedDb(engine);
      await saveChainHead(t.db, 'mainnet', { solidified: 1_000, head: 1_018 });
    }
    await t.db.query(
      "UPDATE chain_head SET observed_at = clock_timestamp() - $1 * interval '1 millisecond'",
      [ageMs],
    );
    return t;
  }
  const activation = async (ageMs: number) =>
    activationBlock((await headObservedAgo(ageMs)).db, 'mainnet', INTERVAL_MS);

  it('refuses while no head was ever stored', async () => {
    t = await migratedDb(engine);
    await expect(activationBlock(t.db, 'mainnet', INTERVAL_MS)).rejects.toBeInstanceOf(
      ChainHeadUnknownError,
    );
  });

  it('is the stored head while the observation is under one interval old', async () => {
    expect(await activation(0)).toBe(1_018);
    expect(await activation(INTERVAL_MS - 500)).toBe(1_018);
  });

  it('adds one block per whole interval elapsed when the observation is stale, at most a few', async () => {
    expect(await activation(2.5 * INTERVAL_MS)).toBe(1_020);
    // The chain may have halted since the observation: never past the reported head by more
    // than MAX_EXTRAPOLATED_BLOCKS (issue 21 item 3), however long ago it was.
    expect(MAX_EXTRAPOLATED_BLOCKS).toBe(3);
    expect(await activation(3 * INTERVAL_MS + 100)).toBe(1_021);
    expect(await activation(10 * INTERVAL_MS + 100)).toBe(1_018 + MAX_EXTRAPOLATED_BLOCKS);
  });

  it('measures the age up to asOf, the moment the head was known fresh, not up to its own statement', async () => {
    const { db } = await headObservedAgo(5 * INTERVAL_MS + 100);
    const { rows } = await db.query<{ observed: Date }>(
      'SELECT observed_at AS observed FROM chain_head',
    );
    const observed = rows[0]!.observed.getTime();
    // Known fresh half an interval after the observation (a watch creation's refresh): the stored
    // head, although the statement runs five intervals after it (a halted chain made nothing since).
    expect(
      await activationBlock(db, 'mainnet', INTERVAL_MS, new Date(observed + INTERVAL_MS / 2)),
    ).toBe(1_018);
    // asOf two intervals after: extrapolated by two, as before.
    expect(
      await activationBlock(db, 'mainnet', INTERVAL_MS, new Date(observed + 2 * INTERVAL_MS + 50)),
    ).toBe(1_020);
    // Without it: up to the statement, five intervals, capped.
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_018 + MAX_EXTRAPOLATED_BLOCKS);
  });

  it('with a verified block stored: never above it by a head claim, within the window below the head while behind', async () => {
    t = await migratedDb(engine);
    const { db } = t;
    const verifiedOf = async () =>
      (await db.query<{ v: string | null }>('SELECT verified_block_number AS v FROM chain_head'))
        .rows[0]?.v;
    // The ingester with the light client: head claim 1,027 (9 above), verified 1,018.
    await saveChainHead(db, 'mainnet', { solidified: 1_000, head: 1_027, verified: 1_018 });
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_018);
    // Stale, extrapolated to 1,030: still the verified block.
    await db.query("UPDATE chain_head SET observed_at = clock_timestamp() - interval '20 seconds'");
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_018);
    // The api role's poll (no verified given) stores its claim and leaves the verified block.
    await saveChainHead(db, 'mainnet', { solidified: 1_000, head: 1_027 });
    expect(Number(await verifiedOf())).toBe(1_018);
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_018);
    // A lower claim than the verified block: the verified block (it exists, so the head is there).
    await saveChainHead(db, 'mainnet', { solidified: 1_000, head: 1_010 });
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_018);
    // A block read at the head: the verified block and the head move up together.
    await saveHead(db, 'mainnet', 1_019);
    expect(Number(await verifiedOf())).toBe(1_019);
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_019);
    // Below a higher claim: the verified block moves, the claim stays (activation: verified).
    await saveChainHead(db, 'mainnet', { solidified: 1_000, head: 1_030 });
    await saveHead(db, 'mainnet', 1_021);
    expect(Number(await verifiedOf())).toBe(1_021);
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_021);
    // An ingester still catching up (verified far below the head): the head minus the window.
    await saveChainHead(db, 'mainnet', { solidified: 1_500, head: 2_000 });
    expect(ACTIVATION_WINDOW_BLOCKS).toBe(20);
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(
      2_000 - ACTIVATION_WINDOW_BLOCKS,
    );
    // A verified block is never lowered by a poll (a later ingester term before its first read).
    await saveChainHead(db, 'mainnet', { solidified: 1_500, head: 2_000, verified: 1_005 });
    expect(Number(await verifiedOf())).toBe(1_021);
    // The ingester without the light client clears it: the head alone, as before.
    await saveChainHead(db, 'mainnet', { solidified: 1_000, head: 1_027, verified: null });
    expect(await verifiedOf()).toBeNull();
    expect(await activationBlock(db, 'mainnet', INTERVAL_MS)).toBe(1_027);
  });

  // PostgreSQL only: embedded PGlite runs in this process and reads its clock from it, so there
  // the API host and the database cannot disagree (and faking one fakes the other).
  it.skipIf(engine === 'pglite')(
    'ignores the API host clock: 10 s ahead of the database still gives the stored head',
    async () => {
      await headObservedAgo(0);
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 10_000 });
      expect(await activation(0)).toBe(1_018);
    },
  );
});
