/**
 * A watch's `metadata` (issue 30 item 2; migration 085): a small JSON object of string values that
 * the account attaches to a watch (a customer, order or invoice reference) and that comes back in
 * every event and webhook of the watch, so a receiver credits the right customer without a lookup.
 *
 * Limits (the schema's, checked again here for callers that did not validate against it, and to
 * name the member at fault): at most {@link METADATA_MAX_KEYS} keys, each 1 to
 * {@link METADATA_KEY_MAX_LENGTH} characters without control characters; each value a string of at
 * most {@link METADATA_VALUE_MAX_LENGTH} characters. An empty object or null clears it.
 *
 * The event keeps a copy taken at ingest (src/ingest/commit.ts): changing a watch's metadata
 * changes the events matched from then on, never an event already stored (its payload bytes, and
 * so its signature, stay the same on every attempt and redelivery).
 */
import { Type as T } from '@sinclair/typebox';
import type { FieldError } from '../common/errors.js';

/** Most keys in one watch's metadata. */
export const METADATA_MAX_KEYS = 20;
/** Most characters of a key. */
export const METADATA_KEY_MAX_LENGTH = 40;
/** Most characters of a value. */
export const METADATA_VALUE_MAX_LENGTH = 500;

/** A watch's metadata as stored and returned: string values only. */
export type Metadata = Record<string, string>;

/** Control characters (C0, DEL, C1) and line or paragraph separators: refused in a key. */
const KEY_REFUSED = /[\p{Cc}\u2028\u2029]/u;

/**
 * The JSON Schema of a metadata object (requests). The value check has no `type` coercion to fear
 * here: src/api/schemas.ts preventCoercion looks into `additionalProperties` of an object member.
 */
export const MetadataSchema = T.Unsafe<Metadata>({
  type: 'object',
  maxProperties: METADATA_MAX_KEYS,
  propertyNames: { type: 'string', minLength: 1, maxLength: METADATA_KEY_MAX_LENGTH },
  additionalProperties: { type: 'string', maxLength: METADATA_VALUE_MAX_LENGTH },
  description: `Additive, optional. Your reference for the watch (a customer, order or invoice id): a JSON object of string values, at most ${METADATA_MAX_KEYS} keys of 1 to ${METADATA_KEY_MAX_LENGTH} characters, values of at most ${METADATA_VALUE_MAX_LENGTH} characters. Returned with the watch, and copied into every event of the watch (\`metadata\` of the webhook body and of GET /v1/events) from the next matched transfer on. Null or {} removes it.`,
  examples: [{ customer_id: 'c_1842', invoice: 'INV-2026-0091' }],
});

/** The same, or null (a request member that may clear it). */
export const NullableMetadataSchema = T.Unsafe<Metadata | null>({
  ...MetadataSchema,
  type: ['object', 'null'],
});

/**
 * Metadata as stored: null or an empty object → null; otherwise the same object (keys kept as
 * given). A rule broken is pushed to `problems` (field `metadata` or `metadata.<key>`) and null
 * returned.
 * @param value the request member (undefined: not given → null).
 */
export function normaliseMetadata(value: unknown, problems: FieldError[]): Metadata | null {
  if (value === undefined || value === null) return null;
  if (typeof value !== 'object' || Array.isArray(value)) {
    problems.push({ field: 'metadata', message: 'must be a JSON object of string values' });
    return null;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length === 0) return null;
  const before = problems.length;
  if (entries.length > METADATA_MAX_KEYS) {
    problems.push({
      field: 'metadata',
      message: `at most ${METADATA_MAX_KEYS} keys (${entries.length} given)`,
    });
  }
  for (const [key, v] of entries) {
    if (key.length === 0 || key.length > METADATA_KEY_MAX_LENGTH || KEY_REFUSED.test(key)) {
      problems.push({
        field: 'metadata',
        message: `a key is 1 to ${METADATA_KEY_MAX_LENGTH} characters without control characters (${JSON.stringify(key.slice(0, METADATA_KEY_MAX_LENGTH + 1))})`,
      });
    } else if (typeof v !== 'string') {
      problems.push({ field: `metadata.${key}`, message: 'must be a string' });
    } else if (v.length > METADATA_VALUE_MAX_LENGTH) {
      problems.push({
        field: `metadata.${key}`,
        message: `at most ${METADATA_VALUE_MAX_LENGTH} characters (${v.length} given)`,
      });
    }
  }
  if (problems.length > before) return null;
  return Object.fromEntries(entries) as Metadata;
}

/** The query-string form of one metadata pair in a filter: `metadata[<key>]=<value>`. */
const FILTER_PARAM = /^metadata\[(.*)\]$/s;

/**
 * The exact key/value filter of GET /v1/events (issue 40 item 5), read from a parsed query string
 * whose members are flat (`metadata[invoice]` is one member name, as Fastify's parser leaves it;
 * the OpenAPI document calls it a `deepObject` parameter, which openapi-fetch writes this way).
 * The pairs are moved into one member `metadata` (an object), so that the route's schema sees it;
 * a plain `metadata=…` is left for the schema to refuse.
 *
 * Rules: at most {@link METADATA_MAX_KEYS} pairs; each key as a watch's (1 to
 * {@link METADATA_KEY_MAX_LENGTH} characters, no control characters); each value at most
 * {@link METADATA_VALUE_MAX_LENGTH} characters, given once.
 * @returns problems (field `metadata[<key>]` or `metadata`), empty when the filter is well formed.
 */
export function collectMetadataFilter(query: Record<string, unknown>): FieldError[] {
  const problems: FieldError[] = [];
  // No prototype: a key named `__proto__` is a key like any other.
  const pairs = Object.create(null) as Record<string, string>;
  let count = 0;
  for (const name of Object.keys(query)) {
    const m = FILTER_PARAM.exec(name);
    if (!m) continue;
    const key = m[1] ?? '';
    const value = query[name];
    delete query[name];
    count++;
    const field = `metadata[${key.slice(0, METADATA_KEY_MAX_LENGTH + 1)}]`;
    if (key.length === 0 || key.length > METADATA_KEY_MAX_LENGTH || KEY_REFUSED.test(key)) {
      problems.push({
        field,
        message: `a metadata key is 1 to ${METADATA_KEY_MAX_LENGTH} characters without control characters`,
      });
    } else if (typeof value !== 'string') {
      problems.push({ field, message: 'give one value per key' });
    } else if (value.length > METADATA_VALUE_MAX_LENGTH) {
      problems.push({
        field,
        message: `at most ${METADATA_VALUE_MAX_LENGTH} characters (${value.length} given)`,
      });
    } else {
      pairs[key] = value;
    }
  }
  if (count > METADATA_MAX_KEYS) {
    problems.push({
      field: 'metadata',
      message: `at most ${METADATA_MAX_KEYS} key/value pairs (${count} given)`,
    });
  }
  if (count > 0 && problems.length === 0) {
    if (query.metadata !== undefined) {
      problems.push({ field: 'metadata', message: 'give metadata[<key>]=<value> pairs only' });
    } else {
      query.metadata = pairs;
    }
  }
  return problems;
}
