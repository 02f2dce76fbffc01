/**
 * `npm run soak` (issue 14 item 4): a chaos soak of the whole service as separate processes.
 *
 * What runs: two `ingest`, two `worker` and two `api` processes (`node --import tsx src/main.ts
 * <role>`) on real PostgreSQL and Redis; three replay nodes (in this process) revealing one
 * synthetic chain, written to a temporary folder in the `chain/` layout and served from those
 * files, one block every `intervalMs`, read as three providers with a quorum of two
 * (TRON_NODE_URL, TRON_NODE_QUORUM) and misbehaving as NODE_PHASES says (503s and empty answers,
 * a stall past the client's timeout, a provider falling behind, one refusing with 403, one dying);
 * an HTTPS receiver in this process that answers 500 to about 14 % of
 * requests, holds about 3 % past the webhook timeout and closes the connection without an answer
 * on about 3 % (20 % in all, drawn from a seeded PRNG; an event's 4th and later requests always
 * succeed, so the receiver alone never makes one fail six times and go DEAD: only attempts lost
 * in flight by killed workers could add the rest). Watches
 * are created through the public API, two thirds before the chain's first block, the rest while
 * it runs. An API client (in this process) keeps three GET requests going all along and sends
 * every request to the running API processes in turn, retrying on the next one what a killed
 * process lost (and refusals, 5xx, 429), counting them.
 *
 * The chaos: a loop SIGKILLs a process every 2–5 s (pause and target seeded; each run of three
 * kills hits an ingest, a worker and an API process in a seeded order, the target drawn among
 * those that finished starting; an API process only while the other one runs, once the client
 * awaits an answer from it) and
 * restarts it at once, `kills` times (100 by default). A process that exits by itself is
 * restarted 1 s later, as a supervisor would;
 * exiting at start is counted (none expected: a process started while PostgreSQL is down waits for
 * it), exiting once running is a crash and fails the soak. On its own servers (the default: a
 * throwaway PostgreSQL 15 and redis-server from test/helpers/servers.ts, in a temporary folder, on
 * free ports of 127.0.0.1, never the machine's shared ones) it also SIGKILLs and restarts Redis
 * once (at 40 % of the kills) and the PostgreSQL postmaster once (at 60 %: SIGKILL, no shutdown
 * at all, down 3 s, start with crash recovery). With
 * `servers: { databaseUrl, redisUrl }` it uses those and restarts neither.
 *
 * The check, at the end, once the ingest cursor passed the chain's last block and no notification
 * is PENDING (or either stopped moving for 120 s): the expected events are computed here, independently of
 * src/ingest, from the generator's own list of the transfers it put in the chain files
 * (`syntheticBlock(...).transfers`) and this file's own matching loop over the watches as stored
 * (address, filters and `active_from_block` read from the database); then
 * - stored events = expected, exactly: 0 missing, 0 extra, 0 duplicated (and one notification each);
 * - every stored event acknowledged (2xx) at least once by the receiver with valid signatures (the
 *   X-Signature and the Standard Webhooks one), its body the stored event; requests with a bad
 *   signature 0; deliveries acknowledged more than once counted (at-least-once: a worker killed
 *   after sending and before recording sends again);
 * - DEAD counted too: an event whose notification went DEAD without being acknowledged fails the
 *   soak like any unacknowledged one (the receiver never fails an event's fourth request, and a
 *   claim lost before its attempt started does not count: migration 014);
 * - nothing PENDING and overdue (due more than 10 s ago and not taken);
 * - `GET /v1/events`, paged with `next_before` (limit 200, through the API client), returns the
 *   whole set: no repeat, none missing, none extra;
 * - every API request answered in the end (none failed after API_PATIENCE_MS of retries), each
 *   with the status expected;
 * - test mode (issue 32; {@link TestModeFigures}): a `tw_test_` key of the same account has three
 *   test watches (on live watches' addresses) whose receivers check both signatures; it triggers a
 *   deposit with POST /v1/test/transfers before the kill loop and after every kill, each with an
 *   amount of its own. Every triggered event id is stored exactly once with one notification and
 *   acknowledged; every stored test event is one of them or a lost answer's (same watch and
 *   amount), acknowledged too; deliveries carry `Tronwatch-Test-Mode: true` and `livemode: false`
 *   exactly when they are test events; GET /v1/events lists exactly the test events with the test
 *   key and none of them with the live key (the load loop alternates the keys, and each answer is
 *   checked); a live key's test deposit (403) and the test key naming a live watch (404) are
 *   refused. The live figures (expected, stored, acknowledged, paged) count live events only.
 * The last line printed is the figures and PASS or FAIL (exit code 0 or 1).
 *
 * Usage: `npm run soak -- [--seed N] [--kills N] [--blocks N] [--interval-ms N] [--tx-per-block N]`.
 * Logs of every process go to a temporary folder, removed on PASS and kept (its path printed) on
 * FAIL. Everything started is stopped at the end, on failure too (a shutdown registry).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import readline from 'node:readline';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';
import pg from 'pg';
import { Webhook } from 'standardwebhooks';
import { accountsCreate, keysCreate } from '../src/accounts/cli.js';
import { SecretBox } from '../src/common/secrets.js';
import { Shutdown } from '../src/common/shutdown.js';
import { migrate } from '../src/db/migrate.js';
import { type Db, openDb } from '../src/db/pool.js';
import { writeDevnetCheckpoint } from '../src/devnet/pin.js';
import { type Receiver, startReceiver } from '../src/devnet/receiver.js';
import { dirSource, type ReplayNode, startReplayNode } from '../src/devnet/replay-node.js';
import { writeSyntheticChain } from '../src/devnet/synth-dir.js';
import {
  type SyntheticChainOptions,
  syntheticAddresses,
  syntheticBlock,
} from '../src/devnet/synthetic.js';
import { hexToBase58 } from '../src/tron/address.js';
import type { Transfer } from '../src/tron/types.js';
import { throwawayPostgres, throwawayRedis } from '../test/helpers/servers.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

export interface SoakOptions {
  /** PRNG seed of the kill loop, the receiver's faults and the chain. */
  seed: number;
  /** SIGKILLs of an ingest, worker or API process (each restarted at once; the roles in turn). */
  kills: number;
  /** Blocks in the synthetic chain. */
  blocks: number;
  /** One block per this many ms; default: the chain spans the kill loop (3.5 s per kill on average). */
  intervalMs?: number;
  /** Transactions per synthetic block. Default 120. */
  txPerBlock?: number;
  /** Pause between kills, ms, drawn uniformly in [min, max]. Default 2000–5000. */
  killEveryMs?: [number, number];
  /** 'own' (default): throwaway servers, restarted once each; or existing ones (no restarts). */
  servers?: 'own' | { databaseUrl: string; redisUrl: string | undefined };
  /** Progress lines (default: stdout). */
  print?: (line: string) => void;
}

