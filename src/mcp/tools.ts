/**
 * The MCP server (Model Context Protocol, the official TypeScript SDK): tronwatch's API as tools
 * an agent can call, over stdio (`tronwatch mcp`, src/main.ts) or streamable HTTP (`POST /mcp`,
 * src/mcp/route.ts). Issue 20 item 3.
 *
 * Tools (every one but the two local ones is one `/v1` request through an ApiBackend, so its rules,
 * errors, scopes and rate limits are the API's):
 *   validate_address          local: is this a TRON address, both spellings (src/tron/address.ts)
 *   create_watch              POST   /v1/watches (the secret is in this answer only)
 *   list_watches              GET    /v1/watches
 *   pause_watch               POST   /v1/watches/{id}/pause
 *   resume_watch              POST   /v1/watches/{id}/resume
 *   delete_watch              DELETE /v1/watches/{id}
 *   list_events               GET    /v1/events (with scanned_through)
 *   get_event                 GET    /v1/events/{event_id} (its delivery chains and attempts)
 *   get_status                GET    /v1/status
 *   explain_transaction       GET    /v1/watches/{id}/transactions/{tx_id}
 *   verify_webhook_signature  local: X-Signature and the Standard Webhooks headers of a delivery
 *
 * A tool's result: the API's JSON answer as text (and as `structuredContent` when it is an object).
 * An API error is a tool error (`isError: true`) whose text is `{ status, error, code?, details? }`:
 * the contract's error body with its HTTP status. The service unreachable is a tool error too.
 */
import { timingSafeEqual } from 'node:crypto';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { signBody } from '../delivery/payload.js';
import { verifyStandardWebhook } from '../delivery/standard-webhooks.js';
import { InvalidAddressError, parseAddress, USDT_CONTRACT_BASE58 } from '../tron/address.js';
import type { ApiAnswer, ApiBackend } from './backend.js';

/** The server's name and version as MCP `initialize` reports them. */
export const MCP_SERVER_INFO = { name: 'tronwatch', version: '0.1.0' } as const;

function json(value: unknown): string {
  return JSON.stringify(value, null, 2);
}

/** A tool result from one API answer (module doc). */
export function toolResult(answer: ApiAnswer): CallToolResult {
  const ok = answer.status >= 200 && answer.status < 300;
  if (!ok) {
    const body =
      typeof answer.body === 'object' && answer.body !== null && !Array.isArray(answer.body)
        ? answer.body
        : { error: String(answer.body) };
    const error = { status: answer.status, ...body };
    return { isError: true, content: [{ type: 'text', text: json(error) }] };
  }
  const body = answer.body ?? { ok: true, status: answer.status };
  return {
    content: [{ type: 'text', text: json(body) }],
    ...(typeof body === 'object' && !Array.isArray(body)
      ? { structuredContent: body as Record<string, unknown> }
      : {}),
  };
}

function localResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: json(value) }], structuredContent: value };
}

/** `encodeURIComponent` for a path segment. */
const seg = (s: string) => encodeURIComponent(s);

/** Query string of the defined members. */
function query(params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) q.set(k, String(v));
  const s = q.toString();
  return s === '' ? '' : `?${s}`;
}

/**
 * Verify a webhook delivery's signatures (the schemes src/delivery/ sends, docs/api.md
 * "Webhook deliveries"): `X-Signature` = lowercase hex HMAC-SHA256 of the body keyed by the whole
 * `whsec_…` string; Standard Webhooks `webhook-signature` over `{id}.{timestamp}.{body}` keyed by
 * the base64 after `whsec_`, with the timestamp within 5 minutes of `nowSeconds`.
 * @param headers any case; arrays take their first value.
 * @returns each scheme's verdict (`absent` when its headers were not given) and `valid`: at least
 *   one scheme present and every present scheme valid.
 */
