/**
 * The light client (src/tron/light-client/) on real mainnet signatures and on devnet-signed chains:
 * the 100 recorded headers and block 79,072,107 verify, the shipped checkpoint is re-derived from
 * the real signatures, and each lying mode is refused or halts as the module's rules say.
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  DEVNET_SRS,
  type DevnetSr,
  devnetSrsAround,
  syntheticBlock,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { parseNodeJson } from '../../src/tron/json.js';
import { checkpointFromHeaders, recoverSigners } from '../../src/tron/light-client/checkpoint.js';
import {
  FINALITY_THRESHOLD,
  type FinalBlock,
  LightClient,
  LightClientError,
  type SubmitResult,
} from '../../src/tron/light-client/finality.js';
import { keyRotationsOfBlock, signedHeaderOf } from '../../src/tron/light-client/follow.js';
import {
  HeaderError,
  type SignedHeader,
  signedHeaderFromJson,
} from '../../src/tron/light-client/header.js';
import {
  CheckpointError,
  keyRotationsOfRawData,
  parseCheckpoint,
} from '../../src/tron/light-client/sr-set.js';
import {
  recoverWitnessSigner,
  signWitnessHeader,
  WitnessSignatureError,
} from '../../src/tron/light-client/witness-signature.js';
import { PbWriter } from '../../src/tron/protobuf.js';
import type { BlockJson } from '../../src/tron/types.js';
import { type ExactBlock, parseExactBlock } from '../../src/tron/verify.js';
import { chainDir, fixtureText } from '../helpers/fixtures.js';
import { makeSr, SignedChain, signedHeader, testCheckpoint } from '../helpers/sr-chain.js';
import {
  accountPermissionUpdateRaw,
  accountPermissionUpdateValue,
} from '../helpers/sr-synthetic.js';

const HEADERS = 'headers-78000000-78000099.json';
const REAL = 79072107;
const SHIPPED = path.join(import.meta.dirname, '../../checkpoints/mainnet-78000099.json');

function realHeaders(): SignedHeader[] {
  return (parseNodeJson(fixtureText(HEADERS)) as BlockJson[]).map(signedHeaderFromJson);
}

/** Submit and expect it verified; @returns the blocks made final. */
function ok(lc: LightClient, h: SignedHeader): FinalBlock[] {
  const r = lc.submit(h);
  if (r.status !== 'verified') throw new Error(`block ${h.number}: ${JSON.stringify(r)}`);
  return r.final;
}

function refusal(fn: () => unknown): LightClientError {
  try {
    fn();
  } catch (err) {
    if (err instanceof LightClientError) return err;
    throw err;
  }
  throw new Error('expected a LightClientError');
}

const TIP = {
  number: 1000,
  id: `${(1000).toString(16).padStart(16, '0')}${'ab'.repeat(24)}`,
  timestamp: 1_767_000_000_000,
};

