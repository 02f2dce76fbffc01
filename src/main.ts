/**
 * The `tronwatch` command line. One program, several roles (DESIGN §Processes):
 *   serve | api | ingest | worker      the service's roles (serve = all three in one process)
 *   migrate | accounts | keys          operator commands
 *   demo                                the main job end to end on embedded defaults
 *   dev                                 the console with events flowing, on this machine
 *   scan | record | replay-node | synth the chain reader and its tools
 *   doctor                              checks a deployment's configuration and dependencies
 *   mcp                                 an MCP server over stdio, a client of a running service
 *   listen                              forwards a key's events, signed, to a local URL (issue 32)
 * Each command parses config once (config.ts) and closes what it opens.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import {
  accountsCreate,
  accountsInvite,
  accountsResetTwoFactor,
  keysCreate,
  keysList,
  keysRevoke,
} from './accounts/cli.js';
import { createLogger, type Logger } from './common/logger.js';
import { Shutdown } from './common/shutdown.js';
import { type Config, ConfigError, loadConfig, shutdownDeadlineMs } from './config.js';
import { migrate } from './db/migrate.js';
import { openDb } from './db/pool.js';
import { runDemo } from './devnet/demo.js';
import { recordBlocks } from './devnet/record.js';
import { runReplayNodeCli } from './devnet/replay-node.js';
import { writeSyntheticChain } from './devnet/synth-dir.js';
import { CHECK_NAMES, formatReport, runDoctor, selects } from './doctor/doctor.js';
import { runStdioMcp } from './mcp/stdio.js';
import { rotateKey } from './secrets/rotate.js';
import { type Role, secretBox, startService } from './service.js';
import { type GrpcTarget, parseGrpcTarget } from './tron/grpc.js';
import { buildCheckpoint } from './tron/light-client/checkpoint-build.js';
import { NodeClient, nodeClientFor } from './tron/node-client.js';
import { scan, transferLine } from './tron/scan.js';

function int(name: string, min = 0) {
  return (v: string) => {
    if (!/^\d+$/.test(v) || Number(v) < min)
      throw new InvalidArgumentError(`${name} must be an integer ≥ ${min}`);
    return Number(v);
  };
}

function config(): Config {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`);
      process.exit(2);
    }
    throw err;
  }
}

/**
 * The process's shutdown registry (src/common/shutdown.ts): Ctrl-C / SIGTERM kill it, which aborts
 * its signal (loops stop taking work) and closes what the command registered, in reverse order.
 * A command also kills it when it ends, on success or failure.
 */
function processShutdown(logger?: Logger): Shutdown {
  const shutdown = new Shutdown(logger);
  const stop = () => void shutdown.kill(new Error('interrupted'));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return shutdown;
}

const program = new Command()
  .name('tronwatch')
  .description('Watches TRON mainnet addresses for confirmed USDT (TRC-20) and TRX transfers.')
  .showHelpAfterError();

program
  .command('migrate')
  .description(
    'apply pending database migrations (DATABASE_URL, or the embedded database in DATA_DIR)',
  )
  .action(async () => {
    const cfg = config();
    const log = createLogger(cfg.logLevel);
    const shutdown = processShutdown(log);
    try {
      const db = await openDb(cfg.database, log);
      shutdown.add('database', () => db.close());
      const r = await migrate(db);
      log.info({ applied: r.applied, version: r.version, database: db.kind }, 'migrations applied');
    } finally {
      await shutdown.kill();
    }
  });

program
  .command('scan')
  .description('print the transfers of solidified blocks FROM..TO as JSON lines (one per transfer)')
  .option('--node <url>', 'node URL (default: TRON_NODE_URL)')
  .requiredOption('--from <n>', 'first block', int('--from'))
  .requiredOption('--to <n>', 'last block (inclusive)', int('--to'))
  .option(
    '--concurrency <n>',
    'blocks fetched in parallel (default: TRON_NODE_CONCURRENCY)',
    int('--concurrency', 1),
  )
  .action(async (o: { node?: string; from: number; to: number; concurrency?: number }) => {
    const cfg = config();
    const log = createLogger(cfg.logLevel);
    if (o.to < o.from) throw new InvalidArgumentError('--to must be ≥ --from');
    const shutdown = processShutdown(log);
    const client = nodeClientFor(cfg.node, log, { url: o.node });
    shutdown.add('node client', () => client.close());
    const signal = shutdown.signal;
    const started = Date.now();
    let lastReport = started;
    const out: string[] = [];
    const flush = () => {
      if (out.length) process.stdout.write(out.join(''));
      out.length = 0;
    };
    try {
      const stats = await scan(client, o.from, o.to, {
        concurrency: o.concurrency ?? cfg.node.concurrency,
        signal,
        onTransfer: (t) => out.push(`${JSON.stringify(transferLine(t))}\n`),
        onBlock: (b) => {
          flush();
          const now = Date.now();
          if (now - lastReport >= 2000) {
            lastReport = now;
            const done = b.ref.number - o.from + 1;
            log.info(
              { block_number: b.ref.number, done, total: o.to - o.from + 1 },
              'scan progress',
            );
          }
        },
      });
      flush();
      log.info({ ...stats, seconds: (Date.now() - started) / 1000 }, 'scan done');
    } finally {
      await shutdown.kill();
    }
  });

