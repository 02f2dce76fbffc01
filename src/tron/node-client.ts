/**
 * Client of the java-tron HTTP API (which TronGrid also serves) for solidified data only.
 *
 * Endpoints (POST, JSON body; java-tron `HttpApiOnSolidityService` / `FullNodeHttpApiService`):
 * - `/walletsolidity/getblock {"detail":false}`: the solidified head's header (cheap).
 * - `/wallet/getnodeinfo`: the full-node head and the solidified head in one call
 *   (`block` / `solidityBlock` as "Num:<n>,ID:<id>"), what the ingester polls. Where a node or a
 *   provider does not serve it, the heads come from `/wallet/getblock {"detail":false}` and
 *   `/walletsolidity/getblock {"detail":false}` instead (two requests; asked again every 10
 *   minutes; see getHeads).
 * - `/walletsolidity/getblockbynum {"num":n}`: a solidified block (visible=false, hex addresses);
 *   `{}` for a block above the node's solidified head, which `getBlockIfSolidified` reads as
 *   "not yet" (the ingester asks for the next block itself instead of polling the heads).
 * - `/walletsolidity/gettransactioninfobyblocknum {"num":n}`: its transaction infos.
 * - With gRPC (`#grpc=` in TRON_NODE_URL, the default for TronGrid), the block is read instead as
 *   exact bytes, java-tron's `protocol.WalletSolidity/GetBlockByNum2` (tron/grpc.ts), decoded into
 *   the same JSON shape (tron/exact-block.ts): a block costs two requests, its bytes and its
 *   infos (one for a block without transactions), and its transaction root is checked from the
 *   bytes. The solidity service answers an empty message above its solidified head, read as
 *   `{}` is.
 * - With the light client on (TRON_LIGHT_CLIENT_CHECKPOINT), blocks are read from the full node's
 *   view instead, up to its head (`getFullNodeBlock`): `/wallet/getblockbynum` and
 *   `/wallet/gettransactioninfobyblocknum`, or gRPC `protocol.Wallet/GetBlockByNum2` (the
 *   `#grpc=` address must then serve the full node's service too); `{}` above the head. Nothing
 *   read so is final on the node's word: ingest/finality-gate.ts proves it from the SRs'
 *   signatures first.
 * - `/wallet/gettransactioninfobyid {"value":txid}`: which block holds a transaction, for
 *   GET /v1/watches/{id}/transactions/{tx_id} only (the block is then read as above).
 *
 * Provider limits: every HTTP request, retries included, first waits for a slot of a sliding
 * window of `maxRps` requests per 1.1 s (p-throttle, strict mode; WINDOW_SLACK_MS), so the
 * read-ahead, the head polls and the retries together never send more than `maxRps` in any
 * second. A 429 or 403 (taken as
 * the provider refusing a key over its limits) pauses every request of this client until the time its
 * `Retry-After` asks (whole seconds or an HTTP date; at least 1 s; without the header 1 s, 2 s,
 * 4 s … up to 60 s while they go on), is retried, and is logged once per episode: a warning at
 * the first refusal, an info line with the count at the first answer after a minute without
 * refusals (EPISODE_QUIET_MS; refusals closer than that are one episode, so a client paced by
 * them logs one line, not one per second).
 *
 * Quirks handled: errors as HTTP 200 with `{"Error": …}` (not retryable: the request is wrong);
 * `{}` / `[]` for a block at or below the solidified head, seen behind load balancers whose
 * nodes lag each other (retryable); fields omitted when they hold defaults; int64 above 2^53
 * (parsed exactly, see json.ts). Transient failures (network, timeout, 429, 5xx, empty answers)
 * are retried with exponential backoff and full jitter; the rest fail at once with a NodeError.
 *
 * Invariant 1 (DESIGN): `getSolidifiedBlock(n)` refuses any n above the highest solidified head
 * this client has observed, so nothing unsolidified can be read through it; `getFullNodeBlock`
 * is the one way to read above it, for the light client's finality gate only.
 */
import pThrottle from 'p-throttle';
import { Agent, request } from 'undici';
import type { Logger } from '../common/logger.js';
import { sleep, withRetry } from '../common/retry.js';
import { type DecodedBlock, decodeBlockExtention } from './exact-block.js';
import { blockRef } from './extract.js';
import {
  GET_BLOCK_BY_NUM2,
  GET_FULL_BLOCK_BY_NUM2,
  GrpcBlockClient,
  type GrpcTarget,
} from './grpc.js';
import { parseNodeJson } from './json.js';
import { NodeError } from './node-error.js';
import { PbDecodeError } from './protobuf.js';
import type { BlockJson, BlockRef, TransactionInfoJson } from './types.js';
import type { ExactBlock } from './verify.js';

/** One provider of TRON_NODE_URL as the config gives it (src/config.ts ProviderSettings). */
export interface ProviderOptions {
  url: string;
  name: string;
  apiKey: string | undefined;
  maxRps: number;
  grpc: GrpcTarget | undefined;
  /** The full node's gRPC address (`#grpc_full=`); undefined: `grpc`'s. */
  grpcFull?: GrpcTarget | undefined;
}

/** The node settings of the config (src/config.ts `node`): TRON_NODE_URL, TRON_API_KEY, … */
export interface NodeSettings {
  url: string;
  apiKey: string | undefined;
  timeoutMs: number;
  retries: number;
  concurrency: number;
  /** TRON_NODE_MAX_RPS: requests per second at most, 0 = no cap. */
  maxRps: number;
}

export { NodeError, type NodeErrorKind } from './node-error.js';

