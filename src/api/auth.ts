/**
 * The guard in front of every `/v1/*` request (SPEC §Authentication, §Limits; DESIGN decisions):
 * authenticate the API key, then count the request against its rate limit, then refuse a request
 * that names a testnet.
 *
 * It runs as an `onRequest` hook — before the body is read, parsed or validated — so an
 * unauthenticated client gets its 401 whatever it sent and never makes us parse a body, and the
 * rate-limit headers are on every `/v1/*` answer, including 400/413/415 and unknown `/v1` routes.
 *
 * Authentication, in this order:
 * 0. More than one `Authorization` header → 401 invalid_api_key (Node would keep the first, a
 *    proxy in front might act on another: which key is meant is ambiguous).
 * 1. No `Authorization: Bearer …` header → 401 missing_api_key.
 * 2. Not the shape of a key (`tw_live_`/`tw_test_` + base58) → 401 invalid_api_key.
 * 3. The key's prefix says its environment (issue 32; src/common/environment.ts): `tw_live_` the
 *    live one (this deployment's network, mainnet), `tw_test_` the test one (Nile). The caller's
 *    `network` (AuthContext) is the key's: every route reads and writes that environment's
 *    objects only, so an id of the other environment is not found (404).
 * 4. Lookup by SHA-256 through the unique index. Unknown → 401 invalid_api_key; revoked → 401
 *    revoked_api_key with the revocation time in the message and `details`.
 *
 * Key cache (KeyCache), and why it cannot serve a revoked key (SPEC §Authentication 3: "refused
 * from the next request onward", on every replica; CONVENTIONS "Things we do not do"): a route may
 * declare `config: { keyCheckedInQuery: true }`, which says that its own SQL statement re-checks
 * the key (`api_keys.revoked_at IS NULL` for `AuthContext.keyId`) in the same snapshot as the
 * data it reads, and answers with the lookup's own 401 when that check fails; any error answer to
 * a cached caller (400, 429, …) is preceded by the lookup as well (src/api/error-handler.ts), so a
 * revoked key is always answered revoked_api_key. Only for such a route does the guard take the
 * caller from the cache (`verified: false`) instead of the database; every other route looks the
 * key up on every request, as does every cache miss. So a revocation committed before a request's
 * statement runs refuses that request, whichever replica serves it. What the cache may hold stale
 * for up to its TTL (10 s) is the account's plan and limits, and the first request refused after
 * a revocation is counted against the key's window rather than the client IP's.
 * GET /v1/events (the hot path) is such a route: one database round trip per request instead of
 * two (measured on 2 cores: ~1,400 → ~2,000 pages of 50 per second).
 *
 * Role (issue 27 item 2): a key can do at most what its maker's role can. Each route needs a least
 * role (`config.keyRole`; default viewer to read, developer to change; GET /v1/audit needs admin);
 * a key below it gets 403 insufficient_role, after its request is counted.
 *
 * Rate limit: an authenticated request counts against its key at the account's rate; one that
 * fails authentication counts against the client IP at the Free rate, and when that is exhausted
 * the answer is 429 instead of the 401/403 (a key-guessing client is slowed down like any other).
 * The client IP is Fastify's `request.ip`: the socket peer, or behind a proxy named in
 * TRUST_PROXY the address it forwarded (src/api/app.ts); an IPv6 client is counted by its /64
 * (clientAddressKey in src/rate-limit/limiter.ts).
 */
import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  type ApiKeyLookup,
  findKeyByHash,
  hashApiKey,
  KeyUsage,
  keyNetwork,
} from '../accounts/keys.js';
import { limitsFor, PLAN_LIMITS } from '../accounts/plans.js';
import { type Role, roleAtLeast } from '../accounts/users.js';
import { TEST_NETWORK } from '../common/environment.js';
import { ApiError } from '../common/errors.js';
import type { Db } from '../db/pool.js';
import { clientAddressKey, type RateLimiter } from '../rate-limit/limiter.js';
import type { AuthContext, KeyCache } from './key-cache.js';
import type { App } from './types.js';

export { type AuthContext, KeyCache } from './key-cache.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * The route's own statement checks that `request.auth.keyId` is not revoked, so the guard
     * may take the caller from the KeyCache (module doc). Default false.
     */
    keyCheckedInQuery?: boolean;
    /**
     * The least role a key needs for this /v1 route (issue 27 item 2; src/accounts/keys.ts).
     * Default: `viewer` for GET and HEAD (and the /mcp endpoint, whose tool calls are checked
     * one by one as the /v1 requests they are), `developer` for anything that changes state.
     */
    keyRole?: Role;
  }
}

