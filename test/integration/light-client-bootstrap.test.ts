/**
 * The light client with no pinned checkpoint (src/ingest/finality-gate.ts FinalityGate.open,
 * finalityGateFor): on both database engines, against devnet nodes (src/devnet/sr-node.ts) serving
 * a signed synthetic chain and its SR set over real HTTP.
 * - First start, nothing stored: the gate takes a checkpoint at the cursor's block from the
 *   providers (buildCheckpoint with `at`), the devnet's SRs in schedule order with their keys, and
 *   follows the chain from it; a provider that reports another key, or a cursor above the
 *   providers' solidified heads, gives no checkpoint: open halts with the reason, nothing stored.
 * - An SR new after a maintenance: its key only once the providers list it as a witness (an
 *   active SR when its block is in their current epoch); a provider that is down does not count.
 * - Maintenance answers by majority (issue 36 item 2): a newcomer's key, `isJobs` and the next
 *   maintenance time are taken when at least the quorum agree and are a majority of the answers,
 *   each dissenter reported; no majority (1 of 2), or the quorum not met: nothing taken, nobody
 *   reported. The first-start checkpoint stays unanimous.
 * - Restart: a stored final block above its checkpoint is checked against the providers' block at
 *   that height; providers on another chain halt it, the same chain resumes, one of three on
 *   another chain is outvoted (named); one of two (no majority) is decided by the signatures:
 *   the provider whose block above it does not continue it is set aside, and without any signed
 *   continuation it tries again.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { type SrNode, startSrNode } from '../../src/devnet/sr-node.js';
import { DEVNET_SRS, syntheticBlock, syntheticCheckpoint } from '../../src/devnet/synthetic.js';
import { FinalityHaltError, finalityGateFor } from '../../src/ingest/finality-gate.js';
import {
  buildCheckpoint,
  NotAnSrError,
  newSrKeyFromProviders,
  type ProviderDissent,
} from '../../src/tron/light-client/checkpoint-build.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import { signedHeaderFromJson } from '../../src/tron/light-client/header.js';
import { CheckpointError } from '../../src/tron/light-client/sr-set.js';
import { loadLightClientState, saveLightClientState } from '../../src/tron/light-client/store.js';
import { dbEngines, migratedDb, type TestDb } from '../helpers/db.js';

const CHAIN = { seed: 28, firstBlock: 9000, txPerBlock: 2 };
const OTHER = { seed: 29, firstBlock: 9000, txPerBlock: 2 };
const HEAD = 9060;
const SR21 = DEVNET_SRS[21]?.address as string;

const nodes: SrNode[] = [];
let a: SrNode;
let b: SrNode;
let wrongKey: SrNode;
let otherChain: SrNode;

beforeAll(async () => {
  a = await startSrNode({ chain: CHAIN, head: HEAD });
  b = await startSrNode({ chain: CHAIN, head: HEAD + 3 });
  wrongKey = await startSrNode({
    chain: CHAIN,
    head: HEAD,
    reportKey: (x) => (x === SR21 ? `41${'77'.repeat(20)}` : undefined),
  });
  otherChain = await startSrNode({ chain: OTHER, head: HEAD });
  nodes.push(a, b, wrongKey, otherChain);
});

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.close()));
});

/** The gate the configuration gives for these providers, with no pinned checkpoint. */
function gateFor(providers: SrNode[], quorum = providers.length) {
  return finalityGateFor(
    loadConfig({
      TRON_NODE_URL: providers.map((n) => n.url).join(','),
      TRON_NODE_QUORUM: String(quorum),
    }),
    'devnet',
  );
}

async function haltOf(p: Promise<unknown>): Promise<FinalityHaltError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof FinalityHaltError) return err;
    throw err;
  }
  throw new Error('expected a FinalityHaltError');
}

