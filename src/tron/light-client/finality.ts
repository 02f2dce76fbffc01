/**
 * The light client: decides, from signatures alone, which blocks are final.
 *
 * Glossary: a *verified* block is one whose header is chained to the last final block by parent
 * hashes, produced in its slot by an SR of the set, and signed by that SR's signing key; a *final*
 * block is a verified block under which tronwatch has itself seen enough SRs build.
 *
 * Rules and their java-tron sources (tronprotocol/java-tron, develop, 2025):
 * 1. Signature (`BlockCapsule.validateSignature`; witness-signature.ts): the signer recovered from
 *    `witness_signature` over SHA-256(raw) equals the producing SR's signing key
 *    (`AccountCapsule.getWitnessPermissionAddress`). Else `bad-signature`.
 * 2. Set (`DposService.validBlock` via `getScheduledWitness`): the producer is an SR of the epoch's
 *    active set. Else `outside-set`.
 * 3. Schedule (`DposService.validBlock`, `DposSlot`): the time is a multiple of 3,000 ms after the
 *    parent's (`bad-timestamp`), and the producer holds slot `(t/3000 − skip) mod 27` (sr-set.ts).
 *    In the checkpoint's epoch the order is the checkpoint's; after a maintenance the active list is
 *    re-sorted by votes, which headers do not show, so the order is learned: each SR keeps the first
 *    slot it is seen in, and a second SR in that slot, or the SR in another, is `wrong-slot`. What is
 *    learned lives on the branch that showed it (the final chain, plus each verified block's own
 *    ancestors above it), never in a state shared by every branch: a side block, even one a real SR
 *    signed, cannot make a block of another branch `wrong-slot` (issue 36).
 * 4. Chain: the number is the parent's + 1; a block under or at the final height that is not on
 *    the final chain is `not-chained`; a block whose parent has not been seen is held until it
 *    comes (a provider that withholds blocks stops finality, never fakes it).
 * 5. Finality (`DposService.updateSolidBlock`: the solidified block is the one at position
 *    ⌊27 × (1 − 70 %)⌋ = 8 of the SRs' latest block numbers sorted ascending, `SOLIDIFIED_THRESHOLD`
 *    = 70): block N is final once ≥ 19 distinct counted SRs have verified blocks at heights ≥ N on
 *    N's chain, N's own producer included. Finality of N makes its ancestors final.
 * 6. Key rotation (`AccountPermissionUpdateActuator`, contract type 46): java-tron applies a
 *    rotation at once (`execute` writes the account, and the SR's next block is checked against it),
 *    because a java-tron node validated the transaction against the account's owner permission,
 *    which is state a light client does not have. So here a rotation counts for finality only once
 *    the block carrying it is FINAL under the keys in force before it (19 distinct known SRs built on
 *    it, which their own nodes only do if the transaction was valid): from its child on, the SR's
 *    blocks must carry the new key (the old one is `bad-signature`, as in java-tron), but until the
 *    rotation is final they are verified and held, NOT counted toward anyone's finality; they are
 *    dropped with their branch. One compromised SR that writes 18 "rotations" of other SRs' keys
 *    into its own block therefore gains nothing: the blocks signed with those keys count for none.
 *    The caller passes rotations only from a transaction list proven against the header, each
 *    checked as far as the contract's own bytes allow (sr-set.ts keyRotationsOfRawData).
 * 7. Maintenance (`MaintenanceManager.applyBlock`): the first block at or after the next
 *    maintenance time is checked under the old set; from its child on a new epoch begins. SRs of the
 *    old set stay known; an SR new in the epoch needs its key from a quorum of providers
 *    (`need-key`, then addCandidateKey) and counts toward finality only once ≥ 19 known SRs have
 *    built on one of its blocks (it joins the set when that block is final). The epoch itself (its
 *    members, its next maintenance time) is that of the maintenance block's own branch until the
 *    maintenance block is final. A 9th new SR on one branch is refused (`too-many-changes`, not a
 *    halt: with 19 of 27 needed, 9 newcomers would leave the known SRs unable to vouch for them, so
 *    such a branch cannot become final anyway, and a halt must never rest on a branch one provider
 *    serves; if the chain itself did this, every provider's block is refused and ingest stalls
 *    with that reason until an operator pins a fresh checkpoint). An SR of the old set that produced no block
 *    in an epoch of which at least 3 rounds (81 blocks) were seen is not carried into the next one:
 *    a voted-out SR's key (less guarded once it no longer earns) must not keep counting; if it
 *    returns, it returns as a newcomer. Only the maintenance block's own chain counts, each block
 *    once: the epoch's final blocks (counted as they become final) and, when the next epoch begins,
 *    the verified blocks of that epoch between the final block and the maintenance block. A fork's
 *    blocks never count, and neither do blocks read again after a restart (the snapshot holds the
 *    final chain's counts only).
 * 8. Checkpoint: blocks are followed from the checkpoint's child. A first block that is not chained
 *    to it and lies past the checkpoint's next maintenance time halts (`stale-checkpoint`): the
 *    set it names may no longer be the one signing.
 *
 * Errors: LightClientError with `code`; `halt` true means ingest must stop and alert (a human
 * decides), false means the block is refused like any failed check (the provider lied or erred).
 */