/**
 * True for a path (or URL text starting with one) the guard covers: under `/v1`, and the MCP
 * endpoint `/mcp` (src/mcp/route.ts), which answers to the same keys with the same limits and
 * headers.
 */
export function isV1(url: string): boolean {
  return (
    url === '/v1' ||
    url.startsWith('/v1/') ||
    url.startsWith('/v1?') ||
    url === '/mcp' ||
    url.startsWith('/mcp/') ||
    url.startsWith('/mcp?')
  );
}

/** True for the MCP endpoint's path (`/mcp`, with or without a query). */
export function isMcpPath(url: string): boolean {
  return url === '/mcp' || url.startsWith('/mcp?');
}

/**
 * Header of a `/v1` request that the `/mcp` endpoint injects in process for one MCP tool call
 * (src/mcp/backend.ts), carrying the app's inner-request token: a random value made when the
 * app is built that never leaves the process. Such a request is authenticated as any other (its
 * Authorization header is the MCP caller's) but not counted against the rate limit: the `/mcp`
 * request that carried the tool call already was. A client that sends the header without the
 * token is counted as usual.
 */
export const INNER_REQUEST_HEADER = 'x-tronwatch-inner-request';

/** True when `request` carries this app's inner-request token (constant-time comparison). */
function isInnerRequest(request: FastifyRequest, token: string | undefined): boolean {
  if (token === undefined) return false;
  const sent = request.headers[INNER_REQUEST_HEADER];
  if (typeof sent !== 'string') return false;
  const a = Buffer.from(sent);
  const b = Buffer.from(token);
  return a.length === b.length && timingSafeEqual(a, b);
}

/**
 * True for a request the router treats as under `/v1`: by the matched route's pattern, or, for a
 * request no route matched, by its decoded path. Not by the raw request target, which a client
 * may spell so that the router still finds a `/v1` route (`/%761/watches`, an absolute-form
 * `http://host/v1/watches`) but a prefix test does not: such a request would pass unguarded
 * (no authentication, rate limit or rate-limit headers) and fail later with a 500.
 */
export function isV1Request(request: FastifyRequest): boolean {
  const route = request.routeOptions.url;
  if (route !== undefined) return isV1(route);
  let path: string;
  try {
    path = decodeURIComponent(new URL(request.url, 'http://localhost').pathname);
  } catch {
    path = request.url;
  }
  return isV1(path);
}

const BEARER_RE = /^Bearer +(\S*) *$/i;

/**
 * The request's Authorization header values, from the raw header list (Node's `headers` keeps
 * only the first of duplicates). `rawHeaders` is [name, value, name, value, …].
 */
export function authorizationHeaders(rawHeaders: readonly string[]): string[] {
  const values: string[] = [];
  for (let i = 0; i + 1 < rawHeaders.length; i += 2) {
    const name = rawHeaders[i] as string;
    if (name.length === 13 && name.toLowerCase() === 'authorization') {
      values.push(rawHeaders[i + 1] as string);
    }
  }
  return values;
}

/**
 * Authenticate an `Authorization` header value.
 * @param header the header's value, or every value it was sent with (authorizationHeaders).
 * @param network this deployment's live network (`mainnet`); `tw_test_` keys are of TEST_NETWORK.
 * @param cache refreshed by every database lookup; read (result `verified: false`) only when
 *   `allowCached` is true.
 * @throws ApiError 401 missing_api_key | invalid_api_key | revoked_api_key, 403 wrong_network;
 *   a database error as is (answered 500).
 */
