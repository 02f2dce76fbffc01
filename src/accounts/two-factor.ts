/**
 * Two-factor sign-in for console users (issue 18 item 4): TOTP codes (RFC 6238: HMAC-SHA-1, 6
 * digits, 30-second steps, the parameters every authenticator app reads from an `otpauth://` URI)
 * through the `otpauth` library, and ten single-use recovery codes.
 *
 * Storage (migration 046):
 * - `console_users.totp_ciphertext` / `totp_key_id`: the TOTP secret sealed with the service
 *   keyring (src/common/secrets.ts, as webhook secrets; `tronwatch secrets rotate-key` re-seals it).
 *   A secret with `totp_enabled_at` NULL is an enrolment not yet confirmed by a code.
 * - `console_users.totp_last_step`: the time step of the last code accepted. A code is accepted
 *   only for a later step (one atomic UPDATE), so a code seen over a shoulder or replayed by a
 *   proxy is refused even within its 30 seconds (RFC 6238 §5.2).
 * - `console_recovery_codes`: SHA-256 of each recovery code (10 random base32 characters, 50
 *   bits, shown once as `xxxxx-xxxxx`); a used one is marked, never accepted again.
 * - `console_login_challenges`: the step between a right password and the code. Its token (32
 *   random bytes) goes to the page, only its SHA-256 is stored; it lives 5 minutes, is used once,
 *   and dies after 5 wrong codes (the login limits of src/console/login-limits.ts count each
 *   wrong code as a failed sign-in too).
 *
 * Codes are checked in a window of one step either side (clock drift of up to 30 s).
 *
 * Guessing is bounded per user, whatever the client address (issue 27 item 3): every wrong code
 * (sign-in step, turning the factor off, new recovery codes) counts in the user's own window
 * (`console_users.code_failures*`, migration 050); CODE_FAILURES_PER_USER wrong codes within
 * CODE_FAILURE_WINDOW_SECONDS lock the user's code step for CODE_LOCK_SECONDS, during which every
 * code is refused, a right one included. The arithmetic (README/docs "Security"): each lock costs
 * at least CODE_LOCK_SECONDS, so an attacker who has the password tries at most
 * 5 codes per hour, 120 per day; 3 of the 10^6 codes are accepted at any instant (the window of
 * one step either side), so a day of guessing succeeds with probability at most
 * 120 × 3 / 10^6 = 3.6 × 10^-4, and the user is e-mailed at the first lock (at most once a day).
 */
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { Secret, TOTP } from 'otpauth';
import type { EncryptedSecret, SecretBox } from '../common/secrets.js';
import type { Db, Queryable } from '../db/pool.js';

/** TOTP step, seconds (RFC 6238's default; what authenticator apps assume). */
export const TOTP_PERIOD_SECONDS = 30;
/** Digits of a code. */
export const TOTP_DIGITS = 6;
/** Steps accepted either side of now (clock drift). */
export const TOTP_WINDOW = 1;
/** Recovery codes per user. */
export const RECOVERY_CODES = 10;
/** How long the code step of a sign-in waits after the password, seconds. */
export const CHALLENGE_TTL_SECONDS = 300;
/** Wrong codes one sign-in challenge takes before it is void. */
export const CHALLENGE_FAILURES = 5;
/** The issuer shown in authenticator apps. */
export const TOTP_ISSUER = 'tronwatch';
/** Wrong codes a user's code step takes within CODE_FAILURE_WINDOW_SECONDS before it locks. */
export const CODE_FAILURES_PER_USER = 5;
/** The window wrong codes are counted in, seconds (15 minutes, as the login limits). */
export const CODE_FAILURE_WINDOW_SECONDS = 15 * 60;
/** How long a locked code step refuses every code, seconds (1 hour). */
export const CODE_LOCK_SECONDS = 60 * 60;
/** The user is e-mailed about a lock at most once per this many seconds (a day). */
export const CODE_LOCK_NOTICE_SECONDS = 24 * 3600;

/** A two-factor operation refused because of the user's state. */
export class TwoFactorError extends Error {
  constructor(
    readonly reason: 'already_enabled' | 'not_enabled' | 'no_enrolment',
    message: string,
  ) {
    super(message);
    this.name = 'TwoFactorError';
  }
}

