import { describe, expect, it } from 'vitest';
import { candidateAddresses, matchTransfers, type WatchMatchRow } from '../../src/ingest/match.js';
import type { Transfer } from '../../src/tron/types.js';

const A = `41${'aa'.repeat(20)}`;
const B = `41${'bb'.repeat(20)}`;
const C = `41${'cc'.repeat(20)}`;
const t = (from: string, to: string, asset: 'USDT' | 'TRX' = 'USDT', i = 0): Transfer => ({
  blockNumber: 1,
  blockTimestamp: 0,
  txId: `${i}`.padStart(64, '0'),
  eventIndex: 0,
  asset,
  from,
  to,
  amountRaw: 1n,
  contract: null,
});
const w = (
  id: string,
  address: string,
  direction: WatchMatchRow['direction'],
  asset_filter: WatchMatchRow['asset_filter'] = 'ALL',
): WatchMatchRow => ({
  id,
  account_id: 'acc',
  address_hex: address,
  asset_filter,
  direction,
  channel: 'webhook',
});

describe('matchTransfers', () => {
  it('applies direction', () => {
    const transfers = [t(A, B)];
    const got = matchTransfers(transfers, [
      w('w1', A, 'incoming'),
      w('w2', A, 'outgoing'),
      w('w3', B, 'incoming'),
      w('w4', B, 'outgoing'),
      w('w5', A, 'both'),
      w('w6', B, 'both'),
    ]);
    expect(got.map((m) => [m.watch.id, m.direction])).toEqual([
      ['w3', 'incoming'],
      ['w6', 'incoming'],
      ['w2', 'outgoing'],
      ['w5', 'outgoing'],
    ]);
  });

  it('applies the asset filter', () => {
    const got = matchTransfers(
      [t(A, B, 'TRX', 1), t(A, B, 'USDT', 2)],
      [w('u', B, 'incoming', 'USDT'), w('x', B, 'incoming', 'TRX'), w('all', B, 'incoming', 'ALL')],
    );
    expect(got.map((m) => `${m.watch.id}:${m.transfer.asset}`)).toEqual([
      'all:TRX',
      'x:TRX',
      'all:USDT',
      'u:USDT',
    ]);
  });

  it('gives one event per watch for a self-transfer (both → incoming)', () => {
    const got = matchTransfers(
      [t(A, A)],
      [w('b', A, 'both'), w('i', A, 'incoming'), w('o', A, 'outgoing')],
    );
    expect(got.map((m) => [m.watch.id, m.direction])).toEqual([
      ['b', 'incoming'],
      ['i', 'incoming'],
      ['o', 'outgoing'],
    ]);
  });

  it('matches nothing for unrelated watches and lists candidates once', () => {
    expect(matchTransfers([t(A, B)], [w('c', C, 'both')])).toEqual([]);
    expect(candidateAddresses([t(A, B), t(B, A), t(A, A)]).sort()).toEqual([A, B]);
  });
});
