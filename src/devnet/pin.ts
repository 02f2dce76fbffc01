/**
 * The light client's pin for a devnet chain: the checkpoint from which tronwatch proves a replay
 * node's chain (`ReplayNode.checkpoint`: the block before its first one, with the devnet SRs in
 * schedule order and their keys), written where TRON_LIGHT_CLIENT_CHECKPOINT can name it. The
 * demo and `tronwatch dev` pin it as an operator pins a reviewed mainnet checkpoint (issue 28:
 * the light client has no off switch).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Checkpoint } from '../tron/light-client/sr-set.js';

/**
 * Write `node.checkpoint` into `dir` as `checkpoint-<number>.json`.
 * @returns the file's path, for TRON_LIGHT_CLIENT_CHECKPOINT.
 * @throws Error when the node has no checkpoint (a source it cannot build one for).
 */
export function writeDevnetCheckpoint(
  node: { url: string; checkpoint: Checkpoint | undefined },
  dir: string,
): string {
  const cp = node.checkpoint;
  if (!cp) throw new Error(`replay node ${node.url} has no checkpoint to pin`);
  const file = path.join(dir, `checkpoint-${cp.block.number}.json`);
  fs.writeFileSync(file, `${JSON.stringify(cp, null, 2)}\n`);
  return file;
}
