/**
 * Ingest with tronwatch's own finality (issue 28, src/ingest/finality-gate.ts), through the whole
 * path to the events and notifications tables, on both database engines, against a real replay
 * node serving a synthetic chain signed by the 27 devnet SRs:
 * - a block is committed only once 19 SRs signed blocks on top of it (the node's solidified head
 *   only says how far to read): every expected event of the proven blocks exactly once, none of
 *   the 18 blocks above; the light client's state is stored with the cursor, and a new ingester
 *   resumes from it (cross-checked) without committing anything twice;
 * - a provider that serves a block with a forged signature (signed by another SR's key), an
 *   unsigned block, or a fork signed by only 18 SRs gets no event row and no notification from
 *   it: ingest stops below it, its provider is set aside, the stall is recorded.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { newId } from '../../src/common/ids.js';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import type { Queryable } from '../../src/db/pool.js';
import {
  DEVNET_SRS,
  type SyntheticChainOptions,
  syntheticAddresses,
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { FinalityGate } from '../../src/ingest/finality-gate.js';
import { Ingester } from '../../src/ingest/loop.js';
import { hexToBase58 } from '../../src/tron/address.js';
import { loadLightClientState } from '../../src/tron/light-client/store.js';
import { signWitnessHeader } from '../../src/tron/light-client/witness-signature.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { BlockJson } from '../../src/tron/types.js';
import { encodeHeaderRaw } from '../../src/tron/verify.js';
import {
  eventKey,
  expectedEvents,
  type SyntheticChain,
  serveSynthetic,
  storedEventKeys,
  type TestWatch,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import { blockJsonOf, SignedChain } from '../helpers/sr-chain.js';

const CHAIN = { seed: 28, firstBlock: 71_000_000, txPerBlock: 40, addresses: 40, count: 60 };
const OPTS: SyntheticChainOptions = {
  seed: CHAIN.seed,
  firstBlock: CHAIN.firstBlock,
  txPerBlock: CHAIN.txPerBlock,
  addresses: CHAIN.addresses,
};
/** Blocks above a block that make it final on a chain where every SR signs in turn (19 - 1). */
const ABOVE = 18;

const noNewSrs = async (a: string): Promise<string> => {
  throw new Error(`no SR is new on this chain (${a})`);
};

async function insertWatches(db: Queryable, activeFrom: number): Promise<TestWatch[]> {
  const acc = newId('acc');
  await db.query("INSERT INTO accounts (id, email, plan) VALUES ($1, $2, 'pro')", [
    acc,
    `${acc}@example.com`,
  ]);
  const out: TestWatch[] = [];
  for (const addressHex of syntheticAddresses(OPTS).slice(0, 4)) {
    const id = newId('wh');
    await db.query(
      `INSERT INTO watches (id, account_id, network, address, address_hex, asset_filter, direction, channel,
                            webhook_url, secret_key_id, secret_ciphertext, status, active_from_block)
       VALUES ($1, $2, 'mainnet', $3, $4, 'ALL', 'both', 'webhook', 'https://example.com/hook', 'k', '\\x00'::bytea, 'ACTIVE', $5)`,
      [id, acc, hexToBase58(addressHex), addressHex, activeFrom],
    );
    out.push({ id, addressHex, asset: 'ALL', direction: 'both', activeFrom });
  }
  return out;
}

function ingesterFor(db: TestDb['db'], url: string, metrics?: Metrics): Ingester {
  return new Ingester({
    db,
    client: new NodeClient({ url, retries: 1, timeoutMs: 5000 }),
    config: {
      network: 'mainnet',
      node: { concurrency: 4 },
      ingest: { startBlock: CHAIN.firstBlock, blockIntervalMs: 50 },
    },
    logger: silentLogger,
    finality: new FinalityGate({ checkpoint: syntheticCheckpoint(OPTS), keyOf: noNewSrs }),
    permanentRetryMs: 100,
    ...(metrics ? { metrics } : {}),
  });
}

