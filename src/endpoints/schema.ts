/**
 * The Endpoint resource's shapes (issue 30 item 1; additive to SPEC): JSON Schemas that validate,
 * serialise and document /v1/endpoints and the console's endpoint calls, and the views that turn a
 * row into them (the secret only in the answers of creation and rotation).
 */
import { type Static, Type as T } from '@sinclair/typebox';
import { NullableString, StringEnum } from '../common/schema.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../net/url-policy.js';
import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from '../watches/rotate-secret.js';
import { LABEL_MAX_LENGTH } from '../watches/schema.js';
import type { EndpointRow } from './endpoints.js';

/** Highest rate limit an endpoint may set, deliveries per second (migration 070's CHECK). */
export const MAX_RATE_LIMIT_PER_SECOND = 10_000;
/** Highest concurrency cap an endpoint may set (migration 070's CHECK). */
export const MAX_CONCURRENCY = 1_000;

const nullableInt = (max: number, description: string) =>
  T.Unsafe<number | null>({ type: ['integer', 'null'], minimum: 1, maximum: max, description });

const RATE_DESCRIPTION =
  'Deliveries started per second to this endpoint at most, across every worker replica (1 to 10000); null: no limit of its own. Waiting for a slot is not an attempt.';
const CONCURRENCY_DESCRIPTION =
  'Deliveries in flight to this endpoint at most, across every worker replica (1 to 1000); null: no cap of its own (each worker still has its DELIVERY_CONCURRENCY).';

const endpointMembers = {
  id: T.String({ description: 'Identifier of the endpoint (`ep_…`).' }),
  url: T.String({ description: 'Where every delivery of its watches is POSTed.' }),
  label: T.Union([T.String({ maxLength: LABEL_MAX_LENGTH }), T.Null()], {
    description: 'Your name for the endpoint; null: none.',
  }),
  enabled: T.Boolean({
    description:
      'False: deliveries to it wait in the outbox (no attempt used, nothing lost) until it is enabled again.',
  }),
  rate_limit_per_second: nullableInt(MAX_RATE_LIMIT_PER_SECOND, RATE_DESCRIPTION),
  max_concurrency: nullableInt(MAX_CONCURRENCY, CONCURRENCY_DESCRIPTION),
  watch_count: T.Integer({
    minimum: 0,
    description: 'Watches (active or paused) that target it.',
  }),
  created_at: T.String({ format: 'date-time' }),
  secret_rotated_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description: 'When the current secret was issued by a rotation; null: the one from creation.',
  }),
  previous_secret_expires_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description:
      "While a rotation's grace period runs, when it ends: until then every delivery is signed with both secrets (`X-Signature` / `X-Signature-Previous`, two `webhook-signature` entries). Null otherwise.",
  }),
  paused_reason: T.Union([T.String(), T.Null()], {
    description:
      'Why tronwatch switched it off itself (`enabled` false: every delivery attempt to it failed for WATCH_AUTO_PAUSE_DAYS); its deliveries wait in the outbox. Null otherwise; enabling it clears it.',
  }),
  auto_paused_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description: 'When tronwatch switched it off automatically; null otherwise.',
  }),
  health: T.Unsafe<EndpointStreak>({ $ref: 'EndpointStreak' }),
};

const dateOrNull = (description: string) =>
  T.Union([T.String({ format: 'date-time' }), T.Null()], { description });

/** The endpoint's delivery streak and alert (migration 091), over every watch that targets it. */
export const EndpointStreakSchema = T.Object(
  {
    last_success_at: dateOrNull('Start of the newest attempt to it answered 2xx; null: none yet.'),
    last_failure_at: dateOrNull('Start of the newest failed attempt to it; null: none yet.'),
    consecutive_failures: T.Integer({
      minimum: 0,
      description:
        'Failed attempts since the newest success, all watches together (0: the newest attempt succeeded).',
    }),
    failing_since: dateOrNull('Start of the first of those failed attempts; null when none.'),
    alert: T.Union(
      [
        T.Object({
          state: StringEnum(['failing'] as const),
          since: T.String({ format: 'date-time' }),
          reason: T.String(),
        }),
        T.Null(),
      ],
      {
        description:
          'Open while deliveries to it keep failing (WATCH_ALERT_FAILURES consecutive failed attempts, or a delivery gone DEAD) until one succeeds; null otherwise.',
      },
    ),
  },
  {
    $id: 'EndpointStreak',
    description:
      "Additive. An endpoint's delivery health, kept by the delivery worker after each batch: the same figures for 1 watch or 100,000.",
  },
);

type EndpointStreak = Static<typeof EndpointStreakSchema>;

