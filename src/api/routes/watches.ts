/**
 * Watches (SPEC §Watch, §WatchCreated, §CreateWatch, §POST/GET/DELETE /v1/watches):
 *
 *   POST   /v1/watches       CreateWatch → 201 WatchCreated (the secret, once)
 *   GET    /v1/watches       → 200 { data: Watch[] }, newest first, never a secret
 *   DELETE /v1/watches/{id}  → 204; 404 when missing, malformed, deleted or someone else's
 *
 *   POST   /v1/watches/{id}/pause   → 200 Watch (PAUSED: matches nothing, frees its quota slot)
 *   POST   /v1/watches/{id}/resume  → 200 Watch; 402 quota_exceeded when no slot is free
 *
 *   GET    /v1/watches/{id}/transactions/{tx_id} → 200 TransactionExplanation: did this
 *          transaction produce an event for the watch, and why not (src/ingest/explain.ts);
 *          503 when the node cannot be read
 *   PATCH  /v1/watches/{id}         UpdateWatch → 200 Watch (webhook_url, label)
 *   POST   /v1/watches/{id}/rotate-secret           RotateSecret → 200 SecretRotated (once)
 *   POST   /v1/watches/{id}/previous-secret/expire  → 200 Watch (the grace period ended now)
 *
 * The schemas and views are the watch domain's (src/watches/schema.ts); creation runs
 * createWatchFromRequest (src/watches/create.ts), the function the console runs too.
 */
import { Type as T } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { TEST_NETWORK } from '../../common/environment.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import type { Queryable } from '../../db/pool.js';
import { TEST_TX_PREFIX } from '../../events/test-transfer.js';
import { EXPLAIN_REASONS, explainTransaction } from '../../ingest/explain.js';
import { createWatchFromRequest } from '../../watches/create.js';
import { type HealthWindowName, healthSeries, healthSummaries } from '../../watches/health.js';
import {
  DEFAULT_GRACE_SECONDS,
  expirePreviousSecret,
  rotateWatchSecret,
} from '../../watches/rotate-secret.js';
import {
  CreateWatchSchema,
  EndpointWatchCreatedSchema,
  healthSchemas,
  RotateSecretSchema,
  SecretRotatedSchema,
  secretRotatedView,
  TelegramWatchCreatedSchema,
  type UpdateWatchBody,
  UpdateWatchSchema,
  WatchCreatedSchema,
  WatchSchema,
  WatchWithHealthSchema,
  WebhookWatchCreatedSchema,
  watchCreatedView,
  watchView,
  watchWithHealthView,
} from '../../watches/schema.js';
import { updateWatchFromRequest } from '../../watches/update.js';
import {
  deleteWatch,
  getWatch,
  listWatches,
  pauseWatch,
  resumeWatch,
  type WatchRow,
} from '../../watches/watches.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  NetworkMember,
  preventCoercion,
  QuotaExceededSchema,
  RATE_LIMIT_HEADERS,
  ref,
  StringEnum,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';

/** `{ data: Watch[] }` */
export const WatchListSchema = T.Object(
  { data: T.Array(ref(WatchWithHealthSchema)) },
  { $id: 'WatchList', description: "The caller's watches on this network, newest first." },
);

/**
 * The optional `network` query member every /v1 route accepts (NetworkMember: the key's own
 * network is served, any other → 400 testnet_unsupported).
 * Any other query parameter is rejected (400, `details` names it), like unknown body members.
 */
export const NetworkQuery = T.Object(
  {
    network: T.Optional(NetworkMember()),
  },
  { additionalProperties: false },
);

/** A test transfer's tx id (src/events/test-transfer.ts): `test_` and 59 lowercase hex. */
const TEST_TX_ID = new RegExp(`^${TEST_TX_PREFIX}[0-9a-f]{59}$`);

