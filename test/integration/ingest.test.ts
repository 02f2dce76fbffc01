/**
 * The block loop against a real replay node serving a synthetic chain, on both database engines:
 * every expected event exactly once (expectation from the generator's ground truth), the
 * activation rule, deleted and paused watches, a crash inside the commit transaction, and the
 * cursor guard.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import type { Queryable } from '../../src/db/pool.js';
import { syntheticAddresses } from '../../src/devnet/synthetic.js';
import { CursorMovedError, commitBlock, ensureCursor } from '../../src/ingest/commit.js';
import { Ingester } from '../../src/ingest/loop.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { NodeClient } from '../../src/tron/node-client.js';
import {
  eventKey,
  expectedEvents,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
  testIngestConfig,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const CHAIN = { seed: 7, firstBlock: 70_000_000, txPerBlock: 120, addresses: 60, count: 12 };

async function insertAccount(db: Queryable): Promise<string> {
  const id = newId('acc');
  await db.query("INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'pro')", [
    id,
    `${id}@example.com`,
  ]);
  return id;
}

async function insertWatch(
  db: Queryable,
  accountId: string,
  w: Omit<TestWatch, 'id'>,
  extra: { deleted?: boolean; paused?: boolean } = {},
): Promise<TestWatch> {
  const id = newId('wh');
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel,
                          webhook_url, secret_key_id, secret_ciphertext, status, active_from_block, deleted_at)
     VALUES ($1, $2, 'mainnet', $3, $4, $5, $6, 'webhook', 'https://example.com/hook', 'k', '\\x00'::bytea, $7, $8, $9)`,
    [
      id,
      accountId,
      hexToBase58(w.addressHex),
      w.addressHex,
      w.asset,
      w.direction,
      extra.paused ? 'PAUSED' : 'ACTIVE',
      w.activeFrom,
      extra.deleted ? new Date() : null,
    ],
  );
  return { id, ...w };
}

interface EventDbRow {
  id: string;
  watch_id: string;
  tx_id: string;
  event_index: number;
  direction: 'incoming' | 'outgoing';
  asset: 'USDT' | 'TRX';
  amount_raw: string;
  block_number: number;
  created_at: string;
}

async function storedEvents(db: Queryable): Promise<EventDbRow[]> {
  const { rows } = await db.query<EventDbRow>(
    `SELECT id, watch_id, tx_id, event_index, direction, asset, amount_raw::text AS amount_raw,
            block_number, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US') AS created_at
       FROM events ORDER BY created_at`,
  );
  return rows;
}

function runUntil(ing: Ingester, last: number, ac: AbortController): Promise<void> {
  const done = ing.run(ac.signal);
  const timer = setInterval(() => {
    if (ing.stats.cursor >= last) ac.abort();
  }, 20);
  return done.finally(() => clearInterval(timer));
}

describe.each(dbEngines)('ingest on %s', (engine) => {
  let t: TestDb | undefined;
  let chain: SyntheticChain | undefined;
  afterEach(async () => {
    await chain?.node.close();
    await t?.drop();
    chain = undefined;
    t = undefined;
  });

  it.each([
    ['a node serving /wallet/getnodeinfo', []],
    ['a node without /wallet/getnodeinfo', ['/wallet/getnodeinfo']],
  ])(
    'commits every matching transfer exactly once, in order, with its notification (%s)',
    async (_, disabledPaths) => {
      t = await migratedDb(engine);
      chain = await serveSynthetic(CHAIN, { instant: true, disabledPaths });
      const addrs = syntheticAddresses(CHAIN);
      const acc = await insertAccount(t.db);
      const activeFrom = chain.first - 1;
      const watches = [
        await insertWatch(t.db, acc, {
          addressHex: addrs[0]!,
          asset: 'ALL',
          direction: 'both',
          activeFrom,
        }),
        await insertWatch(t.db, acc, {
          addressHex: addrs[1]!,
          asset: 'USDT',
          direction: 'incoming',
          activeFrom,
        }),
        await insertWatch(t.db, acc, {
          addressHex: addrs[2]!,
          asset: 'TRX',
          direction: 'outgoing',
          activeFrom,
        }),
        await insertWatch(t.db, acc, {
          addressHex: addrs[3]!,
          asset: 'ALL',
          direction: 'incoming',
          activeFrom: chain.first + 5,
        }),
        await insertWatch(t.db, acc, {
          addressHex: `41${'ee'.repeat(20)}`,
          asset: 'ALL',
          direction: 'both',
          activeFrom,
        }),
      ];
      // Neither a deleted nor a paused watch may match.
      await insertWatch(
        t.db,
        acc,
        { addressHex: addrs[4]!, asset: 'ALL', direction: 'both', activeFrom },
        { deleted: true },
      );
      await insertWatch(
        t.db,
        acc,
        { addressHex: addrs[5]!, asset: 'ALL', direction: 'both', activeFrom },
        { paused: true },
      );

      const expected = expectedEvents(chain.transfers, watches);
      expect(expected.length).toBeGreaterThan(20); // the chain really exercises the watches
      expect(expected.some((e) => e.direction === 'outgoing')).toBe(true);

      const client = new NodeClient({ url: chain.node.url, retries: 3 });
      let woken = 0;
      const ing = new Ingester({
        db: t.db,
        client,
        logger: silentLogger,
        config: testIngestConfig(chain),
        onEvents: (n) => {
          woken += n;
        },
      });
      await runUntil(ing, chain.last, new AbortController());
      await client.close();

      const rows = await storedEvents(t.db);
      expect(await storedEventKeys(t.db)).toEqual(expected.map(eventKey).sort());
      expect(woken).toBe(expected.length);
      // created_at: unique and strictly increasing in block order (the paging invariant rests on it).
      // (rows come ordered by created_at: their blocks must then never go down.)
      const created = rows.map((r) => r.created_at);
      expect(new Set(created).size).toBe(created.length);
      const blocks = rows.map((r) => r.block_number);
      expect(new Set(blocks).size).toBeGreaterThan(3);
      expect(blocks).toEqual([...blocks].sort((a, b) => a - b));
      const { rows: n } = await t.db.query<{ n: number }>(
        "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'PENDING' AND attempts = 0",
      );
      expect(n[0]?.n).toBe(expected.length);
      const { rows: cur } = await t.db.query<{ block_number: number }>(
        'SELECT block_number FROM chain_cursor',
      );
      expect(cur[0]?.block_number).toBeGreaterThanOrEqual(chain.last);
      const { rows: head } = await t.db.query<{ head_block_number: number }>(
        'SELECT head_block_number FROM chain_head',
      );
      expect(head[0]?.head_block_number).toBe(chain.last + 18);
    },
  );

  it('loses nothing and repeats nothing when the commit dies mid-block', async () => {
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN);
    const addrs = syntheticAddresses(CHAIN);
    const acc = await insertAccount(t.db);
    const watches = [
      await insertWatch(t.db, acc, {
        addressHex: addrs[0]!,
        asset: 'ALL',
        direction: 'both',
        activeFrom: chain.first - 1,
      }),
      await insertWatch(t.db, acc, {
        addressHex: addrs[1]!,
        asset: 'ALL',
        direction: 'both',
        activeFrom: chain.first - 1,
      }),
    ];
    const expected = expectedEvents(chain.transfers, watches);
    const client = new NodeClient({ url: chain.node.url, retries: 3 });
    const crashAt = new Set([chain.first + 2, chain.first + 7]);
    let crashes = 0;
    let current = 0;
    const ing = new Ingester({
      db: t.db,
      client,
      logger: silentLogger,
      config: testIngestConfig(chain),
      onBlock: (b) => {
        current = b.blockNumber;
      },
      hooks: {
        async beforeCursorAdvance() {
          const n = current + 1;
          if (crashAt.delete(n)) {
            crashes++;
            throw new Error(`simulated crash in block ${n}`);
          }
        },
      },
    });
    await runUntil(ing, chain.last, new AbortController());
    await client.close();
    expect(crashes).toBe(2);
    expect(await storedEventKeys(t.db)).toEqual(expected.map(eventKey).sort());
    const { rows: n } = await t.db.query<{ n: number }>(
      'SELECT count(*)::int8 AS n FROM notifications',
    );
    expect(n[0]?.n).toBe(expected.length);
  });

  it('forgets, from one leadership term to the next, the head sightings of blocks another leader committed', async () => {
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN);
    const client = new NodeClient({ url: chain.node.url, retries: 3 });
    const config = testIngestConfig(chain);
    try {
      // Term 1 of A: it sees the whole chain solidified, commits three blocks, then loses the lead.
      const term1 = new AbortController();
      const a = new Ingester({
        db: t.db,
        client,
        logger: silentLogger,
        config,
        onBlock: (b) => {
          if (b.blockNumber >= chain!.first + 2) term1.abort();
        },
      });
      await a.run(term1.signal);
      expect(a.stats.cursor).toBe(chain.first + 2);
      expect(a.heldSightings).toBeGreaterThan(0); // blocks A saw solidified but did not commit
      // B leads meanwhile and commits the rest.
      const b = new Ingester({ db: t.db, client, logger: silentLogger, config });
      await runUntil(b, chain.last, new AbortController());
      // Term 2 of A (leader.ts runs the same Ingester once per term): the cursor is past every
      // block A saw, so it must hold no sighting any more.
      await runUntil(a, chain.last, new AbortController());
      expect(a.stats.cursor).toBe(chain.last);
      expect(a.heldSightings).toBe(0);
    } finally {
      await client.close();
    }
  });

  it('refuses to commit a block the cursor is not ready for', async () => {
    t = await migratedDb(engine);
    await ensureCursor(t.db, 'mainnet', 100);
    const ref = { number: 105, id: 'x', timestamp: 0 };
    await expect(commitBlock(t.db, 'mainnet', ref, [])).rejects.toThrow(CursorMovedError);
    await commitBlock(t.db, 'mainnet', { number: 100, id: 'a', timestamp: 0 }, []);
    await expect(
      commitBlock(t.db, 'mainnet', { number: 100, id: 'a', timestamp: 0 }, []),
    ).rejects.toThrow(CursorMovedError);
  });
});