export interface NodeClientOptions {
  /** Base URL, e.g. https://api.trongrid.io (no trailing slash needed). */
  url: string;
  /** TronGrid key, sent as TRON-PRO-API-KEY. */
  apiKey?: string | undefined;
  /** Deadline of one request (connect, headers and body), ms. Default 10_000. */
  timeoutMs?: number;
  /** Retries of a transient failure before it surfaces. Default 6. */
  retries?: number;
  /** Keep-alive connections to the node. Default 8. */
  connections?: number;
  /**
   * Requests per second at most, retries and every caller included (a sliding window of
   * 1,000 ms + WINDOW_SLACK_MS); 0 or undefined = no cap. From TRON_NODE_MAX_RPS.
   */
  maxRps?: number;
  /**
   * After `/wallet/getnodeinfo` proved unusable, ask it again (one attempt) this long after,
   * and go back to it when it answers with both heads. ms, default 600_000 (10 minutes).
   */
  nodeInfoRetryMs?: number;
  /**
   * Where this provider serves java-tron's gRPC API: each solidified block is then read only as
   * exact protobuf bytes (GetBlockByNum2, same rate slots, instead of the JSON block), so
   * verification checks its transaction root from them (tron/verify.ts, tron/exact-block.ts,
   * tron/grpc.ts). Default: none (JSON).
   */
  grpc?: GrpcTarget | undefined;
  /**
   * Where it serves the full node's gRPC service (`protocol.Wallet`: blocks not solidified yet,
   * getFullNodeBlock with exact bytes). Default: `grpc` (one port serving both, as the replay node
   * and some proxies do; java-tron serves them on two).
   */
  grpcFull?: GrpcTarget | undefined;
  /** How logs, metrics and health name this provider. Default: the URL's origin. */
  name?: string | undefined;
  logger?: Logger;
}

/**
 * Whether the provider accepts this client (see NodeClient.health): suspended while its 403s
 * outlast the pauses they asked for.
 */
export interface ProviderHealth {
  healthy: boolean;
  /** Why not (the last refusal), when unhealthy. */
  reason?: string;
  /** Epoch ms since when it is unhealthy. */
  since?: number;
}

/** Both heads as the node reports them. */
export interface ChainHeads {
  /** Newest solidified block number. */
  solidified: number;
  /** Newest block the node has, solidified or not. */
  head: number;
}

/** A solidified block with its transaction infos, checked for consistency. */
export interface SolidifiedBlock {
  ref: BlockRef;
  block: BlockJson;
  infos: TransactionInfoJson[];
  /** The same block as exact protobuf bytes, when the provider serves gRPC (NodeClientOptions.grpc). */
  exact?: ExactBlock;
}

const HEAD_RE = /^Num:(\d+),ID:/;

/** The scheme, host and port of a URL (never its path, query or fragment, which may hold a key). */
export function originOf(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return url;
  }
}

/**
 * Extra length of the client's one-second window, ms. A request leaves some time after it took
 * its slot (an event loop busy with an embedded PGlite commit holds it for tens of ms) and
 * reaches the provider after a network delay that varies; with windows of 1,100 ms the provider
 * never counts more than maxRps in any of its seconds while those delays vary by under 100 ms.
 * (At 20 ms, the test on PGlite saw the node refuse one request in 30 blocks.) Costs 9 % of the
 * cap while catching up; nothing once caught up (well under the cap).
 */
const WINDOW_SLACK_MS = 100;
/** Longest pause a Retry-After may impose, ms (1 h; a daily quota asks for more: we ask again). */
const MAX_PAUSE_MS = 3_600_000;
/** Pause after a refusal without Retry-After: 1 s doubling per refusal in the episode, up to 60 s. */
const REFUSAL_BASE_MS = 1_000;
const REFUSAL_CAP_MS = 60_000;
/** Refusals less than this apart are one episode (one log line), ms. */
const EPISODE_QUIET_MS = 60_000;

/**
 * A `Retry-After` value in ms from `nowEpochMs`: delta-seconds or an HTTP date; undefined when
 * absent or unreadable.
 */
export function parseRetryAfter(
  value: string | string[] | undefined,
  nowEpochMs: number = Date.now(),
): number | undefined {
  const v = (Array.isArray(value) ? value[0] : value)?.trim();
  if (!v) return undefined;
  if (/^\d+$/.test(v)) return Number(v) * 1000;
  const at = Date.parse(v);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowEpochMs);
}

/**
 * A `/wallet/getnodeinfo` failure that says the endpoint is not served here (see
 * NodeClient.getHeads): 404, 405 or 501, a java-tron `{"Error"}`, an answer that is not JSON, or
 * one without the heads after every retry. Not 401/403 (a key problem, or TronGrid's rate-limit
 * penalty) nor 429/5xx: those are transient or concern every endpoint alike.
 */
function nodeInfoUnusable(err: NodeError): boolean {
  if (err.kind === 'http') return err.status === 404 || err.status === 405 || err.status === 501;
  return err.kind === 'node_error' || err.kind === 'malformed' || err.kind === 'empty';
}

/**
 * The one place a NodeClient is built from the config (serve, ingest, scan, record).
 * @param node the config's `node` group (TRON_NODE_*, TRON_API_KEY).
 * @param opts.url another node than TRON_NODE_URL (the `--node` option of scan and record).
 */
