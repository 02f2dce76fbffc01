/**
 * Configuration: one schema, read once, every problem listed at start-up, typed result.
 *
 * Nothing else in tronwatch reads `process.env`. The schema below is the source of truth for names,
 * defaults, bounds and the text of each variable: docs/operating.md's configuration table is
 * generated from it (`npm run docs:config`; test/unit/config-docs.test.ts fails when they differ).
 * Habit 3 of CONVENTIONS.md (Unkey `pkg/env.ts`).
 */
import net from 'node:net';
import path from 'node:path';
import { type Static, Type as T, type TProperties, type TSchema } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { parseStartBlock } from './tron/checkpoint.js';

/**
 * The documentation options every variable may carry besides `description` (docs/operating.md's
 * configuration table is written from them by `npm run docs:config`, src/config-docs.ts):
 * `unset` says what an optional variable's absence means, `defaultNote` qualifies a default.
 */
interface DocOptions {
  unset?: string;
  defaultNote?: string;
}

const Int = (
  opts: { minimum?: number; maximum?: number; default: number; description: string } & DocOptions,
) => T.Integer(opts);

/**
 * METRICS_PORT when unset. The Prometheus exporters' range (9100-9999) is fully allocated; 9464 is
 * the port application SDKs (OpenTelemetry's Prometheus exporter) listen on by default, so a
 * scrape job or firewall rule for application metrics often already names it.
 */
export const DEFAULT_METRICS_PORT = 9464;

