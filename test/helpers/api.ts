/**
 * The HTTP app on a fresh migrated database, plus accounts and keys, for the API tests.
 * Each `apiHarness()` owns one database and one app; `close()` closes both.
 */
import { randomBytes } from 'node:crypto';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { createAccount } from '../../src/accounts/accounts.js';
import { createApiKey, type KeyNetwork } from '../../src/accounts/keys.js';
import type { Plan } from '../../src/accounts/plans.js';
import { type AppDeps, buildApp } from '../../src/api/app.js';
import type { KeyCache } from '../../src/api/auth.js';
import { type Logger, silentLogger } from '../../src/common/logger.js';
import { SecretBox } from '../../src/common/secrets.js';
import { type Config, loadConfig } from '../../src/config.js';
import type { Db } from '../../src/db/pool.js';
import { saveChainHead } from '../../src/ingest/chain-head.js';
import { createMailer, type Mailer } from '../../src/mail/mailer.js';
import { type Resolver, stubResolver } from '../../src/net/dns.js';
import { MemoryRateLimiter } from '../../src/rate-limit/limiter.js';
import type { TelegramBot } from '../../src/telegram/bot.js';
import { readyBot } from '../../src/telegram/connection.js';
import { MemoryPacer, type Pacer } from '../../src/telegram/pacing.js';
import { type Engine, migratedDb, type TestDb } from './db.js';

/** A known mainnet address (USDT contract) in both spellings. */
export const ADDR_B58 = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
export const ADDR_HEX = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
/** Another valid address. */
export const ADDR2_B58 = 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7';

export interface Caller {
  accountId: string;
  keyId: string;
  key: string;
  /** `{ authorization: 'Bearer …' }` */
  headers: Record<string, string>;
}

export interface ApiHarness {
  t: TestDb;
  db: Db;
  app: FastifyInstance;
  config: Config;
  secrets: SecretBox;
  /** The one key of `secrets` (a test that rotates keys builds keyrings around it). */
  secretKey: Buffer;
  limiter: MemoryRateLimiter;
  /** The app's mailer when the harness's env sets SMTP_URL (src/mail/mailer.ts). */
  mailer: Mailer | undefined;
  /** A new account with one tw_live_ key. */
  caller(opts?: { plan?: Plan; rateLimitPerMin?: number; watchQuota?: number }): Promise<Caller>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  /** Replace the migrated database (e.g. one whose server is down). */
  db?: Db;
  redisCheck?: () => Promise<boolean>;
  /** Store a chain head (default true) so watches can be created. */
  chainHead?: boolean;
  /** Resolves webhook hosts at creation (default {@link offlineResolver}: no network). */
  resolver?: Resolver;
  /** The app's key cache (default: a new one, 10 s TTL). */
  keyCache?: KeyCache;
  /** Environment of the app's config (default: none, the defaults). */
  env?: Record<string, string>;
  /** The Telegram bot (default: none: the console's Telegram endpoints answer 503). */
  telegram?: TelegramBot;
  /** The chat pacer of `telegram` (the bot's replies); default a fresh in-process one. */
  pacer?: Pacer;
  /** The app's logger (default: silent); a test that reads the logs passes a capturing one. */
  logger?: Logger;
  /** AppDeps.chain: mainnet's node group for explain (default none: that route answers 503). */
  chain?: AppDeps['chain'];
  /** AppDeps.testnetChain: the test network's (default none: the deployment follows no Nile). */
  testnetChain?: AppDeps['testnetChain'];
  /**
   * AppDeps.refreshHead: a fresh chain head before a watch's activation (the service's
   * HeadRefresher); default none (activation on the stored head).
   */
  refreshHead?: AppDeps['refreshHead'];
}

/** A public address (example.com's) that the default test resolver answers for every name. */
export const PUBLIC_TEST_ADDRESS = '93.184.215.14';