export function nodeClientFor(
  node: NodeSettings,
  logger: Logger,
  opts: { url?: string | undefined; provider?: ProviderOptions | undefined; retries?: number } = {},
): NodeClient {
  const p = opts.provider;
  return new NodeClient({
    url: opts.url ?? p?.url ?? node.url,
    apiKey: opts.url ? node.apiKey : (p?.apiKey ?? node.apiKey),
    timeoutMs: node.timeoutMs,
    retries: opts.retries ?? node.retries,
    // The read-ahead, plus a head poll (two requests without getnodeinfo): a request never waits
    // for a connection after taking its rate slot, so slots and departures coincide.
    connections: node.concurrency + 2,
    maxRps: p?.maxRps ?? node.maxRps,
    grpc: opts.url ? undefined : p?.grpc,
    grpcFull: opts.url ? undefined : p?.grpcFull,
    name: opts.url ? undefined : p?.name,
    logger,
  });
}

export class NodeClient {
  readonly url: string;
  /** This provider's name in logs, metrics and health (NodeClientOptions.name). */
  readonly name: string;
  private readonly grpc: GrpcBlockClient | undefined;
  /** The full node's gRPC service (protocol.Wallet): its own address, or `grpc`'s. */
  private readonly grpcFull: GrpcBlockClient | undefined;
  /**
   * A run of 403 refusals: when the first came, and until when the last one asked us to wait
   * (performance.now() ms); a 403 to a request sent after that wait makes the provider unhealthy
   * (`suspendedSince`, epoch ms) until a request goes through.
   */
  private forbidden: { until: number; reason: string } | undefined;
  private suspendedSince: number | undefined;
  private readonly agent: Agent;
  private readonly headers: Record<string, string>;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly logger: Logger | undefined;
  /** Highest solidified head observed; blocks above it are never requested. */
  private solidifiedSeen = -1;
  /** Highest full-node head observed (heads, and blocks read from the full node's view). */
  private headSeen = -1;
  private readonly nodeInfoRetryMs: number;
  /**
   * performance.now() when `/wallet/getnodeinfo` last proved unusable on this node (the heads then
   * come from block headers until nodeInfoRetryMs later); null while it is used (see getHeads).
   */
  private nodeInfoUnusableAt: number | null = null;
  /** HTTP requests sent (every attempt and retry included): node_requests_total, the benches. */
  requestCount = 0;
  /** Requests answered 429 or 403 (each also in requestCount). */
  refusedCount = 0;
  /**
   * The HTTP `Date` header of the newest answer that had one (`serverMs`, epoch ms, whole seconds
   * as the header gives them) and this machine's clock when it arrived (`localMs`), with the
   * request's round trip (`rttMs`): the node's own clock, which `tronwatch doctor` compares with
   * ours (src/doctor/node.ts). Undefined until a node answers with a Date header.
   */
  serverDate: { serverMs: number; localMs: number; rttMs: number } | undefined;
  /** A slot of the maxRps window (resolves when one is free); undefined = no cap. */
  private readonly slot: (() => Promise<void>) | undefined;
  readonly maxRps: number;
  /** performance.now() until which no request is sent (a provider's Retry-After). */
  private pausedUntil = 0;
  /**
   * The current refusal episode (performance.now() ms): its start, its last refusal, refusals so
   * far, and refusals since the last request that went through (the no-Retry-After backoff).
   */
  private refusals: { since: number; last: number; count: number; streak: number } | undefined;

  constructor(opts: NodeClientOptions) {
    this.url = opts.url.replace(/\/+$/, '');
    this.name = opts.name ?? originOf(this.url);
    this.grpc = opts.grpc ? new GrpcBlockClient(opts.grpc, opts.apiKey) : undefined;
    this.grpcFull =
      opts.grpc && opts.grpcFull ? new GrpcBlockClient(opts.grpcFull, opts.apiKey) : this.grpc;
    this.timeoutMs = opts.timeoutMs ?? 10_000;
    this.retries = opts.retries ?? 6;
    this.nodeInfoRetryMs = opts.nodeInfoRetryMs ?? 600_000;
    this.logger = opts.logger;
    this.maxRps = opts.maxRps ?? 0;
    this.slot =
      this.maxRps > 0
        ? pThrottle({ limit: this.maxRps, interval: 1000 + WINDOW_SLACK_MS, strict: true })(
            async () => {},
          )
        : undefined;
    this.agent = new Agent({
      connections: opts.connections ?? 8,
      keepAliveTimeout: 30_000,
      connect: { timeout: this.timeoutMs },
    });
    this.headers = { 'content-type': 'application/json', accept: 'application/json' };
    if (opts.apiKey) this.headers['TRON-PRO-API-KEY'] = opts.apiKey;
  }

  /** The highest solidified block number this client has seen (-1 before the first read). */
  get solidifiedHead(): number {
    return this.solidifiedSeen;
  }

  /**
   * The highest full-node head this client has seen (its heads, or a block read through
   * getFullNodeBlock), never below the solidified head seen; -1 before the first read.
   */
  get fullHead(): number {
    return Math.max(this.headSeen, this.solidifiedSeen);
  }

  /**
   * Wait until a request may leave: past any provider pause, then a free slot of the maxRps
   * window (again if a pause began meanwhile).
   * @throws the signal's reason when `signal` aborts (the slot, if taken, goes unused).
   */
  private async gate(signal?: AbortSignal): Promise<void> {
    for (;;) {
      const pause = this.pausedUntil - performance.now();
      if (pause > 0) await sleep(pause, signal);
      signal?.throwIfAborted();
      if (this.slot) {
        const slot = this.slot();
        if (signal) {
          await new Promise<void>((resolve, reject) => {
            const abort = () => reject(signal.reason);
            signal.addEventListener('abort', abort, { once: true });
            slot.then(
              () => {
                signal.removeEventListener('abort', abort);
                resolve();
              },
              () => {},
            );
          });
        } else await slot;
      }
      if (performance.now() >= this.pausedUntil) return;
    }
  }

