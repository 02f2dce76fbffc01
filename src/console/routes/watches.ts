/**
 * The console's watches (issue 12 item 4), on the same domain functions as /v1/watches: creation
 * runs createWatchFromRequest (one rule set, the same answers), pause/resume/delete the same
 * functions as the public endpoints.
 *
 *   GET    /console/api/watches              → { data: (WatchWithHealth & { last_event_at, endpoint })[] }
 *   GET    /console/api/watches/{id}/health  → WatchHealthSeries & { endpoint } (?window=…)
 *
 * `endpoint`: the endpoint a watch delivers to, by name (EndpointName), or null. Below the
 * developer role a URL comes with its query string masked (src/console/mask.ts).
 *   GET    /console/api/alerts               → { endpoints, data }: endpoints failing or switched
 *                                               off, and own-URL watches failing or paused
 *   POST   /console/api/watches              → 201 WatchCreated (the secret, once) | 400/402/409/503
 *   DELETE /console/api/watches/{id}         → 204 | 404
 *   POST   /console/api/watches/{id}/pause   → Watch | 404
 *   POST   /console/api/watches/{id}/resume  → Watch | 402 quota_exceeded | 404
 *   POST   /console/api/watches/{id}/test    → TestOutcome (a signed test event, never stored)
 *   PATCH  /console/api/watches/{id}                          → Watch (webhook_url, label)
 *   POST   /console/api/watches/{id}/rotate-secret           → SecretRotated (the secret, once)
 *   POST   /console/api/watches/{id}/previous-secret/expire  → Watch
 */

import { Type as T } from '@sinclair/typebox';
import type { Role } from '../../accounts/users.js';
import { testTransferAnswer } from '../../api/routes/test-transfers.js';
import {
  expirePreviousSecretAnswer,
  rotateSecretAnswer,
  updateWatchAnswer,
  watchHealthAnswer,
} from '../../api/routes/watches.js';
import { preventCoercion, StringEnum } from '../../api/schemas.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import type { Queryable } from '../../db/pool.js';
import { sendTestEvent, TEST_SENDS_PER_MINUTE } from '../../delivery/test-event.js';
import { createWatchFromRequest } from '../../watches/create.js';
import { type HealthWindowName, healthSummaries } from '../../watches/health.js';
import {
  CreateWatchSchema,
  RotateSecretSchema,
  UpdateWatchSchema,
  watchCreatedView,
  watchView,
  watchWithHealthView,
} from '../../watches/schema.js';
import {
  deleteWatch,
  listWatches,
  pauseWatch,
  resumeWatch,
  type WatchRow,
} from '../../watches/watches.js';
import { requireSession } from '../guard.js';
import { urlForRole } from '../mask.js';
import { ConsoleTestTransferBody, type EndpointName, IdParams } from '../schemas.js';

const hide = { hide: true } as const;

/** The endpoints of `ids` (nulls skipped) of the account, by id, deleted ones included. */
async function endpointNames(
  db: Queryable,
  accountId: string,
  ids: readonly (string | null)[],
  role: Role,
): Promise<Map<string, EndpointName>> {
  const wanted = [...new Set(ids.filter((x): x is string => x !== null))];
  if (wanted.length === 0) return new Map();
  const { rows } = await db.query<{
    id: string;
    label: string | null;
    url: string;
    enabled: boolean;
    deleted: boolean;
  }>(
    `SELECT id, label, url, enabled, deleted_at IS NOT NULL AS deleted FROM endpoints
      WHERE id = ANY($1::text[]) AND account_id = $2`,
    [wanted, accountId],
  );
  return new Map(rows.map((r) => [r.id, { ...r, url: urlForRole(r.url, role) }]));
}

