/**
 * Console passwords (DESIGN invariant 6: argon2id), through @node-rs/argon2 (prebuilt binaries
 * from npm). Parameters as OWASP's Password Storage Cheat Sheet recommends for argon2id: 19 MiB
 * of memory, 2 iterations, 1 lane (~55 ms on this project's 2-core machine). The PHC string stores
 * them, so raising them later only affects new hashes.
 */
import { hash, verify } from '@node-rs/argon2';

/** OWASP minimum configuration for argon2id (m = 19456 KiB, t = 2, p = 1). */
export const ARGON2_OPTIONS = {
  // Algorithm.Argon2id (a const enum in the package's types, so written as its value).
  algorithm: 2,
  memoryCost: 19_456,
  timeCost: 2,
  parallelism: 1,
} as const;

/** Length bounds of a password, characters (NIST SP 800-63B: ≥ 8; we ask 12; cap the work). */
export const PASSWORD_MIN = 12;
export const PASSWORD_MAX = 256;

/** The argon2id PHC string of `password`. */
export function hashPassword(password: string): Promise<string> {
  return hash(password, ARGON2_OPTIONS);
}

let dummy: Promise<string> | undefined;

/**
 * Whether `password` matches `stored` (a PHC string). With `stored` null or undefined (an unknown
 * e-mail, an account without a password yet), a dummy hash is verified instead and false
 * returned, so the answer takes the same time and an attacker cannot tell the cases apart
 * (issue 12 item 2). Never throws on a malformed hash: false.
 */
export async function verifyPassword(
  stored: string | null | undefined,
  password: string,
): Promise<boolean> {
  if (!stored) {
    dummy ??= hashPassword('tronwatch: no such account');
    await verify(await dummy, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}
