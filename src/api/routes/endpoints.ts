/**
 * Endpoints (issue 30 item 1; additive to SPEC): one URL and one secret for many watches.
 *
 *   POST   /v1/endpoints                 CreateEndpoint → 201 EndpointCreated (the secret, once)
 *   GET    /v1/endpoints                 → 200 { data: Endpoint[] }, newest first, never a secret
 *   GET    /v1/endpoints/{id}            → 200 Endpoint; 404 when missing, deleted or someone else's
 *   PATCH  /v1/endpoints/{id}            UpdateEndpoint → 200 Endpoint
 *   DELETE /v1/endpoints/{id}            → 204; 409 endpoint_watches_active while watches target it
 *   POST   /v1/endpoints/{id}/rotate-secret           → 200 EndpointSecretRotated (once)
 *   POST   /v1/endpoints/{id}/previous-secret/expire  → 200 Endpoint (the grace period ended now)
 *   POST   /v1/endpoints/{id}/redeliver  → 200 { redelivered } (its dead letters, queued again)
 *   POST   /v1/endpoints/{id}/replay     ReplayEndpoint → 200 EndpointReplay (failed since a time)
 *
 * A watch targets an endpoint with `endpoint_id` at creation (src/watches/create.ts). The domain
 * is src/endpoints/endpoints.ts; the `…Answer` functions below are shared with the console
 * (src/console/routes/endpoints.ts): each route only authenticates its caller.
 */

import { Type as T } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { callerNetwork } from '../../accounts/callers.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import {
  createEndpoint,
  deleteEndpoint,
  type EndpointChanges,
  expirePreviousEndpointSecret,
  getEndpoint,
  listEndpoints,
  redeliverEndpointDead,
  rotateEndpointSecret,
  updateEndpoint,
} from '../../endpoints/endpoints.js';
import { replayEndpoint } from '../../endpoints/replay.js';
import {
  type CreateEndpointBody,
  CreateEndpointSchema,
  ENDPOINT_CREATED_NOTE,
  ENDPOINT_ROTATED_NOTE,
  EndpointCreatedSchema,
  EndpointListSchema,
  EndpointRedeliveredSchema,
  EndpointReplaySchema,
  EndpointSchema,
  EndpointSecretRotatedSchema,
  endpointView,
  ReplayEndpointSchema,
  RotateEndpointSecretSchema,
  UpdateEndpointSchema,
} from '../../endpoints/schema.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  preventCoercion,
  RATE_LIMIT_HEADERS,
  ref,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';
import { NetworkQuery } from './watches.js';

const IdParam = T.Object({ id: T.String({ description: 'Endpoint id (`ep_…`).' }) });
const NOT_FOUND = 'No such endpoint of the caller (missing, deleted, or not yours).';

const notFound = () => new ApiError(404, 'endpoint not found');

