/**
 * ChainFollower (src/tron/light-client/follow.ts): a light client reading a provider's chain ahead
 * of finality, on devnet-signed synthetic blocks: every block read once and handed out final once,
 * in order; a fork above finality followed by re-reading downwards (no block of the dead fork handed
 * out); a fork signed by 18 SRs and a withheld block never make anything final past them; a key
 * rotation in a transaction list the header does not prove is refused.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { startSrNode } from '../../src/devnet/sr-node.js';
import {
  DEVNET_SRS,
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { witnessKeyFromProviders } from '../../src/tron/light-client/checkpoint-build.js';
import { LightClient } from '../../src/tron/light-client/finality.js';
import {
  type BlockSource,
  ChainFollower,
  type ReadBlock,
  UnprovenRotationError,
} from '../../src/tron/light-client/follow.js';
import type { BlockJson } from '../../src/tron/types.js';
import { blockJsonOf, makeSr, SignedChain } from '../helpers/sr-chain.js';
import { accountPermissionUpdateRaw } from '../helpers/sr-synthetic.js';

const CHAIN = { seed: 29, firstBlock: 4000, txPerBlock: 2 };
const synth = (n: number): ReadBlock => ({ block: syntheticBlock(CHAIN, n).block });

/** A source serving `chain(n)` up to `produced`, counting reads per height. */
class MemorySource implements BlockSource {
  reads = new Map<number, number>();
  constructor(
    public chain: (n: number) => ReadBlock | undefined,
    public produced: number,
    public withheld = new Set<number>(),
  ) {}
  async blockByNumber(n: number): Promise<ReadBlock | undefined> {
    this.reads.set(n, (this.reads.get(n) ?? 0) + 1);
    if (n > this.produced || this.withheld.has(n)) return undefined;
    return this.chain(n);
  }
}

const noKeys = async (a: string): Promise<string> => {
  throw new Error(`no key expected (${a})`);
};

/** Step until the source has nothing new; @returns the final block numbers handed out. */
async function drain(f: ChainFollower): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < 10_000 && (await f.step()) === 'read'; i++) {
    for (let p = f.takeFinal(); p; p = f.takeFinal()) out.push(p.final.number);
  }
  return out;
}

