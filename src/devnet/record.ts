/**
 * Record a range of solidified blocks from a node into the `chain/` folder layout that the replay
 * node serves (`dirSource`): `block-<n>.json` = the node's exact `/walletsolidity/getblockbynum`
 * answer, `txinfo-<n>.json` = its exact `/walletsolidity/gettransactioninfobyblocknum` answer.
 *
 * Bytes, not values: the answers are written as the node sent them (never parsed and
 * re-serialised), so integers above 2^53 and field order survive. That is why the fetch is done
 * here with undici rather than through `NodeClient.getSolidifiedBlock`, which returns parsed JSON;
 * the node client still provides the solidified head, and the same checks apply (DESIGN invariant
 * 1: nothing above the solidified head is read).
 *
 * Per block: getblockbynum (retried while empty: `{}` is a load-balancer quirk for solidified
 * blocks); then, only when the block has transactions, gettransactioninfobyblocknum (retried while
 * empty or while its length differs from the block's transaction count); a block without
 * transactions gets `[]`, as the node answers. With a gRPC address (the client's
 * `servesExact`), also `blockext-<n>.bin` = the exact bytes of its gRPC `GetBlockByNum2` answer
 * (a `BlockExtention`), checked to be the same block (same blockID as the JSON answer): tronwatch
 * proves a block's transactions from those bytes, and a recorded block's JSON alone cannot prove
 * them (it can hide bytes: mainnet block 79,072,107 does), so the replay node and
 * `npm run demo -- --blocks DIR` need them. Files are written to a temporary name and renamed,
 * txinfo and blockext before block, so a `block-<n>.json` present means its set is complete.
 */
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { Agent, request } from 'undici';
import { withRetry } from '../common/retry.js';
import { type NodeClient, NodeError } from '../tron/node-client.js';

export interface RecordProgress {
  blockNumber: number;
  txCount: number;
  /** Blocks written so far (this one included) and in the range. */
  done: number;
  total: number;
}

export interface RecordOptions {
  /** Gives the node URL and the solidified head. */
  client: NodeClient;
  /** First and last block to record, inclusive; `to` must be solidified. */
  from: number;
  to: number;
  /** Created when missing; existing files of the range are overwritten. */
  outDir: string;
  /** Called once per block written (blocks finish out of order when concurrency > 1). */
  onProgress?: (p: RecordProgress) => void;
  /** TronGrid key, sent as TRON-PRO-API-KEY (the client keeps its own private). */
  apiKey?: string | undefined;
  /**
   * Also record `blockext-<n>.bin` (module doc). Default: when the client has a gRPC address.
   * @throws RangeError (before any request) when true and the client has none.
   */
  exact?: boolean;
  /** Blocks fetched at once. Default 4. */
  concurrency?: number;
  /** Retries of a transient failure. Default 6. */
  retries?: number;
  /** Deadline of one request, ms. Default 10_000. */
  timeoutMs?: number;
  signal?: AbortSignal;
}

export interface RecordResult {
  from: number;
  to: number;
  blocks: number;
  transactions: number;
  /** Bytes written (blocks + txinfos + exact bytes). */
  bytes: number;
  /** Whether `blockext-<n>.bin` files were written (RecordOptions.exact). */
  exact: boolean;
}

/**
 * Record blocks `from..to` into `outDir`.
 * @throws RangeError when the range is invalid or `to` is above the node's solidified head;
 *   NodeError when a block cannot be fetched (after retries for transient failures).
 */