export function verifyWebhookSignature(
  body: string,
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  secret: string,
  nowSeconds: number,
): {
  valid: boolean;
  x_signature: 'valid' | 'invalid' | 'absent';
  standard_webhooks: 'valid' | 'absent' | string;
} {
  const lower: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    const value = typeof v === 'string' ? v : v?.[0];
    if (value !== undefined) lower[k.toLowerCase()] = value;
  }
  const bytes = Buffer.from(body, 'utf8');
  let x: 'valid' | 'invalid' | 'absent' = 'absent';
  const sent = lower['x-signature'];
  if (sent !== undefined) {
    const expected = Buffer.from(signBody(secret, bytes));
    const got = Buffer.from(sent.trim().toLowerCase());
    x = got.length === expected.length && timingSafeEqual(got, expected) ? 'valid' : 'invalid';
  }
  let std = 'absent';
  if (lower['webhook-signature'] !== undefined || lower['webhook-id'] !== undefined) {
    try {
      std = verifyStandardWebhook(secret, lower, bytes, nowSeconds) ?? 'valid';
    } catch {
      std = 'bad_secret';
    }
  }
  const present = [x, std].filter((v) => v !== 'absent');
  return {
    valid: present.length > 0 && present.every((v) => v === 'valid'),
    x_signature: x,
    standard_webhooks: std,
  };
}

const watchId = z.string().describe('Watch id (`wh_…`).');

/**
 * A new MCP server whose tools act through `api` (module doc). One per stdio process, one per
 * `/mcp` request (stateless).
 * @param now clock of verify_webhook_signature, unix seconds (tests pass their own).
 */