const sha256 = (s: string) => createHash('sha256').update(s, 'utf8').digest('hex');
const asBuffer = (b: Uint8Array): Buffer => Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** The TOTP generator of a base32 secret, labelled with the user's e-mail. */
export function totpOf(secretBase32: string, email = ''): TOTP {
  return new TOTP({
    issuer: TOTP_ISSUER,
    label: email,
    algorithm: 'SHA1',
    digits: TOTP_DIGITS,
    period: TOTP_PERIOD_SECONDS,
    secret: Secret.fromBase32(secretBase32),
  });
}

/** A code is 6 digits; spaces a user typed ("123 456") are ignored. */
export function looksLikeTotp(code: string): boolean {
  return /^\d{6}$/.test(code.replace(/\s+/g, ''));
}

/** A recovery code as stored: lowercase base32 letters and digits, no separators. */
export function normaliseRecoveryCode(code: string): string {
  return code.toLowerCase().replace(/[\s-]+/g, '');
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** Ten new recovery codes, `xxxxx-xxxxx` (50 random bits each). */
export function newRecoveryCodes(): string[] {
  return Array.from({ length: RECOVERY_CODES }, () => {
    let s = '';
    for (let i = 0; i < 10; i++) s += BASE32[randomInt(32)];
    return `${s.slice(0, 5)}-${s.slice(5)}`;
  });
}

/** The user's two-factor state as the console shows it. */
export interface TwoFactorState {
  enabled: boolean;
  enabled_at: string | null;
  /** Unused recovery codes left (0 when not enabled). */
  recovery_codes_left: number;
  /** The account requires a second factor of every member (an owner's choice). */
  required: boolean;
}

/** The user's two-factor state. @returns undefined for an unknown user. */
export async function twoFactorState(
  db: Queryable,
  userId: string,
): Promise<TwoFactorState | undefined> {
  const { rows } = await db.query<{
    totp_enabled_at: Date | null;
    require_two_factor: boolean;
    left: number;
  }>(
    `SELECT u.totp_enabled_at, a.require_two_factor,
            (SELECT count(*)::int FROM console_recovery_codes c
              WHERE c.user_id = u.id AND c.used_at IS NULL) AS left
       FROM console_users u JOIN accounts a ON a.id = u.account_id
      WHERE u.id = $1`,
    [userId],
  );
  const r = rows[0];
  if (!r) return undefined;
  return {
    enabled: r.totp_enabled_at !== null,
    enabled_at: r.totp_enabled_at?.toISOString() ?? null,
    recovery_codes_left: r.totp_enabled_at === null ? 0 : Number(r.left),
    required: r.require_two_factor,
  };
}

/**
 * Begin an enrolment: a fresh secret, sealed and stored unconfirmed (replacing an earlier
 * unconfirmed one). @returns the secret (base32) and its `otpauth://` URI, shown to the user once.
 * @throws TwoFactorError already_enabled when the user has a confirmed second factor.
 */
export async function beginEnrolment(
  db: Queryable,
  box: SecretBox,
  user: { id: string; email: string },
): Promise<{ secret: string; uri: string }> {
  const secret = new Secret({ size: 20 }).base32;
  const sealed = box.encrypt(secret);
  const { rowCount } = await db.query(
    `UPDATE console_users SET totp_key_id = $2, totp_ciphertext = $3, totp_last_step = NULL
      WHERE id = $1 AND totp_enabled_at IS NULL`,
    [user.id, sealed.keyId, sealed.ciphertext],
  );
  if (rowCount === 0) {
    throw new TwoFactorError(
      'already_enabled',
      'a second factor is already on: turn it off first to set up another device',
    );
  }
  return { secret, uri: totpOf(secret, user.email).toString() };
}

/** The user's sealed TOTP secret and its state, or undefined when there is none. */
async function secretOf(
  db: Queryable,
  box: SecretBox,
  userId: string,
): Promise<{ secret: string; enabled: boolean } | undefined> {
  const { rows } = await db.query<{
    totp_key_id: string | null;
    totp_ciphertext: Uint8Array | null;
    totp_enabled_at: Date | null;
  }>('SELECT totp_key_id, totp_ciphertext, totp_enabled_at FROM console_users WHERE id = $1', [
    userId,
  ]);
  const r = rows[0];
  if (!r?.totp_key_id || !r.totp_ciphertext) return undefined;
  const sealed: EncryptedSecret = { keyId: r.totp_key_id, ciphertext: asBuffer(r.totp_ciphertext) };
  return { secret: box.decrypt(sealed), enabled: r.totp_enabled_at !== null };
}

/**
 * Check a TOTP code against the user's secret and accept it once: the step it matched must be
 * later than the last accepted one (set atomically). `enabled` selects a confirmed secret (sign-in,
 * disabling) or the unconfirmed one of an enrolment.
 * @param nowMs the time to check at, ms since the epoch (tests).
 */
async function acceptTotp(
  db: Queryable,
  box: SecretBox,
  userId: string,
  code: string,
  enabled: boolean,
  nowMs = Date.now(),
  info?: SecondFactorInfo,
): Promise<boolean> {
  const s = await secretOf(db, box, userId);
  if (!s || s.enabled !== enabled) return false;
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return false;
  const totp = totpOf(s.secret);
  const delta = totp.validate({ token, timestamp: nowMs, window: TOTP_WINDOW });
  if (delta === null) return false;
  const step = totp.counter({ timestamp: nowMs }) + delta;
  const { rowCount } = await db.query(
    `UPDATE console_users SET totp_last_step = $2
      WHERE id = $1 AND (totp_enabled_at IS NOT NULL) = $3
        AND (totp_last_step IS NULL OR totp_last_step < $2)`,
    [userId, step, enabled],
  );
  // A code of the right step already accepted once: the user is told so, not "wrong".
  if (rowCount === 0 && info) info.reused = true;
  return rowCount === 1;
}

/** Filled in by a second-factor check that failed. */
export interface SecondFactorInfo {
  /** The code was right but its 30-second step was already used (RFC 6238 §5.2): "already used". */
  reused?: boolean;
}

/**
 * Confirm an enrolment with a code from the app: the second factor is on from now, and ten
 * recovery codes replace any earlier ones; `then` runs in its transaction (the audit entry).
 * @returns the recovery codes (shown once), or undefined when the code is wrong.
 * @throws TwoFactorError no_enrolment (nothing to confirm) or already_enabled.
 */
export async function confirmEnrolment(
  db: Db,
  box: SecretBox,
  userId: string,
  code: string,
  nowMs = Date.now(),
  then?: (tx: Queryable) => Promise<void>,
): Promise<string[] | undefined> {
  const s = await secretOf(db, box, userId);
  if (!s) throw new TwoFactorError('no_enrolment', 'start the set-up first: no secret to confirm');
  if (s.enabled) {
    throw new TwoFactorError('already_enabled', 'the second factor is already on');
  }
  if (!(await acceptTotp(db, box, userId, code, false, nowMs))) return undefined;
  return db.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE console_users SET totp_enabled_at = now()
        WHERE id = $1 AND totp_enabled_at IS NULL AND totp_ciphertext IS NOT NULL`,
      [userId],
    );
    if (rowCount === 0) {
      throw new TwoFactorError('already_enabled', 'the second factor is already on');
    }
    const codes = await replaceRecoveryCodes(tx, userId);
    // The audit entry commits with the change (issue 27 item 6).
    if (then) await then(tx);
    return codes;
  });
}

/** Ten new recovery codes for the user; the earlier ones stop working. @returns them (once). */
export async function replaceRecoveryCodes(db: Queryable, userId: string): Promise<string[]> {
  const codes = newRecoveryCodes();
  await db.query('DELETE FROM console_recovery_codes WHERE user_id = $1', [userId]);
  await db.query(
    `INSERT INTO console_recovery_codes (user_id, code_hash)
     SELECT $1, h FROM unnest($2::text[]) AS h`,
    [userId, codes.map((c) => sha256(normaliseRecoveryCode(c)))],
  );
  return codes;
}

/**
 * Check a second factor of a user whose second factor is on: a TOTP code (accepted once per step)
 * or an unused recovery code (used up by this call).
 * @returns which kind was accepted, or false.
 */
export async function verifySecondFactor(
  db: Queryable,
  box: SecretBox,
  userId: string,
  code: string,
  nowMs = Date.now(),
  info?: SecondFactorInfo,
): Promise<'totp' | 'recovery_code' | false> {
  if (looksLikeTotp(code)) {
    return (await acceptTotp(db, box, userId, code, true, nowMs, info)) ? 'totp' : false;
  }
  const norm = normaliseRecoveryCode(code);
  if (!/^[a-z2-7]{10}$/.test(norm)) return false;
  const { rowCount } = await db.query(
    `UPDATE console_recovery_codes c SET used_at = now()
       FROM console_users u
      WHERE c.user_id = $1 AND c.code_hash = $2 AND c.used_at IS NULL
        AND u.id = c.user_id AND u.totp_enabled_at IS NOT NULL`,
    [userId, sha256(norm)],
  );
  return rowCount === 1 ? 'recovery_code' : false;
}

/**
 * Turn the user's second factor off: secret, state and recovery codes are deleted.
 * @returns false when it was not on.
 */
export async function disableTwoFactor(db: Queryable, userId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_users
        SET totp_key_id = NULL, totp_ciphertext = NULL, totp_enabled_at = NULL, totp_last_step = NULL
      WHERE id = $1 AND totp_ciphertext IS NOT NULL`,
    [userId],
  );
  await db.query('DELETE FROM console_recovery_codes WHERE user_id = $1', [userId]);
  return rowCount === 1;
}

