/**
 * The console's deliveries (issue 12 item 5): the events list with filters, an event's page
 * (payload bytes, headers, every attempt of every delivery chain), the dead letters, redelivery.
 *
 *   GET  /console/api/events?limit&before|after&since&until&watch_id&endpoint_id&status&q&asset&direction&channel
 *        → { data, next_before, next_after } (newest first; next_after: the cursor of the newer page)
 *   GET  /console/api/events/export?format=csv|json&…the same filters → the whole list, streamed
 *   GET  /console/api/events/{id}            → EventDetail | 404
 *   POST /console/api/events/{id}/redeliver  → 201 { notification_id } | 404 | 409
 *   POST /console/api/redeliver {watch_id?, endpoint_id?, since?, until?, q?, asset?, direction?, channel?}
 *                                           → { redelivered } (every DEAD one the filters show)
 *   GET  /console/api/redeliver/count?…the same scope → { count, limit } (what "Redeliver all"
 *                                             would take now, for its confirmation; at most limit)
 *
 * The list is the same page writer as GET /v1/events (src/events/list.ts), with two more filters.
 */
import { Readable } from 'node:stream';
import type { App, AppDeps } from '../../api/types.js';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { refuseNonDecimal } from '../../common/query.js';
import { isDataException } from '../../db/sqlstate.js';
import { eventDetail } from '../../events/detail.js';
import { exportEvents } from '../../events/export.js';
import { type EventSearch, eventsPageJson, parseEventSearch } from '../../events/list.js';
import {
  BULK_REDELIVERY_LIMIT,
  countDead,
  redeliverDead,
  redeliverEvent,
} from '../../events/redeliver.js';
import { requireSession } from '../guard.js';
import {
  ConsoleEventsQuery,
  ConsoleExportQuery,
  type ConsoleExportQueryT,
  IdParams,
  RedeliverBody,
} from '../schemas.js';

const hide = { hide: true } as const;
const EMPTY_PAGE = '{"data":[],"next_before":null,"next_after":null}';

/** The search term as a search, or a 400 saying what the box accepts. */
function searchOf(q: string | undefined): EventSearch | undefined {
  if (q === undefined || q.trim() === '') return undefined;
  const s = parseEventSearch(q);
  if (s) return s;
  throw new ApiError(400, 'invalid query parameters', undefined, [
    {
      field: 'q',
      message:
        'search for a transaction id (64 hex characters), an event id (evt_…) or a TRON address (34 characters, starts with T)',
    },
  ]);
}

/** `since` after `until`: refused in plain words rather than answered with an empty list. */
function checkRange(q: { since?: string; until?: string }): void {
  if (q.since !== undefined && q.until !== undefined && Date.parse(q.since) > Date.parse(q.until)) {
    throw new ApiError(400, 'invalid query parameters', undefined, [
      { field: 'since', message: '"From" is after "To": choose a start before the end' },
    ]);
  }
}

/** The list filters of a query (everything but paging). */
function filtersOf(q: Omit<ConsoleExportQueryT, 'format'>) {
  return {
    since: q.since,
    until: q.until,
    watchId: q.watch_id,
    status: q.status,
    search: searchOf(q.q),
    asset: q.asset,
    direction: q.direction,
    channel: q.channel,
    proof: q.proof,
    held: q.held === undefined ? undefined : q.held === 'true',
    endpointId: q.endpoint_id,
  };
}

/**
 * A watch or endpoint id that cannot name one of the account's (wrong prefix, stray bytes): the
 * list is empty, as for another account's id, and nothing odd reaches SQL.
 */