describe('an SR new after a maintenance, as the providers confirm it (newSrKeyFromProviders)', () => {
  const provider = (n: SrNode, name = 'p') => ({ url: n.url, name });
  const current = syntheticCheckpoint(CHAIN).nextMaintenanceTime;
  const ATTACKER = `41${'5a'.repeat(20)}`;
  const STANDBY = `41${'aa'.repeat(20)}`; // listed by listwitnesses without isJobs (sr-answers.ts)

  it('gives an active SR’s key, and refuses an ordinary account and a standby witness', async () => {
    const plain = await startSrNode({ chain: CHAIN, head: HEAD, plainAccounts: [ATTACKER] });
    nodes.push(plain);
    expect(await newSrKeyFromProviders([provider(a)], SR21, current)).toBe(
      DEVNET_SRS[21]?.signingKey,
    );
    // Its key would be agreed (its own address: /wallet/getaccount answers for it)...
    await expect(
      newSrKeyFromProviders([provider(plain)], ATTACKER, current - 1),
    ).rejects.toBeInstanceOf(NotAnSrError);
    // ...but it is no witness at all.
    await expect(newSrKeyFromProviders([provider(plain)], ATTACKER, current)).rejects.toThrow(
      /is not a witness/,
    );
    // A witness that is not one of the 27 active now, for a block of the current epoch.
    await expect(newSrKeyFromProviders([provider(a)], STANDBY, current)).rejects.toThrow(
      /not one of the active SRs of the current epoch/,
    );
    // A block of an epoch the providers have not reached: wait, not refuse.
    const ahead = newSrKeyFromProviders([provider(a)], SR21, current + 21_600_000);
    await expect(ahead).rejects.toThrow(/have not reached its maintenance yet/);
    await expect(ahead).rejects.not.toBeInstanceOf(NotAnSrError);
  });

  it('a provider that is down does not count; the ones that answer must agree', async () => {
    const down = await startSrNode({ chain: CHAIN, head: HEAD });
    const url = down.url;
    await down.close();
    expect(
      await newSrKeyFromProviders(
        [provider(a, 'a'), { url, name: 'down' }, provider(b, 'b')],
        SR21,
        current,
        { quorum: 2, timeoutMs: 2000 },
      ),
    ).toBe(DEVNET_SRS[21]?.signingKey);
    await expect(
      newSrKeyFromProviders([provider(a, 'a'), { url, name: 'down' }], SR21, current, {
        quorum: 2,
        timeoutMs: 2000,
      }),
    ).rejects.toThrow();
    await expect(
      newSrKeyFromProviders([provider(a, 'a'), provider(wrongKey, 'w')], SR21, current),
    ).rejects.toThrow(/providers disagree/);
  });
});

