/**
 * The console's endpoints (issue 30 item 4), on the same functions as /v1/endpoints
 * (src/api/routes/endpoints.ts `…Answer`): one rule set, the same answers and audit entries.
 *
 *   GET    /console/api/endpoints                → { data: (Endpoint & { day })[] } (day: last 24 h)
 *   GET    /console/api/endpoints/{id}           → EndpointPage: the endpoint, its hour/day/week
 *                                                    figures and its chart (?window=hour|day|week)
 *   GET    /console/api/endpoints/{id}/attempts  → { data: EndpointAttempt[] } its newest 50
 *   GET    /console/api/endpoints/{id}/watches   → { data: Watch[] } the live watches on it
 *   POST   /console/api/endpoints/{id}/test      → TestOutcome (a signed test event, never stored)
 *   POST   /console/api/endpoints/{id}/redeliver → { redelivered } (its dead letters)
 *   POST   /console/api/endpoints                → 201 EndpointCreated (the secret, once)
 *   PATCH  /console/api/endpoints/{id}           → Endpoint (url, label, enabled, pace)
 *   DELETE /console/api/endpoints/{id}           → 204 | 409 endpoint_watches_active
 *   POST   /console/api/endpoints/{id}/rotate-secret           → EndpointSecretRotated (once)
 *   POST   /console/api/endpoints/{id}/previous-secret/expire  → Endpoint
 *   POST   /console/api/endpoints/{id}/replay    → EndpointReplay (failed deliveries since a time)
 *   POST   /console/api/watches/batch            → WatchBatchResult (the CSV import)
 *
 * Reading needs the viewer role, changes the developer role (as watches). Below the developer
 * role an endpoint's or watch's URL comes with its query string masked (src/console/mask.ts).
 */
import { Type as T } from '@sinclair/typebox';
import {
  createEndpointAnswer,
  deleteEndpointAnswer,
  expirePreviousEndpointSecretAnswer,
  redeliverEndpointAnswer,
  replayEndpointAnswer,
  rotateEndpointSecretAnswer,
  updateEndpointAnswer,
} from '../../api/routes/endpoints.js';
import {
  BATCH_BODY_LIMIT_BYTES,
  CreateWatchBatchSchema,
  createWatchBatchAnswer,
} from '../../api/routes/watch-batch.js';
import { preventCoercion, StringEnum } from '../../api/schemas.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { sendTestEvent, TEST_SENDS_PER_MINUTE } from '../../delivery/test-event.js';
import { getEndpoint, listEndpoints } from '../../endpoints/endpoints.js';
import { endpointHealth } from '../../endpoints/health.js';
import {
  CreateEndpointSchema,
  endpointView,
  ReplayEndpointSchema,
  RotateEndpointSecretSchema,
  UpdateEndpointSchema,
} from '../../endpoints/schema.js';
import { type HealthWindowName, healthSeries, healthSummaries } from '../../watches/health.js';
import { watchView } from '../../watches/schema.js';
import { WATCH_COLUMNS, type WatchRow } from '../../watches/watches.js';
import { requireSession } from '../guard.js';
import { urlForRole } from '../mask.js';
import { IdParams } from '../schemas.js';

const hide = { hide: true } as const;
/** Most watches listed under one endpoint in the console (the page says when there are more). */
const WATCHES_SHOWN = 500;
/** Attempts listed on an endpoint's page (the newest). */
const ATTEMPTS_SHOWN = 50;