/** The environment variables tronwatch reads, with defaults and bounds. */
export const EnvSchema = T.Object({
  DATABASE_URL: T.Optional(
    T.String({
      minLength: 1,
      description: 'PostgreSQL URL (15 or newer).',
      unset: 'embedded PGlite in `DATA_DIR/pgdata`',
    }),
  ),
  DATABASE_POOL_SIZE: Int({
    minimum: 1,
    maximum: 1_000,
    default: 10,
    description:
      "PostgreSQL connections per process, at most (an ingest process holds one more for its leader lock); keep the sum over all processes under the server's `max_connections`. Ignored by the embedded database.",
  }),
  REDIS_URL: T.Optional(
    T.String({
      minLength: 1,
      description: 'Redis URL (rate-limit windows shared by replicas).',
      unset: 'in-process windows',
    }),
  ),
  DATA_DIR: T.String({
    default: '.tronwatch',
    description: 'Folder for embedded state: PGlite data, the generated secret key.',
  }),
  TRON_NODE_URL: T.String({
    default: 'https://api.trongrid.io',
    pattern: '^\\s*https?://',
    description:
      "java-tron HTTP API (TronGrid serves the same API), or **a comma-separated list of providers** in order of preference, each with optional settings in its URL's fragment (never sent to the server): `#key=API_KEY&max_rps=N&grpc=grpc://host:port&grpc_full=grpc://host:port` (or `grpcs://` for TLS); `key` is sent as `TRON-PRO-API-KEY` (HTTP and gRPC), `max_rps` overrides `TRON_NODE_MAX_RPS` for it, `grpc` is where it serves java-tron's solidity gRPC service and `grpc_full` its full node's (`protocol.Wallet`; default: the `grpc` address): each block is then read once, as exact bytes, `GetBlockByNum2`, instead of as JSON (two requests per block, its bytes and its receipts, and its transaction root is checked from the bytes; TronGrid's documented endpoints are the default there, grpc.trongrid.io:50052 and :50051; `#grpc=none` turns it off). See [Trusting the node](trusting-the-node.md#trusting-the-node). The light client reads every block from the full node's view, up to its head (`/wallet/getblockbynum` and `/wallet/gettransactioninfobyblocknum`, or `protocol.Wallet/GetBlockByNum2` at `grpc_full`), and commits it once 19 SRs signed on top of it; caught up, the ingester asks for the next block itself, timed to the block interval (`{}`, not produced yet, is asked again 100 ms later), and reads both heads with `/wallet/getnodeinfo` once a minute (for watch activation; extrapolated by time in between) and once per interval while catching up; where a node or provider does not serve `getnodeinfo`, from `/wallet/getblock` and `/walletsolidity/getblock` (two requests per poll, logged; `getnodeinfo` is asked again every 10 minutes and used again when it answers).",
  }),
  TRON_TESTNET_NODE_URL: T.Optional(
    T.String({
      pattern: '^\\s*https?://',
      description:
        "The test environment's chain (issue 32): TRON's Nile testnet, java-tron HTTP API, in `TRON_NODE_URL`'s form (comma-separated providers, each with `#key=`, `#max_rps=`, `#grpc=`). TronGrid serves Nile at `https://nile.trongrid.io` (no API key needed; TRON's API reference, developers.tron.network/v4.3.0/reference, lists it beside mainnet and Shasta); for exact bytes it gets `grpc.nile.trongrid.io:50052` (plaintext, Nile's solidity gRPC) by default, as public TRON client code uses it (TronGrid's own page lists gRPC only for mainnet and Shasta); `#grpc=grpc://host:port` gives another, `#grpc=none` turns it off. When set, the ingest role also follows Nile, through the same reader, checks and commit as mainnet, with its own cursor, head, leader lock and `/v1/status` entry, and matches test watches there (USDT = Nile's TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf). `TRON_NODE_TIMEOUT_MS`, `TRON_NODE_RETRIES`, `TRON_NODE_CONCURRENCY` and `TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER` apply to it too; its quorum is 1.",
      unset: 'test mode has only the deposits of `POST /v1/test/transfers`',
    }),
  ),
  TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: T.Optional(
    T.String({
      minLength: 1,
      description:
        "The test network's light client (issue 28 for Nile): a Nile SR-set checkpoint, in `TRON_LIGHT_CLIENT_CHECKPOINT`'s form (a file `tronwatch checkpoint` printed with TRON_NODE_URL set to Nile's providers). With it, a Nile block is committed only once 19 of Nile's SRs have signed blocks on top of it, as on mainnet, with the test network's own light-client state and `/v1/status` entry (`light_client` for test keys). Needs `TRON_TESTNET_NODE_URL`.",
      unset:
        "Nile's blocks are final when its providers' solidified head covers them (test money only; mainnet's light client has no such switch)",
    }),
  ),
  TRON_API_KEY: T.Optional(
    T.String({
      minLength: 1,
      description:
        'TronGrid key, sent as `TRON-PRO-API-KEY`; only with a single `TRON_NODE_URL` (with several, each carries its own `#key=`, so a key never reaches another host).',
    }),
  ),
  TRON_NODE_QUORUM: Int({
    minimum: 1,
    maximum: 16,
    default: 1,
    description:
      'How many providers must return the same block (same `blockID`) and the same receipts (what matching reads of them) before it is committed; at most the number of providers. Blocks are read up to the k-th highest head reported; a new watch activates at the lowest plausible head near it (one provider cannot push activation past the chain).',
  }),
  TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER: T.Union([T.Literal('0'), T.Literal('1')], {
    default: '0',
    description:
      "`1`: let the ingest role start with a single provider without gRPC (development only). Such a configuration cannot prove a block whose JSON hides bytes (mainnet block 79,072,107 is one): it stalls on it instead of committing it on that provider's word. By default the ingest role (`serve`, `ingest`) refuses to start with it and says what to add: `#grpc=` for exact bytes, or a second provider with `TRON_NODE_QUORUM=2`; `tronwatch doctor` reports it. With `1` it starts, with a warning logged at every start. See [Trusting the node](trusting-the-node.md#trusting-the-node).",
  }),
  TRON_DELIVER_PROVIDER_PROOF: T.Union([T.Literal('0'), T.Literal('1')], {
    default: '0',
    description:
      "`1`: deliver a `provider`-proof event (a USDT Transfer log emitted inside another contract's call, as a router, a batch sender or a contract wallet makes: no block header commits to receipts, and only one provider reported it) at once, as `transfer.confirmed` with `proof: provider`. RISK: one dishonest or broken provider can then make money move: a receiver that credits it credits a deposit that may not exist. By default (`0`) such a notification is stored and listed but held (`delivery.held` in the API, the console's event page) until a second provider (and at least `TRON_NODE_QUORUM`) returns the same Transfer log, when the event becomes `proof: quorum` and is delivered; with a single provider nothing can confirm it, so it stays held until one is added. Turning this on releases every held notification that no provider contradicted (at the ingest role's start). Only mainnet's ingester holds: the test network's transfers carry no money. See [Trusting the node](trusting-the-node.md#held-events).",
  }),
  TRON_NODE_TIMEOUT_MS: Int({
    minimum: 100,
    maximum: 120_000,
    default: 10_000,
    description: 'Deadline of one node request (connect, headers, body).',
  }),
  TRON_NODE_RETRIES: Int({
    minimum: 0,
    maximum: 100,
    default: 6,
    description:
      'Retries of a transient node failure (network, timeout, 429 or 403, 5xx, empty answer) before it surfaces; backoff is exponential with full jitter.',
  }),
  TRON_NODE_CONCURRENCY: Int({
    minimum: 1,
    maximum: 64,
    default: 8,
    description: 'Blocks fetched ahead in parallel while catching up.',
  }),
  TRON_NODE_MAX_RPS: T.Optional(
    T.Integer({
      minimum: 0,
      maximum: 10_000,
      description:
        'Requests per second to the node at most, read-ahead, head polls and retries together (a sliding window of 1.1 s, so network jitter cannot make the provider count one more in any of its seconds); `0` = no cap. See [Node request budget](#node-request-budget).',
      unset:
        '`10` for a remote node, no cap for a loopback one (`localhost`, `127.x`, `[::1]`: a replay node, your own java-tron)',
    }),
  ),
  INGEST_START_BLOCK: T.Optional(
    T.String({
      pattern: '^(0|[1-9][0-9]{0,15})(:[0-9a-fA-F]{64})?$',
      description:
        "First block to ingest when no cursor exists, as number:blockID (a checkpoint: a first block with another id is refused) or a bare number (the first block is then anchored by the light client: it must chain to its checkpoint and carry its SR's signature).",
      unset: 'the solidified head at first start, bounded by the shipped mainnet checkpoint',
    }),
  ),
  TRON_LIGHT_CLIENT_CHECKPOINT: T.Optional(
    T.String({
      minLength: 1,
      description:
        "The SR-set checkpoint tronwatch's own finality (the light client, always on: [Trusting the node](trusting-the-node.md#finality-proven-by-the-srs)) follows the chain from, as the path of a checkpoint file (what `tronwatch checkpoint` prints; relative to the working directory) or as `number:blockID` of a checkpoint shipped in `checkpoints/`. A block is committed only once 19 of the 27 SRs have signed blocks on top of it, checked by tronwatch; a provider's solidified head is only a hint. Ingest starts at the checkpoint's next block (or `INGEST_START_BLOCK` when later); a stored cursor below the checkpoint halts ingest. A light-client state stored from another checkpoint is left aside for the pinned one.",
      unset:
        "the state stored by an earlier run; at the first start, a checkpoint the providers agree on (TRON_NODE_QUORUM, every answering one) at ingest's first block: trust on first use, logged and shown in `/v1/status` (`checkpoint_pinned: false`); pin one to remove that trust",
    }),
  ),
  TRON_BLOCK_INTERVAL_MS: Int({
    minimum: 10,
    maximum: 60_000,
    default: 3_000,
    description:
      "The chain's block interval (3 s on mainnet); times the asks for the next block and extrapolates a stale head.",
  }),
  SECRET_ENCRYPTION_KEY: T.Optional(
    T.String({
      minLength: 1,
      description:
        'AES-256-GCM key for webhook secrets at rest (64 hex digits or base64 of 32 bytes); replicas sharing a database must share it.',
      unset: '`DATA_DIR/secret.key`, created on first start (mode 0600)',
    }),
  ),
  SECRET_ENCRYPTION_KEYS_OLD: T.Optional(
    T.String({
      minLength: 1,
      description:
        'Comma-separated previous keys, read-only: they decrypt secrets not yet re-encrypted by `tronwatch secrets rotate-key`, never encrypt.',
    }),
  ),
  WEBHOOK_TIMEOUT_MS: Int({
    minimum: 50,
    maximum: 60_000,
    default: 10_000,
    description: 'Total deadline of one webhook attempt.',
    defaultNote: "the contract's 10 s",
  }),
  DELIVERY_SCHEDULE_SCALE: T.Number({
    exclusiveMinimum: 0,
    maximum: 1,
    default: 1,
    description: 'Multiplies the retry delays, in (0, 1]; tests compress the schedule with it.',
    defaultNote: "the contract's schedule",
  }),
  DELIVERY_CONCURRENCY: Int({
    minimum: 1,
    maximum: 1_024,
    default: 64,
    description: 'Webhook requests in flight per worker process.',
  }),
  DELIVERY_POLL_MS: Int({
    minimum: 10,
    maximum: 60_000,
    default: 250,
    description:
      'How often an idle worker looks for due notifications (the ingester also wakes it directly).',
  }),
  WATCH_ALERT_FAILURES: Int({
    minimum: 1,
    maximum: 1_000,
    default: 5,
    description:
      'Consecutive failed attempts of a webhook watch that raise its alert (its first DEAD delivery raises it too); see [Endpoint health and alerts](console.md#endpoint-health-and-alerts).',
  }),
  WATCH_ALERT_PACE_MINUTES: T.Number({
    minimum: 0,
    maximum: 1_440,
    default: 5,
    description:
      'At most one alert per watch and alert channel within this many minutes; the changes in between (a flapping endpoint) are sent as one summary.',
  }),
  WATCH_AUTO_PAUSE_DAYS: T.Number({
    minimum: 0,
    maximum: 365,
    default: 5,
    description:
      'Pause a watch whose delivery attempts have all failed for this many days; `0` = never.',
  }),
  WEBHOOK_ALLOW_CIDRS: T.String({
    default: '',
    description:
      'Comma-separated CIDRs a webhook may point to although not public: **development and tests only**; a warning is logged at start when set. It lifts only the address check (never the credential or length checks), and admits plain `http://` receivers whose every address is inside these ranges; see [Security](security.md#security).',
    defaultNote: 'empty: every non-public address is refused',
  }),
  WEBHOOK_CA_FILE: T.Optional(
    T.String({
      minLength: 1,
      description: 'Extra CA certificate (PEM) trusted for webhook TLS (local test receivers).',
    }),
  ),
  METRICS_PORT: Int({
    minimum: 0,
    maximum: 65_535,
    default: DEFAULT_METRICS_PORT,
    description:
      'The port of the metrics listener; `0` = a free port (logged as `metrics listening`). Two processes on one machine need two ports.',
  }),
  METRICS_HOST: T.String({
    default: '127.0.0.1',
    minLength: 1,
    description:
      'The address of the metrics listener, the only place `GET /metrics` is served, in every role (api, ingest, worker; the API port answers 404 for it): see [Metrics and logs](#metrics-and-logs). Loopback by default: `/metrics` shows traffic by route and names encryption key ids, so it is opened to a monitoring network on purpose, never by accident.',
  }),
  TRUST_PROXY: T.Optional(
    T.String({
      minLength: 1,
      description:
        'Comma-separated addresses or CIDRs of the proxies or load balancers in front of the API (`10.0.0.5`, `10.0.0.0/8`, `fd00::/8`), or `loopback`, `linklocal`, `uniquelocal`: an X-Forwarded-For is believed only from them. A hop count, `true` and a `/0` are refused. See [Behind a load balancer](#behind-a-load-balancer-trust_proxy).',
      unset: "no proxy is trusted; the client is the connection's peer",
    }),
  ),
  CONSOLE_SIGNUP: T.Union([T.Literal('open'), T.Literal('closed')], {
    default: 'closed',
    description:
      '`open`: anyone who reaches the console can sign up (plan Free); `closed`: accounts come from `tronwatch accounts invite`.',
  }),
  CONSOLE_SESSION_TTL_SECONDS: Int({
    minimum: 1,
    maximum: 31_536_000,
    default: 604_800,
    description:
      "Console session lifetime, moved to now + this at every use (the contract's 7-day sliding window).",
  }),
  PRUNE_INTERVAL_SECONDS: Int({
    minimum: 1,
    maximum: 86_400,
    default: 300,
    description:
      'How often the pruning job runs (in the worker role, one process of the deployment at a time): see [Retention](#retention).',
  }),
  PRUNE_BATCH_SIZE: Int({
    minimum: 1,
    maximum: 100_000,
    default: 1_000,
    description:
      'Rows one pruning statement deletes or clears at most; each batch is its own short transaction.',
  }),
  TOKEN_RETENTION_HOURS: Int({
    minimum: 0,
    maximum: 8_760,
    default: 24,
    description:
      'How long an expired or revoked console session, a used or expired invitation and a used or expired Telegram link token are kept before they are deleted; `0` = at the next pass.',
  }),
  ATTEMPT_DETAIL_RETENTION_DAYS: Int({
    minimum: 1,
    maximum: 36_500,
    default: 30,
    description:
      "After this many days an attempt's request headers, response headers and response body are cleared (its time, status, error and duration stay).",
  }),
  EVENT_RETENTION_DAYS: T.Optional(
    T.Integer({
      minimum: 1,
      maximum: 36_500,
      description:
        'Delete events older than this with their notifications and attempts, except an event whose newest notification is PENDING or DEAD.',
      unset: 'events are kept',
    }),
  ),
  TEST_TRANSFERS_PER_MINUTE: Int({
    minimum: 1,
    maximum: 10_000,
    default: 30,
    description:
      'Test deposits (`POST /v1/test/transfers`, the console’s "Trigger test deposit") an account may trigger per minute, counted over a sliding 60 s window across replicas; more get 429 `rate_limited`.',
  }),
  AUDIT_RETENTION_DAYS: Int({
    minimum: 1,
    maximum: 36_500,
    default: 365,
    description: 'Days an audit log entry is kept before the pruning job deletes it.',
  }),
  PUBLIC_URL: T.Optional(
    T.String({
      pattern: '^https?://[^/?#]+$',
      description:
        'The origin users reach this deployment at (`https://tronwatch.example.com`), for invitation and password reset links.',
      unset: '`http://localhost:PORT`',
    }),
  ),
  SMTP_URL: T.Optional(
    T.String({
      pattern: '^\\s*smtps?://',
      description:
        "The SMTP server the console's e-mails (invitations, password resets) go through: `smtp://user:pass@host:587` (STARTTLS when offered) or `smtps://user:pass@host:465`.",
      unset:
        'e-mail is off (invitation links are shown to the admin who made them, or printed by the CLI; no reset by e-mail)',
    }),
  ),
  MAIL_FROM: T.Optional(
    T.String({
      minLength: 3,
      description: 'The sender of those e-mails, `Name <address>` or an address.',
      unset: '`tronwatch <no-reply@HOST of PUBLIC_URL>`',
    }),
  ),
  TELEGRAM_BOT_TOKEN: T.Optional(
    T.String({
      minLength: 1,
      description:
        "The bot's token from BotFather: enables chat deliveries (see [Telegram deliveries](integrating.md#telegram-deliveries)); checked with `getMe` in the background: the service starts without it, retrying with backoff.",
      unset:
        "no chat deliveries; the console's Telegram endpoints answer 503 `telegram_unavailable`",
    }),
  ),
  TELEGRAM_API_ROOT: T.String({
    default: 'https://api.telegram.org',
    pattern: '^https?://',
    description: 'Bot API root (a local Bot API server, or the test stand-in).',
  }),
  TELEGRAM_WEBHOOK_URL: T.Optional(
    T.String({
      pattern: '^https://',
      description:
        "Receive the bot's updates by webhook at this public https URL (the api role serves its path, checking the `secret_token` header).",
      unset: 'long polling by one process at a time',
    }),
  ),
  TELEGRAM_POLL_TIMEOUT_SECONDS: Int({
    minimum: 0,
    maximum: 50,
    default: 30,
    description: 'Long-polling timeout of one `getUpdates`.',
  }),
  TELEGRAM_TIMEOUT_MS: Int({
    minimum: 50,
    maximum: 60_000,
    default: 10_000,
    description: 'Deadline of one `sendMessage` (a chat delivery attempt).',
  }),
  TELEGRAM_PACING_SCALE: T.Number({
    exclusiveMinimum: 0,
    maximum: 1,
    default: 1,
    description:
      'Multiplies the windows of the Bot API limits (1 message per second per chat, 20 per minute per group, 30 per second per bot), in (0, 1]; tests and benchmarks compress them.',
    defaultNote: "the Bot API's limits",
  }),
  HOST: T.String({ default: '0.0.0.0', description: 'API listen address.' }),
  PORT: Int({ minimum: 0, maximum: 65_535, default: 8080, description: 'API listen port.' }),
  LOG_LEVEL: T.Union(
    [
      T.Literal('fatal'),
      T.Literal('error'),
      T.Literal('warn'),
      T.Literal('info'),
      T.Literal('debug'),
      T.Literal('trace'),
      T.Literal('silent'),
    ],
    {
      default: 'info',
      description: 'The pino log level; logs are JSON lines on stderr.',
    },
  ),
});

