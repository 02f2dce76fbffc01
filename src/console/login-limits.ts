/**
 * Console login limits (SPEC §Limits "console login failures": 5 per 15 minutes per IP and e-mail;
 * §Errors 429 login_rate_limited; issue 17 item 2), counted in sliding 15-minute windows of the
 * process's RateLimiter (Redis, shared by every replica, with the in-process fallback the API
 * limits have; DESIGN: counts lost on a Redis flush are acceptable). The client address is
 * `request.ip` (the forwarded client behind a proxy named in TRUST_PROXY), an IPv6 one by its /64
 * (clientAddressKey).
 *
 * The rule, and why (docs/security.md "The console"):
 * - 5 failed logins per 15 minutes per (client address, e-mail): the SPEC's limit, keyed on the
 *   pair. An attacker on one address locks an e-mail out from that address only; its owner still
 *   signs in from any other.
 * - 50 failed logins per 15 minutes per client address, whatever the e-mails: one address cannot
 *   spray guesses over many accounts, nor keep the server hashing (every attempt costs one
 *   argon2id verification, ~55 ms of CPU, an unknown e-mail too). Only users sharing the
 *   attacker's own address (its NAT) are affected.
 * - No limit per e-mail across addresses. Any such limit is a lever to lock a user out from
 *   everywhere: with a threshold of N, N / 5 rented addresses pull it. What bounds a distributed
 *   guess instead is 5 guesses per address per 15 minutes against a password of at least 12
 *   characters hashed with argon2id.
 * - Counted BEFORE the verification, atomically (RateLimiter.reserve: one Lua script in Redis, no
 *   await in between in process): an attempt takes its slot in both windows before argon2 runs,
 *   so N parallel guesses count as N and at most 5 reach argon2 for one address and e-mail. The
 *   slot is given back when the password was right, or when the check failed for another reason
 *   (a database error is not a guess); a wrong password keeps it: that is the failure.
 * - While a window is full, every attempt it covers is refused with 429 and Retry-After, a correct
 *   password included, or the limit would only slow guessing down.
 * - A password change (POST /console/api/password) counts in the same windows, under the
 *   account's e-mail: a stolen session guesses the current password no faster than the login.
 * - Invitation tokens: 5 wrong tokens per 15 minutes per client address (before: one window
 *   shared by every invitation, which 5 wrong tokens from anyone closed for everybody).
 * - Sign-ups: 10 per 15 minutes per client address (each costs an argon2id hash).
 * - Password reset requests (issue 18 item 2): 3 per 15 minutes per e-mail address (whoever asks:
 *   no mailbox is flooded with reset mails) and 10 per 15 minutes per client address (one client
 *   cannot send mail to many mailboxes), counted whether or not the address is a user's, so the
 *   limit tells nothing either. Reset tokens: 5 wrong ones per 15 minutes per client address, as
 *   invitation tokens.
 * Window ids carry the address as a hash tag (`{…}`), so a Redis Cluster keeps an attempt's
 * windows in one slot; e-mails appear only as a SHA-256 digest.
 */
import { createHash } from 'node:crypto';
import { ApiError } from '../common/errors.js';
import { clientAddressKey, type RateLimiter, type WindowLimit } from '../rate-limit/limiter.js';

/** Failed logins allowed per window per (client address, e-mail) (SPEC). */
export const LOGIN_FAILURES = 5;
/** Failed logins allowed per window per client address, all e-mails together. */
export const LOGIN_FAILURES_PER_ADDRESS = 50;
/** Wrong invitation tokens allowed per window per client address. */
export const INVITE_FAILURES = 5;
/** The window, ms (SPEC: 15 minutes). */
export const LOGIN_WINDOW_MS = 15 * 60_000;

/** The first 128 bits of SHA-256 of the (normalised) e-mail, hex: no address in Redis keys. */
const emailDigest = (email: string) =>
  createHash('sha256').update(email).digest('hex').slice(0, 32);

/** The windows one login attempt (or password check) of `email` from `ip` counts in. */
export function loginWindows(ip: string, email: string): WindowLimit[] {
  const a = clientAddressKey(ip);
  return [
    { id: `login:{${a}}:${emailDigest(email)}`, limit: LOGIN_FAILURES, windowMs: LOGIN_WINDOW_MS },
    { id: `login-ip:{${a}}`, limit: LOGIN_FAILURES_PER_ADDRESS, windowMs: LOGIN_WINDOW_MS },
  ];
}

/** The window one invitation acceptance from `ip` counts in. */
export function inviteWindows(ip: string): WindowLimit[] {
  return [
    {
      id: `invite:{${clientAddressKey(ip)}}`,
      limit: INVITE_FAILURES,
      windowMs: LOGIN_WINDOW_MS,
    },
  ];
}

/** 429 login_rate_limited with Retry-After. */
function limited(message: string, retryAfterSeconds: number): ApiError {
  return new ApiError(
    429,
    `${message}: try again in ${retryAfterSeconds} s`,
    'login_rate_limited',
    undefined,
    {},
    { 'Retry-After': String(retryAfterSeconds) },
  );
}

/**
 * Run `check` as one counted attempt in `windows` (module doc): reserve a slot in each first,
 * keep it when `check` resolves false (a failure), give it back when it resolves true or throws.
 * @returns what `check` resolved.
 * @throws ApiError 429 login_rate_limited (`message`, Retry-After) when a window is full; then
 *   `check` does not run. Whatever `check` throws.
 */