export function consoleEndpointRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/endpoints',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const rows = await listEndpoints(deps.db, ctx.accountId, ctx.network);
      const health = await endpointHealth(
        deps.db,
        rows.map((r) => r.id),
      );
      // `day`: the last day's figures; `health` (in endpointView): the streak and the alert.
      return {
        data: rows.map((e) => ({
          ...endpointView(e),
          url: urlForRole(e.url, ctx.role),
          day: health.get(e.id) ?? null,
        })),
      };
    },
  );

  // The endpoint's page (issue 40 item 1): the endpoint, its windows and its chart.
  app.get(
    '/console/api/endpoints/:id',
    {
      config: { consoleRole: 'viewer' },
      schema: {
        ...hide,
        params: IdParams,
        querystring: T.Object(
          { window: T.Optional(StringEnum(['hour', 'day', 'week'] as const)) },
          { additionalProperties: false },
        ),
      },
    },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const window = (request.query.window ?? 'day') as HealthWindowName;
      const ep = isId(id, 'ep') ? await getEndpoint(deps.db, ctx.accountId, ctx.network, id) : null;
      if (!ep) throw new ApiError(404, 'endpoint not found');
      const windows = await healthSummaries(deps.db, [id], 'endpoint_id');
      const series = await healthSeries(deps.db, id, window, 'endpoint_id');
      return {
        endpoint: { ...endpointView(ep), url: urlForRole(ep.url, ctx.role) },
        windows: windows.get(id),
        window,
        ...series,
      };
    },
  );

  // Its newest attempts, all watches together, as stored (time, duration, status or error).
  app.get(
    '/console/api/endpoints/:id/attempts',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const ep = isId(id, 'ep') ? await getEndpoint(deps.db, ctx.accountId, ctx.network, id) : null;
      if (!ep) throw new ApiError(404, 'endpoint not found');
      // The newest of its successes and of its failures (one range of each partial index,
      // migration 091), merged: whatever the number of its attempts.
      const pick = (ok: boolean) => `(SELECT a.* FROM attempts a
          WHERE a.endpoint_id = $1 AND a.error IS ${ok ? '' : 'NOT '}NULL AND NOT a.throttled
          ORDER BY a.started_at DESC LIMIT ${ATTEMPTS_SHOWN})`;
      const { rows } = await deps.db.query<{
        attempt: number;
        started_at: Date;
        duration_ms: number;
        http_status: number | null;
        error: string | null;
        error_class: string | null;
        event_id: string;
        watch_id: string | null;
        watch_label: string | null;
        address: string | null;
      }>(
        `SELECT a.attempt, a.started_at, a.duration_ms, a.http_status, a.error, a.error_class,
                n.event_id, a.watch_id, w.label AS watch_label, w.address
           FROM (${pick(true)} UNION ALL ${pick(false)}) AS a
           JOIN notifications n ON n.id = a.notification_id
           LEFT JOIN watches w ON w.id = a.watch_id
          ORDER BY a.started_at DESC, a.id DESC LIMIT ${ATTEMPTS_SHOWN}`,
        [id],
      );
      return {
        data: rows.map((r) => ({
          ...r,
          started_at: new Date(r.started_at).toISOString(),
        })),
      };
    },
  );

  // Send test event: a signed webhook.test through the newest watch on it (its address and
  // assets fill the body), to the endpoint's URL with the endpoint's secret; never stored.
  app.post(
    '/console/api/endpoints/:id/test',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const ep = isId(id, 'ep') ? await getEndpoint(deps.db, ctx.accountId, ctx.network, id) : null;
      if (!ep) throw new ApiError(404, 'endpoint not found');
      const { rows } = await deps.db.query<{ id: string }>(
        `SELECT id FROM watches WHERE endpoint_id = $1 AND account_id = $2 AND network = $3
            AND deleted_at IS NULL AND channel = 'webhook'
          ORDER BY created_at DESC, id DESC LIMIT 1`,
        [id, ctx.accountId, ctx.network],
      );
      const watchId = rows[0]?.id;
      if (!watchId) {
        throw new ApiError(
          409,
          'no watch delivers to this endpoint yet: a test event names one of its watches (its address); add a watch on it first',
        );
      }
      const limit = await deps.rateLimiter.hit(`test-send:${ctx.accountId}`, TEST_SENDS_PER_MINUTE);
      if (!limit.allowed) {
        throw new ApiError(
          429,
          `at most ${TEST_SENDS_PER_MINUTE} test deliveries a minute per account`,
          'rate_limited',
          undefined,
          {},
          { 'retry-after': String(limit.retryAfterSeconds) },
        );
      }
      const outcome = await sendTestEvent(deps, ctx.accountId, ctx.network, watchId);
      if (!outcome) throw new ApiError(404, 'endpoint not found');
      await recordAudit(deps.db, auditContextOf(request), {
        action: 'endpoint.test_sent',
        targetId: id,
        detail: {
          watch_id: watchId,
          ok: outcome.ok,
          http_status: outcome.http_status,
          error_class: outcome.error_class,
        },
      });
      return outcome;
    },
  );

  app.post(
    '/console/api/endpoints/:id/redeliver',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      return redeliverEndpointAnswer(deps, request, ctx.accountId, request.params.id);
    },
  );

  app.get(
    '/console/api/endpoints/:id/watches',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const ep = isId(id, 'ep') ? await getEndpoint(deps.db, ctx.accountId, ctx.network, id) : null;
      if (!ep) throw new ApiError(404, 'endpoint not found');
      const { rows } = await deps.db.query<WatchRow>(
        `SELECT ${WATCH_COLUMNS} FROM watches
          WHERE endpoint_id = $1 AND account_id = $2 AND deleted_at IS NULL
          ORDER BY created_at DESC, id DESC LIMIT $3`,
        [id, ctx.accountId, WATCHES_SHOWN],
      );
      return {
        data: rows.map((w) => ({
          ...watchView(w),
          webhook_url: urlForRole(w.webhook_url, ctx.role),
        })),
        total: ep.watch_count,
      };
    },
  );

  app.post(
    '/console/api/endpoints',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, body: CreateEndpointSchema },
      preValidation: async (request) => {
        preventCoercion(CreateEndpointSchema, request.body);
      },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      return reply
        .code(201)
        .send(await createEndpointAnswer(deps, request, ctx.accountId, request.body));
    },
  );

  app.patch(
    '/console/api/endpoints/:id',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: UpdateEndpointSchema },
      preValidation: async (request) => {
        preventCoercion(UpdateEndpointSchema, request.body);
      },
    },
    async (request) => {
      const ctx = requireSession(request);
      return updateEndpointAnswer(deps, request, ctx.accountId, request.params.id, request.body);
    },
  );

  app.delete(
    '/console/api/endpoints/:id',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      await deleteEndpointAnswer(deps, request, ctx.accountId, request.params.id);
      return reply.code(204).send();
    },
  );

  app.post(
    '/console/api/endpoints/:id/rotate-secret',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: T.Optional(RotateEndpointSecretSchema) },
    },
    async (request) => {
      const ctx = requireSession(request);
      return rotateEndpointSecretAnswer(
        deps,
        request,
        ctx.accountId,
        request.params.id,
        request.body?.grace_period_seconds,
      );
    },
  );

  app.post(
    '/console/api/endpoints/:id/previous-secret/expire',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      return expirePreviousEndpointSecretAnswer(deps, request, ctx.accountId, request.params.id);
    },
  );

  app.post(
    '/console/api/endpoints/:id/replay',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: ReplayEndpointSchema },
      preValidation: async (request) => {
        preventCoercion(ReplayEndpointSchema, request.body);
      },
    },
    async (request) => {
      const ctx = requireSession(request);
      return replayEndpointAnswer(
        deps,
        request,
        ctx.accountId,
        request.params.id,
        request.body.since,
      );
    },
  );

  // The CSV import: the page parses the file, shows the preview, then sends the rows as items.
  app.post(
    '/console/api/watches/batch',
    {
      config: { consoleRole: 'developer' },
      bodyLimit: BATCH_BODY_LIMIT_BYTES,
      schema: { ...hide, body: CreateWatchBatchSchema },
    },
    async (request) => {
      const ctx = requireSession(request);
      // A console session has no API rate window; the batch's own size bound applies.
      return createWatchBatchAnswer(deps, request, ctx.accountId, request.body.items, async () => ({
        allowed: true,
        retryAfterSeconds: 0,
      }));
    },
  );
}
