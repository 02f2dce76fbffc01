/**
 * The MCP server (Model Context Protocol, the official TypeScript SDK): tronwatch's API as tools
 * an agent can call, over stdio (`tronwatch mcp`, src/main.ts) or streamable HTTP (`POST /mcp`,
 * src/mcp/route.ts). Issue 20 item 3.
 *
 * Tools (every one but the two local ones is one `/v1` request through an ApiBackend, so its rules,
 * errors, scopes and rate limits are the API's; `readOnlyHint` marks those a read-only key may use):
 *   validate_address          local: is this a TRON address, both spellings (src/tron/address.ts)
 *   create_watch              POST   /v1/watches (the secret is in this answer only)
 *   list_watches              GET    /v1/watches
 *   update_watch              PATCH  /v1/watches/{id} (webhook_url, label)
 *   rotate_watch_secret       POST   /v1/watches/{id}/rotate-secret (the new secret, once)
 *   get_watch_health          GET    /v1/watches/{id}/health
 *   pause_watch               POST   /v1/watches/{id}/pause
 *   resume_watch              POST   /v1/watches/{id}/resume
 *   delete_watch              DELETE /v1/watches/{id}
 *   list_events               GET    /v1/events (with scanned_through); a watch_id that is not one
 *                             of the caller's watches is a 404, as for every other watch tool
 *   list_dead_letters         GET    /v1/events, pages of it: the events whose delivery is DEAD
 *   get_event                 GET    /v1/events/{event_id} (its delivery chains and attempts)
 *   redeliver_event           POST   /v1/events/{event_id}/redeliver
 *   create_endpoint           POST   /v1/endpoints (one URL and secret for many watches; the secret once)
 *   list_endpoints            GET    /v1/endpoints (with each one's health)
 *   update_endpoint           PATCH  /v1/endpoints/{id} (url, label, enabled, pace)
 *   rotate_endpoint_secret    POST   /v1/endpoints/{id}/rotate-secret (the new secret, once)
 *   redeliver_endpoint        POST   /v1/endpoints/{id}/redeliver (its dead letters)
 *   delete_endpoint           DELETE /v1/endpoints/{id}
 *   create_watches            POST   /v1/watches/batch (up to 1,000, each item its own result)
 *   act_on_watches            POST   /v1/watches/batch/{pause,resume,delete} (ids or a label)
 *   get_status                GET    /v1/status
 *   explain_transaction       GET    /v1/watches/{id}/transactions/{tx_id}
 *   verify_webhook_signature  local: X-Signature and the Standard Webhooks headers of a delivery
 *
 * A tool's result: the API's JSON answer as text and as `structuredContent`, which each tool's
 * `outputSchema` describes (the members an agent relies on; answers may carry more).
 * An API error is a tool error (`isError: true`) whose text is `{ status, error, code?, details? }`:
 * the contract's error body with its HTTP status. The service unreachable is a tool error too,
 * naming the URL.
 */
import { timingSafeEqual } from 'node:crypto';
import { McpServer, type RegisteredTool } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import { signBody } from '../delivery/payload.js';
import { verifyStandardWebhook } from '../delivery/standard-webhooks.js';
import { EXPLAIN_REASONS } from '../ingest/explain.js';
import { InvalidAddressError, parseAddress, USDT_CONTRACT_BASE58 } from '../tron/address.js';
import type { ApiAnswer, ApiBackend, ApiMethod } from './backend.js';

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

/** A tronwatch webhook secret: `whsec_` and the base64 of 32 random bytes (newWebhookSecret). */
const WEBHOOK_SECRET_RE = /^whsec_[A-Za-z0-9+/]{43}=$/;

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
 *   one scheme present and every present scheme valid. A secret not of tronwatch's form
 *   (`whsec_` + base64 of 32 bytes) checks nothing: `bad_secret` and an `error` saying so (never
 *   a verdict about the timestamp or the signature, which it cannot support).
 */