/** Run `ing` until `done()` holds (checked every 20 ms), then stop it. */
async function runUntil(ing: Ingester, done: () => Promise<boolean> | boolean): Promise<void> {
  const ac = new AbortController();
  const running = ing.run(ac.signal);
  for (let i = 0; i < 3000 && !(await done()); i++) await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  await running;
}

async function cursorRow(
  db: Queryable,
): Promise<{ block_number: number; stalled_reason: string | null }> {
  const { rows } = await db.query<{ block_number: string; stalled_reason: string | null }>(
    "SELECT block_number, stalled_reason FROM chain_cursor WHERE network = 'mainnet'",
  );
  return {
    block_number: Number(rows[0]?.block_number ?? -1),
    stalled_reason: rows[0]?.stalled_reason ?? null,
  };
}

async function maxEventBlock(db: Queryable): Promise<{ events: number; notifications: number }> {
  const e = await db.query<{ m: string | null }>('SELECT max(block_number) AS m FROM events');
  const n = await db.query<{ m: string | null }>(
    'SELECT max(e.block_number) AS m FROM notifications n JOIN events e ON e.id = n.event_id',
  );
  return { events: Number(e.rows[0]?.m ?? -1), notifications: Number(n.rows[0]?.m ?? -1) };
}

/** Block n of the chain with its header re-signed by `privateKey` (same id: verify.ts passes it). */
function resigned(n: number, privateKey: Uint8Array | undefined): string {
  const b = structuredClone(syntheticBlock(OPTS, n).block) as BlockJson;
  const raw = b.block_header?.raw_data as Record<string, unknown>;
  const sig = privateKey
    ? Buffer.from(signWitnessHeader(encodeHeaderRaw(raw, n), privateKey)).toString('hex')
    : `${'11'.repeat(64)}00`; // not a signature of anyone's
  (b.block_header as { witness_signature: string }).witness_signature = sig;
  return JSON.stringify(b);
}

