/**
 * The Watch resource's shapes (SPEC §Watch, §WatchCreated, §Create-watch request): JSON Schemas
 * that validate, serialise and document POST/GET /v1/watches and the console's watch endpoints,
 * and the views that turn a row into them (never a secret but the one returned at creation).
 */
import { type Static, Type as T } from '@sinclair/typebox';
import { NullableString, StringEnum } from '../common/schema.js';
import { MAX_WEBHOOK_URL_LENGTH } from '../net/url-policy.js';
import type { WatchRow } from './watches.js';

const ASSET_FILTERS = ['USDT', 'TRX', 'ALL'] as const;
const DIRECTIONS = ['incoming', 'outgoing', 'both'] as const;

const watchMembers = {
  id: T.String({ description: 'Identifier of the watch (`wh_…`).' }),
  address: T.String({ description: 'TRON address as registered.' }),
  asset_filter: StringEnum(ASSET_FILTERS),
  direction: StringEnum(DIRECTIONS),
  channel: StringEnum(['webhook', 'telegram'] as const),
  webhook_url: NullableString({ description: 'Null when the channel is `telegram`.' }),
  status: StringEnum(['ACTIVE', 'PAUSED'] as const, {
    description:
      'PAUSED is set in the console; a paused watch matches nothing and holds no quota slot.',
  }),
  created_at: T.String({ format: 'date-time' }),
};

/** SPEC §Watch. */
export const WatchSchema = T.Object(watchMembers, {
  $id: 'Watch',
  description: 'A watch (SPEC §Watch).',
});

/** SPEC §WatchCreated. */
export const WatchCreatedSchema = T.Object(
  {
    ...watchMembers,
    secret: T.Optional(
      T.String({
        pattern: '^whsec_',
        description:
          'Returned once, only for webhook watches: the HMAC-SHA256 key of X-Signature. Stored encrypted, never returned again.',
      }),
    ),
    note: T.Optional(T.String({ description: 'Free text.' })),
  },
  { $id: 'WatchCreated', description: 'A Watch plus its secret, shown once (SPEC §WatchCreated).' },
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
          'Public https endpoint (no credentials, no private or reserved address). One target: give this or `telegram: true`.',
      }),
    ),
    telegram: T.Optional(
      T.Boolean({
        description:
          'True: deliver to the chat connected in the console. One target: give this or `webhook_url`.',
      }),
    ),
    network: T.Optional(
      StringEnum(['mainnet'] as const, {
        description:
          'Optional. Any other value (e.g. `nile`, `shasta`) gives 400 testnet_unsupported.',
      }),
    ),
  },
  {
    $id: 'CreateWatch',
    description:
      'Exactly one of `webhook_url` or `telegram: true` must be given. Unknown members are rejected (400, `details` names each), and every member must have its JSON type as sent (no coercion: `"true"` is not a boolean).',
    // Unknown members → 400 (not ignored): a misspelt optional member would otherwise fall back
    // to its default silently (`directon: "outgoing"` → an incoming watch). See app.ts ajv options.
    additionalProperties: false,
  },
);

export const CREATED_NOTE_WEBHOOK =
  'Store this secret now: it is shown only once and is the key for verifying X-Signature.';
export const CREATED_NOTE_TELEGRAM = 'Deliveries go to the chat connected in the console.';

/** A row as SPEC's Watch (no secret, no internal columns). */
export function watchView(w: WatchRow) {
  return {
    id: w.id,
    address: w.address,
    asset_filter: w.asset_filter,
    direction: w.direction,
    channel: w.channel,
    webhook_url: w.webhook_url,
    status: w.status,
    created_at: w.created_at.toISOString(),
  };
}

/** A row as SPEC's WatchCreated: the Watch, the secret once (webhook watches) and a note. */
export function watchCreatedView(w: WatchRow, secret: string | null) {
  return {
    ...watchView(w),
    ...(secret !== null ? { secret, note: CREATED_NOTE_WEBHOOK } : { note: CREATED_NOTE_TELEGRAM }),
  };
}

export type Watch = Static<typeof WatchSchema>;
export type CreateWatchBody = Static<typeof CreateWatchSchema>;
