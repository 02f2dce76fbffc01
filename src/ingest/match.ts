/**
 * Matching transfers against watches (SPEC §Events: "once per confirmed transfer per matching
 * watch (watch_id, direction and asset filter are applied)"). Pure: the candidate watches come
 * from one indexed query per block (commit.ts), so the cost per block grows with the block's
 * addresses, never with the number of watches.
 *
 * Rules: a watch on address A matches a transfer to A as `incoming` (direction incoming|both) and
 * a transfer from A as `outgoing` (direction outgoing|both), when its asset filter is the
 * transfer's asset or ALL. A self-transfer (from = to = A) gives ONE event per watch: `incoming`
 * for incoming and both watches, `outgoing` for outgoing watches (DESIGN decisions).
 */
import type { Transfer } from '../tron/types.js';

/** The columns of a watch that matching needs. */
export interface WatchMatchRow {
  id: string;
  account_id: string;
  address_hex: string;
  asset_filter: 'USDT' | 'TRX' | 'ALL';
  direction: 'incoming' | 'outgoing' | 'both';
  channel: 'webhook' | 'telegram';
}

export interface Match {
  watch: WatchMatchRow;
  transfer: Transfer;
  direction: 'incoming' | 'outgoing';
}

/** Every address a block's transfers touch (the lookup keys of the watch query). */
export function candidateAddresses(transfers: readonly Transfer[]): string[] {
  const set = new Set<string>();
  for (const t of transfers) {
    set.add(t.from);
    set.add(t.to);
  }
  return [...set];
}

/** Matches in block order (transfer, then watch id), one per (watch, transfer) at most. */
export function matchTransfers(
  transfers: readonly Transfer[],
  watches: readonly WatchMatchRow[],
): Match[] {
  if (watches.length === 0) return [];
  const byAddress = new Map<string, WatchMatchRow[]>();
  for (const w of [...watches].sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))) {
    const list = byAddress.get(w.address_hex);
    if (list) list.push(w);
    else byAddress.set(w.address_hex, [w]);
  }
  const out: Match[] = [];
  for (const t of transfers) {
    const seen = new Set<string>();
    const consider = (address: string) => {
      for (const w of byAddress.get(address) ?? []) {
        if (seen.has(w.id)) continue;
        if (w.asset_filter !== 'ALL' && w.asset_filter !== t.asset) continue;
        let direction: Match['direction'] | null = null;
        if (t.to === w.address_hex && w.direction !== 'outgoing') direction = 'incoming';
        else if (t.from === w.address_hex && w.direction !== 'incoming') direction = 'outgoing';
        if (direction) {
          seen.add(w.id);
          out.push({ watch: w, transfer: t, direction });
        }
      }
    };
    consider(t.to);
    if (t.from !== t.to) consider(t.from);
  }
  return out;
}
