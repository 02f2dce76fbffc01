/**
 * `POST /mcp`: the MCP server (src/mcp/tools.ts) over streamable HTTP, on the API's port.
 *
 * - Guarded like `/v1` (src/api/auth.ts isV1): `Authorization: Bearer tw_live_…`, the key's rate
 *   limit per HTTP request, X-RateLimit-* headers, the same 401/403/429 bodies.
 * - Stateless (the SDK's `sessionIdGenerator: undefined`): a new server and transport per request,
 *   answers as JSON (`enableJsonResponse`), no session id; any replica can serve any request.
 *   `GET /mcp` (a server-to-client stream) and `DELETE /mcp` (end a session) have nothing to serve:
 *   405 with `Allow: POST`.
 * - One JSON-RPC message per request: a batch is refused (400), so each tool call is one counted
 *   request, like one `/v1` call.
 * - Each tool's `/v1` request is injected in process with the caller's key (src/mcp/backend.ts).
 * Hidden from the OpenAPI document (JSON-RPC, not a REST operation); docs/api.md describes it.
 */
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { Type as T } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { authorizationHeaders, requireAuth } from '../api/auth.js';
import type { App } from '../api/types.js';
import { ApiError } from '../common/errors.js';
import { injectBackend } from './backend.js';
import { createMcpServer } from './tools.js';

/** Register POST/GET/DELETE /mcp. `innerToken`: the app's inner-request token (auth.ts). */
export function mcpRoutes(app: App, innerToken: string): void {
  app.post('/mcp', { schema: { hide: true, body: T.Unknown() } }, async (request, reply) => {
    requireAuth(request);
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
    const api = injectBackend(
      app as unknown as FastifyInstance,
      authorizationHeaders(request.raw.rawHeaders),
      request.ip,
      innerToken,
    );
    const server = createMcpServer(api);
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
  });
  for (const method of ['GET', 'DELETE'] as const) {
    app.route({
      method,
      url: '/mcp',
      schema: { hide: true },
      handler: async (request, reply) => {
        requireAuth(request);
        return reply
          .code(405)
          .header('Allow', 'POST')
          .send({ error: 'this MCP endpoint is stateless: POST one JSON-RPC message per request' });
      },
    });
  }
}
