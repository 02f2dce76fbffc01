/**
 * Several node providers (src/tron/node-group.ts) against real replay nodes serving one synthetic
 * chain, some of them lying (ReplayLies: forged blocks and receipts, wrong heads, another fork),
 * on both database engines: no event ever comes from forged data, every real event is committed
 * exactly once, and ingest fails over, stalls and resumes as docs/trusting-the-node.md
 * says. The expectation is the generator's own ground truth (test/helpers/chain.ts).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { silentLogger } from '../../src/common/logger.js';
import { Metrics } from '../../src/common/metrics.js';
import {
  memorySource,
  type ReplayLies,
  type ReplayNode,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { syntheticAddresses, syntheticBlock } from '../../src/devnet/synthetic.js';
import { readCursor } from '../../src/ingest/commit.js';
import { Ingester } from '../../src/ingest/loop.js';
import { readProviderStates } from '../../src/ingest/providers.js';
import { readStall } from '../../src/ingest/stall.js';
import { NodeClient } from '../../src/tron/node-client.js';
import { NodeGroup } from '../../src/tron/node-group.js';
import type { BlockJson, TransactionInfoJson, Transfer } from '../../src/tron/types.js';
import {
  eventKey,
  expectedEvents,
  insertSyntheticWatches,
  storedEventKeys,
  type TestWatch,
} from '../helpers/chain.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';
import {
  type Forgery,
  forgeConsistentTransfer,
  forgeLogOnContractCall,
  forgeLogOnTrxTransfer,
  forgeRecipientInJson,
} from '../helpers/forge.js';

const CHAIN = { seed: 31, firstBlock: 73_000_000, txPerBlock: 80, addresses: 40 };
const COUNT = 10;
const FIRST = CHAIN.firstBlock;
const LAST = FIRST + COUNT - 1;

interface Chain {
  map: Map<number, { block: string; infos: string }>;
  parsed: Map<number, { block: BlockJson; infos: TransactionInfoJson[] }>;
  transfers: Transfer[];
}

function buildChain(): Chain {
  const map = new Map<number, { block: string; infos: string }>();
  const parsed = new Map<number, { block: BlockJson; infos: TransactionInfoJson[] }>();
  const transfers: Transfer[] = [];
  for (let n = FIRST; n <= LAST; n++) {
    const b = syntheticBlock(CHAIN, n);
    map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    parsed.set(n, { block: b.block, infos: b.infos });
    transfers.push(...b.transfers);
  }
  return { map, parsed, transfers };
}

/** Wait until `cond` holds, polling every 20 ms; fail after `ms` (a bound, not a measurement). */
async function until(what: string, cond: () => Promise<boolean> | boolean, ms = 45_000) {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** Refused answers by provider and check, from the metrics. */
async function refused(metrics: Metrics): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  const m = metrics.registry.getSingleMetric('tronwatch_node_answers_refused_total');
  for (const v of (await m?.get())?.values ?? []) {
    out[`${v.labels.provider}:${v.labels.check}`] = v.value;
  }
  return out;
}

