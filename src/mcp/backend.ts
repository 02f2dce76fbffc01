/**
 * How the MCP tools reach the API (src/mcp/tools.ts): every tool that reads or changes data is one
 * `/v1` request, so the tools keep the contract's rules, errors, scopes and limits by construction
 * (one implementation: the routes in src/api/routes/).
 *
 * - `httpBackend(url, key)`: `tronwatch mcp` over stdio, a client of a running service: fetch with
 *   `Authorization: Bearer <key>`.
 * - `injectBackend(app, …)`: the `/mcp` endpoint of the API itself (src/mcp/route.ts): the same
 *   request injected into the app in process, with the caller's own Authorization header and
 *   client address, plus the app's inner-request token (src/api/auth.ts INNER_REQUEST_HEADER): the
 *   `/mcp` request that carries the tool call was already counted against the key's rate limit, so
 *   the guard authenticates the inner request again (a key revoked meanwhile is refused) without
 *   counting it twice.
 */
import type { FastifyInstance } from 'fastify';
import { INNER_REQUEST_HEADER } from '../api/auth.js';

/** One API answer: HTTP status and parsed JSON body (null for an empty one). */
export interface ApiAnswer {
  status: number;
  body: unknown;
}

/** The methods of the `/v1` routes. */
export type ApiMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE';

/** Sends one `/v1` request as the MCP caller. */
export interface ApiBackend {
  /**
   * @param path absolute path with query (`/v1/events?limit=5`).
   * @throws ServiceUnreachableError only when the service cannot be reached (an error answer is
   *   an ApiAnswer).
   */
  request(method: ApiMethod, path: string, body?: unknown): Promise<ApiAnswer>;
}

function parse(text: string): unknown {
  if (text === '') return null;
  try {
    return JSON.parse(text);
  } catch {
    return { error: text.slice(0, 500) };
  }
}

/** The service at `url` did not answer (connection refused, DNS, TLS, timeout). */
export class ServiceUnreachableError extends Error {
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    const c = cause as {
      cause?: { code?: string; message?: string };
      message?: string;
      name?: string;
    };
    const why =
      c?.name === 'TimeoutError'
        ? 'no answer in time'
        : (c?.cause?.code ?? c?.cause?.message ?? c?.message ?? String(cause));
    super(`tronwatch unreachable at ${url}: ${why}`);
    this.name = 'ServiceUnreachableError';
  }
}

/**
 * A client of the service at `baseUrl` (e.g. `http://127.0.0.1:8080`) with API key `apiKey`.
 * @param timeoutMs per request (default 30 s: an explain may read a block from the node).
 */
export function httpBackend(baseUrl: string, apiKey: string, timeoutMs = 30_000): ApiBackend {
  const base = baseUrl.replace(/\/+$/, '');
  return {
    async request(method, path, body) {
      let res: Response;
      try {
        res = await fetch(`${base}${path}`, {
          method,
          headers: {
            authorization: `Bearer ${apiKey}`,
            accept: 'application/json',
            ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          },
          ...(body === undefined ? {} : { body: JSON.stringify(body) }),
          signal: AbortSignal.timeout(timeoutMs),
        });
      } catch (err) {
        throw new ServiceUnreachableError(base, err);
      }
      return { status: res.status, body: parse(await res.text()) };
    },
  };
}

/**
 * Requests into `app` in process as the caller of one `/mcp` request.
 * @param authorization the caller's Authorization header values, as sent.
 * @param clientIp the caller's address (request.ip): an inner request is the caller's request.
 * @param innerToken the app's inner-request token (never leaves the process).
 */
export function injectBackend(
  app: FastifyInstance,
  authorization: readonly string[],
  clientIp: string,
  innerToken: string,
): ApiBackend {
  return {
    async request(method, path, body) {
      const res = await app.inject({
        method,
        url: path,
        remoteAddress: clientIp,
        headers: {
          ...(authorization.length === 1 ? { authorization: authorization[0] } : {}),
          [INNER_REQUEST_HEADER]: innerToken,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
      });
      return { status: res.statusCode, body: parse(res.body) };
    },
  };
}