program
  .command('record')
  .description(
    'record solidified blocks FROM..TO and their transaction infos into DIR (the chain/ layout)',
  )
  .option(
    '--node <url>',
    "node URL (default: TRON_NODE_URL's first provider, with its gRPC address)",
  )
  .option(
    '--grpc <address>',
    "where the node serves java-tron's gRPC (grpc://host:port or grpcs://host:port), for each block's exact bytes (blockext-<n>.bin); `none` records JSON only, which the demo and tronwatch cannot prove a recorded mainnet block from (default: TRON_NODE_URL's #grpc= when --node is not given)",
  )
  .requiredOption('--from <n>', 'first block', int('--from'))
  .requiredOption('--to <n>', 'last block (inclusive)', int('--to'))
  .requiredOption('--out <dir>', 'output folder')
  .action(async (o: { node?: string; grpc?: string; from: number; to: number; out: string }) => {
    const cfg = config();
    const log = createLogger(cfg.logLevel);
    let grpc: GrpcTarget | undefined;
    if (o.grpc !== undefined && o.grpc !== 'none') {
      try {
        grpc = parseGrpcTarget(o.grpc);
      } catch (err) {
        process.stderr.write(`tronwatch record: --grpc: ${(err as Error).message}\n`);
        process.exit(2);
      }
    }
    const first = cfg.node.providers[0];
    const client =
      o.node === undefined && o.grpc === undefined
        ? nodeClientFor(cfg.node, log, { provider: first })
        : new NodeClient({
            url: o.node ?? first?.url ?? cfg.node.url,
            apiKey: cfg.node.apiKey,
            timeoutMs: cfg.node.timeoutMs,
            retries: cfg.node.retries,
            connections: cfg.node.concurrency + 2,
            ...(grpc ? { grpc } : {}),
            logger: log,
          });
    if (!client.servesExact) {
      if (o.grpc !== 'none') {
        process.stderr.write(
          `tronwatch record: ${client.name} has no gRPC address, so the exact bytes of each block (blockext-<n>.bin) cannot be recorded, and without them neither tronwatch nor the demo can prove a recorded block. Give --grpc grpc://host:port (TronGrid: grpc://grpc.trongrid.io:50052), or --grpc none to record JSON only.\n`,
        );
        await client.close();
        process.exit(2);
      }
      log.warn(
        { provider: client.name },
        'recording JSON only (--grpc none): no blockext-<n>.bin, so the demo and the replay node cannot prove these blocks',
      );
    }
    const shutdown = processShutdown(log);
    shutdown.add('node client', () => client.close());
    let last = Date.now();
    try {
      const r = await recordBlocks({
        client,
        from: o.from,
        to: o.to,
        outDir: o.out,
        apiKey: cfg.node.apiKey,
        timeoutMs: cfg.node.timeoutMs,
        retries: cfg.node.retries,
        signal: shutdown.signal,
        onProgress: (p) => {
          if (Date.now() - last >= 2000 || p.done === p.total) {
            last = Date.now();
            log.info(
              { block_number: p.blockNumber, done: p.done, total: p.total },
              'record progress',
            );
          }
        },
      });
      log.info(r, 'recorded');
    } finally {
      await shutdown.kill();
    }
  });