export function verifyWebhookSignature(
  body: string,
  headers: Readonly<Record<string, string | readonly string[] | undefined>>,
  secret: string,
  nowSeconds: number,
): {
  valid: boolean;
  x_signature: 'valid' | 'invalid' | 'absent' | 'not_checked';
  standard_webhooks: 'valid' | 'absent' | string;
  error?: string;
} {
  const lower: Record<string, string> = {};
  for (const [k, v] of Object.entries(headers)) {
    const value = typeof v === 'string' ? v : v?.[0];
    if (value !== undefined) lower[k.toLowerCase()] = value;
  }
  if (!WEBHOOK_SECRET_RE.test(secret.trim())) {
    return {
      valid: false,
      x_signature: 'not_checked',
      standard_webhooks: 'bad_secret',
      error:
        'the secret is not a tronwatch webhook secret: whsec_ followed by the base64 of 32 bytes, as create_watch or rotate_watch_secret returned it',
    };
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

/** The members of a Watch an agent relies on (GET /v1/watches; the answers carry more). */
const watchOut = {
  id: z.string(),
  address: z.string(),
  asset_filter: z.enum(['USDT', 'TRX', 'ALL']),
  direction: z.enum(['incoming', 'outgoing', 'both']),
  channel: z.enum(['webhook', 'telegram']),
  webhook_url: z.string().nullable(),
  label: z.string().nullable(),
  status: z.enum(['ACTIVE', 'PAUSED']),
};
const eventOut = z.looseObject({
  event_id: z.string(),
  tx_id: z.string(),
  event_index: z.number(),
  block_number: z.number(),
  asset: z.enum(['USDT', 'TRX']),
  direction: z.enum(['incoming', 'outgoing']),
  from: z.string(),
  to: z.string(),
  amount: z.string(),
  amount_raw: z.string(),
  watch_id: z.string(),
});
const deliveryOut = z
  .looseObject({ status: z.enum(['PENDING', 'DELIVERED', 'DEAD']), attempts: z.number() })
  .nullable();
const scannedOut = z.looseObject({ block_number: z.number() }).nullable();
const pageOut = z.looseObject({
  data: z.array(eventOut.extend({ delivery: deliveryOut })),
  next_before: z.string().nullable(),
  scanned_through: scannedOut,
});

/** A well-formed watch id (`wh_` and a time-sortable body): others name no watch. */
const WATCH_ID_RE = /^wh_[0-9a-hjkmnp-tv-z]{26}$/;

/** An API answer rather than the tool error of an unreachable service. */
const isAnswer = (r: ApiAnswer | CallToolResult): r is ApiAnswer => !('content' in r);

/** The 404 the API gives for a watch that is not the caller's. */
const watchNotFound = (): CallToolResult => ({
  isError: true,
  content: [{ type: 'text', text: json({ status: 404, error: 'watch not found' }) }],
});

/**
 * A new MCP server whose tools act through `api` (module doc). One per stdio process, one per
 * `/mcp` request (stateless).
 * @param now clock of verify_webhook_signature, unix seconds (tests pass their own).
 * @param opts.readOnly only the read-only tools (`readOnlyHint`), for a read-only key: the others
 *   would be refused by the API anyway (403 read_only_key).
 */
export function createMcpServer(
  api: ApiBackend,
  now: () => number = () => Date.now() / 1000,
  opts: { readOnly?: boolean } = {},
): McpServer {
  /** Tools with their readOnlyHint: a read-only key's server keeps only the read-only ones. */
  const tracked: RegisteredTool[] = [];
  const track = (t: RegisteredTool) => {
    tracked.push(t);
    return t;
  };
  const server = new McpServer(MCP_SERVER_INFO, {
    instructions:
      'tronwatch watches TRON mainnet addresses for confirmed (solidified) USDT (TRC-20) and TRX transfers and notifies by signed webhook or Telegram. Amounts are decimal strings; amount_raw is in smallest units (10^-6). Credit a deposit only from an event (transfer.confirmed); to say a transfer did NOT happen up to a block, use scanned_through.',
  });
  const request = async (
    method: ApiMethod,
    path: string,
    body?: unknown,
  ): Promise<ApiAnswer | CallToolResult> => {
    try {
      return await api.request(method, path, body);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      return {
        isError: true,
        content: [{ type: 'text', text: json({ error: message }) }],
      };
    }
  };
  const call = async (method: ApiMethod, path: string, body?: unknown) => {
    const r = await request(method, path, body);
    return isAnswer(r) ? toolResult(r) : r;
  };
  /** 404 unless `id` is one of the caller's watches (GET /v1/watches); undefined when it is. */
  const ownWatch = async (id: string): Promise<CallToolResult | undefined> => {
    if (!WATCH_ID_RE.test(id)) return watchNotFound();
    const r = await request('GET', '/v1/watches');
    if (!isAnswer(r)) return r;
    if (r.status !== 200) return toolResult(r);
    const list = (r.body as { data?: Array<{ id?: unknown }> } | null)?.data ?? [];
    return list.some((w) => w.id === id) ? undefined : watchNotFound();
  };

  track(
    server.registerTool(
      'validate_address',
      {
        title: 'Validate a TRON address',
        description:
          'Whether a string is a valid TRON mainnet address (base58 `T…` with its checksum, or 41-prefixed hex), and both spellings. Local: no request to the service.',
        inputSchema: { address: z.string().describe('base58 (`T…`) or hex (`41…`)') },
        outputSchema: {
          valid: z.boolean(),
          base58: z.string().optional(),
          hex: z.string().optional(),
          is_usdt_contract: z.boolean().optional(),
          error: z.string().optional(),
        },
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
    ),
  );

  track(
    server.registerTool(
      'create_watch',
      {
        title: 'Create a watch',
        description:
          'Watch an address for confirmed USDT and/or TRX transfers (POST /v1/watches). Give webhook_url (HTTPS, public) or telegram: true. Matches only blocks after its creation. Errors as the API: 400 (details per field, an unknown member too), 402 quota_exceeded, 409 duplicate. The webhook secret (whsec_…) is in this answer only: keep it to verify signatures.',
        // Loose: a member the API does not know reaches it and is refused there (400), never dropped.
        inputSchema: z.looseObject({
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
          label: z
            .string()
            .nullable()
            .optional()
            .describe('Your name for the watch, at most 100 characters.'),
          endpoint_id: z
            .string()
            .optional()
            .describe(
              'Deliver to this endpoint of yours (`ep_…`, create_endpoint) instead of a webhook_url: signed with its secret.',
            ),
          metadata: z
            .record(z.string(), z.string())
            .nullable()
            .optional()
            .describe(
              'Your reference for the watch (customer, order, invoice): string values, at most 20 keys; copied into every event of the watch.',
            ),
        }),
        outputSchema: z.looseObject({
          ...watchOut,
          secret: z.string().optional().describe('Webhook watches: shown this once.'),
        }),
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
      },
      async (args) => call('POST', '/v1/watches', args),
    ),
  );

  track(
    server.registerTool(
      'list_watches',
      {
        title: 'List watches',
        description: 'Your watches, newest first (GET /v1/watches). Never includes secrets.',
        outputSchema: { data: z.array(z.looseObject(watchOut)) },
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async () => call('GET', '/v1/watches'),
    ),
  );

  track(
    server.registerTool(
      'update_watch',
      {
        title: 'Update a watch',
        description:
          "Change a watch's webhook_url (checked as at creation; the secret stays) or label (null or empty removes it) (PATCH /v1/watches/{id}). 404 when it is not yours.",
        inputSchema: z.looseObject({
          watch_id: watchId,
          webhook_url: z.string().optional().describe('New HTTPS target (webhook watches).'),
          label: z.string().nullable().optional().describe('New label; null removes it.'),
        }),
        outputSchema: z.looseObject(watchOut),
        annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
      },
      async ({ watch_id, ...changes }) => call('PATCH', `/v1/watches/${seg(watch_id)}`, changes),
    ),
  );

  track(
    server.registerTool(
      'rotate_watch_secret',
      {
        title: "Rotate a watch's webhook secret",
        description:
          'Issue a new secret for a webhook watch (POST /v1/watches/{id}/rotate-secret): shown in this answer only. Until previous_secret_expires_at (grace_period_seconds, default 86400, 0 = at once) deliveries are signed with both the new and the replaced secret.',
        inputSchema: {
          watch_id: watchId,
          grace_period_seconds: z
            .number()
            .int()
            .optional()
            .describe('0 to 604800 seconds; default 86400.'),
        },
        outputSchema: z.looseObject({
          ...watchOut,
          secret: z.string(),
          previous_secret_expires_at: z.string().nullable(),
        }),
        annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
      async ({ watch_id, grace_period_seconds }) =>
        call(
          'POST',
          `/v1/watches/${seg(watch_id)}/rotate-secret`,
          grace_period_seconds === undefined ? {} : { grace_period_seconds },
        ),
    ),
  );

  track(
    server.registerTool(
      'get_watch_health',
      {
        title: "A webhook watch's endpoint health",
        description:
          'Delivery attempts to the watch’s endpoint over the last hour, day or week in buckets (attempts, successes, success rate, p50/p95 latency) and its health summary (GET /v1/watches/{id}/health).',
        inputSchema: {
          watch_id: watchId,
          window: z.enum(['hour', 'day', 'week']).optional().describe('Default day.'),
        },
        outputSchema: z.looseObject({ watch: z.looseObject({ id: z.string() }) }),
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async ({ watch_id, window }) =>
        call('GET', `/v1/watches/${seg(watch_id)}/health${query({ window })}`),
    ),
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
    track(
      server.registerTool(
        name,
        {
          title: action === 'pause' ? 'Pause a watch' : 'Resume a watch',
          description,
          inputSchema: { watch_id: watchId },
          outputSchema: z.looseObject(watchOut),
          annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
        },
        async ({ watch_id }) => call('POST', `/v1/watches/${seg(watch_id)}/${action}`),
      ),
    );
  }

  track(
    server.registerTool(
      'delete_watch',
      {
        title: 'Delete a watch',
        description:
          'Delete a watch (DELETE /v1/watches/{id}): it stops matching at once; its events and pending deliveries are kept. 404 when it is not yours or already deleted.',
        inputSchema: { watch_id: watchId },
        outputSchema: { deleted: z.boolean(), watch_id: z.string() },
        annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
      async ({ watch_id }) => {
        const r = await call('DELETE', `/v1/watches/${seg(watch_id)}`);
        if (r.isError) return r;
        return localResult({ deleted: true, watch_id });
      },
    ),
  );

  track(
    server.registerTool(
      'list_events',
      {
        title: 'List events',
        description:
          'Matched transfers with their delivery state, newest first (GET /v1/events). `scanned_through` says how far the chain is scanned: every matching transfer in a block up to it is listed. Page back with before = next_before. A watch_id that is not one of yours: 404.',
        inputSchema: {
          limit: z.number().int().optional().describe('1 to 200, default 50.'),
          before: z.string().optional().describe('Exclusive upper bound: a previous next_before.'),
          since: z.string().optional().describe('Inclusive lower bound, RFC 3339 date-time.'),
          watch_id: z.string().optional().describe('Only this watch’s events.'),
        },
        outputSchema: pageOut,
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async (args) => {
        if (args.watch_id !== undefined) {
          const missing = await ownWatch(args.watch_id);
          if (missing) return missing;
        }
        return call('GET', `/v1/events${query(args)}`);
      },
    ),
  );

  track(
    server.registerTool(
      'list_dead_letters',
      {
        title: 'List dead letters',
        description:
          'Events whose delivery gave up (DEAD after its six attempts), newest first: reads up to `scan` events of GET /v1/events (default 1000) and keeps the DEAD ones. Continue with before = next_before while it is not null. Redeliver one with redeliver_event.',
        inputSchema: {
          watch_id: z.string().optional().describe('Only this watch’s events.'),
          before: z.string().optional().describe('Start below this next_before.'),
          scan: z
            .number()
            .int()
            .min(1)
            .max(5000)
            .optional()
            .describe('Events to read, default 1000.'),
        },
        outputSchema: z.looseObject({
          data: z.array(eventOut.extend({ delivery: deliveryOut })),
          scanned_events: z.number(),
          next_before: z.string().nullable(),
        }),
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async ({ watch_id, before, scan }) => {
        if (watch_id !== undefined) {
          const missing = await ownWatch(watch_id);
          if (missing) return missing;
        }
        const budget = scan ?? 1000;
        const dead: unknown[] = [];
        let scanned = 0;
        let cursor = before;
        while (scanned < budget) {
          const limit = Math.min(200, budget - scanned);
          const r = await request('GET', `/v1/events${query({ limit, before: cursor, watch_id })}`);
          if (!isAnswer(r)) return r;
          if (r.status !== 200) return toolResult(r);
          const page = r.body as {
            data: Array<{ delivery: { status: string } | null }>;
            next_before: string | null;
          };
          scanned += page.data.length;
          for (const e of page.data) if (e.delivery?.status === 'DEAD') dead.push(e);
          cursor = page.next_before ?? undefined;
          if (page.next_before === null || page.data.length === 0) {
            cursor = undefined;
            break;
          }
        }
        return localResult({ data: dead, scanned_events: scanned, next_before: cursor ?? null });
      },
    ),
  );

  track(
    server.registerTool(
      'get_event',
      {
        title: 'One event with its attempts',
        description:
          'An event, the exact body sent, and each delivery chain with every attempt: time, duration, HTTP status or error, headers sent (GET /v1/events/{event_id}).',
        inputSchema: { event_id: z.string().describe('Event id (`evt_…`).') },
        outputSchema: z.looseObject({
          event: eventOut,
          payload: z.string(),
          notifications: z.array(
            z.looseObject({
              status: z.enum(['PENDING', 'DELIVERED', 'DEAD']),
              attempt_log: z.array(z.looseObject({})),
            }),
          ),
        }),
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async ({ event_id }) => call('GET', `/v1/events/${seg(event_id)}`),
    ),
  );

  track(
    server.registerTool(
      'redeliver_event',
      {
        title: 'Redeliver an event',
        description:
          'Send an event again (POST /v1/events/{event_id}/redeliver): a new delivery of the same event_id and body, its attempts from 0, starting now. Receivers deduplicate on event_id.',
        inputSchema: { event_id: z.string().describe('Event id (`evt_…`).') },
        outputSchema: { notification_id: z.string() },
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: true },
      },
      async ({ event_id }) => call('POST', `/v1/events/${seg(event_id)}/redeliver`),
    ),
  );

  track(
    server.registerTool(
      'create_test_transfer',
      {
        title: 'Trigger a test deposit (test mode)',
        description:
          'Test keys (tw_test_…) only: create a synthetic transfer for a test watch (POST /v1/test/transfers) and deliver it through the real pipeline as a transfer.confirmed event with livemode false, network nile and a tx_id starting test_ (never money). A live key is refused (403 test_mode_only). Use it to check a receiver end to end: signature, deduplication, retries, reconciliation.',
        inputSchema: {
          watch_id: z.string().describe('A test watch of the caller (`wh_…`).'),
          amount: z
            .string()
            .describe('Decimal string, more than 0, at most 6 decimals (`"25.5"`).'),
          asset: z
            .enum(['USDT', 'TRX'])
            .optional()
            .describe("Default: the watch's asset_filter (USDT for ALL)."),
          direction: z
            .enum(['incoming', 'outgoing'])
            .optional()
            .describe('Default incoming (a deposit to the watched address).'),
          counterparty: z
            .string()
            .optional()
            .describe('The other side’s TRON address; default the zero address.'),
        },
        outputSchema: z.looseObject({
          event_id: z.string(),
          livemode: z.boolean(),
          network: z.string(),
          tx_id: z.string(),
        }),
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: true },
      },
      async (args) => call('POST', '/v1/test/transfers', args),
    ),
  );

  track(
    server.registerTool(
      'get_status',
      {
        title: 'Service status',
        description:
          'How far the chain is scanned (GET /v1/status): solidified head, scanned_through, lag, an ingest stall if any, node providers.',
        outputSchema: z.looseObject({ network: z.string(), scanned_through: scannedOut }),
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async () => call('GET', '/v1/status'),
    ),
  );

  track(
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
        outputSchema: z.looseObject({
          tx_id: z.string(),
          watch_id: z.string(),
          produced_event: z.boolean(),
          reason: z.enum(EXPLAIN_REASONS),
          message: z.string(),
          block_number: z.number().nullable(),
          solidified_head: z.number().nullable(),
          event_ids: z.array(z.string()),
          transfers: z.array(
            z.looseObject({
              asset: z.enum(['USDT', 'TRX']),
              event_index: z.number(),
              from: z.string(),
              to: z.string(),
              amount: z.string(),
              amount_raw: z.string(),
            }),
          ),
        }),
        annotations: { readOnlyHint: true, openWorldHint: true },
      },
      async ({ watch_id, tx_id }) =>
        call('GET', `/v1/watches/${seg(watch_id)}/transactions/${seg(tx_id)}`),
    ),
  );

  const endpointId = z.string().describe('Endpoint id (`ep_…`).');
  /** The members of an Endpoint an agent relies on (GET /v1/endpoints; the answers carry more). */
  const endpointOut = {
    id: z.string(),
    url: z.string(),
    label: z.string().nullable(),
    enabled: z.boolean(),
    rate_limit_per_second: z.number().nullable(),
    max_concurrency: z.number().nullable(),
    watch_count: z.number(),
    health: z.looseObject({
      consecutive_failures: z.number(),
      last_success_at: z.string().nullable(),
      last_failure_at: z.string().nullable(),
    }),
  };
  const pace = {
    rate_limit_per_second: z
      .number()
      .int()
      .nullable()
      .optional()
      .describe('At most this many deliveries to it per second (1 to 10000); null: none.'),
    max_concurrency: z
      .number()
      .int()
      .nullable()
      .optional()
      .describe('At most this many deliveries to it in flight (1 to 1000); null: none.'),
  };

  track(
    server.registerTool(
      'create_endpoint',
      {
        title: 'Create an endpoint',
        description:
          "One receiver (URL, secret, pace, on/off) for many watches (POST /v1/endpoints): a watch created with its endpoint_id delivers there, signed with the endpoint's secret. The secret (whsec_…) is in this answer only. 400 for a URL that is not public HTTPS.",
        inputSchema: z.looseObject({
          url: z.string().describe('HTTPS URL that receives the events of every watch on it.'),
          label: z.string().nullable().optional().describe('Your name for it.'),
          enabled: z.boolean().optional().describe('Default true; false holds its deliveries.'),
          ...pace,
        }),
        outputSchema: z.looseObject({ ...endpointOut, secret: z.string() }),
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
      },
      async (args) => call('POST', '/v1/endpoints', args),
    ),
  );

  track(
    server.registerTool(
      'list_endpoints',
      {
        title: 'List endpoints',
        description:
          'Your endpoints, newest first, each with its watch count and health (failures in a row, newest success and failure, an open alert) over all its watches (GET /v1/endpoints). Never includes secrets.',
        outputSchema: { data: z.array(z.looseObject(endpointOut)) },
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async () => call('GET', '/v1/endpoints'),
    ),
  );

  track(
    server.registerTool(
      'update_endpoint',
      {
        title: 'Update an endpoint',
        description:
          "Change an endpoint's url (checked as at creation), label, enabled (false holds its deliveries in the outbox; true sends them) or pace (PATCH /v1/endpoints/{id}). 404 when it is not yours.",
        inputSchema: z.looseObject({
          endpoint_id: endpointId,
          url: z.string().optional().describe('New HTTPS URL.'),
          label: z.string().nullable().optional().describe('New label; null removes it.'),
          enabled: z.boolean().optional(),
          ...pace,
        }),
        outputSchema: z.looseObject(endpointOut),
        annotations: { idempotentHint: true, destructiveHint: false, openWorldHint: false },
      },
      async ({ endpoint_id, ...changes }) =>
        call('PATCH', `/v1/endpoints/${seg(endpoint_id)}`, changes),
    ),
  );

  track(
    server.registerTool(
      'rotate_endpoint_secret',
      {
        title: "Rotate an endpoint's secret",
        description:
          'Issue a new secret for an endpoint (POST /v1/endpoints/{id}/rotate-secret): shown in this answer only. Until previous_secret_expires_at (grace_period_seconds, default 86400, 0 = at once) every delivery of its watches is signed with both secrets.',
        inputSchema: {
          endpoint_id: endpointId,
          grace_period_seconds: z
            .number()
            .int()
            .optional()
            .describe('0 to 604800 seconds; default 86400.'),
        },
        outputSchema: z.looseObject({
          ...endpointOut,
          secret: z.string(),
          previous_secret_expires_at: z.string().nullable(),
        }),
        annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
      async ({ endpoint_id, grace_period_seconds }) =>
        call(
          'POST',
          `/v1/endpoints/${seg(endpoint_id)}/rotate-secret`,
          grace_period_seconds === undefined ? {} : { grace_period_seconds },
        ),
    ),
  );

  track(
    server.registerTool(
      'redeliver_endpoint',
      {
        title: "Redeliver an endpoint's dead letters",
        description:
          'Send again every event of a watch on this endpoint whose delivery went DEAD (POST /v1/endpoints/{id}/redeliver): same event_id and body, attempts from 0; at most 10,000 per call. Use it once the receiver is fixed. 404 when it is not yours.',
        inputSchema: { endpoint_id: endpointId },
        outputSchema: { redelivered: z.number() },
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
      },
      async ({ endpoint_id }) => call('POST', `/v1/endpoints/${seg(endpoint_id)}/redeliver`),
    ),
  );

  track(
    server.registerTool(
      'delete_endpoint',
      {
        title: 'Delete an endpoint',
        description:
          'Delete an endpoint no watch targets any more (DELETE /v1/endpoints/{id}). 409 endpoint_watches_active while watches (active or paused) target it; 404 when it is not yours.',
        inputSchema: { endpoint_id: endpointId },
        outputSchema: { deleted: z.boolean(), endpoint_id: z.string() },
        annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
      async ({ endpoint_id }) => {
        const r = await call('DELETE', `/v1/endpoints/${seg(endpoint_id)}`);
        if (r.isError) return r;
        return localResult({ deleted: true, endpoint_id });
      },
    ),
  );

  track(
    server.registerTool(
      'create_watches',
      {
        title: 'Create watches in bulk',
        description:
          'Create 1 to 1,000 watches in one call (POST /v1/watches/batch), each item a create_watch body (typically endpoint_id and metadata per deposit address). Each item gets its own result: status 201 and the watch, or the error it alone would have got (400, 402 quota_exceeded, 404 endpoint, 409 duplicate, 429 for it and every later item); an invalid item never stops the others.',
        inputSchema: {
          items: z
            .array(z.looseObject({}))
            .min(1)
            .max(1_000)
            .describe('create_watch bodies (address, asset_filter, one target, …).'),
        },
        outputSchema: z.looseObject({
          created: z.number(),
          failed: z.number(),
          results: z.array(z.looseObject({ index: z.number(), status: z.number() })),
        }),
        annotations: { destructiveHint: false, idempotentHint: false, openWorldHint: false },
      },
      async ({ items }) => call('POST', '/v1/watches/batch', { items }),
    ),
  );

  track(
    server.registerTool(
      'act_on_watches',
      {
        title: 'Pause, resume or delete watches in bulk',
        description:
          'Pause, resume or delete many watches at once (POST /v1/watches/batch/{action}): give ids (1 to 1,000) or a label (every watch carrying it). Each watch gets its own result (404 when not yours, 402 quota_exceeded on resume).',
        inputSchema: z.looseObject({
          action: z.enum(['pause', 'resume', 'delete']),
          ids: z.array(z.string()).optional().describe('Watch ids (`wh_…`).'),
          label: z.string().optional().describe('Or: every watch with exactly this label.'),
        }),
        outputSchema: z.looseObject({
          succeeded: z.number(),
          failed: z.number(),
          results: z.array(z.looseObject({ id: z.string(), status: z.number() })),
        }),
        annotations: { destructiveHint: true, idempotentHint: false, openWorldHint: false },
      },
      async ({ action, ...selection }) => call('POST', `/v1/watches/batch/${action}`, selection),
    ),
  );

  track(
    server.registerTool(
      'verify_webhook_signature',
      {
        title: 'Verify a webhook signature',
        description:
          'Check a received delivery against its watch secret: X-Signature (hex HMAC-SHA256 of the body keyed by the whole whsec_ string) and the Standard Webhooks headers (webhook-id, webhook-timestamp within 5 minutes, webhook-signature). Give the body exactly as received. A secret not of the form whsec_<base64 of 32 bytes> is reported as bad_secret. Local: the secret is not sent anywhere.',
        inputSchema: {
          body: z.string().describe('The raw request body, exactly as received.'),
          headers: z
            .record(z.string(), z.string())
            .describe('The request headers (X-Signature and/or webhook-*); any case.'),
          secret: z.string().describe('The watch secret, whsec_….'),
        },
        outputSchema: {
          valid: z.boolean(),
          x_signature: z.enum(['valid', 'invalid', 'absent', 'not_checked']),
          standard_webhooks: z.string(),
          error: z.string().optional(),
        },
        annotations: { readOnlyHint: true, openWorldHint: false },
      },
      async ({ body, headers, secret }) =>
        localResult(verifyWebhookSignature(body, headers, secret, now())),
    ),
  );

  if (opts.readOnly) {
    for (const t of tracked) if (t.annotations?.readOnlyHint !== true) t.remove();
  }
  return server;
}