export type Env = Static<typeof EnvSchema>;

/** The variables' schemas, so a field read as is shares its variable's type, bounds and text. */
const V = EnvSchema.properties;

/** A variable that may be unset: the field is always present, `undefined` when unset. */
const Unset = <S extends TSchema>(s: S) => T.Union([T.Optional(s, false), T.Undefined()]);

/** A group of fields: exactly these keys (Value.Check rejects any other). */
const Group = <P extends TProperties>(properties: P) =>
  T.Object(properties, { additionalProperties: false });

/** One chain's node settings (TRON_NODE_URL's; TRON_TESTNET_NODE_URL's for the test network). */
const NodeSchema = Group({
  url: T.String({ description: 'TRON_NODE_URL without trailing slashes.' }),
  apiKey: Unset(V.TRON_API_KEY),
  timeoutMs: V.TRON_NODE_TIMEOUT_MS,
  retries: V.TRON_NODE_RETRIES,
  concurrency: V.TRON_NODE_CONCURRENCY,
  maxRps: T.Integer({
    minimum: 0,
    description: 'TRON_NODE_MAX_RPS, or when unset 10 (remote node) / 0 (loopback node).',
  }),
  providers: T.Array(
    Group({
      url: T.String({ description: 'HTTP API base, without fragment or trailing slashes.' }),
      name: T.String({
        description: 'The origin (never path, query or fragment: they may hold a key).',
      }),
      apiKey: Unset(T.String({ minLength: 1 })),
      maxRps: T.Integer({ minimum: 0 }),
      grpc: Unset(Group({ host: T.String(), port: T.Integer({ minimum: 1 }), tls: T.Boolean() })),
      grpcFull: Unset(
        Group({ host: T.String(), port: T.Integer({ minimum: 1 }), tls: T.Boolean() }),
      ),
    }),
    { minItems: 1, description: 'TRON_NODE_URL split on commas, in order of preference.' },
  ),
  quorum: V.TRON_NODE_QUORUM,
  allowUnprovenSingleProvider: T.Boolean({
    description: 'TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER=1.',
  }),
  deliverProviderProof: T.Boolean({
    description: 'TRON_DELIVER_PROVIDER_PROOF=1: provider-proof events are delivered unconfirmed.',
  }),
});

