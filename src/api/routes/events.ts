/**
 * Events (SPEC §Event, §EventWithDelivery, §GET /v1/events):
 *
 *   GET  /v1/events?limit&before&since&watch_id&endpoint_id → 200 { data: EventWithDelivery[], next_before }
 *   POST /v1/events/{event_id}/redeliver         → 201 { notification_id } | 404 | 409
 *   GET  /v1/events/{event_id}                   → 200 EventDetail (attempts included) | 404
 *
 * Newest first. `before` is exclusive, `since` inclusive; set `before` to the previous page's
 * `next_before` to page backwards (null: no more). Timestamps keep microseconds end to end so a
 * page boundary inside one block's commit neither skips nor repeats (src/events/list.ts).
 *
 * The Event schema (src/events/event.ts) is also the webhook body (the document's `webhooks`,
 * src/api/routes/docs.ts).
 */

import { Type as T } from '@sinclair/typebox';
import type { FastifyRequest } from 'fastify';
import { auditContextOf } from '../../audit/actor.js';
import { recordAudit } from '../../audit/audit.js';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { refuseNonDecimal } from '../../common/query.js';
import { isDataException } from '../../db/sqlstate.js';
import { eventDetail } from '../../events/detail.js';
import { EventSchema, EventWithDeliverySchema, TestEventSchema } from '../../events/event.js';
import { eventsPageJson } from '../../events/list.js';
import { redeliverEvent } from '../../events/redeliver.js';
import { EVENT_PROOFS } from '../../tron/types.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  type FieldError,
  NetworkMember,
  NullableString,
  ref,
  StringEnum,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';
import { NetworkQuery } from './watches.js';

/** The scanned-through watermark (GET /v1/status, GET /v1/events). */
export const ScannedThroughSchema = T.Object(
  {
    block_number: T.Integer({ minimum: 0 }),
    block_timestamp: T.String({ format: 'date-time', description: 'ISO 8601, milliseconds, UTC.' }),
  },
  { $id: 'ScannedThrough', description: 'The newest block whose events are all committed.' },
);

export const EventListSchema = T.Object(
  {
    data: T.Array(ref(EventWithDeliverySchema)),
    scanned_through: T.Unsafe<{ block_number: number; block_timestamp: string } | null>({
      anyOf: [ref(ScannedThroughSchema), { type: 'null' }],
      description:
        'Additive. The newest block whose events are all committed, read in the same snapshot as the page: every matching transfer of a block up to it that falls within the query is in this answer. Null before the first block is committed.',
    }),
    next_before: NullableString({
      format: 'date-time',
      description:
        'created_at of the last item (UTC, microseconds) when more events follow: pass it as `before` for the next page. Null when there are no more.',
    }),
  },
  { $id: 'EventList', description: 'One page of events, newest first.' },
);

const instant = (description: string) =>
  T.Optional(
    T.String({
      format: 'date-time',
      description: `${description} RFC 3339 date-time with a time zone and at most 6 fractional digits (microseconds).`,
    }),
  );

/** Unknown query parameters are rejected (400, `details` names each): see NetworkQuery. */
export const EventsQuery = T.Object(
  {
    limit: T.Optional(
      T.Integer({ minimum: 1, maximum: 200, default: 50, description: 'Page size: 1 to 200.' }),
    ),
    before: instant('Exclusive upper bound on creation time (the previous page’s `next_before`).'),
    since: instant('Inclusive lower bound on creation time.'),
    watch_id: T.Optional(
      T.String({
        maxLength: 64,
        description: "Only this watch's events (another account's watch yields no data).",
      }),
    ),
    network: T.Optional(NetworkMember()),
    proof: T.Optional(
      StringEnum(EVENT_PROOFS, {
        description:
          'Additive. Only events established at this level (`signed`, `quorum`, `provider`, or `test` for test deposits; see Event.proof).',
      }),
    ),
    held: T.Optional(
      StringEnum(['true', 'false'] as const, {
        description:
          'Additive (issue 36). `true`: only events with a held delivery (`delivery.held` not null: one provider’s word, waiting for a second provider); `false`: only the others.',
      }),
    ),
    endpoint_id: T.Optional(
      T.String({
        maxLength: 64,
        description:
          "Additive. Only the events of the watches that deliver to this endpoint (`ep_…`) now (another account's endpoint yields no data).",
      }),
    ),
  },
  { additionalProperties: false },
);

const NullableHeaders = (description: string) =>
  T.Unsafe<Record<string, string> | null>({
    type: ['object', 'null'],
    additionalProperties: { type: 'string' },
    description,
  });
const NullableInteger = (description: string) =>
  T.Unsafe<number | null>({ type: ['integer', 'null'], description });