async function countedAttempt(
  limiter: RateLimiter,
  windows: readonly WindowLimit[],
  message: string,
  check: () => Promise<boolean>,
  info?: AttemptInfo,
): Promise<boolean> {
  const slot = await limiter.reserve(windows);
  if (!slot.allowed) throw limited(message, slot.retryAfterSeconds);
  if (info && slot.remaining !== undefined) info.remaining = slot.remaining;
  let ok: boolean | undefined;
  try {
    ok = await check();
    return ok;
  } finally {
    // A failed give-back (Redis gone meanwhile) leaves the entry to expire with its window: one
    // extra counted failure, never a refused login.
    if (ok !== false) await slot.release().catch(() => undefined);
  }
}

/** Filled in by a counted attempt that ran. */
export interface AttemptInfo {
  /**
   * Failures the (address, e-mail) window still allows after this attempt, counted as a failure
   * (0: the next failure is refused for the rest of the window). The sign-in page warns with it.
   */
  remaining?: number;
}

/**
 * A login (or a password check of a signed-in account) of `email` from `ip`: `verify` runs only
 * when neither the pair's window nor the address's is full, and is counted as a failure when it
 * resolves false (module doc).
 * @param email the normalised e-mail (accounts.normaliseEmail).
 * @returns what `verify` resolved.
 * @throws ApiError 429 login_rate_limited with Retry-After (seconds until a slot frees).
 */
export function countLoginAttempt(
  limiter: RateLimiter,
  ip: string,
  email: string,
  verify: () => Promise<boolean>,
  info?: AttemptInfo,
): Promise<boolean> {
  return countedAttempt(limiter, loginWindows(ip, email), 'too many failed logins', verify, info);
}

/**
 * An invitation acceptance from `ip`: `check` (is the token usable?) runs only while the address
 * has fewer than INVITE_FAILURES wrong tokens in the window, and counts as one when it resolves
 * false. @throws ApiError 429 login_rate_limited with Retry-After.
 */
export function countInviteAttempt(
  limiter: RateLimiter,
  ip: string,
  check: () => Promise<boolean>,
): Promise<boolean> {
  return countedAttempt(
    limiter,
    inviteWindows(ip),
    'too many wrong invitation links from this address',
    check,
  );
}

/** Sign-ups allowed per client address per LOGIN_WINDOW_MS (each costs an argon2id hash, ~55 ms CPU). */
export const SIGNUPS_PER_IP = 10;

/**
 * Count a sign-up against its client address: an unauthenticated request that makes the server
 * hash a password must not be free to repeat (CPU exhaustion).
 * @throws ApiError 429 login_rate_limited with Retry-After when the address has used its sign-ups.
 */
export async function countSignup(limiter: RateLimiter, ip: string): Promise<void> {
  const r = await limiter.hit(
    `signup-ip:${clientAddressKey(ip)}`,
    SIGNUPS_PER_IP,
    undefined,
    LOGIN_WINDOW_MS,
  );
  if (!r.allowed) throw limited('too many sign-ups from this address', r.retryAfterSeconds);
}

/** Reset e-mails allowed per window per e-mail address, and per client address. */
export const RESET_REQUESTS_PER_EMAIL = 3;
export const RESET_REQUESTS_PER_ADDRESS = 10;

/**
 * Count a password reset request of `email` from `ip` (module doc): both windows take a slot, or
 * none does. @param email the normalised e-mail.
 * @throws ApiError 429 login_rate_limited with Retry-After when either window is full.
 */
export async function countResetRequest(
  limiter: RateLimiter,
  ip: string,
  email: string,
): Promise<void> {
  const a = clientAddressKey(ip);
  const slot = await limiter.reserve([
    {
      id: `reset:{${a}}:${emailDigest(email)}`,
      limit: RESET_REQUESTS_PER_ADDRESS,
      windowMs: LOGIN_WINDOW_MS,
    },
    { id: `reset-ip:{${a}}`, limit: RESET_REQUESTS_PER_ADDRESS, windowMs: LOGIN_WINDOW_MS },
  ]);
  if (!slot.allowed) throw limited('too many password reset requests', slot.retryAfterSeconds);
  // Per e-mail address across clients: a window of its own (no client address in its key).
  const r = await limiter.hit(
    `reset-email:${emailDigest(email)}`,
    RESET_REQUESTS_PER_EMAIL,
    undefined,
    LOGIN_WINDOW_MS,
  );
  if (!r.allowed) {
    throw limited('too many password reset requests for this address', r.retryAfterSeconds);
  }
}

/**
 * A reset link's use from `ip`: `check` (is the token usable?) runs only while the address has
 * fewer than INVITE_FAILURES wrong tokens in the window, and counts as one when it resolves false.
 * @throws ApiError 429 login_rate_limited with Retry-After.
 */
export function countResetAttempt(
  limiter: RateLimiter,
  ip: string,
  check: () => Promise<boolean>,
): Promise<boolean> {
  return countedAttempt(
    limiter,
    [
      {
        id: `reset-token:{${clientAddressKey(ip)}}`,
        limit: INVITE_FAILURES,
        windowMs: LOGIN_WINDOW_MS,
      },
    ],
    'too many wrong reset links from this address',
    check,
  );
}
