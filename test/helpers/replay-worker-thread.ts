/**
 * The replay node of test/helpers/replay-worker.ts, in its own worker thread: its arrival times
 * are then not held up by the test's event loop (an embedded PGlite query blocks it for tens of
 * ms, which would bunch arrivals that left the client well apart).
 */
import { parentPort, workerData } from 'node:worker_threads';
import {
  memorySource,
  type ReplayNodeOptions,
  startReplayNode,
} from '../../src/devnet/replay-node.js';
import { type SyntheticChainOptions, syntheticBlock } from '../../src/devnet/synthetic.js';

const { chain, node: opts } = workerData as {
  chain: SyntheticChainOptions & { count: number; firstBlock: number };
  node: Omit<ReplayNodeOptions, 'source' | 'now'>;
};
const port = parentPort;
if (!port) throw new Error('replay-worker-thread must run in a worker thread');
const map = new Map<number, { block: string; infos: string }>();
for (let n = chain.firstBlock; n < chain.firstBlock + chain.count; n++) {
  const b = syntheticBlock(chain, n);
  map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
}
const node = await startReplayNode({ ...opts, source: memorySource(map) });

port.on('message', async (m: { id: number; op: string; blocks?: number[]; block?: number }) => {
  let result: unknown;
  if (m.op === 'log') {
    // Arrival times as epoch ms: this thread's performance clock has its own origin.
    result = node.requestLog.map((r) => ({ ...r, at: r.at + performance.timeOrigin }));
  } else if (m.op === 'stats') result = node.stats;
  else if (m.op === 'solidifiedAt') result = (m.blocks ?? []).map((n) => node.solidifiedAt(n));
  else if (m.op === 'pause') node.pause();
  else if (m.op === 'resume') node.resume();
  else if (m.op === 'advance') node.advanceTo(m.block ?? 0);
  else if (m.op === 'heads') result = node.heads();
  else if (m.op === 'close') {
    await node.close();
    port.postMessage({ id: m.id, result: null });
    port.close();
    return;
  }
  port.postMessage({ id: m.id, result });
});
port.postMessage({ id: 0, result: { url: node.url } });