describe('maintenance answers by majority, never unanimity (issue 36 item 2: newSrKeyFromProviders)', () => {
  const current = syntheticCheckpoint(CHAIN).nextMaintenanceTime;
  const key21 = DEVNET_SRS[21]?.signingKey;
  const WRONG = `41${'77'.repeat(20)}`;
  /** newSrKeyFromProviders for SR21 over `nodes` (named by their keys), with its dissents. */
  async function ask(named: Record<string, SrNode>, quorum: number) {
    const dissent: ProviderDissent[] = [];
    const providers = Object.entries(named).map(([name, n]) => ({ url: n.url, name }));
    try {
      const key = await newSrKeyFromProviders(providers, SR21, current, {
        quorum,
        timeoutMs: 5000,
        onDissent: (d) => dissent.push(d),
      });
      return { key, dissent };
    } catch (err) {
      return { err: err as Error, dissent };
    }
  }

  it('2 of 3 agree on the key, 1 answers another: the key is taken, the dissenter reported with both answers', async () => {
    const r = await ask({ a, b, w: wrongKey }, 2);
    expect(r.key).toBe(key21);
    expect(r.dissent).toEqual([
      {
        provider: 'w',
        what: `signing key of ${SR21} (/wallet/getaccount witness_permission)`,
        answer: JSON.stringify(WRONG),
        agreed: JSON.stringify(key21),
        agreedBy: ['a', 'b'],
      },
    ]);
  });

  it('2 of 3 agree, 1 says the newcomer is no active SR (isJobs), or another next maintenance time: taken, the dissenter reported', async () => {
    const hides = await startSrNode({ chain: CHAIN, head: HEAD, hide: [SR21] });
    const later = await startSrNode({
      chain: CHAIN,
      head: HEAD,
      nextMaintenanceTime: current + 21_600_000,
    });
    nodes.push(hides, later);
    const h = await ask({ a, h: hides, b }, 2);
    expect(h.key).toBe(key21);
    expect(h.dissent).toEqual([
      expect.objectContaining({
        provider: 'h',
        what: `witness ${SR21} (/wallet/listwitnesses isJobs)`,
        answer: '"none"',
        agreed: '"active"',
      }),
    ]);
    const t = await ask({ l: later, a, b }, 2);
    expect(t.key).toBe(key21);
    expect(t.dissent).toEqual([
      expect.objectContaining({
        provider: 'l',
        what: 'next maintenance time (/wallet/getnextmaintenancetime)',
        answer: String(current + 21_600_000),
        agreed: String(current),
        agreedBy: ['a', 'b'],
      }),
    ]);
  });

  it('1 of 2 against the other at quorum 1: no majority, nothing taken, nobody reported (the gate waits: a stall, retried)', async () => {
    const r = await ask({ a, w: wrongKey }, 1);
    expect(r.key).toBeUndefined();
    expect(r.err).toBeInstanceOf(CheckpointError);
    expect(r.err).not.toBeInstanceOf(NotAnSrError);
    expect(r.err?.message).toMatch(/providers disagree, no majority \(a: "41.*"; w: "41(77)+"\)/);
    expect(r.dissent).toEqual([]);
  });

  it('the quorum not met by the largest group: an error, nobody reported', async () => {
    const r = await ask({ a, b, w: wrongKey }, 3);
    expect(r.key).toBeUndefined();
    expect(r.err?.message).toMatch(/2 provider\(s\) agree, quorum 3; providers disagree/);
    expect(r.dissent).toEqual([]);
  });

  it('the first-start checkpoint stays unanimous: one provider of three with another key gives none', async () => {
    await expect(
      buildCheckpoint(
        [
          { url: a.url, name: 'a' },
          { url: b.url, name: 'b' },
          { url: wrongKey.url, name: 'w' },
        ],
        { quorum: 2, at: HEAD - 5, timeoutMs: 5000 },
      ),
    ).rejects.toThrow(/providers disagree \(a: .*; w: "41(77)+"\)/);
  });
});