export function createMcpServer(
  api: ApiBackend,
  now: () => number = () => Date.now() / 1000,
): McpServer {
  const server = new McpServer(MCP_SERVER_INFO, {
    instructions:
      'tronwatch watches TRON mainnet addresses for confirmed (solidified) USDT (TRC-20) and TRX transfers and notifies by signed webhook or Telegram. Amounts are decimal strings; amount_raw is in smallest units (10^-6). Credit a deposit only from an event (transfer.confirmed); to say a transfer did NOT happen up to a block, use scanned_through.',
  });
  const call = async (
    method: 'GET' | 'POST' | 'DELETE',
    path: string,
    body?: unknown,
  ): Promise<CallToolResult> => {
    try {
      return toolResult(await api.request(method, path, body));
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return {
        isError: true,
        content: [{ type: 'text', text: json({ error: `tronwatch unreachable: ${message}` }) }],
      };
    }
  };

  server.registerTool(
    'validate_address',
    {
      title: 'Validate a TRON address',
      description:
        'Whether a string is a valid TRON mainnet address (base58 `T…` with its checksum, or 41-prefixed hex), and both spellings. Local: no request to the service.',
      inputSchema: { address: z.string().describe('base58 (`T…`) or hex (`41…`)') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ address }) => {
      try {
        const a = parseAddress(address.trim());
        return localResult({
          valid: true,
          base58: a.base58,
          hex: a.hex,
          is_usdt_contract: a.base58 === USDT_CONTRACT_BASE58,
        });
      } catch (err) {
        if (!(err instanceof InvalidAddressError)) throw err;
        return localResult({ valid: false, error: err.message });
      }
    },
  );

  server.registerTool(
    'create_watch',
    {
      title: 'Create a watch',
      description:
        'Watch an address for confirmed USDT and/or TRX transfers (POST /v1/watches). Give webhook_url (HTTPS, public) or telegram: true. Matches only blocks after its creation. Errors as the API: 400 (details per field), 402 quota_exceeded, 409 duplicate. The webhook secret (whsec_…) is in this answer only: keep it to verify signatures.',
      inputSchema: {
        address: z.string().describe('TRON address, base58 or 41-hex.'),
        asset_filter: z.enum(['USDT', 'TRX', 'ALL']).describe('Which asset to report.'),
        direction: z
          .enum(['incoming', 'outgoing', 'both'])
          .optional()
          .describe('Default incoming.'),
        webhook_url: z.string().optional().describe('HTTPS URL that receives the events.'),
        telegram: z
          .boolean()
          .optional()
          .describe('Notify the Telegram chat connected in the console instead of a webhook.'),
      },
      annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
    },
    async (args) => call('POST', '/v1/watches', args),
  );

  server.registerTool(
    'list_watches',
    {
      title: 'List watches',
      description: 'Your watches, newest first (GET /v1/watches). Never includes secrets.',
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => call('GET', '/v1/watches'),
  );

  for (const [name, action, description] of [
    [
      'pause_watch',
      'pause',
      'Pause a watch (POST /v1/watches/{id}/pause): it matches nothing and frees its quota slot; transfers made while paused are never reported.',
    ],
    [
      'resume_watch',
      'resume',
      'Resume a paused watch (POST /v1/watches/{id}/resume): it matches blocks from now on. 402 quota_exceeded when no slot is free.',
    ],
  ] as const) {
    server.registerTool(
      name,
      {
        title: action === 'pause' ? 'Pause a watch' : 'Resume a watch',
        description,
        inputSchema: { watch_id: watchId },
        annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
      },
      async ({ watch_id }) => call('POST', `/v1/watches/${seg(watch_id)}/${action}`),
    );
  }

  server.registerTool(
    'delete_watch',
    {
      title: 'Delete a watch',
      description:
        'Delete a watch (DELETE /v1/watches/{id}): it stops matching at once; its events and pending deliveries are kept. 404 when it is not yours or already deleted.',
      inputSchema: { watch_id: watchId },
      annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
    },
    async ({ watch_id }) => {
      const r = await call('DELETE', `/v1/watches/${seg(watch_id)}`);
      if (r.isError) return r;
      return localResult({ deleted: true, watch_id });
    },
  );

  server.registerTool(
    'list_events',
    {
      title: 'List events',
      description:
        'Matched transfers with their delivery state, newest first (GET /v1/events). `scanned_through` says how far the chain is scanned: every matching transfer in a block up to it is listed. Page back with before = next_before.',
      inputSchema: {
        limit: z.number().int().optional().describe('1 to 200, default 50.'),
        before: z.string().optional().describe('Exclusive upper bound: a previous next_before.'),
        since: z.string().optional().describe('Inclusive lower bound, RFC 3339 date-time.'),
        watch_id: z.string().optional().describe('Only this watch’s events.'),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async (args) => call('GET', `/v1/events${query(args)}`),
  );

  server.registerTool(
    'get_event',
    {
      title: 'One event with its attempts',
      description:
        'An event, the exact body sent, and each delivery chain with every attempt: time, duration, HTTP status or error, headers sent (GET /v1/events/{event_id}).',
      inputSchema: { event_id: z.string().describe('Event id (`evt_…`).') },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ event_id }) => call('GET', `/v1/events/${seg(event_id)}`),
  );

  server.registerTool(
    'get_status',
    {
      title: 'Service status',
      description:
        'How far the chain is scanned (GET /v1/status): solidified head, scanned_through, lag, an ingest stall if any, node providers.',
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async () => call('GET', '/v1/status'),
  );

  server.registerTool(
    'explain_transaction',
    {
      title: 'Explain a transaction for a watch',
      description:
        'Did this transaction produce an event for this watch, and if not why: not_found, unsolidified, failed, not_usdt_or_trx, address_not_involved, asset_filtered, direction_filtered, before_activation, watch_paused, not_scanned_yet, not_recorded (GET /v1/watches/{id}/transactions/{tx_id}; reads the block through the node as ingest does).',
      inputSchema: {
        watch_id: watchId,
        tx_id: z.string().describe('Transaction id, 64 hex characters.'),
      },
      annotations: { readOnlyHint: true, openWorldHint: true },
    },
    async ({ watch_id, tx_id }) =>
      call('GET', `/v1/watches/${seg(watch_id)}/transactions/${seg(tx_id)}`),
  );

  server.registerTool(
    'verify_webhook_signature',
    {
      title: 'Verify a webhook signature',
      description:
        'Check a received delivery against its watch secret: X-Signature (hex HMAC-SHA256 of the body keyed by the whole whsec_ string) and the Standard Webhooks headers (webhook-id, webhook-timestamp within 5 minutes, webhook-signature). Give the body exactly as received. Local: the secret is not sent anywhere.',
      inputSchema: {
        body: z.string().describe('The raw request body, exactly as received.'),
        headers: z
          .record(z.string(), z.string())
          .describe('The request headers (X-Signature and/or webhook-*); any case.'),
        secret: z.string().describe('The watch secret, whsec_….'),
      },
      annotations: { readOnlyHint: true, openWorldHint: false },
    },
    async ({ body, headers, secret }) =>
      localResult(verifyWebhookSignature(body, headers, secret, now())),
  );

  return server;
}