function namesNothing(q: { watch_id?: string | undefined; endpoint_id?: string | undefined }) {
  return (
    (q.watch_id !== undefined && !isId(q.watch_id, 'wh')) ||
    (q.endpoint_id !== undefined && !isId(q.endpoint_id, 'ep'))
  );
}

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
      const filters = filtersOf(q);
      checkRange(q);
      if (q.before !== undefined && q.after !== undefined) {
        throw new ApiError(400, 'invalid query parameters', undefined, [
          { field: 'after', message: 'give before or after, not both' },
        ]);
      }
      if (namesNothing(q)) {
        return reply.type('application/json; charset=utf-8').send(EMPTY_PAGE);
      }
      try {
        const page = await eventsPageJson(deps.db, {
          accountId: ctx.accountId,
          network: ctx.network,
          limit: q.limit ?? 50,
          before: q.before,
          after: q.after,
          ...filters,
        });
        // next_after: newer events exist above this page (it was reached through `before`, or an
        // `after` page has more above it); the cursor is the page's newest event.
        const newer =
          page.newest !== undefined &&
          (q.after !== undefined ? page.moreAfter === true : q.before !== undefined);
        const nextAfter = newer ? `"${page.newest}"` : 'null';
        return reply
          .type('application/json; charset=utf-8')
          .send(`${page.json.slice(0, -1)},"next_after":${nextAfter}}`);
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant(
          (['before', 'after', 'since', 'until'] as const).filter((f) => q[f] !== undefined),
        );
      }
    },
  );

  app.get(
    '/console/api/events/export',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, querystring: ConsoleExportQuery } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const q = request.query;
      const filters = filtersOf(q);
      checkRange(q);
      const format = q.format;
      // An unknown watch id matches nothing: the same header-only (or empty) file.
      const none = namesNothing(q);
      const pieces = exportEvents(
        deps.db,
        {
          accountId: ctx.accountId,
          network: ctx.network,
          ...filters,
          ...(none ? { watchId: 'wh_none', endpointId: undefined } : {}),
        },
        format,
      );
      // The first piece reads the first chunk: a bound PostgreSQL cannot hold is a 400 here,
      // before anything is sent.
      let first: IteratorResult<string>;
      try {
        first = await pieces.next();
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant((['since', 'until'] as const).filter((f) => q[f] !== undefined));
      }
      async function* all() {
        if (!first.done) yield first.value;
        yield* pieces;
      }
      const stamp = new Date().toISOString().slice(0, 19).replace(/[-:]/g, '').replace('T', '-');
      const name = `tronwatch-events-${stamp}.${format}`;
      request.log.info({ account_id: ctx.accountId, format }, 'events exported');
      return reply
        .type(format === 'csv' ? 'text/csv; charset=utf-8' : 'application/json; charset=utf-8')
        .header('content-disposition', `attachment; filename="${name}"`)
        .header('cache-control', 'no-store')
        .send(Readable.from(all()));
    },
  );

  app.get(
    '/console/api/events/:id',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, params: IdParams } },
    async (request) => {
      const ctx = requireSession(request);
      const detail = await eventDetail(deps.db, ctx.accountId, ctx.network, request.params.id);
      if (!detail) throw new ApiError(404, 'event not found');
      return detail;
    },
  );

  app.post(
    '/console/api/events/:id/redeliver',
    { config: { consoleRole: 'developer' }, schema: { ...hide, params: IdParams } },
    async (request, reply) => {
      const ctx = requireSession(request);
      const audit = auditContextOf(request);
      const id = await redeliverEvent(
        deps.db,
        ctx.accountId,
        ctx.network,
        request.params.id,
        (tx, n) =>
          recordAudit(tx, audit, {
            action: 'event.redelivered',
            targetId: request.params.id,
            detail: { notification_id: n },
          }),
      );
      request.log.info(
        { event_id: request.params.id, notification_id: id, account_id: ctx.accountId },
        'event redelivered',
      );
      return reply.code(201).send({ notification_id: id });
    },
  );

  app.get(
    '/console/api/redeliver/count',
    { config: { consoleRole: 'viewer' }, schema: { ...hide, querystring: RedeliverBody } },
    async (request) => {
      const ctx = requireSession(request);
      const b = request.query;
      const search = searchOf(b.q);
      checkRange(b);
      if (namesNothing(b)) return { count: 0, limit: BULK_REDELIVERY_LIMIT };
      try {
        const count = await countDead(deps.db, ctx.accountId, ctx.network, {
          watchId: b.watch_id,
          since: b.since,
          until: b.until,
          search,
          asset: b.asset,
          direction: b.direction,
          channel: b.channel,
          endpointId: b.endpoint_id,
        });
        return { count, limit: BULK_REDELIVERY_LIMIT };
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant((['since', 'until'] as const).filter((f) => b[f] !== undefined));
      }
    },
  );

  app.post(
    '/console/api/redeliver',
    { config: { consoleRole: 'developer' }, schema: { ...hide, body: RedeliverBody } },
    async (request) => {
      const ctx = requireSession(request);
      const b = request.body;
      const search = searchOf(b.q);
      checkRange(b);
      if (namesNothing(b)) return { redelivered: 0 };
      // The audit entry names the scope: the filters as given (a search term is an id, a tx id
      // or an address, none of them a secret).
      const scope = {
        watch_id: b.watch_id,
        endpoint_id: b.endpoint_id,
        since: b.since,
        until: b.until,
        q: b.q,
        asset: b.asset,
        direction: b.direction,
        channel: b.channel,
      };
      try {
        const audit = auditContextOf(request);
        const n = await redeliverDead(
          deps.db,
          ctx.accountId,
          ctx.network,
          {
            watchId: b.watch_id,
            since: b.since,
            until: b.until,
            search,
            asset: b.asset,
            direction: b.direction,
            channel: b.channel,
            endpointId: b.endpoint_id,
          },
          (tx, count) =>
            recordAudit(tx, audit, {
              action: 'event.bulk_redelivered',
              targetId: b.watch_id ?? b.endpoint_id ?? null,
              detail: { redelivered: count, ...scope },
            }),
        );
        request.log.info({ account_id: ctx.accountId, redelivered: n }, 'dead letters redelivered');
        return { redelivered: n };
      } catch (err) {
        if (!isDataException(err)) throw err;
        throw badInstant((['since', 'until'] as const).filter((f) => b[f] !== undefined));
      }
    },
  );
}