/** One delivery attempt as recorded (src/events/detail.ts AttemptView). */
export const AttemptSchema = T.Object(
  {
    attempt: T.Integer({ minimum: 1, description: '1 to 6 within its notification.' }),
    throttled: T.Boolean({
      description:
        'A Bot API 429 on a chat delivery: rescheduled at its retry_after, not one of the six attempts.',
    }),
    started_at: T.String({ format: 'date-time' }),
    duration_ms: T.Integer({ minimum: 0 }),
    http_status: NullableInteger('The receiver’s HTTP status; null when no answer came.'),
    error: NullableString({ description: 'Why the attempt failed; null on success.' }),
    error_class: NullableString({
      description:
        'timeout | tls | refused | dns | blocked | network | http | lost; null on success.',
    }),
    request_headers: NullableHeaders(
      'Headers sent (X-Signature and webhook-* included, never the secret).',
    ),
    response_headers: NullableHeaders('Headers of the answer.'),
    response_body: NullableString({ description: 'First 4 KB of the answer’s body, as text.' }),
  },
  { $id: 'Attempt', description: 'One delivery attempt.' },
);

/** One delivery chain of an event (the ingester's, then one per redelivery). */
export const NotificationSchema = T.Object(
  {
    id: T.String({ description: 'Notification id (`ntf_…`).' }),
    status: StringEnum(['PENDING', 'DELIVERED', 'DEAD'] as const),
    attempts: T.Integer({ minimum: 0, description: 'Attempts made (throttled ones not counted).' }),
    created_at: T.String({ format: 'date-time' }),
    next_attempt_at: NullableString({
      format: 'date-time',
      description: 'When the next attempt is due (PENDING and not held), else null.',
    }),
    delivered_at: NullableString({ format: 'date-time' }),
    held: T.Unsafe<{ reason: string; since: string; detail: string | null } | null>({
      anyOf: [
        T.Object({
          reason: T.String({ description: 'As `delivery.held.reason` of the Event list.' }),
          since: T.String({ format: 'date-time' }),
          detail: NullableString({
            description:
              'The last confirmation round: how many providers reported the Transfer log, and what the others answered (providers named by their position in the deployment’s list); null before the first round.',
          }),
        }),
        { type: 'null' },
      ],
      description:
        'Additive (issue 36): not null while this PENDING notification is held: its event is `proof: provider` and waits for a second provider to confirm it (see `delivery.held` of the Event list).',
    }),
    attempt_log: T.Array(ref(AttemptSchema), { description: 'Its attempts, oldest first.' }),
  },
  { $id: 'Notification', description: 'One delivery chain of an event.' },
);

/** One event with every delivery chain and attempt (GET /v1/events/{event_id}). */
export const EventDetailSchema = T.Object(
  {
    event: ref(EventSchema),
    payload: T.String({ description: 'The webhook body exactly as sent, UTF-8 text.' }),
    notifications: T.Array(ref(NotificationSchema), {
      description: 'Its delivery chains, newest first (a redelivery starts a new one).',
    }),
  },
  { $id: 'EventDetail', description: 'One event with its delivery history.' },
);

export const eventSchemas = [
  EventSchema,
  TestEventSchema,
  EventWithDeliverySchema,
  ScannedThroughSchema,
  EventListSchema,
  AttemptSchema,
  NotificationSchema,
  EventDetailSchema,
];

/** Problems PostgreSQL would otherwise raise (or round away) for a date-time the format admits. */
function checkInstant(field: string, value: string | undefined, problems: FieldError[]): void {
  if (value === undefined) return;
  if (/\.[0-9]{7,}/.test(value)) {
    problems.push({ field, message: 'at most 6 fractional digits (microseconds)' });
  } else if (/^0000/.test(value)) {
    problems.push({ field, message: 'year must be 0001 or later' });
  }
}

/**
 * Register the events route. It re-checks the API key in its page statement, so the guard may
 * take the caller from the key cache (src/api/auth.ts): one database round trip per page.
 * `verifyCaller` looks a cached caller up in the database (throws its 401 when the key was
 * revoked since); the route calls it before answering an empty page.
 */
