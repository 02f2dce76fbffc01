/**
 * One program, several roles (DESIGN §Processes and scale-out): `api` (stateless HTTP),
 * `ingest` (the block loop) and `worker` (the outbox, and the pruning job: src/retention/prune.ts). `serve` runs all three in one process,
 * the default for a small deployment and what the demo uses. Start-up: parse config, open the
 * database (PostgreSQL, or embedded PGlite in DATA_DIR), listen (api role: /healthz answers 503
 * until started), wait for PostgreSQL when it is unreachable and apply migrations, then start the
 * roles; `stop()` stops taking work, lets in-flight work finish, and closes pools.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './api/app.js';
import { buildMetricsApp } from './api/metrics-app.js';
import { TEST_NETWORK } from './common/environment.js';
import type { Logger } from './common/logger.js';
import { Metrics } from './common/metrics.js';
import {
  loadOldKeyFiles,
  loadOrCreateKeyFile,
  parseKey,
  parseKeyList,
  SecretBox,
} from './common/secrets.js';
import { Shutdown } from './common/shutdown.js';
import type { Config } from './config.js';
import { runWhileLeader } from './db/leader.js';
import { migrateWhenReachable } from './db/migrate.js';
import { type Db, openDb } from './db/pool.js';
import { ChatDeliveryWorker } from './delivery/chat-worker.js';
import { DeliveryWorker } from './delivery/worker.js';
import { Confirmer } from './ingest/confirm.js';
import { type FinalityGate, finalityGateFor } from './ingest/finality-gate.js';
import { HeadRefresher } from './ingest/head-refresh.js';
import { Ingester, type IngesterOptions } from './ingest/loop.js';
import { assertProvable } from './ingest/provable.js';
import { createMailer, type Mailer } from './mail/mailer.js';
import { closeRedis, createRedis } from './redis/client.js';
import { RedisPacer } from './redis/pacing.js';
import { openRateLimits } from './redis/rate-limit.js';
import { Pruner } from './retention/prune.js';
import type { TelegramBot } from './telegram/bot.js';
import { BotConnection } from './telegram/connection.js';
import { FallbackPacer, MemoryPacer, type Pacer } from './telegram/pacing.js';
import { runUpdatePolling, setUpdateWebhook } from './telegram/updates.js';
import { usdtContractHexOf } from './tron/address.js';
import { type NodeGroup, nodeGroupFor } from './tron/node-group.js';
import { AlertChannelSender } from './watches/alert-channels.js';
import { emailAlertSender, mailerTransport } from './watches/alert-mail.js';
import { AlertLoop } from './watches/alert-outbox.js';

export type Role = 'api' | 'ingest' | 'worker';

export interface Service {
  db: Db;
  /** Base URL of the API when the api role runs (http://host:port). */
  url: string | undefined;
  /** URL of the metrics listener (METRICS_HOST:METRICS_PORT/metrics), in every role. */
  metricsUrl: string;
  app: FastifyInstance | undefined;
  ingester: Ingester | undefined;
  /** The test environment's ingester (Nile) when TRON_TESTNET_NODE_URL is set (issue 32 item 2). */
  testIngester: Ingester | undefined;
  worker: DeliveryWorker | undefined;
  /**
   * The bot's connection when TELEGRAM_BOT_TOKEN is set (and the api or worker role runs): getMe
   * is retried in the background, `current()` is the bot once it answered.
   */
  telegram: BotConnection | undefined;
  /** The chat delivery worker (worker role with a bot), once the bot is ready. */
  readonly chatWorker: ChatDeliveryWorker | undefined;
  /** The pruning job (worker role; one pass per interval across the deployment, by lease). */
  pruner: Pruner | undefined;
  /** The outgoing mailer when SMTP_URL is set (src/mail/mailer.ts); undefined: e-mail is off. */
  mailer: Mailer | undefined;
  /** Graceful stop of every role, then the pools. Idempotent. */
  stop(): Promise<void>;
}