/** Whether the user has a confirmed second factor. */
export async function twoFactorEnabled(db: Queryable, userId: string): Promise<boolean> {
  const { rows } = await db.query<{ on: boolean }>(
    'SELECT totp_enabled_at IS NOT NULL AS on FROM console_users WHERE id = $1',
    [userId],
  );
  return rows[0]?.on === true;
}

/**
 * What a password reset waits for the code with: nothing of it happens before the code (issue 27
 * item 1). `passwordHash`: the new password's argon2id hash; `resetTokenHash`: the reset link's
 * SHA-256, used up only when the code is right.
 */
export interface PendingReset {
  passwordHash: string;
  resetTokenHash: string;
}

/**
 * Open the code step of a sign-in for the user, or of a password reset (`reset`).
 * @returns its token (for the page, once).
 */
export async function openLoginChallenge(
  db: Queryable,
  userId: string,
  reset?: PendingReset,
): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query(
    `INSERT INTO console_login_challenges
       (token_hash, user_id, expires_at, purpose, password_hash, reset_token_hash)
     VALUES ($1, $2, now() + make_interval(secs => $3), $4, $5, $6)`,
    [
      sha256(token),
      userId,
      CHALLENGE_TTL_SECONDS,
      reset ? 'reset' : 'login',
      reset?.passwordHash ?? null,
      reset?.resetTokenHash ?? null,
    ],
  );
  return token;
}

