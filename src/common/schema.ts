/**
 * TypeBox helpers for the JSON Schemas that the domain modules own (src/events/event.ts) and the
 * API registers (src/api/schemas.ts): JSON Schema 2020-12 as OpenAPI 3.1 writes it.
 */
import { Type as T } from '@sinclair/typebox';

/** A string restricted to `values` (one `enum`, so one clear validation message). */
export function StringEnum<const V extends readonly string[]>(
  values: V,
  opts: { description?: string; default?: V[number] } = {},
) {
  return T.Unsafe<V[number]>({ type: 'string', enum: [...values], ...opts });
}

/** `string | null` as one JSON Schema 2020-12 type list (OpenAPI 3.1), no `anyOf` coercion traps. */
export function NullableString(opts: Record<string, unknown> = {}) {
  return T.Unsafe<string | null>({ type: ['string', 'null'], ...opts });
}

/**
 * The optional `network` member, in the query or the body, that every /v1 route accepts (issue 32):
 * `mainnet` or `nile`. The key's own network is served (`mainnet` for a `tw_live_` key, `nile` for
 * a `tw_test_` key); any other value, the other environment's included, is answered 400
 * testnet_unsupported before validation (src/api/auth.ts refuseTestnet), so this enum only ever
 * sees the key's own network.
 */
export function NetworkMember() {
  return StringEnum(['mainnet', 'nile'] as const, {
    description:
      "Optional. The key's network: `mainnet` for a `tw_live_` key, `nile` for a `tw_test_` key (served as if absent). Any other value, the other environment's included (e.g. `nile` with a `tw_live_` key), gives 400 testnet_unsupported.",
  });
}