  /**
   * A 429/403: pause every request until the provider's Retry-After (see the module doc), log
   * the episode's first refusal.
   * @returns the pause, ms.
   */
  private refused(
    path: string,
    status: number,
    retryAfter: string | string[] | undefined,
    sentAt: number,
  ) {
    this.refusedCount++;
    const now = performance.now();
    const episode = this.refusals ?? { since: now, last: now, count: 0, streak: 0 };
    episode.count++;
    episode.streak++;
    episode.last = now;
    this.refusals = episode;
    const asked = parseRetryAfter(retryAfter);
    const pauseMs = Math.min(
      MAX_PAUSE_MS,
      Math.max(
        1000,
        asked ?? Math.min(REFUSAL_CAP_MS, REFUSAL_BASE_MS * 2 ** Math.min(16, episode.streak - 1)),
      ),
    );
    this.pausedUntil = Math.max(this.pausedUntil, performance.now() + pauseMs);
    if (status === 403) {
      // Sent after the previous 403's pause was over, and refused again: the suspension outlasts
      // what the provider asked for (a revoked key, a ban, a firewall), not a rate limit.
      if (this.forbidden && sentAt >= this.forbidden.until && this.suspendedSince === undefined) {
        this.suspendedSince = Date.now();
        this.logger?.error(
          { provider: this.name, path, status },
          'node: the provider still refuses (403) after the pause it asked for; marked unhealthy until it accepts a request',
        );
      }
      this.forbidden = { until: performance.now() + pauseMs, reason: `HTTP 403 on ${path}` };
    }
    if (episode.count === 1) {
      this.logger?.warn(
        {
          path,
          status,
          retry_after: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
          pause_ms: pauseMs,
          max_rps: this.maxRps,
        },
        'node: the provider refuses requests (rate limit); pausing every node request as it asks',
      );
    }
    return pauseMs;
  }

  /** POST once (after the gate); classify every failure. */
  private async postOnce(path: string, body: unknown, signal?: AbortSignal): Promise<unknown> {
    await this.gate(signal);
    this.requestCount++;
    const sentAt = performance.now();
    const timeout = AbortSignal.timeout(this.timeoutMs);
    const sig = signal ? AbortSignal.any([signal, timeout]) : timeout;
    let status: number;
    let text: string;
    let retryAfter: string | string[] | undefined;
    try {
      const res = await request(`${this.url}${path}`, {
        method: 'POST',
        headers: this.headers,
        body: JSON.stringify(body),
        dispatcher: this.agent,
        signal: sig,
      });
      status = res.statusCode;
      retryAfter = res.headers['retry-after'];
      const date = res.headers.date;
      const serverMs = typeof date === 'string' ? Date.parse(date) : Number.NaN;
      if (!Number.isNaN(serverMs)) {
        this.serverDate = {
          serverMs,
          localMs: Date.now(),
          rttMs: Math.round(performance.now() - sentAt),
        };
      }
      text = await res.body.text();
    } catch (err) {
      if (timeout.aborted) {
        throw new NodeError('timeout', `${path}: no answer within ${this.timeoutMs} ms`, true);
      }
      if (signal?.aborted) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      throw new NodeError('network', `${path}: ${msg}`, true);
    }
    if (status === 429 || status === 403) {
      const pauseMs = this.refused(path, status, retryAfter, sentAt);
      throw new NodeError(
        'rate_limited',
        `${path}: HTTP ${status} (rate limited; paused ${pauseMs} ms): ${text.slice(0, 120)}`,
        true,
        status,
      );
    }
    this.accepted();
    if (this.refusals) this.refusals.streak = 0;
    if (this.refusals && performance.now() - this.refusals.last >= EPISODE_QUIET_MS) {
      this.logger?.info(
        {
          refusals: this.refusals.count,
          duration_ms: Math.round(performance.now() - this.refusals.since),
        },
        'node: the provider accepts requests again (no refusal for a minute)',
      );
      this.refusals = undefined;
    }
    if (status >= 500) {
      throw new NodeError('http', `${path}: HTTP ${status}`, true, status);
    }
    if (status < 200 || status >= 300) {
      throw new NodeError('http', `${path}: HTTP ${status}: ${text.slice(0, 200)}`, false, status);
    }
    let json: unknown;
    try {
      json = parseNodeJson(text);
    } catch {
      throw new NodeError('malformed', `${path}: answer is not JSON: ${text.slice(0, 120)}`, false);
    }
    if (json && typeof json === 'object' && !Array.isArray(json) && 'Error' in json) {
      const e = (json as { Error: unknown }).Error;
      throw new NodeError('node_error', `${path}: node error: ${String(e)}`, false);
    }
    return json;
  }

  /** A request went through: a 403 suspension, if any, is over. */
  private accepted(): void {
    this.forbidden = undefined;
    if (this.suspendedSince !== undefined) {
      this.logger?.info({ provider: this.name }, 'node: the provider accepts requests again');
      this.suspendedSince = undefined;
    }
  }

  /**
   * Healthy unless the provider's 403s outlast the pauses they asked for (a 403 to a request
   * sent after the previous 403's Retry-After was over); healthy again at its first accepted
   * request. A 429, or a 403 honoured by a pause, is a rate limit, not ill health.
   */
  health(): ProviderHealth {
    if (this.suspendedSince === undefined) return { healthy: true };
    return {
      healthy: false,
      reason: `${this.forbidden?.reason ?? 'HTTP 403'} outlasting its Retry-After`,
      since: this.suspendedSince,
    };
  }