/** A live sign-in challenge (not used, not expired, fewer than CHALLENGE_FAILURES wrong codes). */
export interface LoginChallenge {
  userId: string;
  email: string;
  accountId: string;
  failures: number;
  /** A password reset waiting for the code, or undefined for a sign-in. */
  reset?: PendingReset;
}

/** The live challenge of `token`, or undefined. */
export async function findLoginChallenge(
  db: Queryable,
  token: string,
): Promise<LoginChallenge | undefined> {
  const { rows } = await db.query<{
    user_id: string;
    email: string;
    account_id: string;
    failures: number;
    purpose: string;
    password_hash: string | null;
    reset_token_hash: string | null;
  }>(
    `SELECT c.user_id, u.email, u.account_id, c.failures, c.purpose, c.password_hash,
            c.reset_token_hash
       FROM console_login_challenges c JOIN console_users u ON u.id = c.user_id
      WHERE c.token_hash = $1 AND c.used_at IS NULL AND c.expires_at > now() AND c.failures < $2`,
    [sha256(token), CHALLENGE_FAILURES],
  );
  const r = rows[0];
  if (!r) return undefined;
  const found: LoginChallenge = {
    userId: r.user_id,
    email: r.email,
    accountId: r.account_id,
    failures: r.failures,
  };
  if (r.purpose === 'reset' && r.password_hash !== null && r.reset_token_hash !== null) {
    found.reset = { passwordHash: r.password_hash, resetTokenHash: r.reset_token_hash };
  }
  return found;
}

/**
 * When the user's code step is locked until (module doc), or null when it takes codes.
 */
