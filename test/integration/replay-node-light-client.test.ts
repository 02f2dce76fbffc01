/**
 * The replay node's chain as the light client sees it (issue 28 item 4, "the devnet signs"): a
 * LightClient (src/tron/light-client/finality.ts) pinned at replayCheckpoint proves the chain the
 * replay node serves over real HTTP and gRPC, for a recorded mainnet block (79072107, its real
 * signature, its SR's other slots missed by the fillers) and for a synthetic chain; `tronwatch
 * checkpoint` (buildCheckpoint) against the replay node finds the same SR set; the lies the replay
 * node tells (another fork, a forged block) are refused.
 */
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  dirSource,
  fillerTime,
  memorySource,
  type ReplayNode,
  type ReplayNodeOptions,
  replayCheckpoint,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import {
  DEVNET_SRS,
  devnetSrs,
  devnetSrsAround,
  headerRawBytes,
  NILE_DEVNET_SRS,
  type SyntheticChainOptions,
  syntheticBlock,
  syntheticCheckpoint,
} from '../../src/devnet/synthetic.js';
import { NILE_USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import { parseGrpcTarget } from '../../src/tron/grpc.js';
import { buildCheckpoint } from '../../src/tron/light-client/checkpoint-build.js';
import {
  FINALITY_THRESHOLD,
  LightClient,
  LightClientError,
  type SubmitResult,
} from '../../src/tron/light-client/finality.js';
import { signedHeaderOf } from '../../src/tron/light-client/follow.js';
import { type SignedHeader, signedHeaderFromJson } from '../../src/tron/light-client/header.js';
import {
  type Checkpoint,
  CheckpointError,
  parseCheckpoint,
} from '../../src/tron/light-client/sr-set.js';
import {
  recoverWitnessSigner,
  signWitnessHeader,
} from '../../src/tron/light-client/witness-signature.js';
import { NodeClient } from '../../src/tron/node-client.js';
import type { BlockJson } from '../../src/tron/types.js';
import { verifyBlock } from '../../src/tron/verify.js';
import { runCli, spawnCli } from '../helpers/cli.js';
import { chainDir } from '../helpers/fixtures.js';

const CHAIN_DIR = chainDir();
const REAL = 79072107;
const REAL_TS = 1767879414000;

const opened: Array<{ close(): Promise<void> }> = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((r) => r.close()));
});

async function start(opts: ReplayNodeOptions): Promise<ReplayNode> {
  const node = await startReplayNode(opts);
  opened.push(node);
  return node;
}

