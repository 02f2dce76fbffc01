/**
 * Watches in bulk (issue 30 item 2; additive to SPEC), each item with its own result:
 *
 *   POST /v1/watches/batch           { items: CreateWatch[] } (1 to 1,000) → 200 WatchBatchResult
 *   POST /v1/watches/batch/pause     { ids } or { label }                  → 200 WatchActionResult
 *   POST /v1/watches/batch/resume    { ids } or { label }                  → 200 WatchActionResult
 *   POST /v1/watches/batch/delete    { ids } or { label }                  → 200 WatchActionResult
 *
 * The answer is 200 whatever the items' fates: `results[i]` says what happened to item i
 * (`status` 201 and the watch with its secret, or the error status and SPEC's error body it would
 * have had alone). The domain is src/watches/batch.ts.
 */

import { Type as T } from '@sinclair/typebox';
import { callerNetwork } from '../../accounts/callers.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit, recordAudits } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import {
  applyBatchAction,
  type BatchAction,
  createWatchBatch,
  idsWithLabel,
  MAX_BATCH_ITEMS,
} from '../../watches/batch.js';
import {
  LABEL_MAX_LENGTH,
  WatchCreatedSchema,
  WatchSchema,
  watchCreatedView,
  watchView,
} from '../../watches/schema.js';
import { requireAuth } from '../auth.js';
import { BEARER_SECURITY, commonV1Responses, errorResponse, ref, v1Response } from '../schemas.js';
import type { App, AppDeps } from '../types.js';
import { NetworkQuery } from './watches.js';

const ItemErrorSchema = T.Unknown({
  description:
    "The item's error body, as POST /v1/watches would have answered it alone (SPEC §Error body: `error`, `code`, `details`, and `usage` for quota_exceeded, `watch_id` for a duplicate).",
});

export const CreateWatchBatchSchema = T.Object(
  {
    items: T.Array(
      T.Unknown({ description: 'A CreateWatch body (validated on its own: see the results).' }),
      { minItems: 1, maxItems: MAX_BATCH_ITEMS, description: '1 to 1,000 CreateWatch bodies.' },
    ),
  },
  {
    $id: 'CreateWatchBatch',
    description:
      'Watches to create, in order. Each item is answered on its own, like POST /v1/watches: an invalid or refused item never stops the others.',
    additionalProperties: false,
  },
);

export const WatchBatchResultSchema = T.Object(
  {
    created: T.Integer({ minimum: 0, description: 'Items created.' }),
    failed: T.Integer({ minimum: 0, description: 'Items not created.' }),
    results: T.Array(
      T.Object({
        index: T.Integer({ minimum: 0, description: 'Position of the item in `items`.' }),
        status: T.Integer({
          description:
            '201: created. Otherwise the status the item alone would have got (400, 402 quota_exceeded, 404 endpoint, 409 duplicate, 429 rate_limited: every later item too).',
        }),
        watch: T.Optional(ref(WatchCreatedSchema)),
        error: T.Optional(ItemErrorSchema),
      }),
      { description: 'One per item, in order.' },
    ),
  },
  {
    $id: 'WatchBatchResult',
    description:
      'What happened to each item. Secrets of created webhook watches are in this answer only.',
  },
);

export const WatchSelectionSchema = T.Object(
  {
    ids: T.Optional(
      T.Array(T.String({ maxLength: 64 }), {
        minItems: 1,
        maxItems: MAX_BATCH_ITEMS,
        description: 'Watch ids (`wh_…`), 1 to 1,000.',
      }),
    ),
    label: T.Optional(
      T.String({
        minLength: 1,
        maxLength: LABEL_MAX_LENGTH,
        description: 'Every live watch carrying exactly this label (at most 10,000).',
      }),
    ),
  },
  {
    $id: 'WatchSelection',
    description: 'Exactly one of `ids` or `label`.',
    additionalProperties: false,
  },
);

export const WatchActionResultSchema = T.Object(
  {
    succeeded: T.Integer({ minimum: 0 }),
    failed: T.Integer({ minimum: 0 }),
    results: T.Array(
      T.Object({
        id: T.String(),
        status: T.Integer({
          description:
            '200 (paused or resumed), 204 (deleted), or the error status (404 not yours or missing, 402 quota_exceeded on resume).',
        }),
        watch: T.Optional(ref(WatchSchema)),
        error: T.Optional(ItemErrorSchema),
      }),
      { description: 'One per selected watch, in order.' },
    ),
  },
  { $id: 'WatchActionResult', description: 'What happened to each selected watch.' },
);

export const watchBatchSchemas = [
  CreateWatchBatchSchema,
  WatchBatchResultSchema,
  WatchSelectionSchema,
  WatchActionResultSchema,
];

/**
 * Body limit of POST /v1/watches/batch, bytes: 1,000 items of up to ~4 KiB each (a 2,048-character
 * webhook_url, a 100-character label and the rest), where a single request allows 64 KiB.
 */
export const BATCH_BODY_LIMIT_BYTES = MAX_BATCH_ITEMS * 4 * 1024;

