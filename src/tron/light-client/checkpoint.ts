/**
 * Building checkpoints (sr-set.ts `Checkpoint`): from recorded signed headers (how the shipped
 * mainnet checkpoint was made, and how a test re-derives it), and from the configured providers
 * (`tronwatch checkpoint`, checkpoint-build.ts).
 *
 * From headers: every header is chained to the one before it by parent hash; each SR's signing key
 * is recovered from its own signatures (witness-signature.ts) and must be one constant key; the
 * schedule order is read from the slots (`(t/3000) mod 27`, DposSlot.getScheduledWitness), so a
 * run of ≥ 27 consecutive headers inside one epoch gives all 27 SRs, their order and their keys.
 * What headers cannot give is the next maintenance time: it is passed in (java-tron keeps it in
 * `DynamicPropertiesStore.NEXT_MAINTENANCE_TIME`, starting from the genesis time and moving by whole
 * intervals; the shipped checkpoint's value is an assumption, see checkpoints/README.md).
 */
import type { SignedHeader } from './header.js';
import {
  ACTIVE_SR_COUNT,
  type Checkpoint,
  CheckpointError,
  MAINTENANCE_INTERVAL_MS,
  parseCheckpoint,
  type SrEntry,
  scheduleIndex,
} from './sr-set.js';
import { recoverWitnessSigner } from './witness-signature.js';

/** What a run of recorded headers says about the SRs that signed it. */
export interface RecoveredSigners {
  /** Per SR address, its one signing key (42 hex). */
  keys: Map<string, string>;
  /** Schedule position → SR address. */
  slots: Map<number, string>;
}

/**
 * Recover every producer's signing key from consecutive headers, and their schedule positions.
 * @param headers ascending, consecutive, chained by parent hash, none after a maintenance block.
 * @throws CheckpointError when the headers are not chained, an SR signs with two keys, or two SRs
 *   share a slot (the run crosses a maintenance or is not mainnet's schedule).
 */
export function recoverSigners(headers: readonly SignedHeader[]): RecoveredSigners {
  const keys = new Map<string, string>();
  const slots = new Map<number, string>();
  let prev: SignedHeader | undefined;
  for (const h of headers) {
    if (prev && (h.parentId !== prev.id || h.number !== prev.number + 1)) {
      throw new CheckpointError(`header ${h.number} is not the child of ${prev.number}`);
    }
    const signer = recoverWitnessSigner(h.raw, h.signature);
    const known = keys.get(h.witness);
    if (known !== undefined && known !== signer) {
      throw new CheckpointError(`SR ${h.witness} signs with two keys (${known}, ${signer})`);
    }
    keys.set(h.witness, signer);
    const slot = scheduleIndex(h.timestamp, false);
    const holder = slots.get(slot);
    if (holder !== undefined && holder !== h.witness) {
      throw new CheckpointError(`slot ${slot} held by ${holder} and ${h.witness}`);
    }
    slots.set(slot, h.witness);
    prev = h;
  }
  return { keys, slots };
}

/**
 * A checkpoint at the last of `headers` (see recoverSigners), in schedule order.
 * @param nextMaintenanceTime the first maintenance after the last header, ms.
 * @throws CheckpointError when fewer than 27 SRs or slots are seen, or as recoverSigners.
 */
export function checkpointFromHeaders(
  headers: readonly SignedHeader[],
  nextMaintenanceTime: number,
  network: string,
  source: string,
  maintenanceIntervalMs = MAINTENANCE_INTERVAL_MS,
): Checkpoint {
  const { keys, slots } = recoverSigners(headers);
  const last = headers[headers.length - 1];
  if (!last) throw new CheckpointError('no headers');
  const witnesses: SrEntry[] = [];
  for (let i = 0; i < ACTIVE_SR_COUNT; i++) {
    const address = slots.get(i);
    const signingKey = address ? keys.get(address) : undefined;
    if (!address || !signingKey) {
      throw new CheckpointError(`no header in slot ${i}: need ≥ 27 consecutive headers`);
    }
    witnesses.push({ address, signingKey });
  }
  return parseCheckpoint({
    network,
    block: { number: last.number, id: last.id, timestamp: last.timestamp },
    witnesses,
    nextMaintenanceTime,
    maintenanceIntervalMs,
    source,
  });
}