export async function authenticate(
  db: Db,
  header: string | readonly string[] | undefined,
  network: string,
  cache?: KeyCache,
  allowCached = false,
): Promise<AuthContext> {
  if (typeof header !== 'string' && header !== undefined) {
    if (header.length > 1) {
      throw unauthorized(
        'invalid_api_key',
        'more than one Authorization header: send exactly one, Authorization: Bearer tw_live_…',
      );
    }
    return authenticate(db, header[0], network, cache, allowCached);
  }
  const m = header === undefined ? null : BEARER_RE.exec(header);
  if (!m) {
    throw unauthorized(
      'missing_api_key',
      'missing API key: send the header Authorization: Bearer tw_live_…',
      undefined,
      'Bearer realm="tronwatch"',
    );
  }
  const key = m[1] ?? '';
  const keyNet = keyNetwork(key);
  if (keyNet === null) {
    throw unauthorized('invalid_api_key', 'invalid API key: malformed or unknown');
  }
  // tw_live_ keys act on this deployment's network, tw_test_ keys on the test environment's.
  const keyEnvNetwork = keyNet === 'mainnet' ? network : TEST_NETWORK;
  const keyHash = hashApiKey(key);
  if (allowCached) {
    const hit = cache?.get(keyHash);
    if (hit) return hit;
  }
  const found: ApiKeyLookup | undefined = await findKeyByHash(db, keyHash);
  if (!found || found.revoked_at !== null) cache?.delete(keyHash);
  if (!found) throw unauthorized('invalid_api_key', 'invalid API key: malformed or unknown');
  if (found.revoked_at !== null) {
    const at = found.revoked_at.toISOString();
    throw unauthorized(
      'revoked_api_key',
      `API key revoked at ${at}: create a new key in the console`,
      {
        revoked_at: at,
      },
    );
  }
  if (found.network !== keyEnvNetwork) {
    // A key whose row names another network than its prefix says: never issued so; refuse it.
    throw ApiError.coded(
      'wrong_network',
      `this key is not for ${keyEnvNetwork}: use a ${keyNet === 'mainnet' ? 'tw_live_' : 'tw_test_'} key of this deployment`,
    );
  }
  const auth: AuthContext = {
    keyId: found.key_id,
    accountId: found.account_id,
    network: found.network,
    role: found.role,
    plan: found.plan,
    limits: limitsFor(found),
    verified: true,
    scope: found.scope,
  };
  cache?.set(keyHash, auth);
  return auth;
}

function unauthorized(
  code: 'missing_api_key' | 'invalid_api_key' | 'revoked_api_key',
  message: string,
  details?: unknown,
  challenge = 'Bearer realm="tronwatch", error="invalid_token"',
): ApiError {
  return new ApiError(401, message, code, details, {}, { 'WWW-Authenticate': challenge });
}

/**
 * Count a request and set `X-RateLimit-Limit` / `X-RateLimit-Remaining`.
 * @throws ApiError 429 rate_limited with `Retry-After` when the window is full.
 */
export async function enforceRateLimit(
  limiter: RateLimiter,
  reply: FastifyReply,
  id: string,
  limit: number,
): Promise<void> {
  const r = await limiter.hit(id, limit);
  reply.header('X-RateLimit-Limit', String(r.limit));
  reply.header('X-RateLimit-Remaining', String(r.remaining));
  if (!r.allowed) {
    reply.server.metrics?.rateLimitRefusals.inc({ scope: id.startsWith('ip:') ? 'ip' : 'key' });
    throw new ApiError(
      429,
      `rate limit of ${r.limit} requests per minute exceeded: retry in ${r.retryAfterSeconds} s`,
      'rate_limited',
      undefined,
      {},
      { 'Retry-After': String(r.retryAfterSeconds) },
    );
  }
}

/** Count a request that carries no usable key: per client IP, at the Free rate. */
export function enforceAnonymousRateLimit(
  limiter: RateLimiter,
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  return enforceRateLimit(
    limiter,
    reply,
    `ip:${clientAddressKey(request.ip)}`,
    PLAN_LIMITS.free.requestsPerMinute,
  );
}

/**
 * Count a request refused before routing (a malformed URL, an over-long id: no route ran, so no
 * guard) against the right window: its API key's when the Authorization header carries a valid
 * one, else the client IP's at the Free rate, as the guard would have (issue 14 item 5).
 * @throws ApiError 429 when that window is full.
 */
export async function enforceCallerRateLimit(
  deps: { db: Db; rateLimiter: RateLimiter; network: string; keyCache: KeyCache },
  request: FastifyRequest,
  reply: FastifyReply,
): Promise<void> {
  let auth: AuthContext | undefined;
  try {
    const header = authorizationHeaders(request.raw.rawHeaders);
    auth = await authenticate(deps.db, header, deps.network, deps.keyCache, false);
  } catch {
    auth = undefined;
  }
  if (!auth) return enforceAnonymousRateLimit(deps.rateLimiter, request, reply);
  return enforceRateLimit(
    deps.rateLimiter,
    reply,
    `key:${auth.keyId}`,
    auth.limits.requestsPerMinute,
  );
}

/** The least role a key needs for `request`'s route (see FastifyContextConfig.keyRole). */
export function keyRoleNeeded(request: FastifyRequest): Role {
  const declared = request.routeOptions.config?.keyRole;
  if (declared !== undefined) return declared;
  const route = request.routeOptions.url ?? '';
  if (request.method === 'GET' || request.method === 'HEAD' || route.startsWith('/mcp')) {
    return 'viewer';
  }
  return 'developer';
}