/**
 * The webhook-secret keyring: SECRET_ENCRYPTION_KEY, or DATA_DIR/secret.key (created once),
 * encrypts; SECRET_ENCRYPTION_KEYS_OLD and, in the embedded mode, DATA_DIR/secret.key.old-<keyid>
 * only decrypt (rotation: `tronwatch secrets rotate-key`).
 */
export function secretBox(cfg: Config, logger: Logger): SecretBox {
  const old = parseKeyList(cfg.secrets.oldKeys);
  if (cfg.secrets.key) return new SecretBox([parseKey(cfg.secrets.key), ...old]);
  if (cfg.database.url) {
    logger.warn(
      { data_dir: cfg.dataDir },
      'SECRET_ENCRYPTION_KEY is unset: using DATA_DIR/secret.key; every replica sharing this database needs the same key',
    );
  }
  return new SecretBox([loadOrCreateKeyFile(cfg.dataDir), ...loadOldKeyFiles(cfg.dataDir), ...old]);
}

export interface StartOptions {
  roles: readonly Role[];
  logger: Logger;
  /** Extra ingester options (demo/bench hooks). */
  ingest?: Partial<Pick<IngesterOptions, 'onBlock' | 'hooks'>>;
  /** The process's shutdown registry (main.ts); default a new one, killed by stop(). */
  shutdown?: Shutdown;
  /**
   * `tronwatch dev` only: the local mailbox page (src/devnet/mailbox.ts) the console links to
   * (AppDeps.devMailboxUrl). Default none.
   */
  devMailboxUrl?: string;
  /**
   * Benchmarks only (bench/e2e.ts): ingest commits a block once the providers' solidified head
   * covers it, as before the light client, so a run measures that baseline next to the light
   * client's figures. No setting or command reaches it (issue 28: the light client has no off
   * switch); never serve with it.
   */
  benchmarkBaselineWithoutLightClient?: true;
}

/**
 * Start the given roles. Everything opened is registered in `opts.shutdown` (a new registry when
 * absent) right after it opens, so `stop()` (= the registry's kill) closes it in reverse order,
 * and a start that fails halfway closes what it had opened before rethrowing. While PostgreSQL is
 * unreachable it waits (migrateWhenReachable: backoff up to 5 s, logged once), the api role
 * already listening; Redis is never waited for beyond 1 s (in-process windows until it answers).
 * @throws when the embedded database cannot be opened, a migration fails, PostgreSQL refuses us
 *   for good (authentication, missing database), WEBHOOK_CA_FILE is missing or a listen fails;
 *   `opts.shutdown.signal`'s reason when it is aborted before the start completes.
 */