describe.each(dbEngines)('node providers on %s', (engine) => {
  let t: TestDb | undefined;
  const nodes: ReplayNode[] = [];
  let group: NodeGroup | undefined;
  afterEach(async () => {
    await group?.close();
    await Promise.all(nodes.splice(0).map((n) => n.close()));
    await t?.drop();
    group = undefined;
    t = undefined;
  });

  async function setUp(chain: Chain, providers: number, lies: Array<ReplayLies | undefined>) {
    t = await migratedDb(engine);
    const source = memorySource(chain.map);
    for (let i = 0; i < providers; i++) {
      const lie = lies[i];
      nodes.push(await startReplayNode({ source, instant: true, ...(lie ? { lies: lie } : {}) }));
    }
    const { rows } = await t.db.query<{ id: string }>(
      "INSERT INTO accounts (id, email, plan) VALUES ('acc_quorum', 'q@example.com', 'pro') RETURNING id",
    );
    const watches = await insertSyntheticWatches(
      t.db,
      rows[0]?.id as string,
      syntheticAddresses(CHAIN).slice(0, 12),
      { activeFrom: FIRST - 1 },
    );
    return watches;
  }

  function startIngest(quorum: number, metrics: Metrics, onBlock?: (n: number) => void) {
    group = new NodeGroup({
      clients: nodes.map((n) => new NodeClient({ url: n.url, retries: 1, timeoutMs: 5_000 })),
      quorum,
      blockIntervalMs: 50,
      logger: silentLogger,
      metrics,
      asideBaseMs: 0, // a liar is asked (and caught) again on every block
    });
    const committed: number[] = [];
    const db = t?.db;
    if (!db) throw new Error('no database');
    const ing = new Ingester({
      db,
      client: group,
      logger: silentLogger,
      metrics,
      config: {
        network: 'mainnet',
        node: { concurrency: 4 },
        ingest: { startBlock: FIRST, blockIntervalMs: 50 },
      },
      permanentRetryMs: 100,
      onBlock: (b) => {
        committed.push(b.blockNumber);
        onBlock?.(b.blockNumber);
      },
    });
    const ac = new AbortController();
    const running = ing.run(ac.signal);
    return {
      ing,
      committed,
      async stop() {
        ac.abort();
        await running;
      },
    };
  }

  /**
   * The stored events are exactly the honest chain's (a forged log on an honest transaction
   * would be an extra event), and none carries the id of a re-signed (forged) transaction.
   */
  async function expectHonestEvents(chain: Chain, watches: TestWatch[], forged: Forgery[]) {
    const db = t?.db;
    if (!db) throw new Error('no database');
    const expected = expectedEvents(chain.transfers, watches);
    expect(expected.length).toBeGreaterThan(10);
    expect(await storedEventKeys(db)).toEqual(expected.map(eventKey).sort());
    const { rows } = await db.query<{ tx_id: string }>('SELECT DISTINCT tx_id FROM events');
    const honest = new Set(chain.transfers.map((x) => x.txId));
    for (const r of rows) expect(honest.has(r.tx_id), r.tx_id).toBe(true);
    for (const f of forged) {
      if (!honest.has(f.txId)) expect(rows.map((r) => r.tx_id)).not.toContain(f.txId);
    }
  }

  it('two honest providers and a liar, quorum 2: no event from forged data, every real event once', async () => {
    const chain = buildChain();
    const victim = syntheticAddresses(CHAIN)[0] as string; // a watched address
    const at = (n: number) =>
      chain.parsed.get(n) as { block: BlockJson; infos: TransactionInfoJson[] };
    const forged = [
      forgeRecipientInJson(at(FIRST + 1).block, at(FIRST + 1).infos, victim),
      forgeConsistentTransfer(at(FIRST + 3).block, at(FIRST + 3).infos, victim),
      forgeLogOnTrxTransfer(at(FIRST + 5).block, at(FIRST + 5).infos, victim),
      forgeLogOnContractCall(at(FIRST + 7).block, at(FIRST + 7).infos, victim),
    ];
    const lies: ReplayLies = {
      blocks: new Map([
        [FIRST + 1, forged[0] as Forgery],
        [FIRST + 3, forged[1] as Forgery],
        [FIRST + 5, forged[2] as Forgery],
        [FIRST + 7, forged[3] as Forgery],
      ]),
      heads: (h) => ({ solidified: h.solidified, head: h.head + 10_000 }),
      forkFrom: LAST - 1,
    };
    // The liar comes first: it is asked for every block.
    const watches = await setUp(chain, 3, [lies, undefined, undefined]);
    const metrics = new Metrics();
    const run = startIngest(2, metrics);
    try {
      await until('the last block', () => run.ing.stats.cursor >= LAST);
    } finally {
      await run.stop();
    }
    expect(run.committed).toEqual(Array.from({ length: COUNT }, (_, i) => FIRST + i));
    await expectHonestEvents(chain, watches, forged);
    // Each lie was seen for what it is: refused by a check, or outvoted by the honest pair.
    const r = await refused(metrics);
    expect(r['0:tx_fields']).toBeGreaterThanOrEqual(1);
    expect(r['0:transfer_log']).toBeGreaterThanOrEqual(1);
    expect(r['0:outvoted']).toBeGreaterThanOrEqual(3); // the re-signed transfer, the DEX log, the fork
    expect(Object.keys(r).every((k) => k.startsWith('0:'))).toBe(true);
    // The head used for activation is the 2nd highest: the liar's is not believed.
    const { rows } = await (t as TestDb).db.query<{ head_block_number: string }>(
      'SELECT head_block_number FROM chain_head',
    );
    expect(Number(rows[0]?.head_block_number)).toBe(LAST + 18);
    expect(await readStall((t as TestDb).db, 'mainnet')).toBeUndefined();
  });

  it('a lone liar, quorum 1: what the self-checks see is refused, ingest stalls there and resumes', async () => {
    const chain = buildChain();
    const victim = syntheticAddresses(CHAIN)[0] as string;
    const bad = FIRST + 2;
    const at = chain.parsed.get(bad) as { block: BlockJson; infos: TransactionInfoJson[] };
    const inJson = forgeRecipientInJson(at.block, at.infos, victim);
    const trxLog = forgeLogOnTrxTransfer(at.block, at.infos, victim);
    const watches = await setUp(chain, 1, [{ blocks: new Map([[bad, inJson]]) }]);
    const metrics = new Metrics();
    const run = startIngest(1, metrics);
    const db = (t as TestDb).db;
    try {
      await until(
        'a stall on the forged block',
        async () => (await readStall(db, 'mainnet'))?.block === bad,
      );
      expect((await readStall(db, 'mainnet'))?.reason).toMatch(/failed verification \(tx_fields\)/);
      expect((await readCursor(db, 'mainnet'))?.block_number).toBe(bad - 1);
      // Another lie on the same block: still refused, the stall says why.
      (nodes[0] as ReplayNode).setLies({ blocks: new Map([[bad, trxLog]]) });
      await until('the new reason', async () =>
        /\(transfer_log\)/.test((await readStall(db, 'mainnet'))?.reason ?? ''),
      );

      expect((await readCursor(db, 'mainnet'))?.block_number).toBe(bad - 1);
      // The node tells the truth again: the block goes through, nothing skipped or repeated.
      (nodes[0] as ReplayNode).setLies(undefined);
      await until('the last block', () => run.ing.stats.cursor >= LAST);
    } finally {
      await run.stop();
    }
    expect(run.committed).toEqual(Array.from({ length: COUNT }, (_, i) => FIRST + i));
    await expectHonestEvents(chain, watches, [inJson, trxLog]);
    expect(await readStall(db, 'mainnet')).toBeUndefined();
    expect((await readProviderStates(db, 'mainnet'))[0]).toMatchObject({ state: 'ok' });
  });

  it('quorum 1: an answer whose root checks wins over a re-signed one whose root cannot', async () => {
    const chain = buildChain();
    const victim = syntheticAddresses(CHAIN)[0] as string;
    const at = chain.parsed.get(FIRST + 4) as { block: BlockJson; infos: TransactionInfoJson[] };
    const resigned = forgeConsistentTransfer(at.block, at.infos, victim);
    const watches = await setUp(chain, 2, [{ blocks: new Map([[FIRST + 4, resigned]]) }]);
    const metrics = new Metrics();
    const run = startIngest(1, metrics);
    try {
      await until('the last block', () => run.ing.stats.cursor >= LAST);
    } finally {
      await run.stop();
    }
    await expectHonestEvents(chain, watches, [resigned]);
    expect((await refused(metrics))['0:outvoted']).toBe(1);
  });

  it('fails over when the first provider dies mid-catch-up: no gap, no block twice', async () => {
    const chain = buildChain();
    const watches = await setUp(chain, 2, []);
    const metrics = new Metrics();
    let killed: Promise<void> | undefined;
    const run = startIngest(1, metrics, (n) => {
      if (n === FIRST + 3) killed = (nodes[0] as ReplayNode).close();
    });
    try {
      await until('the last block', () => run.ing.stats.cursor >= LAST);
    } finally {
      await run.stop();
      await killed;
    }
    expect(run.committed).toEqual(Array.from({ length: COUNT }, (_, i) => FIRST + i));
    await expectHonestEvents(chain, watches, []);
    expect(nodes[1]?.stats.requests.byPath['/walletsolidity/getblockbynum']).toBeGreaterThan(0);
    const states = await readProviderStates((t as TestDb).db, 'mainnet');
    expect(states.map((s) => s.index)).toEqual([0, 1]);
    expect(states[1]?.state).toBe('ok');
  });

  it('a provider whose 403s outlast the pause they ask for is unhealthy; the other one serves', async () => {
    const chain = buildChain();
    const watches = await setUp(chain, 2, []);
    // The first provider refuses everything (a revoked key): 403, Retry-After: 1, every time.
    (nodes[0] as ReplayNode).setRateLimit({
      perSecond: 1,
      status: 403,
      retryAfterSeconds: 1,
      refuseAll: true,
    });
    const metrics = new Metrics();
    const run = startIngest(1, metrics);
    const db = (t as TestDb).db;
    try {
      await until('the last block', () => run.ing.stats.cursor >= LAST);
      await until('the first provider unhealthy', async () =>
        (await readProviderStates(db, 'mainnet')).some((p) => p.state === 'unhealthy'),
      );
    } finally {
      await run.stop();
    }
    await expectHonestEvents(chain, watches, []);
    const states = await readProviderStates(db, 'mainnet');
    expect(states[0]).toMatchObject({ index: 0, state: 'unhealthy', reason: 'forbidden' });
    expect(states[1]).toMatchObject({ index: 1, state: 'ok' });
    expect(group?.clients[0]?.health()).toMatchObject({ healthy: false });
  });

  it('an unhealthy provider is asked again once its pause ran out: it serves the quorum when another dies', async () => {
    const chain = buildChain();
    const watches = await setUp(chain, 3, []);
    const [p1, p2, p3] = nodes as [ReplayNode, ReplayNode, ReplayNode];
    for (const n of nodes) n.advanceTo(FIRST + 3);
    // The second provider refuses everything (403, Retry-After: 1) until it is unhealthy.
    p2.setRateLimit({ perSecond: 1, status: 403, retryAfterSeconds: 1, refuseAll: true });
    const metrics = new Metrics();
    const run = startIngest(2, metrics);
    const db = (t as TestDb).db;
    try {
      await until('block FIRST + 3', () => run.ing.stats.cursor >= FIRST + 3);
      await until('the second provider unhealthy', () => !group?.clients[1]?.health().healthy);
      // It accepts requests again; then the third provider dies: the quorum of two needs it.
      p2.setRateLimit(undefined);
      await p3.close();
      p1.advanceTo(LAST);
      p2.advanceTo(LAST);
      await until('the last block', () => run.ing.stats.cursor >= LAST);
    } finally {
      await run.stop();
    }
    expect(run.committed).toEqual(Array.from({ length: COUNT }, (_, i) => FIRST + i));
    await expectHonestEvents(chain, watches, []);
    expect(group?.clients[1]?.health()).toEqual({ healthy: true });
    const states = await readProviderStates(db, 'mainnet');
    expect(states[1]).toMatchObject({ index: 1, state: 'ok' });
  }, 120_000);
});
