/**
 * `tronwatch demo` (`npm run demo`): the main job end to end on embedded defaults (PGlite in a
 * temporary DATA_DIR, in-process rate limits) with a local HTTPS receiver.
 *
 * Chain, in order of preference: `--blocks DIR` (recorded blocks in the chain/ layout, served by an
 * in-process replay node); live mainnet through TronGrid when it answers within a few seconds
 * (skipped with `--offline`); otherwise a synthetic mainnet-shaped chain served by the replay node.
 *
 * It creates an account and an API key, registers watches through the public HTTP API on
 * addresses that will appear in the coming blocks (incoming, outgoing and both; USDT, TRX and ALL;
 * one base58 and one hex address; one watch that must match nothing), lets the blocks be produced
 * and solidified, waits for the deliveries, verifies every signature, prints what was delivered,
 * and reconciles `GET /v1/events` and the deliveries against the events it expected. The
 * expectation is computed here, independently of the service's matching: from the generator's
 * ground truth (synthetic chain) or from the reader's transfers of the same blocks (recorded and
 * live chains; the reader is proven on real blocks by the test suite), matched by this file's own
 * loop. Exit code 0 when everything agrees, 1 on any difference.
 *
 * With `--telegram` it also runs chat deliveries: the Bot API is the local stand-in
 * (src/devnet/telegram-stand-in.ts, a real HTTP server), the chat is connected through the
 * console's API as a user would (sign in, Connect Telegram, the user presses Start: the stand-in
 * delivers `/start <token>` to the bot, which reads it by long polling), chat watches
 * (`telegram: true`) are created beside the webhook ones on the same addresses, and the messages
 * the stand-in received are reconciled against the expected events and printed. The stand-in's
 * pacing windows are compressed 20× (TELEGRAM_PACING_SCALE 0.05): it has no limits of its own.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { accountsCreate, keysCreate } from '../accounts/cli.js';
import { setPasswordHash } from '../accounts/credentials.js';
import { createLogger } from '../common/logger.js';
import { Shutdown } from '../common/shutdown.js';
import { type Config, loadConfig } from '../config.js';
import { hashPassword } from '../console/passwords.js';
import type { Event, EventWithDelivery } from '../events/event.js';
import { type Service, startService } from '../service.js';
import { hexToBase58, NILE_USDT_CONTRACT_HEX } from '../tron/address.js';
import { formatAmount } from '../tron/amount.js';
import { extractTransfers } from '../tron/extract.js';
import { parseNodeJson } from '../tron/json.js';
import { NodeClient } from '../tron/node-client.js';
import { scan } from '../tron/scan.js';
import type { BlockJson, TransactionInfoJson, Transfer } from '../tron/types.js';
import { consoleSession } from './console-client.js';
import { writeDevnetCheckpoint } from './pin.js';
import { type Receiver, startReceiver } from './receiver.js';
import {
  type BlockSource,
  dirSource,
  memorySource,
  type ReplayNode,
  startReplayNode,
} from './replay-node.js';
import { syntheticBlock } from './synthetic.js';
import { startTelegramStandIn, type TelegramStandIn } from './telegram-stand-in.js';

/** LOG_LEVEL's values (src/config.ts). */
type LogLevel = Config['logLevel'];

export interface DemoOptions {
  /** Folder of recorded blocks (chain/ layout). */
  blocks?: string;
  /** Never try live mainnet. */
  offline?: boolean;
  /** Give up waiting for deliveries after this long, ms. Default 120 s. */
  timeoutMs?: number;
  /** Where the report goes. Default stdout. */
  out?: (line: string) => void;
  /**
   * Keep the service (and the chain) running after the report until this signal aborts (the
   * CLI's `--keep`: Ctrl-C), so a newcomer can look around the console.
   */
  keepUntil?: AbortSignal;
  /** The service's log level (its JSON lines go to stderr). Default 'warn': the report stays readable. */
  logLevel?: LogLevel;
  /** Also deliver to a Telegram chat, through the Bot API stand-in (`--telegram`). */
  telegram?: boolean;
  /**
   * Test mode on a Nile-shaped chain (`--testnet`, issue 32 item 5): a synthetic chain whose USDT
   * is Nile's, served by a second replay node as TRON_TESTNET_NODE_URL, watched with a `tw_test_`
   * key; every event must say `network: "nile"`, `livemode: false`. Offline (mainnet is the
   * synthetic chain too, idle).
   */
  testnet?: boolean;
}

interface DemoWatch {
  label: string;
  address: string; // as registered (base58 or hex)
  addressHex: string;
  asset_filter: 'USDT' | 'TRX' | 'ALL';
  direction: 'incoming' | 'outgoing' | 'both';
  mustMatch: boolean;
  id?: string;
  secret?: string;
  activeFrom?: number;
}

interface Expected {
  watchLabel: string;
  txId: string;
  eventIndex: number;
  direction: 'incoming' | 'outgoing';
  asset: 'USDT' | 'TRX';
  amountRaw: string;
}

const key = (e: Omit<Expected, 'watchLabel'> & { watch: string }) =>
  `${e.watch}|${e.txId}|${e.eventIndex}|${e.direction}|${e.asset}|${e.amountRaw}`;