export async function codeLockedUntil(db: Queryable, userId: string): Promise<Date | null> {
  const { rows } = await db.query<{ lock_end: Date | null }>(
    `SELECT CASE WHEN code_locked_until > now() THEN code_locked_until END AS lock_end
       FROM console_users WHERE id = $1`,
    [userId],
  );
  return rows[0]?.lock_end ?? null;
}

/** What one wrong code did to the user's window. */
export interface CodeFailure {
  /** Wrong codes the window still takes before the lock (0 when this one locked it). */
  left: number;
  /** Set when this wrong code locked the code step: until when. */
  lockedUntil: Date | null;
  /** This lock is the first in CODE_LOCK_NOTICE_SECONDS: e-mail the user. */
  notify: boolean;
}

/**
 * Count a wrong code against the user (module doc), atomically; the one that reaches
 * CODE_FAILURES_PER_USER locks the code step for CODE_LOCK_SECONDS and starts a new window.
 */
export async function countCodeFailure(db: Queryable, userId: string): Promise<CodeFailure> {
  const { rows } = await db.query<{ n: number }>(
    `UPDATE console_users
        SET code_failures = CASE WHEN code_failures_since IS NULL
                                   OR code_failures_since <= now() - make_interval(secs => $2)
                                 THEN 1 ELSE code_failures + 1 END,
            code_failures_since = CASE WHEN code_failures_since IS NULL
                                         OR code_failures_since <= now() - make_interval(secs => $2)
                                       THEN now() ELSE code_failures_since END
      WHERE id = $1 RETURNING code_failures AS n`,
    [userId, CODE_FAILURE_WINDOW_SECONDS],
  );
  const n = rows[0]?.n ?? 0;
  if (n < CODE_FAILURES_PER_USER) {
    return { left: CODE_FAILURES_PER_USER - n, lockedUntil: null, notify: false };
  }
  const { rows: locked } = await db.query<{ lock_end: Date; notify: boolean }>(
    `UPDATE console_users u
        SET code_locked_until = now() + make_interval(secs => $2),
            code_failures = 0, code_failures_since = NULL,
            code_lock_notified_at = CASE
              WHEN u.code_lock_notified_at IS NULL
                OR u.code_lock_notified_at <= now() - make_interval(secs => $3)
              THEN now() ELSE u.code_lock_notified_at END
       FROM console_users before
      WHERE u.id = $1 AND before.id = u.id
      RETURNING u.code_locked_until AS lock_end,
                u.code_lock_notified_at IS DISTINCT FROM before.code_lock_notified_at AS notify`,
    [userId, CODE_LOCK_SECONDS, CODE_LOCK_NOTICE_SECONDS],
  );
  const r = locked[0];
  return { left: 0, lockedUntil: r?.lock_end ?? null, notify: r?.notify === true };
}

/** A right code clears the user's count of wrong ones. */
export async function clearCodeFailures(db: Queryable, userId: string): Promise<void> {
  await db.query(
    `UPDATE console_users SET code_failures = 0, code_failures_since = NULL
      WHERE id = $1 AND code_failures <> 0`,
    [userId],
  );
}

/** Count a wrong code against the challenge. @returns wrong codes it may still take. */
export async function failLoginChallenge(db: Queryable, token: string): Promise<number> {
  const { rows } = await db.query<{ failures: number }>(
    `UPDATE console_login_challenges SET failures = failures + 1
      WHERE token_hash = $1 RETURNING failures`,
    [sha256(token)],
  );
  return Math.max(0, CHALLENGE_FAILURES - (rows[0]?.failures ?? CHALLENGE_FAILURES));
}

/** Use the challenge up (the sign-in it guarded succeeded). @returns false if already used. */
export async function useLoginChallenge(db: Queryable, token: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `UPDATE console_login_challenges SET used_at = now()
      WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`,
    [sha256(token)],
  );
  return rowCount === 1;
}

/** Require (or stop requiring) a second factor of every member of the account. */
export async function setRequireTwoFactor(
  db: Queryable,
  accountId: string,
  required: boolean,
): Promise<void> {
  await db.query('UPDATE accounts SET require_two_factor = $2 WHERE id = $1', [
    accountId,
    required,
  ]);
}