export async function startService(cfg: Config, opts: StartOptions): Promise<Service> {
  const { logger } = opts;
  // Before anything opens: an ingester that could prove nothing does not start (issue 26).
  if (opts.roles.includes('ingest')) {
    assertProvable(cfg.node, logger);
    if (cfg.testnetNode) assertProvable(cfg.testnetNode, logger);
  }
  const shutdown = opts.shutdown ?? new Shutdown(logger);
  if (cfg.delivery.allowCidrs.length > 0) {
    logger.warn(
      { allow_cidrs: cfg.delivery.allowCidrs },
      'WEBHOOK_ALLOW_CIDRS is set: webhooks may reach these NON-PUBLIC addresses (development and tests only)',
    );
  }
  const db = await openDb(cfg.database, logger);
  shutdown.add('database', () => db.close());
  const running: Promise<void>[] = [];
  // Closed after the database's closer is registered, so before it runs: the roles' loops end.
  shutdown.add('roles', () => Promise.allSettled(running));
  let app: FastifyInstance | undefined;
  let url: string | undefined;
  let metricsUrl: string;
  let ingester: Ingester | undefined;
  let testIngester: Ingester | undefined;
  let worker: DeliveryWorker | undefined;
  let telegram: BotConnection | undefined;
  let chatWorker: ChatDeliveryWorker | undefined;
  let pruner: Pruner | undefined;
  let mailer: Mailer | undefined;
  try {
    const secrets = secretBox(cfg, logger);
    // Closed late (registered early): messages queued by the last requests still go out.
    mailer = createMailer(cfg.mail, logger);
    const outgoing = mailer;
    if (outgoing) shutdown.add('mailer', () => outgoing.close());
    // One registry per process, fed by every role it runs; the metrics listener serves it.
    const metrics = new Metrics({ db, logger, processMetrics: true });
    if (cfg.delivery.caFile && !fs.existsSync(cfg.delivery.caFile)) {
      throw new Error(`WEBHOOK_CA_FILE ${cfg.delivery.caFile} does not exist`);
    }
    if (cfg.telegram.token && (opts.roles.includes('api') || opts.roles.includes('worker'))) {
      // The token is checked with getMe in the background (connection.ts): the service starts
      // whether or not the Bot API answers; until it does, the console's Telegram endpoints answer
      // 503 and chat notifications wait in the outbox (no chat worker yet, so no attempt).
      // One chat pacer per process, shared in Redis across processes: the chat worker's deliveries
      // and the bot's own replies take their slots in the same windows.
      const conn = new BotConnection(cfg.telegram, logger, openPacer(cfg, logger, shutdown));
      telegram = conn;
      running.push(conn.run(shutdown.signal));
    }
    // The API listens before the database is awaited (issue 17 item 6): while this process waits
    // for PostgreSQL and applies migrations, /healthz answers 503 and every other route 503
    // with Retry-After (src/api/app.ts, `started`), so a load balancer sees it alive and not ready.
    let started = false;
    let heads: HeadRefresher | undefined;
    let testHeads: HeadRefresher | undefined;
    let chain: NodeGroup | undefined;
    let testChain: NodeGroup | undefined;
    if (opts.roles.includes('api')) {
      ({ app, url } = await startApi(cfg, {
        db,
        logger,
        secrets,
        metrics,
        telegram,
        shutdown,
        mailer,
        started: () => started,
        refreshHead: (network) =>
          (network === TEST_NETWORK ? testHeads : heads)?.refresh() ?? Promise.resolve(undefined),
        chain: () => chain,
        ...(cfg.testnetNode ? { testnetChain: () => testChain } : {}),
        devMailboxUrl: opts.devMailboxUrl,
      }));
    }
    const m = await migrateWhenReachable(db, { logger, signal: shutdown.signal });
    if (m.applied.length)
      logger.info({ applied: m.applied, version: m.version }, 'migrations applied');
    if (opts.roles.includes('worker')) {
      const w = new DeliveryWorker({
        db,
        secrets,
        config: cfg,
        logger,
        metrics,
        pacer: openEndpointPacer(cfg, logger, shutdown),
      });
      worker = w;
      running.push(w.start(shutdown.signal));
      shutdown.add('delivery worker', () => w.stop());
      // Bounded growth (issue 17 item 4): retention, in the role every deployment runs; the
      // lease makes it one pass per PRUNE_INTERVAL_SECONDS however many workers there are.
      const p = new Pruner({
        db,
        retention: { ...cfg.retention, auditDays: cfg.audit.retentionDays },
        logger,
        metrics,
      });
      pruner = p;
      running.push(p.start(shutdown.signal));
      shutdown.add('pruning job', () => p.stop());
      // Watch alerts (issue 19 item 2, issue 29 item 1): the alert outbox, by e-mail when it is
      // on and on the accounts' alert channels; one sender across replicas (a lease).
      const channels = new AlertChannelSender({
        db,
        secrets,
        timeoutMs: cfg.delivery.timeoutMs,
        allowCidrs: cfg.delivery.allowCidrs,
        caFile: cfg.delivery.caFile,
      });
      const a = new AlertLoop({
        db,
        consoleUrl: cfg.console.publicUrl,
        paceMinutes: cfg.alerts.paceMinutes,
        email: mailer ? emailAlertSender(db, mailerTransport(mailer)) : undefined,
        channels: channels.send,
        retryScale: cfg.delivery.scheduleScale,
        logger,
      });
      running.push(a.start(shutdown.signal));
      shutdown.add('alert sender', async () => {
        await a.stop();
        await channels.close();
      });
      if (telegram) {
        const conn = telegram;
        const pacer = conn.pacer;
        const starting = conn.ready(shutdown.signal).then((bot) => {
          if (!bot || shutdown.signal.aborted) return;
          const cw = new ChatDeliveryWorker({
            db,
            telegram: bot,
            pacer,
            config: cfg,
            logger,
            metrics,
          });
          chatWorker = cw;
          running.push(cw.start(shutdown.signal));
          cw.wake(); // notifications that waited for the bot
        });
        running.push(starting);
        shutdown.add('chat delivery worker', async () => {
          await starting;
          await chatWorker?.stop();
        });
      }
    }
    if (opts.roles.includes('ingest')) {
      // The light client is always on for mainnet (issue 28): at the pinned checkpoint, or at one
      // the providers agree on at the first start (finality-gate.ts finalityGateFor).
      // Providers outvoted on the SR set are set aside in the group ingest reads from.
      const group = ingestGroupFor(cfg, { logger, metrics, shutdown });
      const finality = opts.benchmarkBaselineWithoutLightClient
        ? undefined
        : await finalityGateFor(cfg, cfg.network, { group, logger });
      ingester = startIngest(cfg, {
        ...opts,
        group,
        finality,
        db,
        metrics,
        worker,
        shutdown,
        running,
        ...(telegram && worker ? { onEvents: () => chatWorker?.wake() } : {}),
      });
      // The test environment's chain (issue 32 item 2), when TRON_TESTNET_NODE_URL is set: the
      // same reader, checks and commit, its own cursor, head, leader lock and stall record. Its
      // own light client when TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT pins a Nile checkpoint (its
      // own stored state; no trust on first use for test money), and no metrics (the chain
      // gauges are mainnet's: a second ingester would overwrite them).
      if (cfg.testnetNode) {
        const testPin = cfg.ingest.testnetLightClientCheckpoint;
        const chain = { network: TEST_NETWORK, node: cfg.testnetNode };
        const testGroup = ingestGroupFor(cfg, { logger, metrics, shutdown, chain });
        testIngester = startIngest(cfg, {
          ...opts,
          group: testGroup,
          finality:
            testPin === undefined || opts.benchmarkBaselineWithoutLightClient
              ? undefined
              : await finalityGateFor(
                  { ingest: { lightClientCheckpoint: testPin }, node: cfg.testnetNode },
                  TEST_NETWORK,
                  { group: testGroup, logger: logger.child({ network: TEST_NETWORK }) },
                ),
          db,
          metrics,
          worker,
          shutdown,
          running,
          ...(telegram && worker ? { onEvents: () => chatWorker?.wake() } : {}),
          chain,
        });
      }
    }
    if (app && telegram) {
      // The bot's updates once getMe has answered (the webhook route answers 503 until then).
      const conn = telegram;
      running.push(
        conn.ready(shutdown.signal).then((bot) => {
          if (bot && !shutdown.signal.aborted) {
            startTelegramUpdates(cfg, {
              db,
              logger,
              telegram: bot,
              pacer: conn.pacer,
              shutdown,
              running,
            });
          }
        }),
      );
    }
    // Fresh chain heads for watch activation, through the ingester's providers when it runs here.
    if (app) {
      ({ heads, group: chain } = headRefresher(cfg, { db, logger, metrics, shutdown, ingester }));
      if (cfg.testnetNode) {
        ({ heads: testHeads, group: testChain } = headRefresher(cfg, {
          db,
          logger,
          metrics,
          shutdown,
          ingester: testIngester,
          chain: { network: TEST_NETWORK, node: cfg.testnetNode },
        }));
      }
    }
    started = true;
    if (url) logger.info({ url }, 'api listening');
    // Every role: /metrics is served here only, never on the API port (issue 17 item 3).
    metricsUrl = await listenMetrics(cfg, metrics, logger, shutdown);
    logger.info({ url: metricsUrl }, 'metrics listening');
  } catch (err) {
    await shutdown.kill(err);
    throw err;
  }
  return {
    db,
    url,
    metricsUrl,
    app,
    ingester,
    testIngester,
    worker,
    telegram,
    mailer,
    get chatWorker() {
      return chatWorker;
    },
    pruner,
    stop: () => shutdown.kill(),
  };
}