program
  .command('replay-node')
  .description(
    'serve recorded blocks (DIR in the chain/ layout) as a java-tron HTTP API, revealing them over time',
  )
  .requiredOption('--dir <dir>', 'folder of block-<n>.json + txinfo-<n>.json')
  .option('--port <p>', 'TCP port (0: any free port)', int('--port'), 0)
  .option('--interval-ms <n>', 'ms per block (mainnet: 3000)', int('--interval-ms'), 3000)
  .option('--lag <n>', 'full-node head minus solidified head, blocks', int('--lag'), 18)
  .option(
    '--start-before <n>',
    'blocks before the first recorded one to start at (default: lag + 10)',
    int('--start-before'),
  )
  .option('--host <host>', 'listen address', '127.0.0.1')
  .option('--instant', 'solidify every recorded block at once')
  .option('--stop-at-end', 'stop at the last recorded block instead of producing empty blocks')
  .option('--grpc', "also serve java-tron's gRPC GetBlockByNum2 (exact block bytes) on a free port")
  .option(
    '--checkpoint-out <file>',
    "write the checkpoint a light client proves this node's chain from (JSON, for TRON_LIGHT_CLIENT_CHECKPOINT)",
  )
  .action(
    async (o: {
      dir: string;
      checkpointOut?: string;
      port: number;
      intervalMs: number;
      lag: number;
      startBefore?: number;
      host: string;
      instant?: boolean;
      stopAtEnd?: boolean;
      grpc?: boolean;
    }) => {
      await runReplayNodeCli({
        ...(o.grpc ? { grpc: true } : {}),
        dir: o.dir,
        port: o.port,
        intervalMs: o.intervalMs,
        lag: o.lag,
        host: o.host,
        ...(o.startBefore !== undefined ? { startBefore: o.startBefore } : {}),
        ...(o.instant ? { instant: true } : {}),
        ...(o.stopAtEnd ? { stopAtEnd: true } : {}),
        ...(o.checkpointOut !== undefined ? { checkpointOut: o.checkpointOut } : {}),
      });
    },
  );

program
  .command('synth')
  .description('write a deterministic synthetic mainnet-shaped chain into DIR (the chain/ layout)')
  .requiredOption('--out <dir>', 'output folder')
  .option('--from <n>', 'first block number', int('--from'), 70_000_000)
  .option('--count <n>', 'blocks', int('--count', 1), 100)
  .option('--tx-per-block <n>', 'transactions per block', int('--tx-per-block'), 600)
  .option('--addresses <n>', 'size of the address population', int('--addresses', 2), 10_000)
  .option('--seed <n>', 'PRNG seed', int('--seed'), 1)
  .action(
    async (o: {
      out: string;
      from: number;
      count: number;
      txPerBlock: number;
      addresses: number;
      seed: number;
    }) => {
      const log = createLogger(config().logLevel);
      let last = Date.now();
      const r = await writeSyntheticChain(
        { seed: o.seed, firstBlock: o.from, txPerBlock: o.txPerBlock, addresses: o.addresses },
        o.count,
        o.out,
        (n, done) => {
          if (Date.now() - last >= 2000) {
            last = Date.now();
            log.info({ block_number: n, done, total: o.count }, 'synth progress');
          }
        },
      );
      log.info(r, 'synthetic chain written');
    },
  );

program
  .command('doctor')
  .description(
    'check the configuration, the database, Redis, every node, the clock, the secret key and the stored secrets it must decrypt, the public URL, the Telegram token and the running service (/healthz, ingest lag or stall, workers); exit 0 only when no check fails',
  )
  .option(
    '--json',
    'print the report as JSON ({ok, checks: [{check, target, status, detail, fix}]})',
  )
  .option('--timeout-ms <n>', 'deadline of each network check, ms', int('--timeout-ms', 100), 5_000)
  .option(
    '--cert-days <n>',
    'a TLS certificate expiring within this many days fails',
    int('--cert-days'),
    14,
  )
  .option(
    '--check <name>',
    `run one check, or one family (node, testnet): ${CHECK_NAMES.join(', ')}`,
    (v: string) => {
      if (!CHECK_NAMES.some((c) => selects(v, c))) {
        throw new InvalidArgumentError(`no check named ${v}: one of ${CHECK_NAMES.join(', ')}`);
      }
      return v;
    },
  )
  .option('--strict', 'warnings fail too (exit 1)')
  .option('--url <url>', 'the running service (default http://HOST:PORT, 127.0.0.1 for 0.0.0.0)')
  .action(
    async (o: {
      json?: boolean;
      timeoutMs: number;
      certDays: number;
      check?: string;
      strict?: boolean;
      url?: string;
    }) => {
      const report = await runDoctor(process.env, {
        timeoutMs: o.timeoutMs,
        certDays: o.certDays,
        only: o.check,
        strict: o.strict === true,
        serviceUrl: o.url,
      });
      process.stdout.write(
        o.json ? `${JSON.stringify(report, null, 2)}\n` : formatReport(report, o.strict === true),
      );
      process.exitCode = report.ok ? 0 : 1;
    },
  );

