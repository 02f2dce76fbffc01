/**
 * The Watch resource's shapes (SPEC §Watch, §WatchCreated, §Create-watch request): JSON Schemas
 * that validate, serialise and document POST/GET /v1/watches and the console's watch endpoints,
 * and the views that turn a row into them (never a secret but the one returned at creation).
 */
import { type Static, Type as T, type TSchema } from '@sinclair/typebox';
import { NetworkMember, NullableString, StringEnum } from '../common/schema.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../net/url-policy.js';
import type { HealthWindow, HealthWindowName } from './health.js';
import { type Metadata, NullableMetadataSchema } from './metadata.js';
import { DEFAULT_GRACE_SECONDS, MAX_GRACE_SECONDS } from './rotate-secret.js';
import type { WatchRow } from './watches.js';

/** Characters of a watch's label, at most. */
export const LABEL_MAX_LENGTH = 100;

const ASSET_FILTERS = ['USDT', 'TRX', 'ALL'] as const;
const DIRECTIONS = ['incoming', 'outgoing', 'both'] as const;

const watchMembers = {
  id: T.String({ description: 'Identifier of the watch (`wh_…`).' }),
  address: T.String({ description: 'TRON address as registered.' }),
  asset_filter: StringEnum(ASSET_FILTERS),
  direction: StringEnum(DIRECTIONS),
  channel: StringEnum(['webhook', 'telegram'] as const),
  webhook_url: NullableString({
    description: 'Null when the channel is `telegram`, or when the watch delivers to an endpoint.',
  }),
  endpoint_id: NullableString({
    description:
      'Additive. The endpoint (`ep_…`) its deliveries go to, signed with the endpoint’s secret; null: its own webhook_url (and secret), or Telegram. Channel `webhook`.',
  }),
  label: T.Union([T.String({ maxLength: LABEL_MAX_LENGTH }), T.Null()], {
    description:
      'Additive. Your name for the watch (set at creation or with `PATCH /v1/watches/{id}`), at most 100 characters; null: none.',
  }),
  metadata: T.Unsafe<Metadata | null>({
    type: ['object', 'null'],
    additionalProperties: { type: 'string' },
    description:
      'Additive. Your reference for the watch (string values), copied into every event of the watch; null: none.',
  }),
  status: StringEnum(['ACTIVE', 'PAUSED'] as const, {
    description:
      'PAUSED is set in the console; a paused watch matches nothing and holds no quota slot.',
  }),
  created_at: T.String({ format: 'date-time' }),
  active_from_block: T.Integer({
    minimum: 0,
    description:
      'Additive. The watch matches transfers in blocks after this one (block number): the chain head when it was created or last resumed, never above a block tronwatch has seen signed by its SR (with the light client), so no provider’s head claim makes it miss a transfer made after that moment. A transfer made a block or two before it may be reported; none made after.',
  }),
  secret_rotated_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description:
      'Additive. When the current secret was issued by a rotation (`POST /v1/watches/{id}/rotate-secret`); null: the secret given at creation, or a Telegram watch.',
  }),
  paused_reason: T.Union([T.String(), T.Null()], {
    description:
      'Additive. Why tronwatch paused the watch itself (its deliveries all failed for WATCH_AUTO_PAUSE_DAYS); null when active or paused by you. Resuming clears it.',
  }),
  auto_paused_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description: 'Additive. When tronwatch paused the watch automatically; null otherwise.',
  }),
  previous_secret_expires_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
    description:
      "Additive. While a rotation's grace period runs, when it ends: until then every delivery is signed with both the new and the replaced secret (`X-Signature` / `X-Signature-Previous`, two `webhook-signature` entries). Null otherwise.",
  }),
};

/** A `$ref` to a registered schema (as src/api/schemas.ts ref, without the API layer). */
function refTo<S extends TSchema>(schema: S) {
  return T.Unsafe<Static<S>>({ $ref: schema.$id as string });
}

const HealthWindowSchema = T.Object(
  {
    attempts: T.Integer({ minimum: 0, description: 'Delivery attempts started in the window.' }),
    succeeded: T.Integer({ minimum: 0, description: 'Of them, answered 2xx.' }),
    success_rate: T.Union([T.Number({ minimum: 0, maximum: 1 }), T.Null()], {
      description: 'succeeded / attempts; null without attempts.',
    }),
    p50_ms: T.Union([T.Integer({ minimum: 0 }), T.Null()], {
      description: 'Median attempt duration (to the answer, or the failure), ms.',
    }),
    p95_ms: T.Union([T.Integer({ minimum: 0 }), T.Null()], {
      description: '95th percentile of the attempt duration, ms.',
    }),
  },
  { $id: 'HealthWindow', description: "A webhook endpoint's attempts over one window." },
);