/**
 * The api role's HTTP app, listening on HOST:PORT: rate limits (REDIS_URL set: windows shared in
 * Redis, in process while it is down, and /healthz checks it; unset: in-process windows, no
 * redisCheck, health reports redis true), then the app. It listens before the database is
 * awaited, so `started` gates every route but /healthz until the process has started (logged
 * 'api accepting connections: …' now, 'api listening' by the caller once started).
 * @returns the app and its base URL. @throws when the listen fails (the app is closed by the registry).
 */
async function startApi(
  cfg: Config,
  o: {
    db: Db;
    logger: Logger;
    secrets: SecretBox;
    metrics: Metrics;
    telegram: BotConnection | undefined;
    mailer: Mailer | undefined;
    shutdown: Shutdown;
    started: () => boolean;
    refreshHead: (network?: string) => Promise<Date | undefined>;
    chain: () => NodeGroup | undefined;
    /** The test network's node group (TRON_TESTNET_NODE_URL set), AppDeps.testnetChain. */
    testnetChain?: () => NodeGroup | undefined;
    devMailboxUrl: string | undefined;
  },
): Promise<{ app: FastifyInstance; url: string }> {
  const limits = await openRateLimits(cfg.redis.url, o.logger);
  o.shutdown.add('rate limits', () => limits.close());
  const app = await buildApp({
    config: cfg,
    db: o.db,
    logger: o.logger,
    secrets: o.secrets,
    metrics: o.metrics,
    rateLimiter: limits.rateLimiter,
    redisCheck: limits.redisCheck,
    started: o.started,
    refreshHead: o.refreshHead,
    chain: o.chain,
    ...(o.testnetChain ? { testnetChain: o.testnetChain } : {}),
    ...(o.telegram ? { telegram: o.telegram } : {}),
    ...(o.mailer ? { mailer: o.mailer } : {}),
    ...(o.devMailboxUrl ? { devMailboxUrl: o.devMailboxUrl } : {}),
  });
  // Registered before listen: a failed listen still closes the app.
  o.shutdown.add('api', () => app.close());
  const url = await app.listen({ host: cfg.http.host, port: cfg.http.port });
  // 'api listening' (what scripts wait for) is logged once started, when every route answers.
  o.logger.info({ url }, 'api accepting connections: only /healthz answers until started');
  return { app, url };
}

