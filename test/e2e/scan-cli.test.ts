/**
 * `tronwatch scan` as a user runs it, against a java-tron-compatible node (the replay node)
 * serving real mainnet block 79072107: exactly that block's TRX and USDT transfers, with exact
 * amounts and correct base58 addresses. Expected values come from an independent decoding of the
 * block's calldata, with base58 from the address codec (itself checked against TronGrid).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dirSource, type ReplayNode, startReplayNode } from '../../src/devnet/replay-node.js';
import { hexToBase58, USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import type { BlockJson } from '../../src/tron/types.js';
import { runCli } from '../helpers/cli.js';
import { chainDir, fixtureJson } from '../helpers/fixtures.js';

describe('tronwatch scan on real block 79072107', () => {
  let node: ReplayNode;
  beforeAll(async () => {
    node = await startReplayNode({ source: dirSource(chainDir()), instant: true });
  });
  afterAll(() => node.close());

  it('prints exactly the block’s 384 transfers as JSON lines', async () => {
    const r = await runCli(['scan', '--node', node.url, '--from', '79072107', '--to', '79072107']);
    expect(r.code).toBe(0);
    const lines = r.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    const block = fixtureJson<BlockJson>('chain/block-79072107.json');
    const expected: Array<Record<string, unknown>> = [];
    for (const tx of block.transactions ?? []) {
      const c = tx.raw_data?.contract?.[0];
      const v = (c?.parameter?.value ?? {}) as Record<string, string | number>;
      const base = {
        block_number: 79072107,
        block_timestamp: '2026-01-08T13:36:54.000Z',
        tx_id: tx.txID,
        event_index: 0,
      };
      if (c?.type === 'TransferContract') {
        const amount = BigInt(v.amount ?? 0);
        expected.push({
          ...base,
          asset: 'TRX',
          from: hexToBase58(String(v.owner_address)),
          to: hexToBase58(String(v.to_address)),
          amount_raw: amount.toString(),
          contract: null,
        });
      } else if (c?.type === 'TriggerSmartContract' && v.contract_address === USDT_CONTRACT_HEX) {
        const d = String(v.data);
        const w = (i: number) => d.slice(8 + 64 * i, 72 + 64 * i);
        const a = (x: string) => hexToBase58(`41${x.slice(24)}`);
        if (d.startsWith('a9059cbb'))
          expected.push({
            ...base,
            asset: 'USDT',
            from: hexToBase58(String(v.owner_address)),
            to: a(w(0)),
            amount_raw: BigInt(`0x${w(1)}`).toString(),
            contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
          });
        if (d.startsWith('23b872dd'))
          expected.push({
            ...base,
            asset: 'USDT',
            from: a(w(0)),
            to: a(w(1)),
            amount_raw: BigInt(`0x${w(2)}`).toString(),
            contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
          });
      }
    }
    expect(lines).toHaveLength(384);
    expect(lines.map(({ amount: _a, ...rest }) => rest)).toEqual(expected);
    // amount is the exact decimal of amount_raw / 10^6 (checked here by string arithmetic).
    for (const l of lines) {
      const raw = String(l.amount_raw).padStart(7, '0');
      const text = `${raw.slice(0, -6).replace(/^0+(?=\d)/, '')}.${raw.slice(-6)}`.replace(
        /\.?0+$/,
        '',
      );
      expect(l.amount).toBe(text === '' ? '0' : text);
    }
  });

  it('refuses a block above the solidified head with a clear error and no output', async () => {
    const r = await runCli(['scan', '--node', node.url, '--from', '79072107', '--to', '99999999']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/not solidified yet/);
  });
});