/** An endpoint as listed and returned (never its secret). */
export const EndpointSchema = T.Object(endpointMembers, {
  $id: 'Endpoint',
  description:
    'A receiver shared by many watches: its URL, secret (never returned but once), pace and on/off. Every delivery of every watch that targets it (`endpoint_id`) is signed with its secret.',
});

/** `{ data: Endpoint[] }` */
export const EndpointListSchema = T.Object(
  { data: T.Array(T.Unsafe<Static<typeof EndpointSchema>>({ $ref: 'Endpoint' })) },
  { $id: 'EndpointList', description: "The caller's endpoints on this network, newest first." },
);

const SECRET_ONCE =
  'Returned once: the HMAC-SHA256 key of X-Signature (and of `webhook-signature`) for every delivery of every watch on this endpoint. Stored encrypted, never returned again.';

/** An endpoint plus its secret, shown once. */
export const EndpointCreatedSchema = T.Object(
  {
    ...endpointMembers,
    secret: T.String({ pattern: '^whsec_', description: SECRET_ONCE }),
    note: T.String({ description: 'Free text.' }),
  },
  { $id: 'EndpointCreated', description: 'A new endpoint with its secret (shown once).' },
);

/** The endpoint after a rotation, with its new secret. */
export const EndpointSecretRotatedSchema = T.Object(
  {
    ...endpointMembers,
    secret: T.String({ pattern: '^whsec_', description: `The new secret. ${SECRET_ONCE}` }),
    note: T.String({ description: 'Free text.' }),
  },
  {
    $id: 'EndpointSecretRotated',
    description: 'The endpoint after a rotation, with its new secret (shown once).',
  },
);

/** POST /v1/endpoints's body. */
export const CreateEndpointSchema = T.Object(
  {
    url: T.String({
      format: 'uri',
      maxLength: MAX_WEBHOOK_URL_LENGTH,
      description:
        'Public https endpoint (no credentials, no private or reserved address): the rules of a watch’s `webhook_url`.',
    }),
    label: T.Optional(
      NullableString({
        maxLength: LABEL_MAX_LENGTH,
        description: 'Your name for it, at most 100 characters.',
      }),
    ),
    enabled: T.Optional(T.Boolean({ default: true, description: 'Default true.' })),
    rate_limit_per_second: T.Optional(nullableInt(MAX_RATE_LIMIT_PER_SECOND, RATE_DESCRIPTION)),
    max_concurrency: T.Optional(nullableInt(MAX_CONCURRENCY, CONCURRENCY_DESCRIPTION)),
  },
  {
    $id: 'CreateEndpoint',
    description: 'A new endpoint. Unknown members are rejected (400).',
    additionalProperties: false,
  },
);

/** PATCH /v1/endpoints/{id}'s body. */
export const UpdateEndpointSchema = T.Object(
  {
    url: T.Optional(CreateEndpointSchema.properties.url),
    label: T.Optional(
      NullableString({
        maxLength: LABEL_MAX_LENGTH,
        description: 'Your name for it; null or empty removes it.',
      }),
    ),
    enabled: T.Optional(
      T.Boolean({ description: 'False holds its deliveries in the outbox; true resumes them.' }),
    ),
    rate_limit_per_second: T.Optional(nullableInt(MAX_RATE_LIMIT_PER_SECOND, RATE_DESCRIPTION)),
    max_concurrency: T.Optional(nullableInt(MAX_CONCURRENCY, CONCURRENCY_DESCRIPTION)),
  },
  {
    $id: 'UpdateEndpoint',
    description:
      'The members to change; members left out stay as they are. The secret changes only by rotation.',
    additionalProperties: false,
    minProperties: 1,
  },
);

/** POST /v1/endpoints/{id}/rotate-secret's body. */
export const RotateEndpointSecretSchema = T.Object(
  {
    grace_period_seconds: T.Optional(
      T.Integer({
        minimum: 0,
        maximum: MAX_GRACE_SECONDS,
        default: DEFAULT_GRACE_SECONDS,
        description:
          'How long the replaced secret keeps signing beside the new one, seconds (default 86400 = 24 h, at most 604800 = 7 days; 0 = stop at once).',
      }),
    ),
  },
  {
    $id: 'RotateEndpointSecret',
    description: 'Optional body of an endpoint secret rotation.',
    additionalProperties: false,
  },
);

export const ENDPOINT_CREATED_NOTE =
  'Store this secret now: it is shown only once, and verifies every delivery of every watch that targets this endpoint.';
export const ENDPOINT_ROTATED_NOTE =
  'Store this secret now: it is shown only once. Until previous_secret_expires_at every delivery is also signed with the replaced secret (X-Signature-Previous, second webhook-signature entry).';