/** Register the endpoint routes. */
export function endpointRoutes(app: App, deps: AppDeps): void {
  const tags = ['endpoints'];
  const bodyErrors = {
    413: errorResponse('Body too large.'),
    415: errorResponse('Content-Type is not application/json.'),
  };

  app.post(
    '/v1/endpoints',
    {
      schema: {
        operationId: 'createEndpoint',
        summary: 'Create an endpoint',
        description:
          'A receiver that many watches share (`endpoint_id` at watch creation): its URL (checked like a watch’s webhook_url), an optional pace (rate limit per second, concurrency cap) and its secret, returned in this answer only.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        body: ref(CreateEndpointSchema),
        response: {
          ...commonV1Responses(),
          201: v1Response(
            ref(EndpointCreatedSchema),
            'Created. The secret is in this answer only.',
          ),
          ...bodyErrors,
        },
      },
      preValidation: async (request) => {
        preventCoercion(CreateEndpointSchema, request.body);
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const answer = await createEndpointAnswer(deps, request, auth.accountId, request.body);
      return reply.code(201).send(answer);
    },
  );

  app.get(
    '/v1/endpoints',
    {
      schema: {
        operationId: 'listEndpoints',
        summary: 'List endpoints',
        description:
          "The caller's endpoints on this auth.network, newest first. Never returns secrets.",
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointListSchema), 'The endpoints.'),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const rows = await listEndpoints(deps.db, auth.accountId, auth.network);
      return { data: rows.map(endpointView) };
    },
  );

  app.get(
    '/v1/endpoints/:id',
    {
      schema: {
        operationId: 'getEndpoint',
        summary: 'Get an endpoint',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointSchema), 'The endpoint.'),
          404: errorResponse(NOT_FOUND),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { id } = request.params;
      const row = isId(id, 'ep')
        ? await getEndpoint(deps.db, auth.accountId, auth.network, id)
        : null;
      if (!row) throw notFound();
      return endpointView(row);
    },
  );

  app.patch(
    '/v1/endpoints/:id',
    {
      schema: {
        operationId: 'updateEndpoint',
        summary: 'Edit an endpoint',
        description:
          'Changes the members given: `url` (checked as at creation; deliveries already created go to it from their next attempt on), `label`, `enabled` (false holds its deliveries in the outbox, no attempt used), `rate_limit_per_second`, `max_concurrency` (null removes a limit).',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        body: ref(UpdateEndpointSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointSchema), 'The endpoint after the change.'),
          404: errorResponse(NOT_FOUND),
          ...bodyErrors,
        },
      },
      preValidation: async (request) => {
        if (!isId((request.params as { id: string }).id, 'ep')) throw notFound();
        preventCoercion(UpdateEndpointSchema, request.body);
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return updateEndpointAnswer(deps, request, auth.accountId, request.params.id, request.body);
    },
  );

  app.delete(
    '/v1/endpoints/:id',
    {
      schema: {
        operationId: 'deleteEndpoint',
        summary: 'Delete an endpoint',
        description:
          'Refused (409 endpoint_watches_active, `details.watch_count`) while any watch, active or paused, targets it. Deliveries created before its deletion are still delivered and signed with its secret.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        response: {
          ...commonV1Responses(),
          204: T.Null({ description: 'Deleted. No body.', headers: { ...RATE_LIMIT_HEADERS } }),
          404: errorResponse(NOT_FOUND),
          409: errorResponse(
            'endpoint_watches_active: watches still target it (`details.watch_count`).',
          ),
          ...bodyErrors,
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      await deleteEndpointAnswer(deps, request, auth.accountId, request.params.id);
      return reply.code(204).send(null);
    },
  );

  app.post(
    '/v1/endpoints/:id/rotate-secret',
    {
      schema: {
        operationId: 'rotateEndpointSecret',
        summary: "Rotate an endpoint's secret",
        description:
          'Issues a new secret, returned once. For the grace period (`grace_period_seconds`, default 24 h) every delivery of every watch on the endpoint is signed with both secrets: `X-Signature` with the new one, `X-Signature-Previous` with the replaced one, and `webhook-signature` lists both `v1,` signatures.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        body: ref(RotateEndpointSecretSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(
            ref(EndpointSecretRotatedSchema),
            'Rotated. The new secret is in this answer only.',
          ),
          404: errorResponse(NOT_FOUND),
          ...bodyErrors,
        },
      },
      preValidation: async (request) => {
        request.body ??= {};
        preventCoercion(RotateEndpointSecretSchema, request.body);
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return rotateEndpointSecretAnswer(
        deps,
        request,
        auth.accountId,
        request.params.id,
        request.body.grace_period_seconds,
      );
    },
  );

  app.post(
    '/v1/endpoints/:id/previous-secret/expire',
    {
      schema: {
        operationId: 'expirePreviousEndpointSecret',
        summary: "End an endpoint secret rotation's grace period now",
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointSchema), 'The endpoint after the change.'),
          404: errorResponse(NOT_FOUND),
          ...bodyErrors,
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return expirePreviousEndpointSecretAnswer(deps, request, auth.accountId, request.params.id);
    },
  );

  app.post(
    '/v1/endpoints/:id/redeliver',
    {
      schema: {
        operationId: 'redeliverEndpointDeadLetters',
        summary: "Redeliver an endpoint's dead letters",
        description:
          'Every event of a watch on this endpoint whose newest delivery is DEAD gets a new delivery: the same `event_id` and body bytes, attempts from 0, the retry schedule from now (at most 10,000 per call: call again for more). Events still being delivered are left alone.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointRedeliveredSchema), 'How many were queued again.'),
          404: errorResponse(NOT_FOUND),
          ...bodyErrors,
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return redeliverEndpointAnswer(deps, request, auth.accountId, request.params.id);
    },
  );
  app.post(
    '/v1/endpoints/:id/replay',
    {
      schema: {
        operationId: 'replayEndpointFailed',
        summary: "Replay an endpoint's failed deliveries since a time",
        description:
          'Every event of a watch on this endpoint created at or after `since` whose newest delivery is DEAD gets a new delivery: the same `event_id` and body bytes, attempts from 0, the retry schedule from now. Bounded: at most 10,000 per call, oldest first (`next_since` continues), and `since` at most 30 days back, not in the future. Idempotent: the same `since` for the same endpoint within 24 hours answers the first replay (`repeated: true`) and queues nothing. Audited (`endpoint.replayed`). A read-only key gets 403 read_only_key.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: IdParam,
        body: ref(ReplayEndpointSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EndpointReplaySchema), 'The replay (or the earlier identical one).'),
          404: errorResponse(NOT_FOUND),
          ...bodyErrors,
        },
      },
      preValidation: async (request) => {
        preventCoercion(ReplayEndpointSchema, request.body);
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return replayEndpointAnswer(
        deps,
        request,
        auth.accountId,
        request.params.id,
        request.body.since,
      );
    },
  );
}

