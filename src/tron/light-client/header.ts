/**
 * A signed block header as the light client reads it: every field it decides on is decoded from
 * the `BlockHeader.raw` bytes the witness signed (never from a provider's JSON beside them).
 *
 * Protocol (java-tron `protocol/src/main/protos/core/Tron.proto`, `BlockHeader.raw`): timestamp 1
 * (int64, ms), txTrieRoot 2, parentHash 3, number 7 (int64), witness_id 8, witness_address 9,
 * version 10, accountStateRoot 11; `BlockHeader.witness_signature` 2. The blockID is the number as
 * 8 big-endian bytes ‖ bytes 8–31 of SHA-256(raw) (`BlockCapsule.BlockId`).
 */

import { PbDecodeError, pbBytes, pbFields, pbVarint } from '../protobuf.js';
import type { BlockJson } from '../types.js';
import { blockIdFromRaw, encodeHeaderRaw } from '../verify.js';

/** A header whose bytes cannot be read, or that lacks what the light client needs. */
export class HeaderError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'HeaderError';
  }
}

/** One block header with its signature, decoded from the signed bytes. */
export interface SignedHeader {
  /** blockID, 64 lowercase hex. */
  id: string;
  /** Block number (safe integer ≥ 1). */
  number: number;
  /** Block time, ms since the epoch (a multiple of 3,000 on a valid chain). */
  timestamp: number;
  /** The parent's blockID, 64 lowercase hex. */
  parentId: string;
  /** The producing SR's address, 42 lowercase hex (41…). */
  witness: string;
  /** `BlockHeader.raw` bytes: what the signature and the blockID hash. */
  raw: Uint8Array;
  /** `witness_signature`, 65 bytes r ‖ s ‖ v. */
  signature: Uint8Array;
}

function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

function safe(v: bigint, what: string): number {
  if (v < 0n || v > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw new HeaderError(`${what} ${v} is out of range`);
  }
  return Number(v);
}

/**
 * Decode the fields the light client needs from `raw` (`BlockHeader.raw` bytes).
 * @throws HeaderError on malformed protobuf, a missing parentHash or witness_address, a
 *   parentHash that is not 32 bytes, or a number/timestamp outside the safe integers.
 */
export function signedHeaderFromRaw(raw: Uint8Array, signature: Uint8Array): SignedHeader {
  let fields: ReturnType<typeof pbFields>;
  try {
    fields = pbFields(raw);
  } catch (err) {
    if (err instanceof PbDecodeError) throw new HeaderError(`header bytes: ${err.message}`);
    throw err;
  }
  const numberBig = pbVarint(fields, 7);
  const number = safe(numberBig, 'block number');
  const timestamp = safe(pbVarint(fields, 1), 'timestamp');
  const parent = pbBytes(fields, 3);
  const witness = pbBytes(fields, 9);
  if (parent?.length !== 32) throw new HeaderError(`block ${number}: no 32-byte parentHash`);
  if (witness?.length !== 21 || witness[0] !== 0x41) {
    throw new HeaderError(`block ${number}: witness_address is not a 21-byte 0x41 address`);
  }
  return {
    id: blockIdFromRaw(numberBig, raw),
    number,
    timestamp,
    parentId: hex(parent),
    witness: hex(witness),
    raw,
    signature,
  };
}

/**
 * The signed header of a block in java-tron's JSON shape (`getblockbynum`, visible=false): the
 * raw bytes re-encoded from `block_header.raw_data` in field order (java-tron's serialisation).
 * When the re-encoded bytes do not hash to the block's `blockID`, the JSON is not what was signed.
 * @throws HeaderError on a missing or malformed header or signature, or a blockID mismatch.
 */
export function signedHeaderFromJson(block: BlockJson): SignedHeader {
  const header = block.block_header;
  const rawJson = header?.raw_data;
  if (!rawJson) throw new HeaderError('block has no block_header.raw_data');
  const sigHex = header?.witness_signature ?? '';
  if (!/^[0-9a-fA-F]{130}$/.test(sigHex)) {
    throw new HeaderError('witness_signature is not 65 bytes of hex');
  }
  const n = Number(rawJson.number ?? 0);
  let raw: Uint8Array;
  try {
    raw = encodeHeaderRaw(rawJson as Record<string, unknown>, n);
  } catch (err) {
    throw new HeaderError(`block ${n}: ${(err as Error).message}`);
  }
  const h = signedHeaderFromRaw(raw, Buffer.from(sigHex, 'hex'));
  if (block.blockID !== undefined && block.blockID.toLowerCase() !== h.id) {
    throw new HeaderError(`block ${n}: blockID does not hash from its header`);
  }
  return h;
}