describe.each(dbEngines)('light client without a pinned checkpoint on %s', (engine) => {
  let t: TestDb | undefined;
  afterEach(async () => {
    await t?.drop();
    t = undefined;
  });

  it('takes a checkpoint at the cursor from the providers and follows the chain from it', async () => {
    t = await migratedDb(engine);
    const at = HEAD - 5;
    const gate = await gateFor([a, b]);
    const r = await gate.open(t.db, 'devnet', { block_number: at, block_id: '' });
    expect(r).toEqual({ from: 'taken', final: at });
    const cp = gate.checkpoint;
    expect(cp?.block).toEqual({
      number: at,
      id: syntheticBlock(CHAIN, at).block.blockID,
      timestamp: Number(syntheticBlock(CHAIN, at).block.block_header?.raw_data?.timestamp),
    });
    expect(cp?.witnesses).toEqual(syntheticCheckpoint(CHAIN).witnesses);
    expect(cp?.network).toBe('devnet');
    expect(cp?.source).toMatch(/^taken by tronwatch at its first start \(not pinned\) from /);
    // The light client it made follows the chain: block at+1 is read next and verifies.
    expect(gate.readHeight).toBe(at);
    const lc = new LightClient(cp as NonNullable<typeof cp>);
    expect(lc.submit(signedHeaderFromJson(syntheticBlock(CHAIN, at + 1).block)).status).toBe(
      'verified',
    );
    expect(await loadLightClientState(t.db, 'devnet')).toBeUndefined();
  });

  it('halts with the reason when the providers disagree or the cursor is not solidified', async () => {
    t = await migratedDb(engine);
    const liar = await haltOf(
      (await gateFor([a, wrongKey])).open(t.db, 'devnet', { block_number: HEAD - 5, block_id: '' }),
    );
    expect(liar.message).toMatch(/none could be taken from the providers at block 9055/);
    expect(liar.message).toMatch(/providers disagree/);
    expect(liar.blockNumber).toBe(HEAD - 4);
    const ahead = await haltOf(
      (await gateFor([a, b])).open(t.db, 'devnet', { block_number: HEAD + 1, block_id: '' }),
    );
    expect(ahead.message).toMatch(/not solidified on every provider yet/);
    expect(await loadLightClientState(t.db, 'devnet')).toBeUndefined();
  });

  it('on restart, checks its stored final block against the providers', async () => {
    t = await migratedDb(engine);
    // A light client from the devnet checkpoint that proved some blocks final, stored.
    const cp = syntheticCheckpoint(CHAIN);
    const lc = new LightClient(cp);
    for (let n = cp.block.number + 1; n <= HEAD; n++) {
      lc.submit(signedHeaderFromJson(syntheticBlock(CHAIN, n).block));
    }
    const final = lc.finalBlock.number;
    expect(final).toBeGreaterThan(cp.block.number);
    await saveLightClientState(t.db, 'devnet', lc.snapshot());
    const cursor = { block_number: final, block_id: lc.finalBlock.id };

    const honest = await (await gateFor([a, b])).open(t.db, 'devnet', cursor);
    expect(honest).toEqual({ from: 'restored', final });

    const forked = await haltOf((await gateFor([otherChain], 1)).open(t.db, 'devnet', cursor));
    expect(forked.blockNumber).toBe(final);
    expect(forked.message).toContain(
      `the providers' block ${final} is ${syntheticBlock(OTHER, final).block.blockID}`,
    );
    // One provider of two on another chain: no majority either way, so the signatures decide
    // (issue 36 item 6): `a` serves block final + 1 on the stored final block, signed by its SR;
    // the other chain's block there has another parent: that provider is to be set aside.
    const other = new URL(otherChain.url).origin;
    const split = await (await gateFor([a, otherChain], 1)).open(t.db, 'devnet', cursor);
    expect(split).toMatchObject({ from: 'restored', final });
    expect(split.dissent?.providers).toEqual([other]);
    expect(split.setAside?.map((x) => x.provider)).toEqual([other]);
    expect(split.setAside?.[0]?.reason).toContain(`not the final block ${lc.finalBlock.id}`);
    // Nobody shows such a block (the confirming provider has none above the final one yet): no
    // pass, tried again.
    const short = await startSrNode({ chain: CHAIN, head: final });
    nodes.push(short);
    await expect(
      (await gateFor([short, otherChain], 1)).open(t.db, 'devnet', cursor),
    ).rejects.toThrow(
      /neither confirmed nor denied by the providers: providers disagree .*no provider shows a block/,
    );
    // One of three: the two that confirm are a majority; it goes on, naming the third.
    const outvoted = await (await gateFor([a, otherChain, b], 1)).open(t.db, 'devnet', cursor);
    expect(outvoted).toMatchObject({ from: 'restored', final });
    expect(outvoted.dissent?.providers).toEqual([new URL(otherChain.url).origin]);
    // Two of three on another chain, with quorum 2: they outnumber the one that confirms, but do
    // not all agree against it (one confirms): no halt; the signatures decide, both set aside.
    const two = await (await gateFor([a, otherChain, otherChain], 2)).open(t.db, 'devnet', cursor);
    expect(two).toMatchObject({ from: 'restored', final });
    expect(two.setAside?.map((x) => x.provider)).toEqual([other, `${other}#2`]);
  });
});
