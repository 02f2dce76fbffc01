/**
 * `tronwatch dev` (`npm run dev`; issue 29 item 5): the whole service on this machine in one
 * command, with events flowing, so a newcomer evaluates tronwatch in a minute.
 *
 * What it starts, all on 127.0.0.1, all stopped (and the data folder removed) by `stop()`:
 * - a synthetic mainnet-shaped chain (src/devnet/synthetic.ts) served by the replay node
 *   (src/devnet/replay-node.ts, HTTP and gRPC) that produces one block every `intervalMs` for as
 *   long as it runs (a lazy block source: block n is generated when first asked for), the full-node
 *   head 18 blocks ahead of the solidified head as on mainnet;
 * - the local HTTPS webhook receiver (src/devnet/receiver.ts), trusted through WEBHOOK_CA_FILE
 *   and admitted by WEBHOOK_ALLOW_CIDRS=127.0.0.1/32; its path `/hook/failing` answers 503, so one
 *   watch shows retries, the failing banner, dead letters and the alert e-mail;
 * - a local mailbox (src/devnet/mailbox.ts): an SMTP server the service sends to (SMTP_URL) and a
 *   page listing what it got; the console links to it (`dev_mailbox` in /console/api/config);
 * - the service itself on embedded defaults (PGlite in a temporary DATA_DIR, in-process rate
 *   limits), all roles in this process, CONSOLE_SIGNUP=open;
 * - a demo account (plan Pro) with a console password and an API key, and four labelled watches
 *   on the chain's busiest ("hot wallet") addresses, created through the public API as a user would.
 *
 * It prints the console's URL, the credentials, the mailbox page and the API key. Nothing here
 * changes the demo's pieces: it calls their exported functions only.
 */
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { accountsCreate, keysCreate } from '../accounts/cli.js';
import { setPasswordHash } from '../accounts/credentials.js';
import { createLogger } from '../common/logger.js';
import { Shutdown } from '../common/shutdown.js';
import { type Config, loadConfig } from '../config.js';
import { hashPassword } from '../console/passwords.js';
import { type Service, startService } from '../service.js';
import { hexToBase58 } from '../tron/address.js';
import { type Mailbox, startMailbox } from './mailbox.js';
import { writeDevnetCheckpoint } from './pin.js';
import { type Receiver, startReceiver } from './receiver.js';
import { type BlockEntry, type BlockSource, startReplayNode } from './replay-node.js';
import { type SyntheticChainOptions, syntheticAddress, syntheticBlock } from './synthetic.js';

/** LOG_LEVEL's values (src/config.ts). */
type LogLevel = Config['logLevel'];

export interface DevOptions {
  /** Port of the console and API. Default 8080, or a free port when 8080 is taken; 0 = a free one. */
  port?: number;
  /** One block every this many ms. Default 1000 (mainnet: 3000; faster so events come sooner). */
  intervalMs?: number;
  /** Transactions per synthetic block. Default 30 (about 19 transfers). */
  txPerBlock?: number;
  /** The service's log level (JSON lines on stderr). Default 'warn'. */
  logLevel?: LogLevel;
  /** Where the banner goes. Default stdout. */
  out?: (line: string) => void;
}

/** A running development stack (see the module doc). */
export interface DevStack {
  /** The service's base URL, e.g. http://127.0.0.1:8080. */
  url: string;
  /** The console: `${url}/console/`. */
  consoleUrl: string;
  /** The demo account's sign-in. */
  email: string;
  password: string;
  /** An API key of the demo account (tw_live_…). */
  apiKey: string;
  /** The watches created, with their labels. */
  watches: Array<{ id: string; label: string }>;
  service: Service;
  receiver: Receiver;
  mailbox: Mailbox;
  /** Stop everything and remove the data folder (idempotent). */
  stop(): Promise<void>;
}

/** Mainnet's full-node head runs about 18 blocks ahead of the solidified head. */
const LAG = 18;
/** The synthetic chain's population: its first 1% (20 addresses) draws 30% of the accounts. */
const CHAIN: Required<Pick<SyntheticChainOptions, 'seed' | 'firstBlock' | 'addresses'>> = {
  seed: 29,
  firstBlock: 80_000_000,
  addresses: 2_000,
};
/** Blocks the lazy source holds: ~115 days at one per second, "for as long as it runs". */
const CHAIN_LENGTH = 10_000_000;
/** Generated blocks kept for repeated requests (the ingester and the proof read each a few times). */
const BLOCK_CACHE = 64;
export const DEV_EMAIL = 'demo@example.com';
/**
 * How far back the first block's timestamp is, ms: 3 days, so block times (3 s apart) stay in
 * the past for 1.5 days of blocks at one per second.
 */
const TIMESTAMP_HEAD_START_MS = 3 * 24 * 3600 * 1000;

