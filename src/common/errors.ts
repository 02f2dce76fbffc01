/**
 * One error vocabulary (habit 4): a closed list of codes, one exhaustive code → status map, one
 * body (SPEC §Error body: `{ error, code?, details? }`). Handlers throw ApiError; the app's error
 * handler shapes every answer, and anything else becomes SPEC's bare 500.
 */

/** Machine codes of SPEC §Errors (API and console). */
export const ERROR_CODES = [
  'invalid_target',
  'telegram_not_bound',
  'missing_api_key',
  'invalid_api_key',
  'revoked_api_key',
  'quota_exceeded',
  'wrong_network',
  'rate_limited',
  'testnet_unsupported',
  'telegram_unavailable',
  'no_session',
  'csrf_mismatch',
  'telegram_watches_active',
  'login_rate_limited',
  // API (issue 30): deleting an endpoint that live watches still target.
  'endpoint_watches_active',
  // Console (additive): sign-up, login and invitations.
  'invalid_credentials',
  'signup_closed',
  'email_taken',
  'invalid_invite',
  // Console (issue 18): members and roles, password reset, e-mail.
  'insufficient_role',
  'last_owner',
  'invalid_reset',
  'email_unavailable',
  // Console (issue 18 item 4): two-factor sign-in.
  'invalid_code',
  'invalid_challenge',
  'two_factor_setup_required',
  'two_factor_state',
  // Console (issue 27): the user's code step locked after wrong codes; too many live streams.
  'code_locked',
  'too_many_streams',
  // Scoped API keys (issue 31 item 3).
  'read_only_key',
  // Test mode (issue 32): a test-only operation asked with a live key or in live mode.
  'test_mode_only',
  // Console (issue 32): a page loaded in one environment after the switch moved to the other.
  'environment_changed',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** HTTP status of each code (SPEC §Errors; testnet_unsupported per DESIGN decisions). */
export const CODE_STATUS: Record<ErrorCode, number> = {
  invalid_target: 400,
  telegram_not_bound: 400,
  testnet_unsupported: 400,
  missing_api_key: 401,
  invalid_api_key: 401,
  revoked_api_key: 401,
  no_session: 401,
  quota_exceeded: 402,
  wrong_network: 403,
  csrf_mismatch: 403,
  telegram_watches_active: 409,
  endpoint_watches_active: 409,
  rate_limited: 429,
  login_rate_limited: 429,
  telegram_unavailable: 503,
  invalid_credentials: 401,
  signup_closed: 403,
  email_taken: 409,
  invalid_invite: 400,
  insufficient_role: 403,
  last_owner: 409,
  invalid_reset: 400,
  email_unavailable: 503,
  invalid_code: 401,
  invalid_challenge: 400,
  two_factor_setup_required: 403,
  two_factor_state: 409,
  code_locked: 429,
  too_many_streams: 429,
  environment_changed: 409,
  read_only_key: 403,
  test_mode_only: 403,
};

/** One field-level problem of an invalid body, query or path (the `details` of a 400). */
export interface FieldError {
  /** The member at fault: `address`, `webhook_url`, `limit`, `usage.plan`, or `body` for the whole. */
  field: string;
  message: string;
}

/** SPEC §Error body. Extra top-level members (e.g. `usage` of quota_exceeded) are additive. */
export interface ErrorBody {
  error: string;
  code?: ErrorCode;
  details?: unknown;
  [extra: string]: unknown;
}

/** An answer that is an error: status, message, optional code/details/extra members/headers. */
export class ApiError extends Error {
  readonly status: number;
  constructor(
    status: number,
    message: string,
    readonly code?: ErrorCode,
    readonly details?: unknown,
    readonly extra: Record<string, unknown> = {},
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }

  /** An error with a code: its status comes from CODE_STATUS. */
  static coded(
    code: ErrorCode,
    message: string,
    details?: unknown,
    extra?: Record<string, unknown>,
  ) {
    return new ApiError(CODE_STATUS[code], message, code, details, extra);
  }

  body(): ErrorBody {
    return {
      error: this.message,
      ...(this.code ? { code: this.code } : {}),
      ...(this.details !== undefined ? { details: this.details } : {}),
      ...this.extra,
    };
  }
}

/** The only body a 500 ever has (SPEC §Errors): nothing internal leaks. */
export const INTERNAL_ERROR_BODY: ErrorBody = { error: 'internal server error' };