/**
 * The node group an ingester reads from (nodeGroupFor), closed at shutdown; built before the
 * ingester so that its finality gate sets providers aside in it too (finalityGateFor). Another
 * chain's (`chain`: the test network's) logs with its network and reports no metrics.
 */
function ingestGroupFor(
  cfg: Config,
  o: {
    logger: Logger;
    metrics: Metrics;
    shutdown: Shutdown;
    chain?: { network: string; node: Config['node'] };
  },
): NodeGroup {
  const network = o.chain?.network ?? cfg.network;
  const main = o.chain === undefined;
  const group = nodeGroupFor(o.chain?.node ?? cfg.node, {
    blockIntervalMs: cfg.ingest.blockIntervalMs,
    logger: main ? o.logger : o.logger.child({ network }),
    metrics: main ? o.metrics : undefined,
    usdtContractHex: usdtContractHexOf(network),
  });
  o.shutdown.add(main ? 'node client' : `node client (${network})`, () => group.close());
  if (main) o.metrics.countNodeRequests(() => group.requestCount);
  return group;
}

/**
 * The ingest role: an Ingester on `group` (ingestGroupFor) that runs only while this process
 * leads ingest for the network (leader.ts). Its loop's promise joins `running`.
 */
function startIngest(
  cfg: Config,
  o: StartOptions & {
    db: Db;
    metrics: Metrics;
    worker: DeliveryWorker | undefined;
    shutdown: Shutdown;
    running: Promise<void>[];
    /** Also called after notifications are committed (the chat worker's wake). */
    onEvents?: () => void;
    /** The node group it reads from (ingestGroupFor). */
    group: NodeGroup;
    /** The light client's gate (TRON_LIGHT_CLIENT_CHECKPOINT), when on. */
    finality: FinalityGate | undefined;
    /**
     * Another chain than the deployment's (the test environment's Nile, issue 32): its network
     * and node settings. Its ingester reports no metrics and starts at the chain's solidified
     * head (INGEST_START_BLOCK is mainnet's). Default: cfg.network with cfg.node.
     */
    chain?: { network: string; node: Config['node'] };
  },
): Ingester {
  const network = o.chain?.network ?? cfg.network;
  const main = o.chain === undefined;
  const group = o.group;
  const w = o.worker;
  const node = o.chain?.node ?? cfg.node;
  // Held provider-proof notifications (issue 36 item 5): confirmed by a second provider, beside
  // the block loop and under the same leadership. The test network's are never held.
  const confirmer = main
    ? new Confirmer({
        db: o.db,
        network,
        clients: group.clients,
        quorum: node.quorum,
        deliverProviderProof: node.deliverProviderProof,
        blockIntervalMs: cfg.ingest.blockIntervalMs,
        logger: o.logger,
        onReleased: () => {
          w?.wake();
          o.onEvents?.();
        },
      })
    : undefined;
  const ingester = new Ingester({
    db: o.db,
    client: group,
    config: main
      ? cfg
      : {
          network,
          node: o.chain?.node ?? cfg.node,
          ingest: { blockIntervalMs: cfg.ingest.blockIntervalMs },
        },
    logger: main ? o.logger : o.logger.child({ network }),
    onEvents: () => {
      w?.wake();
      o.onEvents?.();
      confirmer?.wake();
    },
    ...(main ? { metrics: o.metrics } : {}),
    finality: o.finality,
    ...o.ingest,
    hooks: { ...o.ingest?.hooks, deliverProviderProof: node.deliverProviderProof },
  });
  const leading = runWhileLeader(
    { url: cfg.database.url, network, logger: o.logger },
    o.shutdown.signal,
    async (term) => {
      // The confirmer lives exactly as long as the block loop's term.
      const both = new AbortController();
      const stop = () => both.abort();
      term.addEventListener('abort', stop, { once: true });
      const confirming = confirmer?.run(both.signal);
      try {
        await ingester.run(term);
      } finally {
        stop();
        term.removeEventListener('abort', stop);
        await confirming;
      }
    },
  );
  o.running.push(leading);
  // The block in flight finishes before the node client closes.
  o.shutdown.add(main ? 'ingest' : `ingest (${network})`, () => leading.catch(() => undefined));
  return ingester;
}

