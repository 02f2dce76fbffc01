/**
 * The block ids the replay node (src/devnet/replay-node.ts) gives the blocks it makes up below its
 * chained fillers, block 0 among them. They live here, below both the simulator and its readers,
 * because `tronwatch doctor` (src/doctor/node.ts) tells a replay node by its block 0 and the domain
 * never imports devnet/ (test/unit/layout.test.ts).
 */
import { createHash } from 'node:crypto';

/**
 * The id of made-up block `n`, 64 hex digits: its number as 8 bytes big-endian (16 hex digits),
 * then the last 24 bytes of the SHA-256 of a fixed phrase naming `n`. No real block has it.
 */
export function syntheticId(n: number): string {
  const digest = createHash('sha256').update(`tronwatch replay filler ${n}`).digest('hex');
  return n.toString(16).padStart(16, '0') + digest.slice(16);
}
