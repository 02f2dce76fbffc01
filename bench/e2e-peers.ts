/**
 * The service's peers for the end-to-end benchmark, in a worker thread (their own core, as a
 * remote node and a remote receiver would be): a replay node serving a synthetic chain and a
 * local HTTPS receiver that verifies signatures. Driven by messages from bench/e2e.ts.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { startReceiver } from '../src/devnet/receiver.js';
import { memorySource, startReplayNode } from '../src/devnet/replay-node.js';
import { syntheticBlock } from '../src/devnet/synthetic.js';

const {
  chain,
  blocks,
  intervalMs,
  extra = 0,
} = workerData as {
  chain: { seed: number; firstBlock: number; txPerBlock: number; addresses: number };
  blocks: number;
  intervalMs: number;
  /** Blocks served after the measured ones (the light client needs 18 above the last). */
  extra?: number;
};
const LAG = 18;
const port = parentPort;
if (!port) throw new Error('e2e-peers must run in a worker thread');

const map = new Map<number, { block: string; infos: string }>();
for (let n = chain.firstBlock; n < chain.firstBlock + blocks + extra; n++) {
  const b = syntheticBlock(chain, n);
  map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
}
const secrets = new Map<string, string>();
const receiver = await startReceiver({
  secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
  record: true,
});
const node = await startReplayNode({
  source: memorySource(map),
  intervalMs,
  lag: LAG,
  startBefore: LAG + 400,
  // Exact bytes, as the ingest role requires of a single provider (src/ingest/provable.ts).
  grpc: true,
});

port.on('message', async (m: { op: string; label?: string; secret?: string; block?: number }) => {
  if (m.op === 'secret' && m.label && m.secret) secrets.set(m.label, m.secret);
  if (m.op === 'advance' && m.block !== undefined)
    node.advanceTo(Math.max(node.heads().solidified, m.block));
  if (m.op === 'count')
    port.postMessage({
      op: 'count',
      // Events of blocks up to m.block (all when absent).
      delivered: new Set(
        receiver.received
          .filter(
            (r) =>
              m.block === undefined ||
              Number((r.event as { block_number?: number } | undefined)?.block_number) <= m.block,
          )
          .map((r) => r.eventId),
      ).size,
    });
  if (m.op === 'report') {
    const received = receiver.received.map((r) => ({
      eventId: r.eventId,
      block: Number((r.event as { block_number?: number } | undefined)?.block_number),
      at: r.receivedAt.getTime(),
      verified: r.verified,
    }));
    const solidifiedAt: Record<number, number> = {};
    for (let n = chain.firstBlock - LAG; n < chain.firstBlock + blocks + extra; n++)
      solidifiedAt[n] = node.solidifiedAt(n) ?? Number.NaN;
    port.postMessage({ op: 'report', received, solidifiedAt, lag: LAG });
  }
  if (m.op === 'close') {
    await node.close();
    await receiver.close();
    port.postMessage({ op: 'closed' });
    port.close();
  }
});
port.postMessage({
  op: 'ready',
  nodeUrl: `${node.url}#grpc=${node.grpcUrl}`,
  origin: receiver.origin,
  ca: receiver.ca,
});