describe.each(dbEngines)('ingest with the light client on %s', { timeout: 240_000 }, (engine) => {
  let t: TestDb | undefined;
  let chain: SyntheticChain | undefined;
  afterEach(async () => {
    await chain?.node.close();
    await t?.drop();
    chain = undefined;
    t = undefined;
  });

  it('commits a block only once 19 SRs signed on top of it, stores the light client with the cursor, and resumes from it', async () => {
    t = await migratedDb(engine);
    // lag 0: the node's full-node head is its solidified head (ingest reads up to the former).
    chain = await serveSynthetic(CHAIN, { instant: true, lag: 0 });
    const db = t.db;
    const watches = await insertWatches(db, chain.first - 1);
    // The node has solidified only the first 30 blocks: 12 of them can be proven.
    const firstHead = chain.first + 29;
    chain.node.advanceTo(firstHead);
    const metrics = new Metrics();
    const a = ingesterFor(db, chain.node.url, metrics);
    await runUntil(a, () => a.stats.cursor >= firstHead - ABOVE);
    expect(a.stats.cursor).toBe(firstHead - ABOVE);
    expect(a.gate?.readHeight).toBe(firstHead);
    const want = (upTo: number) =>
      expectedEvents(chain?.transfers.filter((x) => x.blockNumber <= upTo) ?? [], watches)
        .map(eventKey)
        .sort();
    expect(want(firstHead - ABOVE).length).toBeGreaterThan(0);
    // Exactly the proven blocks' events: none of the 18 read above them.
    expect(await storedEventKeys(db)).toEqual(want(firstHead - ABOVE));
    const stored = await loadLightClientState(db, 'mainnet');
    expect(stored?.snapshot.final.number).toBe(firstHead - ABOVE);
    expect(stored?.snapshot.final.id).toBe(syntheticBlockId(OPTS, firstHead - ABOVE));
    const text = await metrics.registry.metrics();
    expect(text).toContain(`tronwatch_light_client_final_block ${firstHead - ABOVE}`);
    expect(text).toContain('tronwatch_light_client_known_srs 27');
    expect(text).toContain('tronwatch_light_client_threshold_srs 19');

    // A new ingester (a restart): resumes from the stored light client, nothing twice.
    chain.node.advanceTo(chain.last);
    const b = ingesterFor(db, chain.node.url);
    await runUntil(b, () => b.stats.cursor >= chain!.last - ABOVE);
    expect(b.stats.cursor).toBe(chain.last - ABOVE);
    expect(await storedEventKeys(db)).toEqual(want(chain.last - ABOVE));
    expect((await loadLightClientState(db, 'mainnet'))?.snapshot.final.number).toBe(
      chain.last - ABOVE,
    );
  });

  it.each([
    [
      'a forged signature (another SR’s key)',
      (n: number) => resigned(n, DEVNET_SRS[3]?.privateKey),
    ],
    ['an unsigned block', (n: number) => resigned(n, undefined)],
  ])(
    'a provider serving %s gets no event and no notification from it or above it',
    async (_, forge) => {
      t = await migratedDb(engine);
      chain = await serveSynthetic(CHAIN, { instant: true });
      const db = t.db;
      const watches = await insertWatches(db, chain.first - 1);
      const bad = chain.first + 40;
      // The forged block carries transfers to the watched addresses: events if it got through.
      expect(
        expectedEvents(
          chain.transfers.filter((x) => x.blockNumber === bad),
          watches,
        ).length,
      ).toBeGreaterThan(0);
      chain.node.setLies({ blocks: new Map([[bad, { block: forge(bad) }]]) });
      const metrics = new Metrics();
      const ing = ingesterFor(db, chain.node.url, metrics);
      await runUntil(ing, async () => (await cursorRow(db)).stalled_reason !== null);
      const row = await cursorRow(db);
      expect(row.stalled_reason).toContain(`block ${bad}`);
      expect(row.stalled_reason).toMatch(/signed by|signature|recover/);
      // Below it: what 19 SRs proved (bad - 1 - 18); at it and above: nothing.
      expect(row.block_number).toBe(bad - 1 - ABOVE);
      const max = await maxEventBlock(db);
      expect(max.events).toBeLessThan(bad);
      expect(max.notifications).toBeLessThan(bad);
      expect(await storedEventKeys(db)).toEqual(
        expectedEvents(
          chain.transfers.filter((x) => x.blockNumber <= bad - 1 - ABOVE),
          watches,
        )
          .map(eventKey)
          .sort(),
      );
      expect(await metrics.registry.metrics()).toMatch(
        /tronwatch_light_client_refused_total\{code="bad-signature"\} [1-9]/,
      );
    },
  );

  it('a provider serving a fork signed by only 18 SRs gets nothing of it committed', async () => {
    t = await migratedDb(engine);
    chain = await serveSynthetic(CHAIN, { instant: true });
    const db = t.db;
    const watches = await insertWatches(db, chain.first - 1);
    const fork = chain.first + 20;
    const below = syntheticBlock(OPTS, fork - 1).block.block_header?.raw_data;
    const liars = new Set(DEVNET_SRS.slice(0, 18).map((s) => s.address));
    const signed = new SignedChain(
      {
        number: fork - 1,
        id: syntheticBlockId(OPTS, fork - 1),
        timestamp: Number(below?.timestamp),
      },
      DEVNET_SRS,
    );
    const blocks = new Map<number, { block: string; infos: string }>();
    for (let n = fork; n <= chain.last; n++) {
      blocks.set(n, {
        block: JSON.stringify(blockJsonOf(signed.next((s) => liars.has(s.address)))),
        infos: '[]',
      });
    }
    chain.node.setLies({ blocks });
    const ing = ingesterFor(db, chain.node.url);
    // Everything is read (the fork's blocks pass every check but finality)…
    await runUntil(ing, () => (ing.gate?.readHeight ?? 0) >= chain!.last);
    expect(ing.gate?.readHeight).toBe(chain.last);
    // …and nothing of the fork is final: at most the block below it.
    expect(ing.stats.cursor).toBeLessThan(fork);
    expect((await maxEventBlock(db)).events).toBeLessThan(fork);
    expect(await storedEventKeys(db)).toEqual(
      expectedEvents(
        chain.transfers.filter((x) => x.blockNumber <= ing.stats.cursor),
        watches,
      )
        .map(eventKey)
        .sort(),
    );
  });
});