/*
 * The changes the API and the console both make: the domain call, the 404, the log line and the
 * audit entry (in the change's transaction), in one place. Logs and audit entries name the
 * endpoint and the URL's host, never the secret nor the URL's path (it may carry a token).
 */

const hostOf = (url: string) => new URL(url).host;

/**
 * Create an endpoint (POST …/endpoints).
 * @returns EndpointCreated: the endpoint and its secret (the only time it is shown).
 */
export async function createEndpointAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  body: CreateEndpointBody,
) {
  const audit = auditContextOf(request);
  const network = callerNetwork(request, deps.config.network);
  const { endpoint, secret } = await createEndpoint(
    { ...deps, network },
    accountId,
    body,
    (tx, e) =>
      recordAudit(tx, audit, {
        action: 'endpoint.created',
        targetId: e.id,
        detail: { url_host: hostOf(e.url) },
      }),
  );
  request.log.info({ endpoint_id: endpoint.id, account_id: accountId }, 'endpoint created');
  return { ...endpointView(endpoint), secret, note: ENDPOINT_CREATED_NOTE };
}

/**
 * Edit an endpoint (PATCH …/endpoints/{id}); the audit entry names the members changed.
 * @throws ApiError 404; 400 from the URL's checks.
 */
export async function updateEndpointAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
  body: EndpointChanges,
) {
  if (!isId(id, 'ep')) throw notFound();
  const audit = auditContextOf(request);
  const row = await updateEndpoint(
    deps,
    accountId,
    callerNetwork(request, deps.config.network),
    id,
    body,
    (tx, e) =>
      recordAudit(tx, audit, {
        action: 'endpoint.updated',
        targetId: e.id,
        detail: {
          changed: Object.keys(body).sort().join(','),
          enabled: e.enabled,
          url_host: hostOf(e.url),
        },
      }),
  );
  if (!row) throw notFound();
  request.log.info({ endpoint_id: id, account_id: accountId }, 'endpoint updated');
  return endpointView(row);
}

/**
 * Delete an endpoint (DELETE …/endpoints/{id}).
 * @throws ApiError 404; 409 endpoint_watches_active.
 */
export async function deleteEndpointAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
): Promise<void> {
  const audit = auditContextOf(request);
  const deleted =
    isId(id, 'ep') &&
    (await deleteEndpoint(
      deps.db,
      accountId,
      callerNetwork(request, deps.config.network),
      id,
      (tx, e) => recordAudit(tx, audit, { action: 'endpoint.deleted', targetId: e.id }),
    ));
  if (!deleted) throw notFound();
  request.log.info({ endpoint_id: id, account_id: accountId }, 'endpoint deleted');
}

/**
 * Rotate an endpoint's secret (POST …/endpoints/{id}/rotate-secret).
 * @returns the endpoint with its new secret (the only place it is ever shown).
 * @throws ApiError 404; 400 for a grace period out of range.
 */