/** @throws ApiError 403 insufficient_role when the key's role is below the route's. */
function checkKeyRole(request: FastifyRequest, auth: AuthContext): void {
  const needed = keyRoleNeeded(request);
  if (!roleAtLeast(auth.role, needed)) {
    throw ApiError.coded(
      'insufficient_role',
      `this needs a key with the ${needed} role or higher; this key's is ${auth.role} (a key is never more than the member who made it)`,
    );
  }
}

/**
 * A read-only key reads (issue 31 item 3): one more cap beside the role, on every /v1 route and
 * so, through their /v1 requests, in every MCP tool.
 * @throws ApiError 403 read_only_key for any method but GET and HEAD.
 */
function checkKeyScope(request: FastifyRequest, auth: AuthContext): void {
  if (auth.scope !== 'read' || request.method === 'GET' || request.method === 'HEAD') return;
  throw ApiError.coded(
    'read_only_key',
    `this API key is read-only: it may not ${request.method} ${request.routeOptions.url ?? request.url} (use a key with full access)`,
  );
}

/** The caller of an authenticated route. @throws Error when the guard did not run (a bug). */
export function requireAuth(request: FastifyRequest): AuthContext {
  if (request.auth === null) throw new Error(`no auth context on ${request.url}`);
  return request.auth;
}

/**
 * A request naming another network than its key's environment (`network` in the query or the
 * body: `nile` with a `tw_live_` key, `mainnet` with a `tw_test_` key) → 400 testnet_unsupported
 * (DESIGN decisions). Non-string values are left to schema validation.
 */
function refuseTestnet(source: unknown, network: string): void {
  if (typeof source !== 'object' || source === null || Array.isArray(source)) return;
  if (!('network' in source)) return;
  const value: unknown = (source as { network: unknown }).network;
  const names = Array.isArray(value) ? value : [value];
  const other = names.find((n): n is string => typeof n === 'string' && n !== network);
  if (other !== undefined) {
    throw ApiError.coded(
      'testnet_unsupported',
      `network ${JSON.stringify(other)} is not served to this key: it is a ${network === TEST_NETWORK ? 'tw_test_ key (test mode, nile)' : `tw_live_ key (${network})`}; use a key of that environment`,
    );
  }
}

/**
 * Install the `/v1/*` guard hooks on the app (see module doc). `deps.innerToken`: the app's
 * inner-request token (INNER_REQUEST_HEADER), absent when the app has no `/mcp` endpoint.
 */
export function registerV1Guard(
  app: App,
  deps: {
    db: Db;
    rateLimiter: RateLimiter;
    network: string;
    keyCache: KeyCache;
    innerToken?: string;
  },
): void {
  const usage = new KeyUsage(deps.db);
  app.decorateRequest('auth', null);
  app.addHook('onRequest', async (request, reply) => {
    if (!isV1Request(request)) return;
    const header = authorizationHeaders(request.raw.rawHeaders);
    const allowCached = request.routeOptions.config?.keyCheckedInQuery === true;
    const inner = isInnerRequest(request, deps.innerToken);
    let auth: AuthContext;
    try {
      auth = await authenticate(deps.db, header, deps.network, deps.keyCache, allowCached);
    } catch (err) {
      if (!inner) await enforceAnonymousRateLimit(deps.rateLimiter, request, reply);
      throw err;
    }
    request.auth = auth;
    void usage.touch(auth.keyId);
    // A tool call of an `/mcp` request already counted (INNER_REQUEST_HEADER): its role (and
    // scope) is the /v1 route's. `/mcp` itself counts in its route, once its JSON-RPC message is
    // read: session set-up is not charged (src/mcp/route.ts); it needs only a viewer's key
    // (keyRoleNeeded), and a read-only key may use it (its tools are checked one by one).
    if (inner) {
      checkKeyRole(request, auth);
      return checkKeyScope(request, auth);
    }
    if (isMcpPath(request.url)) return;
    // (A 429 to a cached caller is checked like any error answer: src/api/error-handler.ts.)
    await enforceRateLimit(
      deps.rateLimiter,
      reply,
      `key:${auth.keyId}`,
      auth.limits.requestsPerMinute,
    );
    checkKeyRole(request, auth);
    checkKeyScope(request, auth);
  });
  // After parsing, before validation: a testnet request is refused as such, not as a bad field.
  app.addHook('preValidation', async (request) => {
    if (!isV1Request(request)) return;
    const network = request.auth?.network ?? deps.network;
    refuseTestnet(request.query, network);
    refuseTestnet(request.body, network);
  });
}