import type { SignedHeader } from './header.js';
import {
  ACTIVE_SR_COUNT,
  type Checkpoint,
  type KeyRotation,
  nextMaintenanceTime,
  SLOT_MS,
  scheduleIndex,
} from './sr-set.js';
import { recoverWitnessSigner, WitnessSignatureError } from './witness-signature.js';

/** Distinct SRs whose blocks make a block final (27 − ⌊27 × 0.3⌋ = 19; `SOLIDIFIED_THRESHOLD`). */
export const FINALITY_THRESHOLD = ACTIVE_SR_COUNT - Math.floor((ACTIVE_SR_COUNT * 30) / 100);
/** New SRs one maintenance may bring before ingest halts (27 − 19 = 8). */
export const MAX_NEW_SRS_PER_MAINTENANCE = ACTIVE_SR_COUNT - FINALITY_THRESHOLD;

export type LightClientCode =
  | 'bad-signature'
  | 'outside-set'
  | 'wrong-slot'
  | 'bad-timestamp'
  | 'not-chained'
  | 'too-many-changes'
  | 'bad-rotation'
  | 'stale-checkpoint';

/** A block refused (`halt` false) or a state that stops ingest until an operator acts (`halt` true). */
export class LightClientError extends Error {
  constructor(
    readonly code: LightClientCode,
    readonly blockNumber: number,
    message: string,
    readonly halt = false,
  ) {
    super(`block ${blockNumber}: ${message}`);
    this.name = 'LightClientError';
  }
}

/** A block proven final. */
export interface FinalBlock {
  number: number;
  id: string;
  timestamp: number;
  witness: string;
  /** Epoch of the SR set it was checked under (0 = the checkpoint's). */
  epoch: number;
}

/** What submitting a header did. */
export type SubmitResult =
  | {
      status: 'verified';
      /** Blocks that became final, ascending (may include blocks held earlier). */
      final: FinalBlock[];
      /** Held blocks that were released by this one and then refused. */
      refused: LightClientError[];
    }
  /** Its parent has not been seen: kept, and checked when the parent comes. */
  | { status: 'held'; missingParent: string }
  /**
   * Produced by an SR new in this epoch: give its key (addCandidateKey), then submit again.
   * `epochEnd`: the block's epoch's next maintenance time, ms (which epoch it is in, for the
   * providers' check that the producer may sign then).
   */
  | { status: 'need-key'; witness: string; epochEnd: number }
  /** Already verified or final. */
  | { status: 'known' };

/** The light client's state, for `/v1/status`, `/healthz` and metrics. */
export interface LightClientStatus {
  final: { number: number; id: string; timestamp: number };
  epoch: number;
  /** SRs of the current epoch that count toward finality. */
  knownSrs: number;
  /** Verified blocks above the final one (all forks). */
  pending: number;
  /** Blocks held for a missing parent. */
  held: number;
  nextMaintenanceTime: number;
}

