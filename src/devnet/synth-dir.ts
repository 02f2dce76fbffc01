/**
 * Write a synthetic chain to a folder in the `chain/` layout (`block-<n>.json` + `txinfo-<n>.json`
 * + `blockext-<n>.bin`, the gRPC GetBlockByNum2 bytes: exact, since a synthetic block's JSON holds
 * every byte) so `tronwatch replay-node --dir` serves it like recorded mainnet blocks (load and
 * scale work), gRPC included.
 */
import fs from 'node:fs/promises';
import path from 'node:path';
import { encodeBlockExtention } from './replay-node.js';
import { type SyntheticChainOptions, syntheticBlock } from './synthetic.js';

export interface WriteSyntheticResult {
  blocks: number;
  transactions: number;
  transfers: number;
  bytes: number;
}

/**
 * Generate blocks `opts.firstBlock .. firstBlock+count-1` into `dir` (created when missing).
 * @param onBlock progress callback (block number, blocks written).
 */
export async function writeSyntheticChain(
  opts: SyntheticChainOptions,
  count: number,
  dir: string,
  onBlock?: (n: number, done: number) => void,
): Promise<WriteSyntheticResult> {
  await fs.mkdir(dir, { recursive: true });
  const first = opts.firstBlock ?? 70_000_000;
  const r: WriteSyntheticResult = { blocks: 0, transactions: 0, transfers: 0, bytes: 0 };
  for (let n = first; n < first + count; n++) {
    const b = syntheticBlock({ ...opts, firstBlock: first }, n);
    const block = JSON.stringify(b.block);
    const infos = JSON.stringify(b.infos);
    await fs.writeFile(path.join(dir, `block-${n}.json`), block);
    await fs.writeFile(path.join(dir, `txinfo-${n}.json`), infos);
    await fs.writeFile(path.join(dir, `blockext-${n}.bin`), encodeBlockExtention(block));
    r.blocks++;
    r.transactions += b.block.transactions?.length ?? 0;
    r.transfers += b.transfers.length;
    r.bytes += block.length + infos.length;
    onBlock?.(n, r.blocks);
  }
  return r;
}