program
  .command('checkpoint')
  .description(
    "build an SR-set checkpoint (block, 27 SRs in schedule order, their signing keys, next maintenance) from TRON_NODE_URL's providers, each answer agreed by TRON_NODE_QUORUM of them and checked against the recent blocks' signatures; print it as JSON for review (see checkpoints/README.md)",
  )
  .option('--network <name>', 'network name written into it', 'mainnet')
  .action(async (o: { network: string }) => {
    const cfg = config();
    const providers = cfg.node.providers.map((p) => ({
      url: p.url,
      name: p.name,
      apiKey: p.apiKey,
    }));
    const cp = await buildCheckpoint(providers, {
      quorum: cfg.node.quorum,
      timeoutMs: cfg.node.timeoutMs,
      network: o.network,
    });
    process.stdout.write(`${JSON.stringify(cp, null, 2)}\n`);
  });

/** After a clean stop, how long a handle left open may delay the exit, ms (then exit 0 anyway). */
const EXIT_GRACE_MS = 1_000;

/** Run roles until SIGINT/SIGTERM, then stop them gracefully (exit 0), within the deadline. */
async function runRoles(roles: Role[]): Promise<void> {
  const cfg = config();
  const log = createLogger(cfg.logLevel);
  const shutdown = processShutdown(log);
  const signal = shutdown.signal;
  const deadlineMs = shutdownDeadlineMs(cfg);
  // The deadline runs from the signal, whatever the process is doing (start-up included).
  signal.addEventListener(
    'abort',
    () => {
      setTimeout(() => {
        log.error({ deadline_ms: deadlineMs }, 'graceful stop overran its deadline');
        log.flush();
        process.exit(1);
      }, deadlineMs).unref();
    },
    { once: true },
  );
  // A failed start closes what it had opened (the registry) before this rejects. A start can
  // last (it waits for PostgreSQL): a SIGTERM meanwhile is a clean stop, not a failure.
  let svc: Awaited<ReturnType<typeof startService>>;
  try {
    svc = await startService(cfg, { roles, logger: log, shutdown });
  } catch (err) {
    if (!signal.aborted) throw err;
    log.info({ roles }, 'stopped before the start completed');
    process.exitCode = 0;
    return;
  }
  log.info({ roles, database: svc.db.kind, node: cfg.node.url }, 'tronwatch running');
  if (!signal.aborted) {
    await new Promise<void>((resolve) =>
      signal.addEventListener('abort', () => resolve(), { once: true }),
    );
  }
  log.info('shutting down');
  await shutdown.kill();
  log.info({ roles }, 'stopped');
  process.exitCode = 0;
  setTimeout(() => {
    log.warn('a handle is still open after the stop; exiting anyway');
    log.flush();
    process.exit(0);
  }, EXIT_GRACE_MS).unref();
}

program
  .command('serve')
  .description('run the API, the ingester and the delivery worker in one process')
  .action(() => runRoles(['api', 'ingest', 'worker']));
program
  .command('api')
  .description('run the HTTP API role')
  .action(() => runRoles(['api']));
program
  .command('ingest')
  .description('run the ingest role: read solidified blocks, match watches, write events')
  .action(() => runRoles(['ingest']));
program
  .command('worker')
  .description('run the delivery worker role: deliver due notifications')
  .action(() => runRoles(['worker']));

