/**
 * A devnet node's answers about its super representatives, in java-tron's JSON shapes
 * (visible=false, hex addresses), as `tronwatch checkpoint` (tron/light-client/checkpoint-build.ts)
 * asks them: shared by sr-node.ts (a synthetic chain) and replay-node.ts (its devnet set).
 *
 * - `/wallet/listwitnesses`: `{witnesses: [{address, voteCount, url, isJobs}]}`, the active SRs
 *   with `isJobs: true` (java-tron sets it on the active set at each maintenance,
 *   `MaintenanceManager.doMaintenance`) in schedule order with decreasing votes, then two standby
 *   candidates without `isJobs`.
 * - `/wallet/getaccount {address}`: `{address, is_witness, witness_permission?}`; the permission's
 *   first key is the SR's signing key (`AccountCapsule.getWitnessPermissionAddress`). An SR that
 *   signs with its own address has no permission when its index in the list is even (java-tron
 *   then uses the address itself), one naming its own address otherwise, so both shapes are
 *   served. `{}` for an account that is not an SR (java-tron's answer for an unknown account).
 * - `/wallet/getchainparameters`: `{chainParameter: [{key, value}]}` with the devnet's
 *   `getMaintenanceTimeInterval` (DEVNET_MAINTENANCE_INTERVAL_MS) and `getAllowMultiSign` 1.
 */
import type { SrEntry } from '../tron/light-client/sr-set.js';
import { DEVNET_MAINTENANCE_INTERVAL_MS } from './synthetic.js';

/** `/wallet/getchainparameters` of the devnet (the parameters checkpoint-build.ts reads). */
export function chainParametersAnswer(): { chainParameter: Array<{ key: string; value: number }> } {
  return {
    chainParameter: [
      { key: 'getMaintenanceTimeInterval', value: DEVNET_MAINTENANCE_INTERVAL_MS },
      { key: 'getAllowMultiSign', value: 1 },
    ],
  };
}

/** Two standby SRs (candidates with votes, not active), as listwitnesses also lists them. */
const STANDBY = [`41${'aa'.repeat(20)}`, `41${'bb'.repeat(20)}`];

/**
 * `/wallet/listwitnesses` for `active` (schedule order), then `more` (SRs voted in at a
 * maintenance, active now too), minus the addresses in `hide` (a lie).
 */
export function listWitnessesAnswer(
  active: readonly SrEntry[],
  hide: readonly string[] = [],
  more: readonly SrEntry[] = [],
): { witnesses: Array<Record<string, unknown>> } {
  return {
    witnesses: [
      ...[...active, ...more.filter((m) => !active.some((s) => s.address === m.address))]
        .filter((s) => !hide.includes(s.address))
        .map((s, i) => ({
          address: s.address,
          voteCount: 1_000_000_000 - i,
          url: `https://sr${i}.devnet.invalid`,
          isJobs: true,
        })),
      ...STANDBY.map((address) => ({ address, voteCount: 1000, url: 'https://standby.invalid' })),
    ],
  };
}

/**
 * `/wallet/getaccount {address}` for an SR of `active`, or of `more` (accounts known without being
 * active, e.g. an SR voted in at a maintenance).
 * @param address 42 hex (any case).
 * @param reportKey a lie: the signing key to report (undefined = the truth).
 * @param plain ordinary accounts (42 hex, lowercase) that exist without being witnesses.
 */
export function getAccountAnswer(
  active: readonly SrEntry[],
  address: string,
  more: readonly SrEntry[] = [],
  reportKey?: (address: string) => string | undefined,
  plain: readonly string[] = [],
): Record<string, unknown> {
  const a = address.toLowerCase();
  const sr = active.find((s) => s.address === a) ?? more.find((s) => s.address === a);
  // An ordinary account (no witness): java-tron answers it without is_witness or permission.
  if (!sr) return plain.includes(a) ? { address: a, balance: 1_000_000 } : {};
  const key = reportKey?.(a) ?? sr.signingKey;
  const own = key === a && active.findIndex((d) => d.address === a) % 2 === 0;
  return {
    address: a,
    is_witness: true,
    ...(own
      ? {}
      : {
          witness_permission: {
            type: 'Witness',
            id: 1,
            permission_name: 'witness',
            threshold: 1,
            keys: [{ address: key, weight: 1 }],
          },
        }),
  };
}
