/**
 * Prefixed, time-sortable identifiers (habit 11): `<prefix>_<26 chars>`, a ULID-style body of
 * 48 bits of milliseconds then 80 random bits in Crockford base32, so ids sort by creation time.
 * `parseId` rejects an id with the wrong prefix. Event ids are the exception: derived, not random
 * (see eventId), so that re-ingesting a block cannot create a second event.
 */
import { createHash, randomBytes } from 'node:crypto';

export type IdPrefix =
  | 'acc'
  | 'key'
  | 'wh'
  | 'ep'
  | 'ntf'
  | 'evt'
  | 'ses'
  | 'aud'
  | 'alr'
  | 'als'
  | 'ach'
  | 'usr'
  | 'rpl';

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';

function base32(bytes: Uint8Array): string {
  let out = '';
  let bits = 0;
  let value = 0;
  for (const b of bytes) {
    value = (value << 8) | b;
    bits += 8;
    while (bits >= 5) {
      out += CROCKFORD[(value >>> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0) out += CROCKFORD[(value << (5 - bits)) & 31];
  return out;
}

/** A new id `<prefix>_<26 chars>`, sortable by creation time (ms). */
export function newId(prefix: IdPrefix, now = Date.now()): string {
  const bytes = new Uint8Array(16);
  let t = now;
  for (let i = 5; i >= 0; i--) {
    bytes[i] = t % 256;
    t = Math.floor(t / 256);
  }
  bytes.set(randomBytes(10), 6);
  return `${prefix}_${base32(bytes).slice(0, 26)}`;
}

const ID_RE = /^([a-z]+)_([0-9a-hjkmnp-tv-z]{26})$/;

/** True when `id` is well formed and carries `prefix`. */
export function isId(id: string, prefix: IdPrefix): boolean {
  const m = ID_RE.exec(id);
  return m !== null && m[1] === prefix;
}

/**
 * The event id of one transfer for one watch: `evt_` + 26 base32 chars of
 * SHA-256(watch_id ‖ tx_id ‖ event_index). A pure function (DESIGN invariant 2).
 */
export function eventId(watchId: string, txId: string, eventIndex: number): string {
  const h = createHash('sha256').update(`${watchId}\n${txId}\n${eventIndex}`).digest();
  return `evt_${base32(h).slice(0, 26)}`;
}
