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
  return rowCount === 1;
}

/**
 * Confirm an enrolment with a code from the app: the second factor is on from now, and ten
 * recovery codes replace any earlier ones. @returns the recovery codes (shown once), or
 * undefined when the code is wrong.
 * @throws TwoFactorError no_enrolment (nothing to confirm) or already_enabled.
 */
export async function confirmEnrolment(
  db: Db,
  box: SecretBox,
  userId: string,
  code: string,
  nowMs = Date.now(),
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
    return replaceRecoveryCodes(tx, userId);
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
): Promise<'totp' | 'recovery_code' | false> {
  if (looksLikeTotp(code)) {
    return (await acceptTotp(db, box, userId, code, true, nowMs)) ? 'totp' : false;
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

/** Open the code step of a sign-in for the user. @returns its token (for the page, once). */
export async function openLoginChallenge(db: Queryable, userId: string): Promise<string> {
  const token = randomBytes(32).toString('base64url');
  await db.query(
    `INSERT INTO console_login_challenges (token_hash, user_id, expires_at)
     VALUES ($1, $2, now() + make_interval(secs => $3))`,
    [sha256(token), userId, CHALLENGE_TTL_SECONDS],
  );
  return token;
}

/** A live sign-in challenge (not used, not expired, fewer than CHALLENGE_FAILURES wrong codes). */
export interface LoginChallenge {
  userId: string;
  email: string;
  accountId: string;
  failures: number;
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
  }>(
    `SELECT c.user_id, u.email, u.account_id, c.failures
       FROM console_login_challenges c JOIN console_users u ON u.id = c.user_id
      WHERE c.token_hash = $1 AND c.used_at IS NULL AND c.expires_at > now() AND c.failures < $2`,
    [sha256(token), CHALLENGE_FAILURES],
  );
  const r = rows[0];
  return r && { userId: r.user_id, email: r.email, accountId: r.account_id, failures: r.failures };
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
