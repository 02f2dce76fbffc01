/**
 * A block's witness signature: who signed a TRON block header, read from the signature itself.
 *
 * Rules and their java-tron sources (tronprotocol/java-tron, develop, 2025):
 * - The signature is secp256k1 ECDSA over the SHA-256 of the `BlockHeader.raw` protobuf bytes, the
 *   same hash the blockID is made of (`BlockCapsule.getRawHash`, `BlockCapsule.validateSignature`,
 *   which calls `SignUtils.signatureToAddress(getRawHash(), witness_signature)`).
 * - `witness_signature` is 65 bytes r ‖ s ‖ v; v is the recovery id, 0/1, or 27/28 as Ethereum
 *   writes it (`ECKey.signatureToKey` accepts both: it subtracts 27 when v ≥ 27).
 * - The signer's address is 0x41 ‖ the last 20 bytes of Keccak-256 of the uncompressed public key
 *   without its 0x04 prefix (`ECKey.computeAddress`, `DecodeUtil.addressPreFixByte` = 0x41).
 * - With `AllowMultiSign` on (mainnet, proposal 20), that address must equal the SR account's
 *   witness-permission key (`AccountCapsule.getWitnessPermissionAddress`: the first key of
 *   `witness_permission`, or the SR's own address when it has none); sr-set.ts holds those keys.
 *
 * Libraries: @noble/curves (secp256k1 recovery and signing), @noble/hashes (SHA-256, Keccak-256).
 */
import { secp256k1 } from '@noble/curves/secp256k1';
import { sha256 } from '@noble/hashes/sha2';
import { keccak_256 } from '@noble/hashes/sha3';

/** A `witness_signature` that is malformed or recovers no public key. */
export class WitnessSignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'WitnessSignatureError';
  }
}

/** Lowercase hex of bytes. */
function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/**
 * The TRON address of a secp256k1 public key: lowercase 42-char hex, `41` ‖ last 20 bytes of
 * Keccak-256(x ‖ y). Source: java-tron `ECKey.computeAddress`.
 * @param publicKey 65-byte uncompressed (0x04 ‖ x ‖ y) or 33-byte compressed key.
 * @throws WitnessSignatureError when the bytes are not a point of the curve.
 */
export function addressOfPublicKey(publicKey: Uint8Array): string {
  let xy: Uint8Array;
  try {
    xy = secp256k1.ProjectivePoint.fromHex(publicKey).toRawBytes(false).subarray(1);
  } catch (err) {
    throw new WitnessSignatureError(`not a secp256k1 public key: ${(err as Error).message}`);
  }
  return `41${hex(keccak_256(xy).subarray(12))}`;
}

/**
 * The address that signed `headerRaw`: recovered from `signature` over SHA-256(headerRaw).
 * @param headerRaw the `BlockHeader.raw` protobuf bytes (what the blockID hashes).
 * @param signature the header's `witness_signature`: 65 bytes r ‖ s ‖ v (v ∈ {0, 1, 27, 28}).
 * @returns lowercase 42-char hex address (41…).
 * @throws WitnessSignatureError on a wrong length, a bad recovery id, r or s out of range, or a
 *   signature from which no public key can be recovered.
 */
export function recoverWitnessSigner(headerRaw: Uint8Array, signature: Uint8Array): string {
  if (signature.length !== 65) {
    throw new WitnessSignatureError(`witness_signature is ${signature.length} bytes, not 65`);
  }
  const v0 = signature[64] ?? 0;
  const v = v0 >= 27 ? v0 - 27 : v0;
  if (v !== 0 && v !== 1)
    throw new WitnessSignatureError(`recovery id ${v0} is not 0, 1, 27 or 28`);
  let point: ReturnType<typeof secp256k1.ProjectivePoint.fromHex>;
  try {
    point = secp256k1.Signature.fromCompact(signature.subarray(0, 64))
      .addRecoveryBit(v)
      .recoverPublicKey(sha256(headerRaw));
  } catch (err) {
    throw new WitnessSignatureError(`no public key recovers: ${(err as Error).message}`);
  }
  return `41${hex(keccak_256(point.toRawBytes(false).subarray(1)).subarray(12))}`;
}

/**
 * Sign `headerRaw` as an SR does (for the devnet and tests): ECDSA over SHA-256(headerRaw),
 * low-s, RFC 6979 deterministic nonce.
 * @param privateKey 32 bytes.
 * @returns 65 bytes r ‖ s ‖ v with v = 0 or 1, as java-tron writes `witness_signature`.
 */
export function signWitnessHeader(headerRaw: Uint8Array, privateKey: Uint8Array): Uint8Array {
  const sig = secp256k1.sign(sha256(headerRaw), privateKey);
  const out = new Uint8Array(65);
  out.set(sig.toCompactRawBytes(), 0);
  out[64] = sig.recovery;
  return out;
}

/** The TRON address of a 32-byte private key (lowercase 42-char hex). */
export function addressOfPrivateKey(privateKey: Uint8Array): string {
  return addressOfPublicKey(secp256k1.getPublicKey(privateKey, false));
}