export async function recordBlocks(opts: RecordOptions): Promise<RecordResult> {
  const { client, from, to, outDir } = opts;
  if (!Number.isSafeInteger(from) || !Number.isSafeInteger(to) || from < 0 || to < from) {
    throw new RangeError(`invalid block range ${from}..${to}: need integers 0 <= from <= to`);
  }
  const exact = opts.exact ?? client.servesExact;
  if (exact && !client.servesExact) {
    throw new RangeError(
      `exact bytes asked for, but ${client.name} has no gRPC address (#grpc=grpc://host:port)`,
    );
  }
  const head = await client.getSolidifiedHead(opts.signal);
  if (to > head.number) {
    throw new RangeError(
      `block ${to} is above the node's solidified head ${head.number}; only solidified blocks are recorded`,
    );
  }
  await mkdir(outDir, { recursive: true });

  const timeoutMs = opts.timeoutMs ?? 10_000;
  const retries = opts.retries ?? 6;
  const concurrency = Math.max(1, Math.min(opts.concurrency ?? 4, to - from + 1));
  const agent = new Agent({
    connections: concurrency,
    keepAliveTimeout: 30_000,
    connect: { timeout: timeoutMs },
  });
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    accept: 'application/json',
  };
  if (opts.apiKey) headers['TRON-PRO-API-KEY'] = opts.apiKey;
  const abort = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, abort.signal]) : abort.signal;

  /** POST once and return the exact body; failures classified as NodeClient does. */
  async function postRaw(path: string, n: number): Promise<Buffer> {
    const timeout = AbortSignal.timeout(timeoutMs);
    const sig = AbortSignal.any([signal, timeout]);
    let status: number;
    let body: Buffer;
    try {
      const res = await request(`${client.url}${path}`, {
        method: 'POST',
        headers,
        body: JSON.stringify({ num: n }),
        dispatcher: agent,
        signal: sig,
      });
      status = res.statusCode;
      body = Buffer.from(await res.body.arrayBuffer());
    } catch (err) {
      if (timeout.aborted)
        throw new NodeError('timeout', `${path} ${n}: no answer within ${timeoutMs} ms`, true);
      if (signal.aborted) throw err;
      throw new NodeError(
        'network',
        `${path} ${n}: ${err instanceof Error ? err.message : String(err)}`,
        true,
      );
    }
    if (status === 429 || status >= 500)
      throw new NodeError('http', `${path} ${n}: HTTP ${status}`, true, status);
    if (status < 200 || status >= 300) {
      throw new NodeError(
        'http',
        `${path} ${n}: HTTP ${status}: ${body.subarray(0, 200).toString()}`,
        false,
        status,
      );
    }
    return body;
  }

  /** Parse for checks only (counts and numbers are below 2^53; the bytes are what is kept). */
  function inspect(path: string, n: number, body: Buffer): unknown {
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      throw new NodeError(
        'malformed',
        `${path} ${n}: answer is not JSON: ${body.subarray(0, 120).toString()}`,
        false,
      );
    }
    if (json && typeof json === 'object' && !Array.isArray(json) && 'Error' in json) {
      throw new NodeError(
        'node_error',
        `${path} ${n}: node error: ${String((json as { Error: unknown }).Error)}`,
        false,
      );
    }
    return json;
  }

  async function fetchBlock(
    n: number,
  ): Promise<{ block: Buffer; infos: Buffer; txCount: number; blockId: string }> {
    const path = '/walletsolidity/getblockbynum';
    const { block, txCount, blockId } = await withRetry(
      async () => {
        const body = await postRaw(path, n);
        const j = inspect(path, n, body) as {
          blockID?: unknown;
          block_header?: { raw_data?: { number?: unknown } };
          transactions?: unknown[];
        };
        if (!j || typeof j !== 'object' || !j.block_header) {
          throw new NodeError('empty', `${path} ${n}: empty answer for a solidified block`, true);
        }
        const num = Number(j.block_header.raw_data?.number ?? 0);
        if (num !== n || typeof j.blockID !== 'string') {
          throw new NodeError('malformed', `${path} ${n}: node returned block ${num}`, false);
        }
        return {
          block: body,
          txCount: Array.isArray(j.transactions) ? j.transactions.length : 0,
          blockId: j.blockID.toLowerCase(),
        };
      },
      { retries, signal },
    );
    if (txCount === 0) return { block, infos: Buffer.from('[]'), txCount, blockId };
    const ipath = '/walletsolidity/gettransactioninfobyblocknum';
    const infos = await withRetry(
      async () => {
        const body = await postRaw(ipath, n);
        const j = inspect(ipath, n, body);
        if (!Array.isArray(j) || j.length === 0) {
          throw new NodeError('empty', `${ipath} ${n}: empty answer, ${txCount} expected`, true);
        }
        if (j.length !== txCount) {
          throw new NodeError(
            'inconsistent',
            `${ipath} ${n}: ${j.length} infos for ${txCount} transactions`,
            true,
          );
        }
        return body;
      },
      { retries, signal },
    );
    return { block, infos, txCount, blockId };
  }

  /** The gRPC answer for block n, checked to be the block the JSON answer was (same blockID). */
  async function fetchExact(n: number, blockId: string): Promise<Buffer> {
    const got = await client.getExactBlockBytes(n, signal);
    if (got.blockId !== blockId) {
      throw new NodeError(
        'inconsistent',
        `block ${n}: gRPC GetBlockByNum2 answered block ${got.blockId}, getblockbynum ${blockId}`,
        false,
      );
    }
    return got.bytes;
  }

  async function writeExact(name: string, bytes: Buffer): Promise<void> {
    const file = join(outDir, name);
    const tmp = `${file}.tmp-${process.pid}`;
    await writeFile(tmp, bytes);
    await rename(tmp, file);
  }

  const total = to - from + 1;
  const result: RecordResult = { from, to, blocks: 0, transactions: 0, bytes: 0, exact };
  let next = from;
  async function worker(): Promise<void> {
    while (next <= to && !signal.aborted) {
      const n = next++;
      const { block, infos, txCount, blockId } = await fetchBlock(n);
      const ext = exact ? await fetchExact(n, blockId) : undefined;
      await writeExact(`txinfo-${n}.json`, infos);
      if (ext) await writeExact(`blockext-${n}.bin`, ext);
      await writeExact(`block-${n}.json`, block);
      result.blocks++;
      result.transactions += txCount;
      result.bytes += block.length + infos.length + (ext?.length ?? 0);
      opts.onProgress?.({ blockNumber: n, txCount, done: result.blocks, total });
    }
  }

  let failure: { err: unknown } | undefined;
  try {
    await Promise.all(
      Array.from({ length: concurrency }, () =>
        worker().catch((err: unknown) => {
          if (failure) return; // an abort caused by the first failure
          failure = { err };
          abort.abort(err); // the first failure stops the others
        }),
      ),
    );
    if (failure) throw failure.err;
    if (opts.signal?.aborted) throw opts.signal.reason;
  } finally {
    await agent.close();
  }
  return result;
}