/**
 * Fresh chain heads for watch activation in the api role (src/ingest/head-refresh.ts): through
 * the ingester's node group when this process ingests (one set of request windows per provider),
 * else a group of its own (at most one head poll per block interval, only when watches are
 * created or resumed). The same group answers GET /v1/watches/{id}/transactions/{tx_id} (the test
 * network's for a test watch: AppDeps.testnetChain).
 */
function headRefresher(
  cfg: Config,
  o: {
    db: Db;
    logger: Logger;
    metrics: Metrics;
    shutdown: Shutdown;
    ingester: Ingester | undefined;
    /** Another chain than cfg's (the test network's Nile): its network and node settings. */
    chain?: { network: string; node: Config['node'] };
  },
): { heads: HeadRefresher; group: NodeGroup } {
  const network = o.chain?.network ?? cfg.network;
  let group = o.ingester?.group;
  if (!group) {
    const own = nodeGroupFor(o.chain?.node ?? cfg.node, {
      blockIntervalMs: cfg.ingest.blockIntervalMs,
      logger: o.logger,
      usdtContractHex: usdtContractHexOf(network),
    });
    o.shutdown.add(o.chain ? `head node client (${network})` : 'head node client', () =>
      own.close(),
    );
    if (!o.chain) o.metrics.countNodeRequests(() => own.requestCount);
    group = own;
  }
  const heads = new HeadRefresher({
    db: o.db,
    network,
    group,
    blockIntervalMs: cfg.ingest.blockIntervalMs,
    logger: o.logger,
  });
  return { heads, group };
}