describe('real mainnet signatures', () => {
  it('recovers one constant key per SR from the 100 real headers: 27 SRs, 20 own, 7 separate', () => {
    const { keys, slots } = recoverSigners(realHeaders());
    expect(keys.size).toBe(27);
    expect(slots.size).toBe(27);
    const own = [...keys].filter(([a, k]) => a === k).length;
    expect(own).toBe(20);
    expect(keys.size - own).toBe(7);
  });

  it('re-derives the shipped mainnet checkpoint byte for byte from the real signatures', () => {
    const shipped = JSON.parse(readFileSync(SHIPPED, 'utf8'));
    const derived = checkpointFromHeaders(
      realHeaders(),
      shipped.nextMaintenanceTime,
      'mainnet',
      shipped.source,
    );
    expect(derived).toEqual(shipped);
    expect(parseCheckpoint(shipped)).toEqual(shipped);
    // Assumed (checkpoints/README.md): after the last header, within one 6-hour interval.
    expect(shipped.nextMaintenanceTime).toBeGreaterThan(shipped.block.timestamp);
    expect(shipped.nextMaintenanceTime - shipped.block.timestamp).toBeLessThanOrEqual(21_600_000);
  });

  it('verifies headers 78,000,001–78,000,099 from a checkpoint at 78,000,000 and proves finality', () => {
    const hs = realHeaders();
    const first = hs[0] as SignedHeader;
    const cp = checkpointFromHeaders(hs.slice(0, 27), 1_764_676_800_000, 'mainnet', 'test');
    // The same SRs, anchored at the first header.
    const lc = new LightClient({
      ...cp,
      block: { number: first.number, id: first.id, timestamp: first.timestamp },
    });
    const final: FinalBlock[] = [];
    for (const h of hs.slice(1)) final.push(...ok(lc, h));
    // 19 distinct SRs at or above N: N + 18 blocks later in a full round.
    expect(lc.finalBlock.number).toBe(78_000_099 - (FINALITY_THRESHOLD - 1));
    expect(final.map((f) => f.number)).toEqual(
      Array.from({ length: 99 - 18 }, (_, i) => 78_000_001 + i),
    );
  });

  it('a client restored from its snapshot (JSON) goes on exactly as one that never stopped', () => {
    const hs = realHeaders();
    const first = hs[0] as SignedHeader;
    const cp = checkpointFromHeaders(hs.slice(0, 27), 1_764_676_800_000, 'mainnet', 'test');
    const anchored = {
      ...cp,
      block: { number: first.number, id: first.id, timestamp: first.timestamp },
    };
    const straight = new LightClient(anchored);
    const before = new LightClient(anchored);
    const finals: number[] = [];
    for (const h of hs.slice(1)) for (const f of ok(straight, h)) finals.push(f.number);
    for (const h of hs.slice(1, 50)) ok(before, h);
    const snap = JSON.parse(JSON.stringify(before.snapshot()));
    const after = LightClient.restore(snap);
    expect(after.finalBlock).toEqual(before.finalBlock);
    // Ingest resumes from the final block: the blocks above it are read again.
    const resumed: number[] = [];
    for (const h of hs.slice(after.finalBlock.number - first.number + 1)) {
      for (const f of ok(after, h)) resumed.push(f.number);
    }
    expect(after.finalBlock).toEqual(straight.finalBlock);
    expect(resumed).toEqual(finals.filter((n) => n > before.finalBlock.number));
  });

  it('block 79,072,107 verifies: its SR signs with its own address, as the shipped checkpoint says', () => {
    const block = parseNodeJson(fixtureText(`chain/block-${REAL}.json`)) as BlockJson;
    const h = signedHeaderFromJson(block);
    const signer = recoverWitnessSigner(h.raw, h.signature);
    expect(signer).toBe(h.witness);
    const shipped = parseCheckpoint(JSON.parse(readFileSync(SHIPPED, 'utf8')));
    const sr = shipped.witnesses.find((w) => w.address === h.witness);
    expect(sr?.signingKey).toBe(signer);
  });

  it('block 79,072,107, real signature kept, becomes final among devnet blocks: its SR takes its slot in the devnet set', () => {
    const block = parseNodeJson(fixtureText(`chain/block-${REAL}.json`)) as BlockJson;
    const h = signedHeaderFromJson(block);
    const order = devnetSrsAround({ witness: h.witness, timestamp: h.timestamp });
    expect(order.filter((s) => s.privateKey === undefined).map((s) => s.address)).toEqual([
      h.witness,
    ]);
    const parent = { number: h.number - 1, id: h.parentId, timestamp: h.timestamp - 3000 };
    const lc = new LightClient(parseCheckpoint(testCheckpoint(parent, order)));
    ok(lc, h);
    const chain = new SignedChain({ number: h.number, id: h.id, timestamp: h.timestamp }, order);
    const final: number[] = [];
    for (let i = 0; i < 30; i++) for (const f of ok(lc, chain.next())) final.push(f.number);
    expect(final[0]).toBe(REAL);
    // The devnet blocks miss the real SR's slots: 26 of every 27.
    expect(chain.tip.timestamp - h.timestamp).toBe(3000 * (30 + 1));
    // Without the real SR in the set, the real block is refused.
    const without = new LightClient(parseCheckpoint(testCheckpoint(parent, DEVNET_SRS)));
    expect(refusal(() => without.submit(h)).code).toBe('outside-set');
  });

  it('a real header with one bit changed recovers another signer', () => {
    const h = realHeaders()[5] as SignedHeader;
    const raw = Uint8Array.from(h.raw);
    raw[raw.length - 1] = (raw[raw.length - 1] ?? 0) ^ 1;
    expect(recoverWitnessSigner(raw, h.signature)).not.toBe(h.witness);
    expect(() => recoverWitnessSigner(h.raw, h.signature.subarray(0, 64))).toThrow(
      WitnessSignatureError,
    );
    const badV = Uint8Array.from(h.signature);
    badV[64] = 5;
    expect(() => recoverWitnessSigner(h.raw, badV)).toThrow(WitnessSignatureError);
  });

  it('refuses a JSON header whose blockID does not hash from it', () => {
    const block = (parseNodeJson(fixtureText(HEADERS)) as BlockJson[])[0] as BlockJson;
    expect(() => signedHeaderFromJson({ ...block, blockID: `${'0'.repeat(63)}1` })).toThrow(
      HeaderError,
    );
  });
});

describe('checkpoint', () => {
  it('refuses a checkpoint without 27 distinct SRs, with a wrong id, or at a maintenance', () => {
    const good = testCheckpoint(TIP);
    expect(parseCheckpoint(good).witnesses).toHaveLength(27);
    expect(() => parseCheckpoint({ ...good, witnesses: good.witnesses.slice(1) })).toThrow(
      /26 witnesses/,
    );
    const twice = [...good.witnesses.slice(1), good.witnesses[1]];
    expect(() => parseCheckpoint({ ...good, witnesses: twice })).toThrow(/appears twice/);
    expect(() =>
      parseCheckpoint({ ...good, block: { ...good.block, id: 'ff'.repeat(32) } }),
    ).toThrow(/does not start with block.number/);
    expect(() =>
      parseCheckpoint({ ...good, nextMaintenanceTime: good.block.timestamp + 21_600_000 }),
    ).toThrow(/first slots after a maintenance/);
    expect(() => parseCheckpoint({ ...good, network: '' })).toThrow(CheckpointError);
  });
});

describe('the devnet signs', () => {
  it('every synthetic block is signed by its scheduled devnet SR and the light client proves it final', () => {
    const opts = { seed: 7, firstBlock: 5000, txPerBlock: 3 };
    const lc = new LightClient(parseCheckpoint(syntheticCheckpoint(opts)));
    let final = 0;
    for (let n = 5000; n < 5040; n++)
      final += ok(lc, signedHeaderFromJson(syntheticBlock(opts, n).block)).length;
    expect(lc.finalBlock.number).toBe(5039 - 18);
    expect(final).toBe(5039 - 18 - 4999);
    const own = DEVNET_SRS.filter((s) => s.address === s.signingKey).length;
    expect(own).toBe(20);
  });
});