export async function rotateEndpointSecretAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
  graceSeconds: number | undefined,
) {
  if (!isId(id, 'ep')) throw notFound();
  const audit = auditContextOf(request);
  // The rotation and its audit entry commit together (issue 27 item 6).
  const r = await deps.db.transaction(async (tx) => {
    const rotated = await rotateEndpointSecret(
      tx,
      deps.secrets,
      accountId,
      callerNetwork(request, deps.config.network),
      id,
      ...(graceSeconds !== undefined ? [graceSeconds] : []),
    );
    if (rotated) {
      await recordAudit(tx, audit, {
        action: 'endpoint.secret_rotated',
        targetId: id,
        detail: {
          // Not named after the secret: cleanDetail drops a member whose name says "secret".
          grace_ends_at: rotated.endpoint.previous_secret_expires_at
            ? new Date(rotated.endpoint.previous_secret_expires_at).toISOString()
            : null,
        },
      });
    }
    return rotated;
  });
  if (!r) throw notFound();
  // Never log the answer: it holds the secret.
  request.log.info({ endpoint_id: id, account_id: accountId }, 'endpoint secret rotated');
  return { ...endpointView(r.endpoint), secret: r.secret, note: ENDPOINT_ROTATED_NOTE };
}

/**
 * End an endpoint rotation's grace period now (POST …/endpoints/{id}/previous-secret/expire).
 * @throws ApiError 404.
 */
export async function expirePreviousEndpointSecretAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
) {
  if (!isId(id, 'ep')) throw notFound();
  const audit = auditContextOf(request);
  // The change and its audit entry commit together (issue 27 item 6).
  const row = await deps.db.transaction(async (tx) => {
    const expired = await expirePreviousEndpointSecret(
      tx,
      accountId,
      callerNetwork(request, deps.config.network),
      id,
    );
    if (expired) {
      await recordAudit(tx, audit, { action: 'endpoint.previous_secret_expired', targetId: id });
    }
    return expired;
  });
  if (!row) throw notFound();
  request.log.info({ endpoint_id: id, account_id: accountId }, 'endpoint previous secret expired');
  return endpointView(row);
}

/**
 * Redeliver an endpoint's dead letters (POST …/endpoints/{id}/redeliver), with one audit entry.
 * @throws ApiError 404.
 */
export async function redeliverEndpointAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
): Promise<{ redelivered: number }> {
  const audit = auditContextOf(request);
  // The caller's environment (issue 32): another environment's endpoint is 404, as a missing one.
  const network = callerNetwork(request, deps.config.network);
  const n = isId(id, 'ep')
    ? await redeliverEndpointDead(deps.db, accountId, network, id, (tx, count) =>
        recordAudit(tx, audit, {
          action: 'endpoint.redelivered',
          targetId: id,
          detail: { count },
        }),
      )
    : undefined;
  if (n === undefined) throw notFound();
  request.log.info({ endpoint_id: id, account_id: accountId, count: n }, 'endpoint redelivered');
  return { redelivered: n };
}

/**
 * Replay an endpoint's failed deliveries since a time (POST …/endpoints/{id}/replay;
 * src/endpoints/replay.ts), with one audit entry when it ran (none for a repeat).
 * @throws ApiError 404; 400 for a `since` out of bounds.
 */
export async function replayEndpointAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  id: string,
  since: string,
) {
  const audit = auditContextOf(request);
  // The caller's environment (issue 32): another environment's endpoint is 404, as a missing one.
  const network = callerNetwork(request, deps.config.network);
  const replay = isId(id, 'ep')
    ? await replayEndpoint(deps.db, accountId, network, id, since, (tx, r) =>
        recordAudit(tx, audit, {
          action: 'endpoint.replayed',
          targetId: id,
          detail: {
            replay_id: r.id,
            since: r.since,
            replayed: r.replayed,
            next_since: r.next_since,
          },
        }),
      )
    : undefined;
  if (!replay) throw notFound();
  request.log.info(
    {
      endpoint_id: id,
      account_id: accountId,
      replay_id: replay.id,
      replayed: replay.replayed,
      repeated: replay.repeated,
    },
    'endpoint replayed',
  );
  return replay;
}

export { endpointSchemas } from '../../endpoints/schema.js';