  /** Retry options shared by every call: the client's retries, the caller's signal, a log line. */
  private retryOpts(what: Record<string, unknown>, signal?: AbortSignal) {
    return {
      retries: this.retries,
      ...(signal ? { signal } : {}),
      onRetry: (err: unknown, attempt: number, delay: number) =>
        // A refusal is logged once per episode (refused); its retries only at debug level.
        this.logger?.[err instanceof NodeError && err.kind === 'rate_limited' ? 'debug' : 'warn'](
          {
            ...what,
            attempt,
            delay_ms: delay,
            err: err instanceof Error ? err.message : String(err),
          },
          'node request failed, retrying',
        ),
    };
  }

  private noteSolidified(n: number) {
    if (n > this.solidifiedSeen) this.solidifiedSeen = n;
  }

  private noteHead(n: number) {
    if (n > this.headSeen) this.headSeen = n;
  }

  /**
   * The solidified head's header via `/walletsolidity/getblock {"detail":false}`.
   * @throws NodeError (retryable: network, timeout, 5xx, empty answer).
   */
  async getSolidifiedHead(signal?: AbortSignal): Promise<BlockRef> {
    const json = await withRetry(
      async () => {
        const j = (await this.postOnce(
          '/walletsolidity/getblock',
          { detail: false },
          signal,
        )) as BlockJson;
        if (!j || typeof j !== 'object' || !j.block_header) {
          throw new NodeError('empty', '/walletsolidity/getblock: empty answer', true);
        }
        return j;
      },
      this.retryOpts({ path: '/walletsolidity/getblock' }, signal),
    );
    const ref = blockRef(json);
    this.noteSolidified(ref.number);
    return ref;
  }

  /**
   * Both heads: via `/wallet/getnodeinfo` (one request), or, while that endpoint has proved not
   * served on this node (nodeInfoUnusable: providers that disable it), via the newest block
   * headers of both views (two requests, in parallel). Switching is logged. Every
   * nodeInfoRetryMs in that mode, one poll asks getnodeinfo once more (a single attempt; any
   * failure keeps the block headers for another period), so a node that serves it again is back
   * to one request per poll. Transient failures (network, timeout, 403, 429, 5xx) never switch.
   * @throws NodeError as the endpoint read last.
   */
  async getHeads(signal?: AbortSignal): Promise<ChainHeads> {
    const since = this.nodeInfoUnusableAt;
    if (since === null) {
      try {
        return await this.headsFromNodeInfo(this.retries, signal);
      } catch (err) {
        if (!(err instanceof NodeError) || !nodeInfoUnusable(err)) throw err;
        this.nodeInfoUnusableAt = performance.now();
        this.logger?.warn(
          { err: err.message, retry_in_ms: this.nodeInfoRetryMs },
          'node: /wallet/getnodeinfo is not usable here; reading the heads from /wallet/getblock and /walletsolidity/getblock (two requests per poll)',
        );
      }
    } else if (performance.now() - since >= this.nodeInfoRetryMs) {
      try {
        const heads = await this.headsFromNodeInfo(0, signal);
        this.nodeInfoUnusableAt = null;
        this.logger?.info('node: /wallet/getnodeinfo answers again; one request per poll');
        return heads;
      } catch (err) {
        if (signal?.aborted) throw err;
        this.nodeInfoUnusableAt = performance.now();
        this.logger?.debug(
          { err: err instanceof Error ? err.message : String(err) },
          'node: /wallet/getnodeinfo still not usable',
        );
      }
    }
    const [head, solidified] = await Promise.all([
      this.newestFullNodeBlock(signal),
      this.getSolidifiedHead(signal),
    ]);
    // Behind a load balancer the two answers may come from nodes that lag each other.
    this.noteHead(head.number);
    return { head: Math.max(head.number, solidified.number), solidified: solidified.number };
  }

  /**
   * Both heads from `/wallet/getnodeinfo`, with `retries` retries of transient failures.
   * @throws NodeError('empty') without them.
   */
  private async headsFromNodeInfo(retries: number, signal?: AbortSignal): Promise<ChainHeads> {
    const heads = await withRetry(
      async () => {
        const info = (await this.postOnce('/wallet/getnodeinfo', {}, signal)) as Record<
          string,
          unknown
        >;
        const head = HEAD_RE.exec(String(info?.block ?? ''));
        const solid = HEAD_RE.exec(String(info?.solidityBlock ?? ''));
        if (!head?.[1] || !solid?.[1]) {
          throw new NodeError(
            'empty',
            '/wallet/getnodeinfo: no block/solidityBlock in the answer',
            true,
          );
        }
        return { head: Number(head[1]), solidified: Number(solid[1]) };
      },
      { ...this.retryOpts({ path: '/wallet/getnodeinfo' }, signal), retries },
    );
    this.noteSolidified(heads.solidified);
    this.noteHead(heads.head);
    return heads;
  }

  /** The full node's newest block header (`/wallet/getblock {"detail":false}`): NOT solidified. */
  private async newestFullNodeBlock(signal?: AbortSignal): Promise<BlockRef> {
    const json = await withRetry(
      async () => {
        const j = (await this.postOnce('/wallet/getblock', { detail: false }, signal)) as BlockJson;
        if (!j || typeof j !== 'object' || !j.block_header) {
          throw new NodeError('empty', '/wallet/getblock: empty answer', true);
        }
        return j;
      },
      this.retryOpts({ path: '/wallet/getblock' }, signal),
    );
    return blockRef(json);
  }