/** The events SPEC prescribes for these watches and transfers (this file's own matching loop). */
function expectedFor(transfers: readonly Transfer[], watches: readonly DemoWatch[]): Expected[] {
  const out: Expected[] = [];
  for (const t of transfers) {
    for (const w of watches) {
      if (w.activeFrom === undefined || t.blockNumber <= w.activeFrom) continue;
      if (w.asset_filter !== 'ALL' && w.asset_filter !== t.asset) continue;
      const incoming = t.to === w.addressHex && w.direction !== 'outgoing';
      const outgoing = t.from === w.addressHex && w.direction !== 'incoming';
      if (!incoming && !outgoing) continue;
      out.push({
        watchLabel: w.label,
        txId: t.txId,
        eventIndex: t.eventIndex,
        direction: incoming ? 'incoming' : 'outgoing',
        asset: t.asset,
        amountRaw: t.amountRaw.toString(),
      });
    }
  }
  return out;
}

/** Pick watch targets that the given future transfers exercise (busiest addresses first). */
function planWatches(transfers: readonly Transfer[]): DemoWatch[] {
  const count = (pick: (t: Transfer) => string | null) => {
    const m = new Map<string, number>();
    for (const t of transfers) {
      const a = pick(t);
      if (a) m.set(a, (m.get(a) ?? 0) + 1);
    }
    return [...m.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1)).map(([a]) => a);
  };
  const used = new Set<string>();
  const first = (list: string[]) => {
    const a = list.find((x) => !used.has(x));
    if (a) used.add(a);
    return a;
  };
  const usdtIn = first(count((t) => (t.asset === 'USDT' ? t.to : null)));
  const trxOut = first(count((t) => (t.asset === 'TRX' ? t.from : null)));
  const senders = new Set(transfers.map((t) => t.from));
  const both =
    first(count((t) => (senders.has(t.to) ? t.to : null))) ?? first(count((t) => t.from));
  const allIn = first(count((t) => t.to));
  const usdtBoth = first(count((t) => (t.asset === 'USDT' ? t.from : null)));
  const planned: DemoWatch[] = [];
  const add = (
    label: string,
    hex: string | undefined,
    asset_filter: DemoWatch['asset_filter'],
    direction: DemoWatch['direction'],
    useHex = false,
  ) => {
    if (!hex) return;
    planned.push({
      label,
      address: useHex ? hex : hexToBase58(hex),
      addressHex: hex,
      asset_filter,
      direction,
      mustMatch: true,
    });
  };
  add('usdt-in', usdtIn, 'USDT', 'incoming');
  add('trx-out', trxOut, 'TRX', 'outgoing', true);
  add('all-both', both, 'ALL', 'both');
  add('all-in', allIn, 'ALL', 'incoming');
  add('usdt-both', usdtBoth, 'USDT', 'both');
  // An address that appears in no transfer of these blocks: this watch must receive nothing.
  const silent = `41${'5a'.repeat(20)}`;
  planned.push({
    label: 'silent',
    address: hexToBase58(silent),
    addressHex: silent,
    asset_filter: 'ALL',
    direction: 'both',
    mustMatch: false,
  });
  return planned;
}

async function sourceTransfers(source: BlockSource): Promise<Transfer[]> {
  const out: Transfer[] = [];
  for (let n = source.first; n <= source.last; n++) {
    const e = await source.get(n);
    if (!e) continue;
    const block = parseNodeJson(e.block.toString('utf8')) as BlockJson;
    const infos = parseNodeJson(e.infos.toString('utf8')) as TransactionInfoJson[];
    out.push(...extractTransfers(block, infos));
  }
  return out;
}

