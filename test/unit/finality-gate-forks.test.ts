/**
 * The finality gate's fork following (src/ingest/finality-gate.ts `add`, `takes`), block by block
 * and in a fixed order, so that what the loop's timing makes rare is checked every time: a synthetic
 * chain signed by the 27 devnet SRs, a 3-block branch signed by the SRs of its slots, and the real
 * chain again, found at the head (the next block asked for) or while reading ahead (blocks above
 * the switch already fetched). Only real blocks are ever handed out as final, each once, in order;
 * no branch switch throws; a branch that leaves the final chain is refused.
 */
import { describe, expect, it } from 'vitest';
import {
  DEVNET_SRS,
  type SyntheticChainOptions,
  syntheticBlock,
  syntheticBlockId,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { FinalityGate } from '../../src/ingest/finality-gate.js';
import { blockRef } from '../../src/tron/extract.js';
import type { VerifiedSolidifiedBlock } from '../../src/tron/node-group.js';
import type { BlockJson, TransactionInfoJson } from '../../src/tron/types.js';
import { BlockCheckError, verifyBlock } from '../../src/tron/verify.js';
import { blockJsonOf, signedHeader } from '../helpers/sr-chain.js';

const OPTS: SyntheticChainOptions = {
  seed: 2828,
  firstBlock: 74_000_000,
  txPerBlock: 2,
  addresses: 20,
};
const FIRST = 74_000_000;
const ABOVE = 18;

function asRead(block: BlockJson, infos: TransactionInfoJson[]): VerifiedSolidifiedBlock {
  return {
    ref: blockRef(block),
    block,
    infos,
    verified: verifyBlock(block, infos),
    provider: 'test',
  };
}

const real = (n: number) => {
  const b = syntheticBlock(OPTS, n);
  return asRead(b.block, b.infos);
};

/** Blocks fork..fork+k-1 of another branch from real fork-1, each one slot after the real one. */
function branch(fork: number, k: number): VerifiedSolidifiedBlock[] {
  const out: VerifiedSolidifiedBlock[] = [];
  let parent = syntheticBlockId(OPTS, fork - 1);
  const ts = Number(syntheticBlock(OPTS, fork).block.block_header?.raw_data?.timestamp);
  for (let i = 0; i < k; i++) {
    const t = ts + 3000 * (i + 1);
    const sr = DEVNET_SRS[Math.floor(t / 3000) % 27];
    if (!sr) throw new Error('no SR');
    const h = signedHeader({
      number: fork + i,
      timestamp: t,
      parentId: parent,
      witness: sr.address,
      privateKey: sr.privateKey,
    });
    out.push(asRead(blockJsonOf(h), []));
    parent = h.id;
  }
  return out;
}

function gate(): FinalityGate {
  return new FinalityGate({
    checkpoint: syntheticCheckpoint(OPTS),
    keyOf: async (a) => {
      throw new Error(`no new SR here (${a})`);
    },
  });
}

/** Hand out what is final (the loop's commit), ids in order. */
function drain(g: FinalityGate): string[] {
  const out: string[] = [];
  for (let f = g.next(); f; f = g.next()) {
    out.push(f.verified.id);
    g.shift();
  }
  return out;
}

describe('finality gate: fork following', () => {
  it('a branch switch found at the head: the heights that changed are read again, once each, and only real blocks become final', async () => {
    const g = gate();
    const fork = FIRST + 26;
    const committed: string[] = [];
    for (let n = FIRST; n < fork; n++) {
      await g.add(real(n));
      committed.push(...drain(g));
    }
    for (const b of branch(fork, 3)) {
      await g.add(b);
      committed.push(...drain(g));
    }
    expect(g.readHeight).toBe(fork + 2);
    // The node switched back: block fork+3 of the real chain is read next.
    const reads: number[] = [];
    let next = fork + 3;
    for (let i = 0; i < 20 && g.readHeight < fork + 3; i++) {
      expect(g.takes(next)).toBe(true);
      reads.push(next);
      await g.add(real(next));
      next = g.readHeight + 1;
    }
    // fork+3 kept aside, then fork+2, fork+1 (still not meeting a block read), then fork.
    expect(reads).toEqual([fork + 3, fork + 2, fork + 1, fork]);
    expect(g.rereading).toBe(false);
    committed.push(...drain(g));
    for (let n = fork + 4; n <= FIRST + 59; n++) {
      await g.add(real(n));
      committed.push(...drain(g));
    }
    const want = Array.from({ length: FIRST + 59 - ABOVE - FIRST + 1 }, (_, i) =>
      syntheticBlockId(OPTS, FIRST + i),
    );
    expect(committed).toEqual(want);
  });

  it('a branch switch found while reading ahead: blocks fetched above it are kept, nothing is read twice but the heights that changed', async () => {
    const g = gate();
    const fork = FIRST + 26;
    const committed: string[] = [];
    for (let n = FIRST; n < fork; n++) {
      await g.add(real(n));
      committed.push(...drain(g));
    }
    for (const b of branch(fork, 3)) await g.add(b);
    committed.push(...drain(g));
    // Read ahead (4 at a time): fork+3..fork+6 of the real chain were already fetched.
    const reads: number[] = [];
    for (let n = fork + 3; n <= fork + 6; n++) {
      expect(g.takes(n)).toBe(true);
      reads.push(n);
      await g.add(real(n));
    }
    expect(g.rereading).toBe(true);
    expect(g.takes(fork + 7)).toBe(true); // the read-ahead may go on above them
    // The heights below are read again, one at a time, until the branch meets a block read.
    for (let i = 0; i < 20 && g.rereading; i++) {
      const n = g.readHeight + 1;
      reads.push(n);
      await g.add(real(n));
    }
    expect(reads).toEqual([fork + 3, fork + 4, fork + 5, fork + 6, fork + 2, fork + 1, fork]);
    expect(g.readHeight).toBe(fork + 6);
    committed.push(...drain(g));
    for (let n = fork + 7; n <= FIRST + 59; n++) {
      await g.add(real(n));
      committed.push(...drain(g));
    }
    expect(committed).toEqual(
      Array.from({ length: FIRST + 59 - ABOVE - FIRST + 1 }, (_, i) =>
        syntheticBlockId(OPTS, FIRST + i),
      ),
    );
  });

  it('a branch that leaves the final chain is refused', async () => {
    const g = gate();
    for (let n = FIRST; n <= FIRST + 30; n++) {
      await g.add(real(n));
      drain(g);
    }
    const final = g.finalBlock.number;
    expect(final).toBe(FIRST + 30 - ABOVE);
    // A branch from below the final block, served at the next height after the walk back.
    const other = branch(final, FIRST + 31 - final + 1);
    let err: unknown;
    try {
      for (let i = 0; i < 40; i++) {
        const n = g.readHeight + 1;
        const b = other.find((x) => x.ref.number === n);
        if (!b) break;
        await g.add(b);
      }
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(BlockCheckError);
    expect((err as BlockCheckError).check).toBe('parent');
    expect(g.finalBlock.number).toBe(final);
  });
});