export function consoleWatchRoutes(app: App, deps: AppDeps): void {
  app.get(
    '/console/api/watches',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const rows = await listWatches(deps.db, ctx.accountId, ctx.network);
      // The newest event of each watch: one index probe per watch (events_watch_created).
      const { rows: last } = await deps.db.query<{ id: string; last_event_at: Date | null }>(
        `SELECT w.id, (SELECT e.created_at FROM events e WHERE e.watch_id = w.id
                      ORDER BY e.created_at DESC LIMIT 1) AS last_event_at
         FROM unnest($1::text[]) AS w(id)`,
        [rows.map((r) => r.id)],
      );
      const lastOf = new Map(last.map((r) => [r.id, r.last_event_at]));
      const endpoints = await endpointNames(
        deps.db,
        ctx.accountId,
        rows.map((w) => w.endpoint_id),
        ctx.role,
      );
      const windows = await healthSummaries(
        deps.db,
        rows.filter((w) => w.channel === 'webhook').map((w) => w.id),
      );
      return {
        data: rows.map((w) => ({
          ...watchWithHealthView(w, windows.get(w.id)),
          webhook_url: urlForRole(w.webhook_url, ctx.role),
          last_event_at: lastOf.get(w.id)?.toISOString() ?? null,
          endpoint: w.endpoint_id === null ? null : (endpoints.get(w.endpoint_id) ?? null),
        })),
      };
    },
  );

  // One watch's page: the watch with its health and the chart's buckets.
  app.get(
    '/console/api/watches/:id/health',
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
      const window = (request.query.window ?? 'day') as HealthWindowName;
      const answer = await watchHealthAnswer(
        deps,
        ctx.accountId,
        ctx.network,
        request.params.id,
        window,
      );
      const { watch } = answer;
      const endpoints = await endpointNames(deps.db, ctx.accountId, [watch.endpoint_id], ctx.role);
      return {
        ...answer,
        watch: { ...watch, webhook_url: urlForRole(watch.webhook_url, ctx.role) },
        endpoint: watch.endpoint_id === null ? null : (endpoints.get(watch.endpoint_id) ?? null),
      };
    },
  );

  // The banner (issue 40 item 3): endpoints whose deliveries are failing now or that tronwatch
  // switched off, one entry each with its watch count; and watches with their own URL (or the
  // chat) failing or paused. A watch on an endpoint keeps its own streak but is never listed
  // here: 10,000 deposit addresses behind one failing receiver are one banner, not 10,000.
  app.get(
    '/console/api/alerts',
    { config: { consoleRole: 'viewer' }, schema: hide },
    async (request) => {
      const ctx = requireSession(request);
      const { rows: eps } = await deps.db.query<{
        id: string;
        label: string | null;
        url: string;
        alert_since: Date | null;
        alert_reason: string | null;
        paused_reason: string | null;
        auto_paused_at: Date | null;
        consecutive_failures: number;
        watch_count: number;
      }>(
        `SELECT e.id, e.label, e.url, e.alert_since, e.alert_reason, e.paused_reason,
                e.auto_paused_at, e.consecutive_failures,
                (SELECT count(*)::int FROM watches w
                  WHERE w.endpoint_id = e.id AND w.deleted_at IS NULL) AS watch_count
           FROM endpoints e
          WHERE e.account_id = $1 AND e.network = $2 AND e.deleted_at IS NULL
            AND (e.alert_state IS NOT NULL OR (NOT e.enabled AND e.paused_reason IS NOT NULL))
          ORDER BY coalesce(e.auto_paused_at, e.alert_since) DESC, e.id
          LIMIT 50`,
        [ctx.accountId, ctx.network],
      );
      const { rows } = await deps.db.query<{
        id: string;
        address: string;
        label: string | null;
        alert_state: string | null;
        alert_since: Date | null;
        alert_reason: string | null;
        paused_reason: string | null;
        auto_paused_at: Date | null;
        consecutive_failures: number;
      }>(
        `SELECT id, address, label, alert_state, alert_since, alert_reason, paused_reason,
              auto_paused_at, consecutive_failures
         FROM watches
        WHERE account_id = $1 AND network = $2 AND deleted_at IS NULL AND endpoint_id IS NULL
          AND (alert_state IS NOT NULL OR (status = 'PAUSED' AND paused_reason IS NOT NULL))
        ORDER BY coalesce(auto_paused_at, alert_since) DESC, id
        LIMIT 50`,
        [ctx.accountId, ctx.network],
      );
      return {
        endpoints: eps.map((e) => ({
          endpoint_id: e.id,
          label: e.label,
          url: urlForRole(e.url, ctx.role),
          kind: e.paused_reason !== null ? 'auto_paused' : 'failing',
          since: (e.auto_paused_at ?? e.alert_since)?.toISOString() ?? null,
          reason: e.paused_reason ?? e.alert_reason ?? '',
          consecutive_failures: Number(e.consecutive_failures),
          watch_count: Number(e.watch_count),
        })),
        data: rows.map((r) => ({
          watch_id: r.id,
          address: r.address,
          label: r.label,
          kind: r.paused_reason !== null ? 'auto_paused' : 'failing',
          since: (r.auto_paused_at ?? r.alert_since)?.toISOString() ?? null,
          reason: r.paused_reason ?? r.alert_reason ?? '',
          // The count as it is now (the reason keeps the count that opened the alert).
          consecutive_failures: Number(r.consecutive_failures),
        })),
      };
    },
  );

  app.post(
    '/console/api/watches',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, body: CreateWatchSchema },
      preValidation: async (request) => {
        preventCoercion(CreateWatchSchema, request.body);
      },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      const audit = auditContextOf(request);
      const { watch, secret } = await createWatchFromRequest(
        { ...deps, network: ctx.network },
        ctx.accountId,
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
      request.log.info({ watch_id: watch.id, account_id: ctx.accountId }, 'watch created');
      return reply.code(201).send(watchCreatedView(watch, secret));
    },
  );

  app.delete(
    '/console/api/watches/:id',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const audit = auditContextOf(request);
      const deleted =
        isId(id, 'wh') &&
        (await deps.db.transaction(async (tx) => {
          const done = await deleteWatch(tx, ctx.accountId, ctx.network, id);
          if (done) await recordAudit(tx, audit, { action: 'watch.deleted', targetId: id });
          return done;
        }));
      if (!deleted) throw new ApiError(404, 'watch not found');
      request.log.info({ watch_id: id, account_id: ctx.accountId }, 'watch deleted');
      return reply.code(204).send();
    },
  );

  for (const action of ['pause', 'resume'] as const) {
    app.post(
      `/console/api/watches/:id/${action}`,
      { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
      async (request) => {
        const ctx = requireSession(request);
        const { id } = request.params;
        if (!isId(id, 'wh')) throw new ApiError(404, 'watch not found');
        const headAsOf = action === 'resume' ? await deps.refreshHead?.() : undefined;
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
                const w = await pauseWatch(tx, ctx.accountId, ctx.network, id);
                if (w) await record(tx, w);
                return w;
              })
            : await resumeWatch(
                deps.db,
                ctx.accountId,
                ctx.network,
                id,
                deps.config.ingest.blockIntervalMs,
                record,
                headAsOf,
              );
        if (!watch) throw new ApiError(404, 'watch not found');
        request.log.info({ watch_id: id, account_id: ctx.accountId }, `watch ${action}d`);
        return watchView(watch);
      },
    );
  }

  // Test mode (issue 32): the watch page's "Trigger test deposit", the console's
  // POST /v1/test/transfers (same checks, limits and audit entry). Live mode: 403 test_mode_only.
  app.post(
    '/console/api/watches/:id/test-transfer',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: ConsoleTestTransferBody },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      const event = await testTransferAnswer(deps, request, ctx.accountId, ctx.network, {
        ...request.body,
        watch_id: request.params.id,
      });
      return reply.code(201).send(event);
    },
  );

  app.post(
    '/console/api/watches/:id/test',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const { id } = request.params;
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
      const outcome = isId(id, 'wh')
        ? await sendTestEvent(deps, ctx.accountId, ctx.network, id)
        : undefined;
      if (!outcome) throw new ApiError(404, 'watch not found');
      // Nothing is stored by a test send: its entry is written on its own, after the send.
      await recordAudit(deps.db, auditContextOf(request), {
        action: 'watch.test_sent',
        targetId: id,
        detail: {
          ok: outcome.ok,
          http_status: outcome.http_status,
          error_class: outcome.error_class,
        },
      });
      return outcome;
    },
  );

  app.post(
    '/console/api/watches/:id/rotate-secret',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: RotateSecretSchema },
      preValidation: async (request) => {
        request.body ??= {};
        preventCoercion(RotateSecretSchema, request.body);
      },
    },
    async (request) => {
      const ctx = requireSession(request);
      return rotateSecretAnswer(
        deps,
        request,
        ctx.accountId,
        ctx.network,
        request.params.id,
        request.body.grace_period_seconds,
      );
    },
  );

  app.post(
    '/console/api/watches/:id/previous-secret/expire',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      return expirePreviousSecretAnswer(
        deps,
        request,
        ctx.accountId,
        ctx.network,
        request.params.id,
      );
    },
  );

  app.patch(
    '/console/api/watches/:id',
    {
      config: { consoleRole: 'developer' },
      schema: { ...hide, params: IdParams, body: UpdateWatchSchema },
      preValidation: async (request) => {
        preventCoercion(UpdateWatchSchema, request.body);
      },
    },
    async (request) => {
      const ctx = requireSession(request);
      return updateWatchAnswer(
        deps,
        request,
        ctx.accountId,
        ctx.network,
        request.params.id,
        request.body,
      );
    },
  );
}