/**
 * What a light client must keep across a restart (JSON-safe): its checkpoint, its last final block
 * and the SR sets of the epochs from the one before it on, with their counts of final blocks. Blocks
 * above the final one are not kept: after a restart they are read again (ingest resumes from the
 * final block), and counted when they become final.
 */
export interface LightClientSnapshot {
  version: 1;
  checkpoint: Checkpoint;
  final: FinalBlock & { parentId: string; maintenance: boolean };
  epochs: Array<{
    index: number;
    nextMaintenanceTime: number;
    members: Array<{ address: string; key: string; known: boolean }>;
    slots: Array<[number, string]>;
    newcomers: string[];
    /**
     * SRs that produced a final block in the epoch, and how many of its blocks are final (Epoch
     * finalProducers, finalObserved; rule 7); absent (read as none) in snapshots from before rule
     * 7 dropped silent SRs. Snapshots written while the counts were of every verified block (from
     * f47bbc2 until counts of final blocks only) also counted forks' blocks and the blocks above
     * the final one, which are counted again when read after the restart: they are read as they
     * are, so for the epoch such a snapshot was taken in they may be high, and a silent SR may be
     * dropped at that epoch's end after fewer than 81 of its blocks.
     */
    producers?: string[];
    observed?: number;
  }>;
  candidateKeys: Array<[string, string]>;
}

interface Member {
  key: string;
  /** Counts toward finality (checkpoint SRs, SRs of earlier epochs, and admitted newcomers). */
  known: boolean;
}

/**
 * An epoch's SR set as the FINAL chain shows it: its members and the slots learned from final
 * blocks (rule 3). Each verified block above the final one adds what it shows on its own branch
 * only (Node.slot, Node.newcomerKey); that joins the epoch when the block is final (`advance`).
 */
interface Epoch {
  index: number;
  nextMaintenanceTime: number;
  members: Map<string, Member>;
  /** Schedule position → SR; fixed for the checkpoint's epoch, learned from final blocks after. */
  slots: Map<number, string>;
  slotOf: Map<string, number>;
  /** SRs of this epoch that were not in the one before, admitted by a final block of theirs. */
  newcomers: Set<string>;
  /**
   * SRs that produced a final block in this epoch, and how many of its blocks are final (from the
   * checkpoint on for its own epoch); counted in `advance`, once per block. Blocks above the final
   * one are not in them: `childEpoch` adds those of the maintenance block's own chain (rule 7).
   */
  finalProducers: Set<string>;
  finalObserved: number;
}

/**
 * Blocks of an epoch's chain seen before its silent SRs are dropped at the next maintenance (3
 * rounds of 27 = 81; rule 7).
 */
const ROUNDS_TO_DROP = 3 * ACTIVE_SR_COUNT;

interface Node {
  id: string;
  number: number;
  timestamp: number;
  parentId: string;
  witness: string;
  epoch: number;
  /** The SR set it was checked under: a final-chain epoch, or its branch's (after a maintenance). */
  set: Epoch;
  /** Its time is at or after its epoch's next maintenance time: its child starts a new epoch. */
  maintenance: boolean;
  rotations: readonly KeyRotation[];
  /** Its schedule position (rule 3), learned by its epoch when it is final. */
  slot: number;
  /** Its producer is new in the epoch on this branch (this is its first block): its key. */
  newcomerKey?: string;
  /**
   * The number of the block above the final one whose rotation gave the key it is signed with
   * (rule 6); undefined when the key is the set's. Counted toward finality only once that block is
   * final.
   */
  keyFrom?: number;
}

interface Held {
  header: SignedHeader;
  rotations: readonly KeyRotation[];
}

/** Most held (orphan) blocks kept; the oldest goes first. */
const MAX_HELD = 2048;
/** Recent final ids remembered, so a re-submitted final block is `known`. */
const RECENT_FINAL = 4096;

/**
 * Follows the chain from a checkpoint and proves finality (rules in the module doc).
 * Not thread-safe; one instance per ingest leader. Memory: the unfinal blocks (about 20 at mainnet
 * pace, each a few hundred bytes), up to 2,048 held blocks, and the SR sets of the epochs seen.
 * Cost: each block walks its branch down to the final block once (about 20 steps at mainnet pace).
 */
