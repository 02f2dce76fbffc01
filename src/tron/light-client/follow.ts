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
import { createHash } from 'node:crypto';
import { PbDecodeError, pbBytes, pbBytesAll, pbFields, pbVarint } from '../protobuf.js';
import type { BlockJson } from '../types.js';
import { type ExactBlock, encodeTransactionFromJson, merkleRoot } from '../verify.js';
import { type FinalBlock, type LightClient, LightClientError } from './finality.js';
import {
  HeaderError,
  type SignedHeader,
  signedHeaderFromJson,
  signedHeaderFromRaw,
} from './header.js';
import {
  type KeyRotation,
  keyRotationsOfRawData,
  keyRotationsOfTransaction,
  RotationError,
} from './sr-set.js';
import { recoverWitnessSigner, WitnessSignatureError } from './witness-signature.js';

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
 * The signers of a transaction (its `signature` list over SHA-256 of `raw`, secp256k1 like a
 * block's). java-tron checks them against the owner permission's keys, which is account state; a
 * light client can check that there is at least one and that each recovers.
 * @throws RotationError when none is given or one does not recover.
 */
function transactionSigners(raw: Uint8Array, signatures: readonly Uint8Array[]): string[] {
  if (signatures.length === 0) throw new RotationError('the transaction carries no signature');
  return signatures.map((sig) => {
    try {
      return recoverWitnessSigner(raw, sig);
    } catch (err) {
      if (err instanceof WitnessSignatureError) {
        throw new RotationError(`a signature of the transaction does not recover: ${err.message}`);
      }
      throw err;
    }
  });
}

/**
 * The SR signing-key rotations of a block whose transaction list is proven (see the module doc),
 * in block order; each type-46 contract checked as far as its bytes allow (sr-set.ts
 * keyRotationsOfRawData) and its transaction signed (transactionSigners).
 * @throws LightClientError `bad-rotation` (refused, not a halt) on a type-46 transaction java-tron
 *   would refuse, or bytes that cannot be decoded.
 */
export function keyRotationsOfBlock(block: BlockJson, exact?: ExactBlock): KeyRotation[] {
  const number = Number(block.block_header?.raw_data?.number ?? 0);
  try {
    return rotationsOf(block, exact);
  } catch (err) {
    if (err instanceof RotationError || err instanceof PbDecodeError) {
      throw new LightClientError(
        'bad-rotation',
        number,
        `an SR key change (type 46) java-tron would refuse: ${err.message}`,
      );
    }
    throw err;
  }
}

/**
 * Whether any transaction of the block holds a type-46 contract (decoding only contract types; a
 * failed one too): the list must then be proven before its rotations are read.
 * @throws PbDecodeError on bytes that cannot be decoded.
 */
export function blockHasType46(block: BlockJson, exact?: ExactBlock): boolean {
  if (exact) {
    return exact.transactions.some((tx) => {
      const raw = pbBytes(pbFields(tx), 1);
      return raw !== undefined && hasType46(raw);
    });
  }
  return (block.transactions ?? []).some((tx) => {
    const hex = tx.raw_data_hex ?? '';
    return /^(?:[0-9a-fA-F]{2})*$/.test(hex) && hasType46(Buffer.from(hex, 'hex'));
  });
}

function rotationsOf(block: BlockJson, exact?: ExactBlock): KeyRotation[] {
  const out: KeyRotation[] = [];
  if (exact) {
    for (const tx of exact.transactions) {
      const fields = pbFields(tx);
      const raw = pbBytes(fields, 1);
      if (!raw || !hasType46(raw)) continue;
      const found = keyRotationsOfTransaction(tx);
      if (found.length > 0) transactionSigners(raw, pbBytesAll(fields, 2));
      out.push(...found);
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
    const found = keyRotationsOfRawData(raw);
    if (found.length > 0) {
      const sigs = (tx.signature ?? []).map((h) => {
        if (!/^[0-9a-fA-F]{130}$/.test(h)) throw new RotationError('a signature is not 65 bytes');
        return Buffer.from(h, 'hex');
      });
      transactionSigners(raw, sigs);
    }
    out.push(...found);
  }
  return out;
}

/** A block as read from a provider: its JSON and, when the provider serves gRPC, its exact bytes. */
export interface ReadBlock {
  block: BlockJson;
  exact?: ExactBlock | undefined;
}

/** Where the follower reads blocks: a provider's current chain, above its solidified head too. */
export interface BlockSource {
  /**
   * Block `n` of the source's chain (`/wallet/getblockbynum`, not only solidified ones), or
   * undefined when it has not produced it yet. Errors propagate to the follower's caller.
   */
  blockByNumber(n: number, signal?: AbortSignal): Promise<ReadBlock | undefined>;
}

/** A block the light client proved final, with what was read of it. */
export interface ProvenBlock extends ReadBlock {
  final: FinalBlock;
}

/** Type-46 contracts in a block whose transaction list cannot be proven against its header. */
export class UnprovenRotationError extends Error {
  constructor(readonly blockNumber: number) {
    super(
      `block ${blockNumber}: an SR key change (type 46) in a transaction list not proven by the ` +
        'header (no exact bytes and the JSON root differs): add a provider that serves gRPC',
    );
    this.name = 'UnprovenRotationError';
  }
}

function sha256(b: Uint8Array): Buffer {
  return createHash('sha256').update(b).digest();
}

/**
 * Whether `read`'s transaction list is the one its header commits to (txTrieRoot, java-tron
 * `BlockCapsule.calcMerkleRoot`): from exact bytes, or re-encoded from JSON (which can miss bytes
 * of a genuine block: verify.ts explains why that is "unproven", not "forged").
 */
function transactionsProven(read: ReadBlock, header: SignedHeader): boolean {
  const root = pbBytes(pbFields(header.raw), 2);
  const want = root ? Buffer.from(root).toString('hex') : '0'.repeat(64);
  if (read.exact) return merkleRoot(read.exact.transactions.map(sha256)) === want;
  const leaves: Uint8Array[] = [];
  for (const tx of read.block.transactions ?? []) {
    const bytes = encodeTransactionFromJson(tx);
    if (!bytes) return false;
    leaves.push(sha256(bytes));
  }
  return merkleRoot(leaves) === want;
}

/**
 * Follows a provider's chain with a light client: reads each block once, ahead of finality,
 * submits its signed header (and key rotations, only from a proven transaction list), answers
 * `need-key` from the providers, re-reads lower heights when the provider's chain moved (a fork
 * above finality), and hands out the blocks proven final, in order.
 *
 * Requests: one block read per block produced (the caller reads each final block's receipts once),
 * plus re-reads after a fork. Errors: LightClientError (refused block or halt) and
 * UnprovenRotationError from step(); the source's errors as they come.
 */
export class ChainFollower {
  private next: number;
  private readonly read = new Map<string, ReadBlock>();
  private readonly ready: ProvenBlock[] = [];
  /** The highest height read whose parent was not known (a fork being re-read downwards). */
  private heldTop = 0;

  /**
   * @param keyOf an SR's signing key agreed by the providers' quorum (witnessKeyFromProviders).
   * @param readAhead heights read at once while catching up (1 = one at a time). Default 1.
   */
  constructor(
    private readonly lc: LightClient,
    private readonly source: BlockSource,
    private readonly keyOf: (address: string, signal?: AbortSignal) => Promise<string>,
    private readonly readAhead = 1,
  ) {
    this.next = lc.finalBlock.number + 1;
  }

  /** Blocks read ahead by height (catching up), consumed in order; cleared after a fork. */
  private readonly ahead = new Map<number, Promise<ReadBlock | undefined>>();

  /**
   * Block `n`, reading up to `readAhead` heights at once while catching up (a missing height
   * ends the batch: what is above it is asked again later).
   */
  private async fetch(n: number, signal?: AbortSignal): Promise<ReadBlock | undefined> {
    if (!this.ahead.has(n)) {
      for (let k = n; k < n + this.readAhead; k++) {
        if (!this.ahead.has(k)) this.ahead.set(k, this.source.blockByNumber(k, signal));
      }
    }
    const p = this.ahead.get(n) as Promise<ReadBlock | undefined>;
    this.ahead.delete(n);
    const got = await p;
    if (!got) this.dropAhead();
    return got;
  }

  /** Forget the blocks read ahead (their height is asked again), rejections included. */
  private dropAhead(): void {
    for (const p of this.ahead.values()) p.catch(() => undefined);
    this.ahead.clear();
  }

  /** The next height to read. */
  get nextHeight(): number {
    return this.next;
  }

  /**
   * Read and check one block.
   * @returns 'read' when a block was read (whatever it did), 'none' when the source has not
   *   produced the next height yet.
   */
  async step(signal?: AbortSignal): Promise<'read' | 'none'> {
    const n = this.next;
    const got = await this.fetch(n, signal);
    if (!got) return 'none';
    const header = signedHeaderOf(got.block, got.exact);
    if (header.number !== n) {
      throw new LightClientError('not-chained', n, `the source answered block ${header.number}`);
    }
    let rotations: ReturnType<typeof keyRotationsOfBlock> = [];
    if (blockHasType46(got.block, got.exact)) {
      if (!transactionsProven(got, header)) throw new UnprovenRotationError(n);
      rotations = keyRotationsOfBlock(got.block, got.exact);
    }
    this.read.set(header.id, got);
    let r: ReturnType<LightClient['submit']>;
    try {
      r = this.lc.submit(header, rotations);
      if (r.status === 'need-key') {
        this.lc.addCandidateKey(r.witness, await this.keyOf(r.witness, signal));
        r = this.lc.submit(header, rotations);
      }
    } catch (err) {
      this.read.delete(header.id);
      throw err;
    }
    if (r.status === 'held') {
      // The source's chain is not the one read below: read the height below again (the light
      // client refuses it when that goes under the final block).
      this.heldTop = Math.max(this.heldTop, n);
      this.next = n - 1;
      this.dropAhead();
      return 'read';
    }
    if (r.status === 'verified') {
      for (const f of r.final) {
        const b = this.read.get(f.id);
        if (b) this.ready.push({ ...b, final: f });
      }
      const fin = this.lc.finalBlock.number;
      for (const [id, b] of this.read) {
        if (signedHeaderOf(b.block, b.exact).number <= fin) this.read.delete(id);
      }
    }
    // Linked up: the blocks held above were released with it; go on above them.
    this.next = (this.lc.status().held === 0 ? Math.max(n, this.heldTop) : n) + 1;
    if (this.lc.status().held === 0) this.heldTop = 0;
    return 'read';
  }

  /** The next block proven final, in order, or undefined. */
  takeFinal(): ProvenBlock | undefined {
    return this.ready.shift();
  }
}
