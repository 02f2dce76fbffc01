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