export class LightClient {
  private final: Node;
  /** Epochs of the final chain by index (the one after a final maintenance block included). */
  private readonly epochs = new Map<number, Epoch>();
  /** Epochs begun by a maintenance block above the final one, by that block's id (rule 7). */
  private readonly branchEpochs = new Map<string, Epoch>();
  private readonly nodes = new Map<string, Node>();
  private readonly held = new Map<string, Held[]>();
  private heldCount = 0;
  private readonly candidateKeys = new Map<string, string>();
  private readonly recentFinal: string[] = [];
  private readonly recentFinalSet = new Set<string>();
  private readonly interval: number;

  /**
   * @param checkpoint a parsed checkpoint (parseCheckpoint): the block blocks are followed from.
   */
  constructor(readonly checkpoint: Checkpoint) {
    this.interval = checkpoint.maintenanceIntervalMs;
    const members = new Map<string, Member>();
    const slots = new Map<number, string>();
    const slotOf = new Map<string, number>();
    checkpoint.witnesses.forEach((w, i) => {
      members.set(w.address, { key: w.signingKey, known: true });
      slots.set(i, w.address);
      slotOf.set(w.address, i);
    });
    const first: Epoch = {
      index: 0,
      nextMaintenanceTime: checkpoint.nextMaintenanceTime,
      members,
      slots,
      slotOf,
      newcomers: new Set(),
      finalProducers: new Set(),
      finalObserved: 0,
    };
    this.epochs.set(0, first);
    this.final = {
      id: checkpoint.block.id,
      number: checkpoint.block.number,
      timestamp: checkpoint.block.timestamp,
      parentId: '',
      witness: '',
      epoch: 0,
      set: first,
      maintenance: false,
      rotations: [],
      slot: -1,
    };
    this.rememberFinal(this.final.id);
  }

  /** The state to store with the cursor (see LightClientSnapshot). */
  snapshot(): LightClientSnapshot {
    const f = this.final;
    return {
      version: 1,
      checkpoint: this.checkpoint,
      final: {
        number: f.number,
        id: f.id,
        timestamp: f.timestamp,
        witness: f.witness,
        epoch: f.epoch,
        parentId: f.parentId,
        maintenance: f.maintenance,
      },
      epochs: [...this.epochs.values()]
        .filter((e) => e.index <= f.epoch + 1)
        .map((e) => ({
          index: e.index,
          nextMaintenanceTime: e.nextMaintenanceTime,
          members: [...e.members].map(([address, m]) => ({ address, key: m.key, known: m.known })),
          slots: [...e.slots],
          newcomers: [...e.newcomers],
          producers: [...e.finalProducers],
          observed: e.finalObserved,
        })),
      candidateKeys: [...this.candidateKeys],
    };
  }

  /**
   * A light client as it was when `snapshot` was taken (at its final block).
   * @throws Error when the snapshot is of another version or lacks the final block's epoch.
   */
  static restore(snapshot: LightClientSnapshot): LightClient {
    if (snapshot.version !== 1)
      throw new Error(`light client snapshot version ${snapshot.version}`);
    const lc = new LightClient(snapshot.checkpoint);
    lc.epochs.clear();
    for (const e of snapshot.epochs) {
      const members = new Map<string, Member>();
      for (const m of e.members) members.set(m.address, { key: m.key, known: m.known });
      const slots = new Map(e.slots);
      const slotOf = new Map<string, number>();
      for (const [i, a] of e.slots) slotOf.set(a, i);
      lc.epochs.set(e.index, {
        index: e.index,
        nextMaintenanceTime: e.nextMaintenanceTime,
        members,
        slots,
        slotOf,
        newcomers: new Set(e.newcomers),
        finalProducers: new Set(e.producers ?? []),
        finalObserved: e.observed ?? 0,
      });
    }
    const f = snapshot.final;
    const set = lc.epochs.get(f.epoch);
    if (!set) throw new Error(`light client snapshot lacks epoch ${f.epoch}`);
    lc.final = { ...f, set, rotations: [], slot: -1 };
    lc.rememberFinal(f.id);
    for (const [a, k] of snapshot.candidateKeys) lc.candidateKeys.set(a, k);
    return lc;
  }

