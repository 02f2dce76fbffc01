/**
 * Ordered block fetching with read-ahead: `concurrency` solidified blocks are requested at once and
 * yielded strictly in block order, so a consumer sees block n+1 only after block n. The network
 * latency of one block overlaps the parsing of the others (the node is the bottleneck when
 * catching up).
 */

import { hexToBase58 } from './address.js';
import { formatAmount } from './amount.js';
import { extractTransfers } from './extract.js';
import type { NodeClient, SolidifiedBlock } from './node-client.js';
import type { Transfer } from './types.js';
import { BlockCheckError, verifyBlock } from './verify.js';

/**
 * Yield solidified blocks `from..to` (inclusive) in order. When the generator ends early (a
 * block failed, the consumer stopped iterating, `signal` aborted), the requests still in flight
 * for the blocks after it are aborted, retries included: against a rate-limited node they would
 * otherwise go on being retried while the caller asks for the same blocks again.
 * @param concurrency requests in flight at most (≥ 1).
 * @throws the first NodeError that survives the client's retries; the blocks before it were yielded.
 */
export async function* fetchBlocks<B extends SolidifiedBlock>(
  client: { getSolidifiedBlock(n: number, signal?: AbortSignal): Promise<B> },
  from: number,
  to: number,
  concurrency: number,
  signal?: AbortSignal,
): AsyncGenerator<B> {
  const inflight = new Map<number, Promise<B>>();
  const readAhead = new AbortController();
  const requests = signal ? AbortSignal.any([signal, readAhead.signal]) : readAhead.signal;
  let next = from;
  const fill = () => {
    while (next <= to && inflight.size < concurrency) {
      const p = client.getSolidifiedBlock(next, requests);
      p.catch(() => {}); // surfaced when awaited in order; avoid an unhandled rejection meanwhile
      inflight.set(next, p);
      next++;
    }
  };
  try {
    for (let n = from; n <= to; n++) {
      fill();
      const p = inflight.get(n);
      if (!p) break;
      const b = await p;
      inflight.delete(n);
      yield b;
    }
  } finally {
    if (inflight.size > 0) readAhead.abort();
    inflight.clear();
  }
}

/** A transfer as `tronwatch scan` prints it: the event fields of SPEC §Event (base58 addresses). */
export interface TransferLine {
  block_number: number;
  block_timestamp: string;
  tx_id: string;
  event_index: number;
  asset: 'USDT' | 'TRX';
  from: string;
  to: string;
  amount_raw: string;
  amount: string;
  contract: string | null;
}

/** Shape a transfer for output: ISO 8601 UTC timestamp with milliseconds, base58 addresses. */
export function transferLine(t: Transfer): TransferLine {
  return {
    block_number: t.blockNumber,
    block_timestamp: new Date(t.blockTimestamp).toISOString(),
    tx_id: t.txId,
    event_index: t.eventIndex,
    asset: t.asset,
    from: hexToBase58(t.from),
    to: hexToBase58(t.to),
    amount_raw: t.amountRaw.toString(),
    amount: formatAmount(t.amountRaw),
    contract: t.contract === null ? null : hexToBase58(t.contract),
  };
}

export interface ScanStats {
  blocks: number;
  transfers: number;
}

/**
 * Scan solidified blocks `from..to` and call `onTransfer` for each transfer in order. Every block
 * is verified first (tron/verify.ts; `verify: false` only for the benchmark's baseline): its own
 * hashes, its receipts, and, from the second block on, that it follows the one before.
 * @throws NodeError('beyond_solidified') before any request when `to` is above the solidified
 *   head; BlockCheckError when a block fails verification (nothing of it is reported).
 */
export async function scan(
  client: NodeClient,
  from: number,
  to: number,
  opts: {
    concurrency: number;
    signal?: AbortSignal;
    onTransfer?: (t: Transfer) => void;
    onBlock?: (b: SolidifiedBlock, transfers: Transfer[]) => void;
    /** Verify every block (default true). */
    verify?: boolean;
  },
): Promise<ScanStats> {
  if (client.solidifiedHead < to) await client.getSolidifiedHead(opts.signal);
  if (to > client.solidifiedHead) {
    throw Object.assign(
      new Error(`block ${to} is not solidified yet (solidified head: ${client.solidifiedHead})`),
      { retryable: false },
    );
  }
  const stats: ScanStats = { blocks: 0, transfers: 0 };
  let prev: string | undefined;
  for await (const b of fetchBlocks(client, from, to, opts.concurrency, opts.signal)) {
    let transfers: Transfer[];
    if (opts.verify ?? true) {
      const v = verifyBlock(b.block, b.infos, b.exact);
      if (prev !== undefined && v.parentHash !== prev) {
        throw new BlockCheckError(
          'parent',
          b.ref.number,
          `parentHash ${v.parentHash} is not the blockID of block ${b.ref.number - 1} (${prev})`,
        );
      }
      prev = v.id;
      transfers = v.transfers; // extracted from the verified answer, with their proof level
    } else {
      transfers = extractTransfers(b.block, b.infos);
    }
    stats.blocks++;
    stats.transfers += transfers.length;
    opts.onBlock?.(b, transfers);
    if (opts.onTransfer) for (const t of transfers) opts.onTransfer(t);
  }
  return stats;
}
