/**
 * The console's deliveries (issue 12 item 5): the events list with filters, an event's page
 * (payload bytes, headers, every attempt of every delivery chain), the dead letters, redelivery.
 *
 *   GET  /console/api/events?limit&before&since&until&watch_id&status → { data, next_before }
 *   GET  /console/api/events/{id}            → EventDetail | 404
 *   POST /console/api/events/{id}/redeliver  → 201 { notification_id } | 404 | 409
 *   POST /console/api/redeliver {watch_id?, since?, until?} → { redelivered } (every DEAD one)
 *
 * The list is the same page writer as GET /v1/events (src/events/list.ts), with two more filters.
 */
import { refuseNonDecimal } from '../../api/routes/events.js';
import type { App, AppDeps } from '../../api/types.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { isDataException } from '../../db/sqlstate.js';
import { eventDetail } from '../../events/detail.js';
import { eventsPageJson } from '../../events/list.js';
import { redeliverDead, redeliverEvent } from '../../events/redeliver.js';
import { requireSession } from '../guard.js';
import { ConsoleEventsQuery, IdParams, RedeliverBody } from '../schemas.js';

const hide = { hide: true } as const;
const EMPTY_PAGE = '{"data":[],"next_before":null}';

/** A bound PostgreSQL cannot hold (year 0000, 7 fractional digits) → 400 naming the fields. */
function badInstant(fields: string[]): ApiError {
  return new ApiError(
    400,
    'invalid query parameters',
    undefined,
    fields.map((field) => ({ field, message: 'not a representable timestamp' })),
  );
}

export function consoleEventRoutes(app: App, deps: AppDeps): void {
  const network = deps.config.network;

  app.get(
    '/console/api/events',
    {
      config: { consoleRole: 'viewer' },
      schema: { ...hide, querystring: ConsoleEventsQuery },
      preValidation: async (request) => refuseNonDecimal(request.query, ['limit']),
    },
    async (request, reply) => {
      const ctx = requireSession(request);
      const q = request.query;
      if (q.watch_id !== undefined && !isId(q.watch_id, 'wh')) {
        return reply.type('application/json; charset=utf-8').send(EMPTY_PAGE);
      }
      try {
        const page = await eventsPageJson(deps.db, {
          accountId: ctx.accountId,
          network,
          limit: q.limit ?? 50,
          before: q.before,
          since: q.since,
          until: q.until,
          watchId: q.watch_id,
          status: q.status,
        });
        return reply.type('application/json; charset=utf-8').send(page.json);
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant((['before', 'since', 'until'] as const).filter((f) => q[f] !== undefined));
      }
    },
  );

  app.get(
    '/console/api/events/:id',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const detail = await eventDetail(deps.db, ctx.accountId, network, request.params.id);
      if (!detail) throw new ApiError(404, 'event not found');
      return detail;
    },
  );

  app.post(
    '/console/api/events/:id/redeliver',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const id = await redeliverEvent(deps.db, ctx.accountId, network, request.params.id);
      request.log.info(
        { event_id: request.params.id, notification_id: id, account_id: ctx.accountId },
        'event redelivered',
      );
      return reply.code(201).send({ notification_id: id });
    },
  );

  app.post(
    '/console/api/redeliver',
    { config: { consoleRole: 'developer' }, schema: { ...hide, body: RedeliverBody } },
    async (request) => {
      const ctx = requireSession(request);
      const b = request.body;
      if (b.watch_id !== undefined && !isId(b.watch_id, 'wh')) return { redelivered: 0 };
      try {
        const n = await redeliverDead(deps.db, ctx.accountId, network, {
          watchId: b.watch_id,
          since: b.since,
          until: b.until,
        });
        request.log.info({ account_id: ctx.accountId, redelivered: n }, 'dead letters redelivered');
        return { redelivered: n };
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant((['since', 'until'] as const).filter((f) => b[f] !== undefined));
      }
    },
  );
}