  /** The last block proven final (the checkpoint's until one is). */
  get finalBlock(): FinalBlock {
    const f = this.final;
    return {
      number: f.number,
      id: f.id,
      timestamp: f.timestamp,
      witness: f.witness,
      epoch: f.epoch,
    };
  }

  /** State for status pages and metrics (the final chain's epoch and set). */
  status(): LightClientStatus {
    const top = Math.max(...this.epochs.keys());
    const epoch = this.epochOf(top);
    let known = 0;
    for (const m of epoch.members.values()) if (m.known) known++;
    return {
      final: { number: this.final.number, id: this.final.id, timestamp: this.final.timestamp },
      epoch: top,
      knownSrs: known,
      pending: this.nodes.size,
      held: this.heldCount,
      nextMaintenanceTime: epoch.nextMaintenanceTime,
    };
  }

  /**
   * The signing key of an SR new in an epoch, as a quorum of providers reported it
   * (`/wallet/getaccount` witness_permission, checkpoint-build.ts). Used when it produces a block;
   * forgotten when that block does not verify with it (its next block asks again: `need-key`).
   * @param address the SR's account (42 hex); @param signingKey its key (42 hex).
   */
  addCandidateKey(address: string, signingKey: string): void {
    this.candidateKeys.set(address.toLowerCase(), signingKey.toLowerCase());
  }

  /**
   * Check one header and move finality.
   * @param header decoded from the signed bytes (header.ts).
   * @param rotations the type-46 key changes of the block's transactions (sr-set.ts), from a
   *   transaction list proven against this header; [] when it has none.
   * @throws LightClientError when the block is refused (`halt` false) or ingest must halt.
   */
  submit(header: SignedHeader, rotations: readonly KeyRotation[] = []): SubmitResult {
    if (this.nodes.has(header.id) || this.recentFinalSet.has(header.id)) return { status: 'known' };
    const parent = this.parentOf(header);
    if (!parent) {
      // Rule 8 first: the checkpoint's own child (what ingest reads first) included.
      if (
        this.final.epoch === 0 &&
        this.final.id === this.checkpoint.block.id &&
        this.nodes.size === 0 &&
        header.timestamp >= this.checkpoint.nextMaintenanceTime
      ) {
        throw new LightClientError(
          'stale-checkpoint',
          header.number,
          `the checkpoint (block ${this.checkpoint.block.number}) is older than the maintenance at ` +
            `${new Date(this.checkpoint.nextMaintenanceTime).toISOString()} and this block is not ` +
            'chained to it: build a fresh one with `tronwatch checkpoint` and pin it',
          true,
        );
      }
      if (header.number <= this.final.number + 1) {
        throw new LightClientError(
          'not-chained',
          header.number,
          `parent ${header.parentId} is not on the final chain (final block ${this.final.number})`,
        );
      }
      this.hold(header, rotations);
      return { status: 'held', missingParent: header.parentId };
    }
    const outcome = this.verify(header, rotations, parent);
    if (outcome) return outcome;
    const final = this.advance(header.id);
    const refused: LightClientError[] = [];
    this.release(header.id, final, refused);
    return { status: 'verified', final, refused };
  }

  private parentOf(header: SignedHeader): Node | undefined {
    if (header.parentId === this.final.id) return this.final;
    return this.nodes.get(header.parentId);
  }

  private epochOf(index: number): Epoch {
    const e = this.epochs.get(index);
    if (!e) throw new Error(`light client: epoch ${index} is not known`);
    return e;
  }

  /** `parent`'s ancestors above the final block, `parent` first (its branch). */
  private *branch(parent: Node): Generator<Node> {
    for (let n: Node | undefined = parent; n && n !== this.final; n = this.nodes.get(n.parentId)) {
      yield n;
    }
  }

