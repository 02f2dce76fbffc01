/**
 * What ingest hands the light client per block, and how it answers a `need-key`.
 *
 * - The signed header: from a provider's exact `BlockHeader.raw` bytes when it serves gRPC
 *   (verify.ts ExactBlock), else re-encoded from the JSON header (header.ts); the signature is the
 *   JSON's `witness_signature` (it is not hashed into anything: recovery checks it).
 * - Key rotations: type-46 contracts read from each transaction's signed bytes (`raw_data_hex`,
 *   whose SHA-256 is the txID, or the exact transaction bytes). Only call this for a block whose
 *   transaction list verify.ts has proven against the header: that is what binds the rotation to
 *   the SR's signature.
 * - A newcomer's key: `/wallet/getaccount` witness_permission from every provider, agreed by the
 *   quorum (checkpoint-build.ts witnessKeyFromProviders), then LightClient.addCandidateKey.
 */
import { PbDecodeError, pbBytes, pbBytesAll, pbFields, pbVarint } from '../protobuf.js';
import type { BlockJson } from '../types.js';
import type { ExactBlock } from '../verify.js';
import {
  HeaderError,
  type SignedHeader,
  signedHeaderFromJson,
  signedHeaderFromRaw,
} from './header.js';
import { type KeyRotation, keyRotationsOfRawData, keyRotationsOfTransaction } from './sr-set.js';

/** `Transaction.Contract.ContractType.AccountPermissionUpdateContract`. */
const TYPE_46 = 46n;

/**
 * The signed header of `block`, from `exact`'s header bytes when given.
 * @throws HeaderError on a malformed header or signature, or exact bytes whose blockID is not the
 *   JSON's.
 */
export function signedHeaderOf(block: BlockJson, exact?: ExactBlock): SignedHeader {
  if (!exact || exact.headerRaw.length === 0) return signedHeaderFromJson(block);
  const sigHex = block.block_header?.witness_signature ?? '';
  if (!/^[0-9a-fA-F]{130}$/.test(sigHex)) {
    throw new HeaderError('witness_signature is not 65 bytes of hex');
  }
  const h = signedHeaderFromRaw(exact.headerRaw, Buffer.from(sigHex, 'hex'));
  if (block.blockID !== undefined && block.blockID.toLowerCase() !== h.id) {
    throw new HeaderError(`block ${h.number}: the exact header is not the JSON block's`);
  }
  return h;
}

/** Whether a `Transaction.raw` holds a type-46 contract (decoding only the contract types). */
function hasType46(raw: Uint8Array): boolean {
  for (const c of pbBytesAll(pbFields(raw), 11)) {
    if (pbVarint(pbFields(c), 1) === TYPE_46) return true;
  }
  return false;
}

/**
 * The SR signing-key rotations of a block whose transaction list is proven (see the module doc),
 * in block order.
 * @throws PbDecodeError on malformed transaction bytes.
 */
export function keyRotationsOfBlock(block: BlockJson, exact?: ExactBlock): KeyRotation[] {
  const out: KeyRotation[] = [];
  if (exact) {
    for (const tx of exact.transactions) {
      const raw = pbBytes(pbFields(tx), 1);
      if (raw && hasType46(raw)) out.push(...keyRotationsOfTransaction(tx));
    }
    return out;
  }
  for (const tx of block.transactions ?? []) {
    const hex = tx.raw_data_hex ?? '';
    if (!/^(?:[0-9a-fA-F]{2})*$/.test(hex)) throw new PbDecodeError('raw_data_hex is not hex');
    const raw = Buffer.from(hex, 'hex');
    if (!hasType46(raw)) continue;
    const ret = tx.ret?.[0]?.contractRet;
    if (ret !== undefined && ret !== 'SUCCESS') continue;
    out.push(...keyRotationsOfRawData(raw));
  }
  return out;
}
