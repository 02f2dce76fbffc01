/**
 * The HTTP app, built and not started (CONVENTIONS habit 1): main.ts listens, tests inject.
 *
 * What is registered, in order:
 *  1. JSON as the only body type (415 otherwise), bodies up to BODY_LIMIT_BYTES (413 beyond);
 *     an empty body is no body (a DELETE sent with Content-Type: application/json is fine).
 *  2. @fastify/swagger (it must see every route), then every `$id` schema (components).
 *  3. The error and 404 handlers (src/api/error-handler.ts), the start gate (every route but
 *     /healthz answers 503 until `deps.started()`), the `/v1/*` guard (auth, rate limit, testnet
 *     refusal: src/api/auth.ts).
 *  4. The routes, one resource per file: watches, events, health, docs, and POST /mcp (the MCP
 *     server over streamable HTTP, guarded like /v1: src/mcp/route.ts). Not /metrics: it is
 *     served by the metrics listener only (src/api/metrics-app.ts), so here it is a 404.
 *
 * The client's address (`request.ip`, what every per-address limit and the logs use): the socket
 * peer, or, when that peer is a proxy named in TRUST_PROXY (config.http.trustProxy, Fastify's
 * `trustProxy`), the address that proxy forwarded (X-Forwarded-For, read right to left while the
 * hops are trusted proxies). An X-Forwarded-For from any other peer is ignored.
 *
 * Request ids: the caller's X-Request-Id when sane, else a random one (routes/metrics.ts
 * requestId), echoed as X-Request-Id and carried as `request_id` by every log line of the request.
 * One log line per request ('request completed': method, route, path, status_code, duration_ms,
 * client_ip) replaces Fastify's two; bodies and headers are never logged. The same hook feeds
 * the request-latency histogram of GET /metrics (on the metrics listener).
 */

import { randomBytes } from 'node:crypto';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Fastify, {
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  LogController,
} from 'fastify';
import { ApiError } from '../common/errors.js';
import { Metrics } from '../common/metrics.js';
import { registerConsole } from '../console/index.js';
import { mcpRoutes } from '../mcp/route.js';
import {
  authenticate,
  enforceAnonymousRateLimit,
  enforceCallerRateLimit,
  isV1Request,
  KeyCache,
  registerV1Guard,
} from './auth.js';
import { sharedCompilers } from './compilers.js';
import { clientError, registerErrorHandling, sendError } from './error-handler.js';
import { auditRoutes, auditSchemas } from './routes/audit.js';
import { docsRoutes, swaggerOptions } from './routes/docs.js';
import { endpointRoutes, endpointSchemas } from './routes/endpoints.js';
import { eventStreamRoutes } from './routes/event-stream.js';
import { eventRoutes, eventSchemas } from './routes/events.js';
import { healthRoutes, healthSchemas } from './routes/health.js';
import { lightClientSchemas } from './routes/light-client.js';
import { requestId } from './routes/metrics.js';
import { statusRoutes, statusSchemas } from './routes/status.js';
import { testTransferRoutes, testTransferSchemas } from './routes/test-transfers.js';
import { watchBatchRoutes, watchBatchSchemas } from './routes/watch-batch.js';
import { watchRoutes, watchSchemas } from './routes/watches.js';
import { sharedSchemas } from './schemas.js';
import type { App, AppDeps } from './types.js';

export type { AppDeps } from './types.js';

/**
 * Largest accepted request body, bytes. A CreateWatch is well under 3 KiB (a 2048-character
 * webhook_url plus a few short fields); 64 KiB leaves room and bounds what a client can make us read.
 */
export const BODY_LIMIT_BYTES = 64 * 1024;

/**
 * Retry-After of the 503 answered while the process starts, seconds: about the longest pause
 * between two attempts to reach PostgreSQL (START_BACKOFF, 5 s).
 */
export const STARTING_RETRY_AFTER_S = 5;

