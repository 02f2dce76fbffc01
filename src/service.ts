/**
 * One program, several roles (DESIGN §Processes and scale-out): `api` (stateless HTTP),
 * `ingest` (the block loop) and `worker` (the outbox). `serve` runs all three in one process,
 * the default for a small deployment and what the demo uses. Start-up: parse config, open the
 * database (PostgreSQL, or embedded PGlite in DATA_DIR), apply migrations, then start the roles;
 * `stop()` stops taking work, lets in-flight work finish, and closes pools.
 */
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './api/app.js';
import { MemoryRateLimiter } from './api/rate-limit.js';
import type { Logger } from './common/logger.js';
import { loadOrCreateKeyFile, parseKey, SecretBox } from './common/secrets.js';
import type { Config } from './config.js';
import { migrate } from './db/migrate.js';
import { type Db, openDb } from './db/pool.js';
import { DeliveryWorker } from './delivery/worker.js';
import { Ingester, type IngesterOptions } from './ingest/loop.js';
import { NodeClient } from './tron/node-client.js';

export type Role = 'api' | 'ingest' | 'worker';

export interface Service {
  db: Db;
  /** Base URL of the API when the api role runs (http://host:port). */
  url: string | undefined;
  app: FastifyInstance | undefined;
  ingester: Ingester | undefined;
  worker: DeliveryWorker | undefined;
  /** Graceful stop of every role, then the pools. Idempotent. */
  stop(): Promise<void>;
}

/** The webhook-secret keyring: SECRET_ENCRYPTION_KEY, or DATA_DIR/secret.key (created once). */
export function secretBox(cfg: Config, logger: Logger): SecretBox {
  if (cfg.secrets.key) return new SecretBox([parseKey(cfg.secrets.key)]);
  if (cfg.database.url) {
    logger.warn(
      { data_dir: cfg.dataDir },
      'SECRET_ENCRYPTION_KEY is unset: using DATA_DIR/secret.key; every replica sharing this database needs the same key',
    );
  }
  return new SecretBox([loadOrCreateKeyFile(cfg.dataDir)]);
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
  const db = await openDb({ url: cfg.database.url, embeddedDir: cfg.database.embeddedDir });
  const ac = new AbortController();
  const running: Promise<void>[] = [];
  let app: FastifyInstance | undefined;
  let url: string | undefined;
  let ingester: Ingester | undefined;
  let worker: DeliveryWorker | undefined;
  let client: NodeClient | undefined;
  try {
    const m = await migrate(db);
    if (m.applied.length)
      logger.info({ applied: m.applied, version: m.version }, 'migrations applied');
    const secrets = secretBox(cfg, logger);
    if (cfg.delivery.caFile && !fs.existsSync(cfg.delivery.caFile)) {
      throw new Error(`WEBHOOK_CA_FILE ${cfg.delivery.caFile} does not exist`);
    }
    if (opts.roles.includes('worker')) {
      worker = new DeliveryWorker({ db, secrets, config: cfg, logger });
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
      ingester = new Ingester({
        db,
        client,
        config: cfg,
        logger,
        onEvents: () => w?.wake(),
        ...opts.ingest,
      });
      running.push(ingester.run(ac.signal));
    }
    if (opts.roles.includes('api')) {
      app = await buildApp({
        config: cfg,
        db,
        logger,
        secrets,
        rateLimiter: new MemoryRateLimiter(),
      });
      url = await app.listen({ host: cfg.http.host, port: cfg.http.port });
      logger.info({ url }, 'api listening');
    }
  } catch (err) {
    ac.abort();
    await Promise.allSettled(running);
    await client?.close();
    await db.close();
    throw err;
  }
  let stopping: Promise<void> | undefined;
  return {
    db,
    url,
    app,
    ingester,
    worker,
    stop() {
      stopping ??= (async () => {
        await app?.close(); // stop accepting requests; in-flight ones finish
        ac.abort();
        await worker?.stop();
        await Promise.allSettled(running);
        await client?.close();
        await db.close();
      })();
      return stopping;
    },
  };
}
