/**
 * Watches (SPEC §Watch, §WatchCreated, §CreateWatch, §POST/GET/DELETE /v1/watches):
 *
 *   POST   /v1/watches       CreateWatch → 201 WatchCreated (the secret, once)
 *   GET    /v1/watches       → 200 { data: Watch[] }, newest first, never a secret
 *   DELETE /v1/watches/{id}  → 204; 404 when missing, malformed, deleted or someone else's
 *
 * The handlers check what needs code (exactly one target, the address, the webhook URL policy)
 * and call src/watches/watches.ts for the rest (duplicate, quota, activation, secret).
 */
import { Type as T } from '@sinclair/typebox';
import { ApiError } from '../../common/errors.js';
import { isId } from '../../common/ids.js';
import { checkWebhookUrl, MAX_WEBHOOK_URL_LENGTH } from '../../net/url-policy.js';
import { InvalidAddressError, parseAddress } from '../../tron/address.js';
import { createWatch, deleteWatch, listWatches, type WatchRow } from '../../watches/watches.js';
import { requireAuth } from '../auth.js';
import {
  BEARER_SECURITY,
  commonV1Responses,
  errorResponse,
  type FieldError,
  NullableString,
  preventCoercion,
  QuotaExceededSchema,
  RATE_LIMIT_HEADERS,
  ref,
  StringEnum,
  v1Response,
} from '../schemas.js';
import type { App, AppDeps } from '../types.js';

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

/** `{ data: Watch[] }` */
export const WatchListSchema = T.Object(
  { data: T.Array(ref(WatchSchema)) },
  { $id: 'WatchList', description: "The caller's watches on this network, newest first." },
);

/**
 * The optional `network` query member every /v1 route accepts (anything but mainnet → 400).
 * Any other query parameter is rejected (400, `details` names it), like unknown body members.
 */
export const NetworkQuery = T.Object(
  {
    network: T.Optional(
      StringEnum(['mainnet'] as const, {
        description: 'Optional. Any other value (e.g. `nile`) gives 400 testnet_unsupported.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const watchSchemas = [WatchSchema, WatchCreatedSchema, CreateWatchSchema, WatchListSchema];

const CREATED_NOTE_WEBHOOK =
  'Store this secret now: it is shown only once and is the key for verifying X-Signature.';
const CREATED_NOTE_TELEGRAM = 'Deliveries go to the chat connected in the console.';

/** A row as SPEC's Watch (no secret, no internal columns). */
function watchView(w: WatchRow) {
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

/** Register the watch routes. */
export function watchRoutes(app: App, deps: AppDeps): void {
  const network = deps.config.network;
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
      const body = request.body;
      const hasUrl = typeof body.webhook_url === 'string';
      const hasTelegram = body.telegram === true;
      if (hasUrl === hasTelegram) {
        throw ApiError.coded(
          'invalid_target',
          hasUrl
            ? 'give exactly one target: webhook_url or telegram: true, not both'
            : 'give exactly one target: webhook_url or telegram: true',
        );
      }
      const problems: FieldError[] = [];
      let addressHex = '';
      try {
        addressHex = parseAddress(body.address).hex;
      } catch (err) {
        if (!(err instanceof InvalidAddressError)) throw err;
        problems.push({ field: 'address', message: err.message });
      }
      const url = typeof body.webhook_url === 'string' ? body.webhook_url : null;
      if (url !== null) {
        const check = await checkWebhookUrl(url, {
          allowCidrs: deps.config.delivery.allowCidrs,
          resolver: deps.resolver,
        });
        if (!check.ok) problems.push({ field: 'webhook_url', message: check.reason });
      }
      if (problems.length > 0) throw new ApiError(400, 'invalid request body', undefined, problems);

      const { watch, secret } = await createWatch(deps.db, deps.secrets, {
        accountId: auth.accountId,
        network,
        address: body.address,
        addressHex,
        assetFilter: body.asset_filter,
        direction: body.direction ?? 'incoming',
        channel: url !== null ? 'webhook' : 'telegram',
        webhookUrl: url,
        blockIntervalMs: deps.config.ingest.blockIntervalMs,
      });
      // Never log the answer: it holds the secret.
      request.log.info({ watch_id: watch.id, account_id: auth.accountId }, 'watch created');
      return reply.code(201).send({
        ...watchView(watch),
        ...(secret !== null
          ? { secret, note: CREATED_NOTE_WEBHOOK }
          : { note: CREATED_NOTE_TELEGRAM }),
      });
    },
  );

  app.get(
    '/v1/watches',
    {
      schema: {
        operationId: 'listWatches',
        summary: 'List watches',
        description: "The caller's watches on this network, newest first. Never returns secrets.",
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
      const rows = await listWatches(deps.db, auth.accountId, network);
      return { data: rows.map(watchView) };
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
      const deleted = isId(id, 'wh') && (await deleteWatch(deps.db, auth.accountId, network, id));
      if (!deleted) throw new ApiError(404, 'watch not found');
      request.log.info({ watch_id: id, account_id: auth.accountId }, 'watch deleted');
      return reply.code(204).send(null);
    },
  );
}