/** src/ingest/explain.ts Explanation. */
export const TransactionExplanationSchema = T.Object(
  {
    tx_id: T.String({ description: 'The transaction id (64 hex, lowercase).' }),
    watch_id: T.String(),
    produced_event: T.Boolean({ description: 'True when the watch has an event of it.' }),
    reason: StringEnum(EXPLAIN_REASONS, {
      description:
        'produced; not_found (the node does not know it); unsolidified (its block is not solidified yet); failed (the transaction or its receipt failed); not_usdt_or_trx (no USDT or TRX moved, or a zero amount); address_not_involved; asset_filtered; direction_filtered; before_activation (in a block at or before the watch’s activation block); watch_paused; not_scanned_yet (it matches, ingest has not reached its block); not_recorded (it matches, but its block was not ingested by this deployment).',
    }),
    message: T.String({ description: 'The reason in a sentence.' }),
    block_number: T.Unsafe<number | null>({
      type: ['integer', 'null'],
      description: 'Its block; null when not found.',
    }),
    solidified_head: T.Unsafe<number | null>({
      type: ['integer', 'null'],
      description: 'The solidified head the answer was computed against; null when not needed.',
    }),
    event_ids: T.Array(T.String(), { description: 'The watch’s events of it (`evt_…`).' }),
    transfers: T.Array(
      T.Object({
        asset: StringEnum(['USDT', 'TRX'] as const),
        event_index: T.Integer({ minimum: 0 }),
        from: T.String({ description: 'base58' }),
        to: T.String({ description: 'base58' }),
        amount_raw: T.String({ description: 'Smallest units (sun / USDT base units).' }),
        amount: T.String({ description: 'amount_raw / 10^6, decimal.' }),
      }),
      {
        description:
          'Its USDT and TRX transfers as ingest extracts them (empty when it was not read from the block).',
      },
    ),
  },
  {
    $id: 'TransactionExplanation',
    description: 'Whether a transaction produced an event for a watch, and why not.',
  },
);

/** GET /v1/watches/{id}/health's answer. */
export const WatchHealthSeriesSchema = T.Object(
  {
    window: StringEnum(['hour', 'day', 'week'] as const),
    bucket_seconds: T.Integer({ description: 'Width of each bucket, seconds.' }),
    buckets: T.Array(
      T.Object({
        start: T.String({ format: 'date-time', description: 'Start of the bucket.' }),
        attempts: T.Integer({ minimum: 0 }),
        succeeded: T.Integer({ minimum: 0 }),
        success_rate: T.Union([T.Number(), T.Null()]),
        p50_ms: T.Union([T.Integer(), T.Null()]),
        p95_ms: T.Union([T.Integer(), T.Null()]),
      }),
      { description: 'Oldest first; every bucket of the window, empty ones included.' },
    ),
    watch: ref(WatchWithHealthSchema),
  },
  {
    $id: 'WatchHealthSeries',
    description: "A webhook watch's attempts in time buckets, and the watch with its health.",
  },
);

export const watchSchemas = [
  ...healthSchemas,
  WatchHealthSeriesSchema,
  WatchSchema,
  WebhookWatchCreatedSchema,
  EndpointWatchCreatedSchema,
  TelegramWatchCreatedSchema,
  WatchCreatedSchema,
  CreateWatchSchema,
  WatchListSchema,
  TransactionExplanationSchema,
  RotateSecretSchema,
  SecretRotatedSchema,
  UpdateWatchSchema,
];

