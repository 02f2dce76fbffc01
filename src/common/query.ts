/**
 * Checks of a request's raw query string members, shared by the HTTP layers (src/api/routes/,
 * src/console/routes/) from below them: run in `preValidation`, before the schema coerces a
 * member, while the query is still the text the client sent (SPEC §Errors: bad input is a 400
 * with `details`, never a number read from `0x10`).
 */
import { ApiError, type FieldError } from './errors.js';

/**
 * Refuse query members that must be decimal integers but are spelt otherwise (`0x10`, `1e1`,
 * `+5`, ` 16`, `16.0`): before validation, the query is still the raw text. 400 with `details`.
 * @param query the request's query object (anything else is let through to validation).
 * @param fields the members that must be 1 to 15 decimal digits when present.
 * @throws ApiError 400 naming each such member.
 */
export function refuseNonDecimal(query: unknown, fields: readonly string[]): void {
  if (typeof query !== 'object' || query === null) return;
  const q = query as Record<string, unknown>;
  const problems: FieldError[] = [];
  for (const field of fields) {
    const v = q[field];
    if (typeof v === 'string' && !/^[0-9]{1,15}$/.test(v)) {
      problems.push({ field, message: 'must be a decimal integer (digits only)' });
    }
  }
  if (problems.length > 0) throw new ApiError(400, 'invalid query parameters', undefined, problems);
}