/**
 * A block source that generates synthetic block n when first asked for (syntheticBlock depends
 * only on the options and n), for CHAIN_LENGTH blocks from `opts.firstBlock`.
 */
function lazySyntheticSource(opts: SyntheticChainOptions & { firstBlock: number }): BlockSource {
  const cache = new Map<number, BlockEntry>();
  const first = opts.firstBlock;
  const last = first + CHAIN_LENGTH - 1;
  return {
    first,
    last,
    async get(n) {
      if (n < first || n > last) return undefined;
      const hit = cache.get(n);
      if (hit) return hit;
      const b = syntheticBlock(opts, n);
      // Synthetic JSON is complete (nothing hidden): the replay node may encode its exact gRPC
      // bytes from it, as it does for every synthetic source.
      const entry: BlockEntry = {
        block: Buffer.from(JSON.stringify(b.block)),
        infos: Buffer.from(JSON.stringify(b.infos)),
        exactFromJson: true,
      };
      cache.set(n, entry);
      if (cache.size > BLOCK_CACHE) {
        const oldest = cache.keys().next().value;
        if (oldest !== undefined) cache.delete(oldest);
      }
      return entry;
    },
  };
}

/** `preferred` when it can be bound on 127.0.0.1, else a free port (0 asks for a free one). */
async function pickPort(preferred: number): Promise<number> {
  const tryPort = (p: number) =>
    new Promise<number | undefined>((resolve) => {
      const s = net.createServer();
      s.once('error', () => resolve(undefined));
      s.listen(p, '127.0.0.1', () => {
        const got = (s.address() as net.AddressInfo).port;
        s.close(() => resolve(got));
      });
    });
  return (preferred > 0 ? await tryPort(preferred) : undefined) ?? (await tryPort(0)) ?? 0;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The demo watches: a label, a hot address of the population, what to watch, the receiver path. */
function plannedWatches(): Array<{
  label: string;
  address: string;
  asset_filter: 'USDT' | 'TRX' | 'ALL';
  direction: 'incoming' | 'outgoing' | 'both';
  path: string;
}> {
  const hot = (i: number) => hexToBase58(syntheticAddress(CHAIN, i));
  return [
    {
      label: 'Exchange deposits (USDT in)',
      address: hot(0),
      asset_filter: 'USDT',
      direction: 'incoming',
      path: 'usdt-in',
    },
    {
      label: 'Payouts (TRX out)',
      address: hot(1),
      asset_filter: 'TRX',
      direction: 'outgoing',
      path: 'trx-out',
    },
    {
      label: 'Treasury (everything)',
      address: hot(2),
      asset_filter: 'ALL',
      direction: 'both',
      path: 'treasury',
    },
    {
      label: 'Failing receiver (answers 503)',
      address: hot(3),
      asset_filter: 'ALL',
      direction: 'incoming',
      path: 'failing',
    },
  ];
}

/**
 * Start the development stack (module doc) and print where everything is.
 * @throws when a part cannot start (a port, the embedded database); what had started is stopped.
 */
export async function startDev(opts: DevOptions = {}): Promise<DevStack> {
  const print = opts.out ?? ((l: string) => process.stdout.write(`${l}\n`));
  const logLevel = opts.logLevel ?? 'warn';
  const intervalMs = opts.intervalMs ?? 1000;
  const shutdown = new Shutdown();
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tronwatch-dev-'));
  shutdown.add('data folder', () => fs.rmSync(dataDir, { recursive: true, force: true }));
  try {
    // The receiver: each watch's secret by the last path segment; /hook/failing answers 503.
    const secrets = new Map<string, string>();
    const receiver = await startReceiver({
      secretFor: ({ path: p }) => secrets.get(p.split('/').pop() ?? ''),
      respond: (req) => (req.path.endsWith('/failing') ? 503 : req.verified ? 200 : 401),
      record: false,
    });
    shutdown.add('receiver', () => receiver.close());
    const caFile = path.join(dataDir, 'receiver-ca.pem');
    fs.writeFileSync(caFile, receiver.ca);

    const mailbox = await startMailbox(path.join(dataDir, 'mail'));
    shutdown.add('mailbox', () => mailbox.close());

    // The chain: block timestamps are 3 s apart (the generator's spacing) while blocks come every
    // intervalMs, so they start TIMESTAMP_HEAD_START_MS back: a block time in the future would make
    // the ingester refuse the node's head as impossible (node-group.ts headBound).
    const source = lazySyntheticSource({
      ...CHAIN,
      txPerBlock: opts.txPerBlock ?? 30,
      // On a 3 s slot boundary, as block times are (the light client's checkpoint needs one).
      startTimestamp: Math.floor((Date.now() - TIMESTAMP_HEAD_START_MS) / 3000) * 3000,
    });
    const replay = await startReplayNode({
      source,
      intervalMs,
      lag: LAG,
      startBefore: LAG + 2,
      grpc: true,
    });
    shutdown.add('replay node', () => replay.close());

    const port = await pickPort(opts.port ?? 8080);
    const cfg = loadConfig({
      DATA_DIR: dataDir,
      TRON_NODE_URL: replay.grpcUrl ? `${replay.url}#grpc=${replay.grpcUrl}` : replay.url,
      // The synthetic chain's first block is where ingest starts (its parent is a seeded id),
      // proven by the light client from the checkpoint below it (the devnet SRs).
      INGEST_START_BLOCK: String(replay.first),
      TRON_LIGHT_CLIENT_CHECKPOINT: writeDevnetCheckpoint(replay, dataDir),
      TRON_BLOCK_INTERVAL_MS: String(intervalMs),
      WEBHOOK_ALLOW_CIDRS: '127.0.0.1/32',
      WEBHOOK_CA_FILE: caFile,
      // Retries 100× sooner than the contract's schedule: the failing watch reaches its dead
      // letters in minutes, not a day.
      DELIVERY_SCHEDULE_SCALE: '0.01',
      DELIVERY_POLL_MS: '200',
      SMTP_URL: mailbox.smtpUrl,
      MAIL_FROM: 'tronwatch dev <tronwatch@localhost.test>',
      PUBLIC_URL: `http://127.0.0.1:${port}`,
      CONSOLE_SIGNUP: 'open',
      HOST: '127.0.0.1',
      PORT: String(port),
      METRICS_PORT: '0',
      LOG_LEVEL: logLevel,
    });
    const service = await startService(cfg, {
      roles: ['api', 'ingest', 'worker'],
      logger: createLogger(logLevel),
      shutdown,
      devMailboxUrl: mailbox.url,
    });
    const url = service.url as string;
    const consoleUrl = `${url}/console/`;
    mailbox.setConsoleUrl(consoleUrl);

    // The demo account: plan Pro, a console password (random, printed once), an API key.
    const account = await accountsCreate(service.db, { email: DEV_EMAIL, plan: 'pro' });
    const password = randomBytes(12).toString('base64url');
    await setPasswordHash(service.db, account.id, await hashPassword(password));
    const apiKey = (await keysCreate(service.db, { account: account.id, name: 'dev' })).key;

    // The watches, through the public API (503 until the ingester has seen the chain head).
    const watches: Array<{ id: string; label: string }> = [];
    for (const w of plannedWatches()) {
      for (;;) {
        const res = await fetch(`${url}/v1/watches`, {
          method: 'POST',
          headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
          body: JSON.stringify({
            address: w.address,
            asset_filter: w.asset_filter,
            direction: w.direction,
            label: w.label,
            webhook_url: `${receiver.origin}/hook/${w.path}`,
          }),
        });
        const body = (await res.json()) as { id?: string; secret?: string };
        if (res.status === 503) {
          await sleep(200);
          continue;
        }
        if (res.status !== 201 || !body.id || !body.secret) {
          throw new Error(`POST /v1/watches (${w.label}): ${res.status} ${JSON.stringify(body)}`);
        }
        secrets.set(w.path, body.secret);
        watches.push({ id: body.id, label: w.label });
        break;
      }
    }

    print('');
    print('tronwatch dev: the whole service on this machine, events flowing');
    print('');
    print(`  console    ${consoleUrl}`);
    print(`  sign in    ${DEV_EMAIL}  /  ${password}`);
    print(`  e-mail     ${mailbox.url}  (every message the service sends, captured here)`);
    print(`  API key    ${apiKey}`);
    print(`             curl -H 'Authorization: Bearer ${apiKey}' ${url}/v1/events`);
    print(
      `  chain      synthetic mainnet, one block every ${intervalMs} ms (replay node ${replay.url})`,
    );
    print(`  receiver   ${receiver.origin}/hook/… (HTTPS; /hook/failing answers 503)`);
    print(`  data       ${dataDir} (embedded PostgreSQL, removed on exit)`);
    print('');
    print(
      `  ${watches.length} watches are registered; their first events arrive about ${Math.ceil(((LAG + 3) * intervalMs) / 1000)} s from now.`,
    );
    print('  Ctrl-C stops everything.');
    print('');

    return {
      url,
      consoleUrl,
      email: DEV_EMAIL,
      password,
      apiKey,
      watches,
      service,
      receiver,
      mailbox,
      stop: () => shutdown.kill(),
    };
  } catch (err) {
    await shutdown.kill();
    throw err;
  }
}

/**
 * The CLI's `tronwatch dev`: start the stack, keep it running until `until` aborts (Ctrl-C),
 * stop it. @returns the exit code (0).
 */
export async function runDev(until: AbortSignal, opts: DevOptions = {}): Promise<number> {
  const stack = await startDev(opts);
  try {
    if (!until.aborted) {
      await new Promise<void>((resolve) =>
        until.addEventListener('abort', () => resolve(), { once: true }),
      );
    }
  } finally {
    await stack.stop();
  }
  return 0;
}