  /**
   * The header of solidified block `n` (`/walletsolidity/getblock {"id_or_num": "n", "detail":
   * false}`: no transactions, cheap even for a full mainnet block), for checks that compare a
   * block's id with a known one (`tronwatch doctor`: the genesis block, recorded checkpoints).
   * Fields java-tron omits at their default (block 0's number and timestamp) read as 0.
   * @returns undefined when the node answers `{}` (it does not hold that block).
   * @throws NodeError('beyond_solidified') for n above the solidified head seen (invariant 1);
   *   NodeError('malformed') when it answers another block; as the request otherwise.
   */
  async getSolidifiedHeader(n: number, signal?: AbortSignal): Promise<BlockRef | undefined> {
    if (n > this.solidifiedSeen) {
      throw new NodeError(
        'beyond_solidified',
        `block ${n} is above the solidified head ${this.solidifiedSeen}; refusing to read it`,
        false,
      );
    }
    const j = await withRetry(
      async () =>
        (await this.postOnce(
          '/walletsolidity/getblock',
          { id_or_num: String(n), detail: false },
          signal,
        )) as BlockJson,
      this.retryOpts({ block_number: n, path: '/walletsolidity/getblock' }, signal),
    );
    if (!j || typeof j !== 'object' || typeof j.blockID !== 'string') return undefined;
    const raw = j.block_header?.raw_data;
    const ref = {
      number: Number(raw?.number ?? 0),
      id: j.blockID,
      timestamp: Number(raw?.timestamp ?? 0),
    };
    if (ref.number !== n) {
      throw new NodeError('malformed', `getblock ${n}: node returned block ${ref.number}`, false);
    }
    return ref;
  }

  /**
   * Solidified block `n` with its transaction infos. With gRPC (NodeClientOptions.grpc) the block
   * is read once, as exact bytes (`GetBlockByNum2`), and decoded (tron/exact-block.ts); without,
   * as JSON (`/walletsolidity/getblockbynum`). The infos request is skipped for a block without
   * transactions: one or two requests per block. Empty or partial answers are retried (see
   * module doc).
   * @throws NodeError('beyond_solidified') when n is above the observed solidified head;
   *   NodeError('malformed') when the node returns another block or bytes that are not a block.
   */
  async getSolidifiedBlock(n: number, signal?: AbortSignal): Promise<SolidifiedBlock> {
    if (n > this.solidifiedSeen) {
      throw new NodeError(
        'beyond_solidified',
        `block ${n} is above the solidified head ${this.solidifiedSeen}; refusing to read it`,
        false,
      );
    }
    if (this.grpc) {
      const d = await this.readExact(n, false, signal);
      if (!d) throw new NodeError('empty', `gRPC GetBlockByNum2 ${n}: no block`, true);
      return this.withInfos(n, d.block, signal, d.exact);
    }
    const block = await withRetry(
      async () => {
        const b = (await this.postOnce(
          '/walletsolidity/getblockbynum',
          { num: n },
          signal,
        )) as BlockJson;
        if (!b || typeof b !== 'object' || !b.block_header) {
          throw new NodeError(
            'empty',
            `getblockbynum ${n}: empty answer for a solidified block`,
            true,
          );
        }
        return b;
      },
      this.retryOpts({ block_number: n, path: '/walletsolidity/getblockbynum' }, signal),
    );
    return this.withInfos(n, block, signal);
  }

  /**
   * The block number of transaction `txId` as the full node sees it (`/wallet/gettransactioninfobyid
   * {"value": txId}`): the block it was packed into, solidified or not. The node answers `{}` for a
   * transaction it does not know (not on chain, not yet in a block, or pruned): undefined then.
   * Nothing here is trusted beyond locating the block: the block itself is read, verified and
   * extracted as ingest reads it (src/ingest/explain.ts).
   * @param txId 64 hex characters.
   * @throws NodeError as any request (transient failures retried); 'malformed' for an answer
   *   without a block number.
   */
  async getTransactionBlock(txId: string, signal?: AbortSignal): Promise<number | undefined> {
    const path = '/wallet/gettransactioninfobyid';
    const info = await this.getTransactionInfo(txId, signal);
    if (!info) return undefined;
    const n = info.blockNumber;
    if (n === undefined || !Number.isSafeInteger(Number(n)) || Number(n) < 0) {
      throw new NodeError('malformed', `${path}: answer without a block number`, false);
    }
    return Number(n);
  }

  /**
   * Transaction `txId`'s receipt as the full node has it (`/wallet/gettransactioninfobyid
   * {"value": txId}`; java-tron `Wallet.getTransactionInfoById`): its block number and time, its
   * `receipt.result` and its logs. One request (transient failures retried). Nothing in it is
   * checked here: src/tron/receipt-confirm.ts compares it with what ingest stored.
   * @param txId 64 hex characters.
   * @returns undefined when the node answers `{}` (it does not know the transaction: not on chain,
   *   not in a block yet, or pruned).
   * @throws NodeError as any request; 'malformed' for an answer that is not a JSON object.
   */
  async getTransactionInfo(
    txId: string,
    signal?: AbortSignal,
  ): Promise<TransactionInfoJson | undefined> {
    const path = '/wallet/gettransactioninfobyid';
    const info = await withRetry(
      async () => (await this.postOnce(path, { value: txId }, signal)) as TransactionInfoJson,
      this.retryOpts({ path }, signal),
    );
    if (info === null || info === undefined) return undefined;
    if (typeof info !== 'object' || Array.isArray(info)) {
      throw new NodeError('malformed', `${path}: the answer is not a JSON object`, false);
    }
    return Object.keys(info).length === 0 ? undefined : info;
  }

