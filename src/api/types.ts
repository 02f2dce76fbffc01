/**
 * The Fastify instance type every route module receives: the default Node HTTP server, the
 * base logger interface, and the TypeBox type provider (request and reply types are inferred
 * from the route's schemas).
 */

import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type {
  FastifyBaseLogger,
  FastifyInstance,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
} from 'fastify';
import type { Logger } from '../common/logger.js';
import type { Metrics } from '../common/metrics.js';
import type { SecretBox } from '../common/secrets.js';
import type { Config } from '../config.js';
import type { Db } from '../db/pool.js';
import type { ChainReader } from '../ingest/explain.js';
import type { Mailer } from '../mail/mailer.js';
import type { Resolver } from '../net/dns.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import type { TelegramAccess } from '../telegram/connection.js';
import type { KeyCache } from './key-cache.js';

export type App = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

/** What the app needs; main.ts builds these once per process. */
export interface AppDeps {
  config: Config;
  db: Db;
  logger: Logger;
  /** Encrypts new webhook secrets (AES-256-GCM, DESIGN invariant 6). */
  secrets: SecretBox;
  /** Per-key and per-IP request windows (MemoryRateLimiter, or a Redis one later). */
  rateLimiter: RateLimiter;
  /** Redis liveness for /healthz; absent when no Redis is configured (then reported true). */
  redisCheck?: () => Promise<boolean>;
  /**
   * Resolves webhook host names when a watch is created (URL policy: every answer must be
   * public). Default: the system resolver. Tests inject a stub so names resolve offline.
   */
  resolver?: Resolver;
  /**
   * The process's metrics: the app feeds request latency, the metrics listener serves them
   * (src/api/metrics-app.ts). Default: a new Metrics on `db`.
   */
  metrics?: Metrics;
  /**
   * Callers of recently verified API keys, for routes that re-check the key in their own
   * statement (src/api/auth.ts). Default: a new KeyCache (10 s TTL).
   */
  keyCache?: KeyCache;
  /**
   * The Telegram bot when TELEGRAM_BOT_TOKEN is set (src/telegram/connection.ts): its `current()`
   * is undefined until getMe has succeeded. Absent, or not yet ready: the console's Telegram
   * endpoints answer 503 telegram_unavailable (issue 13).
   */
  telegram?: TelegramAccess;
  /**
   * Make the stored chain head fresh (at most one block interval old) before a watch is created
   * or resumed (src/ingest/head-refresh.ts); never throws. Absent: the stored head as it is.
   * @param network the watch's network (default the live one): `nile` refreshes the test
   *   network's head when this deployment follows Nile (TRON_TESTNET_NODE_URL; issue 32).
   * @returns the database time the head was known fresh (activationBlock's `asOf`), or undefined.
   */
  refreshHead?: (network?: string) => Promise<Date | undefined>;
  /**
   * False while the process is starting (waiting for PostgreSQL, applying migrations: service.ts
   * listens first, issue 17 item 6): every route but /healthz then answers 503 with Retry-After,
   * and /healthz answers 503 with `checks.started: false`. Absent: started (an app built on a
   * migrated database, as in tests).
   */
  started?: () => boolean;
  /**
   * The node group that reads the chain for GET /v1/watches/{id}/transactions/{tx_id} (the
   * ingester's when this process ingests, else the api role's own: service.ts). Absent, or
   * undefined while starting: that route answers 503.
   */
  chain?: () => ChainReader | undefined;
  /**
   * The test network's (Nile's) node group, for the same route on a test watch (issue 32): the
   * Nile ingester's when this process ingests, else the api role's own; built from
   * TRON_TESTNET_NODE_URL (service.ts). Absent: this deployment follows no test network, and a test
   * watch's transactions are answered from its stored events only (never through mainnet's
   * node). Undefined while starting: that route answers 503 for a test watch.
   */
  testnetChain?: () => ChainReader | undefined;
  /**
   * The outgoing mailer when SMTP_URL is set (src/mail/mailer.ts). Absent: e-mail is off; the
   * console shows invitation links to the admin who made them, and password reset by e-mail
   * answers 503 email_unavailable.
   */
  mailer?: Mailer;
  /**
   * `tronwatch dev` only (src/devnet/dev.ts): the local mailbox page where every e-mail sent is
   * captured; the console links to it (GET /console/api/config `dev_mailbox`). Absent: null there.
   */
  devMailboxUrl?: string;
}
