/**
 * Schemas shared by every resource: the error bodies (SPEC §Error body, §Errors), the
 * rate-limit headers every `/v1/*` answer carries (SPEC §Limits), and helpers that attach them
 * to a route's responses. Resource schemas live beside their handlers (src/api/routes/*.ts).
 *
 * One schema serves three purposes (CONVENTIONS habit 2): Fastify validates requests with it,
 * fast-json-stringify serialises responses with it (a member missing from a response schema is
 * DROPPED from the answer, so every member we send is declared here), and @fastify/swagger turns
 * it into the OpenAPI document. Schemas with an `$id` are registered with `app.addSchema` and
 * become `components.schemas` of the document; routes reference them with `ref()`.
 */
import { type Static, Type as T, type TSchema } from '@sinclair/typebox';
import { ERROR_CODES, type ErrorCode } from '../common/errors.js';

export { NetworkMember, NullableString, StringEnum } from '../common/schema.js';

/**
 * A reference to a registered schema, typed as that schema. `extra` may carry a response's
 * `description` and `headers` (read by @fastify/swagger, ignored by the serialiser).
 */
export function ref<S extends TSchema>(schema: S, extra: Record<string, unknown> = {}) {
  if (typeof schema.$id !== 'string') throw new Error('ref() needs a schema with an $id');
  return T.Unsafe<Static<S>>({ $ref: schema.$id, ...extra });
}

export type { FieldError } from '../common/errors.js';

/** The JSON Schema type names `value` satisfies (a whole number is also an `integer`). */
function jsonTypes(value: unknown): string[] {
  if (value === null) return ['null'];
  if (Array.isArray(value)) return ['array'];
  if (typeof value === 'number')
    return Number.isInteger(value) ? ['integer', 'number'] : ['number'];
  return [typeof value];
}

/**
 * Stop ajv coercing the top-level scalar members of a JSON `body`. Fastify's ajv runs with
 * `coerceTypes` (query strings need it), which would also convert body members (`"true"` → true,
 * `1` → true, `["TRX"]` → "TRX", `12345` → "12345"). A route calls this in `preValidation`: each
 * member whose JSON type is not one `schema` declares for it is replaced by `{}`, which no
 * coercion turns into a scalar, so ajv reports it (`must be boolean`) together with every other
 * problem of the body. Undeclared members, object/array members and non-object bodies are left
 * to ajv.
 */
export function preventCoercion(schema: TSchema, body: unknown): void {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return;
  const members = body as Record<string, unknown>;
  const properties: Record<string, { type?: unknown; additionalProperties?: unknown }> =
    schema.properties ?? {};
  for (const [field, value] of Object.entries(members)) {
    if (!Object.hasOwn(properties, field)) continue;
    const declared = properties[field]?.type;
    const types: unknown[] =
      typeof declared === 'string' ? [declared] : Array.isArray(declared) ? declared : [];
    // An object member whose values have one declared scalar type (a watch's `metadata`: string
    // values): its values are kept from coercion the same way (`{"n": 1}` must not become "1").
    const values = properties[field]?.additionalProperties;
    if (
      types.includes('object') &&
      typeof values === 'object' &&
      values !== null &&
      typeof value === 'object' &&
      value !== null &&
      !Array.isArray(value)
    ) {
      preventCoercion(
        T.Unsafe({
          properties: Object.fromEntries(Object.keys(value).map((k) => [k, values])),
        }),
        value,
      );
      continue;
    }
    if (types.length === 0 || types.includes('object') || types.includes('array')) continue;
    if (!jsonTypes(value).some((t) => types.includes(t))) members[field] = {};
  }
}

export const FieldErrorSchema = T.Object(
  {
    field: T.String({ description: 'The member at fault (`body` for the whole body).' }),
    message: T.String(),
  },
  { $id: 'FieldError', description: 'One field-level problem of an invalid body or query.' },
);

