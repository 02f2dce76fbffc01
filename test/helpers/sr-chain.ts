/**
 * Signed header chains for the light-client tests: real secp256k1 signatures by SR keys (the
 * devnet's DEVNET_SRS, or new ones made here), produced in schedule order like java-tron does
 * (`(t/3000 − skip) mod 27`, skip 2 after a maintenance block), with handles for lying: a wrong key,
 * a producer outside the set, a fork that only some SRs sign, a maintenance with a new order.
 */
import { createHash } from 'node:crypto';
import {
  DEVNET_SRS,
  type DevnetSr,
  headerRawBytes,
  type RecordedSr,
} from '../../src/devnet/synthetic.js';
import { type SignedHeader, signedHeaderFromRaw } from '../../src/tron/light-client/header.js';
import type { Checkpoint } from '../../src/tron/light-client/sr-set.js';
import {
  addressOfPrivateKey,
  signWitnessHeader,
} from '../../src/tron/light-client/witness-signature.js';
import { pbBytes, pbFields, pbVarint } from '../../src/tron/protobuf.js';
import type { BlockJson } from '../../src/tron/types.js';

const sha256 = (s: string) => new Uint8Array(createHash('sha256').update(s).digest());

/** An SR made for a test: `separateKey` gives it a witness-permission key other than its address. */
export function makeSr(label: string, separateKey = false): DevnetSr {
  const privateKey = sha256(`test sr key ${label}`);
  const signingKey = addressOfPrivateKey(privateKey);
  const address = separateKey
    ? `41${createHash('sha256').update(`test sr ${label}`).digest('hex').slice(0, 40)}`
    : signingKey;
  return { address, signingKey, privateKey };
}

/** A block header signed by `privateKey` (default: the producer's own). */
export function signedHeader(h: {
  number: number;
  timestamp: number;
  parentId: string;
  witness: string;
  privateKey: Uint8Array;
  txTrieRoot?: string;
}): SignedHeader {
  const raw = headerRawBytes({
    number: h.number,
    timestamp: h.timestamp,
    parentHash: h.parentId,
    witness_address: h.witness,
    txTrieRoot: h.txTrieRoot ?? '00'.repeat(32),
    version: 32,
  });
  return signedHeaderFromRaw(raw, signWitnessHeader(raw, h.privateKey));
}

/** An SR of a test chain; one without a private key (a recorded block's) misses its slots. */
export type Producer = DevnetSr | RecordedSr;

/** Slot length, ms. */
const SLOT = 3000;

/** A chain being produced: the tip, the schedule in force and the maintenance ahead. */
export class SignedChain {
  tip: { number: number; id: string; timestamp: number };
  private afterMaintenance = false;

  /**
   * @param order the active SRs in schedule order (27).
   * @param nextMaintenanceTime the block at or after it is a maintenance block; its child uses
   *   `nextOrder` and skips 2 slots.
   */
  constructor(
    tip: { number: number; id: string; timestamp: number },
    public order: readonly Producer[],
    public nextMaintenanceTime = Number.MAX_SAFE_INTEGER,
    public nextOrder: readonly Producer[] = order,
    private readonly interval = 21_600_000,
  ) {
    this.tip = { ...tip };
  }

  /** A copy that continues from the same tip (a fork). */
  fork(): SignedChain {
    const c = new SignedChain(
      this.tip,
      this.order,
      this.nextMaintenanceTime,
      this.nextOrder,
      this.interval,
    );
    c.afterMaintenance = this.afterMaintenance;
    return c;
  }

  /** The SR scheduled at time t for a child of the tip. */
  scheduled(t: number): Producer {
    const skip = this.afterMaintenance ? 2 : 0;
    const i = (((Math.floor(t / SLOT) - skip) % 27) + 27) % 27;
    return this.order[i] as Producer;
  }

  /**
   * Produce the next block, at the first slot whose scheduled SR passes `only` and holds a key (a
   * producer that misses its slot leaves a gap, as on mainnet).
   * @param lie.key sign with this private key instead of the producer's.
   * @param lie.witness name this producer instead of the scheduled one (signed with lie.key).
   * @param txTrieRoot the header's transaction root (64 hex; default 32 zero bytes: no
   *   transactions), for blocks that carry transactions.
   */
  next(
    only: (sr: Producer) => boolean = () => true,
    lie: { key?: Uint8Array; witness?: string } = {},
    txTrieRoot?: string,
  ): SignedHeader {
    const can = (sr: Producer) => only(sr) && (sr.privateKey !== undefined || !!lie.key);
    let t = this.tip.timestamp + SLOT;
    let sr = this.scheduled(t);
    for (let i = 0; i < 1000 && !can(sr); i++) {
      t += SLOT;
      sr = this.scheduled(t);
    }
    const key = lie.key ?? sr.privateKey;
    if (!key) throw new Error('no SR of the schedule can sign');
    const h = signedHeader({
      number: this.tip.number + 1,
      timestamp: t,
      parentId: this.tip.id,
      witness: lie.witness ?? sr.address,
      privateKey: key,
      ...(txTrieRoot === undefined ? {} : { txTrieRoot }),
    });
    this.tip = { number: h.number, id: h.id, timestamp: h.timestamp };
    this.afterMaintenance = false;
    if (t >= this.nextMaintenanceTime) {
      this.afterMaintenance = true;
      this.order = this.nextOrder;
      this.nextMaintenanceTime += this.interval;
    }
    return h;
  }
}

/** A checkpoint naming `order` at `tip`, for tests (maintenance far away unless given). */
export function testCheckpoint(
  tip: { number: number; id: string; timestamp: number },
  order: readonly Producer[] = DEVNET_SRS,
  nextMaintenanceTime = tip.timestamp + 21_600_000 - 3000 * 1000,
  maintenanceIntervalMs = 21_600_000,
): Checkpoint {
  return {
    network: 'devnet',
    block: { ...tip },
    witnesses: order.map((s) => ({ address: s.address, signingKey: s.signingKey })),
    nextMaintenanceTime,
    maintenanceIntervalMs,
  };
}

/** A header as java-tron's JSON block without transactions (visible=false). */
export function blockJsonOf(h: SignedHeader): BlockJson {
  const f = pbFields(h.raw);
  const hex = (n: number) => Buffer.from(pbBytes(f, n) ?? new Uint8Array(0)).toString('hex');
  return {
    blockID: h.id,
    block_header: {
      raw_data: {
        number: h.number,
        txTrieRoot: hex(2),
        witness_address: h.witness,
        parentHash: h.parentId,
        version: Number(pbVarint(f, 10)),
        timestamp: h.timestamp,
      },
      witness_signature: Buffer.from(h.signature).toString('hex'),
    },
  };
}