/** Register the batch routes. */
export function watchBatchRoutes(app: App, deps: AppDeps): void {
  const tags = ['watches'];
  const bodyErrors = {
    413: errorResponse('Body too large.'),
    415: errorResponse('Content-Type is not application/json.'),
  };

  app.post(
    '/v1/watches/batch',
    {
      bodyLimit: BATCH_BODY_LIMIT_BYTES,
      schema: {
        operationId: 'createWatchBatch',
        summary: 'Create up to 1,000 watches',
        description:
          'Each item is a CreateWatch, answered as POST /v1/watches would answer it alone after the items before it (its rules, quota and answers); the valid items are created together in one transaction. The answer lists each item’s result. The rate limit counts every item as one request: items past the window’s room get 429 rate_limited and are not created.',
        tags,
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        body: ref(CreateWatchBatchSchema),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(WatchBatchResultSchema), 'One result per item.'),
          ...bodyErrors,
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const limiterId = `key:${auth.keyId}`;
      return createWatchBatchAnswer(deps, request, auth.accountId, request.body.items, async () => {
        const r = await deps.rateLimiter.hit(limiterId, auth.limits.requestsPerMinute);
        return { allowed: r.allowed, retryAfterSeconds: r.retryAfterSeconds };
      });
    },
  );

  for (const action of ['pause', 'resume', 'delete'] as const) {
    app.post(
      `/v1/watches/batch/${action}`,
      {
        schema: {
          operationId: `${action}WatchBatch`,
          summary: `${action[0]?.toUpperCase()}${action.slice(1)} watches by ids or label`,
          description:
            action === 'resume'
              ? 'Resumes each selected watch as POST /v1/watches/{id}/resume does (a free quota slot each, else that watch’s 402).'
              : action === 'pause'
                ? 'Pauses each selected watch as POST /v1/watches/{id}/pause does.'
                : 'Deletes each selected watch as DELETE /v1/watches/{id} does.',
          tags,
          security: BEARER_SECURITY,
          querystring: NetworkQuery,
          body: ref(WatchSelectionSchema),
          response: {
            ...commonV1Responses(),
            200: v1Response(ref(WatchActionResultSchema), 'One result per selected watch.'),
            ...bodyErrors,
          },
        },
      },
      async (request) => {
        const auth = requireAuth(request);
        return batchActionAnswer(deps, request, auth.accountId, auth.network, action, request.body);
      },
    );
  }
}

/**
 * Create the items (POST …/watches/batch; the console's CSV import too): one audit entry per
 * watch created, as POST /v1/watches writes.
 * @param allow counts one more item against the caller's rate limit (see createWatchBatch).
 */
export async function createWatchBatchAnswer(
  deps: AppDeps,
  request: Parameters<typeof auditContextOf>[0],
  accountId: string,
  items: readonly unknown[],
  allow: () => Promise<{ allowed: boolean; retryAfterSeconds: number }>,
) {
  const audit = auditContextOf(request);
  const network = callerNetwork(request, deps.config.network);
  const outcomes = await createWatchBatch({ ...deps, network }, accountId, items, {
    allow,
    view: watchCreatedView,
    inTx: (tx, rows) =>
      recordAudits(
        tx,
        audit,
        rows.map((w) => ({
          action: 'watch.created' as const,
          targetId: w.id,
          detail: {
            address: w.address,
            asset_filter: w.asset_filter,
            direction: w.direction,
            channel: w.channel,
            // The host only: a URL's path or query may carry the receiver's own token.
            webhook_host: w.webhook_url === null ? null : new URL(w.webhook_url).host,
            endpoint_id: w.endpoint_id,
            batch: true,
          },
        })),
      ),
  });
  const created = outcomes.filter((o) => 'created' in o).length;
  // Never log the answer: it holds secrets.
  request.log.info(
    { account_id: accountId, created, failed: outcomes.length - created },
    'watch batch',
  );
  return {
    created,
    failed: outcomes.length - created,
    results: outcomes.map((o) =>
      'created' in o
        ? { index: o.index, status: 201, watch: o.created }
        : { index: o.index, status: o.error.status, error: o.error.body },
    ),
  };
}

/**
 * Pause, resume or delete the selected watches (POST …/watches/batch/{action}; the console's too).
 * @throws ApiError 400 when not exactly one of ids or label is given.
 */
export async function batchActionAnswer(
  deps: AppDeps,
  request: Parameters<typeof auditContextOf>[0],
  accountId: string,
  network: string,
  action: BatchAction,
  body: { ids?: string[] | undefined; label?: string | undefined },
) {
  if ((body.ids === undefined) === (body.label === undefined)) {
    throw new ApiError(400, 'invalid request body', undefined, [
      { field: 'body', message: 'give exactly one of ids or label' },
    ]);
  }
  const ids = body.ids ?? (await idsWithLabel(deps.db, accountId, network, body.label ?? ''));
  const headAsOf = action === 'resume' ? await deps.refreshHead?.(network) : undefined;
  const audit = auditContextOf(request);
  const auditAction = {
    pause: 'watch.paused',
    resume: 'watch.resumed',
    delete: 'watch.deleted',
  } as const;
  const outcomes = await applyBatchAction(deps.db, accountId, network, action, ids, {
    blockIntervalMs: deps.config.ingest.blockIntervalMs,
    headAsOf,
    record: (tx, w) =>
      recordAudit(tx, audit, {
        action: auditAction[action],
        targetId: w.id,
        detail: action === 'delete' ? { batch: true } : { status: w.status, batch: true },
      }),
  });
  const ok = outcomes.filter((o) => !('error' in o)).length;
  request.log.info(
    { account_id: accountId, action, succeeded: ok, failed: outcomes.length - ok },
    'watch batch action',
  );
  return {
    succeeded: ok,
    failed: outcomes.length - ok,
    results: outcomes.map((o) =>
      'error' in o
        ? { id: o.id, status: o.error.status, error: o.error.body }
        : o.watch === null
          ? { id: o.id, status: 204 }
          : { id: o.id, status: 200, watch: watchView(o.watch) },
    ),
  };
}