/** Health of a webhook watch's endpoint (issue 19 item 1). */
export const WatchHealthSchema = T.Object(
  {
    hour: refTo(HealthWindowSchema),
    day: refTo(HealthWindowSchema),
    week: refTo(HealthWindowSchema),
    last_success_at: T.Union([T.String({ format: 'date-time' }), T.Null()], {
      description: 'Start of the newest attempt answered 2xx; null: none yet.',
    }),
    consecutive_failures: T.Integer({
      minimum: 0,
      description: 'Failed attempts since the newest success (0: the newest attempt succeeded).',
    }),
    failing_since: T.Union([T.String({ format: 'date-time' }), T.Null()], {
      description: 'Start of the first of those failed attempts; null when none.',
    }),
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
          'Open while deliveries keep failing (WATCH_ALERT_FAILURES consecutive failed attempts, or a delivery gone DEAD) until one succeeds; null otherwise.',
      },
    ),
  },
  { $id: 'WatchHealth', description: "A webhook watch's endpoint health." },
);

/** SPEC §Watch. */
export const WatchSchema = T.Object(watchMembers, {
  $id: 'Watch',
  description: 'A watch (SPEC §Watch).',
});

/** A Watch as GET /v1/watches lists it: with its endpoint health (additive). */
export const WatchWithHealthSchema = T.Object(
  {
    ...watchMembers,
    health: T.Union([refTo(WatchHealthSchema), T.Null()], {
      description: 'Additive. The endpoint health of a webhook watch; null for a Telegram watch.',
    }),
  },
  { $id: 'WatchWithHealth', description: 'A Watch and its endpoint health (GET /v1/watches).' },
);

export const healthSchemas = [HealthWindowSchema, WatchHealthSchema, WatchWithHealthSchema];

const createdNote = T.Optional(T.String({ description: 'Free text.' }));

/** SPEC §WatchCreated for a webhook watch: the secret is always there (and only here). */
export const WebhookWatchCreatedSchema = T.Object(
  {
    ...watchMembers,
    channel: StringEnum(['webhook'] as const),
    secret: T.String({
      pattern: '^whsec_',
      description:
        'The HMAC-SHA256 key of X-Signature (and of the Standard Webhooks signature). Returned in this answer only: stored encrypted, never returned again.',
    }),
    note: createdNote,
  },
  { $id: 'WebhookWatchCreated', description: 'A webhook watch just created, with its secret.' },
);

/** SPEC §WatchCreated for a Telegram watch: no secret (nothing to verify). */
export const TelegramWatchCreatedSchema = T.Object(
  { ...watchMembers, channel: StringEnum(['telegram'] as const), note: createdNote },
  { $id: 'TelegramWatchCreated', description: 'A Telegram watch just created (no secret).' },
);

/** A watch just created on an endpoint (issue 30): no secret of its own, the endpoint's signs. */
export const EndpointWatchCreatedSchema = T.Object(
  {
    ...watchMembers,
    channel: StringEnum(['webhook'] as const),
    endpoint_id: T.String({
      description: 'The endpoint (`ep_…`) whose secret signs every delivery of this watch.',
    }),
    note: createdNote,
  },
  {
    $id: 'EndpointWatchCreated',
    description:
      "A watch just created on an endpoint (additive): no secret of its own, the endpoint's signs its deliveries.",
  },
);

/**
 * SPEC §WatchCreated: a Watch plus its secret, shown once. One of three shapes: a webhook watch
 * with its own URL has `secret`; one on an endpoint (additive) has `endpoint_id` and no secret;
 * a Telegram watch neither.
 */
export const WatchCreatedSchema = T.Union(
  [
    refTo(WebhookWatchCreatedSchema),
    refTo(EndpointWatchCreatedSchema),
    refTo(TelegramWatchCreatedSchema),
  ],
  {
    $id: 'WatchCreated',
    description:
      'A Watch plus its secret, shown once (SPEC §WatchCreated): `secret` is present exactly when `channel` is `webhook` and `endpoint_id` is null (a watch on an endpoint is signed with the endpoint’s secret).',
  },
);