describe('lying modes', () => {
  it('a bad signature is refused, and no block above it becomes final', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    ok(lc, chain.next());
    const stranger = makeSr('stranger');
    const forged = chain.next(undefined, { key: stranger.privateKey });
    const e = refusal(() => lc.submit(forged));
    expect(e.code).toBe('bad-signature');
    expect(e.halt).toBe(false);
    // A byte of the signature flipped.
    const honest = new SignedChain(TIP, DEVNET_SRS);
    honest.next();
    const h = honest.next();
    const sig = Uint8Array.from(h.signature);
    sig[10] = (sig[10] ?? 0) ^ 0xff;
    expect(refusal(() => lc.submit({ ...h, signature: sig })).code).toBe('bad-signature');
    expect(lc.finalBlock.number).toBe(TIP.number);
  });

  it('a signer outside the set is refused, even with a valid signature of its own', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    const outsider = makeSr('outsider');
    const h = chain.next(undefined, { key: outsider.privateKey, witness: outsider.address });
    expect(recoverWitnessSigner(h.raw, h.signature)).toBe(outsider.address);
    const e = refusal(() => lc.submit(h));
    expect(e.code).toBe('outside-set');
  });

  it('an SR out of its slot is refused', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    const t = TIP.timestamp + 3000;
    const wrong = DEVNET_SRS.find((s) => s !== chain.scheduled(t)) as DevnetSr;
    const h = signedHeader({
      number: TIP.number + 1,
      timestamp: t,
      parentId: TIP.id,
      witness: wrong.address,
      privateKey: wrong.privateKey,
    });
    expect(refusal(() => lc.submit(h)).code).toBe('wrong-slot');
    const late = signedHeader({
      number: TIP.number + 1,
      timestamp: t + 1,
      parentId: TIP.id,
      witness: wrong.address,
      privateKey: wrong.privateKey,
    });
    expect(refusal(() => lc.submit(late)).code).toBe('bad-timestamp');
  });

  it('a fork signed by 18 SRs never becomes final; the honest chain does', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const honest = new SignedChain(TIP, DEVNET_SRS);
    const liars = new Set(DEVNET_SRS.slice(0, 18).map((s) => s.address));
    const fork = honest.fork();
    const forkBlocks = Array.from({ length: 200 }, () => fork.next((s) => liars.has(s.address)));
    for (const h of forkBlocks) {
      expect(lc.submit(h)).toEqual({ status: 'verified', final: [], refused: [] });
    }
    expect(lc.finalBlock.number).toBe(TIP.number);
    // The honest chain (all 27) reaches 19 SRs and wins; the fork is pruned.
    for (let i = 0; i < 19; i++) ok(lc, honest.next());
    expect(lc.finalBlock.number).toBe(TIP.number + 1);
    expect(lc.status().pending).toBe(18);
    // The fork's first block is now beside the final chain: refused.
    expect(refusal(() => lc.submit(forkBlocks[0] as SignedHeader)).code).toBe('not-chained');
  });

  it('a provider that withholds a block stops finality; the block, once served, releases it', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    const blocks = Array.from({ length: 40 }, () => chain.next());
    const withheld = blocks[5] as SignedHeader;
    for (const b of blocks.slice(0, 5)) ok(lc, b);
    for (const b of blocks.slice(6)) {
      expect(lc.submit(b)).toEqual({ status: 'held', missingParent: b.parentId });
    }
    expect(lc.finalBlock.number).toBe(TIP.number);
    const r = lc.submit(withheld) as Extract<SubmitResult, { status: 'verified' }>;
    expect(r.status).toBe('verified');
    expect(r.final.map((f) => f.number)).toEqual(
      Array.from({ length: 40 - 18 }, (_, i) => TIP.number + 1 + i),
    );
    expect(lc.status().held).toBe(0);
  });

  it('a key rotation (type 46) applies from the next block: old key refused after it, new key accepted', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    const sr = DEVNET_SRS[3] as DevnetSr;
    const newKey = makeSr('rotated key');
    // The rotation, as its signed contract bytes say it.
    const rotations = keyRotationsOfRawData(
      accountPermissionUpdateRaw(sr.address, newKey.signingKey),
    );
    expect(rotations).toEqual([{ owner: sr.address, signingKey: newKey.signingKey }]);
    const b1 = chain.next();
    expect(lc.submit(b1, rotations).status).toBe('verified');
    const slot3 = nextSlotOf(b1.timestamp, 3);
    const oldKey = signedHeader({
      number: b1.number + 1,
      timestamp: slot3,
      parentId: b1.id,
      witness: sr.address,
      privateKey: sr.privateKey,
    });
    expect(refusal(() => lc.submit(oldKey)).code).toBe('bad-signature');
    // The chain on, SR 3 signing with its new key: verified, and final.
    const rotated = { ...sr, signingKey: newKey.signingKey, privateKey: newKey.privateKey };
    const order = DEVNET_SRS.map((s, i) => (i === 3 ? rotated : s));
    const c2 = new SignedChain(b1, order);
    const blocks = Array.from({ length: 40 }, () => c2.next());
    for (const h of blocks) ok(lc, h);
    expect(lc.finalBlock.number).toBeGreaterThan(b1.number + 3);
    // Without the rotation, SR 3's new-key block is refused (the test can fail).
    const control = new LightClient(testCheckpoint(TIP));
    control.submit(b1);
    const firstBy3 = blocks.findIndex((h) => h.witness === sr.address);
    for (const h of blocks.slice(0, firstBy3)) ok(control, h);
    expect(refusal(() => control.submit(blocks[firstBy3] as SignedHeader)).code).toBe(
      'bad-signature',
    );
    // Final now: a block on the final chain with the old key is still refused.
    expect(
      refusal(() =>
        lc.submit(
          signedHeader({
            number: c2.tip.number + 1,
            timestamp: nextSlotOf(c2.tip.timestamp, 3),
            parentId: c2.tip.id,
            witness: sr.address,
            privateKey: sr.privateKey,
          }),
        ),
      ).code,
    ).toBe('bad-signature');
  });

  it('a maintenance with 1 new SR: its key from the providers, it counts only once 19 known SRs built on it', () => {
    const newcomer = makeSr('newcomer', true);
    const cpNext = TIP.timestamp + 3000 * 40;
    // After the maintenance: a new order (re-sorted by votes), SR 26 replaced by the newcomer.
    const nextOrder = [newcomer, ...DEVNET_SRS.slice(0, 26)].reverse();
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, nextOrder);
    let asked = 0;
    let newcomerBlock = 0;
    let admittedAt = 0;
    for (let i = 0; i < 120; i++) {
      const h = chain.next();
      let r = lc.submit(h);
      if (r.status === 'need-key') {
        expect(r.witness).toBe(newcomer.address);
        asked++;
        lc.addCandidateKey(newcomer.address, newcomer.signingKey);
        r = lc.submit(h);
        newcomerBlock = h.number;
      }
      expect(r.status).toBe('verified');
      if (r.status === 'verified' && r.final.some((f) => f.number === newcomerBlock)) {
        admittedAt = h.number;
      }
    }
    expect(asked).toBe(1);
    expect(newcomerBlock).toBeGreaterThan(0);
    // Final only after 19 OTHER (known) SRs built on the newcomer's block: ≥ 19 blocks above it.
    expect(admittedAt - newcomerBlock).toBeGreaterThanOrEqual(FINALITY_THRESHOLD);
    expect(lc.status().epoch).toBe(1);
    expect(lc.status().knownSrs).toBe(28);
    expect(lc.finalBlock.number).toBeGreaterThan(newcomerBlock);
  });

  it('a newcomer key the providers reported wrong is forgotten when its block does not verify: asked again, the right one is accepted', () => {
    const newcomer = makeSr('newcomer with a misreported key', true);
    const cpNext = TIP.timestamp + 3000 * 40;
    const nextOrder = [newcomer, ...DEVNET_SRS.slice(0, 26)].reverse();
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, nextOrder);
    const wrong = makeSr('not the newcomer key').signingKey;
    let h = chain.next();
    let r = lc.submit(h);
    while (r.status !== 'need-key') {
      expect(r.status).toBe('verified');
      h = chain.next();
      r = lc.submit(h);
    }
    expect(r.witness).toBe(newcomer.address);
    // Its epoch is the one after the checkpoint's maintenance (for the providers' check).
    expect(r.epochEnd).toBeGreaterThan(cpNext);
    lc.addCandidateKey(newcomer.address, wrong);
    const e = refusal(() => lc.submit(h));
    expect(e.code).toBe('bad-signature');
    expect(e.message).toContain(`signing key is ${wrong}`);
    // The same block again: the providers are asked again, not refused with the same key.
    expect(lc.submit(h)).toEqual({
      status: 'need-key',
      witness: newcomer.address,
      epochEnd: r.epochEnd,
    });
    expect(lc.snapshot().candidateKeys).toEqual([]);
    lc.addCandidateKey(newcomer.address, newcomer.signingKey);
    expect(lc.submit(h).status).toBe('verified');
  });

  it('an SR silent for a whole observed epoch is not carried past the maintenance: it returns as a newcomer', () => {
    const silent = DEVNET_SRS[26] as DevnetSr;
    const cpNext = TIP.timestamp + 3000 * 120;
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, [...DEVNET_SRS].reverse());
    const asked: string[] = [];
    for (let i = 0; i < 160; i++) {
      // SR 26 misses every slot before the maintenance, then produces again.
      const h = chain.next((s) => s !== silent || chain.tip.timestamp >= cpNext);
      let r = lc.submit(h);
      if (r.status === 'need-key') {
        asked.push(r.witness);
        lc.addCandidateKey(r.witness, silent.signingKey);
        r = lc.submit(h);
      }
      expect(r.status).toBe('verified');
    }
    expect(asked).toEqual([silent.address]);
    expect(lc.status().epoch).toBe(1);
  });

  it("a fork's block does not keep its SR: only the final chain's producers are carried past the maintenance", () => {
    const silent = DEVNET_SRS[26] as DevnetSr;
    const cpNext = TIP.timestamp + 3000 * 120;
    /** Follows the honest chain (SR 26 silent until the maintenance); @returns the SRs asked for. */
    const follow = (lc: LightClient, withFork: boolean): string[] => {
      const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, [...DEVNET_SRS].reverse());
      const asked: string[] = [];
      for (let i = 0; i < 160; i++) {
        if (withFork && i === 30) {
          // A block by SR 26 beside the honest chain's next one: verified, never final.
          const forked = chain.fork().next((s) => s === silent);
          expect(forked.witness).toBe(silent.address);
          expect(forked.timestamp).toBeLessThan(cpNext);
          // (Its ancestors may become final with it: SR 26 is the 19th SR above them.)
          const r = lc.submit(forked);
          expect(r.status).toBe('verified');
          expect(lc.finalBlock.number).toBeLessThan(forked.number);
        }
        const h = chain.next((s) => s !== silent || chain.tip.timestamp >= cpNext);
        let r = lc.submit(h);
        if (r.status === 'need-key') {
          asked.push(r.witness);
          lc.addCandidateKey(r.witness, silent.signingKey);
          r = lc.submit(h);
        }
        expect(r.status).toBe('verified');
      }
      expect(lc.status().epoch).toBe(1);
      return asked;
    };
    const withFork = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const without = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    // SR 26's fork block did not keep it in the set: it returns as a newcomer, as without the fork.
    expect(follow(withFork, true)).toEqual([silent.address]);
    expect(follow(without, false)).toEqual([silent.address]);
    // And the fork's block is in no count.
    expect(withFork.snapshot()).toEqual(without.snapshot());
  });

  it('a restart counts the blocks above the final one once: a silent SR is dropped at 81 blocks of the epoch, not before, restarted or not', () => {
    const silent = DEVNET_SRS[26] as DevnetSr;
    /** The time of the n-th block of a chain from TIP where SR 26 misses its slots. */
    const nthBlockTime = (n: number): number => {
      const c = new SignedChain(TIP, DEVNET_SRS);
      let t = 0;
      for (let i = 0; i < n; i++) t = c.next((s) => s !== silent).timestamp;
      return t;
    };
    /**
     * Follows a chain whose epoch 0 has `blocks` blocks (the last one the maintenance block), SR
     * 26 silent until it; with `restartAt`, the client is snapshotted (JSON) after that many blocks,
     * restored, and fed again from the block after its final one, as ingest resumes.
     * @returns the SRs asked for after the maintenance, and snapshots taken just before it.
     */
    const follow = (blocks: number, restartAt?: number) => {
      const cpNext = nthBlockTime(blocks);
      const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, [...DEVNET_SRS].reverse());
      const hs = Array.from({ length: blocks + 60 }, () =>
        chain.next((s) => s !== silent || chain.tip.timestamp >= cpNext),
      );
      expect(hs[blocks - 1]?.timestamp).toBe(cpNext);
      let lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
      let i = 0;
      if (restartAt !== undefined) {
        for (; i < restartAt; i++) ok(lc, hs[i] as SignedHeader);
        // Blocks above the final one, verified and counted by nothing stored.
        expect(lc.status().pending).toBeGreaterThanOrEqual(FINALITY_THRESHOLD - 1);
        lc = LightClient.restore(JSON.parse(JSON.stringify(lc.snapshot())));
        i = lc.finalBlock.number - TIP.number;
      }
      const asked: string[] = [];
      let beforeMaintenance: unknown;
      for (; i < hs.length; i++) {
        const h = hs[i] as SignedHeader;
        if (i === blocks - 1) beforeMaintenance = lc.snapshot();
        let r = lc.submit(h);
        if (r.status === 'need-key') {
          asked.push(r.witness);
          lc.addCandidateKey(r.witness, silent.signingKey);
          r = lc.submit(h);
        }
        expect(r.status).toBe('verified');
      }
      expect(lc.status().epoch).toBe(1);
      return { asked, beforeMaintenance };
    };
    // 80 blocks seen in the epoch: SR 26 stays; 81: it is dropped and returns as a newcomer.
    const kept = follow(80);
    expect(kept.asked).toEqual([]);
    expect(follow(81).asked).toEqual([silent.address]);
    // Restarted with 18+ verified blocks above the final one, 60 blocks into the epoch: the same.
    const keptRestarted = follow(80, 60);
    expect(keptRestarted.asked).toEqual([]);
    expect(keptRestarted.beforeMaintenance).toEqual(kept.beforeMaintenance);
    expect(follow(81, 60).asked).toEqual([silent.address]);
  });

  it('a newcomer restored unadmitted from an older snapshot (known: false) is admitted once a block of its is final', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const snap = lc.snapshot();
    const sr = DEVNET_SRS[4] as DevnetSr;
    const e0 = snap.epochs[0];
    if (!e0) throw new Error('no epoch');
    e0.members = e0.members.map((m) => (m.address === sr.address ? { ...m, known: false } : m));
    const restored = LightClient.restore(JSON.parse(JSON.stringify(snap)));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    for (let i = 0; i < 60; i++) ok(restored, chain.next());
    const member = restored.snapshot().epochs[0]?.members.find((m) => m.address === sr.address);
    expect(member?.known).toBe(true);
  });

  it('a 9th new SR on one branch is refused, not a halt: nothing after the maintenance is final', () => {
    const newcomers = Array.from({ length: 9 }, (_, i) => makeSr(`new ${i}`));
    const cpNext = TIP.timestamp + 3000 * 40;
    const nextOrder = [...newcomers, ...DEVNET_SRS.slice(0, 18)];
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, nextOrder);
    let refused: LightClientError | undefined;
    for (let i = 0; i < 100 && !refused; i++) {
      const h = chain.next();
      try {
        let r = lc.submit(h);
        if (r.status === 'need-key') {
          const sr = newcomers.find((s) => s.address === h.witness);
          lc.addCandidateKey(h.witness, (sr as DevnetSr).signingKey);
          r = lc.submit(h);
        }
      } catch (err) {
        if (err instanceof LightClientError) refused = err;
        else throw err;
      }
    }
    expect(refused?.code).toBe('too-many-changes');
    // Refused like any lie: a halt never rests on a branch one provider may serve (issue 36).
    expect(refused?.halt).toBe(false);
    // What to do comes before the (long) list of the 9 newcomers.
    expect(refused?.message).toMatch(
      /^block \d+: more than 8 new SRs since the maintenance of epoch 1 on this block's branch: refused .* pin a fresh checkpoint \(9 new: (41[0-9a-f]{40}, ){8}41[0-9a-f]{40}\)$/,
    );
    // Nothing produced after the maintenance was made final.
    expect(lc.finalBlock.timestamp).toBeLessThan(cpNext);
  });

  it('one SR key writing 18 rotations of other SRs into its own block makes nothing final: blocks signed with a rotated key count only once the rotation is final (issue 36, finding 1)', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    // The attacker's own block (its real key), carrying 18 "rotations" of other SRs to its keys.
    const b1 = chain.next();
    const attacker = b1.witness;
    const victims = DEVNET_SRS.filter((s) => s.address !== attacker).slice(0, 18);
    const fakes = new Map(victims.map((v) => [v.address, makeSr(`attacker key for ${v.address}`)]));
    const rotations = victims.map((v) => ({
      owner: v.address,
      signingKey: (fakes.get(v.address) as DevnetSr).signingKey,
    }));
    expect(lc.submit(b1, rotations).status).toBe('verified');
    // 18 blocks in those SRs' slots, signed with the attacker's keys: 1 + 18 = 19 signers.
    const forged = chain.fork();
    forged.order = DEVNET_SRS.map((s) => {
      const f = fakes.get(s.address);
      return f ? { ...s, signingKey: f.signingKey, privateKey: f.privateKey } : s;
    });
    const victimSet = new Set(victims.map((v) => v.address));
    for (let i = 0; i < 18; i++) {
      const h = forged.next((s) => victimSet.has(s.address));
      expect(lc.submit(h).status).toBe('verified');
    }
    // Verified (the keys are the chain's word) but counted for nothing: the rotations are not final.
    expect(lc.finalBlock.number).toBe(TIP.number);
    expect(lc.status().pending).toBe(19);
    // The honest SRs never built on the attacker's block: their chain from TIP becomes final, and
    // the attacker's branch is dropped with its rotations.
    const honest = new SignedChain(TIP, DEVNET_SRS);
    honest.next((s) => s.address !== attacker);
    const hs = [honest.tip];
    for (let i = 0; i < 40; i++) hs.push(honest.next());
    const honestChain = new SignedChain(TIP, DEVNET_SRS);
    const first = honestChain.next((s) => s.address !== attacker);
    ok(lc, first);
    for (let i = 0; i < 40; i++) ok(lc, honestChain.next());
    expect(lc.finalBlock.number).toBe(TIP.number + 41 - 18);
    // Every victim still signs with its own key on the final chain.
    expect(lc.snapshot().epochs[0]?.members.filter((m) => fakes.has(m.address))).toEqual(
      victims.map((v) => ({ address: v.address, key: v.signingKey, known: true })),
    );
  });

  it('an honest rotation: the SR’s blocks with its new key are verified at once and counted once the rotation is final', () => {
    const lc = new LightClient(testCheckpoint(TIP));
    const chain = new SignedChain(TIP, DEVNET_SRS);
    const b1 = chain.next();
    const rotatedSr = DEVNET_SRS.find((s) => s.address !== b1.witness) as DevnetSr;
    const newKey = makeSr('honest new key');
    ok(lc, b1);
    const rot = [{ owner: rotatedSr.address, signingKey: newKey.signingKey }];
    // The rotation in b2; then the rotated SR (new key) and 17 others: b2's producer + 17 = 18.
    const b2 = chain.next((s) => s.address !== rotatedSr.address);
    expect(lc.submit(b2, rot).status).toBe('verified');
    chain.order = DEVNET_SRS.map((s) =>
      s.address === rotatedSr.address
        ? { ...s, signingKey: newKey.signingKey, privateKey: newKey.privateKey }
        : s,
    );
    const others = new Set<string>([b2.witness, b1.witness]);
    const built: SignedHeader[] = [];
    let rotatedBlocks = 0;
    while (others.size < 19) {
      const h = chain.next(
        (s) => s.address === rotatedSr.address || (!others.has(s.address) && others.size < 18),
      );
      if (h.witness === rotatedSr.address) rotatedBlocks++;
      else others.add(h.witness);
      built.push(h);
      ok(lc, h);
      if (others.size === 18 && rotatedBlocks > 0) break;
    }
    expect(rotatedBlocks).toBeGreaterThan(0);
    // 18 distinct counted SRs above b1 (the rotated SR's new-key blocks do not count yet).
    expect(lc.finalBlock.number).toBe(TIP.number);
    // One more SR: b1 is final; b2 (the rotation) has 18 counted SRs above it, not 19.
    const h = chain.next((s) => !others.has(s.address) && s.address !== rotatedSr.address);
    expect(ok(lc, h).map((f) => f.number)).toEqual([b1.number]);
    // The chain on: b2 final, the rotation with it; the new key is the SR's in the set.
    for (let i = 0; i < 30; i++) ok(lc, chain.next());
    expect(lc.finalBlock.number).toBeGreaterThan(b2.number);
    const key = lc.snapshot().epochs[0]?.members.find((m) => m.address === rotatedSr.address)?.key;
    expect(key).toBe(newKey.signingKey);
  });

  it('after a maintenance, a side block in another SR’s slot does not make the real block wrong-slot (issue 36, finding 3)', () => {
    const cpNext = TIP.timestamp + 3000 * 40;
    const nextOrder = [...DEVNET_SRS].reverse();
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, nextOrder);
    while (chain.tip.timestamp < cpNext) ok(lc, chain.next());
    // The maintenance block is read; the next real block is P's. A real SR A signs a side block at
    // P's time, a sibling of P's block.
    const side = chain.fork();
    const t = side.tip.timestamp + 3000;
    const p = side.scheduled(t);
    const a = nextOrder.find((s) => s.address !== p.address) as DevnetSr;
    const lie = side.next(() => true, { key: a.privateKey, witness: a.address });
    expect(lie.timestamp).toBe(t);
    expect(lc.submit(lie).status).toBe('verified');
    // The real chain: P's block, then the rest, from every provider: verified and final.
    for (let i = 0; i < 60; i++) ok(lc, chain.next());
    expect(lc.finalBlock.timestamp).toBeGreaterThan(cpNext);
    expect(lc.status().epoch).toBe(1);
    // Nothing of the side block was learned by the epoch.
    const e1 = lc.snapshot().epochs.find((e) => e.index === 1);
    expect(e1?.slots.find(([, w]) => w === a.address)?.[0]).not.toBe(
      e1?.slots.find(([, w]) => w === p.address)?.[0],
    );
  });

  it('invented newcomers on a side branch after a maintenance leave the real chain alone (issue 36, finding 3)', () => {
    const cpNext = TIP.timestamp + 3000 * 40;
    const nextOrder = [...DEVNET_SRS].reverse();
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, cpNext));
    const chain = new SignedChain(TIP, DEVNET_SRS, cpNext, nextOrder);
    while (chain.tip.timestamp < cpNext) ok(lc, chain.next());
    // A lone provider's side branch: 9 "newcomers" it names, with keys it reports, in the real
    // SRs' slots. The 9th is refused (too many), none of it stays.
    const side = chain.fork();
    const invented = Array.from({ length: 9 }, (_, i) => makeSr(`invented ${i}`));
    let refused: LightClientError | undefined;
    for (const sr of invented) {
      const h = side.next(() => true, { key: sr.privateKey, witness: sr.address });
      try {
        let r = lc.submit(h);
        expect(r.status).toBe('need-key');
        lc.addCandidateKey(sr.address, sr.signingKey);
        r = lc.submit(h);
        expect(r.status).toBe('verified');
      } catch (err) {
        if (!(err instanceof LightClientError)) throw err;
        refused = err;
      }
    }
    expect(refused?.code).toBe('too-many-changes');
    expect(refused?.halt).toBe(false);
    // The real chain, in the same slots: every block verified, finality past the maintenance.
    for (let i = 0; i < 60; i++) ok(lc, chain.next());
    expect(lc.finalBlock.timestamp).toBeGreaterThan(cpNext);
    expect(lc.status().knownSrs).toBe(27);
    const e1 = lc.snapshot().epochs.find((e) => e.index === 1);
    expect(e1?.newcomers).toEqual([]);
    expect(e1?.members.some((m) => invented.some((s) => s.address === m.address))).toBe(false);
  });

  it('a stale checkpoint halts: a first block past its maintenance that is not chained to it', () => {
    const lc = new LightClient(testCheckpoint(TIP, DEVNET_SRS, TIP.timestamp + 3000 * 10));
    const later = new SignedChain(
      {
        number: TIP.number + 5000,
        id: `${(TIP.number + 5000).toString(16).padStart(16, '0')}${'cd'.repeat(24)}`,
        timestamp: TIP.timestamp + 3000 * 5000,
      },
      DEVNET_SRS,
    );
    const e = refusal(() => lc.submit(later.next()));
    expect(e.code).toBe('stale-checkpoint');
    expect(e.halt).toBe(true);
  });

  it('a stale checkpoint halts at its own child too (the first block ingest reads), and a child not chained before its maintenance is refused', () => {
    const cp = testCheckpoint(TIP, DEVNET_SRS, TIP.timestamp + 3000 * 10);
    // Block TIP + 1 of a chain that went on without the checkpoint's block, 6 h later.
    const other = {
      number: TIP.number,
      id: `${TIP.number.toString(16).padStart(16, '0')}${'cd'.repeat(24)}`,
      timestamp: TIP.timestamp + 21_600_000,
    };
    const e = refusal(() => new LightClient(cp).submit(new SignedChain(other, DEVNET_SRS).next()));
    expect(e.code).toBe('stale-checkpoint');
    expect(e.halt).toBe(true);
    expect(e.blockNumber).toBe(TIP.number + 1);
    // Before the checkpoint's maintenance the same unchained child is refused, not a halt.
    const early = { ...other, timestamp: TIP.timestamp };
    const r = refusal(() => new LightClient(cp).submit(new SignedChain(early, DEVNET_SRS).next()));
    expect(r.code).toBe('not-chained');
    expect(r.halt).toBe(false);
  });
});