  /**
   * Block `n` if the node has solidified it, asked of `/walletsolidity/getblockbynum` itself
   * instead of polling the heads first (one request when it is not there yet, none spent on a
   * head poll when it is). Only the block right after the highest solidified head seen may be
   * asked so (at or below it, this is getSolidifiedBlock): the solidity endpoint answers `{}`
   * above the node's solidified head, so nothing unsolidified can come back (invariant 1), and
   * the caller never skips one. A block that comes back raises the solidified head seen to n.
   * @returns undefined when the node answers `{}`: not solidified yet, not an error.
   * @throws NodeError('beyond_solidified') for n above the solidified head seen + 1; as
   *   getSolidifiedBlock otherwise (transient failures are retried, `{}` is not).
   */
  async getBlockIfSolidified(
    n: number,
    signal?: AbortSignal,
  ): Promise<SolidifiedBlock | undefined> {
    if (n <= this.solidifiedSeen) return this.getSolidifiedBlock(n, signal);
    if (n !== this.solidifiedSeen + 1) {
      throw new NodeError(
        'beyond_solidified',
        `block ${n} is more than one above the solidified head ${this.solidifiedSeen}; refusing to ask for it`,
        false,
      );
    }
    if (this.grpc) {
      // The solidity service answers an empty BlockExtention above its solidified head.
      const d = await this.readExact(n, true, signal);
      if (!d) return undefined;
      if (blockRef(d.block).number === n) this.noteSolidified(n);
      return this.withInfos(n, d.block, signal, d.exact);
    }
    const block = await withRetry(
      async () =>
        (await this.postOnce('/walletsolidity/getblockbynum', { num: n }, signal)) as BlockJson,
      this.retryOpts({ block_number: n, path: '/walletsolidity/getblockbynum' }, signal),
    );
    if (!block || typeof block !== 'object' || !block.block_header) return undefined;
    // Solidified from now on (the infos' retries then read it as such), unless another block came.
    if (blockRef(block).number === n) this.noteSolidified(n);
    return this.withInfos(n, block, signal);
  }

  /**
   * Block `n` as the full node has it, solidified or not (`/wallet/getblockbynum`, or gRPC
   * `protocol.Wallet/GetBlockByNum2` with exact bytes), with its transaction infos
   * (`/wallet/gettransactioninfobyblocknum`, only when it has transactions): one or two requests.
   * For the light client's finality gate only (ingest/finality-gate.ts): nothing read here is
   * final on the node's word, the gate proves it from the SRs' signatures, and a block of a
   * branch the node left is read again from the branch it follows (fork following by parent
   * hash, in the gate). A block that comes back raises the full-node head seen to n. Receipts
   * dated otherwise than the block (the node switched branches between the two reads) make it
   * read both once more: a replaced block's receipts are the new block's.
   * @param emptyOk the node answering `{}` (no block n yet) returns undefined (caught up: asked
   *   for the next block directly); otherwise it is retried as a transient fault ('empty').
   * @throws NodeError('malformed') when the node returns another block; as any request.
   */
  async getFullNodeBlock(
    n: number,
    emptyOk: boolean,
    signal?: AbortSignal,
  ): Promise<SolidifiedBlock | undefined> {
    const b = await this.readFullNodeBlock(n, emptyOk, signal);
    if (!b || b.infos.every((i) => Number(i.blockTimeStamp) === b.ref.timestamp)) return b;
    // Receipts of another block at n: the node switched branches between the two reads (a
    // fork at its head). Read both again, once; receipts that still do not match are the
    // node's answer, and verification refuses them.
    this.logger?.debug({ block_number: n }, 'node: receipts of another branch; reading again');
    return this.readFullNodeBlock(n, emptyOk, signal);
  }

  /** getFullNodeBlock's one read: the block, then its receipts. */
  private async readFullNodeBlock(
    n: number,
    emptyOk: boolean,
    signal?: AbortSignal,
  ): Promise<SolidifiedBlock | undefined> {
    const infosPath = '/wallet/gettransactioninfobyblocknum';
    if (this.grpc) {
      const d = await this.readExact(n, emptyOk, signal, undefined, GET_FULL_BLOCK_BY_NUM2);
      if (!d) return undefined;
      if (blockRef(d.block).number === n) this.noteHead(n);
      return this.withInfos(n, d.block, signal, d.exact, infosPath);
    }
    const path = '/wallet/getblockbynum';
    const block = await withRetry(
      async () => {
        const b = (await this.postOnce(path, { num: n }, signal)) as BlockJson;
        if (!emptyOk && (!b || typeof b !== 'object' || !b.block_header)) {
          throw new NodeError('empty', `getblockbynum ${n}: empty answer below the head`, true);
        }
        return b;
      },
      this.retryOpts({ block_number: n, path }, signal),
    );
    if (!block || typeof block !== 'object' || !block.block_header) return undefined;
    if (blockRef(block).number === n) this.noteHead(n);
    return this.withInfos(n, block, signal, undefined, infosPath);
  }

