/**
 * Matching cost versus the number of watches (issue 3): ingest the same K synthetic mainnet-shaped
 * blocks (600 txs) through the real Ingester (fetch from a replay node process, extract, match,
 * one commit per block) with 1,000 active watches and with 1,000,000, and print blocks/s of both
 * and the ratio. The 1,000 watches that can match are the same in both runs (busy synthetic
 * addresses), so both runs write the same events; the other 999,000 sit on addresses that never
 * transact. Goal: the 1M rate within 10 % of the 1k rate. PostgreSQL when DATABASE_URL is set
 * (each run on a fresh database), else PGlite.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { newId } from '../src/common/ids.js';
import { silentLogger } from '../src/common/logger.js';
import { migrate } from '../src/db/migrate.js';
import type { Db } from '../src/db/pool.js';
import { writeSyntheticChain } from '../src/devnet/synth-dir.js';
import { syntheticAddresses } from '../src/devnet/synthetic.js';
import { Ingester } from '../src/ingest/loop.js';
import { hexToBase58 } from '../src/tron/address.js';
import { NodeClient } from '../src/tron/node-client.js';
import { type Engine, emptyDb } from '../test/helpers/db.js';
import { startReplayProcess } from './replay-process.js';
import { baseline } from './scan.js';

const CHAIN = { seed: 11, firstBlock: 71_000_000, txPerBlock: 600, addresses: 10_000 };

async function seedWatches(db: Db, total: number, activeFrom: number): Promise<void> {
  const acc = newId('acc');
  await db.query(
    "INSERT INTO accounts (id, email, plan, watch_quota) VALUES ($1, 'bench@example.com', 'business', 2000000)",
    [acc],
  );
  // 1,000 watches on the busiest synthetic addresses (these match), the rest on random addresses.
  const busy = syntheticAddresses(CHAIN).slice(0, 1000);
  const dirs = ['incoming', 'outgoing', 'both'];
  const assets = ['USDT', 'TRX', 'ALL'];
  await db.query(
    `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel,
                          webhook_url, secret_key_id, secret_ciphertext, active_from_block)
     SELECT 'wh_busy' || lpad(i::text, 19, '0'), $1, 'mainnet', a, a, ($3::text[])[1 + (i % 3)::int], ($4::text[])[1 + ((i / 3) % 3)::int],
            'webhook', 'https://example.com/hook', 'k', '\\x00'::bytea, $5
       FROM unnest($2::text[]) WITH ORDINALITY AS u(a, i)`,
    [acc, busy, assets, dirs, activeFrom],
  );
  const rest = total - busy.length;
  const chunk = 100_000;
  for (let start = 0; start < rest; start += chunk) {
    const n = Math.min(chunk, rest - start);
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel,
                            webhook_url, secret_key_id, secret_ciphertext, active_from_block)
       SELECT 'wh_idle' || lpad(g::text, 19, '0'), $1, 'mainnet', h, h, 'ALL', 'both', 'webhook',
              'https://example.com/hook', 'k', '\\x00'::bytea, $4
         FROM (SELECT g, '41' || substr(md5('idle' || g::text) || md5('x' || g::text), 1, 40) AS h
                 FROM generate_series($2::int, $3::int) AS g) s`,
      [acc, start, start + n - 1, activeFrom],
    );
  }
  await db.query('ANALYZE watches');
  void hexToBase58; // addresses are stored as hex in both columns: matching reads address_hex only
}

async function run(engine: Engine, url: string, first: number, last: number, watches: number) {
  const t = await emptyDb(engine);
  try {
    await migrate(t.db);
    const seedStart = performance.now();
    await seedWatches(t.db, watches, first - 1);
    const seedSec = (performance.now() - seedStart) / 1000;
    const client = new NodeClient({ url, connections: 8 });
    const ac = new AbortController();
    const ing = new Ingester({
      db: t.db,
      client,
      logger: silentLogger,
      config: {
        network: 'mainnet',
        node: { concurrency: 8 },
        ingest: { startBlock: first, blockIntervalMs: 3000 },
      },
    });
    const started = performance.now();
    const done = ing.run(ac.signal);
    while (ing.stats.cursor < last) await new Promise((r) => setTimeout(r, 5));
    const seconds = (performance.now() - started) / 1000;
    ac.abort();
    await done;
    await client.close();
    return { blocksPerSec: (last - first + 1) / seconds, events: ing.stats.events, seedSec };
  } finally {
    await t.drop();
  }
}

export async function benchIngestWatches(
  opts: { blocks?: number; watches?: number } = {},
): Promise<string[]> {
  const k = opts.blocks ?? 100;
  const big = opts.watches ?? 1_000_000;
  const engine: Engine = process.env.DATABASE_URL ? 'postgres' : 'pglite';
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-bench-watches-'));
  const lines: string[] = [];
  try {
    await writeSyntheticChain(CHAIN, k, dir);
    const node = await startReplayProcess(['--dir', dir, '--instant']);
    try {
      await baseline(node.url, node.first, Math.min(node.last, node.first + 10), 8); // warm-up
      const parse = await baseline(node.url, node.first, node.last, 8);
      const parseRate = (node.last - node.first + 1) / parse.seconds;
      const small = await run(engine, node.url, node.first, node.last, 1_000);
      const large = await run(engine, node.url, node.first, node.last, big);
      const small2 = await run(engine, node.url, node.first, node.last, 1_000);
      const smallRate = Math.max(small.blocksPerSec, small2.blocksPerSec);
      lines.push(
        `database: ${engine}; ${k} blocks of 600 txs; ${small.events} events written per run`,
      );
      lines.push(
        `ingest with 1,000 active watches:          ${smallRate.toFixed(1)} blocks/s (runs: ${small.blocksPerSec.toFixed(1)}, ${small2.blocksPerSec.toFixed(1)})`,
      );
      lines.push(
        `ingest with ${big.toLocaleString('en-US')} active watches:  ${large.blocksPerSec.toFixed(1)} blocks/s (${large.events} events; seeding took ${large.seedSec.toFixed(0)} s)`,
      );
      lines.push(
        `parse-only baseline (fetch + JSON.parse of the same blocks, 8 in flight): ${parseRate.toFixed(1)} blocks/s`,
      );
      lines.push(
        `ratio ${big.toLocaleString('en-US')}/1,000: ${(large.blocksPerSec / smallRate).toFixed(2)}  (goal: ≥ 0.90); ${big.toLocaleString('en-US')}/parse-only: ${(large.blocksPerSec / parseRate).toFixed(2)}; mainnet produces 0.33 blocks/s`,
      );
    } finally {
      await node.stop();
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return lines;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const l of await benchIngestWatches({
    blocks: Number(process.env.BENCH_BLOCKS ?? 100),
    watches: Number(process.env.BENCH_WATCHES ?? 1_000_000),
  }))
    console.log(l);
}
