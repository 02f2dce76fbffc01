/**
 * TRON address codec. An address is 21 bytes: the version byte 0x41 (mainnet and testnets alike)
 * then the 20-byte account id. Users see base58check (`T…`, 34 characters): base58 of the 21
 * bytes followed by the first 4 bytes of sha256(sha256(21 bytes)). Inside tronwatch addresses are
 * lowercase 42-character hex, so comparing two addresses is comparing two strings.
 *
 * Source: TRON developer docs, "Account / Address format"; SPEC §CreateWatch (both input forms).
 * Libraries: @scure/base (base58check) and @noble/hashes (SHA-256).
 */
import { sha256 } from '@noble/hashes/sha2';
import { createBase58check, hex } from '@scure/base';

const b58c = createBase58check(sha256);
const HEX41 = /^41[0-9a-fA-F]{40}$/;

/** The address could not be decoded, or does not carry the 0x41 version byte. */
export class InvalidAddressError extends Error {
  constructor(
    readonly input: string,
    reason: string,
  ) {
    super(`invalid TRON address: ${reason}`);
    this.name = 'InvalidAddressError';
  }
}

/** 42-char hex (with 41) → base58check `T…`. @throws InvalidAddressError on a malformed input. */
export function hexToBase58(hex41: string): string {
  if (!HEX41.test(hex41))
    throw new InvalidAddressError(hex41, 'expected 21 bytes of hex starting with 41');
  return b58c.encode(hex.decode(hex41.toLowerCase()));
}

/** base58check `T…` → lowercase 42-char hex. @throws InvalidAddressError (bad checksum, length, version). */
export function base58ToHex(b58: string): string {
  let bytes: Uint8Array;
  try {
    bytes = b58c.decode(b58);
  } catch {
    throw new InvalidAddressError(b58, 'not valid base58check (bad character or checksum)');
  }
  if (bytes.length !== 21)
    throw new InvalidAddressError(b58, `decodes to ${bytes.length} bytes, expected 21`);
  if (bytes[0] !== 0x41) throw new InvalidAddressError(b58, 'version byte is not 0x41');
  return hex.encode(bytes);
}

/**
 * Parse an address in either form SPEC accepts: base58check starting with `T`, or hex with the
 * `41` prefix (42 hex digits, any case, optional `0x`).
 * @returns `{ hex, base58 }` in canonical form (lowercase hex).
 * @throws InvalidAddressError with a reason suitable for a 400 `details` entry.
 */
export function parseAddress(input: string): { hex: string; base58: string } {
  const s = input.trim();
  if (s !== input) throw new InvalidAddressError(input, 'surrounding whitespace');
  if (s.startsWith('T')) {
    if (s.length !== 34)
      throw new InvalidAddressError(input, 'base58 address must be 34 characters');
    const h = base58ToHex(s);
    return { hex: h, base58: s };
  }
  const h = s.startsWith('0x') || s.startsWith('0X') ? s.slice(2) : s;
  if (!HEX41.test(h)) {
    throw new InvalidAddressError(
      input,
      'expected base58 starting with T or 42 hex digits starting with 41',
    );
  }
  const lower = h.toLowerCase();
  return { hex: lower, base58: hexToBase58(lower) };
}

/** True when `input` is a valid address in either form. */
export function isValidAddress(input: string): boolean {
  try {
    parseAddress(input);
    return true;
  } catch {
    return false;
  }
}

/** USDT (TRC-20) on mainnet: TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t. */
export const USDT_CONTRACT_BASE58 = 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t';
export const USDT_CONTRACT_HEX = '41a614f803b6fd780986a42c78ec9c7f77e6ded13c';
/**
 * USDT (TRC-20) on TRON's Nile testnet, the test environment's network (issue 32):
 * TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf ("Tether USD", 6 decimals), the token Nile's faucet and
 * TRON's own system tests use (java-tron's stest `USDT` constant; public integrations name it as
 * Nile's USDT, e.g. pooli-shop/pooli `NileUSDTContract`).
 */
export const NILE_USDT_CONTRACT_BASE58 = 'TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf';
/** Nile's USDT as 41-hex (base58check-decoded TXYZopYRdj2D9XRtbG411XZZ3kM5VkAeBf). */
export const NILE_USDT_CONTRACT_HEX = '41eca9bc828a3005b9a3b909f2cc5c2a54794de05f';

/**
 * The USDT contract a network's transfers are read from, 41-hex: Nile's on `nile` (the test
 * environment's network, issue 32), mainnet's otherwise.
 */
export function usdtContractHexOf(network: string): string {
  return network === 'nile' ? NILE_USDT_CONTRACT_HEX : USDT_CONTRACT_HEX;
}