  /**
   * Block `n` as answered, checked to be block n, with its transaction infos (requested only
   * when it has transactions).
   * @throws NodeError('malformed') when the node returned another block; as the infos request.
   */
  private async withInfos(
    n: number,
    block: BlockJson,
    signal?: AbortSignal,
    exact?: ExactBlock,
    infosPath = '/walletsolidity/gettransactioninfobyblocknum',
  ): Promise<SolidifiedBlock> {
    const ref = blockRef(block);
    if (ref.number !== n) {
      throw new NodeError(
        'malformed',
        `getblockbynum ${n}: node returned block ${ref.number}`,
        false,
      );
    }
    const txs = block.transactions ?? [];
    if (txs.length === 0)
      return exact ? { ref, block, infos: [], exact } : { ref, block, infos: [] };
    // The infos are retried on their own: a lagging node behind a load balancer must not cost
    // another download of the (large) block.
    const infos = await withRetry(
      async () => {
        const j = await this.postOnce(infosPath, { num: n }, signal);
        if (!Array.isArray(j) || j.length === 0) {
          throw new NodeError(
            'empty',
            `gettransactioninfobyblocknum ${n}: empty answer, ${txs.length} expected`,
            true,
          );
        }
        const list = j as TransactionInfoJson[];
        if (list.length !== txs.length) {
          throw new NodeError(
            'inconsistent',
            `gettransactioninfobyblocknum ${n}: ${list.length} infos for ${txs.length} transactions`,
            true,
          );
        }
        // Every transaction must have its info: same ids (in block order on java-tron).
        for (let i = 0; i < txs.length; i++) {
          if (list[i]?.id !== txs[i]?.txID) {
            const ids = new Set(list.map((x) => x.id));
            const missing = txs.find((t) => !ids.has(t.txID));
            if (missing) {
              throw new NodeError(
                'inconsistent',
                `gettransactioninfobyblocknum ${n}: no info for transaction ${missing.txID}`,
                true,
              );
            }
            break;
          }
        }
        return list;
      },
      this.retryOpts({ block_number: n, path: infosPath }, signal),
    );
    return exact ? { ref, block, infos, exact } : { ref, block, infos };
  }

  /**
   * Solidified block `n` as exact protobuf bytes over gRPC (`GetBlockByNum2`), through the same
   * rate slots and retries as HTTP requests (`tronwatch doctor`).
   * @throws NodeError: 'empty' (retryable) when the node answers no block for a solidified
   *   number, 'malformed' when the bytes are not a block, as GrpcBlockClient otherwise.
   */
  async getExactBlock(n: number, signal?: AbortSignal): Promise<ExactBlock> {
    const d = await this.readExact(n, false, signal);
    if (!d) throw new NodeError('empty', `gRPC GetBlockByNum2 ${n}: no block`, true);
    return d.exact;
  }

  /** Whether this client reads exact bytes (a gRPC address is configured: NodeClientOptions.grpc). */
  get servesExact(): boolean {
    return this.grpc !== undefined;
  }

  /**
   * Solidified block `n`'s gRPC `GetBlockByNum2` answer (a `BlockExtention`) exactly as the
   * provider sent it, checked to decode as block n (`tronwatch record` writes it as
   * `blockext-<n>.bin`). Same rate slots and retries as every request.
   * @returns the bytes, and the blockID they decode to (lower-case hex).
   * @throws NodeError: 'empty' (retried) when the node answers no block, 'malformed' for bytes
   *   that are not a block or are another block, as GrpcBlockClient otherwise.
   */
  async getExactBlockBytes(
    n: number,
    signal?: AbortSignal,
  ): Promise<{ bytes: Buffer; blockId: string }> {
    let kept: Buffer | undefined;
    const d = await this.readExact(n, false, signal, (b) => {
      kept = b;
    });
    if (!d || !kept) throw new NodeError('empty', `gRPC GetBlockByNum2 ${n}: no block`, true);
    const number = Number(d.block.block_header?.raw_data?.number ?? 0);
    if (number !== n) {
      throw new NodeError(
        'malformed',
        `gRPC GetBlockByNum2 ${n}: node returned block ${number}`,
        false,
      );
    }
    return { bytes: kept, blockId: String(d.block.blockID).toLowerCase() };
  }

  /**
   * Block `n` read once over gRPC and decoded (tron/exact-block.ts), through the rate slots and
   * retries of every request.
   * @param emptyOk an empty answer (no block) is `undefined` (a block asked for before it is
   *   solidified); otherwise it is retried as a transient fault ('empty').
   * @param onBytes called with each answer's bytes as received (before decoding).
   * @param method the gRPC method: the solidity service's (default) or the full node's
   *   (GET_FULL_BLOCK_BY_NUM2, getFullNodeBlock).
   * @throws NodeError: 'malformed' for bytes that are not a block, as GrpcBlockClient otherwise.
   */
  private async readExact(
    n: number,
    emptyOk: boolean,
    signal?: AbortSignal,
    onBytes?: (bytes: Buffer) => void,
    method: string = GET_BLOCK_BY_NUM2,
  ): Promise<DecodedBlock | undefined> {
    const grpc = method === GET_FULL_BLOCK_BY_NUM2 ? this.grpcFull : this.grpc;
    if (!grpc) throw new NodeError('malformed', `${this.name}: no gRPC address configured`, false);
    return withRetry(
      async () => {
        await this.gate(signal);
        this.requestCount++;
        const bytes = await grpc.getBlockByNum2(n, this.timeoutMs, signal, method);
        onBytes?.(bytes);
        let d: DecodedBlock | undefined;
        try {
          d = decodeBlockExtention(bytes);
        } catch (err) {
          if (!(err instanceof PbDecodeError)) throw err;
          throw new NodeError('malformed', `gRPC GetBlockByNum2 ${n}: ${err.message}`, false);
        }
        if (!d && !emptyOk) {
          throw new NodeError(
            'empty',
            `gRPC GetBlockByNum2 ${n}: no block for a solidified number`,
            true,
          );
        }
        return d;
      },
      this.retryOpts({ block_number: n, path: `grpc ${method.slice(1)}` }, signal),
    );
  }

  /** Close the keep-alive connections (HTTP and gRPC). */
  async close(): Promise<void> {
    this.grpc?.close();
    if (this.grpcFull !== this.grpc) this.grpcFull?.close();
    await this.agent.close();
  }
}