/**
 * The typed configuration every module receives (never process.env), grouped by concern. The
 * {@link Config} type is inferred from it; {@link loadConfig} maps the validated {@link Env} onto
 * it (the derived fields: resolved paths, trimmed URL, comma lists).
 */
export const ConfigSchema = Group({
  network: T.Literal('mainnet', {
    description: 'Only mainnet is served (SPEC §What the service does, 9).',
  }),
  dataDir: T.String({ description: 'DATA_DIR, resolved to an absolute path.' }),
  database: Group({
    url: Unset(V.DATABASE_URL),
    embeddedDir: T.String({ description: 'dataDir/pgdata: the embedded PGlite data.' }),
    poolSize: V.DATABASE_POOL_SIZE,
  }),
  redis: Group({ url: Unset(V.REDIS_URL) }),
  node: NodeSchema,
  testnetNode: Unset(NodeSchema),
  ingest: Group({
    startBlock: Unset(T.Integer({ minimum: 0, description: 'INGEST_START_BLOCK: its number.' })),
    startBlockId: Unset(
      T.String({
        pattern: '^[0-9a-f]{64}$',
        description: 'INGEST_START_BLOCK: its blockID, lower-case, when given (the checkpoint).',
      }),
    ),
    blockIntervalMs: V.TRON_BLOCK_INTERVAL_MS,
    lightClientCheckpoint: Unset(V.TRON_LIGHT_CLIENT_CHECKPOINT),
    testnetLightClientCheckpoint: Unset(V.TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT),
  }),
  secrets: Group({
    key: Unset(V.SECRET_ENCRYPTION_KEY),
    oldKeys: T.Optional(
      T.Array(T.String({ minLength: 1 }), {
        description: 'SECRET_ENCRYPTION_KEYS_OLD split on commas (decrypt only; rotation).',
      }),
    ),
  }),
  delivery: Group({
    timeoutMs: V.WEBHOOK_TIMEOUT_MS,
    scheduleScale: V.DELIVERY_SCHEDULE_SCALE,
    concurrency: V.DELIVERY_CONCURRENCY,
    pollMs: V.DELIVERY_POLL_MS,
    allowCidrs: T.Array(T.String({ minLength: 1 }), {
      description: 'WEBHOOK_ALLOW_CIDRS split on commas.',
    }),
    caFile: Unset(V.WEBHOOK_CA_FILE),
  }),
  alerts: Group({
    failures: V.WATCH_ALERT_FAILURES,
    paceMinutes: V.WATCH_ALERT_PACE_MINUTES,
    autoPauseDays: V.WATCH_AUTO_PAUSE_DAYS,
  }),
  http: Group({
    host: V.HOST,
    port: V.PORT,
    trustProxy: T.Array(T.String({ minLength: 1 }), {
      description:
        "TRUST_PROXY split on commas: Fastify's trustProxy (proxy-addr). Empty: no proxy is trusted, request.ip is the socket peer.",
    }),
  }),
  metrics: Group({ host: V.METRICS_HOST, port: V.METRICS_PORT }),
  telegram: Group({
    token: Unset(V.TELEGRAM_BOT_TOKEN),
    apiRoot: T.String({ description: 'TELEGRAM_API_ROOT without trailing slashes.' }),
    webhookUrl: Unset(V.TELEGRAM_WEBHOOK_URL),
    pollTimeoutSeconds: V.TELEGRAM_POLL_TIMEOUT_SECONDS,
    timeoutMs: V.TELEGRAM_TIMEOUT_MS,
    pacingScale: V.TELEGRAM_PACING_SCALE,
  }),
  retention: Group({
    intervalSeconds: V.PRUNE_INTERVAL_SECONDS,
    batchSize: V.PRUNE_BATCH_SIZE,
    tokenHours: V.TOKEN_RETENTION_HOURS,
    attemptDetailDays: V.ATTEMPT_DETAIL_RETENTION_DAYS,
    eventDays: Unset(V.EVENT_RETENTION_DAYS),
  }),
  console: Group({
    signup: V.CONSOLE_SIGNUP,
    sessionTtlSeconds: V.CONSOLE_SESSION_TTL_SECONDS,
    publicUrl: T.String({ description: 'PUBLIC_URL, or http://localhost:PORT.' }),
  }),
  audit: Group({ retentionDays: V.AUDIT_RETENTION_DAYS }),
  testMode: Group({ transfersPerMinute: V.TEST_TRANSFERS_PER_MINUTE }),
  mail: Group({
    smtpUrl: Unset(V.SMTP_URL),
    from: T.String({ description: 'MAIL_FROM, or tronwatch <no-reply@HOST of PUBLIC_URL>.' }),
  }),
  logLevel: V.LOG_LEVEL,
});