  /**
   * The SR set a child of `parent` is checked under, creating it after a maintenance block: the
   * old set without the SRs silent through an epoch seen for ROUNDS_TO_DROP blocks (rule 7), counted
   * on `parent`'s chain only: the epoch's final blocks, and its verified blocks from the final one
   * (excluded, it is in the final counts) up to `parent`. An epoch begun by a final maintenance
   * block is the final chain's (`epochs`); one begun by a maintenance block above the final one is
   * that block's branch's (`branchEpochs`, by its id), so two branches never share what they learn.
   */
  private childEpoch(parent: Node): Epoch {
    const before = parent.set;
    if (!parent.maintenance) return before;
    const existing =
      parent === this.final ? this.epochs.get(parent.epoch + 1) : this.branchEpochs.get(parent.id);
    if (existing) return existing;
    const producers = new Set(before.finalProducers);
    let observed = before.finalObserved;
    for (const n of this.branch(parent)) {
      if (n.set !== before) break;
      producers.add(n.witness);
      observed++;
    }
    const members = new Map<string, Member>();
    const seenEnough = observed >= ROUNDS_TO_DROP;
    for (const [a, m] of before.members) {
      if (seenEnough && !producers.has(a)) continue;
      members.set(a, { key: m.key, known: m.known });
    }
    // Newcomers of the old epoch admitted on this branch only (first block not final yet) are not
    // carried: they are not known, and return as newcomers (asked again).
    const e: Epoch = {
      index: parent.epoch + 1,
      nextMaintenanceTime: nextMaintenanceTime(
        before.nextMaintenanceTime,
        parent.timestamp,
        this.interval,
      ),
      members,
      slots: new Map(),
      slotOf: new Map(),
      newcomers: new Set(),
      finalProducers: new Set(),
      finalObserved: 0,
    };
    if (parent === this.final) this.epochs.set(e.index, e);
    else this.branchEpochs.set(parent.id, e);
    return e;
  }