/** SPEC §Create-watch request. */
export const CreateWatchSchema = T.Object(
  {
    address: T.String({
      minLength: 1,
      maxLength: 128,
      description: 'TRON address: base58 (starts with `T`) or hex with prefix `41`.',
    }),
    asset_filter: StringEnum(ASSET_FILTERS),
    direction: T.Optional(StringEnum(DIRECTIONS, { default: 'incoming' })),
    webhook_url: T.Optional(
      NullableString({
        format: 'uri',
        maxLength: MAX_WEBHOOK_URL_LENGTH,
        description:
          'Public https endpoint (no credentials, no private or reserved address; plain http only to an address inside the deployment WEBHOOK_ALLOW_CIDRS). One target: give this or `telegram: true`.',
      }),
    ),
    telegram: T.Optional(
      T.Boolean({
        description:
          'True: deliver to the chat connected in the console. One target: give this or `webhook_url`.',
      }),
    ),
    endpoint_id: T.Optional(
      NullableString({
        maxLength: 64,
        description:
          'Additive. One target: deliver to this endpoint of yours (`ep_…`, POST /v1/endpoints), signed with its secret; the watch gets no secret of its own. Another account’s or a deleted endpoint gives 404.',
      }),
    ),
    label: T.Optional(
      NullableString({
        maxLength: LABEL_MAX_LENGTH,
        description:
          'Additive, optional. Your name for the watch, at most 100 characters (spaces around it are dropped; empty: none).',
      }),
    ),
    metadata: T.Optional(NullableMetadataSchema),
    network: T.Optional(NetworkMember()),
  },
  {
    $id: 'CreateWatch',
    description:
      'Exactly one of `webhook_url`, `telegram: true` or `endpoint_id` (additive) must be given. Unknown members are rejected (400, `details` names each), and every member must have its JSON type as sent (no coercion: `"true"` is not a boolean).',
    // Unknown members → 400 (not ignored): a misspelt optional member would otherwise fall back
    // to its default silently (`directon: "outgoing"` → an incoming watch). See app.ts ajv options.
    additionalProperties: false,
  },
);

export const CREATED_NOTE_WEBHOOK =
  'Store this secret now: it is shown only once and is the key for verifying X-Signature.';
export const CREATED_NOTE_TELEGRAM = 'Deliveries go to the chat connected in the console.';
export const CREATED_NOTE_ENDPOINT =
  "Deliveries go to the endpoint, signed with the endpoint's secret: this watch has none of its own.";

/** A row as SPEC's Watch (no secret, no internal columns). */
export function watchView(w: WatchRow) {
  return {
    id: w.id,
    address: w.address,
    asset_filter: w.asset_filter,
    direction: w.direction,
    channel: w.channel,
    webhook_url: w.webhook_url,
    endpoint_id: w.endpoint_id,
    label: w.label,
    metadata: w.metadata,
    status: w.status,
    created_at: w.created_at.toISOString(),
    active_from_block: Number(w.active_from_block),
    paused_reason: w.paused_reason,
    auto_paused_at: w.auto_paused_at?.toISOString() ?? null,
    secret_rotated_at: w.secret_rotated_at?.toISOString() ?? null,
    previous_secret_expires_at: w.previous_secret_expires_at?.toISOString() ?? null,
  };
}

/** A row and its windows as WatchWithHealth (health null for a Telegram watch). */
export function watchWithHealthView(
  w: WatchRow,
  windows: Record<HealthWindowName, HealthWindow> | undefined,
) {
  const iso = (d: Date | null) => (d ? new Date(d).toISOString() : null);
  return {
    ...watchView(w),
    health:
      w.channel !== 'webhook' || !windows
        ? null
        : {
            ...windows,
            last_success_at: iso(w.last_success_at),
            consecutive_failures: w.consecutive_failures,
            failing_since: iso(w.failing_since),
            alert:
              w.alert_state === 'failing'
                ? {
                    state: 'failing' as const,
                    since: iso(w.alert_since) ?? '',
                    reason: w.alert_reason ?? '',
                  }
                : null,
          },
  };
}

/**
 * A row as SPEC's WatchCreated: the Watch, the secret once (webhook watches) and a note.
 * @param secret the webhook watch's secret in clear; null for a Telegram or endpoint watch.
 * @throws Error for a webhook watch without its secret (a bug, answered as a 500).
 */