export interface SoakFigures {
  seed: number;
  kills: { ingest: number; ingestLeader: number; worker: number; api: number };
  /** Server restarts: Redis (SIGKILL) and PostgreSQL (SIGKILL of the postmaster). */
  restarts: { redis: number; postgres: number };
  /**
   * The soak's API client: logical requests, those retried at least once, and why attempts were
   * retried (the answer lost in flight: the API killed mid-request, or no answer in 10 s; the
   * connection refused: an API gone; 5xx: PostgreSQL down; 429); `failed`: requests with no
   * answer after API_PATIENCE_MS of retries; `unexpected`: answers with another status than the one
   * expected; `recoveredSecrets`: watches created by a request whose answer was lost (the retry
   * got 409), their secret read from the database as the operator can.
   */
  api: {
    requests: number;
    retried: number;
    lost: number;
    refused: number;
    serverErrors: number;
    rateLimited: number;
    failed: number;
    unexpected: number;
    recoveredSecrets: number;
  };
  /**
   * The node providers' faults: 503s and empty answers (provider 1, the whole run), answers
   * held past the client's timeout, 403s (provider 2, in phases), and whether provider 3 died;
   * `phases`: the fault phases applied, of NODE_PHASES.
   */
  node: {
    providers: number;
    quorum: number;
    status503: number;
    empty: number;
    stalled: number;
    refused: number;
    providerDied: boolean;
    phases: number;
  };
  /** Processes that exited by themselves once running (each is restarted; any fails the soak). */
  crashes: number;
  /** Processes that exited by themselves while starting, restarted (0 expected: they wait). */
  startFailures: number;
  blocks: number;
  watches: number;
  expected: number;
  stored: number;
  missing: number;
  extra: number;
  duplicated: number;
  /** Events whose notification count is not 1. */
  notificationMismatch: number;
  /** Stored events acknowledged (2xx) at least once with valid signatures and the stored body. */
  acknowledged: number;
  /** Stored events never acknowledged, DEAD ones included: every event must reach its receiver. */
  unacknowledged: number;
  /** Acknowledgements beyond the first, summed over events. */
  duplicateDeliveries: number;
  requests: number;
  faults: { status500: number; hang: number; reset: number };
  badSignatures: number;
  /** Received bodies that are not the stored event of their X-Event-Id. */
  bodyMismatch: number;
  dead: number;
  pending: number;
  overdue: number;
  /** Attempts recorded as lost leases (a worker killed while holding the notification). */
  lostLeases: number;
  paged: number;
  pageRepeats: number;
  pageMissing: number;
  pageExtra: number;
  cursorReachedEnd: boolean;
  /** Test mode (issue 32): deposits triggered with a test key, and what must never cross. */
  test: TestModeFigures;
  seconds: number;
}

/**
 * Test mode's figures (issue 32): the soak's test key triggers deposits with POST
 * /v1/test/transfers on test watches (one before the kill loop, then one after each kill), each
 * with an amount of its own so that one whose answer was lost can be told apart. The live figures
 * above (expected, stored, acknowledged, paged) count live (mainnet) events only.
 */
export interface TestModeFigures {
  /** Test watches (created with the test key; their receivers check both signatures). */
  watches: number;
  /** POST /v1/test/transfers answered 201 (each a triggered deposit with its event id). */
  triggered: number;
  /** Of those, retried after an answer lost in flight (an earlier attempt may have stored one). */
  lostAnswers: number;
  /** Test events stored (network nile). */
  stored: number;
  /** Triggered event ids not stored. */
  missing: number;
  /** Triggered event ids stored more than once, summed beyond the first (0: ids are unique). */
  duplicated: number;
  /** Stored test events of a trigger whose answer was lost (its first attempt's): delivered too. */
  fromLostAnswers: number;
  /** Stored test events that no trigger explains (e.g. a live transfer matched to a test watch). */
  unexplained: number;
  /** Test events whose notification count is not 1. */
  notificationMismatch: number;
  /** Stored test events acknowledged (2xx) at least once with valid signatures. */
  acknowledged: number;
  unacknowledged: number;
  dead: number;
  /** Acknowledgements beyond the first of one event id (at-least-once; a receiver dedupes by id). */
  duplicateDeliveries: number;
  /** Deliveries whose `Tronwatch-Test-Mode` header or `livemode` disagrees with the event's network. */
  headerMismatch: number;
  /** GET /v1/events with the test key, every page, at the end: event ids listed. */
  listed: number;
  /** Stored test events the test key's listing lacks, and ids it lists that are not test events. */
  listedMissing: number;
  listedExtra: number;
  /** Live events in the test key's final listing; test events in the live key's. */
  liveInTestListing: number;
  testInLiveListing: number;
  /**
   * During the run, GET /v1/events answers (the load loop alternates the keys) holding an event of
   * the other environment.
   */
  crossingsDuringRun: number;
  /** A live key's POST /v1/test/transfers (403 expected) and the test key naming a live watch
   * (404 expected): answers other than refusals. */
  crossAccepted: number;
  /** Refusals of those two crossings as expected. */
  crossRefused: number;
}

export interface SoakResult {
  pass: boolean;
  figures: SoakFigures;
  /** The summary line (also printed last). */
  line: string;
  /** Process logs, kept when the soak failed. */
  logDir: string;
}

// ---------------------------------------------------------------------------------------------
// Small tools

