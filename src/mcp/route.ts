/**
 * `POST /mcp`: the MCP server (src/mcp/tools.ts) over streamable HTTP, on the API's port.
 *
 * - Guarded like `/v1` (src/api/auth.ts isV1): `Authorization: Bearer tw_live_…`, the same
 *   401/403/429 answers and X-RateLimit-* headers.
 * - Charged per message that asks for work: each `tools/call` (or any other request) counts one
 *   against the key's rate limit, like one `/v1` call; session set-up does not count: `initialize`,
 *   `ping`, notifications (`notifications/initialized`), and `GET`/`DELETE /mcp`. Those are still
 *   refused (429) while the key's window is full, so they cannot be used to flood the service.
 * - Stateless (the SDK's `sessionIdGenerator: undefined`): a new server and transport per request,
 *   answers as JSON (`enableJsonResponse`), no session id; any replica can serve any request.
 *   `GET /mcp` (a server-to-client stream) and `DELETE /mcp` (end a session) have nothing to serve:
 *   405 with `Allow: POST`.
 * - One JSON-RPC message per request: a batch is refused (400), so each tool call is one counted
 *   request.
 * - Every error this endpoint answers itself (authentication, rate limit, a batch, a body that is
 *   not a message, 405) is a JSON-RPC error object, as an MCP client expects, with the HTTP status
 *   and headers of the `/v1` answer: `{ jsonrpc: '2.0', id, error: { code, message, data } }`,
 *   `data` the API's error body (`{ error, code?, details? }`) and `status`. Codes: -32600
 *   (invalid request: 400), -32001 (401/403: the key), -32029 (429), -32000 otherwise.
 * - Each tool's `/v1` request is injected in process with the caller's key (src/mcp/backend.ts).
 * Hidden from the OpenAPI document (JSON-RPC, not a REST operation); docs/integrating.md describes
 * it.
 */
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Type as T } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authorizationHeaders, enforceRateLimit, requireAuth } from '../api/auth.js';
import type { App } from '../api/types.js';
import { ApiError } from '../common/errors.js';
import type { RateLimiter } from '../rate-limit/limiter.js';
import { injectBackend } from './backend.js';
import { createMcpServer } from './tools.js';

/** JSON-RPC methods that set a session up: not charged against the rate limit. */
function isSetUp(method: unknown): boolean {
  return (
    method === 'initialize' ||
    method === 'ping' ||
    (typeof method === 'string' && method.startsWith('notifications/'))
  );
}

/** The JSON-RPC error code of an HTTP error status (module doc). */
function rpcCode(status: number): number {
  if (status === 400) return -32600;
  if (status === 401 || status === 403) return -32001;
  if (status === 429) return -32029;
  return -32000;
}

/**
 * An error answer of this endpoint as a JSON-RPC error (module doc). `payload` is the serialised
 * REST error body; anything else is left as it is.
 */
function asJsonRpcError(request: FastifyRequest, status: number, payload: unknown): unknown {
  if (typeof payload !== 'string') return payload;
  let body: unknown;
  try {
    body = JSON.parse(payload);
  } catch {
    return payload;
  }
  if (typeof body !== 'object' || body === null || !('error' in body)) return payload;
  if ('jsonrpc' in body) return payload;
  const message = (body as { error: unknown }).error;
  const rpc = request.body as { id?: unknown } | undefined;
  const id =
    rpc && typeof rpc === 'object' && (typeof rpc.id === 'string' || typeof rpc.id === 'number')
      ? rpc.id
      : null;
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: {
      code: rpcCode(status),
      message: typeof message === 'string' ? message : 'error',
      data: { status, ...(body as Record<string, unknown>) },
    },
  });
}

/** Route option: this route's error answers are JSON-RPC errors. */
const onSend = async (request: FastifyRequest, reply: FastifyReply, payload: unknown) =>
  reply.statusCode >= 400 ? asJsonRpcError(request, reply.statusCode, payload) : payload;

/**
 * Register POST/GET/DELETE /mcp. `innerToken`: the app's inner-request token (auth.ts);
 * `rateLimiter`: the `/v1` limiter (the charge is made here, not by the guard).
 */
export function mcpRoutes(app: App, innerToken: string, rateLimiter: RateLimiter): void {
  /** Count a message that asks for work; check (without counting) one that sets up. */
  const charge = async (request: FastifyRequest, reply: FastifyReply, free: boolean) => {
    const auth = requireAuth(request);
    const id = `key:${auth.keyId}`;
    const limit = auth.limits.requestsPerMinute;
    if (!free) return enforceRateLimit(rateLimiter, reply, id, limit);
    const r = await rateLimiter.peek(id, limit);
    reply.header('X-RateLimit-Limit', String(r.limit));
    reply.header('X-RateLimit-Remaining', String(r.remaining));
    if (!r.allowed) {
      throw new ApiError(
        429,
        `rate limit of ${r.limit} requests per minute exceeded: retry in ${r.retryAfterSeconds} s`,
        'rate_limited',
        undefined,
        {},
        { 'Retry-After': String(r.retryAfterSeconds) },
      );
    }
  };

  app.post(
    '/mcp',
    { schema: { hide: true, body: T.Unknown() }, onSend },
    async (request, reply) => {
      const body: unknown = request.body;
      if (Array.isArray(body)) {
        throw new ApiError(
          400,
          'JSON-RPC batches are not accepted on /mcp: send one message per request',
        );
      }
      if (typeof body !== 'object' || body === null) {
        throw new ApiError(400, 'the body must be one JSON-RPC message (a JSON object)');
      }
      const auth = requireAuth(request);
      await charge(request, reply, isSetUp((body as { method?: unknown }).method));
      const api = injectBackend(
        app as unknown as FastifyInstance,
        authorizationHeaders(request.raw.rawHeaders),
        request.ip,
        innerToken,
      );
      // A read-only key is shown the read-only tools only (the API refuses the others anyway).
      const server = createMcpServer(api, undefined, { readOnly: auth.scope === 'read' });
      const transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: undefined,
        enableJsonResponse: true,
      });
      // The transport writes the answer itself; the headers set so far (X-Request-Id, the
      // rate-limit headers) go with it.
      reply.hijack();
      for (const [name, value] of Object.entries(reply.getHeaders())) {
        if (value !== undefined) reply.raw.setHeader(name, value as string | number | string[]);
      }
      reply.raw.once('close', () => {
        void transport.close();
        void server.close();
      });
      await server.connect(transport);
      await transport.handleRequest(request.raw, reply.raw, body);
    },
  );
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/mcp',
      schema: { hide: true },
      onSend,
      handler: async (request, reply) => {
        await charge(request, reply, true);
        return reply
          .code(405)
          .header('Allow', 'POST')
          .send({ error: 'this MCP endpoint is stateless: POST one JSON-RPC message per request' });
      },
    });
  }
}