describe('ChainFollower', () => {
  it('reads each block once and hands out each final block once, in order', async () => {
    const src = new MemorySource(synth, 4099);
    const f = new ChainFollower(new LightClient(syntheticCheckpoint(CHAIN)), src, noKeys);
    const finals = await drain(f);
    expect(finals).toEqual(Array.from({ length: 100 - 18 }, (_, i) => 4000 + i));
    expect([...src.reads.values()].every((c) => c === 1 || c === undefined)).toBe(true);
    expect(src.reads.get(4100)).toBe(1); // the one 'none'
    // More blocks produced: it goes on from where it stopped.
    src.produced = 4119;
    expect(await drain(f)).toEqual(Array.from({ length: 20 }, (_, i) => 4082 + i));
  });

  it('catching up, reads 16 heights at once and hands out the same blocks, each read once', async () => {
    const src = new MemorySource(synth, 4099);
    const f = new ChainFollower(new LightClient(syntheticCheckpoint(CHAIN)), src, noKeys, 16);
    expect(await drain(f)).toEqual(Array.from({ length: 100 - 18 }, (_, i) => 4000 + i));
    for (let n = 4000; n <= 4099; n++) expect(src.reads.get(n)).toBe(1);
  });

  it('follows a fork above finality by re-reading downwards, and never hands out the dead branch', async () => {
    const fork = 4040;
    const base = syntheticBlock(CHAIN, fork).block.block_header?.raw_data;
    const other = new SignedChain(
      { number: fork, id: syntheticBlockId(CHAIN, fork), timestamp: Number(base?.timestamp) },
      DEVNET_SRS,
    );
    const b = new Map<number, BlockJson>();
    for (let n = fork + 1; n <= fork + 60; n++) b.set(n, blockJsonOf(other.next()));
    const src = new MemorySource(synth, fork + 15);
    const lc = new LightClient(syntheticCheckpoint(CHAIN));
    const f = new ChainFollower(lc, src, noKeys);
    const before = await drain(f);
    expect(before[before.length - 1]).toBe(fork + 15 - 18);
    // The provider switches to the other branch from fork + 1 on.
    src.chain = (n) => (n <= fork ? synth(n) : { block: b.get(n) as BlockJson });
    src.produced = fork + 60;
    const after = await drain(f);
    const handed = [...before, ...after];
    expect(handed).toEqual(Array.from({ length: fork + 60 - 18 - 4000 + 1 }, (_, i) => 4000 + i));
    // What was handed out above the fork is the other branch's.
    expect(lc.finalBlock.id).toBe(b.get(fork + 60 - 18)?.blockID);
    // Re-reads: the heights from fork + 15 down to fork + 1, once more each.
    expect(src.reads.get(fork + 1)).toBe(2);
    expect(src.reads.get(fork + 16)).toBe(2); // the 'none', then the other branch
  });

  it('hands out nothing from a fork signed by 18 SRs', async () => {
    const liars = new Set(DEVNET_SRS.slice(0, 18).map((s) => s.address));
    const start = syntheticCheckpoint(CHAIN).block;
    const chain = new SignedChain(start, DEVNET_SRS);
    const blocks = new Map<number, BlockJson>();
    for (let n = start.number + 1; n <= start.number + 150; n++) {
      blocks.set(n, blockJsonOf(chain.next((s) => liars.has(s.address))));
    }
    const src = new MemorySource(
      (n) => ({ block: blocks.get(n) as BlockJson }),
      start.number + 150,
    );
    const f = new ChainFollower(new LightClient(syntheticCheckpoint(CHAIN)), src, noKeys);
    expect(await drain(f)).toEqual([]);
  });

  it('a withheld block stops finality where it is; served, everything behind it follows', async () => {
    const src = new MemorySource(synth, 4060, new Set([4030]));
    const f = new ChainFollower(new LightClient(syntheticCheckpoint(CHAIN)), src, noKeys);
    const first = await drain(f);
    expect(first[first.length - 1]).toBe(4029 - 18);
    src.withheld.clear();
    const rest = await drain(f);
    expect(rest).toEqual(Array.from({ length: 4060 - 18 - (4029 - 18) }, (_, i) => 4012 + i));
  });

  it("through a maintenance, a new SR's key comes from two providers over HTTP, and finality goes on", async () => {
    const newcomer = makeSr('voted in', true);
    const cp = syntheticCheckpoint(CHAIN);
    const next = cp.block.timestamp + 3000 * 50;
    const order = [...DEVNET_SRS.slice(0, 26), newcomer].reverse();
    const chain = new SignedChain(cp.block, DEVNET_SRS, next, order);
    const blocks = new Map<number, BlockJson>();
    for (let n = cp.block.number + 1; n <= cp.block.number + 140; n++) {
      blocks.set(n, blockJsonOf(chain.next()));
    }
    const nodes = [
      await startSrNode({ chain: CHAIN, head: 4010, accounts: [newcomer] }),
      await startSrNode({ chain: CHAIN, head: 4010, accounts: [newcomer] }),
    ];
    try {
      const providers = nodes.map((n, i) => ({ url: n.url, name: `p${i}` }));
      const asked: string[] = [];
      const keyOf = async (a: string) => {
        asked.push(a);
        return witnessKeyFromProviders(providers, a, { quorum: 2 });
      };
      const lc = new LightClient({
        ...cp,
        nextMaintenanceTime: next,
        maintenanceIntervalMs: 21_600_000,
      });
      const src = new MemorySource(
        (n) => ({ block: blocks.get(n) as BlockJson }),
        cp.block.number + 140,
      );
      const f = new ChainFollower(lc, src, keyOf);
      const finals = await drain(f);
      expect(asked).toEqual([newcomer.address]);
      expect(finals).toEqual(Array.from({ length: 140 - 18 }, (_, i) => cp.block.number + 1 + i));
      expect(lc.status().epoch).toBe(1);
      expect(nodes.every((n) => n.requests.get('/wallet/getaccount') === 1)).toBe(true);
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  it('refuses a key rotation in a JSON transaction list that its header does not prove', async () => {
    const sr = DEVNET_SRS[5]?.address as string;
    const raw = accountPermissionUpdateRaw(sr, `41${'99'.repeat(20)}`);
    const forged = (n: number): ReadBlock => {
      const r = synth(n);
      if (n !== 4003) return r;
      const tx = {
        txID: createHash('sha256').update(raw).digest('hex'),
        raw_data_hex: Buffer.from(raw).toString('hex'),
        ret: [{ contractRet: 'SUCCESS' }],
      };
      return { block: { ...r.block, transactions: [...(r.block.transactions ?? []), tx] } };
    };
    const src = new MemorySource(forged, 4010);
    const f = new ChainFollower(new LightClient(syntheticCheckpoint(CHAIN)), src, noKeys);
    await expect(drain(f)).rejects.toThrow(UnprovenRotationError);
    expect(f.nextHeight).toBe(4003);
  });
});