/**
 * The harness's default resolver: offline, every name resolves to PUBLIC_TEST_ADDRESS except
 * names under `.invalid` (RFC 2606), which do not resolve.
 */
export const offlineResolver: Resolver = (hostname) =>
  /(^|\.)invalid\.?$/i.test(hostname)
    ? stubResolver({})(hostname)
    : stubResolver({}, [PUBLIC_TEST_ADDRESS])(hostname);

let seq = 0;

/** A migrated database on `engine`, the app on it, and a way to make callers. */
export async function apiHarness(engine: Engine, opts: HarnessOptions = {}): Promise<ApiHarness> {
  const t = await migratedDb(engine);
  const db = opts.db ?? t.db;
  if (opts.chainHead ?? true) {
    await saveChainHead(t.db, 'mainnet', { solidified: 1_000, head: 1_018 });
  }
  const config = loadConfig(opts.env ?? {});
  const secretKey = randomBytes(32);
  const secrets = new SecretBox([secretKey]);
  const limiter = new MemoryRateLimiter();
  const mailer = createMailer(config.mail, silentLogger);
  const deps: AppDeps = {
    config,
    db,
    logger: opts.logger ?? silentLogger,
    secrets,
    rateLimiter: limiter,
    ...(opts.redisCheck ? { redisCheck: opts.redisCheck } : {}),
    resolver: opts.resolver ?? offlineResolver,
    ...(opts.keyCache ? { keyCache: opts.keyCache } : {}),
    ...(opts.telegram
      ? { telegram: readyBot(opts.telegram, opts.pacer ?? new MemoryPacer()) }
      : {}),
    ...(mailer ? { mailer } : {}),
    ...(opts.chain ? { chain: opts.chain } : {}),
    ...(opts.testnetChain ? { testnetChain: opts.testnetChain } : {}),
    ...(opts.refreshHead ? { refreshHead: opts.refreshHead } : {}),
  };
  const app = await buildApp(deps);
  return {
    t,
    db: t.db,
    app,
    config,
    secrets,
    secretKey,
    limiter,
    mailer,
    async caller(o = {}) {
      const acc = await createAccount(t.db, {
        email: `user${++seq}-${randomBytes(3).toString('hex')}@example.com`,
        plan: o.plan ?? 'free',
        rateLimitPerMin: o.rateLimitPerMin,
        watchQuota: o.watchQuota,
      });
      const k = await createApiKey(t.db, acc.id);
      return {
        accountId: acc.id,
        keyId: k.id,
        key: k.key,
        headers: { authorization: `Bearer ${k.key}` },
      };
    },
    async close() {
      await app.close();
      await mailer?.close();
      await t.drop();
    },
  };
}

/** A key for `accountId` on another network (a `tw_test_` key). */
export async function otherNetworkKey(db: Db, accountId: string, network: KeyNetwork = 'nile') {
  return createApiKey(db, accountId, { network });
}

/** The parsed JSON body of an injected response. */
export function json<T = Record<string, unknown>>(res: LightMyRequestResponse): T {
  return JSON.parse(res.body) as T;
}

/** A valid CreateWatch body with a public https webhook. */
export function webhookWatch(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    address: ADDR_B58,
    asset_filter: 'USDT',
    webhook_url: 'https://hooks.example.com/tron',
    ...overrides,
  };
}

/**
 * Insert `count` events (and their notifications) for one watch, as the ingester would: ids
 * `evt_<tag>_<i>`, created_at = `start` + i microseconds (so all within one millisecond when
 * count ≤ 1000 and `start` is on a millisecond boundary). Returns ids oldest first.
 */
