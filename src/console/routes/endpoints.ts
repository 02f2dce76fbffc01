/**
 * The console's endpoints (issue 30 item 4), on the same functions as /v1/endpoints
 * (src/api/routes/endpoints.ts `…Answer`): one rule set, the same answers and audit entries.
 *
 *   GET    /console/api/endpoints                → { data: (Endpoint & { day })[] } (day: last 24 h)
 *   GET    /console/api/endpoints/{id}/watches   → { data: Watch[] } the live watches on it
 *   POST   /console/api/endpoints                → 201 EndpointCreated (the secret, once)
 *   PATCH  /console/api/endpoints/{id}           → Endpoint (url, label, enabled, pace)
 *   DELETE /console/api/endpoints/{id}           → 204 | 409 endpoint_watches_active
 *   POST   /console/api/endpoints/{id}/rotate-secret           → EndpointSecretRotated (once)
 *   POST   /console/api/endpoints/{id}/previous-secret/expire  → Endpoint
 *   POST   /console/api/endpoints/{id}/replay    → EndpointReplay (failed deliveries since a time)
 *   POST   /console/api/watches/batch            → WatchBatchResult (the CSV import)
 *
 * Reading needs the viewer role, changes the developer role (as watches).
 */
import { Type as T } from '@sinclair/typebox';
import {
  createEndpointAnswer,
  deleteEndpointAnswer,
  expirePreviousEndpointSecretAnswer,
  replayEndpointAnswer,
  rotateEndpointSecretAnswer,
  updateEndpointAnswer,
} from '../../api/routes/endpoints.js';
import {
  BATCH_BODY_LIMIT_BYTES,
  CreateWatchBatchSchema,
  createWatchBatchAnswer,
} from '../../api/routes/watch-batch.js';
import { preventCoercion } from '../../api/schemas.js';
import type { App, AppDeps } from '../../api/types.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { getEndpoint, listEndpoints } from '../../endpoints/endpoints.js';
import { endpointHealth } from '../../endpoints/health.js';
import {
  CreateEndpointSchema,
  endpointView,
  ReplayEndpointSchema,
  RotateEndpointSecretSchema,
  UpdateEndpointSchema,
} from '../../endpoints/schema.js';
import { watchView } from '../../watches/schema.js';
import { WATCH_COLUMNS, type WatchRow } from '../../watches/watches.js';
import { requireSession } from '../guard.js';
import { IdParams } from '../schemas.js';

const hide = { hide: true } as const;
/** Most watches listed under one endpoint in the console (the page says when there are more). */
const WATCHES_SHOWN = 500;

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
      return { data: rows.map((e) => ({ ...endpointView(e), day: health.get(e.id) ?? null })) };
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
      return { data: rows.map(watchView), total: ep.watch_count };
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