  /** Rules 1–4, 6 and 7 for one block; records it, or returns why it waits. */
  private verify(
    header: SignedHeader,
    rotations: readonly KeyRotation[],
    parent: Node,
  ): SubmitResult | undefined {
    const n = header.number;
    if (n !== parent.number + 1) {
      throw new LightClientError(
        'not-chained',
        n,
        `number is not its parent's + 1 (${parent.number})`,
      );
    }
    if (header.timestamp % SLOT_MS !== 0 || header.timestamp <= parent.timestamp) {
      throw new LightClientError(
        'bad-timestamp',
        n,
        `time ${header.timestamp} is not a slot after its parent's (${parent.timestamp})`,
      );
    }
    const epoch = this.childEpoch(parent);
    const w = header.witness;
    // What this block's own branch shows above the final block (rules 3, 6, 7): the newest key
    // rotation of `w`, and in this epoch the slots learned and the newcomers seen.
    let rotated: { key: string; at: number } | undefined;
    const branchSlots = new Map<number, string>();
    const branchSlotOf = new Map<string, number>();
    const branchNewcomers = new Map<string, string>();
    for (const x of this.branch(parent)) {
      if (!rotated) {
        for (let i = x.rotations.length - 1; i >= 0; i--) {
          const r = x.rotations[i];
          if (r && r.owner === w) {
            rotated = { key: r.signingKey, at: x.number };
            break;
          }
        }
      }
      if (x.set !== epoch) continue;
      // Walking down: a lower block's claim is the earlier one, so it wins.
      branchSlots.set(x.slot, x.witness);
      branchSlotOf.set(x.witness, x.slot);
      if (x.newcomerKey !== undefined) branchNewcomers.set(x.witness, x.newcomerKey);
    }
    const member = epoch.members.get(w);
    const seenNewcomer = branchNewcomers.get(w);
    let key = rotated?.key ?? member?.key ?? seenNewcomer;
    const newcomer = !member && seenNewcomer === undefined;
    if (newcomer) {
      if (epoch.index === 0) {
        throw new LightClientError('outside-set', n, `producer ${w} is not an active SR`);
      }
      key = rotated?.key ?? this.candidateKeys.get(w);
      if (!key) return { status: 'need-key', witness: w, epochEnd: epoch.nextMaintenanceTime };
    }
    let signer: string;
    try {
      signer = recoverWitnessSigner(header.raw, header.signature);
    } catch (err) {
      if (err instanceof WitnessSignatureError) {
        throw new LightClientError('bad-signature', n, err.message);
      }
      throw err;
    }
    if (signer !== key) {
      // A newcomer's key is the providers' word: when its block does not verify with it, forget
      // it, so that the next block of that SR asks them again (`need-key`) instead of refusing
      // its blocks with the same key for ever (also after a restart: snapshots keep these keys).
      if (newcomer && !rotated) this.candidateKeys.delete(w);
      throw new LightClientError(
        'bad-signature',
        n,
        `signed by ${signer}, but ${w}'s signing key is ${key}` +
          (rotated ? ` (rotated in block ${rotated.at}, not final yet)` : ''),
      );
    }
    const slot = scheduleIndex(header.timestamp, parent.maintenance);
    const holder = epoch.slots.get(slot) ?? branchSlots.get(slot);
    const own = epoch.slotOf.get(w) ?? branchSlotOf.get(w);
    if ((holder !== undefined && holder !== w) || (own !== undefined && own !== slot)) {
      throw new LightClientError(
        'wrong-slot',
        n,
        `producer ${w} does not hold slot ${slot} of epoch ${epoch.index}` +
          (holder ? ` (${holder} does)` : ''),
      );
    }
    if (newcomer) {
      const count = epoch.newcomers.size + branchNewcomers.size;
      if (count >= MAX_NEW_SRS_PER_MAINTENANCE) {
        throw new LightClientError(
          'too-many-changes',
          n,
          // What to do first: the list of newcomers is long, and stall reasons are cut (300).
          `more than ${MAX_NEW_SRS_PER_MAINTENANCE} new SRs since the maintenance of epoch ` +
            `${epoch.index} on this block's branch: refused (such a branch cannot become final); ` +
            `if the chain itself did this, check the SR set and pin a fresh checkpoint ` +
            `(${count + 1} new: ${[...epoch.newcomers, ...branchNewcomers.keys(), w].join(', ')})`,
        );
      }
    }
    this.nodes.set(header.id, {
      id: header.id,
      number: n,
      timestamp: header.timestamp,
      parentId: header.parentId,
      witness: w,
      epoch: epoch.index,
      set: epoch,
      maintenance: header.timestamp >= epoch.nextMaintenanceTime,
      rotations: rotations.map((r) => ({
        owner: r.owner.toLowerCase(),
        signingKey: r.signingKey.toLowerCase(),
      })),
      slot,
      ...(newcomer ? { newcomerKey: key as string } : {}),
      ...(rotated ? { keyFrom: rotated.at } : {}),
    });
    return undefined;
  }

  /**
   * Whether block `x` (above the final one) counts toward finality: its producer is a known SR of
   * its epoch (rule 7) and its key is not one a rotation above the final block gave it (rule 6).
   */
  private counts(x: Node): boolean {
    if (x.keyFrom !== undefined && x.keyFrom > this.final.number) return false;
    return x.set.members.get(x.witness)?.known === true;
  }

  /**
   * Rules 5–7: finalise the highest block on `tipId`'s chain with ≥ 19 distinct counted SRs at
   * or above it, and again while that makes more blocks count (a rotation made final lets the
   * blocks signed with its key count). Each block made final joins its epoch (slot, newcomer
   * admitted, producer counted) and applies its rotations.
   * @returns the blocks made final, ascending.
   */
  private advance(tipId: string): FinalBlock[] {
    const out: FinalBlock[] = [];
    for (;;) {
      const seen = new Set<string>();
      let target: Node | undefined;
      for (let x = this.nodes.get(tipId); x; x = this.nodes.get(x.parentId)) {
        if (this.counts(x)) seen.add(x.witness);
        if (seen.size >= FINALITY_THRESHOLD) {
          target = x;
          break;
        }
      }
      if (!target) break;
      const path: Node[] = [];
      for (let x: Node | undefined = target; x; x = this.nodes.get(x.parentId)) path.push(x);
      path.reverse();
      for (const x of path) this.finalise(x, out);
      this.prune();
    }
    return out;
  }