export function eventRoutes(
  app: App,
  deps: AppDeps & { verifyCaller: (request: FastifyRequest) => Promise<void> },
): void {
  app.get(
    '/v1/events',
    {
      config: { keyCheckedInQuery: true },
      // `limit` must be spelt in decimal: ajv's coercion would read `0x10`, `1e1`, ` 16` as 16.
      preValidation: async (request) => refuseNonDecimal(request.query, ['limit']),
      schema: {
        operationId: 'listEvents',
        summary: 'List events with their delivery state',
        description:
          'Every matched event with its delivery state, newest first, for reconciliation. Page backwards with `before` = `next_before`.',
        tags: ['events'],
        security: BEARER_SECURITY,
        querystring: EventsQuery,
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EventListSchema), 'One page of events.'),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const verify = () => deps.verifyCaller(request);
      const q = request.query;
      const problems: FieldError[] = [];
      // ajv coerces `limit=1e400` / `Infinity` to ±Infinity and then skips minimum/maximum.
      if (q.limit !== undefined && !Number.isSafeInteger(q.limit)) {
        problems.push({ field: 'limit', message: 'must be integer' });
      }
      checkInstant('before', q.before, problems);
      checkInstant('since', q.since, problems);
      if (problems.length > 0)
        throw new ApiError(400, 'invalid query parameters', undefined, problems);
      // A malformed id names no watch (as for DELETE): no data, and no NUL byte reaches SQL.
      if (
        (q.watch_id !== undefined && !isId(q.watch_id, 'wh')) ||
        (q.endpoint_id !== undefined && !isId(q.endpoint_id, 'ep'))
      ) {
        if (!auth.verified) await verify();
        return { data: [], next_before: null, scanned_through: null };
      }
      try {
        // The page is JSON text already (src/events/list.ts, the hot path): sent as is, the
        // response schema documents it and the tests check answers against it.
        const page = await eventsPageJson(deps.db, {
          accountId: auth.accountId,
          network: auth.network,
          limit: q.limit ?? 50,
          before: q.before,
          since: q.since,
          watchId: q.watch_id,
          endpointId: q.endpoint_id,
          proof: q.proof,
          held: q.held === undefined ? undefined : q.held === 'true',
          // A caller from the key cache: the page's statement checks the key is not revoked.
          activeKeyId: auth.verified ? undefined : auth.keyId,
        });
        // No row: an empty page or, for a cached caller, maybe a key revoked since. The lookup
        // tells which (and throws the 401 revoked_api_key it would have thrown).
        if (page.empty && !auth.verified) await verify();
        // (A JSON string is not the schema's object type: `never` lets it through.)
        return reply.type('application/json; charset=utf-8').send(page.json as never);
      } catch (err) {
        if (!isDataException(err)) throw err;
        // A date-time the format admits but PostgreSQL cannot hold.
        const fields = (['before', 'since'] as const).filter((f) => q[f] !== undefined);
        throw new ApiError(
          400,
          'invalid query parameters',
          undefined,
          fields.map((field) => ({ field, message: 'not a representable timestamp' })),
        );
      }
    },
  );

  app.get(
    '/v1/events/:event_id',
    {
      schema: {
        operationId: 'getEvent',
        summary: 'One event with its attempts',
        description:
          'The event, the exact body every attempt sent, and each delivery chain (newest first) with its attempts as recorded: time, duration, HTTP status or error and its class, the headers sent (signatures, never the secret) and the start of the answer.',
        tags: ['events'],
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({
          event_id: T.String({ maxLength: 64, description: 'Event id (`evt_…`).' }),
        }),
        response: {
          ...commonV1Responses(),
          200: v1Response(ref(EventDetailSchema), 'The event and its delivery history.'),
          404: errorResponse("No such event of the caller's."),
        },
      },
    },
    async (request) => {
      const auth = requireAuth(request);
      const id = request.params.event_id;
      const detail = isId(id, 'evt')
        ? await eventDetail(deps.db, auth.accountId, auth.network, id)
        : undefined;
      if (!detail) throw new ApiError(404, 'event not found');
      return detail;
    },
  );

  app.post(
    '/v1/events/:event_id/redeliver',
    {
      schema: {
        operationId: 'redeliverEvent',
        summary: 'Redeliver an event',
        description:
          'A new delivery chain for the event: the same event_id and payload bytes, attempts from 0, the schedule from now. The earlier chains and their attempts are kept; GET /v1/events then shows the new one. Refused (409) while the newest chain is still PENDING.',
        tags: ['events'],
        security: BEARER_SECURITY,
        querystring: NetworkQuery,
        params: T.Object({
          event_id: T.String({ maxLength: 64, description: 'Event id (`evt_…`).' }),
        }),
        response: {
          ...commonV1Responses(),
          201: v1Response(
            T.Object({
              notification_id: T.String({ description: 'The new notification (`ntf_…`).' }),
            }),
            'Redelivery scheduled.',
          ),
          404: errorResponse("No such event of the caller's."),
          409: errorResponse(
            'The event is still being delivered (its newest notification is PENDING).',
          ),
          413: errorResponse('Body too large.'),
          415: errorResponse('Content-Type is not application/json.'),
        },
      },
    },
    async (request, reply) => {
      const auth = requireAuth(request);
      const audit = auditContextOf(request);
      const id = await redeliverEvent(
        deps.db,
        auth.accountId,
        auth.network,
        request.params.event_id,
        (tx, n) =>
          recordAudit(tx, audit, {
            action: 'event.redelivered',
            targetId: request.params.event_id,
            detail: { notification_id: n },
          }),
      );
      request.log.info(
        { event_id: request.params.event_id, notification_id: id, account_id: auth.accountId },
        'event redelivered',
      );
      return reply.code(201).send({ notification_id: id });
    },
  );
}
