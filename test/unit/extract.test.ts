/**
 * Extraction on real mainnet data. Expected values never come from the code under test:
 * - block 79072107: an independent decoder of the transactions' CALLDATA (transfer/transferFrom
 *   arguments and TransferContract values), while the extractor reads the receipts' LOGS;
 *   plus the totals stated in the fixtures' README (230 TRX, 154 USDT).
 * - recorded receipts (gettransactioninfobyid) of transactions that TronGrid's v1 API also lists:
 *   TronGrid's from/to/value are the expectation.
 */
import { describe, expect, it } from 'vitest';
import { hexToBase58, USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import { extractTransfers, MalformedBlockError, TRANSFER_TOPIC } from '../../src/tron/extract.js';
import { parseNodeJson } from '../../src/tron/json.js';
import { transferLine } from '../../src/tron/scan.js';
import type { BlockJson, TransactionInfoJson } from '../../src/tron/types.js';
import { fixtureJson, fixtureText } from '../helpers/fixtures.js';

interface Expected {
  txId: string;
  asset: 'USDT' | 'TRX';
  from: string;
  to: string;
  amountRaw: bigint;
}

/** Decode transfers from calldata: an implementation independent of extract.ts. */
function fromCalldata(block: BlockJson): Expected[] {
  const out: Expected[] = [];
  for (const tx of block.transactions ?? []) {
    const c = tx.raw_data?.contract?.[0];
    const v = (c?.parameter?.value ?? {}) as Record<string, string | number>;
    if (tx.ret?.[0]?.contractRet !== 'SUCCESS') continue;
    if (c?.type === 'TransferContract') {
      out.push({
        txId: tx.txID,
        asset: 'TRX',
        from: String(v.owner_address),
        to: String(v.to_address),
        amountRaw: BigInt(v.amount ?? 0),
      });
    } else if (c?.type === 'TriggerSmartContract' && v.contract_address === USDT_CONTRACT_HEX) {
      const data = String(v.data);
      const word = (i: number) => data.slice(8 + 64 * i, 8 + 64 * (i + 1));
      const addr = (w: string) => `41${w.slice(24)}`;
      if (data.startsWith('a9059cbb')) {
        out.push({
          txId: tx.txID,
          asset: 'USDT',
          from: String(v.owner_address),
          to: addr(word(0)),
          amountRaw: BigInt(`0x${word(1)}`),
        });
      } else if (data.startsWith('23b872dd')) {
        out.push({
          txId: tx.txID,
          asset: 'USDT',
          from: addr(word(0)),
          to: addr(word(1)),
          amountRaw: BigInt(`0x${word(2)}`),
        });
      }
    }
  }
  return out.filter((e) => e.amountRaw > 0n);
}

describe('extraction on real mainnet block 79072107', () => {
  const load = () => ({
    block: parseNodeJson(fixtureText('chain/block-79072107.json')) as BlockJson,
    infos: parseNodeJson(fixtureText('chain/txinfo-79072107.json')) as TransactionInfoJson[],
  });

  it('finds exactly the 230 TRX and 154 USDT transfers of the block', () => {
    const { block, infos } = load();
    const got = extractTransfers(block, infos);
    expect(got.filter((t) => t.asset === 'TRX')).toHaveLength(230);
    expect(got.filter((t) => t.asset === 'USDT')).toHaveLength(154);
    const expected = fromCalldata(block);
    expect(
      got.map(({ txId, asset, from, to, amountRaw }) => ({ txId, asset, from, to, amountRaw })),
    ).toEqual(expected);
    for (const t of got) {
      expect(t.blockNumber).toBe(79072107);
      expect(t.blockTimestamp).toBe(1767879414000);
      expect(t.eventIndex).toBe(0); // one log per call in this block
      expect(t.contract).toBe(t.asset === 'USDT' ? USDT_CONTRACT_HEX : null);
    }
  });

  it('prints the event fields with exact amounts and base58 addresses', () => {
    const { block, infos } = load();
    const first = extractTransfers(block, infos)[0];
    expect(first).toBeDefined();
    // Tx bc8c4056… : USDT transfer of 0x2faf080 = 50,000,000 base units from 41a9d526… to 41a86354….
    expect(transferLine(first!)).toEqual({
      block_number: 79072107,
      block_timestamp: '2026-01-08T13:36:54.000Z',
      tx_id: 'bc8c405617750cf327cc301619e91c61523aeb16436041a311430e9106859aaa',
      event_index: 0,
      asset: 'USDT',
      from: hexToBase58('41a9d526809acf676b73a572e56f84d8f5d984c79e'),
      to: hexToBase58('41a86354b191553c422aab7e4af3b19ac1791c9886'),
      amount_raw: '50000000',
      amount: '50',
      contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t',
    });
  });

  it('ignores approvals: the two Approval logs yield nothing', () => {
    const { block, infos } = load();
    const approvals = infos.filter((i) =>
      i.log?.some((l) => l.topics?.[0]?.startsWith('8c5be1e5')),
    );
    expect(approvals).toHaveLength(2);
    const ids = new Set(extractTransfers(block, infos).map((t) => t.txId));
    for (const a of approvals) expect(ids.has(a.id)).toBe(false);
  });

  it('yields nothing for a failed transaction (receipt REVERT, ret REVERT)', () => {
    const { block, infos } = load();
    const i = infos.findIndex((x) => x.log?.[0]?.topics?.[0] === TRANSFER_TOPIC);
    const tx = block.transactions![i]!;
    const failedBlock: BlockJson = {
      ...block,
      transactions: [{ ...tx, ret: [{ contractRet: 'REVERT' }] }],
    };
    const failedInfo = { ...infos[i]!, result: 'FAILED', receipt: { result: 'REVERT' } };
    expect(extractTransfers(failedBlock, [failedInfo])).toEqual([]);
    // …and the same transaction, successful, yields its transfer (the test can fail).
    expect(extractTransfers({ ...block, transactions: [tx] }, [infos[i]!])).toHaveLength(1);
  });
});

describe('extraction on recorded receipts, checked against TronGrid', () => {
  it('matches TronGrid v1 from/to/value for every paired USDT receipt', () => {
    const receipts = fixtureJson<Record<string, TransactionInfoJson>>(
      'txinfo-by-id-ledger-subset.extract.json',
    );
    const v1 = fixtureJson<{
      data: Array<{
        transaction_id: string;
        from: string;
        to: string;
        value: string;
        token_info: { address: string };
      }>;
    }>('trongrid-v1-trc20-TL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre.extract.json');
    let paired = 0;
    for (const item of v1.data) {
      const info = receipts[item.transaction_id];
      if (!info) continue;
      const block: BlockJson = {
        blockID: '00'.repeat(32),
        block_header: {
          raw_data: { number: Number(info.blockNumber), timestamp: Number(info.blockTimeStamp) },
        },
        transactions: [
          {
            txID: info.id,
            ret: [{ contractRet: 'SUCCESS' }],
            raw_data: { contract: [{ type: 'TriggerSmartContract' }] },
          },
        ],
      };
      const lines = extractTransfers(block, [info]).map(transferLine);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({
        from: item.from,
        to: item.to,
        amount_raw: item.value,
        contract: item.token_info.address,
        asset: 'USDT',
      });
      paired++;
    }
    expect(paired).toBe(4);
  });

  it('reads a recorded TRX transfer (tx 5a9935a1…, 25 TRX) with its receipt', () => {
    const tx = fixtureJson<BlockJson['transactions'] & object>(
      'tx-5a9935a1b7be0150a511111582bbfed62ddb873333b3986bd712e6105fe90ad5.json',
    ) as unknown as NonNullable<BlockJson['transactions']>[number];
    const info = fixtureJson<TransactionInfoJson>(
      'txinfo-5a9935a1b7be0150a511111582bbfed62ddb873333b3986bd712e6105fe90ad5.json',
    );
    const block: BlockJson = {
      blockID: '00'.repeat(32),
      block_header: {
        raw_data: { number: Number(info.blockNumber), timestamp: Number(info.blockTimeStamp) },
      },
      transactions: [tx],
    };
    const [t] = extractTransfers(block, [info]).map(transferLine);
    expect(t).toMatchObject({
      asset: 'TRX',
      amount_raw: '25000000',
      amount: '25',
      contract: null,
      event_index: 0,
      block_number: 75772270,
    });
    expect(t?.from).toBe(hexToBase58('412e1d447fa4169390cf5f5b3d12d380decfbfe20f'));
  });
});

describe('extraction rules on constructed input', () => {
  const header = {
    blockID: `${'0'.repeat(56)}00000001`,
    block_header: { raw_data: { number: 1, timestamp: 3000 } },
  };
  const a = `41${'11'.repeat(20)}`;
  const b = `41${'22'.repeat(20)}`;
  const topic = (h: string) => `${'0'.repeat(24)}${h.slice(2)}`;
  const usdtLog = (amountHex: string, from = a, to = b) => ({
    address: USDT_CONTRACT_HEX.slice(2),
    topics: [TRANSFER_TOPIC, topic(from), topic(to)],
    data: amountHex.padStart(64, '0'),
  });
  const call = {
    txID: 'c'.repeat(64),
    ret: [{ contractRet: 'SUCCESS' }],
    raw_data: { contract: [{ type: 'TriggerSmartContract' }] },
  };

  it('takes every USDT Transfer log of a contract call, with its log index, skipping others', () => {
    const otherToken = { ...usdtLog('05'), address: '11'.repeat(20) };
    const info: TransactionInfoJson = {
      id: call.txID,
      receipt: { result: 'SUCCESS' },
      log: [
        otherToken,
        usdtLog('0f4240'),
        {
          address: USDT_CONTRACT_HEX.slice(2),
          topics: [
            '8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925',
            topic(a),
            topic(b),
          ],
          data: '01'.padStart(64, '0'),
        },
        usdtLog('1e8480', b, a),
      ],
    };
    const got = extractTransfers({ ...header, transactions: [call] }, [info]);
    expect(got.map((t) => [t.eventIndex, t.from, t.to, t.amountRaw])).toEqual([
      [1, a, b, 1_000_000n],
      [3, b, a, 2_000_000n],
    ]);
  });

  it('drops zero-amount transfers and reads uint256 amounts exactly', () => {
    const info: TransactionInfoJson = {
      id: call.txID,
      receipt: { result: 'SUCCESS' },
      log: [usdtLog('0'), usdtLog('f'.repeat(64))],
    };
    const got = extractTransfers({ ...header, transactions: [call] }, [info]);
    expect(got).toHaveLength(1);
    expect(got[0]?.amountRaw).toBe(2n ** 256n - 1n);
  });

  it('reads a TRX amount above 2^53 sun exactly through parseNodeJson', () => {
    const json = `{"blockID":"${'0'.repeat(64)}","block_header":{"raw_data":{"number":1,"timestamp":3000}},"transactions":[{"txID":"${'d'.repeat(64)}","ret":[{"contractRet":"SUCCESS"}],"raw_data":{"contract":[{"type":"TransferContract","parameter":{"value":{"owner_address":"${a}","to_address":"${b}","amount":9007199254740993}}}]}}]}`;
    const got = extractTransfers(parseNodeJson(json) as BlockJson, []);
    expect(got[0]?.amountRaw).toBe(9007199254740993n);
  });

  it('skips a TransferContract that did not succeed or moves nothing (amount omitted = 0)', () => {
    const tx = (ret: string, value: Record<string, unknown>) => ({
      txID: 'e'.repeat(64),
      ret: [{ contractRet: ret }],
      raw_data: {
        contract: [
          {
            type: 'TransferContract',
            parameter: { value: { owner_address: a, to_address: b, ...value } },
          },
        ],
      },
    });
    expect(
      extractTransfers({ ...header, transactions: [tx('REVERT', { amount: 5 })] }, []),
    ).toEqual([]);
    expect(extractTransfers({ ...header, transactions: [tx('SUCCESS', {})] }, [])).toEqual([]);
    expect(
      extractTransfers({ ...header, transactions: [tx('SUCCESS', { amount: 5 })] }, []),
    ).toHaveLength(1);
  });

  it('rejects malformed transfer logs loudly instead of guessing', () => {
    const info: TransactionInfoJson = {
      id: call.txID,
      receipt: { result: 'SUCCESS' },
      log: [{ ...usdtLog('01'), topics: [TRANSFER_TOPIC, 'zz', topic(b)] }],
    };
    expect(() => extractTransfers({ ...header, transactions: [call] }, [info])).toThrow(
      MalformedBlockError,
    );
  });
});
