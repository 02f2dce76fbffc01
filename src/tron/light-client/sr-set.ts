/**
 * The super-representative (SR) set the light client trusts: a pinned checkpoint, the block
 * schedule, maintenance times, and SR signing-key rotations read from signed transactions.
 *
 * Rules and their java-tron sources (tronprotocol/java-tron, develop, 2025):
 * - 27 active SRs (`Parameter.ChainConstant.MAX_ACTIVE_WITNESS_NUM`), a block every 3,000 ms
 *   (`BLOCK_PRODUCED_INTERVAL`), each SR one slot in turn (`SINGLE_REPEAT` = 1).
 * - Schedule (`DposSlot.getScheduledWitness`, `DposSlot.getSlot`/`getTime`, `DposService
 *   .validBlock`): the block at time t is produced by `active[(t/3000 − skip) mod 27]`, the mainnet
 *   genesis time being 0 (`config.conf` genesis.block timestamp "0"); `skip` is
 *   `MAINTENANCE_SKIP_SLOTS` = 2 for the block right after a maintenance block, else 0. A block's
 *   time must be a multiple of 3,000 and after its parent's slot.
 * - Maintenance (`MaintenanceManager.applyBlock`, `DynamicPropertiesStore
 *   .updateNextMaintenanceTime`): the first block whose time is ≥ `nextMaintenanceTime` is the
 *   maintenance block; it is validated under the old set, then votes are counted and the active
 *   list is re-sorted by votes (`DposService.updateWitness`, `WitnessStore.sortWitness`), so both
 *   the members and their ORDER may change; the next maintenance time becomes
 *   `current + (⌊(blockTime − current) / interval⌋ + 1) × interval` (mainnet interval 21,600,000 ms,
 *   `config.conf` maintenanceTimeInterval).
 * - Signing key (`AccountCapsule.getWitnessPermissionAddress`): the first key of the SR account's
 *   `witness_permission`, or its own address when that permission has no key. It changes only
 *   through an `AccountPermissionUpdateContract` (contract type 46,
 *   `AccountPermissionUpdateActuator`), which for a witness account must carry the witness
 *   permission (`AccountPermissionUpdateActuator.validate`: "witness permission is missed").
 *
 * What headers cannot prove: who won the votes and which key an account holds (headers commit to
 * transactions, not to state). That is why the set starts from a checkpoint an operator pins and
 * changes only by the rules of finality.ts.
 */
import { z } from 'zod';
import { PbDecodeError, pbBytes, pbBytesAll, pbFields, pbVarint } from '../protobuf.js';

/** Active SRs per epoch on mainnet (`MAX_ACTIVE_WITNESS_NUM`). */
export const ACTIVE_SR_COUNT = 27;
/** Milliseconds per slot (`BLOCK_PRODUCED_INTERVAL`). */
export const SLOT_MS = 3000;
/** Slots skipped after a maintenance block (`MAINTENANCE_SKIP_SLOTS`). */
export const MAINTENANCE_SKIP_SLOTS = 2;
/** Mainnet maintenance interval, ms (6 h; `maintenanceTimeInterval`). */
export const MAINTENANCE_INTERVAL_MS = 21_600_000;

/** One active SR: its account address and the key that signs its blocks (both 42 hex, 41…). */
export interface SrEntry {
  address: string;
  signingKey: string;
}

/**
 * A checkpoint: a block the operator trusts, with the SR set in force right after it.
 * JSON shape of `checkpoints/*.json` and of `tronwatch checkpoint`'s output.
 */
export interface Checkpoint {
  /** `mainnet`, `nile`, or `devnet`. */
  network: string;
  /** The trusted block: number, blockID (64 hex) and time (ms). Blocks are followed from its child. */
  block: { number: number; id: string; timestamp: number };
  /**
   * The active SRs in schedule order: `witnesses[i]` produces the slots whose
   * `(t/3000 − skip) mod 27` is i. Exactly 27, distinct addresses.
   */
  witnesses: SrEntry[];
  /** The first maintenance time after the block, ms (`/wallet/getnextmaintenancetime`). */
  nextMaintenanceTime: number;
  /** Maintenance interval, ms. Default 21,600,000. */
  maintenanceIntervalMs: number;
  /** Where it came from, for the operator's review (free text). */
  source?: string;
}