async function api<T>(
  base: string,
  apiKey: string,
  method: string,
  p: string,
  body?: unknown,
): Promise<{ status: number; json: T }> {
  const res = await fetch(`${base}${p}`, {
    method,
    headers: {
      authorization: `Bearer ${apiKey}`,
      ...(body ? { 'content-type': 'application/json' } : {}),
    },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The chain the demo runs on, and what is known of its coming transfers. */
interface DemoChain {
  mode: 'recorded' | 'live' | 'synthetic' | 'nile';
  /** `nile` mode: the mainnet chain the service is given beside it (TRON_NODE_URL). */
  mainnet?: ReplayNode;
  nodeUrl: string;
  /** The chain's block interval, ms (TRON_BLOCK_INTERVAL_MS). */
  intervalMs: number;
  /** The transfers of the coming blocks (recorded, synthetic); undefined for live until scanned. */
  futureTransfers: Transfer[] | undefined;
  /** The last block the demo waits for (live: decided once the watches exist). */
  lastBlock: number;
  replay: ReplayNode | undefined;
  /**
   * A second, independent replay node of the same chain (synthetic mode): a second provider in
   * TRON_NODE_URL, so a USDT log inside another contract's call (which no header commits to) is
   * confirmed by it and delivered (proof `quorum`) instead of held on one provider's word.
   */
  second?: ReplayNode | undefined;
  liveClient: NodeClient | undefined;
}

/** Mainnet's full-node head runs about 18 blocks ahead of the solidified head. */
const LAG = 18;

/**
 * Step 1, the chain: recorded blocks (`--blocks`), else live mainnet when TronGrid answers within
 * 4 s (not `--offline`), else six synthetic blocks; both replayed ones start 200 blocks early so
 * the watches exist before the transfers happen. What it opens is registered in `shutdown`.
 */
async function startChain(opts: DemoOptions, shutdown: Shutdown): Promise<DemoChain> {
  const intervalMs = 250;
  if (opts.testnet) {
    // The live environment's chain: the six synthetic mainnet blocks, idle behind their lead-in.
    const mainnet = await startChain({ offline: true }, shutdown);
    // The test environment's chain: Nile-shaped (Nile's USDT contract, so signed by its own SRs,
    // NILE_DEVNET_SRS), ten blocks, proven by its own light client from the block before its first
    // (TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT):
    // its full-node head runs LAG above the solidified one, and halts at first + 5 until the
    // watches exist, so they activate inside the served blocks.
    const nile = {
      seed: 2032,
      firstBlock: 50_000_000,
      txPerBlock: 600,
      addresses: 5_000,
      usdtContract: NILE_USDT_CONTRACT_HEX,
    };
    const map = new Map<number, { block: string; infos: string }>();
    const futureTransfers: Transfer[] = [];
    for (let n = nile.firstBlock; n < nile.firstBlock + 10; n++) {
      const b = syntheticBlock(nile, n);
      map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
      futureTransfers.push(...b.transfers);
    }
    const source = memorySource(map);
    const replay = await startReplayNode({
      source,
      intervalMs,
      lag: LAG,
      startBefore: LAG,
      grpc: true,
    });
    shutdown.add('nile replay node', () => replay.close());
    replay.pause();
    replay.advanceTo(nile.firstBlock + 5 - LAG);
    return {
      mode: 'nile',
      mainnet: mainnet.replay,
      nodeUrl: replay.url,
      intervalMs,
      futureTransfers,
      lastBlock: source.last,
      replay,
      liveClient: undefined,
    };
  }
  if (opts.blocks) {
    const source = dirSource(opts.blocks);
    const futureTransfers = await sourceTransfers(source);
    const replay = await startReplayNode({
      source,
      intervalMs,
      lag: LAG,
      startBefore: LAG + 200,
      stopAtEnd: false,
      grpc: true,
    });
    shutdown.add('replay node', () => replay.close());
    return {
      mode: 'recorded',
      nodeUrl: replay.url,
      intervalMs,
      futureTransfers,
      lastBlock: source.last,
      replay,
      liveClient: undefined,
    };
  }
  if (!opts.offline) {
    const liveClient = new NodeClient({
      url: 'https://api.trongrid.io',
      timeoutMs: 4000,
      retries: 0,
    });
    shutdown.add('live node client', () => liveClient.close());
    const live = await liveClient.getHeads().then(
      () => true,
      () => false,
    );
    if (live) {
      return {
        mode: 'live',
        nodeUrl: liveClient.url,
        intervalMs: 3000,
        futureTransfers: undefined,
        lastBlock: -1,
        replay: undefined,
        liveClient,
      };
    }
  }
  const chain = { seed: 2026, firstBlock: 70_000_000, txPerBlock: 600, addresses: 5_000 };
  const map = new Map<number, { block: string; infos: string }>();
  const futureTransfers: Transfer[] = [];
  for (let n = chain.firstBlock; n < chain.firstBlock + 6; n++) {
    const b = syntheticBlock(chain, n);
    map.set(n, { block: JSON.stringify(b.block), infos: JSON.stringify(b.infos) });
    futureTransfers.push(...b.transfers); // the generator's ground truth
  }
  const source = memorySource(map);
  const replay = await startReplayNode({
    source,
    intervalMs,
    lag: LAG,
    startBefore: LAG + 200,
    grpc: true,
  });
  shutdown.add('replay node', () => replay.close());
  const second = await startReplayNode({
    source,
    intervalMs,
    lag: LAG,
    startBefore: LAG + 200,
    grpc: true,
  });
  shutdown.add('second replay node', () => second.close());
  return {
    mode: 'synthetic',
    nodeUrl: replay.url,
    intervalMs,
    futureTransfers,
    lastBlock: source.last,
    replay,
    second,
    liveClient: undefined,
  };
}

/** Step 2, the service on embedded defaults (PGlite in `dataDir`), trusting the receiver's CA. */
async function startDemoService(
  chain: DemoChain,
  dataDir: string,
  caFile: string,
  logLevel: LogLevel,
  shutdown: Shutdown,
  standIn: TelegramStandIn | undefined,
): Promise<Service> {
  // A replayed chain is read from its first recorded block on (its checkpoint: the fillers before
  // it cannot hash to its real parent), with exact gRPC bytes so every transaction root is checked.
  const nile = chain.mode === 'nile' ? chain.replay : undefined;
  const replay = nile ? chain.mainnet : chain.replay;
  const nodeUrl = nile ? (replay?.url ?? '') : chain.nodeUrl;
  const cfg: Config = loadConfig({
    DATA_DIR: dataDir,
    TRON_NODE_URL: [
      replay?.grpcUrl ? `${nodeUrl}#grpc=${replay.grpcUrl}` : nodeUrl,
      ...(chain.second ? [`${chain.second.url}#grpc=${chain.second.grpcUrl ?? 'none'}`] : []),
    ].join(','),
    ...(replay ? { INGEST_START_BLOCK: String(replay.first) } : {}),
    // The light client proves every block from the SRs' signatures: a replayed chain pins the
    // checkpoint it is proven from (its devnet SRs); live mainnet takes one from TronGrid at the
    // first start (trust on first use, said in the log and /v1/status).
    ...(replay ? { TRON_LIGHT_CLIENT_CHECKPOINT: writeDevnetCheckpoint(replay, dataDir) } : {}),
    ...(nile
      ? {
          TRON_TESTNET_NODE_URL: `${nile.url}#grpc=${nile.grpcUrl ?? 'none'}`,
          TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: writeDevnetCheckpoint(nile, dataDir),
        }
      : {}),
    TRON_BLOCK_INTERVAL_MS: String(chain.intervalMs),
    WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
    WEBHOOK_CA_FILE: caFile,
    DELIVERY_POLL_MS: '100',
    HOST: '127.0.0.1',
    PORT: '0',
    METRICS_PORT: '0',
    LOG_LEVEL: logLevel,
    ...(standIn
      ? {
          TELEGRAM_BOT_TOKEN: standIn.token,
          TELEGRAM_API_ROOT: standIn.url,
          TELEGRAM_POLL_TIMEOUT_SECONDS: '1',
          TELEGRAM_PACING_SCALE: '0.05',
        }
      : {}),
  });
  const service = await startService(cfg, {
    roles: ['api', 'ingest', 'worker'],
    logger: createLogger(logLevel),
    shutdown,
  });
  return service;
}

/**
 * Step 4, the watches through the public API (POST /v1/watches, retried while the ingester has
 * not seen the chain head: 503). Sets each watch's id, secret and activation block.
 */
async function createWatches(
  service: Service,
  base: string,
  apiKey: string,
  planned: DemoWatch[],
  hookUrl: ((label: string) => string) | 'telegram',
): Promise<void> {
  for (const w of planned) {
    for (;;) {
      const r = await api<{ id: string; secret: string; error?: string }>(
        base,
        apiKey,
        'POST',
        '/v1/watches',
        {
          address: w.address,
          asset_filter: w.asset_filter,
          direction: w.direction,
          ...(hookUrl === 'telegram' ? { telegram: true } : { webhook_url: hookUrl(w.label) }),
        },
      );
      if (r.status === 503) {
        await sleep(200); // the ingester has not seen the chain head yet
        continue;
      }
      if (r.status !== 201)
        throw new Error(`POST /v1/watches ${w.label}: ${r.status} ${JSON.stringify(r.json)}`);
      w.id = r.json.id;
      w.secret = r.json.secret;
      break;
    }
  }
  const { rows } = await service.db.query<{ id: string; active_from_block: number }>(
    'SELECT id, active_from_block FROM watches',
  );
  for (const w of planned) w.activeFrom = rows.find((r) => r.id === w.id)?.active_from_block;
}

/** The stand-in's private chat with the demo's user (any positive id: a private chat). */
const DEMO_CHAT_ID = 777_000_001;

/**
 * Step 3b (`--telegram`), the chat connected through the console's API as a user would: sign in,
 * POST /console/api/telegram/connect (503 until the bot's getMe has answered: retried), the user
 * opens the deep link and presses Start (the stand-in delivers `/start <token>` from the private
 * chat), then GET /console/api/telegram until the chat is shown.
 * @returns the chat id.
 */
async function connectTelegram(
  base: string,
  email: string,
  password: string,
  standIn: TelegramStandIn,
  deadline: number,
  print: (l: string) => void,
): Promise<string> {
  const call = await consoleSession(base);
  const login = await call('POST', '/console/api/login', { email, password });
  if (login.status !== 200) throw new Error(`console sign-in: ${login.status}`);
  let link: string | undefined;
  while (!link) {
    const r = await call<{ link: string }>('POST', '/console/api/telegram/connect');
    if (r.status === 200) link = r.json.link;
    else if (r.status !== 503 || Date.now() > deadline)
      throw new Error(`POST /console/api/telegram/connect: ${r.status} ${JSON.stringify(r.json)}`);
    else await sleep(200); // the bot's getMe has not answered yet
  }
  print(`telegram: Connect Telegram gave ${link.replace(/start=.*/, 'start=…')} (one-time)`);
  const token = new URL(link).searchParams.get('start') ?? '';
  standIn.userSends({ id: DEMO_CHAT_ID, type: 'private' }, `/start ${token}`, {
    id: DEMO_CHAT_ID,
    first_name: 'Demo',
  });
  for (;;) {
    const r = await call<{ chat: { id: string; type: string; title: string | null } | null }>(
      'GET',
      '/console/api/telegram',
    );
    if (r.status === 200 && r.json.chat) {
      print(
        `telegram: chat ${r.json.chat.id} (${r.json.chat.type}, ${r.json.chat.title ?? 'untitled'}) connected through the console; the bot answered: "${standIn.delivered(DEMO_CHAT_ID)[0]?.text.slice(0, 40) ?? ''}…"`,
      );
      return r.json.chat.id;
    }
    if (Date.now() > deadline) throw new Error('the chat was not connected in time');
    await sleep(100);
  }
}

/**
 * Step 5, let the blocks be produced and solidified and wait, until `deadline` (ms since the
 * epoch), for ingest to reach the last block, for every expected event to be received, and for
 * the outbox to settle. @returns the expected events (live: scanned from the node now).
 */
async function awaitDeliveries(
  chain: DemoChain,
  service: Service,
  planned: DemoWatch[],
  receiver: Receiver,
  deadline: number,
  problems: string[],
  print: (l: string) => void,
  chatWatches: readonly DemoWatch[] = [],
): Promise<Expected[]> {
  const minActive = Math.min(
    ...[...planned, ...chatWatches].map((w) => w.activeFrom ?? Number.POSITIVE_INFINITY),
  );
  if (chain.mode === 'nile' && chain.replay) {
    // The Nile chain halted until the watches existed: let it run.
    chain.replay.resume();
  } else if (chain.replay) {
    if (minActive >= chain.replay.first)
      throw new Error(
        `watches activated at ${minActive}, after the first recorded block ${chain.replay.first}: the chain ran ahead`,
      );
    // Skip the empty lead-in.
    chain.replay.advanceTo(Math.max(chain.replay.heads().solidified, chain.replay.first - 2));
  } else {
    chain.lastBlock = minActive + 10;
  }
  const ingester = chain.mode === 'nile' ? service.testIngester : service.ingester;
  print(`waiting for block ${chain.lastBlock} to be solidified and ingested…`);
  while (Date.now() < deadline && (ingester?.stats.cursor ?? -1) < chain.lastBlock)
    await sleep(100);
  if ((ingester?.stats.cursor ?? -1) < chain.lastBlock)
    problems.push(`ingest did not reach block ${chain.lastBlock} in time`);
  if (chain.mode === 'live' && chain.liveClient) {
    const t: Transfer[] = [];
    await scan(chain.liveClient, minActive + 1, chain.lastBlock, {
      concurrency: 4,
      onTransfer: (x) => t.push(x),
    });
    chain.futureTransfers = t;
  }
  const expected = expectedFor(chain.futureTransfers ?? [], planned);
  while (Date.now() < deadline) {
    const delivered = new Set(receiver.received.filter((r) => r.verified).map((r) => r.eventId));
    if (delivered.size >= expected.length) break;
    await sleep(100);
  }
  // The receiver holds a POST a moment before the worker records it DELIVERED (attempts are
  // recorded in batches): let the outbox settle before reconciling.
  while (Date.now() < deadline) {
    const { rows: open } = await service.db.query<{ n: number }>(
      "SELECT count(*)::int8 AS n FROM notifications WHERE status = 'PENDING'",
    );
    if ((open[0]?.n ?? 0) === 0) break;
    await sleep(100);
  }
  return expected;
}

/** Every event of the account through GET /v1/events, paged with next_before. */
async function listAllEvents(base: string, apiKey: string): Promise<EventWithDelivery[]> {
  const listed: EventWithDelivery[] = [];
  let before: string | null = null;
  for (;;) {
    const q: string = `/v1/events?limit=200${before ? `&before=${encodeURIComponent(before)}` : ''}`;
    const r = await api<{ data: EventWithDelivery[]; next_before: string | null }>(
      base,
      apiKey,
      'GET',
      q,
    );
    if (r.status !== 200) throw new Error(`GET /v1/events: ${r.status}`);
    listed.push(...r.json.data);
    if (!r.json.next_before) break;
    before = r.json.next_before;
  }
  return listed;
}

/** The reconciliation key of a received or listed event. */
const eventKey = (e: Event) =>
  key({
    watch: e.watch_id,
    txId: e.tx_id,
    eventIndex: e.event_index,
    direction: e.direction,
    asset: e.asset,
    amountRaw: e.amount_raw,
  });

/**
 * Step 6, verify the signatures, print the deliveries, reconcile deliveries and GET /v1/events
 * against the expected events; every difference is pushed to `problems`.
 */
async function reconcile(
  chain: DemoChain,
  base: string,
  apiKey: string,
  planned: DemoWatch[],
  receiver: Receiver,
  expected: Expected[],
  problems: string[],
  print: (l: string) => void,
  chat: { watches: DemoWatch[]; expected: Expected[] } = { watches: [], expected: [] },
): Promise<void> {
  const byLabel = new Map([...planned, ...chat.watches].map((w) => [w.label, w]));
  const idOf = (label: string) => byLabel.get(label)?.id ?? label;
  const expectedKeys = new Set(expected.map((e) => key({ ...e, watch: idOf(e.watchLabel) })));
  // GET /v1/events lists the chat watches' events too.
  const expectedListed = new Set([
    ...expectedKeys,
    ...chat.expected.map((e) => key({ ...e, watch: idOf(e.watchLabel) })),
  ]);
  const unverified = receiver.received.filter((r) => !r.verified);
  if (unverified.length)
    problems.push(`${unverified.length} deliveries failed signature verification`);
  const deliveredKeys = new Map<string, number>();
  print('');
  print('delivered (signature verified):');
  for (const r of receiver.received) {
    const e = r.event as unknown as Event | undefined;
    if (!e) continue;
    const k = eventKey(e);
    deliveredKeys.set(k, (deliveredKeys.get(k) ?? 0) + 1);
    const label = planned.find((w) => w.id === e.watch_id)?.label ?? '?';
    print(
      `  ${label.padEnd(9)} ${e.direction.padEnd(8)} ${e.asset.padEnd(4)} ${e.amount.padStart(16)}  tx ${e.tx_id.slice(0, 16)}…#${e.event_index}  ${r.verified ? 'signature ok' : 'SIGNATURE BAD'}`,
    );
  }
  const missing = [...expectedKeys].filter((k) => !deliveredKeys.has(k));
  const extra = [...deliveredKeys.keys()].filter((k) => !expectedKeys.has(k));
  const dupes = [...deliveredKeys.values()].filter((n) => n > 1).length;
  if (missing.length) problems.push(`${missing.length} expected events were not delivered`);
  if (extra.length) problems.push(`${extra.length} delivered events were not expected`);

  const listed = await listAllEvents(base, apiKey);
  const listedKeys = new Set(listed.map(eventKey));
  const notListed = [...expectedListed].filter((k) => !listedKeys.has(k));
  const unexpectedListed = [...listedKeys].filter((k) => !expectedListed.has(k));
  if (listed.length !== listedKeys.size) problems.push('GET /v1/events repeated an event');
  // Test mode (issue 32): every event of the Nile chain says so, in the API and in the webhooks.
  const network = chain.mode === 'nile' ? 'nile' : 'mainnet';
  const received = receiver.received.map((r) => r.event).filter((e) => e !== undefined);
  for (const e of [...listed, ...received] as Array<Record<string, unknown>>) {
    if (e.network !== network || e.livemode !== (network === 'mainnet')) {
      problems.push(
        `event ${String(e.event_id)} says network ${String(e.network)}, livemode ${String(e.livemode)}`,
      );
      break;
    }
  }
  if (network === 'nile') {
    const marked = receiver.received.filter((r) => r.headers['tronwatch-test-mode'] === 'true');
    if (marked.length !== receiver.received.length)
      problems.push('a test delivery came without the header Tronwatch-Test-Mode: true');
    else
      print(
        `test mode: ${listed.length} events say network "nile", livemode false; ${marked.length} deliveries carried Tronwatch-Test-Mode: true`,
      );
  }
  if (notListed.length)
    problems.push(`${notListed.length} expected events missing from GET /v1/events`);
  if (unexpectedListed.length)
    problems.push(`${unexpectedListed.length} unexpected events in GET /v1/events`);
  const undelivered = listed.filter((e) => e.delivery?.status !== 'DELIVERED');
  if (undelivered.length)
    problems.push(`${undelivered.length} events not DELIVERED in GET /v1/events`);
  for (const w of planned) {
    const n = expected.filter((e) => e.watchLabel === w.label).length;
    if (!w.mustMatch && n > 0) problems.push(`watch ${w.label} should match nothing`);
  }
  const silentGot = listed.filter((e) => e.watch_id === idOf('silent')).length;
  if (silentGot) problems.push(`the silent watch received ${silentGot} events`);

  print('');
  print('reconciliation:');
  const total = (asset: string) =>
    formatAmount(
      expected.filter((e) => e.asset === asset).reduce((s, e) => s + BigInt(e.amountRaw), 0n),
    );
  print(
    `  expected events:     ${expected.length} (USDT ${total('USDT')}, TRX ${total('TRX')}), computed independently from the blocks`,
  );
  print(
    `  delivered:           ${deliveredKeys.size} distinct, ${receiver.received.length} requests (${dupes} duplicates), ${receiver.received.length - unverified.length} signatures verified`,
  );
  print(
    `  GET /v1/events:      ${listed.length} events, ${listed.length - undelivered.length} DELIVERED`,
  );
  for (const w of [...planned, ...chat.watches]) {
    const n = listed.filter((e) => e.watch_id === w.id).length;
    const want = [...expected, ...chat.expected].filter((e) => e.watchLabel === w.label).length;
    print(`  ${w.label.padEnd(9)} ${String(n).padStart(4)} events (expected ${want})`);
  }
  if (expected.length === 0 && chain.mode !== 'live')
    problems.push('the chain produced no expected event: nothing was demonstrated');
}

/**
 * Step 7 (`--telegram`): the messages the stand-in received in the chat against the chat watches'
 * expected events, compared as multisets of (direction, amount, asset, watched address, tx), each
 * read back from the message's HTML; printed. Every difference is pushed to `problems`.
 */
function reconcileChat(
  standIn: TelegramStandIn,
  chatId: string,
  chatWatches: readonly DemoWatch[],
  expected: readonly Expected[],
  problems: string[],
  print: (l: string) => void,
): void {
  const byLabel = new Map(chatWatches.map((w) => [w.label, w]));
  const want = new Map<string, number>();
  for (const e of expected) {
    const w = byLabel.get(e.watchLabel);
    if (!w) continue;
    const k = `${e.direction}|${formatAmount(BigInt(e.amountRaw))}|${e.asset}|${hexToBase58(w.addressHex)}|${e.txId}`;
    want.set(k, (want.get(k) ?? 0) + 1);
  }
  const MESSAGE =
    /^<b>(⬇️ Incoming|⬆️ Outgoing) ([0-9.]+) (USDT|TRX)<\/b>\nAddress: <code>(T[1-9A-HJ-NP-Za-km-z]+)<\/code>\n(?:From|To): <code>(T[1-9A-HJ-NP-Za-km-z]+)<\/code>\nTime: ([0-9: -]+ UTC)\nBlock: ([0-9]+)\n<a href="https:\/\/tronscan\.org\/#\/transaction\/([0-9a-f]{64})">/;
  const got = new Map<string, number>();
  const sent = standIn.sent.filter((m) => m.chatId === chatId && m.parseMode === 'HTML');
  print('');
  print(`telegram messages (stand-in, chat ${chatId}):`);
  let unreadable = 0;
  for (const m of sent) {
    const r = MESSAGE.exec(m.text);
    if (!r || m.status !== 200) {
      unreadable++;
      continue;
    }
    const [, head, amount, asset, address, counterparty, time, block, tx] = r;
    const direction = head?.endsWith('Incoming') ? 'incoming' : 'outgoing';
    const k = `${direction}|${amount}|${asset}|${address}|${tx}`;
    got.set(k, (got.get(k) ?? 0) + 1);
    print(
      `  ${direction.padEnd(8)} ${(asset ?? '').padEnd(4)} ${(amount ?? '').padStart(16)}  ${address} ${direction === 'incoming' ? '←' : '→'} ${counterparty}  ${time}  block ${block}  tx ${tx?.slice(0, 16)}…`,
    );
  }
  let missing = 0;
  let extra = 0;
  for (const [k, n] of want) missing += Math.max(0, n - (got.get(k) ?? 0));
  for (const [k, n] of got) extra += Math.max(0, n - (want.get(k) ?? 0));
  if (unreadable) problems.push(`${unreadable} chat messages were refused or unreadable`);
  if (missing) problems.push(`${missing} expected chat messages were not received`);
  if (extra) problems.push(`${extra} chat messages were not expected`);
  if (expected.length === 0)
    problems.push('no chat message was expected: nothing was demonstrated');
  print(
    `  chat messages:       ${sent.length} received, ${expected.length} expected (${missing} missing, ${extra} unexpected)`,
  );
}

/** With `--keep`: wait, serving, until the signal aborts. */
async function keepRunning(
  until: AbortSignal | undefined,
  base: string,
  print: (l: string) => void,
): Promise<void> {
  if (!until || until.aborted) return;
  print('');
  print(`still running (--keep): the console is at ${base}/console/; Ctrl-C stops the demo.`);
  await new Promise<void>((resolve) =>
    until.addEventListener('abort', () => resolve(), { once: true }),
  );
}

/**
 * The `blockext-<n>.bin` files a recorded folder lacks: one per `block-<n>.json` (the exact bytes
 * of java-tron's gRPC GetBlockByNum2 answer). The demo reads every block as exact bytes, as
 * tronwatch does with one provider (src/ingest/provable.ts), and the replay node never serves
 * bytes re-encoded from a recorded block's JSON as exact ones (that JSON can hide bytes:
 * block 79,072,107 does), so a block without its file would never be proven.
 * @returns the missing file names, in block order (empty when none lacks).
 */
export function lackingExactBytes(dir: string): string[] {
  const names = new Set(fs.readdirSync(dir));
  const blocks = [...names]
    .map((f) => /^block-(0|[1-9]\d*)\.json$/.exec(f)?.[1])
    .filter((n): n is string => n !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
  return blocks.map((n) => `blockext-${n}.bin`).filter((f) => !names.has(f));
}

/** Run the demo. @returns the process exit code (0 = every check passed). */
export async function runDemo(opts: DemoOptions = {}): Promise<number> {
  const print = opts.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  if (opts.blocks) {
    // Said before anything starts, instead of a stall on the first block.
    const lacking = lackingExactBytes(opts.blocks);
    if (lacking.length > 0) {
      print(
        `tronwatch demo: ${opts.blocks} lacks ${lacking[0]}${lacking.length > 1 ? ` (and ${lacking.length - 1} more blockext-<n>.bin)` : ''}: ` +
          "each recorded block-<n>.json needs its exact bytes beside it, blockext-<n>.bin (java-tron's gRPC GetBlockByNum2 answer), " +
          "because tronwatch proves a block's transactions from those bytes and a recorded block's JSON alone cannot prove them " +
          '(test/fixtures/tron-mainnet/chain/ has both for block 79,072,107). Add the file, or run the demo without --blocks.',
      );
      return 1;
    }
  }
  const shutdown = new Shutdown();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tronwatch-demo-'));
  shutdown.add('data folder', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  const problems: string[] = [];
  try {
    const secrets = new Map<string, string>();
    const receiver = await startReceiver({
      secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
    });
    shutdown.add('receiver', () => receiver.close());
    const caFile = path.join(dataDir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);

    const chain = await startChain(opts, shutdown);
    print(
      `tronwatch demo: ${chain.mode} chain${opts.blocks ? ` from ${opts.blocks}` : ''} (node ${chain.nodeUrl})`,
    );
    // 2a (--telegram). The Bot API: the local stand-in, a real HTTP server.
    let standIn: TelegramStandIn | undefined;
    if (opts.telegram) {
      const si = await startTelegramStandIn();
      shutdown.add('telegram stand-in', () => si.close());
      standIn = si;
      print(`telegram: Bot API stand-in at ${si.url} (bot @${si.username})`);
    }
    const service = await startDemoService(
      chain,
      dataDir,
      caFile,
      opts.logLevel ?? 'warn',
      shutdown,
      standIn,
    );
    const base = service.url as string;
    print(`service: ${base} (embedded PostgreSQL in ${dataDir})`);

    // 3. An account and an API key (the operator's CLI functions).
    const account = await accountsCreate(service.db, { email: 'demo@example.com', plan: 'pro' });
    const apiKey = (
      await keysCreate(service.db, {
        account: account.id,
        name: 'demo',
        ...(opts.testnet ? { test: true } : {}),
      })
    ).key;
    print(`account ${account.id} (plan Pro), API key ${apiKey.slice(0, 12)}… (shown once)`);
    // A console login for the demo account (random, printed once: the data folder is temporary).
    const password = randomBytes(12).toString('base64url');
    await setPasswordHash(service.db, account.id, await hashPassword(password));
    print(`console: ${base}/console/ (sign in as demo@example.com, password ${password})`);
    const deadline = Date.now() + (opts.timeoutMs ?? (chain.mode === 'live' ? 180_000 : 120_000));
    // 3b (--telegram). The chat, connected through the console like a user would.
    const chatId = standIn
      ? await connectTelegram(base, 'demo@example.com', password, standIn, deadline, print)
      : undefined;

    // 4. Watches on addresses of the coming blocks (live: the busiest addresses of the last
    // solidified blocks are likely to transact again).
    // Nile: the watches activate at the halted head (first + 3); plan them on what comes after.
    let transfers =
      chain.mode === 'nile' && chain.replay
        ? chain.futureTransfers?.filter((t) => t.blockNumber > (chain.replay?.heads().head ?? 0))
        : chain.futureTransfers;
    if (!transfers && chain.liveClient) {
      const client = chain.liveClient;
      const head = await client.getSolidifiedHead();
      const recent: Transfer[] = [];
      await scan(client, head.number - 4, head.number, {
        concurrency: 4,
        onTransfer: (t) => recent.push(t),
      });
      transfers = recent;
    }
    const planned = planWatches(transfers ?? []);
    await createWatches(
      service,
      base,
      apiKey,
      planned,
      (label) => `${receiver.origin}/hook/${label}`,
    );
    // 4b (--telegram). Chat watches beside the webhook ones, on the same addresses.
    const chatWatches: DemoWatch[] = standIn
      ? planned.filter((w) => w.mustMatch).map((w) => ({ ...w, label: `tg-${w.label}` }))
      : [];
    if (chatWatches.length) await createWatches(service, base, apiKey, chatWatches, 'telegram');
    for (const w of [...planned, ...chatWatches]) {
      if (w.secret) secrets.set(w.label, w.secret);
      print(
        `watch ${w.label.padEnd(9)} ${w.id} ${w.address} ${w.asset_filter}/${w.direction}${chatWatches.includes(w) ? ' (chat)' : ''}, matches blocks > ${w.activeFrom}`,
      );
    }

    // 5 and 6.
    const expected = await awaitDeliveries(
      chain,
      service,
      planned,
      receiver,
      deadline,
      problems,
      print,
      chatWatches,
    );
    const chatExpected = expectedFor(chain.futureTransfers ?? [], chatWatches);
    await reconcile(chain, base, apiKey, planned, receiver, expected, problems, print, {
      watches: chatWatches,
      expected: chatExpected,
    });
    // 7 (--telegram).
    if (standIn && chatId) {
      reconcileChat(standIn, chatId, chatWatches, chatExpected, problems, print);
    }
    print('');
    if (problems.length) {
      for (const p of problems) print(`FAIL: ${p}`);
      await keepRunning(opts.keepUntil, base, print);
      return 1;
    }
    print(
      `OK: every expected transfer was delivered, signed and reconciled (${chain.mode} chain).`,
    );
    if (standIn) print('OK: every expected chat message was received (Telegram stand-in).');
    await keepRunning(opts.keepUntil, base, print);
    return 0;
  } finally {
    await shutdown.kill();
  }
}
