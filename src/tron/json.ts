/**
 * Exact JSON for node answers. java-tron writes protobuf int64 fields as bare JSON numbers, and
 * some (TRX amounts in sun, balances) can exceed 2^53, where JSON.parse silently rounds.
 *
 * Fast path: when no integer literal of 16+ digits appears in the text (2^53 has 16 digits), a
 * plain JSON.parse is exact. Otherwise the text is parsed with lossless-json, numbers that are
 * not safe integers becoming bigint. A 16-digit run inside a string (hex never has one, but a
 * memo could) only costs the slower, still exact, path.
 */
import { isSafeNumber, parse as losslessParse } from 'lossless-json';

const LONG_INT = /[:,[]\s*-?\d{16,}/;

/**
 * Parse node JSON exactly: safe integers as number, larger integers as bigint.
 * @throws SyntaxError on malformed JSON.
 */
export function parseNodeJson(text: string): unknown {
  if (!LONG_INT.test(text)) return JSON.parse(text);
  return losslessParse(text, null, (s: string) => {
    if (isSafeNumber(s)) return Number(s);
    if (/^-?\d+$/.test(s)) return BigInt(s);
    return Number(s); // a non-integer: the node sends none we use
  });
}

/** Read a NodeInt (number | bigint | numeric string) as bigint. @throws TypeError otherwise. */
export function toBigInt(v: unknown): bigint {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^-?\d+$/.test(v)) return BigInt(v);
  throw new TypeError(`not an integer: ${String(v)}`);
}