/**
 * The chat pacing windows (src/telegram/pacing.ts): in Redis when REDIS_URL is set, shared by every
 * worker (in process while Redis is unreachable), else in process.
 */
function openPacer(cfg: Config, logger: Logger, shutdown: Shutdown): Pacer {
  if (!cfg.redis.url) return new MemoryPacer();
  const redis = createRedis(cfg.redis.url, { logger });
  shutdown.add('pacing redis', () => closeRedis(redis));
  return new FallbackPacer(new RedisPacer(redis), logger);
}

/**
 * The endpoints' pacing windows (issue 30 item 3; src/delivery/endpoint-pacing.ts): in Redis when
 * REDIS_URL is set, shared by every worker replica (in process while Redis is unreachable: each
 * replica then paces alone), else in process. Keys `tw:ep:{ep_…}:rate|conc`.
 */
function openEndpointPacer(cfg: Config, logger: Logger, shutdown: Shutdown): Pacer {
  if (!cfg.redis.url) return new MemoryPacer();
  const redis = createRedis(cfg.redis.url, { logger });
  shutdown.add('endpoint pacing redis', () => closeRedis(redis));
  return new FallbackPacer(new RedisPacer(redis, { prefix: 'tw:ep:' }), logger);
}

/**
 * The bot's updates (src/telegram/updates.ts), in the api role: by webhook when
 * TELEGRAM_WEBHOOK_URL is set (registered now; the route is the console's), else by long polling
 * in exactly one process at a time (an advisory lock; standbys take over).
 */
function startTelegramUpdates(
  cfg: Config,
  o: {
    db: Db;
    logger: Logger;
    telegram: TelegramBot;
    pacer: Pacer;
    shutdown: Shutdown;
    running: Promise<void>[];
  },
): void {
  if (cfg.telegram.webhookUrl) {
    const registering = setUpdateWebhook(o.telegram).then(
      () => o.logger.info({ url: cfg.telegram.webhookUrl }, 'telegram webhook set'),
      (err: unknown) =>
        o.logger.error(
          { err: err instanceof Error ? err.message : String(err) },
          'telegram setWebhook failed: bot updates will not arrive',
        ),
    );
    o.running.push(registering);
    return;
  }
  const polling = runUpdatePolling(
    {
      db: o.db,
      telegram: o.telegram,
      pacer: o.pacer,
      logger: o.logger,
      databaseUrl: cfg.database.url,
      network: cfg.network,
    },
    o.shutdown.signal,
  ).then(() => undefined);
  o.running.push(polling);
  o.shutdown.add('telegram updates', () => polling);
}

/**
 * The metrics listener (src/api/metrics-app.ts) on METRICS_HOST:METRICS_PORT (127.0.0.1:9464 by
 * default), in every role: GET /metrics and nothing else. @returns its URL (…/metrics).
 * @throws the listen error (EADDRINUSE when two processes on one host keep the default port).
 */
async function listenMetrics(
  cfg: Config,
  metrics: Metrics,
  logger: Logger,
  shutdown: Shutdown,
): Promise<string> {
  const app = await buildMetricsApp(metrics, logger);
  // Registered before listen: a failed listen still closes the app.
  shutdown.add('metrics listener', () => app.close());
  const address = await app.listen({ host: cfg.metrics.host, port: cfg.metrics.port });
  return `${address}/metrics`;
}