export async function insertEvents(
  db: Db,
  o: { accountId: string; watchId: string; tag: string; count: number; start: string },
): Promise<string[]> {
  await db.query(
    `INSERT INTO events (id, account_id, watch_id, network, direction, asset, tx_id, event_index,
                         block_number, block_timestamp, from_address, to_address, amount_raw,
                         contract, created_at)
     SELECT 'evt_' || $1 || '_' || lpad(i::text, 6, '0'), $2, $3, 'mainnet', 'incoming', 'USDT',
            md5($1 || i::text) || md5(i::text || $1), i, 79072107,
            '2026-01-08T13:36:51.000Z'::timestamptz, 'TLa2f6VPqDgRE67v1736s7bJ8Ray5wYjU7',
            'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', 1500000 + i, 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
            $4::text::timestamptz + i * interval '1 microsecond'
       FROM generate_series(0, $5::int - 1) AS i`,
    [o.tag, o.accountId, o.watchId, o.start, o.count],
  );
  await db.query(
    `INSERT INTO notifications (id, event_id, account_id, watch_id, channel, status, attempts,
                                next_attempt_at, created_at)
     SELECT 'ntf_' || substr(id, 5), id, account_id, watch_id, 'webhook', 'PENDING', 0, created_at, created_at
       FROM events WHERE id LIKE 'evt_' || $1 || '\\_%'`,
    [o.tag],
  );
  return Array.from({ length: o.count }, (_, i) => `evt_${o.tag}_${String(i).padStart(6, '0')}`);
}

type Json = Record<string, unknown>;

function isJson(x: unknown): x is Json {
  return typeof x === 'object' && x !== null && !Array.isArray(x);
}

/** The OpenAPI document the app serves. */
export async function openapiDocument(app: FastifyInstance): Promise<Json> {
  const res = await app.inject({ url: '/docs/openapi.json' });
  if (res.statusCode !== 200) throw new Error(`GET /docs/openapi.json: ${res.statusCode}`);
  return json<Json>(res);
}

/**
 * Checks real answers against the document: the status must be documented for the operation,
 * every header it documents must be present (integers where the schema says integer), and the
 * body must validate against the documented schema (Ajv 2020-12, `$ref`s into `components`
 * resolved against the document). Returns the problems found (empty: conforming).
 */
export function responseChecker(doc: Json) {
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  // ajv-formats is CommonJS: under NodeNext its default import is module.exports.
  addFormatsModule.default(ajv);
  const compiled = new Map<string, ValidateFunction>();
  const get = (o: unknown, ...keys: string[]): unknown =>
    keys.reduce<unknown>((acc, k) => (isJson(acc) ? acc[k] : undefined), o);
  const deref = (o: unknown): unknown => {
    const r = get(o, '$ref');
    if (typeof r !== 'string') return o;
    return get(doc, ...r.replace(/^#\//, '').split('/'));
  };
  return (path: string, method: string, res: LightMyRequestResponse): string[] => {
    const where = `${method.toUpperCase()} ${path} ${res.statusCode}`;
    const response = get(
      doc,
      'paths',
      path,
      method.toLowerCase(),
      'responses',
      String(res.statusCode),
    );
    if (!isJson(response)) return [`${where}: status not documented`];
    const problems: string[] = [];
    for (const [name, h] of Object.entries(isJson(response.headers) ? response.headers : {})) {
      const header = deref(h);
      const value = res.headers[name.toLowerCase()];
      if (value === undefined) {
        if (get(header, 'required') === true) problems.push(`${where}: header ${name} missing`);
        continue;
      }
      if (get(header, 'schema', 'type') === 'integer' && !/^\d+$/.test(String(value))) {
        problems.push(`${where}: header ${name} is not an integer: ${String(value)}`);
      }
    }
    const schema = get(response, 'content', 'application/json', 'schema');
    if (schema === undefined) {
      if (res.body !== '') problems.push(`${where}: a body is sent but none is documented`);
      return problems;
    }
    const key = JSON.stringify(schema);
    let validate = compiled.get(key);
    if (!validate) {
      validate = ajv.compile({ ...(schema as Json), components: doc.components });
      compiled.set(key, validate);
    }
    if (!validate(JSON.parse(res.body))) {
      problems.push(`${where}: body does not match: ${ajv.errorsText(validate.errors)}`);
    }
    return problems;
  };
}