/** mulberry32: a seeded PRNG in [0, 1). */
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

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Retry `f` until it resolves or `ms` passed (PostgreSQL may be restarting). */
async function retrying<T>(what: string, f: () => Promise<T>, ms = 60_000): Promise<T> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      return await f();
    } catch (err) {
      if (Date.now() > end) throw new Error(`${what}: ${(err as Error).message}`);
      await sleep(250);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Throwaway servers

interface Servers {
  databaseUrl: string;
  redisUrl: string | undefined;
  restartPostgres?: () => Promise<void>;
  restartRedis?: () => Promise<void>;
}

/**
 * PostgreSQL 15 and redis-server of our own in `dir` (test/helpers/servers.ts), on free ports of
 * 127.0.0.1; registered in `shutdown` for the stop.
 */
async function startOwnServers(dir: string, shutdown: Shutdown): Promise<Servers> {
  const postgres = await throwawayPostgres({ dir });
  shutdown.add('postgres', () => postgres.close());
  const admin = new pg.Client({ connectionString: postgres.url() });
  await admin.connect();
  await admin.query('CREATE DATABASE tronwatch_soak');
  await admin.end();
  const redis = await throwawayRedis({ dir });
  shutdown.add('redis', () => redis.close());
  return {
    databaseUrl: postgres.url('tronwatch_soak'),
    redisUrl: redis.url,
    restartPostgres: async () => {
      // SIGKILL of the postmaster, as a crash or the OOM killer would: no shutdown at all.
      await postgres.kill();
      await sleep(3_000);
      await postgres.start();
    },
    restartRedis: async () => {
      await redis.stop();
      await sleep(2_000);
      await redis.start();
    },
  };
}

/**
 * How long the soak's API client retries one request (answers lost, refused, 5xx, 429) before it
 * counts it as failed: a restart takes minutes on a loaded machine, and both API processes may be
 * restarting at once.
 */
const API_PATIENCE_MS = 600_000;

// ---------------------------------------------------------------------------------------------
// Node providers' faults

/** TRON_NODE_TIMEOUT_MS of the soak's processes: a stalled provider is given up after 5 s. */
const NODE_TIMEOUT_MS = 5_000;

/** Provider 1's faults, the whole run: 5 % of block and receipt answers 503, 5 % empty. */
const PROVIDER_1_FAULTS = { errorRate: 0.05, emptyRate: 0.05 };

/** One change of the providers' behaviour, when `at` of the chain has been ingested. */
interface NodePhase {
  /** Fraction of the chain's blocks ingested (the ingest cursor), in [0, 1). */
  at: number;
  what: string;
  act: (nodes: readonly ReplayNode[]) => void | Promise<void>;
}

/**
 * The node providers' misbehaviour over the chain (provider 1 also answers 503 or empty to 10 %
 * of block requests throughout, PROVIDER_1_FAULTS): provider 2 stalls (its block answers held
 * past the client's timeout), then falls behind (its heads stand still), catches up and refuses
 * everything with 403 (a revoked key), then serves again; provider 3 dies (its server closed, for
 * good), leaving two providers for a quorum of two.
 */
export const NODE_PHASES: readonly NodePhase[] = [
  {
    at: 0.1,
    what: `provider 2 stalls (block answers held ${NODE_TIMEOUT_MS * 2} ms, past the timeout)`,
    act: ([, p2]) => p2?.setFaults({ delayMs: NODE_TIMEOUT_MS * 2 }),
  },
  {
    at: 0.25,
    what: 'provider 2 answers at once again but falls behind (its heads stand still)',
    act: ([, p2]) => {
      p2?.setFaults(undefined);
      p2?.pause();
    },
  },
  {
    at: 0.35,
    what: 'provider 2 catches up, then refuses every request with 403',
    act: ([p1, p2]) => {
      p2?.resume();
      p2?.advanceTo(p1?.heads().solidified ?? 0);
      p2?.setRateLimit({ perSecond: 1, status: 403, retryAfterSeconds: 1, refuseAll: true });
    },
  },
  {
    at: 0.45,
    what: 'provider 2 accepts requests again',
    act: ([, p2]) => p2?.setRateLimit(undefined),
  },
  {
    at: 0.65,
    what: 'provider 3 dies',
    act: async ([, , p3]) => {
      await p3?.close();
    },
  },
];

// ---------------------------------------------------------------------------------------------
// tronwatch processes

type Role = 'ingest' | 'worker' | 'api';

interface Proc {
  name: string;
  role: Role;
  child: ChildProcess;
  exit: Promise<number | null>;
  /** The API's base URL ('api listening'). */
  url: string | undefined;
  running: boolean;
  leader: boolean;
  /** Stopped by the soak (a kill or the final SIGTERM), not by itself. */
  stopped: boolean;
  /** The last few stderr lines (what a crash said). */
  tail: string[];
}

function spawnRole(
  name: string,
  role: Role,
  env: Record<string, string>,
  log: fs.WriteStream,
): Proc {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/main.ts'), role], {
    cwd: ROOT,
    env: { ...process.env, LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const p: Proc = {
    name,
    role,
    child,
    exit: new Promise((r) => child.on('exit', (code) => r(code))),
    url: undefined,
    running: false,
    leader: false,
    stopped: false,
    tail: [],
  };
  log.write(`${JSON.stringify({ soak: 'start', proc: name, pid: child.pid, at: new Date() })}\n`);
  const lines = readline.createInterface({ input: child.stderr as NodeJS.ReadableStream });
  lines.on('line', (line) => {
    log.write(`${name} ${line}\n`);
    p.tail.push(line);
    if (p.tail.length > 6) p.tail.shift();
    let msg: unknown;
    let url: unknown;
    try {
      ({ msg, url } = JSON.parse(line) as { msg?: unknown; url?: unknown });
    } catch {
      return;
    }
    if (msg === 'api listening' && typeof url === 'string') p.url = url;
    else if (msg === 'tronwatch running') p.running = true;
    else if (msg === 'ingest leader acquired') p.leader = true;
    else if (typeof msg === 'string' && msg.startsWith('ingest leadership lost')) p.leader = false;
  });
  return p;
}

async function killHard(p: Proc): Promise<void> {
  p.stopped = true;
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
  await p.exit;
}

// ---------------------------------------------------------------------------------------------
// Watches and the expected events

interface WatchPlan {
  address: string; // 41-hex
  asset: 'ALL' | 'USDT' | 'TRX';
  direction: 'both' | 'incoming' | 'outgoing';
}

interface StoredWatch {
  id: string;
  address_hex: string;
  asset_filter: 'ALL' | 'USDT' | 'TRX';
  direction: 'both' | 'incoming' | 'outgoing';
  active_from_block: number;
}

/**
 * Watches on the chain's population: `hot` of its busiest 1 % (two watches each, different
 * filters) and `cold` ordinary addresses, filters cycling.
 */
function planWatches(chain: SyntheticChainOptions, from: number, hot: number, cold: number) {
  const all = syntheticAddresses(chain);
  const hotCount = Math.max(1, Math.floor(all.length / 100));
  const assets = ['ALL', 'USDT', 'TRX'] as const;
  const dirs = ['both', 'incoming', 'outgoing'] as const;
  const out: WatchPlan[] = [];
  for (let i = 0; i < hot; i++) {
    const a = all[(from + i) % hotCount] ?? '';
    out.push({ address: a, asset: assets[i % 3] ?? 'ALL', direction: dirs[(i + 1) % 3] ?? 'both' });
    out.push({ address: a, asset: assets[(i + 1) % 3] ?? 'ALL', direction: dirs[i % 3] ?? 'both' });
  }
  for (let i = 0; i < cold; i++) {
    const a = all[hotCount + from * 7 + i * 13] ?? '';
    out.push({ address: a, asset: assets[i % 3] ?? 'ALL', direction: dirs[(i + 2) % 3] ?? 'both' });
  }
  return out;
}

/** The soak's own key of an event: watch, transfer, side, asset and amount. */
function eventKey(e: {
  watchId: string;
  txId: string;
  eventIndex: number;
  direction: string;
  asset: string;
  amountRaw: string;
}): string {
  return `${e.watchId}|${e.txId}|${e.eventIndex}|${e.direction}|${e.asset}|${e.amountRaw}`;
}

/** SPEC's matching rule, written here (not src/ingest/match.ts): one key per expected event. */
function expectedKeys(transfers: readonly Transfer[], watches: readonly StoredWatch[]): string[] {
  const out: string[] = [];
  for (const t of transfers) {
    for (const w of watches) {
      if (t.blockNumber <= w.active_from_block) continue; // no retroactive matching
      if (w.asset_filter !== 'ALL' && w.asset_filter !== t.asset) continue;
      // A self-transfer on a `both` watch is one event, incoming (README's decisions).
      const incoming = t.to === w.address_hex && w.direction !== 'outgoing';
      const outgoing = t.from === w.address_hex && w.direction !== 'incoming';
      if (!incoming && !outgoing) continue;
      out.push(
        eventKey({
          watchId: w.id,
          txId: t.txId,
          eventIndex: t.eventIndex,
          direction: incoming ? 'incoming' : 'outgoing',
          asset: t.asset,
          amountRaw: t.amountRaw.toString(),
        }),
      );
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// The soak

export async function runSoak(opts: SoakOptions): Promise<SoakResult> {
  const started = Date.now();
  const print = opts.print ?? ((l: string) => console.log(l));
  const txPerBlock = opts.txPerBlock ?? 120;
  const [killMin, killMax] = opts.killEveryMs ?? [2_000, 5_000];
  const intervalMs =
    opts.intervalMs ??
    Math.max(50, Math.round((opts.kills * (killMin + killMax)) / 2 / Math.max(1, opts.blocks)));
  // Two streams: the kill loop's (its targets and pauses repeat for a seed) and the receiver's
  // (drawn in request arrival order, which no seed fixes).
  const rand = prng(opts.seed);
  const faultRand = prng(opts.seed ^ 0x5bd1e995);
  const shutdown = new Shutdown();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-soak-'));
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-soak-logs-'));
  // Ctrl-C or SIGTERM stops everything started so far (servers included), then exits.
  const onSignal = () => void shutdown.kill().then(() => process.exit(130));
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  shutdown.add('signal handlers', () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  });
  shutdown.add('work folder', () => fs.rmSync(work, { recursive: true, force: true }));
  const procs: Proc[] = [];
  let pass = false;
  try {
    print(
      `soak: seed ${opts.seed}, ${opts.kills} kills every ${killMin}-${killMax} ms, ${opts.blocks} blocks of ${txPerBlock} txs, one every ${intervalMs} ms; work ${work}, logs ${logDir}`,
    );
    // Servers.
    let servers: Servers;
    if (opts.servers === undefined || opts.servers === 'own') {
      // A folder of its own: `work` is private to us, and the server runs as `postgres`.
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tw-soak-servers-'));
      shutdown.add('servers folder', () => fs.rmSync(dir, { recursive: true, force: true }));
      servers = await startOwnServers(dir, shutdown);
      print(`soak: own servers: ${servers.databaseUrl}, ${servers.redisUrl}`);
    } else {
      servers = { ...opts.servers };
    }
    const db: Db = await openDb({ url: servers.databaseUrl, embeddedDir: '', poolSize: 3 });
    shutdown.add('soak pool', () => db.close());
    await migrate(db);

    // The chain, its ground truth, the replay node.
    const chain: SyntheticChainOptions = {
      seed: opts.seed,
      firstBlock: 76_000_000,
      txPerBlock,
      addresses: 2_000,
    };
    const first = chain.firstBlock ?? 0;
    const last = first + opts.blocks - 1;
    const chainDir = path.join(work, 'chain');
    const written = await writeSyntheticChain(chain, opts.blocks, chainDir);
    const plans1 = planWatches(chain, 0, 6, 10);
    const plans2 = planWatches(chain, 6, 3, 5);
    const watched = new Set([...plans1, ...plans2].map((w) => w.address));
    const transfers: Transfer[] = [];
    for (let n = first; n <= last; n++) {
      for (const t of syntheticBlock(chain, n).transfers)
        if (watched.has(t.from) || watched.has(t.to)) transfers.push(t);
    }
    print(
      `soak: chain written: ${written.blocks} blocks, ${written.transfers} transfers (${transfers.length} touch a watched address)`,
    );
    // Three node providers (replay nodes in this process: their few requests per block cost
    // little), read with a quorum of two (TRON_NODE_URL, TRON_NODE_QUORUM). They start long
    // before the chain's first block and jump to it together once the first watches exist, so
    // the chain is revealed while the kill loop runs; NODE_PHASES then makes them misbehave.
    const lag = 18;
    const nodes: ReplayNode[] = [];
    for (let i = 0; i < 3; i++) {
      const n = await startReplayNode({
        source: dirSource(chainDir),
        intervalMs,
        lag,
        startBefore: 1_000,
      });
      shutdown.add(`replay node ${i + 1}`, () => n.close());
      nodes.push(n);
    }
    const nodeFaults = {
      providerDied: false,
      phases: 0,
      status503: 0,
      empty: 0,
      stalled: 0,
      refused: 0,
    };

    // The receiver: seeded faults, signatures checked twice, acknowledgements counted.
    const secrets = new Map<string, string>(); // path label → whsec_
    const figures = { requests: 0, status500: 0, hang: 0, reset: 0, badSignatures: 0 };
    const acked = new Map<string, number>(); // event id → 2xx answers
    let testModeHeaderMismatch = 0;
    const bodies = new Map<string, Set<string>>(); // event id → keys of the bodies received
    // A generous webhook timeout: the receiver shares this process with the replay nodes and the
    // API client, and a starved event loop must not make deliveries fail (the soak's 'hang'
    // faults are held past it).
    const timeoutMs = 10_000;
    const receiver: Receiver = await startReceiver({
      record: false,
      secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
      respond: (req, { nth }) => {
        figures.requests++;
        const secret = secrets.get(req.path.split('/').pop() ?? '');
        let standard = false;
        try {
          if (secret) {
            new Webhook(secret).verify(req.body, req.headers as Record<string, string>);
            standard = true;
          }
        } catch {
          standard = false;
        }
        if (!req.verified || !standard || !req.eventId) {
          figures.badSignatures++;
          return 401;
        }
        const e = req.event ?? {};
        // Test mode: a test event (livemode false, network nile) carries Tronwatch-Test-Mode:
        // true; a live one neither.
        const testHeader = req.headers['tronwatch-test-mode'] === 'true';
        const isTest = e.livemode === false && e.network === 'nile';
        if (testHeader !== isTest || (!isTest && (e.livemode !== true || e.network !== 'mainnet')))
          testModeHeaderMismatch++;
        const key = eventKey({
          watchId: String(e.watch_id),
          txId: String(e.tx_id),
          eventIndex: Number(e.event_index),
          direction: String(e.direction),
          asset: String(e.asset),
          amountRaw: String(e.amount_raw),
        });
        const seen = bodies.get(req.eventId) ?? new Set<string>();
        seen.add(key);
        bodies.set(req.eventId, seen);
        if (nth <= 3) {
          const r = faultRand();
          if (r < 0.14) {
            figures.status500++;
            return 500;
          }
          if (r < 0.17) {
            figures.hang++;
            return { status: 200, delayMs: timeoutMs + 1_000 };
          }
          if (r < 0.2) {
            figures.reset++;
            return { status: 200, reset: true };
          }
        }
        acked.set(req.eventId, (acked.get(req.eventId) ?? 0) + 1);
        return 200;
      },
    });
    shutdown.add('receiver', () => receiver.close());
    const caFile = path.join(work, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);

    // The six processes.
    const env: Record<string, string> = {
      DATABASE_URL: servers.databaseUrl,
      ...(servers.redisUrl ? { REDIS_URL: servers.redisUrl } : {}),
      DATABASE_POOL_SIZE: '4',
      DATA_DIR: path.join(work, 'data'),
      SECRET_ENCRYPTION_KEY: randomBytes(32).toString('hex'),
      TRON_NODE_URL: nodes.map((n) => n.url).join(','),
      TRON_NODE_QUORUM: '2',
      TRON_NODE_TIMEOUT_MS: String(NODE_TIMEOUT_MS),
      TRON_BLOCK_INTERVAL_MS: String(intervalMs),
      TRON_NODE_CONCURRENCY: '4',
      TRON_NODE_MAX_RPS: '0', // local replay nodes: no provider's budget to keep
      INGEST_START_BLOCK: String(first),
      // The light client proves every block from the devnet SRs' signatures (the replay nodes'
      // checkpoint: the block before the chain's first), through every kill and provider fault.
      TRON_LIGHT_CLIENT_CHECKPOINT: writeDevnetCheckpoint(nodes[0] as ReplayNode, work),
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      WEBHOOK_TIMEOUT_MS: String(timeoutMs),
      // 1 m, 5 m, 30 m, 2 h, 6 h → 60 ms, 0.3 s, 1.8 s, 7.2 s, 21.6 s.
      DELIVERY_SCHEDULE_SCALE: '0.001',
      DELIVERY_CONCURRENCY: '16',
      DELIVERY_POLL_MS: '100',
      HOST: '127.0.0.1',
      PORT: '0',
      METRICS_PORT: '0', // six processes on one machine: a free metrics port each
    };
    const logs = new Map<string, fs.WriteStream>();
    let stopping = false;
    const crashes: string[] = [];
    let startFailures = 0;
    const start = (name: string, role: Role): Proc => {
      let log = logs.get(name);
      if (!log) {
        log = fs.createWriteStream(path.join(logDir, `${name}.log`), { flags: 'a' });
        logs.set(name, log);
      }
      const p = spawnRole(name, role, env, log);
      const i = procs.findIndex((q) => q.name === name);
      if (i >= 0) procs[i] = p;
      else procs.push(p);
      // A supervisor's part: a process that exits by itself is restarted 1 s later. Exiting at
      // start (PostgreSQL restarting: the start fails loudly, exit 1) is how a role behaves;
      // exiting once running is a crash, and fails the soak.
      void p.exit.then((code) => {
        if (p.stopped || stopping) return;
        if (p.running) crashes.push(`${name} exited ${code}: ${p.tail.join(' | ').slice(0, 600)}`);
        else startFailures++;
        print(`soak: ${name} exited by itself (${code}, ${p.running ? 'CRASH' : 'at start'})`);
        setTimeout(() => {
          if (!stopping && procs.find((q) => q.name === name) === p) start(name, role);
        }, 1_000);
      });
      return p;
    };
    shutdown.add('processes', async () => {
      await Promise.all(procs.map(killHard));
      for (const l of logs.values()) await new Promise((r) => l.end(r));
    });
    for (const [name, role] of [
      ['api-1', 'api'],
      ['api-2', 'api'],
      ['ingest-1', 'ingest'],
      ['ingest-2', 'ingest'],
      ['worker-1', 'worker'],
      ['worker-2', 'worker'],
    ] as const)
      start(name, role);
    const until = async (what: string, cond: () => boolean | Promise<boolean>, ms: number) => {
      const end = Date.now() + ms;
      while (!(await cond())) {
        if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
        await sleep(100);
      }
    };
    await until('every process running', () => procs.every((p) => p.running), 600_000);
    // The soak's API client: every request goes to one of the running API processes (in turn);
    // an answer lost in flight (the process killed mid-request), a refused connection, a 5xx
    // (PostgreSQL down) or a 429 is retried on the next one, for up to API_PATIENCE_MS, and counted.
    const api: SoakFigures['api'] = {
      requests: 0,
      retried: 0,
      lost: 0,
      refused: 0,
      serverErrors: 0,
      rateLimited: 0,
      failed: 0,
      unexpected: 0,
      recoveredSecrets: 0,
    };
    const inflight = new Map<string, number>(); // base URL → requests awaiting their answer
    const liveApis = () =>
      procs
        .filter((p) => p.role === 'api' && p.running && !p.stopped && p.url)
        .map((p) => p.url as string);
    let turn = 0;
    let auth: Record<string, string> = {};
    /**
     * One logical request: `pathQuery` on a running API, retried as above. Resolves with the first
     * answer that is none of those (status and parsed JSON body, null when none), and whether an
     * earlier attempt's answer was lost (the request may have taken effect).
     * @throws Error after API_PATIENCE_MS without such an answer (counted as failed).
     */
    const callApi = async (
      pathQuery: string,
      init: { method?: string; body?: string; key?: string } = {},
    ): Promise<{ status: number; body: unknown; lostBefore: boolean }> => {
      api.requests++;
      const end = Date.now() + API_PATIENCE_MS;
      let lostBefore = false;
      let retried = false;
      for (let attempt = 1; ; attempt++) {
        const bases = liveApis();
        const base = bases[turn++ % Math.max(1, bases.length)];
        let why = 'no API process running';
        if (base) {
          inflight.set(base, (inflight.get(base) ?? 0) + 1);
          try {
            const res = await fetch(`${base}${pathQuery}`, {
              method: init.method ?? 'GET',
              headers: {
                ...(init.key ? { authorization: `Bearer ${init.key}` } : auth),
                ...(init.body !== undefined ? { 'content-type': 'application/json' } : {}),
              },
              ...(init.body !== undefined ? { body: init.body } : {}),
              signal: AbortSignal.timeout(10_000),
            });
            const text = await res.text();
            if (res.status >= 500) {
              api.serverErrors++;
              why = `status ${res.status}`;
            } else if (res.status === 429) {
              api.rateLimited++;
              why = 'status 429';
            } else {
              return { status: res.status, body: text ? JSON.parse(text) : null, lostBefore };
            }
          } catch (err) {
            const code = (err as { cause?: { code?: string } }).cause?.code;
            if (code === 'ECONNREFUSED') api.refused++;
            else {
              api.lost++;
              lostBefore = true;
            }
            why = `${(err as Error).message}${code ? ` (${code})` : ''}`;
          } finally {
            inflight.set(base, (inflight.get(base) ?? 1) - 1);
          }
        }
        if (!retried) {
          retried = true;
          api.retried++;
        }
        if (Date.now() > end) {
          api.failed++;
          throw new Error(
            `${init.method ?? 'GET'} ${pathQuery}: no answer in ${API_PATIENCE_MS / 1000} s (${why})`,
          );
        }
        await sleep(Math.min(1_000, 50 * attempt));
      }
    };

    // An account, a key, and watches through the public API.
    const account = await accountsCreate(db, { email: 'soak@example.com', plan: 'business' });
    const apiKey = (await keysCreate(db, { account: account.id })).key;
    auth = { authorization: `Bearer ${apiKey}` };
    // Test mode (issue 32): a `tw_test_` key of the same account.
    const testKey = (await keysCreate(db, { account: account.id, test: true })).key;
    const box = new SecretBox([Buffer.from(env.SECRET_ENCRYPTION_KEY ?? '', 'hex')]);
    let label = 0;
    /** Create `plans` (with `key`: the test key's, else live), returning the watches' ids. */
    const createWatches = async (plans: WatchPlan[], key?: string): Promise<string[]> => {
      const ids: string[] = [];
      for (const w of plans) {
        const name = `${key ? 't' : 'w'}${label++}`;
        const webhookUrl = `${receiver.url}/${name}`;
        const r = await callApi('/v1/watches', {
          method: 'POST',
          body: JSON.stringify({
            address: hexToBase58(w.address),
            asset_filter: w.asset,
            direction: w.direction,
            webhook_url: webhookUrl,
          }),
          ...(key ? { key } : {}),
        });
        const created = r.body as { secret?: unknown; id?: unknown } | null;
        if (r.status === 201 && typeof created?.secret === 'string') {
          secrets.set(name, created.secret);
          ids.push(String(created.id));
        } else if (r.status === 409 && r.lostBefore) {
          // The attempt whose answer was lost created it; POST /v1/watches is not idempotent and
          // shows a secret once, so read it as the operator can (the soak holds the key).
          const { rows } = await retrying('lost watch secret', () =>
            db.query<{ id: string; secret_key_id: string; secret_ciphertext: Buffer }>(
              'SELECT id, secret_key_id, secret_ciphertext FROM watches WHERE webhook_url = $1 AND deleted_at IS NULL',
              [webhookUrl],
            ),
          );
          const row = rows[0];
          if (rows.length !== 1 || !row) throw new Error(`${name}: ${rows.length} watches stored`);
          secrets.set(
            name,
            box.decrypt({
              keyId: row.secret_key_id,
              ciphertext: Buffer.from(row.secret_ciphertext),
            }),
          );
          api.recoveredSecrets++;
          ids.push(row.id);
        } else {
          throw new Error(`POST /v1/watches ${name}: ${r.status} ${JSON.stringify(r.body)}`);
        }
      }
      return ids;
    };
    const liveWatchIds = await createWatches(plans1);
    // Test watches on the busiest live watches' addresses: a mainnet transfer to them must stay
    // live (it would show as an unexplained test event), and each filter is exercised.
    const testPlans: WatchPlan[] = [
      { address: plans1[0]?.address ?? '', asset: 'ALL', direction: 'both' },
      { address: plans1[2]?.address ?? '', asset: 'USDT', direction: 'incoming' },
      { address: plans1[4]?.address ?? '', asset: 'TRX', direction: 'outgoing' },
    ];
    const testWatchIds = await createWatches(testPlans, testKey);
    const test = {
      crossingsDuringRun: 0,
      crossAccepted: 0,
      crossRefused: 0,
    };
    /** One triggered test deposit: its own amount, and its event id once answered 201. */
    interface Trigger {
      watchId: string;
      amountRaw: string;
      eventId: string | undefined;
      lostBefore: boolean;
    }
    const triggers: Trigger[] = [];
    /**
     * Trigger test deposit number `seq` with the test key: watch seq mod 3, an asset and direction
     * its filters take, amount seq+1.5 (unique: amount_raw tells a lost answer's event apart).
     */
    const triggerTestDeposit = async (seq: number) => {
      const w = seq % testPlans.length;
      const plan = testPlans[w] as WatchPlan;
      const watchId = testWatchIds[w] as string;
      const asset = plan.asset === 'ALL' ? (seq % 2 === 0 ? 'USDT' : 'TRX') : plan.asset;
      const direction =
        plan.direction === 'both' ? (seq % 4 < 2 ? 'incoming' : 'outgoing') : plan.direction;
      const t: Trigger = {
        watchId,
        amountRaw: String((seq + 1) * 1_000_000 + 500_000),
        eventId: undefined,
        lostBefore: false,
      };
      triggers.push(t);
      try {
        const r = await callApi('/v1/test/transfers', {
          method: 'POST',
          key: testKey,
          body: JSON.stringify({ watch_id: watchId, amount: `${seq + 1}.5`, asset, direction }),
        });
        t.lostBefore = r.lostBefore;
        const e = r.body as { event_id?: unknown; livemode?: unknown; network?: unknown } | null;
        if (r.status === 201 && typeof e?.event_id === 'string' && e.livemode === false) {
          t.eventId = e.event_id;
        } else {
          api.unexpected++;
          print(`soak: POST /v1/test/transfers answered ${r.status} ${JSON.stringify(r.body)}`);
        }
      } catch (err) {
        print(`soak: ${(err as Error).message}`);
      }
    };
    /** The crossings a key must be refused: live key → test deposit (403), test key → live watch (404). */
    const tryCrossings = async () => {
      for (const [key, watchId, want] of [
        [apiKey, testWatchIds[0], 403],
        [testKey, liveWatchIds[0], 404],
      ] as const) {
        const r = await callApi('/v1/test/transfers', {
          method: 'POST',
          key,
          body: JSON.stringify({ watch_id: watchId, amount: '1' }),
        });
        if (r.status === want) test.crossRefused++;
        else {
          test.crossAccepted++;
          print(`soak: crossing answered ${r.status} (${want} expected) ${JSON.stringify(r.body)}`);
        }
      }
    };
    let testSeq = 0;
    const testSide: Promise<void>[] = [triggerTestDeposit(testSeq++), tryCrossings()];
    for (const n of nodes) n.advanceTo(first - 1);
    nodes[0]?.setFaults({ ...PROVIDER_1_FAULTS, seed: opts.seed });
    print(
      `soak: ${plans1.length} watches created, ${testPlans.length} test watches; the chain and the kill loop start`,
    );

    // The node providers' phases, as the chain is ingested (the ingest cursor, not the revealed
    // chain: on a loaded machine ingest lags, and the faults are for the blocks it reads).
    let phasesOn = true;
    shutdown.add('node phases', () => {
      phasesOn = false;
    });
    const nodeLoop = (async () => {
      for (const phase of NODE_PHASES) {
        const at = first - 1 + Math.ceil(phase.at * opts.blocks);
        while (phasesOn && (await cursorOf(db).catch(() => 0)) < at) await sleep(250);
        if (!phasesOn) return;
        print(`soak: node: ${phase.what} (block ${at - first + 1}/${opts.blocks})`);
        await phase.act(nodes);
        nodeFaults.phases++;
        if (phase === NODE_PHASES.at(-1)) nodeFaults.providerDied = true;
      }
    })();

    // A steady load on the API processes while they are killed: three loops, each one request
    // at a time, its answer checked.
    let loadOn = true;
    shutdown.add('API load', () => {
      loadOn = false;
    });
    const loadLoops = ['/v1/events?limit=200', '/v1/watches', '/v1/status'].map(async (p) => {
      // GET /v1/events alternates the live and the test key; neither may see the other's events.
      let asTest = false;
      while (loadOn && !stopping) {
        try {
          asTest = p.startsWith('/v1/events') && !asTest;
          const r = await callApi(p, asTest ? { key: testKey } : {});
          if (r.status !== 200 || typeof r.body !== 'object' || r.body === null) {
            api.unexpected++;
            print(`soak: GET ${p} answered ${r.status} ${JSON.stringify(r.body).slice(0, 200)}`);
          } else if (p.startsWith('/v1/events')) {
            const data = (r.body as { data?: Array<{ network?: unknown; livemode?: unknown }> })
              .data;
            for (const e of data ?? []) {
              if (e.livemode !== !asTest || e.network !== (asTest ? 'nile' : 'mainnet'))
                test.crossingsDuringRun++;
            }
          }
        } catch (err) {
          print(`soak: ${(err as Error).message}`);
        }
        await sleep(100);
      }
    });

    // The kill loop, with the mid-soak restarts and the second batch of watches. Each run of
    // three kills hits each role once, in a seeded order.
    const kills = { ingest: 0, ingestLeader: 0, worker: 0, api: 0 };
    const restarts = { redis: 0, postgres: 0 };
    const side: Promise<void>[] = [];
    let order: Role[] = [];
    for (let k = 1; k <= opts.kills; k++) {
      await sleep(killMin + rand() * (killMax - killMin));
      if (order.length === 0) {
        order = ['ingest', 'worker', 'api'];
        for (let i = order.length - 1; i > 0; i--) {
          const j = Math.floor(rand() * (i + 1));
          [order[i], order[j]] = [order[j] as Role, order[i] as Role];
        }
      }
      const role = order.shift() as Role;
      // The target is drawn among the processes of the role that finished starting (a process
      // killed while it loads tests nothing); on a loaded machine a restart can take many seconds.
      const pick = rand();
      // An API process is killed only while the other one serves, as behind a load balancer
      // that keeps one: the client's requests are retried, not left without any API for the
      // minutes a restart takes on a loaded machine.
      const needed = role === 'api' ? 2 : 1;
      await until(
        `${needed} running ${role} process(es)`,
        () => procs.filter((q) => q.role === role && q.running).length >= needed,
        600_000,
      );
      const candidates = procs.filter((q) => q.role === role && q.running);
      const p = candidates[Math.floor(pick * candidates.length)];
      if (!p) continue;
      const name = p.name;
      if (p.role === 'ingest') {
        kills.ingest++;
        if (p.leader) kills.ingestLeader++;
      } else if (p.role === 'worker') {
        kills.worker++;
      } else {
        kills.api++;
        // Killed with requests in flight: wait (up to 2 s) until the client awaits an answer.
        const end = Date.now() + 2_000;
        while ((inflight.get(p.url ?? '') ?? 0) === 0 && Date.now() < end) await sleep(1);
      }
      await killHard(p);
      start(name, p.role);
      // A test deposit after every kill, answered while the processes restart.
      testSide.push(triggerTestDeposit(testSeq++));
      if (k === Math.max(1, Math.floor(opts.kills / 3)))
        side.push(
          createWatches(plans2).then(() => print(`soak: ${plans2.length} more watches created`)),
        );
      if (k === Math.floor(opts.kills * 0.4) && servers.restartRedis) {
        const restart = servers.restartRedis;
        side.push(
          (async () => {
            print(`soak: restarting Redis (kill ${k})`);
            await restart();
            restarts.redis++;
          })(),
        );
      }
      if (k === Math.floor(opts.kills * 0.6) && servers.restartPostgres) {
        const restart = servers.restartPostgres;
        side.push(
          (async () => {
            print(`soak: PostgreSQL: SIGKILL of the postmaster, restart in 3 s (kill ${k})`);
            await restart();
            restarts.postgres++;
          })(),
        );
      }
      if (k % 10 === 0 || k === opts.kills) {
        const cursor = await retrying('cursor', () => cursorOf(db)).catch(() => -1);
        print(
          `soak: ${k}/${opts.kills} kills (ingest ${kills.ingest}, of which leader ${kills.ingestLeader}; worker ${kills.worker}; api ${kills.api}); cursor ${cursor - first + 1}/${opts.blocks} blocks; ${figures.requests} webhook requests; ${api.requests} API requests`,
        );
      }
    }
    await Promise.all(side);
    await Promise.all(testSide);
    loadOn = false;
    await Promise.all(loadLoops);

    // The end: the chain ingested, then the outbox drained; each wait gives up after 120 s
    // without progress (the figures then say what is left).
    const settle = async (
      what: string,
      value: () => Promise<number>,
      done: (v: number) => boolean,
    ) => {
      let best = Number.NaN;
      let progressAt = Date.now();
      for (;;) {
        const v = await retrying(what, value);
        if (done(v)) return true;
        if (v !== best) {
          best = v;
          progressAt = Date.now();
        }
        if (Date.now() - progressAt > 120_000) return false;
        await sleep(250);
      }
    };
    const cursorReachedEnd = await settle(
      'cursor',
      () => cursorOf(db),
      (c) => c >= last,
    );
    print(`soak: chain ${cursorReachedEnd ? 'ingested' : 'NOT ingested'}; draining the outbox`);
    phasesOn = false; // every phase ran once the chain is ingested
    await nodeLoop;
    await settle(
      'pending',
      () => count(db, "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'PENDING'"),
      (n) => n === 0,
    );

    // The check.
    // Live watches only: the test ones follow no chain here (their deposits are triggered).
    const { rows: watchRows } = await db.query<StoredWatch>(
      "SELECT id, address_hex, asset_filter, direction, active_from_block::int8 AS active_from_block FROM watches WHERE network = 'mainnet'",
    );
    const expected = expectedKeys(transfers, watchRows);
    const expectedSet = new Set(expected);
    const { rows: allEventRows } = await db.query<{
      id: string;
      network: string;
      watch_id: string;
      tx_id: string;
      event_index: number;
      direction: string;
      asset: string;
      amount_raw: string;
      notifications: number;
      status: string | null;
    }>(
      `SELECT e.id, e.network, e.watch_id, e.tx_id, e.event_index, e.direction, e.asset,
              e.amount_raw::text AS amount_raw,
              (SELECT count(*) FROM notifications n WHERE n.event_id = e.id)::int8 AS notifications,
              (SELECT n.status FROM notifications n WHERE n.event_id = e.id
                ORDER BY n.created_at DESC LIMIT 1) AS status
         FROM events e`,
    );
    // The live figures count live events; test events are checked apart (testFigures below).
    const eventRows = allEventRows.filter((r) => r.network === 'mainnet');
    const testRows = allEventRows.filter((r) => r.network !== 'mainnet');
    const storedKeyById = new Map<string, string>();
    const storedCount = new Map<string, number>();
    for (const r of eventRows) {
      const k = eventKey({
        watchId: r.watch_id,
        txId: r.tx_id,
        eventIndex: r.event_index,
        direction: r.direction,
        asset: r.asset,
        amountRaw: r.amount_raw,
      });
      storedKeyById.set(r.id, k);
      storedCount.set(k, (storedCount.get(k) ?? 0) + 1);
    }
    const missing = [...expectedSet].filter((k) => !storedCount.has(k));
    const extra = [...storedCount.keys()].filter((k) => !expectedSet.has(k));
    const duplicated = [...storedCount.values()].reduce((s, n) => s + n - 1, 0);
    const deadIds = new Set(eventRows.filter((r) => r.status === 'DEAD').map((r) => r.id));
    let acknowledged = 0;
    let unacknowledged = 0;
    let duplicateDeliveries = 0;
    let bodyMismatch = 0;
    for (const [id, k] of storedKeyById) {
      const n = acked.get(id) ?? 0;
      const got = bodies.get(id);
      if (got && (got.size !== 1 || !got.has(k))) bodyMismatch++;
      if (n > 0) acknowledged++;
      else unacknowledged++;
      duplicateDeliveries += Math.max(0, n - 1);
    }
    // Test events: each triggered id stored once, with one notification, acknowledged.
    const testKeyById = new Map<string, string>();
    for (const r of testRows) {
      testKeyById.set(
        r.id,
        eventKey({
          watchId: r.watch_id,
          txId: r.tx_id,
          eventIndex: r.event_index,
          direction: r.direction,
          asset: r.asset,
          amountRaw: r.amount_raw,
        }),
      );
    }
    const testCount = new Map<string, number>();
    for (const r of testRows) testCount.set(r.id, (testCount.get(r.id) ?? 0) + 1);
    const answered = triggers.filter((t) => t.eventId !== undefined);
    const triggeredIds = new Set(answered.map((t) => t.eventId as string));
    const lostAmounts = new Set(
      triggers.filter((t) => t.lostBefore).map((t) => `${t.watchId}|${t.amountRaw}`),
    );
    let fromLostAnswers = 0;
    let unexplained = 0;
    for (const r of testRows) {
      if (triggeredIds.has(r.id)) continue;
      if (lostAmounts.has(`${r.watch_id}|${r.amount_raw}`)) fromLostAnswers++;
      else {
        unexplained++;
        print(`soak: unexplained test event ${r.id} (${testKeyById.get(r.id)})`);
      }
    }
    let testAcked = 0;
    let testDuplicateDeliveries = 0;
    for (const [id, k] of testKeyById) {
      const n = acked.get(id) ?? 0;
      const got = bodies.get(id);
      if (got && (got.size !== 1 || !got.has(k))) bodyMismatch++;
      if (n > 0) testAcked++;
      testDuplicateDeliveries += Math.max(0, n - 1);
    }
    for (const id of bodies.keys())
      if (!storedKeyById.has(id) && !testKeyById.has(id)) bodyMismatch++;
    const pending = await count(
      db,
      "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'PENDING'",
    );
    const overdue = await count(
      db,
      "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'PENDING' AND next_attempt_at < now() - interval '10 seconds'",
    );
    const lostLeases = await count(
      db,
      'SELECT count(*)::int8 AS n FROM attempts WHERE lease_expired_at IS NOT NULL',
    );
    // GET /v1/events, every page, through the soak's client (the API processes in turn).
    const paged: string[] = [];
    let before: string | null = null;
    for (let page = 0; ; page++) {
      const q = `limit=200${before ? `&before=${encodeURIComponent(before)}` : ''}`;
      const r = await callApi(`/v1/events?${q}`);
      if (r.status !== 200) throw new Error(`GET /v1/events page ${page}: status ${r.status}`);
      const body = r.body as { data: Array<{ event_id: string }>; next_before: string | null };
      paged.push(...body.data.map((e) => e.event_id));
      if (!body.next_before) break;
      before = body.next_before;
    }
    const pagedSet = new Set(paged);
    // The test key's listing, every page: exactly the test events.
    const listed: string[] = [];
    before = null;
    for (let page = 0; ; page++) {
      const q = `limit=200${before ? `&before=${encodeURIComponent(before)}` : ''}`;
      const r = await callApi(`/v1/events?${q}`, { key: testKey });
      if (r.status !== 200) throw new Error(`GET /v1/events (test key) page ${page}: ${r.status}`);
      const body = r.body as { data: Array<{ event_id: string }>; next_before: string | null };
      listed.push(...body.data.map((e) => e.event_id));
      if (!body.next_before) break;
      before = body.next_before;
    }
    const listedSet = new Set(listed);
    const testFigures: TestModeFigures = {
      watches: testWatchIds.length,
      triggered: answered.length,
      lostAnswers: answered.filter((t) => t.lostBefore).length,
      stored: testRows.length,
      missing: [...triggeredIds].filter((id) => !testCount.has(id)).length,
      duplicated: [...testCount.values()].reduce((s, n) => s + n - 1, 0),
      fromLostAnswers,
      unexplained,
      notificationMismatch: testRows.filter((r) => r.notifications !== 1).length,
      acknowledged: testAcked,
      unacknowledged: testRows.length - testAcked,
      dead: testRows.filter((r) => r.status === 'DEAD').length,
      duplicateDeliveries: testDuplicateDeliveries,
      headerMismatch: testModeHeaderMismatch,
      listed: listed.length,
      listedMissing: [...testKeyById.keys()].filter((id) => !listedSet.has(id)).length,
      listedExtra: [...listedSet].filter((id) => !testKeyById.has(id)).length,
      liveInTestListing: [...listedSet].filter((id) => storedKeyById.has(id)).length,
      testInLiveListing: [...pagedSet].filter((id) => testKeyById.has(id)).length,
      crossingsDuringRun: test.crossingsDuringRun,
      crossAccepted: test.crossAccepted,
      crossRefused: test.crossRefused,
    };
    const f: SoakFigures = {
      seed: opts.seed,
      kills,
      restarts,
      api,
      node: {
        providers: nodes.length,
        quorum: 2,
        status503: nodes.reduce((n, x) => n + x.stats.faults.error, 0),
        empty: nodes.reduce((n, x) => n + x.stats.faults.empty, 0),
        stalled: nodes.reduce((n, x) => n + x.stats.faults.delayed, 0),
        refused: nodes.reduce((n, x) => n + x.stats.rateLimited, 0),
        providerDied: nodeFaults.providerDied,
        phases: nodeFaults.phases,
      },
      blocks: opts.blocks,
      watches: watchRows.length,
      expected: expected.length,
      stored: eventRows.length,
      missing: missing.length,
      extra: extra.length,
      duplicated,
      notificationMismatch: eventRows.filter((r) => r.notifications !== 1).length,
      acknowledged,
      unacknowledged,
      duplicateDeliveries,
      requests: figures.requests,
      faults: { status500: figures.status500, hang: figures.hang, reset: figures.reset },
      badSignatures: figures.badSignatures,
      bodyMismatch,
      dead: deadIds.size,
      pending,
      overdue,
      lostLeases,
      paged: paged.length,
      pageRepeats: paged.length - pagedSet.size,
      pageMissing: [...storedKeyById.keys()].filter((id) => !pagedSet.has(id)).length,
      pageExtra: [...pagedSet].filter((id) => !storedKeyById.has(id)).length,
      cursorReachedEnd,
      test: testFigures,
      crashes: crashes.length,
      startFailures,
      seconds: Math.round((Date.now() - started) / 1000),
    };
    pass =
      f.cursorReachedEnd &&
      f.crashes === 0 &&
      f.api.failed === 0 &&
      f.api.unexpected === 0 &&
      f.expected > 0 &&
      f.missing === 0 &&
      f.extra === 0 &&
      f.duplicated === 0 &&
      f.notificationMismatch === 0 &&
      f.unacknowledged === 0 &&
      f.badSignatures === 0 &&
      f.bodyMismatch === 0 &&
      f.overdue === 0 &&
      f.pageRepeats === 0 &&
      f.pageMissing === 0 &&
      f.pageExtra === 0 &&
      testModePass(f.test);
    for (const c of crashes) print(`soak: crash: ${c}`);
    // Why each DEAD notification died: its attempts in order (status, or error class; `lost` =
    // a lease that ran out, its worker killed while holding it).
    const { rows: deadTrail } = await db.query<{ id: string; trail: string }>(
      `SELECT n.id, string_agg(coalesce(a.http_status::text, a.error_class, left(a.error, 40), '?'),
                               ' ' ORDER BY a.attempt) AS trail
         FROM notifications n JOIN attempts a ON a.notification_id = n.id
        WHERE n.status = 'DEAD' GROUP BY n.id LIMIT 10`,
    );
    for (const d of deadTrail) print(`soak: DEAD ${d.id}: attempts ${d.trail}`);
    for (const k of missing.slice(0, 5)) print(`soak: missing ${k}`);
    for (const k of extra.slice(0, 5)) print(`soak: extra ${k}`);
    // Graceful stop of the six: exit codes are reported, not judged.
    stopping = true;
    const codes = await Promise.all(
      procs.map(async (p) => {
        p.stopped = true;
        p.child.kill('SIGTERM');
        return p.exit;
      }),
    );
    print(`soak: SIGTERM exit codes ${codes.join(' ')}`);
    const line = summary(f, pass);
    print(line);
    return { pass, figures: f, line, logDir };
  } finally {
    await shutdown.kill();
    if (pass) fs.rmSync(logDir, { recursive: true, force: true });
    else print(`soak: process logs kept in ${logDir}`);
  }
}

/**
 * Test mode passes when every triggered deposit is stored once under its event id with one
 * notification, every stored test event (those of lost answers too) is acknowledged, nothing is
 * unexplained, deliveries say their environment, each key lists exactly its own events, and both
 * crossings were refused.
 */
export function testModePass(t: TestModeFigures): boolean {
  return (
    t.triggered > 0 &&
    t.missing === 0 &&
    t.duplicated === 0 &&
    t.unexplained === 0 &&
    t.notificationMismatch === 0 &&
    t.unacknowledged === 0 &&
    t.headerMismatch === 0 &&
    t.listedMissing === 0 &&
    t.listedExtra === 0 &&
    t.liveInTestListing === 0 &&
    t.testInLiveListing === 0 &&
    t.crossingsDuringRun === 0 &&
    t.crossAccepted === 0 &&
    t.crossRefused === 2
  );
}

async function cursorOf(db: Db): Promise<number> {
  const { rows } = await db.query<{ block_number: number }>(
    'SELECT block_number FROM chain_cursor',
  );
  return rows[0]?.block_number ?? 0;
}

async function count(db: Db, sql: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(sql);
  return rows[0]?.n ?? 0;
}

function summary(f: SoakFigures, pass: boolean): string {
  return [
    `soak seed ${f.seed}:`,
    `${f.kills.ingest + f.kills.worker + f.kills.api} kills (ingest ${f.kills.ingest}, ${f.kills.ingestLeader} of them leading; worker ${f.kills.worker}; api ${f.kills.api}),`,
    `restarts redis ${f.restarts.redis} postgres ${f.restarts.postgres} (SIGKILL);`,
    `API client: ${f.api.requests} requests, ${f.api.retried} retried (lost in flight ${f.api.lost}, refused ${f.api.refused}, 5xx ${f.api.serverErrors}, 429 ${f.api.rateLimited}), failed ${f.api.failed}, unexpected ${f.api.unexpected}, secrets of lost answers ${f.api.recoveredSecrets};`,
    `node: ${f.node.providers} providers, quorum ${f.node.quorum}: 503 ${f.node.status503}, empty ${f.node.empty}, stalled ${f.node.stalled}, 403 ${f.node.refused}, phases ${f.node.phases}/${NODE_PHASES.length}, provider 3 ${f.node.providerDied ? 'died' : 'alive'};`,
    `crashes ${f.crashes}, failed starts ${f.startFailures};`,
    `${f.blocks} blocks${f.cursorReachedEnd ? '' : ' (cursor did NOT reach the end)'}, ${f.watches} watches;`,
    `events expected ${f.expected}, stored ${f.stored}: missing ${f.missing}, extra ${f.extra}, duplicated ${f.duplicated}, notification mismatches ${f.notificationMismatch};`,
    `acknowledged ${f.acknowledged}/${f.stored} with valid signatures (unacknowledged ${f.unacknowledged}, dead ${f.dead}), duplicate deliveries ${f.duplicateDeliveries},`,
    `${f.requests} requests (500: ${f.faults.status500}, hang: ${f.faults.hang}, reset: ${f.faults.reset}), bad signatures ${f.badSignatures}, body mismatches ${f.bodyMismatch}, lost leases ${f.lostLeases};`,
    `pending ${f.pending}, overdue ${f.overdue};`,
    `GET /v1/events paged ${f.paged} (repeats ${f.pageRepeats}, missing ${f.pageMissing}, extra ${f.pageExtra});`,
    `test mode: ${f.test.watches} test watches, ${f.test.triggered} deposits triggered (${f.test.lostAnswers} after a lost answer), ${f.test.stored} test events stored: missing ${f.test.missing}, duplicated ${f.test.duplicated}, of lost answers ${f.test.fromLostAnswers}, unexplained ${f.test.unexplained}, notification mismatches ${f.test.notificationMismatch};`,
    `acknowledged ${f.test.acknowledged}/${f.test.stored} (unacknowledged ${f.test.unacknowledged}, dead ${f.test.dead}), duplicate deliveries ${f.test.duplicateDeliveries}, test-mode header mismatches ${f.test.headerMismatch};`,
    `test key listed ${f.test.listed} (missing ${f.test.listedMissing}, extra ${f.test.listedExtra}, live ${f.test.liveInTestListing}), test events in the live listing ${f.test.testInLiveListing}, crossings during the run ${f.test.crossingsDuringRun}, crossings refused ${f.test.crossRefused}/2;`,
    `${f.seconds} s`,
    pass ? 'PASS' : 'FAIL',
  ].join(' ');
}

// ---------------------------------------------------------------------------------------------
// CLI

if (import.meta.url === `file://${process.argv[1]}`) {
  const int = (name: string, min: number) => (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min)
      throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return Number(v);
  };
  const o = new Command()
    .name('soak')
    .description('chaos soak: 2 ingest, 2 worker, 2 api processes, kills and restarts, then checks')
    .option('--seed <n>', 'PRNG seed (default: random, printed)', int('--seed', 0))
    .option('--kills <n>', 'SIGKILLs of an ingest, worker or API process', int('--kills', 0), 100)
    .option('--blocks <n>', 'blocks in the synthetic chain', int('--blocks', 1), 1200)
    .option('--interval-ms <n>', 'one block per N ms (default: spans the kill loop)', int('', 20))
    .option('--tx-per-block <n>', 'transactions per block', int('--tx-per-block', 1), 120)
    .parse()
    .opts<{
      seed?: number;
      kills: number;
      blocks: number;
      intervalMs?: number;
      txPerBlock: number;
    }>();
  const seed = o.seed ?? Math.floor(Math.random() * 2 ** 31);
  try {
    const result = await runSoak({
      seed,
      kills: o.kills,
      blocks: o.blocks,
      txPerBlock: o.txPerBlock,
      ...(o.intervalMs !== undefined ? { intervalMs: o.intervalMs } : {}),
    });
    process.exit(result.pass ? 0 : 1);
  } catch (err) {
    console.error(err);
    console.log(`soak seed ${seed}: did not complete: ${(err as Error).message} FAIL`);
    process.exit(1);
  }
}
