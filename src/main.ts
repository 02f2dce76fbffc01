/**
 * The `tronwatch` command line. One program, several roles (DESIGN §Processes):
 *   migrate | scan | record | replay-node | synth  (issue 2: the reader)
 * Each command parses config once (config.ts) and closes what it opens.
 */
import { Command, InvalidArgumentError } from 'commander';
import { createLogger } from './common/logger.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { migrate } from './db/migrate.js';
import { openDb } from './db/pool.js';
import { NodeClient } from './tron/node-client.js';
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

/** Ctrl-C / SIGTERM → abort the running command (loops take this signal). */
function shutdownSignal(): AbortSignal {
  const ac = new AbortController();
  const stop = () => ac.abort(new Error('interrupted'));
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return ac.signal;
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
    const db = await openDb({ url: cfg.database.url, embeddedDir: cfg.database.embeddedDir });
    try {
      const r = await migrate(db);
      log.info({ applied: r.applied, version: r.version, database: db.kind }, 'migrations applied');
    } finally {
      await db.close();
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
    const client = new NodeClient({
      url: o.node ?? cfg.node.url,
      apiKey: cfg.node.apiKey,
      timeoutMs: cfg.node.timeoutMs,
      retries: cfg.node.retries,
      logger: log,
    });
    const signal = shutdownSignal();
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
      await client.close();
    }
  });

program.parseAsync(process.argv).catch((err: unknown) => {
  process.stderr.write(`tronwatch: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
