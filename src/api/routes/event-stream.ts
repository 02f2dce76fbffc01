/**
 * The stream `tronwatch listen` reads (issue 32 item 6): an account's new events as server-sent
 * events (the WHATWG "Server-sent events" format), each with the exact webhook request its
 * deliveries send, signed, so the CLI forwards it to a local receiver. The connection is
 * outbound from the developer's machine: no public URL is needed.
 *
 *   GET /v1/events/stream  (any key; its environment's events only)
 *     200 text/event-stream:
 *       `retry: 3000`, `: connected`, then `event: ready` / `data: {"network","livemode","cursor"}`;
 *       per new event `id: <created_at>` / `event: delivery` / `data: <StreamedDelivery JSON>`
 *       (src/events/stream.ts); a `: keep-alive` comment every 15 s; when the server ends the
 *       stream, `event: end` / `data: {"reason": "revoked_api_key" | "max_life" | "closing"}`.
 *     Header Last-Event-ID (or query `since`): resume after that instant (ISO 8601 UTC).
 *     400 bad `since`; 401; 429 rate_limited, or too_many_streams beyond STREAMS_PER_ACCOUNT.
 *
 * The key is read again at every poll: a revoked key's stream ends within POLL_MS. A stream
 * lives at most STREAM_MAX_MS (the CLI reconnects with Last-Event-ID).
 */
import { Type as T } from '@sinclair/typebox';
import { isLivemode } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { EventStream, streamStart } from '../../events/stream.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  RATE_LIMIT_HEADERS,
  RETRY_AFTER_HEADER,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';

/** How often a stream reads new events and re-checks its key, ms. */
export const POLL_MS = 1_000;
const KEEP_ALIVE_MS = 15_000;
/** A stream's longest life, ms: the client reconnects (Last-Event-ID) and is authenticated again. */
export const STREAM_MAX_MS = 30 * 60_000;
/**
 * Streams one account may hold open on one process at once, per environment: a developer's
 * `tronwatch listen` sessions (test keys) never take the live environment's streams.
 */
export const STREAMS_PER_ACCOUNT = 5;

/** ISO 8601 UTC instant as the stream writes it (and a few shorter forms a person may type). */
const INSTANT_RE = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,6})?Z$/;

/** `since`/Last-Event-ID as the stream's cursor form (microseconds), or undefined when invalid. */
function cursorOf(text: string): string | undefined {
  if (!INSTANT_RE.test(text) || Number.isNaN(Date.parse(text))) return undefined;
  const [sec, frac = ''] = text.slice(0, -1).split('.');
  return `${sec}.${frac.padEnd(6, '0')}Z`;
}