program
  .command('demo')
  .description('run the main job end to end on embedded defaults with a local HTTPS receiver')
  .option(
    '--blocks <dir>',
    'replay recorded blocks (chain/ layout) instead of live or synthetic ones',
  )
  .option('--offline', 'do not try live mainnet; use the synthetic chain')
  .option('--telegram', 'also deliver to a Telegram chat, through a local Bot API stand-in')
  .option(
    '--testnet',
    "test mode on a Nile-shaped chain (Nile's USDT contract) served as TRON_TESTNET_NODE_URL, watched with a tw_test_ key (offline)",
  )
  .option(
    '--keep',
    'keep the service running after the report (look around the console; Ctrl-C stops)',
  )
  .addOption(
    new Option('--log-level <level>', "the service's log level (JSON lines on stderr)")
      .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('warn'),
  )
  .action(
    async (o: {
      blocks?: string;
      offline?: boolean;
      keep?: boolean;
      telegram?: boolean;
      testnet?: boolean;
      logLevel: Config['logLevel'];
    }) => {
      // Only with --keep does Ctrl-C end the wait (without it, Ctrl-C ends the process as usual).
      const shutdown = o.keep ? processShutdown() : undefined;
      process.exitCode = await runDemo({
        ...(o.blocks ? { blocks: o.blocks } : {}),
        ...(o.offline ? { offline: true } : {}),
        ...(o.telegram ? { telegram: true } : {}),
        ...(o.testnet ? { testnet: true } : {}),
        ...(shutdown ? { keepUntil: shutdown.signal } : {}),
        logLevel: o.logLevel,
      });
      await shutdown?.kill();
    },
  );

program
  .command('dev')
  .description(
    'the console on embedded defaults with a synthetic chain, a local receiver and mailbox, a signed-in demo account: events flowing (Ctrl-C stops)',
  )
  .option('--port <n>', 'port of the console and API (default 8080, or a free one)', int('--port'))
  .option('--interval-ms <n>', 'one block every n ms (default 1000)', int('--interval-ms', 50))
  .addOption(
    new Option('--log-level <level>', "the service's log level (JSON lines on stderr)")
      .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
      .default('warn'),
  )
  .action(async (o: { port?: number; intervalMs?: number; logLevel: Config['logLevel'] }) => {
    const shutdown = processShutdown();
    // Imported here: the dev stack's mailbox uses development dependencies (smtp-server).
    const { runDev } = await import('./devnet/dev.js');
    process.exitCode = await runDev(shutdown.signal, {
      ...(o.port !== undefined ? { port: o.port } : {}),
      ...(o.intervalMs !== undefined ? { intervalMs: o.intervalMs } : {}),
      logLevel: o.logLevel,
    });
    await shutdown.kill();
  });

/** Open the database (migrated), run `fn`, print its result as JSON, close. */
async function withDb<T>(
  fn: (db: Awaited<ReturnType<typeof openDb>>) => Promise<T>,
): Promise<void> {
  const cfg = config();
  const log = createLogger(cfg.logLevel);
  const shutdown = processShutdown(log);
  try {
    const db = await openDb(cfg.database, log);
    shutdown.add('database', () => db.close());
    await migrate(db);
    process.stdout.write(`${JSON.stringify(await fn(db), null, 2)}\n`);
  } finally {
    await shutdown.kill();
  }
}

const accounts = program
  .command('accounts')
  .description('manage accounts (the console manages keys and watches; see accounts invite)');
accounts
  .command('create')
  .description('create an account on a plan')
  .requiredOption('--email <email>', 'e-mail address (unique)')
  .requiredOption('--plan <plan>', 'free | starter | pro | scale | business')
  .option('--rate-limit <n>', 'requests per minute (Business: custom)')
  .option('--watch-quota <n>', 'active watches (Business: custom)')
  .action((o: { email: string; plan: string; rateLimit?: string; watchQuota?: string }) =>
    withDb((db) =>
      accountsCreate(db, {
        email: o.email,
        plan: o.plan,
        ...(o.rateLimit !== undefined ? { rateLimit: o.rateLimit } : {}),
        ...(o.watchQuota !== undefined ? { watchQuota: o.watchQuota } : {}),
      }),
    ),
  );

accounts
  .command('invite')
  .description(
    'print a one-time link that sets the console password of a user: the account owner (account created when missing), or with --account a new member',
  )
  .requiredOption('--email <email>', 'e-mail address')
  .option('--plan <plan>', 'plan of a new account: free | starter | pro | scale | business', 'free')
  .option('--account <idOrEmail>', 'add the user as a member of this account (id or e-mail)')
  .option('--role <role>', 'the member role: owner | admin | developer | viewer', 'viewer')
  .action((o: { email: string; plan: string; account?: string; role: string }) =>
    withDb((db) =>
      accountsInvite(db, {
        email: o.email,
        plan: o.plan,
        ...(o.account !== undefined ? { account: o.account, role: o.role } : {}),
        publicUrl: config().console.publicUrl,
      }),
    ),
  );