/** Register the watch routes. */
export function watchRoutes(app: App, deps: AppDeps): void {
  const tags = ['watches'];

  app.post(
    '/v1/watches',
    {
      schema: {
        operationId: 'createWatch',
        summary: 'Create a watch',
        description:
          'Registers a watch; it takes effect within a few seconds and never matches transfers from before its creation. Duplicate identity (address in either encoding, asset_filter, direction, channel) gives 409; a full quota gives 402.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        body: ref(CreateWatchSchema),
        response: {
          ...commonV1Responses(),
          201: v1Response(ref(WatchCreatedSchema), 'Created. The secret is in this answer only.'),
          402: ref(QuotaExceededSchema, {
            description: 'quota_exceeded: the plan allows no more active watches on this network.',
            headers: { ...RATE_LIMIT_HEADERS },
          }),
          404: errorResponse(
            'Additive: `endpoint_id` names no endpoint of the caller (missing, deleted, or not yours).',
          ),
          409: errorResponse(
            'Duplicate watch (same address, asset_filter, direction and channel).',
          ),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
          503: errorResponse('The chain head is not known yet; retry shortly.', {
            'Retry-After': {
              type: 'integer',
              minimum: 1,
              description: 'Seconds to wait before retrying.',
            },
          }),
        },
      },
      // A body member of the wrong JSON type is a 400, never converted by ajv's coerceTypes
      // (`"true"`, `1` → true; `["TRX"]` → "TRX"): see preventCoercion.
      preValidation: async (request) => {
        preventCoercion(CreateWatchSchema, request.body);
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const audit = auditContextOf(request);
      const { watch, secret } = await createWatchFromRequest(
        { ...deps, network: auth.network },
        auth.accountId,
        request.body,
        (tx, w) =>
          recordAudit(tx, audit, {
            action: 'watch.created',
            targetId: w.id,
            detail: {
              address: w.address,
              asset_filter: w.asset_filter,
              direction: w.direction,
              channel: w.channel,
              // The host only: a URL's path or query may carry the receiver's own token.
              webhook_host: w.webhook_url === null ? null : new URL(w.webhook_url).host,
            },
          }),
      );
      // Never log the answer: it holds the secret.
      request.log.info({ watch_id: watch.id, account_id: auth.accountId }, 'watch created');
      return reply.code(201).send(watchCreatedView(watch, secret));
    },
  );

  app.get(
    '/v1/watches',
    {
      schema: {
        operationId: 'listWatches',
        summary: 'List watches',
        description:
          "The caller's watches on this auth.network, newest first, each with its endpoint health (webhook watches). Never returns secrets.",
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(WatchListSchema), 'The watches.'),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const rows = await listWatches(deps.db, auth.accountId, auth.network);
      const windows = await healthSummaries(
        deps.db,
        rows.filter((w) => w.channel === 'webhook').map((w) => w.id),
      );
      return { data: rows.map((w) => watchWithHealthView(w, windows.get(w.id))) };
    },
  );

  app.delete(
    '/v1/watches/:id',
    {
      schema: {
        operationId: 'deleteWatch',
        summary: 'Delete a watch',
        description:
          'The watch stops matching at once and its quota slot is freed immediately. Events already matched and their pending deliveries are kept.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
        response: {
          ...commonV1Responses(),
          204: T.Null({ description: 'Deleted. No body.', headers: { ...RATE_LIMIT_HEADERS } }),
          404: errorResponse(
            'No such watch of the caller (missing, already deleted, or not yours).',
          ),
          // A DELETE needs no body, but one that is sent is read like any other.
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const { id } = request.params;
      const audit = auditContextOf(request);
      const deleted =
        isId(id, 'wh') &&
        (await deps.db.transaction(async (tx) => {
          const done = await deleteWatch(tx, auth.accountId, auth.network, id);
          if (done) await recordAudit(tx, audit, { action: 'watch.deleted', targetId: id });
          return done;
        }));
      if (!deleted) throw new ApiError(404, 'watch not found');
      request.log.info({ watch_id: id, account_id: auth.accountId }, 'watch deleted');
      return reply.code(204).send(null);
    },
  );

  app.get(
    '/v1/watches/:id/transactions/:tx_id',
    {
      schema: {
        operationId: 'explainTransaction',
        summary: 'Explain a transaction for a watch',
        description:
          'Whether the transaction produced an event for this watch, and if not why: computed by reading its solidified block through the node of the watch’s network and running the extraction and matching ingest runs. May cost a few node requests. A test watch (`tw_test_` key) is read through the test network’s node (Nile) when the deployment follows it; otherwise only its stored events answer (`produced`, e.g. a test transfer’s `test_…` id) and anything else is `not_found`, saying no test network is followed.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({
          id: T.String({ description: 'Watch id (`wh_…`).' }),
          tx_id: T.String({
            maxLength: 66,
            description:
              'Transaction id: 64 hex characters; for a test watch also a test transfer’s `test_…` id.',
          }),
        }),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(TransactionExplanationSchema), 'The verdict.'),
          404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
          503: errorResponse('The TRON node could not be read; retry shortly.', {
            'Retry-After': {
              type: 'integer',
              minimum: 1,
              description: 'Seconds to wait before retrying.',
            },
          }),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { id, tx_id: raw } = request.params;
      const watch = isId(id, 'wh')
        ? await getWatch(deps.db, auth.accountId, auth.network, id)
        : undefined;
      if (!watch) throw new ApiError(404, 'watch not found');
      const test = watch.network === TEST_NETWORK;
      // A test transfer's id (`test_` and 59 hex, POST /v1/test/transfers) names a test event.
      const testTx = test && TEST_TX_ID.test(raw);
      const txId = testTx ? raw : raw.replace(/^0x/i, '').toLowerCase();
      if (!testTx && !/^[0-9a-f]{64}$/.test(txId)) {
        throw new ApiError(400, 'invalid path parameters', undefined, [
          { field: 'tx_id', message: 'must be 64 hexadecimal characters' },
        ]);
      }
      // The reader of the watch's own network (issue 32): Nile's for a test watch, null when this
      // deployment follows no test network (then stored events answer); never mainnet's for it.
      const reader = test ? deps.testnetChain : deps.chain;
      if (reader === undefined && test) {
        return explainTransaction(deps.db, null, watch, txId);
      }
      const chain = reader?.();
      const unavailable = (why: string) =>
        new ApiError(
          503,
          `the TRON node could not be read: ${why}`,
          undefined,
          undefined,
          {},
          {
            'Retry-After': '5',
          },
        );
      if (!chain) throw unavailable('not connected yet');
      try {
        return await explainTransaction(deps.db, chain, watch, txId);
      } catch (err) {
        if (err instanceof ApiError) throw err;
        request.log.warn(
          { watch_id: id, tx_id: txId, err: err instanceof Error ? err.message : String(err) },
          'explain: node read failed',
        );
        throw unavailable(err instanceof Error ? err.message : String(err));
      }
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/v1/watches/:id/${action}`,
      {
        schema: {
          operationId: `${action}Watch`,
          summary: action === 'pause' ? 'Pause a watch' : 'Resume a paused watch',
          description:
            action === 'pause'
              ? 'A PAUSED watch matches nothing and frees its quota slot at once; notifications already created keep their schedule. Pausing a paused watch changes nothing.'
              : 'The watch matches again from the chain head now on: transfers made while it was paused are never reported. Needs a free quota slot (402 otherwise). Resuming an active watch changes nothing.',
          tags,
          security: BEARER_SECURITY,
          querystring: NetworkQuery,
          params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
          response: {
            ...commonV1Responses(),
            200: v1Response(ref(WatchSchema), 'The watch after the change.'),
            ...(action === 'resume'
              ? {
                  402: ref(QuotaExceededSchema, {
                    description: 'quota_exceeded: no free slot for one more active watch.',
                    headers: { ...RATE_LIMIT_HEADERS },
                  }),
                  503: errorResponse('The chain head is not known yet; retry shortly.'),
                }
              : {}),
            404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
            413: errorResponse('Body too large.'),
            415: errorResponse('Content-Type is not application/json.'),
          },
        },
      },
      async (request) => {
        const auth = requireAuth(request);
        const { id } = request.params;
        if (!isId(id, 'wh')) throw new ApiError(404, 'watch not found');
        const headAsOf = action === 'resume' ? await deps.refreshHead?.(auth.network) : undefined;
        const audit = auditContextOf(request);
        const record = (tx: Queryable, w: WatchRow) =>
          recordAudit(tx, audit, {
            action: action === 'pause' ? 'watch.paused' : 'watch.resumed',
            targetId: w.id,
            detail: { status: w.status },
          });
        const watch =
          action === 'pause'
            ? await deps.db.transaction(async (tx) => {
                const w = await pauseWatch(tx, auth.accountId, auth.network, id);
                if (w) await record(tx, w);
                return w;
              })
            : await resumeWatch(
                deps.db,
                auth.accountId,
                auth.network,
                id,
                deps.config.ingest.blockIntervalMs,
                record,
                headAsOf,
              );
        if (!watch) throw new ApiError(404, 'watch not found');
        request.log.info({ watch_id: id, account_id: auth.accountId }, `watch ${action}d`);
        return watchView(watch);
      },
    );
  }

  app.post(
    '/v1/watches/:id/rotate-secret',
    {
      schema: {
        operationId: 'rotateWatchSecret',
        summary: "Rotate a webhook watch's secret",
        description:
          'Issues a new secret, returned once. For the grace period (`grace_period_seconds`, default 24 h) every delivery is signed with both secrets: `X-Signature` with the new one, `X-Signature-Previous` with the replaced one, and `webhook-signature` lists both `v1,` signatures. Rotating again during a grace period drops the oldest secret. Telegram watches have no secret (400).',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
        body: ref(RotateSecretSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(
            ref(SecretRotatedSchema),
            'Rotated. The new secret is in this answer only.',
          ),
          404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
        },
      },
      preValidation: async (request) => {
        // The body is optional: none is the defaults.
        request.body ??= {};
        preventCoercion(RotateSecretSchema, request.body);
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return rotateSecretAnswer(
        deps,
        request,
        auth.accountId,
        auth.network,
        request.params.id,
        request.body.grace_period_seconds,
      );
    },
  );

  app.post(
    '/v1/watches/:id/previous-secret/expire',
    {
      schema: {
        operationId: 'expirePreviousWatchSecret',
        summary: "End a secret rotation's grace period now",
        description:
          'The replaced secret stops signing from the next attempt on and is deleted; `previous_secret_expires_at` becomes null. Without a grace period running, nothing changes.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(WatchSchema), 'The watch after the change.'),
          404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return expirePreviousSecretAnswer(
        deps,
        request,
        auth.accountId,
        auth.network,
        request.params.id,
      );
    },
  );

  app.patch(
    '/v1/watches/:id',
    {
      schema: {
        operationId: 'updateWatch',
        summary: 'Edit a watch: its webhook URL or label',
        description:
          'Changes the members given: `webhook_url` (webhook watches; checked as at creation, the secret stays) and `label`. Deliveries already created go to the new URL from their next attempt on. The address, assets, direction and channel cannot change: create another watch.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
        body: ref(UpdateWatchSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(WatchSchema), 'The watch after the change.'),
          404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
        },
      },
      preValidation: async (request) => {
        // A malformed id names no watch: 404 like DELETE, whatever the body says.
        if (!isId((request.params as { id: string }).id, 'wh')) {
          throw new ApiError(404, 'watch not found');
        }
        preventCoercion(UpdateWatchSchema, request.body);
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      return updateWatchAnswer(
        deps,
        request,
        auth.accountId,
        auth.network,
        request.params.id,
        request.body,
      );
    },
  );

  app.get(
    '/v1/watches/:id/health',
    {
      schema: {
        operationId: 'watchHealth',
        summary: "A webhook watch's endpoint health over time",
        description:
          'Its delivery attempts over the last hour (5-minute buckets), day (1-hour buckets) or week (6-hour buckets): attempts, successes, success rate, p50 and p95 latency; and the watch with its health summary.',
        tags,
        security: BEARER_SECURITY,
        querystring: T.Object(
          {
            ...NetworkQuery.properties,
            window: T.Optional(StringEnum(['hour', 'day', 'week'] as const, { default: 'day' })),
          },
          { additionalProperties: false },
        ),
        params: T.Object({ id: T.String({ description: 'Watch id (`wh_…`).' }) }),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(WatchHealthSeriesSchema), 'The series.'),
          404: errorResponse('No such watch of the caller (missing, deleted, or not yours).'),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const { id } = request.params;
      const window = (request.query.window ?? 'day') as HealthWindowName;
      return watchHealthAnswer(deps, auth.accountId, auth.network, id, window);
    },
  );
}

/**
 * The answer of GET …/watches/{id}/health (the API's and the console's).
 * @throws ApiError 404 when the account has no such live watch.
 */
export async function watchHealthAnswer(
  deps: Pick<AppDeps, 'db'>,
  accountId: string,
  network: string,
  id: string,
  window: HealthWindowName,
) {
  const watch = isId(id, 'wh') ? await getWatch(deps.db, accountId, network, id) : undefined;
  if (!watch) throw new ApiError(404, 'watch not found');
  const windows = await healthSummaries(deps.db, watch.channel === 'webhook' ? [id] : []);
  const series = await healthSeries(deps.db, id, window);
  return { window, ...series, watch: watchWithHealthView(watch, windows.get(id)) };
}

/*
 * The changes of one watch that the API and the console both make (issue 19 items 3 and 4): the
 * domain call, the 404 of a watch that is not the caller's, the log line and the audit entry, in
 * one place; each route only authenticates its caller (API key or console session and role).
 */

/**
 * Rotate the watch's secret (POST …/watches/{id}/rotate-secret).
 * @param graceSeconds the grace period; undefined: the default (24 h).
 * @returns the rotated watch with its new secret (the only place it is ever shown).
 * @throws ApiError 404 when the account has no such live webhook watch; 400 from the domain.
 */
export async function rotateSecretAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  network: string,
  id: string,
  graceSeconds: number | undefined,
): Promise<ReturnType<typeof secretRotatedView>> {
  if (!isId(id, 'wh')) throw new ApiError(404, 'watch not found');
  const audit = auditContextOf(request);
  const grace = graceSeconds ?? DEFAULT_GRACE_SECONDS;
  // The rotation and its audit entry commit together (issue 27 item 6).
  const r = await deps.db.transaction(async (tx) => {
    const rotated = await rotateWatchSecret(tx, deps.secrets, accountId, network, id, grace);
    if (rotated) {
      await recordAudit(tx, audit, {
        action: 'watch.secret_rotated',
        targetId: id,
        detail: {
          grace_period_seconds: grace,
          // Not named after the secret: cleanDetail drops a member whose name says "secret".
          grace_ends_at: rotated.watch.previous_secret_expires_at?.toISOString() ?? null,
        },
      });
    }
    return rotated;
  });
  if (!r) throw new ApiError(404, 'watch not found');
  // Never log the answer: it holds the secret.
  request.log.info({ watch_id: id, account_id: accountId }, 'watch secret rotated');
  return secretRotatedView(r.watch, r.secret);
}

/**
 * End a rotation's grace period now (POST …/watches/{id}/previous-secret/expire).
 * @throws ApiError 404 when the account has no such live watch.
 */
export async function expirePreviousSecretAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  network: string,
  id: string,
): Promise<ReturnType<typeof watchView>> {
  const audit = auditContextOf(request);
  // The change and its audit entry commit together (issue 27 item 6); the entry says when the
  // grace period was to end.
  const watch = !isId(id, 'wh')
    ? undefined
    : await deps.db.transaction(async (tx) => {
        const { rows } = await tx.query<{ previous_secret_expires_at: Date | null }>(
          `SELECT previous_secret_expires_at FROM watches
            WHERE id = $1 AND account_id = $2 AND network = $3 AND deleted_at IS NULL FOR UPDATE`,
          [id, accountId, network],
        );
        const w = await expirePreviousSecret(tx, accountId, network, id);
        if (w) {
          await recordAudit(tx, audit, {
            action: 'watch.previous_secret_expired',
            targetId: id,
            detail: {
              previous_grace_ends_at: rows[0]?.previous_secret_expires_at?.toISOString() ?? null,
              grace_ends_at: null,
            },
          });
        }
        return w;
      });
  if (!watch) throw new ApiError(404, 'watch not found');
  request.log.info({ watch_id: id, account_id: accountId }, 'previous secret expired');
  return watchView(watch);
}

/**
 * Edit the watch's webhook URL or label (PATCH …/watches/{id}); the audit entry names the members
 * changed, never their values.
 * @throws ApiError 404 when the account has no such live watch; 400 from the URL's checks.
 */
export async function updateWatchAnswer(
  deps: AppDeps,
  request: FastifyRequest,
  accountId: string,
  network: string,
  id: string,
  body: UpdateWatchBody,
): Promise<ReturnType<typeof watchView>> {
  const audit = auditContextOf(request);
  // The change and its audit entry commit together (issue 27 item 6), with the label's and the
  // webhook host's before and after (issue 29 item 2): the host only, never a path, query or
  // credentials of a URL.
  const watch = isId(id, 'wh')
    ? await updateWatchFromRequest(deps, accountId, network, id, body, (tx, before, after) =>
        recordAudit(tx, audit, {
          action: 'watch.updated',
          targetId: id,
          detail: {
            changed: Object.keys(body).sort().join(','),
            ...(body.label !== undefined
              ? { previous_label: before.label, label: after.label }
              : {}),
            ...(typeof body.webhook_url === 'string'
              ? {
                  previous_webhook_host: hostOf(before.webhook_url),
                  webhook_host: hostOf(after.webhook_url),
                }
              : {}),
          },
        }),
      )
    : undefined;
  if (!watch) throw new ApiError(404, 'watch not found');
  request.log.info({ watch_id: id, account_id: accountId }, 'watch updated');
  return watchView(watch);
}

/** The host (and port) of a webhook URL, never its path, query or credentials; null if none. */
function hostOf(url: string | null): string | null {
  if (url === null) return null;
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
}
