/**
 * TRON_LIGHT_CLIENT_CHECKPOINT (src/ingest/finality-gate.ts loadCheckpointSetting, finalityGateFor):
 * the shipped checkpoint by number:blockID, a checkpoint file by path, and the refusals (an
 * unknown block, a missing file, a malformed checkpoint); unset means no gate.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import {
  FinalityGate,
  finalityGateFor,
  loadCheckpointSetting,
} from '../../src/ingest/finality-gate.js';
import { CheckpointError } from '../../src/tron/light-client/sr-set.js';

const SHIPPED = path.join(import.meta.dirname, '../../checkpoints/mainnet-78000099.json');
const ID = '0000000004a62fe32f53b49b135166ce13fd718773406c1a367109f7742c88c1';

describe('TRON_LIGHT_CLIENT_CHECKPOINT', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  it('names a shipped checkpoint by number:blockID (any case)', async () => {
    const cp = await loadCheckpointSetting(`78000099:${ID.toUpperCase()}`);
    expect(cp.block).toEqual({ number: 78_000_099, id: ID, timestamp: 1_764_662_154_000 });
    expect(cp.witnesses).toHaveLength(27);
    const want = JSON.parse(await readFile(SHIPPED, 'utf8')) as { witnesses: unknown[] };
    expect(cp.witnesses).toEqual(want.witnesses);
  });

  it('refuses a number:blockID no shipped checkpoint has, naming the shipped ones', async () => {
    const other = `0000000004a62fe3${'0'.repeat(48)}`;
    await expect(loadCheckpointSetting(`78000099:${other}`)).rejects.toThrow(
      new RegExp(`no shipped checkpoint is block 78000099:${other}.*shipped: 78000099:${ID}`),
    );
  });

  it('reads a checkpoint file relative to the working directory, and refuses a bad one', async () => {
    dir = await mkdtemp(path.join(tmpdir(), 'tw-cp-'));
    await writeFile(path.join(dir, 'cp.json'), await readFile(SHIPPED, 'utf8'));
    expect((await loadCheckpointSetting('cp.json', dir)).block.number).toBe(78_000_099);
    await expect(loadCheckpointSetting('missing.json', dir)).rejects.toThrow(/cannot read/);
    await writeFile(path.join(dir, 'bad.json'), '{"network":"mainnet"');
    await expect(loadCheckpointSetting('bad.json', dir)).rejects.toThrow(/is not JSON/);
    const cp = JSON.parse(await readFile(SHIPPED, 'utf8')) as { witnesses: unknown[] };
    cp.witnesses = cp.witnesses.slice(0, 26);
    await writeFile(path.join(dir, 'short.json'), JSON.stringify(cp));
    await expect(loadCheckpointSetting('short.json', dir)).rejects.toBeInstanceOf(CheckpointError);
    await expect(loadCheckpointSetting('short.json', dir)).rejects.toThrow(/26 witnesses/);
  });

  it('unset: a gate with no pin (it takes a checkpoint at first start); set: pinned there', async () => {
    const unpinned = await finalityGateFor(loadConfig({}));
    expect(unpinned).toBeInstanceOf(FinalityGate);
    expect(unpinned.pinned).toBeUndefined();
    expect(unpinned.checkpoint).toBeUndefined();
    expect(() => unpinned.finalBlock).toThrow(/not opened/);
    const gate = await finalityGateFor(
      loadConfig({ TRON_LIGHT_CLIENT_CHECKPOINT: `78000099:${ID}` }),
    );
    expect(gate.pinned?.block.id).toBe(ID);
    expect(gate.checkpoint?.block.id).toBe(ID);
    expect(gate.readHeight).toBe(78_000_099);
  });
});