export function watchCreatedView(
  w: WatchRow,
  secret: string | null,
):
  | Static<typeof WebhookWatchCreatedSchema>
  | Static<typeof EndpointWatchCreatedSchema>
  | Static<typeof TelegramWatchCreatedSchema> {
  const view = watchView(w);
  if (view.channel === 'telegram') {
    return { ...view, channel: 'telegram', note: CREATED_NOTE_TELEGRAM };
  }
  // A watch on an endpoint has no secret of its own (issue 30): the endpoint's signs.
  if (w.endpoint_id !== null) {
    return { ...view, channel: 'webhook', endpoint_id: w.endpoint_id, note: CREATED_NOTE_ENDPOINT };
  }
  // A webhook watch is always created with its secret (src/watches/create.ts).
  if (secret === null) throw new Error('a webhook watch was created without its secret');
  return { ...view, channel: 'webhook', secret, note: CREATED_NOTE_WEBHOOK };
}

/** PATCH /v1/watches/{id}'s body (issue 19 item 4). */
export const UpdateWatchSchema = T.Object(
  {
    webhook_url: T.Optional(
      T.String({
        format: 'uri',
        maxLength: MAX_WEBHOOK_URL_LENGTH,
        description:
          'A new target for a webhook watch, checked as at creation (public https, no credentials, no private or reserved address; plain http only inside WEBHOOK_ALLOW_CIDRS). The secret stays the same.',
      }),
    ),
    label: T.Optional(
      NullableString({
        maxLength: LABEL_MAX_LENGTH,
        description: 'Your name for the watch, at most 100 characters; null or empty removes it.',
      }),
    ),
    metadata: T.Optional(NullableMetadataSchema),
    endpoint_id: T.Optional(
      T.String({
        maxLength: 64,
        description:
          'Additive. Move a webhook watch onto this endpoint of yours (`ep_…`): its own URL and secret are dropped, and its deliveries, pending ones included, go to the endpoint signed with its secret from their next attempt on. A watch already on an endpoint moves to another one. Not with `webhook_url`.',
      }),
    ),
  },
  {
    $id: 'UpdateWatch',
    description:
      "The members to change; members left out stay as they are. Unknown members are rejected (the address, assets, direction and channel are the watch's identity: create another watch to change them).",
    additionalProperties: false,
    minProperties: 1,
  },
);

/** POST /v1/watches/{id}/rotate-secret's body. */
export const RotateSecretSchema = T.Object(
  {
    grace_period_seconds: T.Optional(
      T.Integer({
        minimum: 0,
        maximum: MAX_GRACE_SECONDS,
        default: DEFAULT_GRACE_SECONDS,
        description:
          'How long the replaced secret keeps signing deliveries beside the new one, seconds (default 86400 = 24 h, at most 604800 = 7 days; 0 = stop at once).',
      }),
    ),
  },
  {
    $id: 'RotateSecret',
    description: 'Optional body of a secret rotation. Unknown members are rejected.',
    additionalProperties: false,
  },
);

/** A Watch plus its new secret, shown once. */
export const SecretRotatedSchema = T.Object(
  {
    ...watchMembers,
    secret: T.String({
      pattern: '^whsec_',
      description:
        'The new secret, returned once: X-Signature and the first webhook-signature entry use it from now on. Stored encrypted, never returned again.',
    }),
    note: T.String({ description: 'Free text.' }),
  },
  {
    $id: 'SecretRotated',
    description: 'The watch after a rotation, with its new secret (shown once).',
  },
);

export const ROTATED_NOTE =
  'Store this secret now: it is shown only once. Until previous_secret_expires_at every delivery is also signed with the replaced secret (X-Signature-Previous, second webhook-signature entry).';

/** A row after a rotation, as SecretRotated. */
export function secretRotatedView(w: WatchRow, secret: string) {
  return { ...watchView(w), secret, note: ROTATED_NOTE };
}

export type Watch = Static<typeof WatchSchema>;
export type WatchWithHealth = Omit<Static<typeof WatchWithHealthSchema>, 'health'> & {
  health: Static<typeof WatchHealthSchema> | null;
};
export type UpdateWatchBody = Static<typeof UpdateWatchSchema>;
export type RotateSecretBody = Static<typeof RotateSecretSchema>;
export type CreateWatchBody = Static<typeof CreateWatchSchema>;