/** The typed configuration every module receives (never process.env): {@link ConfigSchema}. */
export type Config = Static<typeof ConfigSchema>;

/** Thrown by {@link loadConfig}; `problems` lists every invalid variable, one line each. */
export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

/**
 * Graceful stop budget after SIGINT/SIGTERM, ms: in-flight requests, webhook attempts and the
 * block in progress finish within it; past it the process exits 1. 15 s, or the webhook timeout
 * plus 5 s when that is longer, so an attempt started just before the signal is finished and
 * recorded rather than cut off (and sent again once its lease runs out).
 */
export function shutdownDeadlineMs(cfg: Pick<Config, 'delivery'>): number {
  return Math.max(15_000, cfg.delivery.timeoutMs + 5_000);
}

/**
 * TRON_NODE_MAX_RPS when unset: 10 for a remote node, a conservative choice for a free
 * public-node key and not a provider's documented figure (docs/operating.md "Node request budget"; at two
 * requests per block, 10/s, 9.1/s with the client's 1.1 s window, catches up a day of mainnet,
 * 28,800 blocks, in under 2 h); 0 (no cap) for a node on this machine (a loopback host: a
 * replay node, your own java-tron), which no provider meters.
 */
function defaultMaxRps(nodeUrl: string): number {
  let host: string;
  try {
    host = new URL(nodeUrl).hostname;
  } catch {
    return 10;
  }
  const loopback = host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
  return loopback ? 0 : 10;
}

/** One node provider of TRON_NODE_URL (Config['node']['providers']). */
export type ProviderSettings = Config['node']['providers'][number];

/** Settings a provider may carry in its URL's fragment. */
const PROVIDER_SETTINGS = new Set(['key', 'max_rps', 'grpc', 'grpc_full']);

/**
 * TronGrid's gRPC solidity endpoints by its HTTP host (see parseProviders), plaintext. Mainnet and
 * Shasta are on TronGrid's own page (https://developers.tron.network/docs/trongrid: full node on
 * :50051, SolidityNode on :50052). Nile's is NOT on that page: grpc.nile.trongrid.io (full node
 * :50051, solidity :50052) is what public TRON client code uses, e.g. the Rust crate `tronz`'s
 * README endpoint table (`http://grpc.nile.trongrid.io:50051` for Nile) and TronNet (C#)
 * configurations setting Channel grpc.nile.trongrid.io:50051 and SolidityChannel :50052.
 */
const TRONGRID_GRPC: Readonly<Record<string, ProviderSettings['grpc']>> = {
  'api.trongrid.io': { host: 'grpc.trongrid.io', port: 50052, tls: false },
  'api.shasta.trongrid.io': { host: 'grpc.shasta.trongrid.io', port: 50052, tls: false },
  'nile.trongrid.io': { host: 'grpc.nile.trongrid.io', port: 50052, tls: false },
};

