/**
 * One program, several roles (DESIGN §Processes and scale-out): `api` (stateless HTTP),
 * `ingest` (the block loop) and `worker` (the outbox). `serve` runs all three in one process,
 * the default for a small deployment and what the demo uses. Start-up: parse config, open the
 * database (PostgreSQL, or embedded PGlite in DATA_DIR), apply migrations, then start the roles;
 * `stop()` stops taking work, lets in-flight work finish, and closes pools.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './api/app.js';
import type { Logger } from './common/logger.js';
import { Metrics } from './common/metrics.js';
import {
  loadOldKeyFiles,
  loadOrCreateKeyFile,
  parseKey,
  parseKeyList,
  SecretBox,
} from './common/secrets.js';
import type { Config } from './config.js';
import { migrate } from './db/migrate.js';
import { type Db, openDb } from './db/pool.js';
import { DeliveryWorker } from './delivery/worker.js';
import { runWhileLeader } from './ingest/leader.js';
import { Ingester, type IngesterOptions } from './ingest/loop.js';
import { openRateLimits, type RateLimits } from './redis/rate-limit.js';
import { NodeClient } from './tron/node-client.js';

export type Role = 'api' | 'ingest' | 'worker';

export interface Service {
  db: Db;
  /** Base URL of the API when the api role runs (http://host:port). */
  url: string | undefined;
  /** URL of the separate metrics listener when METRICS_PORT is set. */
  metricsUrl: string | undefined;
  app: FastifyInstance | undefined;
  ingester: Ingester | undefined;
  worker: DeliveryWorker | undefined;
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
}

/** Start the given roles. @throws when the database cannot be opened or migrated. */
export async function startService(cfg: Config, opts: StartOptions): Promise<Service> {
  const { logger } = opts;
  if (cfg.delivery.allowCidrs.length > 0) {
    logger.warn(
      { allow_cidrs: cfg.delivery.allowCidrs },
      'WEBHOOK_ALLOW_CIDRS is set: webhooks may reach these NON-PUBLIC addresses (development and tests only)',
    );
  }
  const db = await openDb(cfg.database);
  const ac = new AbortController();
  const running: Promise<void>[] = [];
  let app: FastifyInstance | undefined;
  let url: string | undefined;
  let metricsServer: http.Server | undefined;
  let metricsUrl: string | undefined;
  let ingester: Ingester | undefined;
  let worker: DeliveryWorker | undefined;
  let client: NodeClient | undefined;
  let limits: RateLimits | undefined;
  try {
    const m = await migrate(db);
    if (m.applied.length)
      logger.info({ applied: m.applied, version: m.version }, 'migrations applied');
    const secrets = secretBox(cfg, logger);
    // One registry per process, fed by every role it runs; the api role serves it at /metrics.
    const metrics = new Metrics({ db, logger, processMetrics: true });
    if (cfg.delivery.caFile && !fs.existsSync(cfg.delivery.caFile)) {
      throw new Error(`WEBHOOK_CA_FILE ${cfg.delivery.caFile} does not exist`);
    }
    if (opts.roles.includes('worker')) {
      worker = new DeliveryWorker({ db, secrets, config: cfg, logger, metrics });
      running.push(worker.start(ac.signal));
    }
    if (opts.roles.includes('ingest')) {
      client = new NodeClient({
        url: cfg.node.url,
        apiKey: cfg.node.apiKey,
        timeoutMs: cfg.node.timeoutMs,
        retries: cfg.node.retries,
        connections: cfg.node.concurrency,
        logger,
      });
      const w = worker;
      metrics.countNodeRequests(() => client?.requestCount ?? 0);
      ingester = new Ingester({
        db,
        client,
        config: cfg,
        logger,
        onEvents: () => w?.wake(),
        metrics,
        ...opts.ingest,
      });
      // Runs only while this process leads ingest for the network (leader.ts).
      const ing = ingester;
      running.push(
        runWhileLeader({ url: cfg.database.url, network: cfg.network, logger }, ac.signal, (term) =>
          ing.run(term),
        ),
      );
    }
    if (opts.roles.includes('api')) {
      // REDIS_URL set: windows shared in Redis, in-process while it is down, and /healthz
      // checks it. Unset: in-process windows, no redisCheck (health reports redis true).
      limits = await openRateLimits(cfg.redis.url, logger);
      app = await buildApp({
        config: cfg,
        db,
        logger,
        secrets,
        metrics,
        rateLimiter: limits.rateLimiter,
        redisCheck: limits.redisCheck,
      });
      url = await app.listen({ host: cfg.http.host, port: cfg.http.port });
      logger.info({ url }, 'api listening');
    }
    if (cfg.metricsPort !== undefined) {
      // Roles without the API (ingest, worker) have no HTTP listener: METRICS_PORT gives them one
      // that serves only GET /metrics (chain lag lives in the ingest process).
      metricsServer = http.createServer((req, res) => {
        if (req.method !== 'GET' || (req.url ?? '').split('?', 1)[0] !== '/metrics') {
          res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"not found"}');
          return;
        }
        metrics.registry.metrics().then(
          (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
          () =>
            res
              .writeHead(500, { 'content-type': 'application/json' })
              .end('{"error":"internal server error"}'),
        );
      });
      const server = metricsServer;
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(cfg.metricsPort, cfg.http.host, () => resolve());
      });
      const addr = server.address();
      metricsUrl =
        typeof addr === 'object' && addr
          ? `http://${cfg.http.host}:${addr.port}/metrics`
          : undefined;
      logger.info({ url: metricsUrl }, 'metrics listening');
    }
  } catch (err) {
    metricsServer?.close();
    ac.abort();
    await Promise.allSettled(running);
    await client?.close();
    await limits?.close();
    await db.close();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    db,
    url,
    metricsUrl,
    app,
    ingester,
    worker,
    stop() {
      stopping ??= (async () => {
        // Every role stops taking work at once (the worker does not claim while the API drains)
        // and finishes what it has in flight: HTTP requests, webhook attempts, the block.
        ac.abort();
        await Promise.all([
          app?.close(),
          new Promise<void>((resolve) =>
            metricsServer ? metricsServer.close(() => resolve()) : resolve(),
          ),
          worker?.stop(),
        ]);
        await Promise.allSettled(running);
        await client?.close();
        await limits?.close();
        await db.close();
      })();
      return stopping;
    },
  };
}