async function post(node: ReplayNode, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(`${node.url}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(res.status, path).toBe(200);
  return JSON.parse(await res.text());
}

/** Block n's signed header from the node's JSON (`/wallet/getblockbynum`). */
async function jsonHeader(node: ReplayNode, n: number): Promise<SignedHeader> {
  return signedHeaderFromJson((await post(node, '/wallet/getblockbynum', { num: n })) as BlockJson);
}

/** Submit and expect `verified`; the blocks it made final. */
function verified(lc: LightClient, h: SignedHeader): number[] {
  const r: SubmitResult = lc.submit(h);
  expect(r.status, `block ${h.number}`).toBe('verified');
  return r.status === 'verified' ? r.final.map((f) => f.number) : [];
}

function refusal(lc: LightClient, h: SignedHeader): LightClientError {
  try {
    lc.submit(h);
  } catch (err) {
    if (err instanceof LightClientError) return err;
    throw err;
  }
  throw new Error(`block ${h.number} was accepted`);
}

const slotOf = (t: number) => Math.floor(t / 3000) % 27;

describe('replay node over a recorded mainnet block (79072107)', () => {
  it('replayCheckpoint: the real block’s parent, the devnet set with its real SR in its slot', async () => {
    const cp = await replayCheckpoint(dirSource(CHAIN_DIR));
    const real = JSON.parse(
      (await (await dirSource(CHAIN_DIR).get(REAL))?.block)?.toString('utf8') ?? '',
    ) as BlockJson;
    const raw = real.block_header?.raw_data as Record<string, string | number>;
    expect(parseCheckpoint(JSON.parse(JSON.stringify(cp)))).toEqual(cp);
    expect(cp.network).toBe('devnet');
    expect(cp.block).toEqual({ number: REAL - 1, id: raw.parentHash, timestamp: REAL_TS - 3000 });
    const around = devnetSrsAround({ witness: String(raw.witness_address), timestamp: REAL_TS });
    expect(cp.witnesses).toEqual(
      around.map((s) => ({ address: s.address, signingKey: s.signingKey })),
    );
    expect(cp.witnesses[slotOf(REAL_TS)]).toEqual({
      address: raw.witness_address,
      signingKey: raw.witness_address,
    });
    expect(cp.nextMaintenanceTime).toBeGreaterThan(REAL_TS + 86_400_000 * 365);
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0 });
    expect(node.checkpoint).toEqual(cp);
    expect(node.srs).toEqual(cp.witnesses);
  });

  it('a light client verifies the real block (its real signature) and the signed fillers over gRPC, and proves it final once 19 SRs signed on it', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0, lag: 0, grpc: true });
    node.advanceTo(REAL + 60);
    const c = new NodeClient({
      url: node.url,
      retries: 0,
      grpc: parseGrpcTarget(node.grpcUrl as string),
    });
    opened.push(c);
    await c.getSolidifiedHead();
    const cp = node.checkpoint as Checkpoint;
    const lc = new LightClient(cp);
    const realSr = cp.witnesses[slotOf(REAL_TS)]?.address as string;
    const producers = new Set<string>();
    let prevTs = REAL_TS - 3000;
    for (let n = REAL; n <= REAL + 60; n++) {
      const b = await c.getSolidifiedBlock(n);
      expect(b.exact, `block ${n} read as exact bytes`).toBeDefined();
      const h = signedHeaderOf(b.block, b.exact);
      // Every block is signed by its producer's key, and produced in the slot its time schedules.
      const sr = cp.witnesses[slotOf(h.timestamp)];
      expect(h.witness, `producer of ${n}`).toBe(sr?.address);
      expect(recoverWitnessSigner(h.raw, h.signature), `signer of ${n}`).toBe(sr?.signingKey);
      if (n === REAL) expect(h.witness).toBe(realSr);
      else expect(h.witness, `filler ${n} is not by the real SR`).not.toBe(realSr);
      // Fillers move one slot per block, skipping the real SR's slots (missed: no key here).
      const skipped = slotOf(prevTs + 3000) === slotOf(REAL_TS) && n !== REAL;
      expect(h.timestamp - prevTs, `time of ${n}`).toBe(skipped ? 6000 : 3000);
      prevTs = h.timestamp;
      producers.add(h.witness);
      const final = verified(lc, h);
      // Final exactly when the 19th distinct SR signed at or above it (its own producer included).
      if (producers.size < FINALITY_THRESHOLD) expect(final, `after ${n}`).toEqual([]);
      if (n === REAL + FINALITY_THRESHOLD - 1) expect(final).toEqual([REAL]);
    }
    // The real SR's next slot, 27 slots after the real block, was missed.
    expect((await jsonHeader(node, REAL + 26)).timestamp).toBe(REAL_TS + 26 * 3000);
    expect((await jsonHeader(node, REAL + 27)).timestamp).toBe(REAL_TS + 28 * 3000);
    expect(lc.finalBlock.number).toBe(REAL + 60 - FINALITY_THRESHOLD + 1);
  });

  it('filler times: one slot per block, the real SR’s slots skipped, the same from every endpoint', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0, lag: 0 });
    node.advanceTo(REAL + 80);
    const k = slotOf(REAL_TS);
    for (const n of [REAL - 40, REAL - 27, REAL - 1, REAL + 1, REAL + 26, REAL + 27, REAL + 80]) {
      const h = await jsonHeader(node, n);
      expect(h.timestamp, `filler ${n}`).toBe(fillerTime(REAL_TS, n - REAL, k));
      expect(slotOf(h.timestamp), `filler ${n}`).not.toBe(k);
      const viaGetBlock = (await post(node, '/wallet/getblock', {
        id_or_num: String(n),
      })) as BlockJson;
      expect(viaGetBlock.block_header?.raw_data?.timestamp).toBe(h.timestamp);
    }
    // Below the real block too: the real SR's slot 27 slots before it is skipped.
    expect((await jsonHeader(node, REAL - 26)).timestamp).toBe(REAL_TS - 26 * 3000);
    expect((await jsonHeader(node, REAL - 27)).timestamp).toBe(REAL_TS - 28 * 3000);
    // fillerTime itself, against a slot-by-slot walk that skips position k.
    for (const dir of [1, -1]) {
      let slot = Math.floor(REAL_TS / 3000);
      for (let j = 1; j <= 200; j++) {
        do slot += dir;
        while (slot % 27 === k);
        expect(fillerTime(REAL_TS, dir * j, k), `${dir * j} blocks`).toBe(slot * 3000);
      }
    }
    // 130 blocks = 5 rounds of 26, in 134 slots (the 4 missed ones between); the 131st skips the 5th.
    expect(fillerTime(REAL_TS, 130, k)).toBe(REAL_TS + 134 * 3000);
    expect(fillerTime(REAL_TS, 131, k)).toBe(REAL_TS + 136 * 3000);
    expect(fillerTime(REAL_TS, 7, undefined)).toBe(REAL_TS + 21_000);
    expect(fillerTime(REAL_TS + 1, -7, undefined)).toBe(REAL_TS + 1 - 21_000);
  });

  it('tronwatch checkpoint against the replay node finds the same SR set once 40 blocks above the real one are solidified; refuses before (its window would miss the real SR’s slot)', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0, lag: 40 });
    const cp = node.checkpoint as Checkpoint;
    const providers = [{ url: node.url, name: 'replay' }];
    // Below REAL + 39, the window reaches fillers below the real block, which do not chain to it.
    node.advanceTo(REAL + 38);
    await expect(buildCheckpoint(providers, { network: 'devnet' })).rejects.toThrow(
      new RegExp(`header ${REAL} is not the child of ${REAL - 1}`),
    );
    node.advanceTo(REAL + 39);
    const built = await buildCheckpoint(providers, { network: 'devnet' });
    const head = await jsonHeader(node, REAL + 39);
    expect(built.block).toEqual({ number: REAL + 39, id: head.id, timestamp: head.timestamp });
    expect(built.witnesses).toEqual(cp.witnesses);
    expect(built.nextMaintenanceTime).toBe(cp.nextMaintenanceTime);
    expect(built.maintenanceIntervalMs).toBe(cp.maintenanceIntervalMs);
    // A light client pinned at the built checkpoint follows the node from there.
    const lc = new LightClient(built);
    for (let n = REAL + 40; n < REAL + 40 + FINALITY_THRESHOLD; n++) {
      verified(lc, await jsonHeader(node, n));
    }
    expect(lc.finalBlock.number).toBe(REAL + 40);
    // 40 blocks that do not reach down to the real block hold no block of its SR: refused.
    node.advanceTo(REAL + 80);
    await expect(buildCheckpoint(providers, { network: 'devnet' })).rejects.toThrow(
      new RegExp(`slot ${slotOf(REAL_TS)} has no block in the last 40`),
    );
  });

  it('the lying fork (no SR keys) and a forged block signed by the wrong SR are refused', async () => {
    const node = await start({ source: dirSource(CHAIN_DIR), intervalMs: 0, lag: 0 });
    node.advanceTo(REAL + 10);
    const cp = node.checkpoint as Checkpoint;
    const lc = new LightClient(cp);
    for (let n = REAL; n <= REAL + 4; n++) verified(lc, await jsonHeader(node, n));
    const honest = await jsonHeader(node, REAL + 5);

    node.setLies({ forkFrom: REAL + 5 });
    const fork = await jsonHeader(node, REAL + 5);
    expect(fork.parentId).toBe((await jsonHeader(node, REAL + 4)).id);
    expect(fork.id).not.toBe(honest.id);
    expect(refusal(lc, fork).code).toBe('outside-set');

    // A forged block in the scheduled SR's name, signed by another devnet SR's key.
    const b = (await post(node, '/wallet/getblockbynum', { num: REAL + 5 })) as BlockJson;
    node.setLies(undefined);
    const real = (await post(node, '/wallet/getblockbynum', { num: REAL + 5 })) as BlockJson;
    expect(b.blockID).not.toBe(real.blockID);
    const raw = real.block_header?.raw_data as Record<string, unknown>;
    const other = DEVNET_SRS.find((s) => s.address !== raw.witness_address) ?? DEVNET_SRS[0];
    const fields = {
      number: Number(raw.number),
      txTrieRoot: String(raw.txTrieRoot),
      witness_address: String(raw.witness_address),
      parentHash: String(raw.parentHash),
      version: Number(raw.version),
      timestamp: Number(raw.timestamp),
    };
    const forged: BlockJson = {
      ...real,
      block_header: {
        raw_data: raw,
        witness_signature: Buffer.from(
          signWitnessHeader(headerRawBytes(fields), other?.privateKey as Uint8Array),
        ).toString('hex'),
      },
    };
    node.setLies({ blocks: new Map([[REAL + 5, { block: JSON.stringify(forged) }]]) });
    const lied = await jsonHeader(node, REAL + 5);
    expect(lied.id).toBe(honest.id); // the same header: only the signature lies
    const err = refusal(lc, lied);
    expect(err.code).toBe('bad-signature');
    expect(err.message).toContain(other?.signingKey);
    // The honest block is still accepted after the lies.
    node.setLies(undefined);
    verified(lc, await jsonHeader(node, REAL + 5));
  });
});

describe('replay node over a synthetic chain', () => {
  const CHAIN: SyntheticChainOptions = { seed: 2828, firstBlock: 5000, txPerBlock: 3 };
  const COUNT = 45;

  function source() {
    const map = new Map<number, { block: string; infos: string }>();
    for (let n = 5000; n < 5000 + COUNT; n++) {
      const b = syntheticBlock(CHAIN, n);
      map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    }
    return memorySource(map);
  }

  it('replayCheckpoint is syntheticCheckpoint; the synthetic blocks and the DEVNET_SRS-signed fillers beyond them are proven over HTTP and gRPC', async () => {
    const cp = await replayCheckpoint(source());
    const { source: _a, ...want } = syntheticCheckpoint(CHAIN);
    const { source: _b, ...got } = cp;
    expect(got).toEqual(want);
    const node = await start({ source: source(), intervalMs: 0, lag: 0, grpc: true });
    expect(node.checkpoint).toEqual(cp);
    node.advanceTo(5000 + 70);
    const c = new NodeClient({
      url: node.url,
      retries: 0,
      grpc: parseGrpcTarget(node.grpcUrl as string),
    });
    opened.push(c);
    await c.getSolidifiedHead();
    const lc = new LightClient(cp);
    for (let n = 5000; n <= 5070; n++) {
      const http = await jsonHeader(node, n);
      const b = await c.getSolidifiedBlock(n);
      const grpc = signedHeaderOf(b.block, b.exact);
      expect(grpc.id).toBe(http.id);
      expect(http.timestamp).toBe(1_767_000_000_000 + (n - 5000) * 3000);
      const sr = DEVNET_SRS[slotOf(http.timestamp)];
      expect(http.witness).toBe(sr?.address);
      expect(recoverWitnessSigner(http.raw, http.signature)).toBe(sr?.signingKey);
      if (n > 5000 + COUNT - 1) expect(verifyBlock(b.block, b.infos).id).toBe(http.id);
      const final = verified(lc, grpc);
      if (n === 5000 + FINALITY_THRESHOLD - 1) expect(final).toEqual([5000]);
      if (n < 5000 + FINALITY_THRESHOLD - 1) expect(final).toEqual([]);
    }
    expect(lc.finalBlock.number).toBe(5070 - FINALITY_THRESHOLD + 1);
  });

  it('answers what tronwatch checkpoint asks: the checkpoint built from it is the one its chain implies', async () => {
    const node = await start({ source: source(), intervalMs: 0 });
    const cp = node.checkpoint as Checkpoint;
    // Inside the synthetic blocks and above them (fillers).
    // From the first block whose 40-block window starts at the synthetic chain's first block (the
    // fillers below it do not chain to it), inside the synthetic blocks and above them.
    for (const head of [5000 + 39, 5000 + 100]) {
      node.advanceTo(head);
      const built = await buildCheckpoint([{ url: node.url, name: 'replay' }], {
        network: 'devnet',
      });
      const h = await jsonHeader(node, head);
      expect(built.block).toEqual({ number: head, id: h.id, timestamp: h.timestamp });
      expect(built.witnesses).toEqual(cp.witnesses);
      expect(built.nextMaintenanceTime).toBe(cp.nextMaintenanceTime);
      expect(built.maintenanceIntervalMs).toBe(cp.maintenanceIntervalMs);
    }
    // The endpoints' shapes.
    const ws = (await post(node, '/wallet/listwitnesses', {})) as {
      witnesses: Array<{ address: string; isJobs?: boolean }>;
    };
    expect(ws.witnesses.filter((w) => w.isJobs).map((w) => w.address)).toEqual(
      DEVNET_SRS.map((s) => s.address),
    );
    const sr21 = DEVNET_SRS[21];
    expect(await post(node, '/wallet/getaccount', { address: sr21?.address })).toMatchObject({
      address: sr21?.address,
      witness_permission: { keys: [{ address: sr21?.signingKey }] },
    });
    expect(await post(node, '/wallet/getaccount', { address: `41${'99'.repeat(20)}` })).toEqual({});
    expect(await post(node, '/wallet/getnextmaintenancetime', {})).toEqual({
      num: cp.nextMaintenanceTime,
    });
    expect(await post(node, '/wallet/getchainparameters', {})).toEqual({
      chainParameter: [
        { key: 'getMaintenanceTimeInterval', value: cp.maintenanceIntervalMs },
        { key: 'getAllowMultiSign', value: 1 },
      ],
    });
    const list = (await post(node, '/wallet/getblockbylimitnext', {
      startNum: 5003,
      endNum: 5008,
    })) as { block: BlockJson[] };
    expect(list.block.map((b) => b.block_header?.raw_data?.number)).toEqual([
      5003, 5004, 5005, 5006, 5007,
    ]);
    expect(list.block[0]?.transactions).toHaveLength(3);
    expect(
      await post(node, '/wallet/getblockbylimitnext', { startNum: 5000, endNum: 5101 }),
    ).toEqual({});
  });

  it('a source whose first block cannot anchor a checkpoint: the node starts without one, replayCheckpoint says why', async () => {
    const ts = 1_700_000_000_001; // not a slot
    const block = `{"blockID":"${(100).toString(16).padStart(16, '0')}${'aa'.repeat(24)}","block_header":{"raw_data":{"number":100,"parentHash":"${(99).toString(16).padStart(16, '0')}${'bb'.repeat(24)}","timestamp":${ts}}}}`;
    const src = memorySource(new Map([[100, { block }]]));
    await expect(replayCheckpoint(src)).rejects.toThrow(CheckpointError);
    const node = await start({ source: src, intervalMs: 0 });
    expect(node.checkpoint).toBeUndefined();
    expect(node.srs).toEqual(
      DEVNET_SRS.map((s) => ({ address: s.address, signingKey: s.signingKey })),
    );
  });
});

describe('replay node over a Nile-shaped synthetic chain (issue 32 item 5: its own SRs)', () => {
  const NILE: SyntheticChainOptions = {
    seed: 3232,
    firstBlock: 6000,
    txPerBlock: 3,
    usdtContract: NILE_USDT_CONTRACT_HEX,
  };
  const COUNT = 45;
  const pairs = (srs: ReadonlyArray<{ address: string; signingKey: string }>) =>
    srs.map((s) => ({ address: s.address, signingKey: s.signingKey }));

  function source() {
    const map = new Map<number, { block: string; infos: string }>();
    for (let n = 6000; n < 6000 + COUNT; n++) {
      const b = syntheticBlock(NILE, n);
      map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    }
    return memorySource(map);
  }

  it('its checkpoint names 27 SRs of its own (20 signing with their address), none of the mainnet-shaped devnet’s', () => {
    const cp = syntheticCheckpoint(NILE);
    expect(devnetSrs(NILE)).toBe(NILE_DEVNET_SRS);
    expect(devnetSrs({ ...NILE, usdtContract: undefined })).toBe(DEVNET_SRS);
    expect(cp.witnesses).toEqual(pairs(NILE_DEVNET_SRS));
    expect(new Set(cp.witnesses.map((w) => w.address)).size).toBe(27);
    expect(new Set(cp.witnesses.map((w) => w.signingKey)).size).toBe(27);
    expect(cp.witnesses.filter((w) => w.address === w.signingKey)).toHaveLength(20);
    const mainnet = new Set(DEVNET_SRS.flatMap((s) => [s.address, s.signingKey]));
    for (const w of cp.witnesses) {
      expect(mainnet.has(w.address), w.address).toBe(false);
      expect(mainnet.has(w.signingKey), w.signingKey).toBe(false);
    }
    // The block producers are the Nile set's, in schedule order.
    for (let n = 6000; n < 6030; n++) {
      const h = signedHeaderFromJson(syntheticBlock(NILE, n).block);
      const sr = NILE_DEVNET_SRS[slotOf(h.timestamp)];
      expect(h.witness).toBe(sr?.address);
      expect(recoverWitnessSigner(h.raw, h.signature)).toBe(sr?.signingKey);
    }
  });

  it('a light client from the mainnet devnet set refuses its blocks (signer outside the set); one from its checkpoint proves them and the Nile-signed fillers, over HTTP and gRPC', async () => {
    const cp = await replayCheckpoint(source());
    const { source: _a, ...want } = syntheticCheckpoint(NILE);
    const { source: _b, ...got } = cp;
    expect(got).toEqual(want);
    expect(cp.source).toContain('the Nile-shaped devnet SRs');
    const node = await start({ source: source(), intervalMs: 0, lag: 0, grpc: true });
    expect(node.checkpoint).toEqual(cp);
    expect(node.srs).toEqual(pairs(NILE_DEVNET_SRS));
    node.advanceTo(6000 + 70);
    // The mainnet-shaped devnet's set at the same anchor: the producer is not one of its SRs.
    const first = await jsonHeader(node, 6000);
    const mainnetSet = new LightClient(parseCheckpoint({ ...cp, witnesses: pairs(DEVNET_SRS) }));
    expect(refusal(mainnetSet, first).code).toBe('outside-set');
    // The mainnet-shaped chain's own checkpoint (same options but USDT): refused too.
    refusal(new LightClient(syntheticCheckpoint({ ...NILE, usdtContract: undefined })), first);
    const c = new NodeClient({
      url: node.url,
      retries: 0,
      grpc: parseGrpcTarget(node.grpcUrl as string),
    });
    opened.push(c);
    await c.getSolidifiedHead();
    const lc = new LightClient(cp);
    for (let n = 6000; n <= 6070; n++) {
      const http = await jsonHeader(node, n);
      const b = await c.getSolidifiedBlock(n);
      const grpc = signedHeaderOf(b.block, b.exact);
      expect(grpc.id).toBe(http.id);
      expect(http.witness).toBe(NILE_DEVNET_SRS[slotOf(http.timestamp)]?.address);
      const final = verified(lc, grpc);
      if (n === 6000 + FINALITY_THRESHOLD - 1) expect(final).toEqual([6000]);
    }
    expect(lc.finalBlock.number).toBe(6070 - FINALITY_THRESHOLD + 1);
  });

  it('tronwatch checkpoint against it finds the Nile set; listwitnesses and getaccount answer for it', async () => {
    const node = await start({ source: source(), intervalMs: 0 });
    const cp = node.checkpoint as Checkpoint;
    node.advanceTo(6000 + 100);
    const built = await buildCheckpoint([{ url: node.url, name: 'replay' }], {
      network: 'devnet',
    });
    expect(built.witnesses).toEqual(cp.witnesses);
    expect(built.witnesses).toEqual(pairs(NILE_DEVNET_SRS));
    const ws = (await post(node, '/wallet/listwitnesses', {})) as {
      witnesses: Array<{ address: string; isJobs?: boolean }>;
    };
    expect(ws.witnesses.filter((w) => w.isJobs).map((w) => w.address)).toEqual(
      NILE_DEVNET_SRS.map((s) => s.address),
    );
    const sr21 = NILE_DEVNET_SRS[21];
    expect(await post(node, '/wallet/getaccount', { address: sr21?.address })).toMatchObject({
      address: sr21?.address,
      witness_permission: { keys: [{ address: sr21?.signingKey }] },
    });
    expect(await post(node, '/wallet/getaccount', { address: DEVNET_SRS[0]?.address })).toEqual({});
  });
});

describe('tronwatch replay-node --checkpoint-out', () => {
  it('writes the checkpoint of the chain it serves before printing its address; refuses a folder whose first block anchors none', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tronwatch-replay-cp-'));
    try {
      const file = join(dir, 'checkpoint.json');
      const child = spawnCli([
        'replay-node',
        '--dir',
        CHAIN_DIR,
        '--interval-ms',
        '0',
        '--checkpoint-out',
        file,
      ]);
      const exited = new Promise((resolve) => child.on('exit', resolve));
      try {
        const line = await new Promise<string>((resolve, reject) => {
          let out = '';
          child.stdout?.on('data', (d: Buffer) => {
            out += d.toString();
            if (out.includes('\n')) resolve(out.slice(0, out.indexOf('\n')));
          });
          child.on('exit', (code) => reject(new Error(`replay-node exited ${code}`)));
        });
        expect(JSON.parse(line)).toMatchObject({ first: REAL, last: REAL });
        const written = parseCheckpoint(JSON.parse(await readFile(file, 'utf8')));
        expect(written).toEqual(await replayCheckpoint(dirSource(CHAIN_DIR)));
      } finally {
        child.kill('SIGTERM');
        await exited;
      }

      // A folder whose first block is not in a slot (its time is not a multiple of 3,000 ms).
      const bad = join(dir, 'chain');
      await rm(bad, { recursive: true, force: true });
      await mkdir(bad);
      const id = `${(100).toString(16).padStart(16, '0')}${'aa'.repeat(24)}`;
      const parent = `${(99).toString(16).padStart(16, '0')}${'bb'.repeat(24)}`;
      await writeFile(
        join(bad, 'block-100.json'),
        `{"blockID":"${id}","block_header":{"raw_data":{"number":100,"parentHash":"${parent}","timestamp":1700000000001}}}`,
      );
      const badOut = join(dir, 'bad.json');
      const r = await runCli([
        'replay-node',
        '--dir',
        bad,
        '--interval-ms',
        '0',
        '--checkpoint-out',
        badOut,
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toMatch(/anchors no checkpoint/);
      await expect(readFile(badOut)).rejects.toThrow(/ENOENT/);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