/** Build the app (routes registered, not listening). The caller closes it. */
export async function buildApp(deps: AppDeps): Promise<FastifyInstance> {
  const logger: FastifyBaseLogger = deps.logger;
  const keyCache = deps.keyCache ?? new KeyCache();
  const app: App = Fastify({
    loggerInstance: logger,
    bodyLimit: BODY_LIMIT_BYTES,
    genReqId: requestId,
    // Unset TRUST_PROXY: an empty list, no proxy trusted (false: Fastify reads no X-Forwarded-*).
    trustProxy: deps.config.http.trustProxy.length > 0 ? deps.config.http.trustProxy : false,
    logController: new LogController({
      requestIdLogLabel: 'request_id',
      // One snake_case line per request instead (the onResponse hook below).
      disableRequestLogging: true,
    }),
    // HEAD /v1/… would be undocumented surface; none is part of the contract.
    exposeHeadRoutes: false,
    // Report every invalid field of a body or query in `details`, not only the first.
    // Unknown members of a body or query are REJECTED (400, `details` names each), not silently
    // dropped: the request schemas say `additionalProperties: false`, and removeAdditional is off
    // so that a typo (`directon`) cannot quietly fall back to a default.
    ajv: { customOptions: { allErrors: true, removeAdditional: false } },
    // Routes compiled once per process, not once per app (tests build one app per test).
    schemaController: { compilersFactory: sharedCompilers },
    // A request Node cannot parse (oversized headers, bad framing) gets the contract's body too.
    clientErrorHandler: clientError,
    // Errors raised before routing (bad %-encoding, an over-long path parameter) get the
    // contract's body too, and the rate-limit headers under /v1.
    frameworkErrors: (err, request, reply) => {
      reply.header('X-Request-Id', request.id);
      void frameworkError(err, reply, async () => {
        if (isV1Request(request)) {
          await enforceCallerRateLimit(
            { db: deps.db, rateLimiter: deps.rateLimiter, network: deps.config.network, keyCache },
            request,
            reply,
          );
        }
      }).catch((e: unknown) => sendError(e, request, reply, BODY_LIMIT_BYTES));
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.removeAllContentTypeParsers();
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    // Bodies are read as sent: a compressed (or falsely labelled) one is refused, not misread.
    // The charset parameter is ignored: JSON is UTF-8 (RFC 8259 §8.1).
    const encoding = request.headers['content-encoding']?.trim().toLowerCase();
    if (encoding !== undefined && encoding !== '' && encoding !== 'identity') {
      done(new ApiError(415, 'unsupported Content-Encoding: send an uncompressed body'), undefined);
      return;
    }
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text === '') {
      done(null, undefined);
      return;
    }
    parseJson(request, text, done);
  });

  await app.register(swagger, swaggerOptions());
  for (const s of [
    ...sharedSchemas,
    ...watchSchemas,
    ...endpointSchemas,
    ...watchBatchSchemas,
    ...eventSchemas,
    ...lightClientSchemas,
    ...healthSchemas,
    ...statusSchemas,
    ...auditSchemas,
    ...testTransferSchemas,
  ]) {
    app.addSchema(s);
  }

  const metrics = deps.metrics ?? new Metrics({ db: deps.db, logger: deps.logger });
  app.decorate('metrics', metrics);
  // (Answers given before routing get it in frameworkErrors above: no hook runs for them.)
  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
  });
  const started = deps.started;
  if (started) {
    // Until the process has started (PostgreSQL reachable, migrations applied), only /healthz
    // answers (503): anything else would meet a missing database or an old schema.
    app.addHook('onRequest', async (request, reply) => {
      if (started() || request.routeOptions.url === '/healthz') return;
      // A /v1 answer carries the rate-limit headers, as when the database is down later (the
      // guard): no key can be looked up, so the request counts against its IP's window at the
      // Free rate (a 429 when full). Answered here, not thrown: no warning per request.
      if (isV1Request(request)) await enforceAnonymousRateLimit(deps.rateLimiter, request, reply);
      return reply
        .code(503)
        .header('Retry-After', String(STARTING_RETRY_AFTER_S))
        .send({ error: 'service starting: the database is not ready yet; retry shortly' });
    });
  }
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const status = reply.statusCode;
    metrics.httpRequestDuration.observe(
      { method: request.method, route, status_code: String(status) },
      reply.elapsedTime / 1000,
    );
    request.log.info(
      {
        method: request.method,
        route,
        // The path only: a client may put a credential in the query string (?api_key=…), and
        // secrets never enter a log line.
        path: request.url.split('?', 1)[0],
        status_code: status,
        duration_ms: Math.round(reply.elapsedTime * 10) / 10,
        client_ip: request.ip,
      },
      'request completed',
    );
  });

  // The database's word on a caller the guard took from the key cache: throws its 401 when the
  // key was revoked since (src/api/auth.ts). Used by the error handler and the events route.
  const verifyCaller = async (request: FastifyRequest) => {
    await authenticate(deps.db, request.headers.authorization, deps.config.network, keyCache);
  };
  registerErrorHandling(app, BODY_LIMIT_BYTES, verifyCaller);
  // Lets POST /mcp's tool calls into /v1 without counting them twice (auth.ts INNER_REQUEST_HEADER).
  const innerToken = randomBytes(32).toString('base64url');
  registerV1Guard(app, {
    db: deps.db,
    rateLimiter: deps.rateLimiter,
    network: deps.config.network,
    keyCache,
    innerToken,
  });

  watchRoutes(app, deps);
  endpointRoutes(app, deps);
  watchBatchRoutes(app, deps);
  eventRoutes(app, { ...deps, verifyCaller });
  eventStreamRoutes(app, deps);
  auditRoutes(app, deps);
  testTransferRoutes(app, deps);
  await registerConsole(app, deps);
  healthRoutes(app, deps);
  statusRoutes(app, deps);
  docsRoutes(app);
  mcpRoutes(app, innerToken, deps.rateLimiter);
  return app;
}

/** Answer an error raised before routing: a malformed URL (400) or an over-long id (404). */
async function frameworkError(
  err: { code?: string },
  reply: FastifyReply,
  limit: () => Promise<void>,
): Promise<void> {
  await limit();
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    // The only path parameter is a watch id: one this long names no watch.
    reply.code(404).send({ error: 'not found' });
    return;
  }
  reply.code(400).send({ error: 'malformed URL' });
}