/**
 * TronGrid's gRPC full-node endpoints by its HTTP host: java-tron's `protocol.Wallet` service,
 * which answers blocks not solidified yet (read with the light client, always on for mainnet:
 * ingest/finality-gate.ts). TronGrid's page gives "FullNode GRPC" grpc.trongrid.io:50051 and
 * grpc.shasta.trongrid.io:50051 (https://developers.tron.network/docs/trongrid); Nile's
 * grpc.nile.trongrid.io:50051 comes from the same public client code as its solidity endpoint
 * (TRONGRID_GRPC). java-tron serves `protocol.Wallet` and `protocol.WalletSolidity` on separate
 * ports (50051 and 50061 by default).
 */
const TRONGRID_GRPC_FULL: Readonly<Record<string, ProviderSettings['grpc']>> = {
  'api.trongrid.io': { host: 'grpc.trongrid.io', port: 50051, tls: false },
  'api.shasta.trongrid.io': { host: 'grpc.shasta.trongrid.io', port: 50051, tls: false },
  'nile.trongrid.io': { host: 'grpc.nile.trongrid.io', port: 50051, tls: false },
};

/** A `#grpc=`/`#grpc_full=` value: grpc://host:port or grpcs://host:port; undefined when malformed. */
function grpcTarget(v: string): ProviderSettings['grpc'] {
  const m = /^(grpcs?):\/\/(\[[^\]]+\]|[^:/]+):(\d+)\/?$/.exec(v);
  if (!m?.[2] || !m[3] || Number(m[3]) < 1 || Number(m[3]) > 65_535) return undefined;
  return { host: m[2].replace(/^\[|\]$/g, ''), port: Number(m[3]), tls: m[1] === 'grpcs' };
}

/**
 * TRON_NODE_URL's providers: comma-separated URLs, each with optional settings in its fragment
 * (`#key=…&max_rps=N&grpc=grpc://host:port`; a fragment is never sent to the server). A provider
 * without `key` takes TRON_API_KEY only when it is the only one (a key is never sent to another
 * host than the one it was given for); without `max_rps`, TRON_NODE_MAX_RPS, or when that is
 * unset 10 remote / 0 loopback. Names are origins, numbered when two share one.
 * Problems are appended to `problems` (then the result is meaningless).
 */
/**
 * INGEST_START_BLOCK (already matched by its pattern) as the config's ingest fields: the number,
 * and the blockID when given (tron/checkpoint.ts parseStartBlock).
 */
function startBlockOf(v: string | undefined): {
  startBlock: number | undefined;
  startBlockId: string | undefined;
} {
  if (v === undefined) return { startBlock: undefined, startBlockId: undefined };
  try {
    const p = parseStartBlock(v);
    return { startBlock: p.number, startBlockId: p.id };
  } catch (err) {
    throw new ConfigError([(err as Error).message]);
  }
}

