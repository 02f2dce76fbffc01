/**
 * Kill -9 the ingest process repeatedly while it commits blocks, restart it each time: in the end
 * every expected event exists exactly once with exactly one notification, and the cursor reached
 * the last block. A real `tronwatch ingest` process against real PostgreSQL (PGlite cannot be
 * shared by two processes) and a real replay node serving a synthetic chain.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  nodeEnv,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
} from '../helpers/chain.js';
import { spawnCli } from '../helpers/cli.js';
import { migratedDb, POSTGRES_URL, type TestDb } from '../helpers/db.js';

const CHAIN = { seed: 21, firstBlock: 73_000_000, txPerBlock: 600, addresses: 2_000, count: 40 };

describe.skipIf(!POSTGRES_URL)('ingest survives kill -9 (PostgreSQL)', () => {
  let t: TestDb | undefined;
  let chain: SyntheticChain | undefined;
  afterAll(async () => {
    await chain?.node.close();
    await t?.drop();
  });

  it('loses nothing and repeats nothing across three kills', async () => {
    t = await migratedDb('postgres');
    chain = await serveSynthetic(CHAIN);
    const acc = newId('acc');
    await t.db.query(
      "INSERT INTO accounts (id, email, plan) VALUES ($1, 'kill@example.com', 'scale')",
      [acc],
    );
    const watches = await insertSyntheticWatches(
      t.db,
      acc,
      syntheticAddresses(CHAIN).slice(0, 30),
      {
        activeFrom: chain.first - 1,
      },
    );
    const expected = expectedEvents(chain.transfers, watches);
    expect(expected.length).toBeGreaterThan(500);

    const env = {
      DATABASE_URL: t.url ?? '',
      ...nodeEnv(chain.node),
      INGEST_START_BLOCK: String(chain.first),
      TRON_BLOCK_INTERVAL_MS: '100',
      TRON_NODE_CONCURRENCY: '2',
    };
    const cursor = async () =>
      (await t!.db.query<{ block_number: number }>('SELECT block_number FROM chain_cursor')).rows[0]
        ?.block_number ?? 0;
    const kills: number[] = [];
    for (const target of [chain.first + 5, chain.first + 15, chain.first + 25]) {
      const child = spawnCli(['ingest'], env);
      const exited = new Promise((r) => child.on('exit', r));
      while ((await cursor()) < target) await new Promise((r) => setTimeout(r, 10));
      child.kill('SIGKILL');
      await exited;
      kills.push(await cursor());
    }
    const last = spawnCli(['ingest'], env);
    const exited = new Promise((r) => last.on('exit', r));
    while ((await cursor()) < chain.last) await new Promise((r) => setTimeout(r, 20));
    last.kill('SIGTERM'); // graceful this time
    await exited;

    expect(kills[0]).toBeLessThan(chain.last);
    const got = await storedEventKeys(t.db);
    expect(got).toEqual(expected.map(eventKey).sort());
    const { rows: n } = await t.db.query<{ events: number; notifications: number }>(
      'SELECT (SELECT count(*) FROM events)::int8 AS events, (SELECT count(*) FROM notifications)::int8 AS notifications',
    );
    expect(n[0]).toEqual({ events: expected.length, notifications: expected.length });
  }, 120_000);
});
