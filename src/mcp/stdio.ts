/**
 * `tronwatch mcp`: the MCP server (src/mcp/tools.ts) over stdio, for an agent that runs it as a
 * local process. It is a client of a running tronwatch: every tool is a request to
 * TRONWATCH_URL with TRONWATCH_API_KEY (src/mcp/backend.ts httpBackend). These two variables are
 * the client's, not the service's configuration (src/config.ts): the command opens no database
 * and no node connection. At start it checks that the service answers and accepts the key
 * (checkKey), and exits 2 with a message naming what is wrong otherwise. stdout carries the
 * protocol only; problems go to stderr.
 */
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { clientSettings } from '../common/client-settings.js';
import { type ApiBackend, httpBackend } from './backend.js';
import { createMcpServer } from './tools.js';

/**
 * Before serving: the service answers at `url` and accepts the key (GET /v1/status, one request
 * of the key's rate limit), so that a wrong setting stops the server at once with a message that
 * names it, rather than at the agent's first call.
 * @throws Error naming the URL (unreachable) or the key's refusal (its code, never the key).
 */
export async function checkKey(api: ApiBackend, url: string): Promise<void> {
  const r = await api.request('GET', '/v1/status');
  if (r.status >= 200 && r.status < 300) return;
  const body = (r.body ?? {}) as { error?: unknown; code?: unknown };
  const what = `${String(body.error ?? `HTTP ${r.status}`)}${body.code ? ` (${String(body.code)})` : ''}`;
  if (r.status === 401 || r.status === 403) {
    throw new Error(`TRONWATCH_API_KEY was refused by ${url}: ${what}`);
  }
  throw new Error(`${url} answered GET /v1/status with ${r.status}: ${what}`);
}

/**
 * Serve MCP on stdin/stdout until stdin closes. @returns when the transport closed.
 * @throws Error as clientSettings (src/common/client-settings.ts) and checkKey; ServiceUnreachableError (names the URL).
 */
export async function runStdioMcp(env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const settings = clientSettings(env);
  const api = httpBackend(settings.url, settings.apiKey);
  await checkKey(api, settings.url);
  const server = createMcpServer(api);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once('end', () => resolve());
  });
  await server.connect(transport);
  await closed;
  await server.close();
}
