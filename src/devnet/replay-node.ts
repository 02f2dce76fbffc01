/**
 * Replay node: serves a recorded (or generated) chain as a java-tron-compatible HTTP API and
 * reveals it over time like a real node (DESIGN §Replaying recorded chains), so the demo, the
 * tests and the benchmarks can register watches first and then watch recorded blocks be produced
 * and solidified, exactly as on mainnet.
 *
 * Source: a `BlockSource`. `dirSource(dir)` reads the `chain/` layout: `block-<n>.json` (the
 * node's `/walletsolidity/getblockbynum` answer, visible=false) and `txinfo-<n>.json` (its
 * `/walletsolidity/gettransactioninfobyblocknum` answer), lazily, a few blocks cached. Recorded
 * bytes are served verbatim, never re-serialised: clients see the node's exact JSON, integers
 * above 2^53 included.
 *
 * Filler: any block number that the source does not hold (below, inside gaps of, or above the
 * recorded range) is an empty block in java-tron's shape (no `transactions` key) that passes
 * tron/verify.ts like a real one:
 * - blockID = 8-byte big-endian number ‖ bytes 8–31 of SHA-256 of its encoded header, as
 *   java-tron computes it; txTrieRoot = 32 zero bytes (no transactions);
 * - parentHash chained: the blockID of the block before, recorded or filler. Fillers are chained
 *   from `fillerBase` (64 blocks below where the timeline starts; a filler below it has a seeded
 *   parent: the chain's checkpoint). A recorded block that follows fillers names its REAL parent,
 *   which no filler can hash to: a reader must start at the first recorded block (a checkpoint:
 *   the first block committed has no parent to check; INGEST_START_BLOCK), and a recorded folder
 *   must be contiguous from there;
 * - timestamp = the nearest preceding recorded block's moved on by one 3 s slot per block (or the
 *   first recorded block's moved back, below the range), skipping the slots of the one SR whose
 *   key is not here (below; `fillerTime`), ms since epoch;
 * - transaction infos `[]`.
 *
 * Signatures (issue 28, "the devnet signs"): every chained filler is produced, as on mainnet, by
 * the SR its time schedules, `srs[(t/3000) mod 27]` (java-tron `DposSlot`; the devnet never
 * reaches a maintenance, DEVNET_MAINTENANCE_INTERVAL_MS, so no slot is skipped for one), and
 * carries that SR's secp256k1 signature over its header (witness-signature.ts), made once and
 * kept with its id. The set (`node.srs`, ReplaySchedule): DEVNET_SRS when the source is a
 * synthetic chain (its blocks are signed by them), NILE_DEVNET_SRS when its first block is signed
 * by one of those (a Nile-shaped synthetic chain, issue 32); around a recorded mainnet block (the first
 * recorded block not made by the devnet, recorded fillers before it skipped), `devnetSrsAround`:
 * that block's real SR in the slot its time schedules, signing with its own address. The
 * recorded block keeps its real signature; the real SR's other slots are MISSED (no key here), so
 * the fillers skip them and their times are not simply 3 s apart. A light client proves the chain
 * from `replayCheckpoint(source)` (also `node.checkpoint`, and the CLI's `--checkpoint-out`): the
 * block before the first recorded one, with this set. Fillers below fillerBase and the lies
 * (another fork, forged blocks) are not signed by any SR: a liar has no SR keys.
 *
 * gRPC (`grpc: true`): java-tron's `protocol.WalletSolidity/GetBlockByNum2` on its own port
 * (`grpcUrl`), answering a solidified block as `BlockExtention` bytes: a source's recorded exact
 * bytes (`blockext-<n>.bin` in the folder) when it has them, else encoded from the block's JSON
 * (exact for fillers and synthetic blocks; a recorded block whose JSON hides bytes, such as an
 * unknown field in a `ret`, needs its `.bin`, or its root will not match); an empty answer above
 * the solidified head. The same port also serves the full node's `protocol.Wallet/GetBlockByNum2`
 * (up to the full-node head: what ingest reads above the solidified head with the light client
 * on). tron/verify.ts checks transaction roots from these bytes.
 *
 * Lying (`setLies`, tests of block verification and quorums): replace the answers for chosen
 * block numbers (a forged block, forged receipts), report wrong heads, or serve another fork from
 * a block on (empty blocks with their own valid ids, chained from the real block before, by
 * seeded producers outside the SR set with signatures of nothing). Lies apply to the HTTP answers
 * and to gRPC alike (a consistent liar).
 *
 * Timeline (block numbers, not wall time): the solidified head starts at
 * `first - startBefore - 1` and both heads advance one block per `intervalMs`, computed from the
 * elapsed time on a clock (a busy event loop delays answers, never the chain). The full-node head
 * is `solidified + lag`. `instant: true` solidifies the whole source at once (solidified = last);
 * `intervalMs: 0` pauses the chain; `advanceTo(n)` moves the solidified head by hand.
 *
 * Endpoints (POST with a JSON body, or GET with a query string; `visible` is ignored):
 * - `/wallet/getnodeinfo`, `/walletsolidity/getnodeinfo`: NodeInfo with
 *   `block: "Num:<head>,ID:<id>"` and `solidityBlock: "Num:<solidified>,ID:<id>"`.
 * - `/wallet(solidity)/getblock {id_or_num?, detail?}`: absent id_or_num = the view's newest
 *   block; `detail` false (the default) = without `transactions`.
 * - `/wallet(solidity)/getnowblock`: the view's newest block.
 * - `/wallet(solidity)/getblockbynum {num}`: `{}` above the view's head.
 * - `/wallet(solidity)/gettransactioninfobyblocknum {num}`: `[]` above the view's head.
 * - `/wallet(solidity)/gettransactioninfobyid {value}`: the transaction's info (its block's entry,
 *   or `{id, blockNumber, blockTimeStamp}` when the block's infos lack it), `{}` when no recorded
 *   block up to the view's head holds it. The id index is built on the first such request from the
 *   source's first TX_INDEX_MAX_BLOCKS blocks.
 * - `/wallet/listwitnesses`, `/wallet/getaccount {address}`, `/wallet/getnextmaintenancetime`,
 *   `/wallet/getchainparameters`: the devnet set (sr-answers.ts: `isJobs`, `witness_permission`),
 *   its next maintenance time and its maintenance interval; with `srAnswers`, also SRs voted in
 *   at a maintenance and the next maintenance time after it; `ReplayLies.srAnswers` lies about
 *   them (another key, an SR not listed, another next maintenance time).
 * - `/wallet/getblockbylimitnext {startNum, endNum}`: `{"block": [...]}`, blocks startNum up to
 *   endNum (exclusive, at most 100) and the full-node head; `{}` otherwise. With the three above,
 *   `tronwatch checkpoint` run against this node builds the checkpoint its chain implies (same
 *   SRs, order, keys and next maintenance time) once its 40-block window starts at or above the
 *   first recorded block.
 * The solidity view (`/walletsolidity/…`) ends at the solidified head, the full-node view
 * (`/wallet/…`) at the full-node head. Malformed parameters: HTTP 200 `{"Error": "…"}` as
 * java-tron answers; unknown path (or one of `disabledPaths`): 404.
 *
 * Fault injection (tests of client resilience): `faults` apply to getblockbynum and
 * gettransactioninfobyblocknum answers for blocks at or below the solidified head, drawn from a
 * seeded PRNG (deterministic for a given request order).
 *
 * Scripted rate limit (tests of client pacing, `rateLimit`): a provider's per-key limit over every
 * path, as a sliding window of one second: a request is admitted while fewer than `perSecond`
 * were admitted in the last 1,000 ms, otherwise refused with 429 (or 403) and `Retry-After`; with
 * `penaltyMs`, a refusal also refuses everything for that long (a provider that suspends a key
 * after a burst). `logRequests` keeps every request's arrival time, path, block number and status
 * (`requestLog`), so tests count requests in windows from the node's own log.
 */