accounts
  .command('two-factor-reset')
  .description(
    "turn off a console user's second factor (an owner who lost both the device and the recovery codes); they then set up a new one",
  )
  .requiredOption('--email <email>', "the user's e-mail address")
  .action((o: { email: string }) => withDb((db) => accountsResetTwoFactor(db, { email: o.email })));

const keys = program.command('keys').description('manage API keys (tw_live_…, tw_test_…)');
keys
  .command('create')
  .description('issue an API key for an account; the key is printed once')
  .requiredOption('--account <idOrEmail>', 'account id (acc_…) or e-mail')
  .option('--name <name>', 'a label for the key')
  .option('--read-only', 'a read-only key: GET requests only (and the read-only MCP tools)')
  .option('--test', 'a test-mode key (tw_test_…): test watches and test deposits only')
  .action((o: { account: string; name?: string; readOnly?: boolean; test?: boolean }) =>
    withDb((db) =>
      keysCreate(db, {
        account: o.account,
        ...(o.name ? { name: o.name } : {}),
        scope: o.readOnly ? 'read' : 'full',
        ...(o.test ? { test: true } : {}),
      }),
    ),
  );
keys
  .command('list')
  .description("list an account's keys (never the keys themselves)")
  .requiredOption('--account <idOrEmail>', 'account id (acc_…) or e-mail')
  .action((o: { account: string }) => withDb((db) => keysList(db, { account: o.account })));
keys
  .command('revoke')
  .description('revoke a key: refused from the next request on')
  .argument('<keyId>', 'key id (key_…)')
  .action((keyId: string) => withDb((db) => keysRevoke(db, { keyId })));

program
  .command('mcp')
  .description(
    'an MCP server over stdio for agents: tools that call the service at TRONWATCH_URL (default http://127.0.0.1:8080) with the API key TRONWATCH_API_KEY',
  )
  .action(async () => {
    try {
      await runStdioMcp();
    } catch (err) {
      process.stderr.write(`tronwatch mcp: ${err instanceof Error ? err.message : String(err)}\n`);
      process.exit(2);
    }
  });

program
  .command('listen')
  .description(
    "forward the key's new events (test mode with a tw_test_ key), signed exactly as its webhooks are, to a local URL: no public URL needed; one line per event with the receiver's status (TRONWATCH_URL, TRONWATCH_API_KEY; Ctrl-C stops)",
  )
  .requiredOption('--forward-to <url>', 'the local receiver, e.g. http://localhost:3000/hook')
  .option(
    '--url <url>',
    'the tronwatch service (default TRONWATCH_URL, else http://127.0.0.1:8080)',
  )
  .option('--api-key <key>', 'the API key (default TRONWATCH_API_KEY)')
  .action(async (o: { forwardTo: string; url?: string; apiKey?: string }) => {
    const shutdown = processShutdown();
    const { runListen } = await import('./listen/listen.js');
    process.exitCode = await runListen({
      forwardTo: o.forwardTo,
      env: process.env,
      url: o.url,
      apiKey: o.apiKey,
      signal: shutdown.signal,
      out: (line) => process.stdout.write(`${line}\n`),
      err: (line) => process.stderr.write(`tronwatch listen: ${line}\n`),
    });
    await shutdown.kill();
  });

const secretsCmd = program
  .command('secrets')
  .description('manage the encryption of webhook secrets at rest');
secretsCmd
  .command('rotate-key')
  .description(
    're-encrypt every webhook secret not under the current key (SECRET_ENCRYPTION_KEY; embedded mode: a new DATA_DIR/secret.key is generated first, the old one kept as secret.key.old-<keyid>), then print the count and the old key ids no longer referenced',
  )
  .option('--no-new-key', 'embedded mode: keep the current key file, only finish re-encrypting')
  .option('--batch-size <n>', 'rows per transaction', int('--batch-size', 1), 500)
  .action((o: { newKey: boolean; batchSize: number }) =>
    withDb(async (db) => {
      const cfg = config();
      const log = createLogger(cfg.logLevel);
      const r = await rotateKey(db, {
        keyring: () => secretBox(cfg, log),
        keyFileDir: cfg.secrets.key ? undefined : cfg.dataDir,
        newKey: o.newKey,
        batchSize: o.batchSize,
        onBatch: (n) => log.debug({ reencrypted: n }, 'webhook secrets re-encrypted so far'),
      });
      if (r.failures.length > 0) process.exitCode = 1;
      return r;
    }),
  );

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`tronwatch: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