/** Register GET /v1/events/stream. */
export function eventStreamRoutes(app: App, deps: AppDeps): void {
  const open = new Map<string, Set<(reason: string) => void>>();

  app.addHook('preClose', async () => {
    for (const set of open.values()) for (const end of [...set]) end('closing');
  });

  app.get(
    '/v1/events/stream',
    {
      schema: {
        operationId: 'streamEvents',
        summary: 'Stream new events with their signed webhook requests (tronwatch listen)',
        description:
          'Server-sent events: each new event of the key’s environment (`event: delivery`) with the exact request its webhook deliveries send: `body` (the JSON text as signed) and `headers` (X-Signature with the watch’s or its endpoint’s secret, X-Event-Id, the Standard Webhooks headers, `Tronwatch-Test-Mode: true` for a test event). `tronwatch listen --forward-to <url>` reads it and POSTs each to a local receiver. Chat (Telegram) watches’ events are not streamed (nothing signs them). Resume with `Last-Event-ID` (or `since`): the `id` of the last message received. A revoked key’s stream ends (`event: end`). At most 5 streams per account and environment per server process (429 too_many_streams).',
        tags: ['events'],
        security: BEARER_SECURITY,
        querystring: T.Object({
          since: T.Optional(
            T.String({
              maxLength: 40,
              description:
                'Resume after this instant (ISO 8601 UTC, as in a message’s `id`); default now.',
            }),
          ),
        }),
        response: {
          ...commonV1Responses(),
          200: {
            description:
              'text/event-stream: `event: ready`, then one `event: delivery` per new event (data: `{event_id, watch_id, type, network, livemode, created_at, headers, body}`).',
            headers: { ...RATE_LIMIT_HEADERS },
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
          429: errorResponse(
            'rate_limited, or too_many_streams: this account’s streams of this environment are open.',
            RETRY_AFTER_HEADER,
          ),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const lastId = request.headers['last-event-id'];
      const since = typeof lastId === 'string' && lastId !== '' ? lastId : request.query.since;
      let cursor: string;
      if (since !== undefined) {
        const c = cursorOf(since);
        if (!c) {
          throw new ApiError(400, 'invalid query parameters', undefined, [
            {
              field: typeof lastId === 'string' && lastId !== '' ? 'Last-Event-ID' : 'since',
              message: 'must be an ISO 8601 UTC instant, e.g. 2026-11-28T09:00:00.000000Z',
            },
          ]);
        }
        cursor = c;
      } else {
        cursor = await streamStart(deps.db);
      }
      // Counted per account and environment (STREAMS_PER_ACCOUNT).
      const slot = `${auth.accountId}\u0000${auth.network}`;
      const mine = open.get(slot) ?? new Set();
      if (mine.size >= STREAMS_PER_ACCOUNT) {
        throw ApiError.coded(
          'too_many_streams',
          `this account has ${STREAMS_PER_ACCOUNT} event streams of this environment open on this server already`,
        );
      }
      const stream = new EventStream(deps.db, deps.secrets, auth.accountId, auth.network, cursor);

      reply.hijack();
      const res = reply.raw;
      const headers: Record<string, string> = {};
      // The rate-limit headers the /v1 guard set (every /v1 answer carries them).
      for (const [k, v] of Object.entries(reply.getHeaders())) {
        if (typeof v === 'string' || typeof v === 'number') headers[k] = String(v);
      }
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        connection: 'keep-alive',
        // nginx: pass each message on as it is written.
        'x-accel-buffering': 'no',
      });
      const ready = { network: auth.network, livemode: isLivemode(auth.network), cursor };
      res.write(`retry: 3000\n: connected\n\nevent: ready\ndata: ${JSON.stringify(ready)}\n\n`);

      let ended = false;
      let polling = false;
      const end = (reason?: string) => {
        if (ended) return;
        ended = true;
        clearInterval(poller);
        clearInterval(keepAlive);
        clearTimeout(maxLife);
        mine.delete(end);
        if (mine.size === 0) open.delete(slot);
        if (reason) res.write(`event: end\ndata: ${JSON.stringify({ reason })}\n\n`);
        res.end();
      };
      const tick = async () => {
        if (polling || ended) return;
        polling = true;
        try {
          const { rows } = await deps.db.query<{ ok: boolean }>(
            'SELECT revoked_at IS NULL AS ok FROM api_keys WHERE id = $1',
            [auth.keyId],
          );
          if (rows[0]?.ok !== true) {
            end('revoked_api_key');
            return;
          }
          for (const d of await stream.poll()) {
            if (ended) return;
            res.write(`id: ${d.created_at}\nevent: delivery\ndata: ${JSON.stringify(d)}\n\n`);
          }
        } catch (err) {
          request.log.warn({ err }, 'event stream: poll failed; polled again');
        } finally {
          polling = false;
        }
      };
      const poller = setInterval(() => void tick(), POLL_MS);
      const keepAlive = setInterval(() => res.write(': keep-alive\n\n'), KEEP_ALIVE_MS);
      const maxLife = setTimeout(() => end('max_life'), STREAM_MAX_MS);
      mine.add(end);
      open.set(slot, mine);
      request.raw.on('close', () => end());
      void tick();
    },
  );
}
