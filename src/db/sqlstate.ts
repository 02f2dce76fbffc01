/**
 * SQLSTATE of a database error, the same on both engines: node-postgres and PGlite both raise
 * errors carrying `code` (SQLSTATE, e.g. `23505`) and, for constraint violations, `constraint`
 * (the index or constraint name). Source: PostgreSQL "Appendix A. PostgreSQL Error Codes".
 */

/** The SQLSTATE of `err`, or undefined when it is not a database error. */
export function sqlState(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code) ? code : undefined;
}

/** True for 23505 unique_violation, optionally on the named index or constraint only. */
export function isUniqueViolation(err: unknown, constraint?: string): boolean {
  if (sqlState(err) !== '23505') return false;
  if (constraint === undefined) return true;
  return (err as { constraint?: unknown }).constraint === constraint;
}

/** True for class 22 (data exception): a value the database cannot take, e.g. year 0000. */
export function isDataException(err: unknown): boolean {
  return sqlState(err)?.startsWith('22') ?? false;
}