const errorMembers = {
  error: T.String({ description: 'Human-readable message.' }),
  code: T.Optional(
    T.Unsafe<ErrorCode>({
      type: 'string',
      enum: [...ERROR_CODES],
      description:
        'Machine code (SPEC §Errors). Absent for some errors (400 without code, 404, 409, 500).',
    }),
  ),
  details: T.Optional(
    T.Union(
      [
        T.Array(ref(FieldErrorSchema), {
          description: 'An invalid body, query or path (400): one entry per field at fault.',
        }),
        T.Object(
          {
            revoked_at: T.String({
              format: 'date-time',
              description: 'When the key was revoked.',
            }),
          },
          { description: 'revoked_api_key (401).' },
        ),
        T.Object(
          {
            watch_count: T.Integer({
              minimum: 1,
              description: 'Watches (active or paused) that still target the endpoint.',
            }),
          },
          { description: 'endpoint_watches_active (409; additive).' },
        ),
      ],
      {
        description:
          'For an invalid body, query or path (400): an array of FieldError. For revoked_api_key: `{ revoked_at }`. For endpoint_watches_active: `{ watch_count }`.',
      },
    ),
  ),
  watch_id: T.Optional(
    T.String({
      description:
        'Additive. For a 409 duplicate watch: the id (`wh_…`) of the watch that already watches this address the same way.',
    }),
  ),
};

/** SPEC §Error body. */
export const ErrorBodySchema = T.Object(errorMembers, {
  $id: 'ErrorBody',
  description: 'Every error answer (SPEC §Error body).',
});
export type ErrorBodyT = Static<typeof ErrorBodySchema>;

/** SPEC §Errors 402: the error body plus `usage`. */
export const QuotaExceededSchema = T.Object(
  {
    ...errorMembers,
    usage: T.Object(
      {
        active_watches: T.Integer({
          minimum: 0,
          description: 'Active watches on this network now.',
        }),
        limit: T.Integer({ minimum: 0, description: 'Active watches the plan allows.' }),
        plan: T.String({ description: 'Plan name: Free, Starter, Pro, Scale or Business.' }),
      },
      { description: 'The quota that was reached.' },
    ),
  },
  { $id: 'QuotaExceededError', description: 'quota_exceeded (402) answer.' },
);

/** Schemas with an `$id` defined here, for `app.addSchema`. */
export const sharedSchemas: TSchema[] = [FieldErrorSchema, ErrorBodySchema, QuotaExceededSchema];

/** Headers on every `/v1/*` answer (SPEC §Limits). */
export const RATE_LIMIT_HEADERS = {
  'X-RateLimit-Limit': {
    type: 'integer',
    minimum: 1,
    description:
      "Requests allowed per sliding 60-second window: the API key's plan rate, or the Free rate per client IP when the request is not authenticated.",
  },
  'X-RateLimit-Remaining': {
    type: 'integer',
    minimum: 0,
    description: 'Requests still allowed in the current window.',
  },
} as const;

/** Extra header of 429 answers. */
export const RETRY_AFTER_HEADER = {
  'Retry-After': {
    type: 'integer',
    minimum: 1,
    description: 'Whole seconds until a request will be accepted again.',
  },
} as const;

/** An ErrorBody response with a description and the `/v1` headers. */
export function errorResponse(description: string, headers: Record<string, unknown> = {}) {
  return ref(ErrorBodySchema, { description, headers: { ...RATE_LIMIT_HEADERS, ...headers } });
}

/** A `/v1` success response: `schema` (an object schema or a ref) plus the rate-limit headers. */
export function v1Response<S extends TSchema>(schema: S, description: string): S {
  return { ...schema, description, headers: { ...RATE_LIMIT_HEADERS } };
}

/**
 * The answers every `/v1/*` route may give besides its own (SPEC §Endpoints: "any /v1/*
 * endpoint may answer 429 rate_limited or 401"; 403 wrong_network, insufficient_role,
 * read_only_key; 400 testnet_unsupported for a request naming another network than its key's;
 * the bare 500).
 */
export function commonV1Responses() {
  return {
    400: errorResponse(
      "Invalid body, query or path (`details`: FieldError[]), invalid_target, telegram_not_bound, or testnet_unsupported (a request naming another network than its key's).",
    ),
    401: errorResponse(
      'missing_api_key, invalid_api_key, or revoked_api_key (`details.revoked_at`: when it was revoked).',
      {
        'WWW-Authenticate': {
          type: 'string',
          description: 'Bearer challenge (RFC 6750).',
        },
      },
    ),
    403: errorResponse(
      'wrong_network: the key is not for the environment its prefix names (never issued so); use a `tw_live_` key for mainnet or a `tw_test_` key for the test environment (nile). read_only_key: a read-only key may only read (GET).',
    ),
    429: errorResponse('rate_limited: requests per minute exceeded.', RETRY_AFTER_HEADER),
    500: errorResponse(
      'Internal error: body `{"error":"internal server error"}`; retry with backoff.',
    ),
  };
}

/** The OpenAPI security requirement of `/v1/*` routes. */
export const BEARER_SECURITY = [{ bearerAuth: [] }];