/** A checkpoint file that is malformed or inconsistent. */
export class CheckpointError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CheckpointError';
  }
}

const HEX41 = z
  .string()
  .regex(/^41[0-9a-fA-F]{40}$/, '21-byte hex address starting with 41')
  .transform((s) => s.toLowerCase());

const checkpointSchema = z.object({
  network: z.string().min(1),
  block: z.object({
    number: z.number().int().positive().max(Number.MAX_SAFE_INTEGER),
    id: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, '32-byte hex blockID')
      .transform((s) => s.toLowerCase()),
    timestamp: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  }),
  witnesses: z.array(z.object({ address: HEX41, signingKey: HEX41 })),
  nextMaintenanceTime: z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER),
  maintenanceIntervalMs: z.number().int().positive().default(MAINTENANCE_INTERVAL_MS),
  source: z.string().optional(),
});

/**
 * Parse and check a checkpoint (the JSON above).
 * @throws CheckpointError listing what is wrong: a malformed field, not 27 distinct SRs, a blockID
 *   whose first 8 bytes are not the block number, a time that is not a slot, a next maintenance
 *   time not after the block, or a block in the two slots after a maintenance (pick a later one:
 *   its schedule would need the skip).
 */
export function parseCheckpoint(input: unknown): Checkpoint {
  const r = checkpointSchema.safeParse(input);
  if (!r.success) {
    const what = r.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`);
    throw new CheckpointError(`checkpoint: ${what.join('; ')}`);
  }
  const c = r.data;
  const problems: string[] = [];
  if (c.witnesses.length !== ACTIVE_SR_COUNT) {
    problems.push(`${c.witnesses.length} witnesses, expected ${ACTIVE_SR_COUNT}`);
  }
  if (new Set(c.witnesses.map((w) => w.address)).size !== c.witnesses.length) {
    problems.push('a witness address appears twice');
  }
  if (BigInt(`0x${c.block.id.slice(0, 16)}`) !== BigInt(c.block.number)) {
    problems.push('block.id does not start with block.number');
  }
  if (c.block.timestamp % SLOT_MS !== 0) problems.push('block.timestamp is not a multiple of 3000');
  if (c.nextMaintenanceTime <= c.block.timestamp) {
    problems.push('nextMaintenanceTime is not after block.timestamp');
  }
  const epochStart = c.nextMaintenanceTime - c.maintenanceIntervalMs;
  if (c.block.timestamp >= epochStart && c.block.timestamp < epochStart + 3 * SLOT_MS) {
    problems.push('block is within the first slots after a maintenance: pick a later block');
  }
  if (problems.length > 0) throw new CheckpointError(`checkpoint: ${problems.join('; ')}`);
  return c;
}

/**
 * The schedule position of a block at `timestamp`: `(t/3000 − skip) mod size`.
 * @param afterMaintenance true for the block whose parent is a maintenance block.
 */
export function scheduleIndex(
  timestamp: number,
  afterMaintenance: boolean,
  size = ACTIVE_SR_COUNT,
): number {
  const slot = Math.floor(timestamp / SLOT_MS) - (afterMaintenance ? MAINTENANCE_SKIP_SLOTS : 0);
  return ((slot % size) + size) % size;
}

/**
 * The next maintenance time after a maintenance block at `blockTime` (java-tron
 * `updateNextMaintenanceTime`): `current + (⌊(blockTime − current)/interval⌋ + 1) × interval`.
 */
export function nextMaintenanceTime(current: number, blockTime: number, interval: number): number {
  return current + (Math.floor((blockTime - current) / interval) + 1) * interval;
}

/** A change of an SR account's block-signing key, from a signed type-46 contract. */
export interface KeyRotation {
  /** The account whose witness permission changed (42 hex). */
  owner: string;
  /** Its new signing key (42 hex): `witness.keys[0].address`, or `owner` when it has no key. */
  signingKey: string;
}

/** `Transaction.Contract.ContractType.AccountPermissionUpdateContract`. */
const ACCOUNT_PERMISSION_UPDATE = 46n;
/** `Transaction.Result.contractResult.SUCCESS`. */
const CONTRACT_SUCCESS = 1n;

function hex(b: Uint8Array): string {
  return Buffer.from(b.buffer, b.byteOffset, b.byteLength).toString('hex');
}

/**
 * The signing-key changes a transaction makes, read from its signed bytes.
 * Protocol: Transaction {raw_data 1, signature 2, ret 5 {contractRet 3}}; raw {contract 11
 * {type 1, parameter 2: Any {type_url 1, value 2}}}; AccountPermissionUpdateContract
 * {owner_address 1, owner 2, witness 3: Permission {…, keys 7: Key {address 1, weight 2}}, actives 4}.
 * A transaction whose `ret[0].contractRet` is present and not SUCCESS changes nothing.
 * @param transaction a whole `Transaction` message (as gRPC sends it and the txTrieRoot hashes).
 *   Callers pass only transactions proven against a verified header.
 * @throws PbDecodeError on malformed bytes.
 */
export function keyRotationsOfTransaction(transaction: Uint8Array): KeyRotation[] {
  const tx = pbFields(transaction);
  const ret0 = pbBytesAll(tx, 5)[0];
  if (ret0) {
    const code = pbVarint(pbFields(ret0), 3);
    if (code !== 0n && code !== CONTRACT_SUCCESS) return [];
  }
  const raw = pbBytes(tx, 1);
  if (!raw) return [];
  return keyRotationsOfRawData(raw);
}

/**
 * A type-46 contract that java-tron would refuse (AccountPermissionUpdateActuator.validate): a block
 * that carries one in a successful transaction is not a block java-tron accepts.
 */
export class RotationError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RotationError';
  }
}

/** `Permission.PermissionType`: Owner 0, Witness 1, Active 2. */
const PERMISSION_OWNER = 0n;
const PERMISSION_WITNESS = 1n;
const PERMISSION_ACTIVE = 2n;
/** Most active permissions an account may have (`validate`: "active permission is too many"). */
const MAX_ACTIVE_PERMISSIONS = 8;
/** Longest permission name (`checkPermission`: "permission's name is too long"). */
const MAX_PERMISSION_NAME = 32;

/** A TRON address as `Commons.addressValid` takes it: 21 bytes, the first 0x41. */
function addressValid(b: Uint8Array | undefined): b is Uint8Array {
  return b !== undefined && b.length === 21 && b[0] === 0x41;
}

/**
 * The checks of java-tron's `AccountPermissionUpdateActuator.checkPermission` that need no chain
 * state (the key count's upper bound `getTotalSignNum` and the available contract types do, and are
 * left to the SRs that make the block final): at least one key, distinct valid key addresses with
 * positive weights adding up to at least a positive threshold, a name of at most 32 characters,
 * parent 0, and operations only on an Active permission (exactly 32 bytes there), one key exactly
 * on a Witness permission. Protocol: Permission {type 1, id 2, permission_name 3, threshold 4,
 * parent_id 5, operations 6, keys 7: Key {address 1, weight 2}}.
 * @throws RotationError naming the problem.
 */
function checkPermission(bytes: Uint8Array, want: bigint, what: string): void {
  const f = pbFields(bytes);
  if (pbVarint(f, 1) !== want) throw new RotationError(`${what} permission type is not ${what}`);
  const keys = pbBytesAll(f, 7).map((k) => pbFields(k));
  if (keys.length === 0) throw new RotationError(`${what} permission has no key`);
  if (want === PERMISSION_WITNESS && keys.length !== 1) {
    throw new RotationError(`witness permission has ${keys.length} keys, not exactly 1`);
  }
  const threshold = BigInt.asIntN(64, pbVarint(f, 4));
  if (threshold <= 0n) throw new RotationError(`${what} permission threshold is not positive`);
  const name = pbBytes(f, 3);
  if (name && Buffer.from(name).toString('utf8').length > MAX_PERMISSION_NAME) {
    throw new RotationError(`${what} permission name is longer than ${MAX_PERMISSION_NAME}`);
  }
  if (pbVarint(f, 5) !== 0n) throw new RotationError(`${what} permission parent is not owner`);
  const seen = new Set<string>();
  let weights = 0n;
  for (const k of keys) {
    const address = pbBytes(k, 1);
    if (!addressValid(address)) throw new RotationError(`${what} permission key is not an address`);
    const a = hex(address);
    if (seen.has(a)) throw new RotationError(`${what} permission names key ${a} twice`);
    seen.add(a);
    const weight = BigInt.asIntN(64, pbVarint(k, 2));
    if (weight <= 0n) throw new RotationError(`${what} permission key weight is not positive`);
    weights += weight;
  }
  if (weights < threshold) {
    throw new RotationError(`${what} permission key weights add up to less than its threshold`);
  }
  const operations = pbBytes(f, 6);
  if (want !== PERMISSION_ACTIVE && operations && operations.length > 0) {
    throw new RotationError(`${what} permission carries operations`);
  }
  if (want === PERMISSION_ACTIVE && operations?.length !== 32) {
    throw new RotationError('active permission operations are not 32 bytes');
  }
}

/**
 * The signing-key changes in a transaction's `raw_data` bytes (`raw_data_hex`, what the txID
 * hashes): see keyRotationsOfTransaction. Each type-46 contract that sets a witness permission
 * (the only ones that change a block-signing key) is checked as far as its own bytes allow against java-tron's `AccountPermissionUpdateActuator.validate`: a valid owner address, an
 * Owner permission, 1 to 8 Active ones, a Witness one of exactly one key when present, each
 * permission as checkPermission says. What needs state (the account exists and is a witness, the
 * transaction is signed by its owner permission's keys) is for the SRs that make the block final:
 * that is why a rotation counts only once final (finality.ts rule 6).
 * @throws PbDecodeError on malformed bytes; RotationError on a contract java-tron would refuse.
 */
export function keyRotationsOfRawData(rawData: Uint8Array): KeyRotation[] {
  const out: KeyRotation[] = [];
  for (const c of pbBytesAll(pbFields(rawData), 11)) {
    const cf = pbFields(c);
    if (pbVarint(cf, 1) !== ACCOUNT_PERMISSION_UPDATE) continue;
    const any = pbBytes(cf, 2);
    const value = any ? pbBytes(pbFields(any), 2) : undefined;
    if (!value) throw new PbDecodeError('AccountPermissionUpdateContract without a value');
    const pf = pbFields(value);
    const owner = pbBytes(pf, 1);
    if (owner?.length !== 21) {
      throw new PbDecodeError('AccountPermissionUpdateContract without a 21-byte owner_address');
    }
    const witness = pbBytes(pf, 3);
    // No witness permission: a non-SR account's update, which leaves the SR keys alone (and is
    // not checked here: it changes nothing the light client follows).
    if (!witness) continue;
    if (!addressValid(owner)) throw new RotationError('owner_address is not a TRON address');
    const ownerPermission = pbBytes(pf, 2);
    if (!ownerPermission) throw new RotationError('owner permission is missing');
    checkPermission(ownerPermission, PERMISSION_OWNER, 'owner');
    const actives = pbBytesAll(pf, 4);
    if (actives.length === 0) throw new RotationError('active permission is missing');
    if (actives.length > MAX_ACTIVE_PERMISSIONS) {
      throw new RotationError(`${actives.length} active permissions, at most 8`);
    }
    for (const a of actives) checkPermission(a, PERMISSION_ACTIVE, 'active');
    checkPermission(witness, PERMISSION_WITNESS, 'witness');
    const firstKey = pbBytesAll(pbFields(witness), 7)[0];
    const keyAddress = firstKey ? pbBytes(pbFields(firstKey), 1) : undefined;
    out.push({
      owner: hex(owner),
      signingKey: keyAddress && keyAddress.length === 21 ? hex(keyAddress) : hex(owner),
    });
  }
  return out;
}