describe('what ingest hands the light client', () => {
  it('the real block 79,072,107: the same signed header from its exact gRPC bytes and from JSON, no rotation', () => {
    const block = parseNodeJson(fixtureText(`chain/block-${REAL}.json`)) as BlockJson;
    const exact = parseExactBlock(
      readFileSync(path.join(chainDir(), `blockext-${REAL}.bin`)),
      'extention',
    ) as ExactBlock;
    const fromExact = signedHeaderOf(block, exact);
    expect(fromExact.id).toBe(signedHeaderOf(block).id);
    expect(Buffer.from(fromExact.raw).equals(Buffer.from(signedHeaderOf(block).raw))).toBe(true);
    expect(keyRotationsOfBlock(block, exact)).toEqual([]);
    expect(keyRotationsOfBlock(block)).toEqual([]);
    // Exact bytes of another block are refused.
    const other = (parseNodeJson(fixtureText(HEADERS)) as BlockJson[])[0] as BlockJson;
    expect(() => signedHeaderOf(other, exact)).toThrow(HeaderError);
  });

  it('refuses a block whose type-46 transaction java-tron would refuse: as bad-rotation, never a key change', () => {
    const sr = DEVNET_SRS[21] as DevnetSr;
    const key = makeSr('checked rotation').signingKey;
    const base = syntheticBlock({ seed: 4, firstBlock: 100, txPerBlock: 2 }, 100).block;
    const blockWith = (raw: Uint8Array, signed = true) => ({
      ...base,
      transactions: [
        ...(base.transactions ?? []),
        {
          txID: createHash('sha256').update(raw).digest('hex'),
          raw_data_hex: Buffer.from(raw).toString('hex'),
          ...(signed
            ? { signature: [Buffer.from(signWitnessHeader(raw, sr.privateKey)).toString('hex')] }
            : {}),
          ret: [{ contractRet: 'SUCCESS' }],
        },
      ],
    });
    const code = (raw: Uint8Array, signed = true): string => {
      try {
        keyRotationsOfBlock(blockWith(raw, signed));
        return 'accepted';
      } catch (err) {
        if (!(err instanceof LightClientError)) throw err;
        expect(err.halt).toBe(false);
        return `${err.code}: ${err.message.replace(/^.*refuse: /, '')}`;
      }
    };
    const valid = accountPermissionUpdateRaw(sr.address, key);
    expect(code(valid)).toBe('accepted');
    expect(code(valid, false)).toBe('bad-rotation: the transaction carries no signature');
    const withValue = (v: Uint8Array) => accountPermissionUpdateRaw(sr.address, key, undefined, v);
    expect(
      code(
        withValue(
          accountPermissionUpdateValue(sr.address, key, { witnessKeys: [key, sr.address] }),
        ),
      ),
    ).toBe('bad-rotation: witness permission has 2 keys, not exactly 1');
    expect(code(withValue(accountPermissionUpdateValue(sr.address, key, { actives: 0 })))).toBe(
      'bad-rotation: active permission is missing',
    );
    expect(code(withValue(accountPermissionUpdateValue(sr.address, key, { actives: 9 })))).toBe(
      'bad-rotation: 9 active permissions, at most 8',
    );
    expect(
      code(
        withValue(
          accountPermissionUpdateValue(sr.address, key, { witness: (w) => w.varint(5, 2) }),
        ),
      ),
    ).toBe('bad-rotation: witness permission parent is not owner');
    expect(
      code(
        withValue(accountPermissionUpdateValue(sr.address, key, { owner: (w) => w.varint(1, 2) })),
      ),
    ).toBe('bad-rotation: owner permission type is not owner');
  });

  it('reads a type-46 rotation from the signed transaction bytes, JSON or exact, and skips a failed one', () => {
    const sr = DEVNET_SRS[22] as DevnetSr;
    const key = makeSr('ingest rotation').signingKey;
    const raw = accountPermissionUpdateRaw(sr.address, key);
    const sig = signWitnessHeader(raw, sr.privateKey);
    const base = syntheticBlock({ seed: 3, firstBlock: 100, txPerBlock: 4 }, 100).block;
    const tx = (contractRet: string) => ({
      txID: createHash('sha256').update(raw).digest('hex'),
      raw_data_hex: Buffer.from(raw).toString('hex'),
      signature: [Buffer.from(sig).toString('hex')],
      ret: [{ contractRet }],
    });
    const withRotation = { ...base, transactions: [...(base.transactions ?? []), tx('SUCCESS')] };
    expect(keyRotationsOfBlock(withRotation)).toEqual([{ owner: sr.address, signingKey: key }]);
    expect(keyRotationsOfBlock(base)).toEqual([]);
    const failed = { ...base, transactions: [tx('REVERT')] };
    expect(keyRotationsOfBlock(failed)).toEqual([]);
    const ret = new PbWriter().varint(3, 1).finish();
    const whole = new PbWriter().bytes(1, raw).bytes(2, sig).bytes(5, ret).finish();
    const exact = { headerRaw: new Uint8Array(0), transactions: [whole] };
    expect(keyRotationsOfBlock(base, exact)).toEqual([{ owner: sr.address, signingKey: key }]);
  });
});

/** The devnet SR at schedule position k's next slot after t. */
function nextSlotOf(t: number, k: number): number {
  let s = t + 3000;
  while (Math.floor(s / 3000) % 27 !== k) s += 3000;
  return s;
}