/** A row as an Endpoint. */
export function endpointView(e: EndpointRow) {
  return {
    id: e.id,
    url: e.url,
    label: e.label,
    enabled: e.enabled,
    rate_limit_per_second: e.rate_limit_per_second,
    max_concurrency: e.max_concurrency,
    watch_count: Number(e.watch_count),
    created_at: new Date(e.created_at).toISOString(),
    secret_rotated_at: e.secret_rotated_at ? new Date(e.secret_rotated_at).toISOString() : null,
    previous_secret_expires_at: e.previous_secret_expires_at
      ? new Date(e.previous_secret_expires_at).toISOString()
      : null,
    paused_reason: e.paused_reason,
    auto_paused_at: iso(e.auto_paused_at),
    health: {
      last_success_at: iso(e.last_success_at),
      last_failure_at: iso(e.last_failure_at),
      consecutive_failures: Number(e.consecutive_failures),
      failing_since: iso(e.failing_since),
      alert:
        e.alert_state === 'failing'
          ? {
              state: 'failing' as const,
              since: iso(e.alert_since) ?? '',
              reason: e.alert_reason ?? '',
            }
          : null,
    },
  };
}

function iso(d: Date | null): string | null {
  return d ? new Date(d).toISOString() : null;
}

/** The answer of POST /v1/endpoints/{id}/redeliver. */
export const EndpointRedeliveredSchema = T.Object(
  {
    redelivered: T.Integer({
      minimum: 0,
      description:
        'Dead letters of the endpoint given a new delivery (at most 10,000 per call: call again for more).',
    }),
  },
  {
    $id: 'EndpointRedelivered',
    description:
      "How many of the endpoint's dead letters (events of its watches whose newest delivery is DEAD) were queued again.",
  },
);

/** POST /v1/endpoints/{id}/replay's body. */
export const ReplayEndpointSchema = T.Object(
  {
    since: T.String({
      format: 'date-time',
      maxLength: 40,
      description:
        'Replay the failed deliveries of events created at or after this instant (RFC 3339 with a time zone, at most 6 fractional digits). Not in the future, at most 30 days back.',
    }),
  },
  {
    $id: 'ReplayEndpoint',
    description: 'Which failed deliveries to replay. Unknown members are rejected (400).',
    additionalProperties: false,
  },
);

/** The answer of POST /v1/endpoints/{id}/replay (src/endpoints/replay.ts EndpointReplay). */
export const EndpointReplaySchema = T.Object(
  {
    id: T.String({ description: 'Identifier of the replay (`rpl_…`).' }),
    endpoint_id: T.String({ description: 'The endpoint (`ep_…`).' }),
    since: T.String({
      format: 'date-time',
      description: 'The request’s `since`, UTC, microseconds.',
    }),
    replayed: T.Integer({
      minimum: 0,
      description:
        'Failed deliveries (events whose newest delivery is DEAD) given a new delivery by this replay: at most 10,000.',
    }),
    next_since: T.Union([T.String({ format: 'date-time' }), T.Null()], {
      description:
        'Set when the bound of 10,000 cut the replay short: the creation instant of the last event taken; call again with `since` = this value for the rest. Null otherwise.',
    }),
    created_at: T.String({ format: 'date-time', description: 'When the replay ran.' }),
    repeated: T.Boolean({
      description:
        'True when the same endpoint and `since` were replayed within the last 24 hours: this answer is that replay, and nothing was queued now.',
    }),
  },
  {
    $id: 'EndpointReplay',
    description:
      "A replay of the endpoint's failed deliveries since a time: each event of a watch on the endpoint, created at or after `since`, whose newest delivery is DEAD gets a new delivery (same event_id and body bytes, attempts from 0).",
  },
);

export type Endpoint = ReturnType<typeof endpointView>;
export type CreateEndpointBody = Static<typeof CreateEndpointSchema>;
export type UpdateEndpointBody = Static<typeof UpdateEndpointSchema>;
export type RotateEndpointSecretBody = Static<typeof RotateEndpointSecretSchema>;
export type ReplayEndpointBody = Static<typeof ReplayEndpointSchema>;

export const endpointSchemas = [
  EndpointStreakSchema,
  EndpointSchema,
  EndpointListSchema,
  EndpointCreatedSchema,
  EndpointSecretRotatedSchema,
  CreateEndpointSchema,
  UpdateEndpointSchema,
  RotateEndpointSecretSchema,
  EndpointRedeliveredSchema,
  ReplayEndpointSchema,
  EndpointReplaySchema,
];
