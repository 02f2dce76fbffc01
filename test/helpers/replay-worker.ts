/**
 * A replay node serving a synthetic chain from a worker thread (its own event loop, like a
 * remote node), for tests that count requests in time windows of the node's own log.
 */
import { Worker } from 'node:worker_threads';
import type {
  ReplayNodeOptions,
  ReplayRequestRecord,
  ReplayStats,
} from '../../src/devnet/replay-node.js';
import { type SyntheticChainOptions, syntheticBlock } from '../../src/devnet/synthetic.js';
import type { Transfer } from '../../src/tron/types.js';

export interface WorkerChain {
  url: string;
  first: number;
  last: number;
  transfers: Transfer[];
  /** The node's request log; `at` in epoch ms (needs `logRequests`). */
  requestLog(): Promise<ReplayRequestRecord[]>;
  stats(): Promise<ReplayStats>;
  /** ReplayNode.solidifiedAt of each block, epoch ms. */
  solidifiedAt(blocks: number[]): Promise<Array<number | undefined>>;
  /** ReplayNode.pause / resume / advanceTo / heads (a stalled node, blocks released at once). */
  pause(): Promise<void>;
  resume(): Promise<void>;
  advanceTo(block: number): Promise<void>;
  heads(): Promise<{ solidified: number; head: number }>;
  close(): Promise<void>;
}

/** Serve blocks first..first+count-1 of a synthetic chain from a worker thread. */
export async function serveSyntheticInWorker(
  chain: SyntheticChainOptions & { count: number },
  node: Omit<ReplayNodeOptions, 'source' | 'now'>,
): Promise<WorkerChain> {
  const first = chain.firstBlock ?? 70_000_000;
  const transfers: Transfer[] = [];
  for (let n = first; n < first + chain.count; n++) {
    transfers.push(...syntheticBlock({ ...chain, firstBlock: first }, n).transfers);
  }
  const threadUrl = new URL('./replay-worker-thread.ts', import.meta.url).href;
  // tsx's loader is registered inside the thread (execArgv does not carry it to workers).
  const worker = new Worker(
    `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(threadUrl)}); })`,
    { eval: true, workerData: { chain: { ...chain, firstBlock: first }, node } },
  );
  const pending = new Map<number, (v: unknown) => void>();
  worker.on('message', (m: { id: number; result: unknown }) => {
    pending.get(m.id)?.(m.result);
    pending.delete(m.id);
  });
  const failed = new Promise<never>((_, reject) => worker.once('error', reject));
  let nextId = 1;
  const call = <T>(op: string, extra: Record<string, unknown> = {}): Promise<T> => {
    const id = nextId++;
    const p = new Promise<T>((resolve) => pending.set(id, resolve as (v: unknown) => void));
    worker.postMessage({ id, op, ...extra });
    return Promise.race([p, failed]);
  };
  const ready = await Promise.race([
    new Promise<{ url: string }>((resolve) => pending.set(0, resolve as (v: unknown) => void)),
    failed,
  ]);
  return {
    url: ready.url,
    first,
    last: first + chain.count - 1,
    transfers,
    requestLog: () => call('log'),
    stats: () => call('stats'),
    solidifiedAt: (blocks) => call('solidifiedAt', { blocks }),
    pause: () => call('pause'),
    resume: () => call('resume'),
    advanceTo: (block) => call('advance', { block }),
    heads: () => call('heads'),
    close: async () => {
      await call('close');
      await worker.terminate();
    },
  };
}