import { createHash } from 'node:crypto';
import { readdirSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { cpus, freemem, totalmem } from 'node:os';
import { join } from 'node:path';
import {
  Server as GrpcServer,
  status as grpcStatus,
  ServerCredentials,
  type ServiceError,
} from '@grpc/grpc-js';
import { stringify as losslessStringify } from 'lossless-json';
import { createLogger, type Logger } from '../common/logger.js';
import { GET_BLOCK_BY_NUM2, GET_FULL_BLOCK_BY_NUM2 } from '../tron/grpc.js';
import { parseNodeJson } from '../tron/json.js';
import {
  ACTIVE_SR_COUNT,
  type Checkpoint,
  CheckpointError,
  parseCheckpoint,
  SLOT_MS,
  type SrEntry,
} from '../tron/light-client/sr-set.js';
import { signWitnessHeader } from '../tron/light-client/witness-signature.js';
import { PbWriter, pbFields, pbVarint } from '../tron/protobuf.js';
import { syntheticId } from '../tron/replay-ids.js';
import type { BlockJson, TransactionInfoJson, TransactionJson } from '../tron/types.js';
import { blockIdFromRaw, encodeHeaderRaw, encodeTransactionFromJson } from '../tron/verify.js';
import { chainParametersAnswer, getAccountAnswer, listWitnessesAnswer } from './sr-answers.js';
import {
  DEVNET_MAINTENANCE_INTERVAL_MS,
  DEVNET_SRS,
  type DevnetSr,
  devnetSrsAround,
  type HeaderFields,
  headerBlockId,
  headerRawBytes,
  NILE_DEVNET_SRS,
  type RecordedSr,
} from './synthetic.js';

// ---------------------------------------------------------------------------------------------
// Sources

/** One block as the node answers it: exact bytes of getblockbynum and of its transaction infos. */
export interface BlockEntry {
  block: Buffer;
  infos: Buffer;
  /** The gRPC `BlockExtention` bytes, when recorded (`blockext-<n>.bin`). */
  exact?: Buffer;
  /**
   * The block's JSON holds every byte of the block (a synthetic block, a filler, a fork, a lie),
   * so gRPC may encode its `BlockExtention` from it. Never for a recorded mainnet block's JSON,
   * which can hide bytes (module doc, gRPC): without its `exact`, gRPC answers NOT_FOUND.
   */
  exactFromJson?: boolean;
}

/**
 * Where recorded blocks come from. `first`/`last`: lowest and highest recorded block numbers.
 * `get(n)` resolves undefined for a number it does not hold (the replay node then serves filler).
 * `recorded` (optional): the held numbers, ascending, so a filler inside a gap finds its
 * neighbour without reading; without it, fillers inside gaps take their time from `first`.
 */
export interface BlockSource {
  first: number;
  last: number;
  get(n: number): Promise<BlockEntry | undefined>;
  recorded?: readonly number[];
}

const BLOCK_FILE = /^block-(0|[1-9]\d*)\.json$/;
const EMPTY_ARRAY = Buffer.from('[]');

/**
 * The `chain/` folder layout: `block-<n>.json` + `txinfo-<n>.json`, served verbatim, and
 * optionally `blockext-<n>.bin` (the gRPC GetBlockByNum2 answer's exact bytes). A missing txinfo
 * file is served as `[]`. Files are read on demand; the last `cacheSize` (default 16)
 * blocks stay in memory (a mainnet block is 0.3–3 MB).
 * @throws Error when the folder holds no block file.
 */
export function dirSource(dir: string, opts: { cacheSize?: number } = {}): BlockSource {
  const cacheSize = Math.max(1, opts.cacheSize ?? 16);
  const files = new Map<number, string>();
  for (const name of readdirSync(dir)) {
    const m = BLOCK_FILE.exec(name);
    if (m?.[1]) files.set(Number(m[1]), name);
  }
  const recorded = [...files.keys()].sort((a, b) => a - b);
  const first = recorded[0];
  const last = recorded[recorded.length - 1];
  if (first === undefined || last === undefined) {
    throw new Error(`${dir}: no block-<n>.json file to replay`);
  }
  const cache = new Map<number, Promise<BlockEntry>>();

  async function load(n: number, name: string): Promise<BlockEntry> {
    const block = await readFile(join(dir, name));
    let infos: Buffer;
    try {
      infos = await readFile(join(dir, `txinfo-${n}.json`));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      infos = EMPTY_ARRAY;
    }
    try {
      return { block, infos, exact: await readFile(join(dir, `blockext-${n}.bin`)) };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      return { block, infos };
    }
  }

  return {
    first,
    last,
    recorded,
    get(n: number): Promise<BlockEntry | undefined> {
      const name = files.get(n);
      if (name === undefined) return Promise.resolve(undefined);
      let p = cache.get(n);
      if (p) {
        cache.delete(n); // re-insert: Map order is the LRU order
      } else {
        p = load(n, name);
        p.catch(() => cache.delete(n)); // a failed read is retried on the next request
      }
      cache.set(n, p);
      if (cache.size > cacheSize) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
      return p;
    },
  };
}

/**
 * An in-memory source (tests). `infos` defaults to `[]`. Strings are stored as UTF-8 bytes.
 * `exactFromJson` (default true: synthetic blocks, whose JSON is complete) lets gRPC encode a
 * block without `exact` from its JSON; false for recorded mainnet JSON.
 * @throws Error when the map is empty.
 */
export function memorySource(
  map: ReadonlyMap<number, { block: Buffer | string; infos?: Buffer | string; exact?: Buffer }>,
  opts: { exactFromJson?: boolean } = {},
): BlockSource {
  const fromJson = opts.exactFromJson ?? true;
  const entries = new Map<number, BlockEntry>();
  for (const [n, e] of map) {
    entries.set(n, {
      block: Buffer.isBuffer(e.block) ? e.block : Buffer.from(e.block),
      infos:
        e.infos === undefined
          ? EMPTY_ARRAY
          : Buffer.isBuffer(e.infos)
            ? e.infos
            : Buffer.from(e.infos),
      ...(e.exact ? { exact: e.exact } : {}),
      ...(fromJson ? { exactFromJson: true } : {}),
    });
  }
  const recorded = [...entries.keys()].sort((a, b) => a - b);
  const first = recorded[0];
  const last = recorded[recorded.length - 1];
  if (first === undefined || last === undefined) throw new Error('memorySource: no block');
  return { first, last, recorded, get: async (n) => entries.get(n) };
}

// ---------------------------------------------------------------------------------------------
// Options and handle

/** Injected failures; rates are probabilities in [0, 1] per answer. */
export interface ReplayFaults {
  /** Answer `{}` (getblockbynum) or `[]` (txinfos) for a solidified block, a load-balancer quirk. */
  emptyRate?: number;
  /** Answer HTTP 503. */
  errorRate?: number;
  /** Answer HTTP 200 `{"Error": …}` (java-tron's error shape; clients do not retry it). */
  errorJsonRate?: number;
  /** Delay every such answer by this many ms. Default 0. */
  delayMs?: number;
  /** PRNG seed; the same seed and request order give the same faults. Default 1. */
  seed?: number;
}

export interface ReplayNodeOptions {
  source: BlockSource;
  /** One block per interval, ms. Default 3000 (mainnet). 0 = paused (see advanceTo). */
  intervalMs?: number;
  /** Full-node head minus solidified head, blocks. Default 18 (mainnet, ~54 s). */
  lag?: number;
  /**
   * The solidified head starts at `source.first - startBefore - 1` (not below 0), so the first
   * recorded block is solidified after startBefore + 1 intervals. Default lag + 10.
   */
  startBefore?: number;
  /** Stop the solidified head at `source.last` instead of producing filler after it. Default false. */
  stopAtEnd?: boolean;
  /** Solidify the whole source at once (solidified = last, head = last + lag), paused. Default false. */
  instant?: boolean;
  /** TCP port; 0 (default) = a free one. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  faults?: ReplayFaults;
  /**
   * Paths answered 404 as if this node did not serve them (e.g. `/wallet/getnodeinfo`, which
   * some providers disable). Default none.
   */
  disabledPaths?: string[];
  /** Clock of the timeline, ms (monotonic). Default performance.now(). */
  now?: () => number;
  /** A provider's rate limit over every path (see the module doc). Default none. */
  rateLimit?: ReplayRateLimit;
  /** Keep every request in `requestLog` (tests; grows without bound). Default false. */
  logRequests?: boolean;
  /** Also serve gRPC GetBlockByNum2 on a free port of `host` (`grpcUrl`). Default false. */
  grpc?: boolean;
  /** The gRPC port (a node restarted where it was); 0 or absent = a free one. */
  grpcPort?: number;
  /** Lies told from the start (see setLies). Default none. */
  lies?: ReplayLies;
  /**
   * What `/wallet/listwitnesses`, `/wallet/getaccount` and `/wallet/getnextmaintenancetime` say
   * besides the devnet set (a chain past a maintenance, as sr-node.ts serves it). Default: the
   * devnet set alone, at its own next maintenance time.
   */
  srAnswers?: ReplaySrAnswers;
}

/** The SR answers of a chain past a maintenance (ReplayNodeOptions.srAnswers). */
export interface ReplaySrAnswers {
  /**
   * SRs voted in at a maintenance (the newcomers): listed as active (`isJobs`) beside the devnet
   * set, and answered by `/wallet/getaccount` with their signing keys.
   */
  accounts?: readonly SrEntry[];
  /** `/wallet/getnextmaintenancetime`, ms: the end of the epoch the node is in. */
  nextMaintenanceTime?: number;
}

/** What a lying node says instead of the truth (tests of verification and quorums). */
export interface ReplayLies {
  /**
   * Answers replaced for these block numbers: the getblockbynum JSON (also what getblock
   * answers, and what gRPC encodes) and/or the gettransactioninfobyblocknum JSON.
   */
  blocks?: ReadonlyMap<number, { block?: Buffer | string; infos?: Buffer | string }>;
  /** The heads reported (getnodeinfo, getblock/getnowblock of each view), from the real ones. */
  heads?: (real: { solidified: number; head: number }) => { solidified: number; head: number };
  /**
   * Another fork from this block on: empty blocks with valid ids of their own, the first naming
   * the real block before it as its parent.
   */
  forkFrom?: number;
  /**
   * Serve blocks this many above the solidified head from the solidity endpoints
   * (getblockbynum, gettransactioninfobyblocknum, gRPC) while the heads tell the truth: a
   * provider (or a proxy) that serves blocks before they are final.
   */
  early?: number;
  /**
   * Lies about the SR set (issue 36 item 2: one provider of several outvoted at a maintenance):
   * `reportKey` gives the signing key `/wallet/getaccount` reports for an SR (undefined = the
   * truth), `hide` drops SRs from `/wallet/listwitnesses` (not witnesses, so not active),
   * `nextMaintenanceTime` replaces `/wallet/getnextmaintenancetime`'s answer, ms.
   */
  srAnswers?: {
    reportKey?: (address: string) => string | undefined;
    hide?: readonly string[];
    nextMaintenanceTime?: number;
  };
}

/**
 * A scripted provider limit: at most `perSecond` admitted requests in any sliding 1,000 ms
 * window (on the replay node's clock, at arrival); a request above it is refused, not counted.
 */
export interface ReplayRateLimit {
  /** Requests admitted per sliding second (>= 1). */
  perSecond: number;
  /** Status of a refusal: 429 (default) or 403 (a provider suspending the key). */
  status?: 429 | 403;
  /** `Retry-After` of a refusal, whole seconds; null = no header. Default 1. */
  retryAfterSeconds?: number | null;
  /** After a refusal, refuse every request for this long, ms (Retry-After then says the rest). Default 0. */
  penaltyMs?: number;
  /**
   * Refuse every request, whatever the rate, with `status` and `retryAfterSeconds` (a revoked key,
   * a ban: a 403 that outlasts the pause it asks for). Default false.
   */
  refuseAll?: boolean;
}

/** One request as the node saw it (`logRequests`). */
export interface ReplayRequestRecord {
  /** Arrival, ms on the node's clock (performance.now() by default). */
  at: number;
  path: string;
  /** `num` of a getblockbynum / gettransactioninfobyblocknum request, when it was a number. */
  num?: number;
  /** HTTP status answered. */
  status: number;
}

export interface ReplayStats {
  /** HTTP requests answered, in total and per path (unknown paths included). */
  requests: { total: number; byPath: Record<string, number> };
  /** Faults injected, by kind; `delayed` counts delayed answers. */
  faults: { empty: number; error: number; errorJson: number; delayed: number };
  /** Requests refused by the scripted rate limit. */
  rateLimited: number;
}

export interface ReplayNode {
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  port: number;
  /** Recorded range of the source. */
  first: number;
  last: number;
  /**
   * The checkpoint a light client proves this node's chain from (replayCheckpoint of the
   * source); undefined when the source's first block cannot anchor one (module doc, Signatures).
   */
  checkpoint: Checkpoint | undefined;
  /** The devnet SRs producing the fillers, in schedule order (`/wallet/listwitnesses`). */
  srs: SrEntry[];
  /** Current heads (block numbers). */
  heads(): { solidified: number; head: number };
  /** Set the solidified head to n; the timeline goes on from there at the same pace (if running). */
  advanceTo(n: number): void;
  /**
   * Stop the chain where it is (the heads stand still: a node that fell behind, or a halted
   * chain) until resume(); advanceTo meanwhile moves the heads by hand (a node releasing blocks).
   */
  pause(): void;
  /** Go on at the same pace from the current heads. */
  resume(): void;
  /**
   * When block n became (or will become) solidified on the current timeline: epoch ms with the
   * default clock, the injected clock's ms otherwise; the last jump's time for blocks at or below
   * it; undefined when the chain never reaches n (paused, or stopAtEnd).
   */
  solidifiedAt(n: number): number | undefined;
  /** Replace the injected faults (undefined = none); reseeds the PRNG. */
  setFaults(f: ReplayFaults | undefined): void;
  /** Replace the paths answered 404 (see ReplayNodeOptions.disabledPaths). */
  setDisabledPaths(paths: string[]): void;
  /** Replace the scripted rate limit (undefined = none); the window starts empty. */
  setRateLimit(l: ReplayRateLimit | undefined): void;
  /** Replace the lies told (undefined = tell the truth again). */
  setLies(l: ReplayLies | undefined): void;
  /** `grpc://host:port` of the gRPC service when started with `grpc: true`. */
  grpcUrl: string | undefined;
  /** Every request since start, in arrival order (empty unless `logRequests`). */
  requestLog: ReplayRequestRecord[];
  /** Live counters (mutated in place). */
  stats: ReplayStats;
  /** Stop listening, drop connections and pending delayed answers. */
  close(): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Constants

const ZERO_HASH = '0'.repeat(64);
/** Block version of current mainnet blocks (79072107 has 32), used when no neighbour says. */
const DEFAULT_BLOCK_VERSION = 32;
/** Bodies above this are refused (413): requests here are a few bytes. */
const MAX_BODY_BYTES = 1 << 20;
/** Parsed headers kept: ~0.5 kB each, enough for the heads and filler neighbours. */
const HEADER_CACHE = 4096;
/** Java's Long.MAX_VALUE: Long.parseLong refuses above it. */
const JAVA_LONG_MAX = 9223372036854775807n;

const JSON_HEADERS = { 'content-type': 'application/json' };

type View = 'solidity' | 'full';
type Op =
  | 'nodeinfo'
  | 'getblock'
  | 'nowblock'
  | 'blockbynum'
  | 'txinfos'
  | 'txinfobyid'
  | 'listwitnesses'
  | 'getaccount'
  | 'nextmaintenance'
  | 'chainparameters'
  | 'blocklimitnext';

const ROUTES = new Map<string, { view: View; op: Op }>([
  ['/wallet/getnodeinfo', { view: 'full', op: 'nodeinfo' }],
  ['/walletsolidity/getnodeinfo', { view: 'solidity', op: 'nodeinfo' }],
  ['/wallet/getblock', { view: 'full', op: 'getblock' }],
  ['/walletsolidity/getblock', { view: 'solidity', op: 'getblock' }],
  ['/wallet/getnowblock', { view: 'full', op: 'nowblock' }],
  ['/walletsolidity/getnowblock', { view: 'solidity', op: 'nowblock' }],
  ['/wallet/getblockbynum', { view: 'full', op: 'blockbynum' }],
  ['/walletsolidity/getblockbynum', { view: 'solidity', op: 'blockbynum' }],
  ['/wallet/gettransactioninfobyblocknum', { view: 'full', op: 'txinfos' }],
  ['/walletsolidity/gettransactioninfobyblocknum', { view: 'solidity', op: 'txinfos' }],
  ['/wallet/gettransactioninfobyid', { view: 'full', op: 'txinfobyid' }],
  ['/walletsolidity/gettransactioninfobyid', { view: 'solidity', op: 'txinfobyid' }],
  ['/wallet/listwitnesses', { view: 'full', op: 'listwitnesses' }],
  ['/wallet/getaccount', { view: 'full', op: 'getaccount' }],
  ['/wallet/getnextmaintenancetime', { view: 'full', op: 'nextmaintenance' }],
  ['/wallet/getchainparameters', { view: 'full', op: 'chainparameters' }],
  ['/wallet/getblockbylimitnext', { view: 'full', op: 'blocklimitnext' }],
]);

/** Blocks of a source indexed by transaction id (gettransactioninfobyid), at most. */
const TX_INDEX_MAX_BLOCKS = 10_000;

/**
 * Where each transaction of `source` is: built once, on first use, from the recorded blocks
 * (the first TX_INDEX_MAX_BLOCKS of them). @returns the block number, undefined when not held.
 */
function createTxIndex(source: BlockSource): (txId: string) => Promise<number | undefined> {
  let index: Promise<Map<string, number>> | undefined;
  const build = async () => {
    const m = new Map<string, number>();
    const numbers =
      source.recorded ??
      Array.from(
        { length: Math.min(TX_INDEX_MAX_BLOCKS, source.last - source.first + 1) },
        (_, i) => source.first + i,
      );
    for (const n of numbers.slice(0, TX_INDEX_MAX_BLOCKS)) {
      const entry = await source.get(n);
      if (!entry) continue;
      const block = parseNodeJson(entry.block.toString('utf8')) as BlockJson;
      for (const tx of block.transactions ?? []) {
        if (typeof tx.txID === 'string') m.set(tx.txID.toLowerCase(), n);
      }
    }
    return m;
  };
  return async (txId) => {
    index ??= build();
    return (await index).get(txId);
  };
}

/** A block header as the replay node needs it. `json`: the block without transactions. */
interface Header {
  number: number;
  id: string;
  parentHash: string;
  timestamp: number;
  version: number;
  /** The producer's address (42 lowercase hex), when the header names one. */
  witness?: string;
  /** A recorded block without transactions (parseHeader only). */
  empty?: boolean;
  json: string;
}

/** A java-tron style error answer (HTTP 200). */
class JavaError extends Error {}

function javaError(cls: string, message: string): string {
  return `${JSON.stringify({ Error: `class ${cls} : ${message}` })}\n`;
}

function numberFormat(input: string | null): JavaError {
  return new JavaError(
    javaError(
      'java.lang.NumberFormatException',
      input === null ? 'null' : `For input string: "${input}"`,
    ),
  );
}

function sha256Hex(s: string): string {
  return createHash('sha256').update(s).digest('hex');
}

/** mulberry32: a small, seeded PRNG in [0, 1). */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function nonNegativeInt(v: number, what: string): number {
  if (!Number.isSafeInteger(v) || v < 0)
    throw new RangeError(`${what} must be an integer >= 0, got ${v}`);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Parameters (java-tron semantics: protobuf defaults for POST bodies, Long.parseLong for GET)

type Params = Record<string, unknown>;

/** A block number parameter: number, 'huge' (valid long above 2^53, beyond any head) or an error. */
function parseNum(v: unknown, fromQuery: boolean): number | 'huge' {
  if (v === undefined || v === null) {
    if (fromQuery) throw numberFormat(null); // Long.parseLong(null)
    return 0; // protobuf default of an absent field
  }
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw numberFormat(String(v));
    return Number.isSafeInteger(v) ? v : v < 0 ? -1 : 'huge';
  }
  if (typeof v === 'string') {
    if (!/^[+-]?\d+$/.test(v)) throw numberFormat(v);
    const b = BigInt(v);
    if (b > JAVA_LONG_MAX || b < -JAVA_LONG_MAX - 1n) throw numberFormat(v);
    if (b > BigInt(Number.MAX_SAFE_INTEGER)) return 'huge';
    return b < 0n ? -1 : Number(b);
  }
  throw numberFormat(JSON.stringify(v));
}

function parseBool(v: unknown): boolean {
  return v === true || v === 'true';
}

// ---------------------------------------------------------------------------------------------
// Server: startReplayNode, then its steps in the order it takes them

/**
 * Start a replay node listening on `host:port`: validate the options into a timeline, set up the
 * counters, the faults and the block view over `source`, route requests to one answer per
 * endpoint family, listen.
 * @throws RangeError on invalid options; the listen error (EADDRINUSE…) when it cannot bind.
 */
export async function startReplayNode(opts: ReplayNodeOptions): Promise<ReplayNode> {
  const { source } = opts;
  const timeline = createTimeline(opts);
  const host = opts.host ?? '127.0.0.1';
  const stats = newStats();
  const faults = createFaultInjector(stats);
  faults.set(opts.faults);
  let disabled = new Set(opts.disabledPaths ?? []);
  const schedule = await readSchedule(source);
  const truth = createChainView(source, Math.max(0, timeline.start - 64), schedule);
  let lies = opts.lies;
  const chain = createLyingView(truth, () => lies);
  const heads = () => {
    const h = timeline.heads();
    return lies?.heads ? lies.heads(h) : h;
  };
  const clock = opts.now ?? (() => performance.now());
  const limiter = createRateLimiter(clock);
  limiter.set(opts.rateLimit);
  const requestLog: ReplayRequestRecord[] = [];
  const deps: RouterDeps = {
    stats,
    chain,
    faults,
    limiter,
    clock,
    ...(opts.logRequests ? { log: requestLog } : {}),
    heads,
    early: () => lies?.early ?? 0,
    txBlock: createTxIndex(source),
    schedule,
    sr: () => ({
      more: opts.srAnswers?.accounts ?? [],
      hide: lies?.srAnswers?.hide ?? [],
      reportKey: lies?.srAnswers?.reportKey,
      nextMaintenanceTime:
        lies?.srAnswers?.nextMaintenanceTime ?? opts.srAnswers?.nextMaintenanceTime,
    }),
    route: (path) => (disabled.has(path) ? undefined : ROUTES.get(path)),
  };
  const server = await listen(createRouter(deps), opts.port ?? 0, host);
  const port = (server.address() as AddressInfo).port;
  const grpc = opts.grpc ? await listenGrpc(deps, host, opts.grpcPort ?? 0) : undefined;
  const bracket = (h: string) => (h.includes(':') ? `[${h}]` : h);

  let closing: Promise<void> | undefined;
  return {
    url: `http://${bracket(host)}:${port}`,
    port,
    grpcUrl: grpc ? `grpc://${bracket(host)}:${grpc.port}` : undefined,
    first: source.first,
    last: source.last,
    checkpoint: schedule.checkpoint,
    srs: schedule.srs.map((s) => ({ address: s.address, signingKey: s.signingKey })),
    heads: timeline.heads,
    advanceTo: timeline.advanceTo,
    pause: timeline.pause,
    resume: timeline.resume,
    solidifiedAt: timeline.solidifiedAt,
    setFaults: faults.set,
    setDisabledPaths(paths: string[]): void {
      disabled = new Set(paths);
    },
    setRateLimit: limiter.set,
    setLies(l: ReplayLies | undefined): void {
      lies = l;
    },
    requestLog,
    stats,
    close(): Promise<void> {
      closing ??= Promise.all([stop(server, faults), grpc?.close()]).then(() => undefined);
      return closing;
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Step 1: the timeline (the clock that reveals blocks)

/** Both heads, block numbers; `head - solidified` is the lag. */
interface Heads {
  solidified: number;
  head: number;
}

/**
 * The timeline part of ReplayNode (see there): heads now, manual moves, solidification times,
 * and the solidified head it started at (`start`).
 */
type Timeline = Pick<ReplayNode, 'heads' | 'advanceTo' | 'pause' | 'resume' | 'solidifiedAt'> & {
  start: number;
};

/**
 * The timeline from the options: solidified = anchorBlock + floor((now − anchorTime) / intervalMs),
 * capped at `source.last` with stopAtEnd; head = solidified + lag. The anchor starts at
 * `first − startBefore − 1` (not below 0; `last` when instant) at the current clock reading, and
 * advanceTo moves it. Block numbers and the injected clock's ms throughout.
 * @throws RangeError when lag, intervalMs or startBefore (checked in this order) is not an
 *   integer >= 0.
 */
function createTimeline(opts: ReplayNodeOptions): Timeline {
  const { source } = opts;
  const lag = nonNegativeInt(opts.lag ?? 18, 'lag');
  const intervalMs = opts.instant ? 0 : nonNegativeInt(opts.intervalMs ?? 3000, 'intervalMs');
  const startBefore = nonNegativeInt(opts.startBefore ?? lag + 10, 'startBefore');
  const stopAtEnd = opts.stopAtEnd ?? false;
  const now = opts.now ?? (() => performance.now());

  // Timeline: solidified = anchorBlock + floor((now - anchorTime) / intervalMs).
  let anchorBlock = opts.instant ? source.last : Math.max(0, source.first - startBefore - 1);
  let anchorTime = now();
  let paused = false;

  function heads(): Heads {
    let solidified = anchorBlock;
    if (intervalMs > 0 && !paused) {
      solidified += Math.floor(Math.max(0, now() - anchorTime) / intervalMs);
    }
    if (stopAtEnd && solidified > source.last) solidified = Math.max(anchorBlock, source.last);
    return { solidified, head: solidified + lag };
  }

  function advanceTo(n: number): void {
    anchorBlock = nonNegativeInt(n, 'advanceTo block');
    anchorTime = now();
  }

  function pause(): void {
    if (paused) return;
    anchorBlock = heads().solidified;
    anchorTime = now();
    paused = true;
  }

  function resume(): void {
    if (!paused) return;
    anchorTime = now();
    paused = false;
  }

  // Epoch ms of a clock instant (the default clock is performance.now()).
  const toEpoch = (t: number) => (opts.now ? t : performance.timeOrigin + t);

  function solidifiedAt(n: number): number | undefined {
    if (n <= anchorBlock) return toEpoch(anchorTime);
    if (intervalMs <= 0 || paused || (stopAtEnd && n > source.last)) return undefined;
    return toEpoch(anchorTime + (n - anchorBlock) * intervalMs);
  }

  return { heads, advanceTo, pause, resume, solidifiedAt, start: anchorBlock };
}

// ---------------------------------------------------------------------------------------------
// Step 2: the counters

/** Zeroed counters; `byPath` has no prototype, since request paths are client input. */
function newStats(): ReplayStats {
  return {
    // No prototype: request paths are client input (a path named __proto__ stays a counter).
    requests: { total: 0, byPath: Object.create(null) as Record<string, number> },
    faults: { empty: 0, error: 0, errorJson: 0, delayed: 0 },
    rateLimited: 0,
  };
}

// ---------------------------------------------------------------------------------------------
// Step 2b: the scripted rate limit

interface RateLimiter {
  /** Replace the limit (undefined = none) and empty the window. */
  set(l: ReplayRateLimit | undefined): void;
  /** Admit a request arriving now (counted in the window), or the refusal to send instead. */
  admit(): { status: number; headers: Record<string, string> } | undefined;
}

/**
 * The sliding-window limit of ReplayRateLimit on `clock` (ms): the arrival times admitted in the
 * last 1,000 ms, oldest first; a penalty end time when `penaltyMs` is set.
 * @throws RangeError (from set) when perSecond is not an integer >= 1.
 */
function createRateLimiter(clock: () => number): RateLimiter {
  let limit: ReplayRateLimit | undefined;
  let admitted: number[] = [];
  let penaltyUntil = Number.NEGATIVE_INFINITY;

  function set(l: ReplayRateLimit | undefined): void {
    if (l && (!Number.isSafeInteger(l.perSecond) || l.perSecond < 1)) {
      throw new RangeError(`rateLimit.perSecond must be an integer >= 1, got ${l.perSecond}`);
    }
    limit = l ? { ...l } : undefined;
    admitted = [];
    penaltyUntil = Number.NEGATIVE_INFINITY;
  }

  function admit(): { status: number; headers: Record<string, string> } | undefined {
    if (!limit) return undefined;
    const now = clock();
    while (admitted.length > 0 && (admitted[0] ?? 0) <= now - 1000) admitted.shift();
    const penalised = now < penaltyUntil;
    if (limit.refuseAll) {
      const retry = limit.retryAfterSeconds === undefined ? 1 : limit.retryAfterSeconds;
      return {
        status: limit.status ?? 429,
        headers: retry === null ? {} : { 'retry-after': String(retry) },
      };
    }
    if (!penalised && admitted.length < limit.perSecond) {
      admitted.push(now);
      return undefined;
    }
    if (!penalised && (limit.penaltyMs ?? 0) > 0) penaltyUntil = now + (limit.penaltyMs ?? 0);
    const retry =
      now < penaltyUntil
        ? Math.ceil((penaltyUntil - now) / 1000)
        : limit.retryAfterSeconds === undefined
          ? 1
          : limit.retryAfterSeconds;
    return {
      status: limit.status ?? 429,
      headers: retry === null ? {} : { 'retry-after': String(retry) },
    };
  }

  return { set, admit };
}

// ---------------------------------------------------------------------------------------------
// Step 3: fault injection

/** An answer that replaces the normal one: HTTP status and body. */
interface FaultAnswer {
  status: number;
  body: string;
}

interface FaultInjector {
  /** Replace the faults (undefined = none) and reseed the PRNG (seed default 1). */
  set(f: ReplayFaults | undefined): void;
  /**
   * Draw a fault for an answer about a solidified block (`block`: getblockbynum, `infos`: its
   * transaction infos), after waiting `delayMs` if set; undefined = answer normally. Counts into
   * `stats.faults`. One PRNG draw per call when any rate is > 0, none otherwise.
   */
  draw(kind: 'block' | 'infos'): Promise<FaultAnswer | undefined>;
  /** Resolve every pending delay now and clear its timer (close: no timer outlives the server). */
  releaseDelays(): void;
}

/**
 * Faults start as none; call `set` with the options' faults. One draw r in [0, 1) picks: error
 * below errorRate, errorJson below errorRate + errorJsonRate, empty below the sum of all three.
 */
function createFaultInjector(stats: ReplayStats): FaultInjector {
  let faults: ReplayFaults = {};
  let random = prng(1);

  // Delayed answers are tracked so close() can release them (no timer outlives the server).
  const pendingDelays = new Set<{ timer: NodeJS.Timeout; resolve: () => void }>();
  function delay(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const d = {
        timer: setTimeout(() => {
          pendingDelays.delete(d);
          resolve();
        }, ms),
        resolve,
      };
      pendingDelays.add(d);
    });
  }

  function set(f: ReplayFaults | undefined): void {
    faults = { ...(f ?? {}) };
    random = prng(faults.seed ?? 1);
  }

  async function draw(kind: 'block' | 'infos'): Promise<FaultAnswer | undefined> {
    if (faults.delayMs && faults.delayMs > 0) {
      stats.faults.delayed++;
      await delay(faults.delayMs);
    }
    const error = faults.errorRate ?? 0;
    const errorJson = faults.errorJsonRate ?? 0;
    const empty = faults.emptyRate ?? 0;
    if (error + errorJson + empty <= 0) return undefined;
    const r = random();
    if (r < error) {
      stats.faults.error++;
      return { status: 503, body: 'Service Unavailable (injected)\n' };
    }
    if (r < error + errorJson) {
      stats.faults.errorJson++;
      return { status: 200, body: javaError('java.lang.NullPointerException', 'injected fault') };
    }
    if (r < error + errorJson + empty) {
      stats.faults.empty++;
      return { status: 200, body: kind === 'block' ? '{}\n' : '[]\n' };
    }
    return undefined;
  }

  function releaseDelays(): void {
    for (const d of pendingDelays) {
      clearTimeout(d.timer);
      d.resolve();
    }
    pendingDelays.clear();
  }

  return { set, draw, releaseDelays };
}

// ---------------------------------------------------------------------------------------------
// Step 4: the blocks served (recorded headers, filler blocks, lies)

/** Every block number as served: recorded bytes where the source holds them, filler elsewhere. */
interface ChainView {
  /** Header of block n >= 0 (recorded, or the filler's). */
  headerOf(n: number): Promise<Header>;
  /** Full block bytes (verbatim when recorded) and transaction infos (`[]` for a filler). */
  blockOf(n: number): Promise<BlockEntry>;
}

/** Header of recorded block n, undefined when the source does not hold n. */
type RecordedHeader = (n: number) => Promise<Header | undefined>;

/**
 * Filler ids and signatures kept (number → blockID, parent id, signature; ~250 bytes each): a
 * week of 3 s blocks. A signature costs ~0.3 ms to make, a served filler none once kept.
 */
const FILLER_ID_CACHE = 200_000;

/**
 * The block view over `source`: recorded headers parsed on demand, the last HEADER_CACHE (4096)
 * kept (LRU in Map order); fillers chained from `fillerBase` (module doc) and produced by
 * `schedule`'s SRs, their ids and signatures memoised (a filler's id needs its parent's, computed
 * upwards from the nearest one known).
 * @throws Error (from headerOf/blockOf) when a recorded block is not JSON or lacks its header.
 */
function createChainView(
  source: BlockSource,
  fillerBase: number,
  schedule: ReplaySchedule,
): ChainView {
  // Headers of recorded blocks, parsed on demand (LRU in Map order).
  const headers = new Map<number, Header>();
  /** Chained fillers built so far: their id, their parent's and their signature. */
  const fillers = new Map<number, { id: string; parent: string; signature?: string }>();

  const isRecorded = (n: number): boolean => {
    if (n < source.first || n > source.last) return false;
    const rec = source.recorded;
    if (!rec) return true;
    let lo = 0;
    let hi = rec.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const v = rec[mid] as number;
      if (v === n) return true;
      if (v < n) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  };

  async function recordedHeader(n: number): Promise<Header | undefined> {
    if (!isRecorded(n)) return undefined;
    const hit = headers.get(n);
    if (hit) {
      headers.delete(n);
      headers.set(n, hit);
      return hit;
    }
    const entry = await source.get(n);
    if (!entry) return undefined;
    const h = parseHeader(n, entry.block);
    headers.set(n, h);
    if (headers.size > HEADER_CACHE) {
      const oldest = headers.keys().next().value;
      if (oldest !== undefined) headers.delete(oldest);
    }
    return h;
  }

  /** The id of block k, whatever it is (recorded, filler, or below the chained range). */
  async function idOf(k: number): Promise<string> {
    if (k < 0) return ZERO_HASH;
    const f = fillers.get(k);
    if (f) return f.id;
    const rec = await recordedHeader(k);
    if (rec) return rec.id;
    if (k < fillerBase) return syntheticId(k);
    return (await fillerHeader(k, true)).id;
  }

  /** Filler n's header: its parent's id (built upwards from the nearest one known), its hash. */
  /**
   * Filler n's header. `idOnly`: for its id alone (a parent's), not signed (its json then carries
   * no valid signature and is never served); a filler is signed once, when first served.
   */
  async function fillerHeader(n: number, idOnly = false): Promise<Header> {
    if (n < fillerBase) {
      return buildFiller(source, recordedHeader, schedule, n, await idOf(n - 1), 'unchained');
    }
    const memo = fillers.get(n);
    if (memo) {
      if (memo.signature !== undefined || idOnly) {
        return buildFiller(
          source,
          recordedHeader,
          schedule,
          n,
          memo.parent,
          memo.signature ?? 'none',
        );
      }
      const h = await buildFiller(source, recordedHeader, schedule, n, memo.parent);
      memo.signature = h.signature;
      return h;
    }
    // Walk down to a block whose id is known without building fillers, then build upwards (ids
    // only: the fillers in between are signed when served).
    let k = n;
    while (k > fillerBase && k > 0 && !fillers.has(k - 1) && !isRecorded(k - 1)) k--;
    if (fillers.size + (n - k) >= FILLER_ID_CACHE) fillers.clear();
    let h: (Header & { signature: string }) | undefined;
    for (let m = k; m <= n; m++) {
      const parent = m === 0 ? ZERO_HASH : (fillers.get(m - 1)?.id ?? (await idOf(m - 1)));
      const last = m === n && !idOnly;
      h = await buildFiller(source, recordedHeader, schedule, m, parent, last ? undefined : 'none');
      fillers.set(m, last ? { id: h.id, parent, signature: h.signature } : { id: h.id, parent });
    }
    return h as Header;
  }

  async function headerOf(n: number): Promise<Header> {
    return (await recordedHeader(n)) ?? fillerHeader(n);
  }

  /** Full block bytes (verbatim when recorded) and infos. */
  async function blockOf(n: number): Promise<BlockEntry> {
    const entry = isRecorded(n) ? await source.get(n) : undefined;
    if (entry) return entry;
    const h = await fillerHeader(n);
    return { block: Buffer.from(h.json), infos: EMPTY_ARRAY, exactFromJson: true };
  }

  return { headerOf, blockOf };
}

/** Number, id, parent, time and version of a recorded block, and its transaction-less JSON. */
function parseHeader(n: number, block: Buffer): Header {
  // Header fields are all below 2^53 (number, ms timestamp, version): JSON.parse is exact for
  // them; the transactions it may round are never re-served from this parse.
  let j: {
    blockID?: unknown;
    block_header?: { raw_data?: Record<string, unknown> };
    transactions?: unknown;
  };
  try {
    j = JSON.parse(block.toString('utf8'));
  } catch (err) {
    throw new Error(
      `recorded block ${n} is not JSON: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  const raw = j.block_header?.raw_data;
  if (typeof j.blockID !== 'string' || !raw || Number(raw.number ?? 0) !== n) {
    throw new Error(`recorded block ${n} has no blockID/block_header or another number`);
  }
  return {
    number: n,
    id: j.blockID,
    parentHash: typeof raw.parentHash === 'string' ? raw.parentHash : ZERO_HASH,
    timestamp: Number(raw.timestamp ?? 0),
    version: Number(raw.version ?? DEFAULT_BLOCK_VERSION),
    ...(typeof raw.witness_address === 'string'
      ? { witness: raw.witness_address.toLowerCase() }
      : {}),
    empty: !Array.isArray(j.transactions) || j.transactions.length === 0,
    json: `${JSON.stringify({ blockID: j.blockID, block_header: j.block_header })}\n`,
  };
}

/**
 * The filler block n with parent `parentHash`, in java-tron's empty-block shape (module doc): id
 * = its header's hash (java-tron's rule); timestamp (ms since epoch, not below 0) = the time
 * anchor's moved by one slot per block between, skipping the slots of the schedule's SR without a
 * key (fillerTime); producer = the SR that slot schedules, signature = that SR's over the header
 * (`signature`: the one made before, for the same header; `none`: unsigned, for its id alone,
 * never served). `unchained` (below fillerBase): a
 * seeded id, a seeded producer and a signature of seeded bytes (it can be checked by nothing).
 * version = the anchor's, or 32.
 * @throws Error when the scheduled SR has no key (a schedule whose missed slot is not skipped).
 */
async function buildFiller(
  source: BlockSource,
  recordedHeader: RecordedHeader,
  schedule: ReplaySchedule,
  n: number,
  parentHash: string,
  signature?: string | 'unchained' | 'none',
): Promise<Header & { signature: string }> {
  const { h: anchor, blocks } = await timeAnchor(source, recordedHeader, n);
  const timestamp = Math.max(0, fillerTime(anchor?.timestamp ?? 0, blocks, schedule.missed));
  const version = anchor?.version ?? DEFAULT_BLOCK_VERSION;
  if (signature === 'unchained') {
    const seed = sha256Hex(`tronwatch replay witness ${n}`);
    const raw = {
      number: n,
      txTrieRoot: ZERO_HASH,
      witness_address: `41${seed.slice(0, 40)}`,
      parentHash,
      version,
      timestamp,
    };
    return fillerHeaderOf(raw, syntheticId(n), `${seed}${sha256Hex(seed)}00`);
  }
  const sr = scheduledSr(schedule, timestamp);
  const raw = {
    number: n,
    txTrieRoot: ZERO_HASH,
    witness_address: sr.address,
    parentHash,
    version,
    timestamp,
  };
  const bytes = headerRawBytes(raw);
  const id = blockIdFromRaw(BigInt(n), bytes);
  let sig = signature === 'none' ? '' : signature;
  if (sig === undefined) {
    if (!sr.privateKey)
      throw new Error(`filler ${n}: slot of ${sr.address}, which has no key here`);
    sig = Buffer.from(signWitnessHeader(bytes, sr.privateKey)).toString('hex');
  }
  return fillerHeaderOf(raw, id, sig);
}

/**
 * A filler's header from its raw_data (`raw`, in the key order it is served in), its id and its
 * witness_signature (hex, or '' unsigned): `json` is the line served (`blockID`, `block_header`).
 */
function fillerHeaderOf(
  raw: HeaderFields,
  id: string,
  sig: string,
): Header & { signature: string } {
  const json = `${JSON.stringify({ blockID: id, block_header: { raw_data: raw, witness_signature: sig } })}\n`;
  return {
    number: raw.number,
    id,
    parentHash: raw.parentHash,
    timestamp: raw.timestamp,
    version: raw.version,
    witness: raw.witness_address,
    json,
    signature: sig,
  };
}

/**
 * The recorded block whose time a filler n counts from, and the number of blocks between
 * (negative below the range): `last` above the range, `first` below it, inside it the highest
 * recorded number below n (binary search in `source.recorded`; `first` without that list).
 */
async function timeAnchor(
  source: BlockSource,
  recordedHeader: RecordedHeader,
  n: number,
): Promise<{ h: Header | undefined; blocks: number }> {
  if (n > source.last) return { h: await recordedHeader(source.last), blocks: n - source.last };
  if (n < source.first) return { h: await recordedHeader(source.first), blocks: n - source.first };
  const rec = source.recorded;
  if (rec) {
    // Highest recorded number below n (binary search).
    let lo = 0;
    let hi = rec.length - 1;
    let best = source.first;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const v = rec[mid] ?? source.first;
      if (v < n) {
        best = v;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return { h: await recordedHeader(best), blocks: n - best };
  }
  return { h: await recordedHeader(source.first), blocks: n - source.first };
}

// ---------------------------------------------------------------------------------------------
// Step 4b: the devnet SRs that produce the fillers, and the checkpoint a light client starts from

/**
 * Who produces the replay node's chained fillers (module doc, Signatures): a devnet SR set in
 * schedule order, the one slot position that has no key here (if any), and what follows from it.
 */
export interface ReplaySchedule {
  /** The 27 SRs in schedule order: the slot of time t is `srs[(t/3000) mod 27]`'s. */
  srs: ReadonlyArray<DevnetSr | RecordedSr>;
  /**
   * The position of the recorded block's real SR (`devnetSrsAround`), whose key is not here: its
   * slots are missed by the fillers. Undefined when every SR signs (a synthetic source).
   */
  missed: number | undefined;
  /** The devnet's next maintenance time, ms (DEVNET_MAINTENANCE_INTERVAL_MS: never reached). */
  nextMaintenanceTime: number;
  /** replayCheckpoint's answer; undefined when the first block cannot anchor one (then `why`). */
  checkpoint: Checkpoint | undefined;
  why?: string;
}

const mod = (a: number, m: number) => ((a % m) + m) % m;

/** The SR of `schedule` that the slot of `timestamp` (ms) schedules: `srs[(t/3000) mod 27]`. */
function scheduledSr(schedule: ReplaySchedule, timestamp: number): DevnetSr | RecordedSr {
  return schedule.srs[mod(Math.floor(timestamp / SLOT_MS), ACTIVE_SR_COUNT)] as
    | DevnetSr
    | RecordedSr;
}

/**
 * The time of the block `blocks` blocks after (before, when negative) one at `anchor` ms: one
 * 3,000 ms slot per block, skipping every slot whose position `(t/3000) mod 27` is `missed` (its
 * SR cannot sign here: a missed slot, as on mainnet). Any 27 consecutive slots hold exactly one
 * such slot, so whole rounds of 26 blocks are jumped at once. The anchor's offset within its slot
 * is kept (mainnet times have none).
 */
export function fillerTime(anchor: number, blocks: number, missed: number | undefined): number {
  if (missed === undefined || blocks === 0) return anchor + blocks * SLOT_MS;
  const dir = blocks > 0 ? 1 : -1;
  let left = Math.abs(blocks);
  const start = Math.floor(anchor / SLOT_MS);
  const per = ACTIVE_SR_COUNT - 1;
  const rounds = Math.floor((left - 1) / per);
  let slot = start + dir * rounds * ACTIVE_SR_COUNT;
  left -= rounds * per;
  while (left > 0) {
    slot += dir;
    if (mod(slot, ACTIVE_SR_COUNT) !== missed) left--;
  }
  return anchor + (slot - start) * SLOT_MS;
}

/** The devnet set (DEVNET_SRS or the Nile-shaped chain's NILE_DEVNET_SRS) holding `address`. */
function devnetSetOf(address: string | undefined): readonly DevnetSr[] | undefined {
  return [DEVNET_SRS, NILE_DEVNET_SRS].find((set) => set.some((s) => s.address === address));
}

const isDevnetSr = (address: string | undefined) => devnetSetOf(address) !== undefined;

/**
 * The schedule of a source whose first recorded block is `first` and whose first block not made
 * by the devnet is `real` (scheduleHeaders; module doc, Signatures): without one (a synthetic
 * chain, signed by DEVNET_SRS, or blocks naming no producer), DEVNET_SRS, or NILE_DEVNET_SRS when
 * that block (or, without one, `first`) is signed by one of them; with a recorded mainnet
 * block, `devnetSrsAround(real)`, its real SR in the slot its time schedules, missed elsewhere.
 * The checkpoint is the block before `first` (id = `first`'s parentHash, time 3 s before it):
 * fillers below `first` cannot chain to its real parent, so a light client starts there.
 */
function scheduleOf(first: Header | undefined, real: Header | undefined): ReplaySchedule {
  const witness = real?.witness;
  const own = real ? devnetSetOf(witness) : devnetSetOf(first?.witness);
  const devnet = !real || witness === undefined || own !== undefined;
  const srs =
    own ??
    (devnet || !witness ? DEVNET_SRS : devnetSrsAround({ witness, timestamp: real.timestamp }));
  const missed = devnet ? undefined : mod(Math.floor(real.timestamp / SLOT_MS), ACTIVE_SR_COUNT);
  const interval = DEVNET_MAINTENANCE_INTERVAL_MS;
  const timestamp = (first?.timestamp ?? 0) - SLOT_MS;
  const nextMaintenanceTime = (Math.floor(timestamp / interval) + 1) * interval;
  if (!first) return { srs, missed, nextMaintenanceTime, checkpoint: undefined, why: 'no block' };
  try {
    const checkpoint = parseCheckpoint({
      network: 'devnet',
      block: { number: first.number - 1, id: first.parentHash, timestamp },
      witnesses: srs.map((s) => ({ address: s.address, signingKey: s.signingKey })),
      nextMaintenanceTime,
      maintenanceIntervalMs: interval,
      source:
        `replay node: the parent of block ${first.number} (${first.id}); ` +
        (missed === undefined
          ? srs === NILE_DEVNET_SRS
            ? 'the Nile-shaped devnet SRs'
            : 'the devnet SRs'
          : `the devnet SRs with ${witness}, its producer, in slot ${missed}`),
    });
    return { srs, missed, nextMaintenanceTime, checkpoint };
  } catch (err) {
    if (!(err instanceof CheckpointError)) throw err;
    return { srs, missed, nextMaintenanceTime, checkpoint: undefined, why: err.message };
  }
}

/** Leading recorded blocks looked through for the first one not made by the devnet. */
const SCHEDULE_SCAN = 64;

/**
 * The first recorded block's header, and the first recorded block's that is not a devnet filler
 * (an empty block by a devnet SR, as `record` writes the fillers before a real block), looking
 * at most SCHEDULE_SCAN blocks ahead (undefined `real`: only devnet blocks there).
 * @returns `first` undefined when the source does not hold its first block.
 * @throws Error when a block looked at is not a block's JSON (parseHeader).
 */
async function scheduleHeaders(
  source: BlockSource,
): Promise<{ first: Header | undefined; real: Header | undefined }> {
  const numbers = source.recorded;
  const at = (i: number) => (numbers ? numbers[i] : source.first + i);
  let real: Header | undefined;
  let first: Header | undefined;
  for (let i = 0; i <= SCHEDULE_SCAN; i++) {
    const n = at(i);
    if (n === undefined || n > source.last) break;
    const entry = await source.get(n);
    if (!entry) break;
    const h = parseHeader(n, entry.block);
    first ??= h;
    real = h;
    if (!(h.empty && isDevnetSr(h.witness))) break;
  }
  return { first, real: real && !(real.empty && isDevnetSr(real.witness)) ? real : undefined };
}

/**
 * The schedule of `source` (scheduleOf); a first block that cannot be read or parsed gives
 * DEVNET_SRS and no checkpoint (its requests fail as they did: this node still starts).
 */
async function readSchedule(source: BlockSource): Promise<ReplaySchedule> {
  try {
    const { first, real } = await scheduleHeaders(source);
    return scheduleOf(first, real);
  } catch (err) {
    const s = scheduleOf(undefined, undefined);
    return { ...s, why: err instanceof Error ? err.message : String(err) };
  }
}

/**
 * The checkpoint from which a light client (tron/light-client/finality.ts) proves the chain a
 * replay node serves over `source`: the block before the first recorded one (number `first − 1`,
 * id = the first block's parentHash, time 3,000 ms before it), the devnet SR set in schedule
 * order with their signing keys (DEVNET_SRS for a synthetic source, NILE_DEVNET_SRS for a
 * Nile-shaped one: then equal to syntheticCheckpoint but for `source`; `devnetSrsAround(the first recorded block not made by the
 * devnet)` for recorded mainnet blocks, e.g. 79072107), and the devnet's next maintenance time
 * (interval DEVNET_MAINTENANCE_INTERVAL_MS, never reached by a run). Equal to `node.checkpoint` of
 * a node started over the same source, whatever its other options. Reads the source's first
 * block, and the next ones while they are recorded devnet fillers (at most SCHEDULE_SCAN).
 * @returns a parseCheckpoint-valid Checkpoint (network `devnet`).
 * @throws CheckpointError when the first block cannot anchor one (a time that is not a multiple
 *   of 3,000 ms, a parentHash that does not name block first − 1, block 1…); Error when the
 *   source does not hold its first block or it is not a block's JSON.
 */
export async function replayCheckpoint(source: BlockSource): Promise<Checkpoint> {
  const { first, real } = await scheduleHeaders(source);
  if (!first) throw new Error(`the source does not hold its first block ${source.first}`);
  const s = scheduleOf(first, real);
  if (!s.checkpoint) throw new CheckpointError(s.why ?? 'no checkpoint');
  return s.checkpoint;
}

/**
 * The view a lying node serves (ReplayLies, read at each call through `lies`): forged answers
 * for chosen numbers, another fork from `forkFrom` on, the truth elsewhere.
 */
function createLyingView(truth: ChainView, lies: () => ReplayLies | undefined): ChainView {
  const forkIds = new Map<number, { from: number; id: string }>();
  const asBuffer = (b: Buffer | string) => (Buffer.isBuffer(b) ? b : Buffer.from(b));

  async function forkHeader(n: number, from: number): Promise<Header> {
    const real = await truth.headerOf(n);
    const cached = forkIds.get(n - 1);
    const parent =
      n === from
        ? (await truth.headerOf(n - 1)).id
        : cached?.from === from
          ? cached.id
          : (await forkHeader(n - 1, from)).id;
    const seed = sha256Hex(`tronwatch replay fork ${from} ${n}`);
    const raw = {
      number: n,
      txTrieRoot: ZERO_HASH,
      witness_address: `41${seed.slice(0, 40)}`,
      parentHash: parent,
      version: real.version,
      timestamp: real.timestamp,
    };
    const id = headerBlockId(raw);
    forkIds.set(n, { from, id });
    const json = `${JSON.stringify({
      blockID: id,
      block_header: { raw_data: raw, witness_signature: `${seed}${sha256Hex(seed)}00` },
    })}\n`;
    return {
      number: n,
      id,
      parentHash: parent,
      timestamp: real.timestamp,
      version: real.version,
      json,
    };
  }

  return {
    async headerOf(n: number): Promise<Header> {
      const l = lies();
      const forged = l?.blocks?.get(n)?.block;
      if (forged !== undefined) return parseHeader(n, asBuffer(forged));
      if (l?.forkFrom !== undefined && n >= l.forkFrom) return forkHeader(n, l.forkFrom);
      return truth.headerOf(n);
    },
    async blockOf(n: number): Promise<BlockEntry> {
      const l = lies();
      const forged = l?.blocks?.get(n);
      if (forged) {
        const real = await truth.blockOf(n);
        const out: BlockEntry = {
          block: forged.block === undefined ? real.block : asBuffer(forged.block),
          infos: forged.infos === undefined ? real.infos : asBuffer(forged.infos),
        };
        // Recorded exact bytes stay only while the block itself is not forged: a consistent
        // liar's gRPC answer is its forged JSON encoded.
        if (forged.block === undefined) {
          if (real.exact) out.exact = real.exact;
          if (real.exactFromJson) out.exactFromJson = true;
        } else out.exactFromJson = true;
        return out;
      }
      if (l?.forkFrom !== undefined && n >= l.forkFrom) {
        return {
          block: Buffer.from((await forkHeader(n, l.forkFrom)).json),
          infos: EMPTY_ARRAY,
          exactFromJson: true,
        };
      }
      return truth.blockOf(n);
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Step 5: one answer per endpoint family

/** One answer: HTTP status and body bytes (a string is sent as UTF-8). */
type Answer = [status: number, body: Buffer | string];

/** What an endpoint handler sees of one routed request. */
interface Call {
  /** Both heads, read once when the request's parameters are in. */
  heads: Heads;
  /** The view's newest block: heads.solidified (`/walletsolidity/…`), heads.head (`/wallet/…`). */
  limit: number;
  /** Query string and JSON body fields merged (body over query). */
  params: Params;
  /** Parameters came from a query string (GET, or POST without body): a missing num is an error. */
  fromQuery: boolean;
  chain: ChainView;
  faults: FaultInjector;
  /** The block holding a transaction id (lowercase hex), if the source has it. */
  txBlock: (txId: string) => Promise<number | undefined>;
  /** The devnet SRs (listwitnesses, getaccount, getnextmaintenancetime). */
  schedule: ReplaySchedule;
  /** What the SR answers add to the schedule's, lies included (RouterDeps.sr). */
  sr: SrView;
}

/**
 * The SR answers beyond the devnet set, as told now: ReplayNodeOptions.srAnswers with
 * ReplayLies.srAnswers over it.
 */
interface SrView {
  more: readonly SrEntry[];
  hide: readonly string[];
  reportKey: ((address: string) => string | undefined) | undefined;
  nextMaintenanceTime: number | undefined;
}

/**
 * One handler per endpoint family, both views. A handler may throw JavaError (malformed
 * parameter: sent as HTTP 200 with its message) or any Error (HTTP 500).
 */
const ANSWERS: Record<Op, (call: Call) => Promise<Answer>> = {
  nodeinfo: answerNodeInfo,
  nowblock: answerNowBlock,
  getblock: answerGetBlock,
  blockbynum: (call) => answerByNum('blockbynum', call),
  txinfos: (call) => answerByNum('txinfos', call),
  txinfobyid: answerTxInfoById,
  listwitnesses: async ({ schedule, sr }) => [
    200,
    `${JSON.stringify(listWitnessesAnswer(schedule.srs, sr.hide, sr.more))}\n`,
  ],
  getaccount: async ({ schedule, params, sr }) => [
    200,
    `${JSON.stringify(getAccountAnswer(schedule.srs, typeof params.address === 'string' ? params.address : '', sr.more, sr.reportKey))}\n`,
  ],
  nextmaintenance: async ({ schedule, sr }) => [
    200,
    `${JSON.stringify({ num: sr.nextMaintenanceTime ?? schedule.nextMaintenanceTime })}\n`,
  ],
  chainparameters: async () => [200, `${JSON.stringify(chainParametersAnswer())}\n`],
  blocklimitnext: answerBlockByLimitNext,
};

/** Most blocks one getblockbylimitnext answers (java-tron `BLOCK_LIMIT_NUM`). */
const BLOCK_LIMIT_NUM = 100;

/**
 * `getblockbylimitnext {startNum, endNum}`: `{"block": [...]}`, the blocks from startNum up to
 * endNum (exclusive) and the full-node head, with their transactions (recorded bytes verbatim);
 * `{}` unless 0 < endNum, startNum < endNum and endNum − startNum ≤ 100 (java-tron
 * `GetBlockByLimitNextServlet`), or when no block is in range.
 */
async function answerBlockByLimitNext({ limit, params, fromQuery, chain }: Call): Promise<Answer> {
  const start = parseNum(params.startNum, fromQuery);
  const end = parseNum(params.endNum, fromQuery);
  if (start === 'huge' || end === 'huge' || end <= 0 || end <= start) return [200, '{}\n'];
  if (end - start > BLOCK_LIMIT_NUM) return [200, '{}\n'];
  const parts: Buffer[] = [];
  for (let n = Math.max(0, start); n < end && n <= limit; n++) {
    const b = (await chain.blockOf(n)).block;
    let e = b.length;
    while (e > 0 && (b[e - 1] === 0x0a || b[e - 1] === 0x0d || b[e - 1] === 0x20)) e--;
    if (parts.length > 0) parts.push(Buffer.from(','));
    parts.push(b.subarray(0, e));
  }
  if (parts.length === 0) return [200, '{}\n'];
  return [200, Buffer.concat([Buffer.from('{"block":['), ...parts, Buffer.from(']}\n')])];
}

/**
 * `gettransactioninfobyid {value}`: the info of a transaction in a block up to the view's head
 * (java-tron's shape: the block's entry for it), `{}` otherwise.
 */
async function answerTxInfoById({ limit, params, chain, txBlock }: Call): Promise<Answer> {
  const value = params.value;
  if (typeof value !== 'string' || !/^[0-9a-fA-F]{64}$/.test(value)) return [200, '{}\n'];
  const id = value.toLowerCase();
  const n = await txBlock(id);
  if (n === undefined || n > limit) return [200, '{}\n'];
  const entry = await chain.blockOf(n);
  const infos = parseNodeJson(entry.infos.toString('utf8')) as TransactionInfoJson[];
  const info = infos.find((i) => i.id === id);
  if (info) return [200, `${losslessStringify(info)}\n`];
  const header = await chain.headerOf(n);
  return [200, `${JSON.stringify({ id, blockNumber: n, blockTimeStamp: header.timestamp })}\n`];
}

/** `getnodeinfo`: NodeInfo naming both heads with their block ids (the same for both views). */
async function answerNodeInfo({ heads, chain }: Call): Promise<Answer> {
  // A lied head far above anything servable (tests of impossible heads) gets a seeded id: its
  // filler chain would take hours to hash.
  const idOf = async (n: number) =>
    n > FAR_HEAD
      ? n.toString(16).padStart(16, '0') + sha256Hex(`tronwatch replay far ${n}`).slice(16)
      : (await chain.headerOf(n)).id;
  const [headId, solidId] = await Promise.all([idOf(heads.head), idOf(heads.solidified)]);
  return [200, nodeInfo(heads, headId, solidId)];
}

/** Block numbers above this (10^9; mainnet is near 8·10^7) are never served, only named. */
const FAR_HEAD = 1_000_000_000;

/** `getnowblock`: the view's newest block, with its transactions. */
async function answerNowBlock({ limit, chain }: Call): Promise<Answer> {
  return [200, (await chain.blockOf(limit)).block];
}

/**
 * `getblock {id_or_num?, detail?}`: id_or_num absent or '' = the view's newest block; a 64-hex
 * id names its number in its first 8 bytes and must match; otherwise a number (Long.parseLong).
 * `{}` above the view's head or for an unknown id; `detail` false = without `transactions`.
 */
async function answerGetBlock({ limit, params, chain }: Call): Promise<Answer> {
  const detail = parseBool(params.detail);
  const idOrNum = params.id_or_num;
  let n: number | 'huge';
  let wantId: string | undefined;
  if (idOrNum === undefined || idOrNum === null || idOrNum === '') {
    n = limit;
  } else if (typeof idOrNum === 'string' && /^[0-9a-fA-F]{64}$/.test(idOrNum)) {
    wantId = idOrNum.toLowerCase();
    const b = BigInt(`0x${wantId.slice(0, 16)}`);
    n = b > BigInt(Number.MAX_SAFE_INTEGER) ? 'huge' : Number(b);
  } else {
    n = parseNum(typeof idOrNum === 'number' ? String(idOrNum) : idOrNum, true);
  }
  if (n === 'huge' || n < 0 || n > limit) return [200, '{}\n'];
  const header = await chain.headerOf(n);
  if (wantId !== undefined && header.id.toLowerCase() !== wantId) return [200, '{}\n'];
  return [200, detail ? (await chain.blockOf(n)).block : header.json];
}

/**
 * `getblockbynum {num}` and `gettransactioninfobyblocknum {num}`: the block's bytes or its
 * transaction infos; `{}` / `[]` above the view's head; faults drawn for solidified blocks.
 */
async function answerByNum(
  op: 'blockbynum' | 'txinfos',
  { heads, limit, params, fromQuery, chain, faults }: Call,
): Promise<Answer> {
  const n = parseNum(params.num, fromQuery);
  const none = op === 'blockbynum' ? '{}\n' : '[]\n';
  if (n === 'huge' || n < 0 || n > limit) return [200, none];
  if (n <= heads.solidified) {
    const f = await faults.draw(op === 'blockbynum' ? 'block' : 'infos');
    if (f) return [f.status, f.body];
  }
  const entry = await chain.blockOf(n);
  return [200, op === 'blockbynum' ? entry.block : entry.infos];
}

/**
 * java-tron's NodeInfo JSON (one line): `block: "Num:<head>,ID:<headId>"`,
 * `solidityBlock: "Num:<solidified>,ID:<solidId>"`, this machine's cpu count and memory (bytes),
 * fixed plausible values elsewhere, and `replay: true`.
 */
function nodeInfo(h: Heads, headId: string, solidId: string): string {
  const total = totalmem();
  const free = freemem();
  return `${JSON.stringify({
    beginSyncNum: Math.max(0, h.head - 1000),
    block: `Num:${h.head},ID:${headId}`,
    solidityBlock: `Num:${h.solidified},ID:${solidId}`,
    currentConnectCount: 30,
    activeConnectCount: 8,
    passiveConnectCount: 22,
    totalFlow: 0,
    peerInfoList: [],
    configNodeInfo: {
      codeVersion: '4.8.0',
      p2pVersion: '11111',
      listenPort: 18888,
      discoverEnable: true,
      activeNodeSize: 0,
      passiveNodeSize: 0,
      sendNodeSize: 0,
      maxConnectCount: 30,
      sameIpMaxConnectCount: 2,
      backupListenPort: 10001,
      backupMemberSize: 0,
      backupPriority: 8,
      dbVersion: 2,
      minParticipationRate: 15,
      supportConstant: true,
      minTimeRatio: 0,
      maxTimeRatio: 5,
      allowCreationOfContracts: 1,
      allowAdaptiveEnergy: 1,
    },
    machineInfo: {
      threadCount: 120,
      deadLockThreadCount: 0,
      cpuCount: cpus().length,
      totalMemory: total,
      freeMemory: free,
      cpuRate: 0.1,
      javaVersion: '1.8.0_372',
      osName: 'Linux amd64',
      jvmTotalMemory: 4294967296,
      jvmFreeMemory: 1073741824,
      processCpuRate: 0.05,
      memoryDescInfoList: [],
      deadLockThreadInfoList: [],
    },
    cheatWitnessInfoMap: {},
    replay: true,
  })}\n`;
}

// ---------------------------------------------------------------------------------------------
// Step 6: the request router

interface RouterDeps {
  /** Counted per request, unknown paths included. */
  stats: ReplayStats;
  chain: ChainView;
  faults: FaultInjector;
  /** The scripted rate limit, applied to every request before routing. */
  limiter: RateLimiter;
  /** The node's clock (arrival times in `log`). */
  clock: () => number;
  /** Where each request is recorded when `logRequests` is on. */
  log?: ReplayRequestRecord[];
  heads: () => Heads;
  /** Blocks served above the solidified head by the solidity endpoints (ReplayLies.early). */
  early: () => number;
  /** The block holding a transaction id (gettransactioninfobyid). */
  txBlock: (txId: string) => Promise<number | undefined>;
  /** The devnet SRs producing the fillers. */
  schedule: ReplaySchedule;
  /** The SR answers beyond the schedule's, as told now (lies included). */
  sr: () => SrView;
  /** The route of a path, undefined = 404 (unknown or disabled). */
  route: (path: string) => { view: View; op: Op } | undefined;
}

/**
 * The `request` listener: count the request, apply the scripted rate limit (429/403 with
 * Retry-After), route it (404 unknown, 405 unless GET or POST), read its parameters, answer it.
 * A handler's JavaError is sent as HTTP 200 with its message; any other error as HTTP 500
 * `{"Error": "class java.lang.RuntimeException : …"}`. Logged (deps.log) with its status.
 */
function createRouter(deps: RouterDeps): (req: IncomingMessage, res: ServerResponse) => void {
  async function handle(
    req: IncomingMessage,
    res: ServerResponse,
    rec: ReplayRequestRecord,
  ): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://replay.invalid');
    const path = url.pathname;
    rec.path = path;
    deps.stats.requests.total++;
    deps.stats.requests.byPath[path] = (deps.stats.requests.byPath[path] ?? 0) + 1;
    const refused = deps.limiter.admit();
    if (refused) {
      req.resume();
      deps.stats.rateLimited++;
      return send(
        res,
        refused.status,
        `${JSON.stringify({ Error: 'rate limit exceeded (scripted)' })}\n`,
        refused.headers,
      );
    }
    const route = deps.route(path);
    if (!route) {
      req.resume();
      return send(res, 404, `${JSON.stringify({ Error: `no such endpoint: ${path}` })}\n`);
    }
    if (req.method !== 'GET' && req.method !== 'POST') {
      req.resume();
      res.setHeader('allow', 'GET, POST');
      return send(res, 405, `${JSON.stringify({ Error: `method ${req.method} not allowed` })}\n`);
    }
    const read = await readParams(req, url);
    if ('refused' in read) return send(res, ...read.refused);
    if (typeof read.params.num === 'number') rec.num = read.params.num;
    try {
      const h = deps.heads();
      const early = route.op === 'blockbynum' || route.op === 'txinfos' ? deps.early() : 0;
      const [status, body] = await ANSWERS[route.op]({
        heads: h,
        limit: route.view === 'solidity' ? Math.min(h.head, h.solidified + early) : h.head,
        params: read.params,
        fromQuery: read.fromQuery,
        chain: deps.chain,
        faults: deps.faults,
        txBlock: deps.txBlock,
        schedule: deps.schedule,
        sr: deps.sr(),
      });
      send(res, status, body);
    } catch (err) {
      if (err instanceof JavaError) return send(res, 200, err.message);
      const msg = err instanceof Error ? err.message : String(err);
      send(res, 500, javaError('java.lang.RuntimeException', msg));
    }
  }

  return (req, res) => {
    const rec: ReplayRequestRecord = { at: deps.clock(), path: '', status: 0 };
    if (deps.log) {
      deps.log.push(rec);
      res.once('finish', () => {
        rec.status = res.statusCode;
      });
    }
    handle(req, res, rec).catch((err: unknown) => {
      const msg = err instanceof Error ? err.message : String(err);
      send(res, 500, javaError('java.lang.RuntimeException', msg));
    });
  };
}

/**
 * The parameters of a GET or POST request. GET: the query string. POST: a JSON body (over any
 * query string), or the query string alone when the body is empty (then absent fields take
 * java-tron's protobuf defaults). `refused`: the answer instead — 413 for a body above
 * MAX_BODY_BYTES (1 MiB), HTTP 200 fastjson error for a body that is not a JSON object.
 * Rejects when the request stream errors.
 */
async function readParams(
  req: IncomingMessage,
  url: URL,
): Promise<{ params: Params; fromQuery: boolean } | { refused: Answer }> {
  const params: Params = Object.fromEntries(url.searchParams);
  let fromQuery = req.method === 'GET' || url.searchParams.size > 0;
  if (req.method === 'POST') {
    const body = await readBody(req);
    if (body === undefined) return { refused: [413, '{"Error":"request body too large"}\n'] };
    if (body.trim() !== '') {
      let parsed: unknown;
      try {
        parsed = JSON.parse(body);
      } catch (err) {
        const msg = err instanceof Error ? err.message : String(err);
        return { refused: [200, javaError('com.alibaba.fastjson.JSONException', msg)] };
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        return {
          refused: [200, javaError('com.alibaba.fastjson.JSONException', 'syntax error, expect {')],
        };
      }
      Object.assign(params, parsed);
      fromQuery = false;
    }
  }
  return { params, fromQuery };
}

/** The body as UTF-8; undefined (and the request destroyed) above MAX_BODY_BYTES. */
function readBody(req: IncomingMessage): Promise<string | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        resolve(undefined);
        req.destroy();
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

/** Send a JSON answer with its content-length; nothing when the response is gone or started. */
function send(
  res: ServerResponse,
  status: number,
  body: Buffer | string,
  headers: Record<string, string> = {},
): void {
  if (res.destroyed || res.headersSent) return;
  const buf = typeof body === 'string' ? Buffer.from(body) : body;
  res.writeHead(status, { ...JSON_HEADERS, ...headers, 'content-length': buf.length });
  res.end(buf);
}

// ---------------------------------------------------------------------------------------------
// Step 7: server start and stop

/**
 * An HTTP server with `onRequest`, listening on `host:port` (port 0 = a free one), idle
 * connections kept 30 s. Rejects with the listen error (EADDRINUSE…) when it cannot bind.
 */
async function listen(
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
  port: number,
  host: string,
): Promise<Server> {
  const server: Server = createServer(onRequest);
  // Keep idle connections 30 s (Node's default is 5 s), as the node client's agent does.
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  return server;
}

/** Release pending delayed answers, stop listening and drop every connection. */
function stop(server: Server, faults: FaultInjector): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    faults.releaseDelays();
    server.close((err) => (err ? reject(err) : resolve()));
    server.closeAllConnections();
  });
}

/**
 * The `BlockExtention` of a block from its JSON (protocol api.proto: transactions 1
 * (TransactionExtention {transaction 1, txid 2, result 4 {result 1: true}}), block_header 2
 * (BlockHeader {raw_data 1, witness_signature 2}), blockid 3), as java-tron's GetBlockByNum2
 * answers it. Exact when the JSON carries every byte (fillers, synthetic blocks).
 * @throws Error when a transaction's `ret` or the header cannot be encoded.
 */
export function encodeBlockExtention(text: string): Buffer {
  const block = parseNodeJson(text) as {
    blockID?: string;
    block_header?: { raw_data?: Record<string, unknown>; witness_signature?: string };
    transactions?: TransactionJson[];
  };
  const raw = block.block_header?.raw_data ?? {};
  const w = new PbWriter();
  const ok = new PbWriter().varint(1, 1).finish(); // Return {result: true}
  for (const tx of block.transactions ?? []) {
    const bytes = encodeTransactionFromJson(tx);
    if (!bytes) throw new Error(`transaction ${tx.txID}: its ret cannot be encoded from JSON`);
    const ext = new PbWriter()
      .bytes(1, bytes)
      .bytes(2, Buffer.from(tx.txID, 'hex'))
      .bytes(4, ok)
      .finish();
    w.bytes(1, ext, true);
  }
  const header = new PbWriter()
    .bytes(1, encodeHeaderRaw(raw, Number(raw.number ?? 0)))
    .bytes(2, Buffer.from(block.block_header?.witness_signature ?? '', 'hex'))
    .finish();
  w.bytes(2, header).bytes(3, Buffer.from(block.blockID ?? '', 'hex'));
  return Buffer.from(w.finish());
}

/**
 * The gRPC service (module doc): GetBlockByNum2 of the solidity service and of the full node
 * (`protocol.Wallet`) on a free port of `host`, through the same counters, scripted rate limit
 * (RESOURCE_EXHAUSTED), faults (UNAVAILABLE, or an empty answer) and request log as the HTTP
 * API; an empty `BlockExtention` above the view's head (solidified, or full-node).
 */
async function listenGrpc(
  deps: RouterDeps,
  host: string,
  port: number,
): Promise<{ port: number; close(): Promise<void> }> {
  const server = new GrpcServer();
  const identity = (b: Buffer) => b;
  const method = (path: string) => ({
    GetBlockByNum2: {
      path,
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  });
  /**
   * GetBlockByNum2 of one view: the solidity service's (up to the solidified head, or
   * `early` above it) or the full node's (`protocol.Wallet`, up to the full-node head).
   */
  const handler =
    (full: boolean) =>
    (
      call: { request: Buffer },
      callback: (err: Partial<ServiceError> | null, value?: Buffer) => void,
    ) => {
      const path = full ? 'grpc Wallet/GetBlockByNum2' : 'grpc GetBlockByNum2';
      const rec: ReplayRequestRecord = { at: deps.clock(), path, status: 200 };
      deps.log?.push(rec);
      deps.stats.requests.total++;
      deps.stats.requests.byPath[path] = (deps.stats.requests.byPath[path] ?? 0) + 1;
      const fail = (code: number, details: string, httpLike: number) => {
        rec.status = httpLike;
        callback({ code, details });
      };
      if (deps.limiter.admit()) {
        deps.stats.rateLimited++;
        return fail(grpcStatus.RESOURCE_EXHAUSTED, 'rate limit exceeded (scripted)', 429);
      }
      let n: number;
      try {
        n = Number(pbVarint(pbFields(call.request), 1));
      } catch {
        return fail(grpcStatus.INVALID_ARGUMENT, 'malformed NumberMessage', 400);
      }
      rec.num = n;
      const h = deps.heads();
      if (n > (full ? h.head : Math.min(h.head, h.solidified + deps.early())))
        return callback(null, Buffer.alloc(0));
      // Faults apply to solidified blocks, as over HTTP.
      const fault =
        full && n > h.solidified ? Promise.resolve(undefined) : deps.faults.draw('block');
      fault
        .then(async (f) => {
          if (f?.status === 503) return fail(grpcStatus.UNAVAILABLE, 'injected fault', 503);
          if (f) return callback(null, Buffer.alloc(0));
          const entry = await deps.chain.blockOf(n);
          if (entry.exact) return callback(null, entry.exact);
          // Never re-encoded bytes presented as exact: a recorded block without its .bin has
          // no gRPC answer here.
          if (!entry.exactFromJson) {
            return fail(
              grpcStatus.NOT_FOUND,
              `no exact bytes recorded for block ${n} (blockext-${n}.bin)`,
              404,
            );
          }
          callback(null, encodeBlockExtention(entry.block.toString('utf8')));
        })
        .catch((err: unknown) =>
          fail(grpcStatus.INTERNAL, err instanceof Error ? err.message : String(err), 500),
        );
    };
  server.addService(method(GET_BLOCK_BY_NUM2), { GetBlockByNum2: handler(false) });
  server.addService(method(GET_FULL_BLOCK_BY_NUM2), { GetBlockByNum2: handler(true) });
  const bound = await new Promise<number>((resolve, reject) => {
    server.bindAsync(
      `${host.includes(':') ? `[${host}]` : host}:${port}`,
      ServerCredentials.createInsecure(),
      (err, p) => (err ? reject(err) : resolve(p)),
    );
  });
  return {
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => {
          server.forceShutdown();
          resolve();
        }, 1000).unref();
      }),
  };
}

// ---------------------------------------------------------------------------------------------
// CLI

export interface ReplayNodeCliOptions {
  /** Folder in the `chain/` layout. */
  dir: string;
  /** TCP port; 0 = a free one (printed). */
  port: number;
  /** ms per block. */
  intervalMs: number;
  /** Default 18. */
  lag?: number;
  /** Default lag + 10. */
  startBefore?: number;
  /** Default 127.0.0.1. */
  host?: string;
  instant?: boolean;
  stopAtEnd?: boolean;
  /** Also serve gRPC GetBlockByNum2 (its address is printed as `grpc`). Default false. */
  grpc?: boolean;
  /** Log a progress line every this many solidified blocks. Default 20 (1 min at 3 s). */
  progressEvery?: number;
  /**
   * Write the node's checkpoint (replayCheckpoint: what a light client proves this chain from)
   * to this file as JSON, for TRON_LIGHT_CLIENT_CHECKPOINT. Refused (the node stops, the promise
   * rejects) when the source's first block cannot anchor one.
   */
  checkpointOut?: string;
  /** Stops the node as SIGINT/SIGTERM do (tests, embedding). */
  signal?: AbortSignal;
  logger?: Logger;
  /** Where the startup JSON line goes. Default process.stdout. */
  out?: NodeJS.WritableStream;
}

/**
 * `tronwatch replay-node`: serve `dir`, write its checkpoint to `checkpointOut` if asked, print
 * `{"url","first","last"[,"grpc"]}` as one JSON line on stdout, log progress to stderr, and stop
 * on SIGINT/SIGTERM (or `signal`).
 * Resolves once the server is closed; rejects when it cannot start or write the checkpoint.
 */
export async function runReplayNodeCli(opts: ReplayNodeCliOptions): Promise<void> {
  const logger = opts.logger ?? createLogger('info', 'replay-node');
  const out = opts.out ?? process.stdout;
  const node = await startReplayNode({
    source: dirSource(opts.dir),
    port: opts.port,
    intervalMs: opts.intervalMs,
    ...(opts.lag !== undefined ? { lag: opts.lag } : {}),
    ...(opts.startBefore !== undefined ? { startBefore: opts.startBefore } : {}),
    ...(opts.host !== undefined ? { host: opts.host } : {}),
    ...(opts.instant !== undefined ? { instant: opts.instant } : {}),
    ...(opts.stopAtEnd !== undefined ? { stopAtEnd: opts.stopAtEnd } : {}),
    ...(opts.grpc ? { grpc: true } : {}),
  });
  if (opts.checkpointOut !== undefined) {
    try {
      if (!node.checkpoint) {
        throw new CheckpointError(
          `${opts.dir}: its first block ${node.first} anchors no checkpoint (replayCheckpoint)`,
        );
      }
      await writeFile(opts.checkpointOut, `${JSON.stringify(node.checkpoint, null, 2)}\n`);
    } catch (err) {
      await node.close();
      throw err;
    }
  }
  out.write(
    `${JSON.stringify({ url: node.url, first: node.first, last: node.last, ...(node.grpcUrl ? { grpc: node.grpcUrl } : {}) })}\n`,
  );
  const every = Math.max(1, opts.progressEvery ?? 20);
  let lastLogged = node.heads().solidified;
  logger.info(
    { url: node.url, first: node.first, last: node.last, ...node.heads() },
    'replay node listening',
  );

  const tick = () => {
    const h = node.heads();
    if (h.solidified === lastLogged) return;
    const crossed = Math.floor(h.solidified / every) !== Math.floor(lastLogged / every);
    const enteredRange = lastLogged < node.first && h.solidified >= node.first;
    const leftRange = lastLogged < node.last && h.solidified >= node.last;
    if (crossed || enteredRange || leftRange) {
      const phase =
        h.solidified < node.first ? 'before' : h.solidified <= node.last ? 'recorded' : 'after';
      logger.info(
        { solidified: h.solidified, head: h.head, first: node.first, last: node.last, phase },
        'replay progress',
      );
    }
    lastLogged = h.solidified;
  };
  const timer = setInterval(tick, Math.max(100, Math.min(opts.intervalMs || 1000, 1000)));

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      opts.signal?.removeEventListener('abort', stop);
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
    opts.signal?.addEventListener('abort', stop, { once: true });
    if (opts.signal?.aborted) stop();
  });
  clearInterval(timer);
  logger.info(node.heads(), 'replay node stopping');
  await node.close();
}
