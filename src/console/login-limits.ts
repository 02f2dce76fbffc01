/**
 * Console login limits (SPEC §Limits "console login failures": 5 per 15 minutes per IP and
 * e-mail address; §Errors 429 login_rate_limited). Failed logins are counted in sliding 15-minute
 * windows of the process's RateLimiter (Redis, shared by every replica, with the in-process
 * fallback the API limits have; DESIGN: counters lost on a Redis flush are acceptable): one window
 * per client IP and one per e-mail address. While either holds 5 failures, every login for it is
 * refused with 429 and Retry-After — a correct password included, or the limit would only slow
 * guessing down. A successful login does not clear the counts (they are about the attacker's
 * guesses, not the user's).
 */
import { ApiError } from '../common/errors.js';
import type { RateLimiter } from '../rate-limit/limiter.js';

/** Failed logins allowed per window, per IP and per e-mail (SPEC). */
export const LOGIN_FAILURES = 5;
/** The window, ms (SPEC: 15 minutes). */
export const LOGIN_WINDOW_MS = 15 * 60_000;

const ids = (ip: string, email: string) => [`login-ip:${ip}`, `login-email:${email}`];

/**
 * Refuse a login while its IP or e-mail has LOGIN_FAILURES failures in the window.
 * @throws ApiError 429 login_rate_limited with Retry-After (seconds until a slot frees).
 */
export async function checkLoginAllowed(
  limiter: RateLimiter,
  ip: string,
  email: string,
): Promise<void> {
  const results = await Promise.all(
    ids(ip, email).map((id) => limiter.peek(id, LOGIN_FAILURES, undefined, LOGIN_WINDOW_MS)),
  );
  const wait = Math.max(...results.map((r) => (r.allowed ? 0 : r.retryAfterSeconds)));
  if (wait > 0) {
    throw new ApiError(
      429,
      `too many failed logins: try again in ${wait} s`,
      'login_rate_limited',
      undefined,
      {},
      { 'Retry-After': String(wait) },
    );
  }
}

/** Count one failed login against its IP and its e-mail. */
export async function recordLoginFailure(
  limiter: RateLimiter,
  ip: string,
  email: string,
): Promise<void> {
  await Promise.all(
    ids(ip, email).map((id) => limiter.hit(id, LOGIN_FAILURES, undefined, LOGIN_WINDOW_MS)),
  );
}

/** Sign-ups allowed per client IP per LOGIN_WINDOW_MS (each costs an argon2id hash, ~55 ms CPU). */
export const SIGNUPS_PER_IP = 10;

/**
 * Count a sign-up (or an invitation acceptance) against its client IP: an unauthenticated request
 * that makes the server hash a password must not be free to repeat (CPU exhaustion).
 * @throws ApiError 429 login_rate_limited with Retry-After when the IP has used its sign-ups.
 */
export async function countSignup(limiter: RateLimiter, ip: string): Promise<void> {
  const r = await limiter.hit(`signup-ip:${ip}`, SIGNUPS_PER_IP, undefined, LOGIN_WINDOW_MS);
  if (!r.allowed) {
    throw new ApiError(
      429,
      `too many sign-ups from this address: try again in ${r.retryAfterSeconds} s`,
      'login_rate_limited',
      undefined,
      {},
      { 'Retry-After': String(r.retryAfterSeconds) },
    );
  }
}