function parseProviders(
  e: Env,
  problems: string[],
  variable: 'TRON_NODE_URL' | 'TRON_TESTNET_NODE_URL' = 'TRON_NODE_URL',
): ProviderSettings[] {
  const testnet = variable === 'TRON_TESTNET_NODE_URL';
  const entries = (testnet ? (e.TRON_TESTNET_NODE_URL ?? '') : e.TRON_NODE_URL)
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  if (entries.length === 0) problems.push(`${variable}: no provider URL`);
  if (!testnet && entries.length > 1 && e.TRON_API_KEY !== undefined) {
    problems.push(
      'TRON_API_KEY: with several TRON_NODE_URL providers, give each its own key in its URL (https://api.trongrid.io#key=…)',
    );
  }
  if (!testnet && e.TRON_NODE_QUORUM > Math.max(1, entries.length)) {
    problems.push(
      `TRON_NODE_QUORUM: ${e.TRON_NODE_QUORUM} is more than the ${entries.length} providers of TRON_NODE_URL`,
    );
  }
  const out: ProviderSettings[] = [];
  const seen = new Map<string, number>();
  for (const [i, entry] of entries.entries()) {
    const what = `${variable} provider ${i + 1}`;
    let u: URL;
    try {
      u = new URL(entry);
    } catch {
      problems.push(`${what}: not a URL`);
      continue;
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:') {
      problems.push(`${what}: must start with http:// or https://`);
      continue;
    }
    const settings = new URLSearchParams(u.hash.replace(/^#/, ''));
    for (const k of settings.keys()) {
      if (!PROVIDER_SETTINGS.has(k))
        problems.push(`${what}: unknown setting #${k} (key, max_rps, grpc, grpc_full)`);
    }
    const rps = settings.get('max_rps');
    if (rps !== null && !/^\d+$/.test(rps)) problems.push(`${what}: max_rps must be digits`);
    let grpc: ProviderSettings['grpc'];
    const g = settings.get('grpc');
    if (g === null) {
      // TronGrid serves java-tron's gRPC beside its HTTP API: the solidity service on port
      // 50052 of grpc.trongrid.io (grpc.shasta.trongrid.io for Shasta), per TronGrid's own page
      // (https://developers.tron.network/docs/trongrid, "SolidityNode GRPC"), and of
      // grpc.nile.trongrid.io for Nile (TRONGRID_GRPC says where that comes from). Exact bytes
      // are the default reader there; `#grpc=none` turns it off.
      grpc = TRONGRID_GRPC[u.hostname];
    } else if (g === 'none') {
      grpc = undefined;
    } else {
      grpc = grpcTarget(g);
      if (!grpc) problems.push(`${what}: grpc must be grpc://host:port or grpcs://host:port`);
    }
    // The full node's gRPC (protocol.Wallet, blocks above the solidified head): `#grpc_full=`,
    // TronGrid's documented one by default, else the `#grpc=` address (a node or proxy that
    // serves both services on one port).
    let grpcFull: ProviderSettings['grpc'];
    const gf = settings.get('grpc_full');
    if (gf !== null) {
      grpcFull = grpcTarget(gf);
      if (!grpcFull)
        problems.push(`${what}: grpc_full must be grpc://host:port or grpcs://host:port`);
      if (!grpc) problems.push(`${what}: grpc_full needs grpc (exact bytes of solidified blocks)`);
    } else if (g === null && grpc) {
      grpcFull = TRONGRID_GRPC_FULL[u.hostname];
    }
    u.hash = '';
    const url = u.toString().replace(/\/+$/, '');
    const origin = u.origin;
    const count = (seen.get(origin) ?? 0) + 1;
    seen.set(origin, count);
    out.push({
      url,
      name: count === 1 ? origin : `${origin}#${count}`,
      // TRON_API_KEY is mainnet's TronGrid key: never sent to the testnet's providers.
      apiKey:
        settings.get('key') ?? (!testnet && entries.length === 1 ? e.TRON_API_KEY : undefined),
      maxRps: rps !== null ? Number(rps) : (e.TRON_NODE_MAX_RPS ?? defaultMaxRps(url)),
      grpc,
      grpcFull,
    });
  }
  return out;
}

/** A comma-separated list, entries trimmed, empty ones dropped. */
function splitList(value: string): string[] {
  return value
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
}

/** The names proxy-addr (Fastify's trustProxy) expands to ranges (listed in trustProxyProblems). */
const TRUST_PROXY_NAMES = new Set(['loopback', 'linklocal', 'uniquelocal']);

/**
 * What is wrong with TRUST_PROXY, one line per bad entry (docs/operating.md "Running several processes").
 * Accepted: an IPv4 or IPv6 address, a CIDR with a prefix of at least 1 bit, or one of
 * proxy-addr's names `loopback` (127.0.0.1/8, ::1), `linklocal` (169.254.0.0/16, fe80::/10),
 * `uniquelocal` (10/8, 172.16/12, 192.168/16, fc00::/7). Refused, because each would let a
 * client that reaches the port directly choose the address its limits are counted against:
 * `true`, a /0, and a hop count (Fastify 5 no longer honours one: a number trusts nobody, and a
 * count believes any peer, however it connected).
 */
function trustProxyProblems(value: string): string[] {
  const problems: string[] = [];
  for (const entry of splitList(value)) {
    if (TRUST_PROXY_NAMES.has(entry)) continue;
    const bad = (why: string) => problems.push(`TRUST_PROXY: ${JSON.stringify(entry)} ${why}`);
    if (/^\d+$/.test(entry)) {
      bad(
        'is a hop count, which is not accepted: it believes X-Forwarded-For from any peer, so a client that reaches the port directly could choose its address; name the proxies (addresses, CIDRs, or uniquelocal)',
      );
      continue;
    }
    const slash = entry.indexOf('/');
    const address = slash < 0 ? entry : entry.slice(0, slash);
    const version = net.isIP(address);
    if (version === 0) {
      bad('is not an IP address, a CIDR, loopback, linklocal or uniquelocal');
      continue;
    }
    if (slash < 0) continue;
    const prefix = entry.slice(slash + 1);
    const max = version === 4 ? 32 : 128;
    if (!/^\d{1,3}$/.test(prefix) || Number(prefix) > max) {
      bad(`has no valid prefix length (1-${max})`);
    } else if (Number(prefix) === 0) {
      bad('trusts every address: any client could choose its own');
    }
  }
  return problems;
}

/**
 * The values an enumerated variable allows (`LOG_LEVEL`: fatal, error, …), listed in its error
 * so that a wrong value says what would be right; undefined for any other schema.
 */
function allowedValues(schema: TSchema): string[] | undefined {
  const s = schema as { enum?: unknown[]; anyOf?: Array<{ const?: unknown }> };
  if (Array.isArray(s.enum)) return s.enum.map(String);
  if (Array.isArray(s.anyOf) && s.anyOf.length > 0 && s.anyOf.every((a) => 'const' in a)) {
    return s.anyOf.map((a) => String(a.const));
  }
  return undefined;
}

/**
 * The URL variables and the schemes each accepts. Each must parse as a URL (WHATWG, what the
 * clients use) with a host: `redis//nope` or `postgres:/db` are refused at start rather than
 * failing later with a connection error that does not name the variable.
 */
const URL_VARIABLES: ReadonlyArray<readonly [string, readonly string[]]> = [
  ['DATABASE_URL', ['postgres:', 'postgresql:']],
  ['REDIS_URL', ['redis:', 'rediss:']],
  ['PUBLIC_URL', ['http:', 'https:']],
  ['SMTP_URL', ['smtp:', 'smtps:']],
  ['TELEGRAM_API_ROOT', ['http:', 'https:']],
  ['TELEGRAM_WEBHOOK_URL', ['https:']],
];

/** Problems of the URL variables that are set (see URL_VARIABLES); the value is never echoed. */
function urlProblems(raw: Record<string, unknown>): string[] {
  const problems: string[] = [];
  for (const [name, schemes] of URL_VARIABLES) {
    const v = raw[name];
    if (typeof v !== 'string') continue;
    let u: URL;
    try {
      u = new URL(v.trim());
    } catch {
      problems.push(`${name}: not a URL: expected ${schemes[0]}//host…`);
      continue;
    }
    if (!schemes.includes(u.protocol)) {
      problems.push(`${name}: scheme ${u.protocol} is not one of ${schemes.join(', ')}`);
    } else if (u.hostname === '' && !(name === 'DATABASE_URL' && u.searchParams.has('host'))) {
      // (libpq's `postgresql:///db?host=/var/run/postgresql`, a Unix socket, has no host part.)
      problems.push(`${name}: no host: expected ${schemes[0]}//host…`);
    }
  }
  return problems;
}

/**
 * Parse the environment into a {@link Config}.
 * @param env a process.env-like record; empty strings count as unset.
 * @throws ConfigError listing every problem at once.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const known = Object.keys(EnvSchema.properties);
  const raw: Record<string, unknown> = {};
  for (const key of known) {
    const v = env[key];
    if (v !== undefined && v !== '') raw[key] = v;
  }
  // Value.Convert reads numbers as JavaScript does (`0x10` → 16) and truncates integers
  // (`1.5` → 1): only plain decimal spellings are numbers here, anything else is refused.
  const spelling: string[] = [];
  for (const [key, v] of Object.entries(raw)) {
    const type = (EnvSchema.properties as Record<string, { type?: string }>)[key]?.type;
    if (type === 'integer' && !/^\d+$/.test(String(v))) {
      spelling.push(`${key}: must be a decimal integer (digits only) (got ${JSON.stringify(v)})`);
    } else if (type === 'number' && !/^\d+(\.\d+)?$/.test(String(v))) {
      spelling.push(`${key}: must be a decimal number like 0.25 (got ${JSON.stringify(v)})`);
    }
  }
  const withDefaults = Value.Default(EnvSchema, Value.Convert(EnvSchema, raw));
  const schemaProblems = [...Value.Errors(EnvSchema, withDefaults)]
    .filter((e) => !spelling.some((p) => p.startsWith(`${e.path.slice(1)}:`)))
    .map((e) => {
      const allowed = allowedValues(e.schema);
      const message = allowed ? `must be one of ${allowed.join(', ')}` : e.message;
      return `${e.path.slice(1) || '(root)'}: ${message} (got ${JSON.stringify(e.value)})`;
    });
  const problems = [
    ...spelling,
    ...trustProxyProblems(typeof raw.TRUST_PROXY === 'string' ? raw.TRUST_PROXY : ''),
    // One problem per variable: a URL that fails its pattern is not also reported as unparsable.
    ...schemaProblems,
    ...urlProblems(raw).filter(
      (p) => !schemaProblems.some((q) => q.startsWith(p.split(':')[0] ?? '')),
    ),
  ];
  if (problems.length > 0) throw new ConfigError(problems);
  const e = withDefaults as Env;
  const providers = parseProviders(e, problems);
  const testnetProviders =
    e.TRON_TESTNET_NODE_URL === undefined
      ? undefined
      : parseProviders(e, problems, 'TRON_TESTNET_NODE_URL');
  if (e.TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT !== undefined && !testnetProviders) {
    problems.push('TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT: needs TRON_TESTNET_NODE_URL');
  }
  if (problems.length > 0) throw new ConfigError(problems);
  const first = providers[0] as ProviderSettings;
  const testnetFirst = testnetProviders?.[0];
  const dataDir = path.resolve(e.DATA_DIR);
  return {
    network: 'mainnet',
    dataDir,
    database: {
      url: e.DATABASE_URL,
      embeddedDir: path.join(dataDir, 'pgdata'),
      poolSize: e.DATABASE_POOL_SIZE,
    },
    redis: { url: e.REDIS_URL },
    node: {
      url: first.url,
      apiKey: first.apiKey,
      timeoutMs: e.TRON_NODE_TIMEOUT_MS,
      retries: e.TRON_NODE_RETRIES,
      concurrency: e.TRON_NODE_CONCURRENCY,
      maxRps: first.maxRps,
      providers,
      quorum: e.TRON_NODE_QUORUM,
      allowUnprovenSingleProvider: e.TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER === '1',
      deliverProviderProof: e.TRON_DELIVER_PROVIDER_PROOF === '1',
    },
    testnetNode:
      testnetProviders && testnetFirst
        ? {
            url: testnetFirst.url,
            apiKey: testnetFirst.apiKey,
            timeoutMs: e.TRON_NODE_TIMEOUT_MS,
            retries: e.TRON_NODE_RETRIES,
            concurrency: e.TRON_NODE_CONCURRENCY,
            maxRps: testnetFirst.maxRps,
            providers: testnetProviders,
            quorum: 1,
            allowUnprovenSingleProvider: e.TRON_ALLOW_UNPROVEN_SINGLE_PROVIDER === '1',
            // The test network's transfers carry no money: never held.
            deliverProviderProof: true,
          }
        : undefined,
    ingest: {
      ...startBlockOf(e.INGEST_START_BLOCK),
      blockIntervalMs: e.TRON_BLOCK_INTERVAL_MS,
      lightClientCheckpoint: e.TRON_LIGHT_CLIENT_CHECKPOINT,
      testnetLightClientCheckpoint: e.TRON_TESTNET_LIGHT_CLIENT_CHECKPOINT,
    },
    secrets: {
      key: e.SECRET_ENCRYPTION_KEY,
      oldKeys: (e.SECRET_ENCRYPTION_KEYS_OLD ?? '')
        .split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
    },
    delivery: {
      timeoutMs: e.WEBHOOK_TIMEOUT_MS,
      scheduleScale: e.DELIVERY_SCHEDULE_SCALE,
      concurrency: e.DELIVERY_CONCURRENCY,
      pollMs: e.DELIVERY_POLL_MS,
      allowCidrs: e.WEBHOOK_ALLOW_CIDRS.split(',')
        .map((x) => x.trim())
        .filter((x) => x !== ''),
      caFile: e.WEBHOOK_CA_FILE,
    },
    alerts: {
      failures: e.WATCH_ALERT_FAILURES,
      paceMinutes: e.WATCH_ALERT_PACE_MINUTES,
      autoPauseDays: e.WATCH_AUTO_PAUSE_DAYS,
    },
    http: { host: e.HOST, port: e.PORT, trustProxy: splitList(e.TRUST_PROXY ?? '') },
    metrics: { host: e.METRICS_HOST, port: e.METRICS_PORT },
    telegram: {
      token: e.TELEGRAM_BOT_TOKEN,
      apiRoot: e.TELEGRAM_API_ROOT.replace(/\/+$/, ''),
      webhookUrl: e.TELEGRAM_WEBHOOK_URL,
      pollTimeoutSeconds: e.TELEGRAM_POLL_TIMEOUT_SECONDS,
      timeoutMs: e.TELEGRAM_TIMEOUT_MS,
      pacingScale: e.TELEGRAM_PACING_SCALE,
    },
    retention: {
      intervalSeconds: e.PRUNE_INTERVAL_SECONDS,
      batchSize: e.PRUNE_BATCH_SIZE,
      tokenHours: e.TOKEN_RETENTION_HOURS,
      attemptDetailDays: e.ATTEMPT_DETAIL_RETENTION_DAYS,
      eventDays: e.EVENT_RETENTION_DAYS,
    },
    console: {
      signup: e.CONSOLE_SIGNUP,
      sessionTtlSeconds: e.CONSOLE_SESSION_TTL_SECONDS,
      publicUrl: e.PUBLIC_URL ?? `http://localhost:${e.PORT}`,
    },
    audit: { retentionDays: e.AUDIT_RETENTION_DAYS },
    testMode: { transfersPerMinute: e.TEST_TRANSFERS_PER_MINUTE },
    mail: {
      smtpUrl: e.SMTP_URL?.trim(),
      from:
        e.MAIL_FROM?.trim() ??
        `tronwatch <no-reply@${new URL(e.PUBLIC_URL ?? 'http://localhost').hostname}>`,
    },
    logLevel: e.LOG_LEVEL,
  };
}
