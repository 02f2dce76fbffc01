/**
 * The console's watches (issue 12 item 4), on the same domain functions as /v1/watches: creation
 * runs createWatchFromRequest (one rule set, the same answers), pause/resume/delete the same
 * functions as the public endpoints.
 *
 *   GET    /console/api/watches              → { data: (Watch & { last_event_at })[] }
 *   POST   /console/api/watches              → 201 WatchCreated (the secret, once) | 400/402/409/503
 *   DELETE /console/api/watches/{id}         → 204 | 404
 *   POST   /console/api/watches/{id}/pause   → Watch | 404
 *   POST   /console/api/watches/{id}/resume  → Watch | 402 quota_exceeded | 404
 *   POST   /console/api/watches/{id}/test    → TestOutcome (a signed test event, never stored)
 */

import { preventCoercion } from '../../api/schemas.js';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import type { Queryable } from '../../db/pool.js';
import { sendTestEvent, TEST_SENDS_PER_MINUTE } from '../../delivery/test-event.js';
import { createWatchFromRequest } from '../../watches/create.js';
import { CreateWatchSchema, watchCreatedView, watchView } from '../../watches/schema.js';
import {
  deleteWatch,
  listWatches,
  pauseWatch,
  resumeWatch,
  type WatchRow,
} from '../../watches/watches.js';
import { requireSession } from '../guard.js';
import { IdParams } from '../schemas.js';

const hide = { hide: true } as const;

export function consoleWatchRoutes(app: App, deps: AppDeps): void {
  const network = deps.config.network;

  app.get('/console/api/watches', { schema: hide }, async (request) => {
    const ctx = requireSession(request);
    const rows = await listWatches(deps.db, ctx.accountId, network);
    // The newest event of each watch: one index probe per watch (events_watch_created).
    const { rows: last } = await deps.db.query<{ id: string; last_event_at: Date | null }>(
      `SELECT w.id, (SELECT e.created_at FROM events e WHERE e.watch_id = w.id
                      ORDER BY e.created_at DESC LIMIT 1) AS last_event_at
         FROM unnest($1::text[]) AS w(id)`,
      [rows.map((r) => r.id)],
    );
    const lastOf = new Map(last.map((r) => [r.id, r.last_event_at]));
    return {
      data: rows.map((w) => ({
        ...watchView(w),
        last_event_at: lastOf.get(w.id)?.toISOString() ?? null,
      })),
    };
  });

  app.post(
    '/console/api/watches',
    {
      schema: { ...hide, body: CreateWatchSchema },
      preValidation: async (request) => {
        preventCoercion(CreateWatchSchema, request.body);
      },
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      const audit = auditContextOf(request);
      const { watch, secret } = await createWatchFromRequest(
        deps,
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
    { schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const { id } = request.params;
      const audit = auditContextOf(request);
      const deleted =
        isId(id, 'wh') &&
        (await deps.db.transaction(async (tx) => {
          const done = await deleteWatch(tx, ctx.accountId, network, id);
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
      { schema: { ...hide, params: IdParams } },
      async (request) => {
        const ctx = requireSession(request);
        const { id } = request.params;
        if (!isId(id, 'wh')) throw new ApiError(404, 'watch not found');
        if (action === 'resume') await deps.refreshHead?.();
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
                const w = await pauseWatch(tx, ctx.accountId, network, id);
                if (w) await record(tx, w);
                return w;
              })
            : await resumeWatch(
                deps.db,
                ctx.accountId,
                network,
                id,
                deps.config.ingest.blockIntervalMs,
                record,
              );
        if (!watch) throw new ApiError(404, 'watch not found');
        request.log.info({ watch_id: id, account_id: ctx.accountId }, `watch ${action}d`);
        return watchView(watch);
      },
    );
  }

  app.post(
    '/console/api/watches/:id/test',
    { schema: { ...hide, params: IdParams } },
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
        ? await sendTestEvent(deps, ctx.accountId, network, id)
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
}