  /** Block `x` (the final block's child) is final: it joins its epoch (rules 3, 6, 7). */
  private finalise(x: Node, out: FinalBlock[]): void {
    const epoch = x.set;
    const member = epoch.members.get(x.witness);
    if (x.newcomerKey !== undefined && !member) {
      // ≥ 19 known SRs built on it: the newcomer is admitted with the key it signed with.
      epoch.members.set(x.witness, { key: x.newcomerKey, known: true });
      epoch.newcomers.add(x.witness);
    } else if (member && !member.known) {
      // A member not known yet (a newcomer in a snapshot written before issue 36, when newcomers
      // joined the set unadmitted): the same rule admits it.
      member.known = true;
    }
    if (!epoch.slots.has(x.slot) && !epoch.slotOf.has(x.witness)) {
      epoch.slots.set(x.slot, x.witness);
      epoch.slotOf.set(x.witness, x.slot);
    }
    epoch.finalProducers.add(x.witness);
    epoch.finalObserved++;
    for (const r of x.rotations) {
      for (const e of [...this.epochs.values(), ...this.branchEpochs.values()]) {
        const m = e.index >= x.epoch ? e.members.get(r.owner) : undefined;
        if (m) m.key = r.signingKey;
      }
    }
    if (x.maintenance) {
      // The epoch it begins is the final chain's now.
      const next = this.branchEpochs.get(x.id);
      if (next) {
        this.branchEpochs.delete(x.id);
        this.epochs.set(next.index, next);
      }
    }
    this.final = x;
    this.rememberFinal(x.id);
    out.push({
      number: x.number,
      id: x.id,
      timestamp: x.timestamp,
      witness: x.witness,
      epoch: x.epoch,
    });
  }

  /**
   * Drop verified blocks that are final now or not descended from the final block, the epochs of
   * branches dropped with them, and final-chain epochs older than the one before the final block's.
   */
  private prune(): void {
    const keep = new Set<string>([this.final.id]);
    const sorted = [...this.nodes.values()].sort((a, b) => a.number - b.number);
    for (const x of sorted) {
      if (x.number > this.final.number && keep.has(x.parentId)) keep.add(x.id);
      else this.nodes.delete(x.id);
    }
    for (const id of this.branchEpochs.keys()) {
      if (!this.nodes.has(id)) this.branchEpochs.delete(id);
    }
    for (const [k] of this.epochs) {
      if (k < this.final.epoch - 1) this.epochs.delete(k);
    }
  }

  private rememberFinal(id: string): void {
    this.recentFinal.push(id);
    this.recentFinalSet.add(id);
    if (this.recentFinal.length > RECENT_FINAL) {
      const old = this.recentFinal.shift();
      if (old) this.recentFinalSet.delete(old);
    }
  }

  private hold(header: SignedHeader, rotations: readonly KeyRotation[]): void {
    const list = this.held.get(header.parentId) ?? [];
    if (list.some((h) => h.header.id === header.id)) return;
    list.push({ header, rotations });
    this.held.set(header.parentId, list);
    this.heldCount++;
    while (this.heldCount > MAX_HELD) {
      const first = this.held.keys().next();
      if (first.done) break;
      const dropped = this.held.get(first.value)?.length ?? 0;
      this.held.delete(first.value);
      this.heldCount -= dropped;
    }
  }

  /** Check the blocks held for `parentId`, now that it is verified, and their children in turn. */
  private release(parentId: string, final: FinalBlock[], refused: LightClientError[]): void {
    const queue = [parentId];
    while (queue.length > 0) {
      const id = queue.shift() as string;
      const list = this.held.get(id);
      if (!list) continue;
      this.held.delete(id);
      this.heldCount -= list.length;
      for (const h of list) {
        const parent = this.parentOf(h.header);
        if (!parent) continue;
        try {
          const waits = this.verify(h.header, h.rotations, parent);
          if (waits) {
            this.hold(h.header, h.rotations);
            continue;
          }
        } catch (err) {
          if (err instanceof LightClientError && !err.halt) {
            refused.push(err);
            continue;
          }
          throw err;
        }
        for (const f of this.advance(h.header.id)) final.push(f);
        queue.push(h.header.id);
      }
    }
  }
}
