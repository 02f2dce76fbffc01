import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  encodeRawData,
  type SyntheticChainOptions,
  syntheticAddress,
  syntheticAddresses,
  syntheticBlock,
  syntheticBlockId,
} from '../../src/devnet/synthetic.js';
import { USDT_CONTRACT_HEX } from '../../src/tron/address.js';
import { extractTransfers, TRANSFER_TOPIC } from '../../src/tron/extract.js';
import { parseNodeJson } from '../../src/tron/json.js';
import type { BlockJson, TransactionInfoJson, TransactionJson } from '../../src/tron/types.js';
import { verifyBlock } from '../../src/tron/verify.js';

const FIRST = 70_000_000;
const USDT_LOG = USDT_CONTRACT_HEX.slice(2);
const HEX41 = /^41[0-9a-f]{40}$/;
const HEX64 = /^[0-9a-f]{64}$/;
const APPROVAL_TOPIC = '8c5be1e5ebec7d5bd14f71427d1e84f3dd0314c0f7b2291e5b200ac8c7c3b925';

/** JSON with bigints written as "123n", so two results can be compared as text. */
function text(x: unknown): string {
  return JSON.stringify(x, (_k, v) => (typeof v === 'bigint' ? `${v}n` : v));
}

function txsOf(block: BlockJson): TransactionJson[] {
  return block.transactions ?? [];
}

function contractOf(tx: TransactionJson) {
  const c = tx.raw_data?.contract?.[0];
  if (!c) throw new Error(`tx ${tx.txID} has no contract`);
  return { type: c.type ?? '', value: c.parameter?.value ?? {}, typeUrl: c.parameter?.type_url };
}

/** Every number inside `x` (JSON value) is a safe integer: JSON.stringify stays exact. */
function allSafeIntegers(x: unknown): boolean {
  if (typeof x === 'number') return Number.isSafeInteger(x);
  if (typeof x === 'bigint') return false;
  if (Array.isArray(x)) return x.every(allSafeIntegers);
  if (x !== null && typeof x === 'object') return Object.values(x).every(allSafeIntegers);
  return true;
}

/** Size of the signed transaction (raw + signatures) plus 64: java-tron's bandwidth charge. */
function bandwidth(tx: TransactionJson): number {
  const rawLen = (tx.raw_data_hex ?? '').length / 2;
  const sigs = (tx.signature ?? []).reduce((s, sig) => s + 2 + sig.length / 2, 0);
  return 1 + (rawLen < 128 ? 1 : 2) + rawLen + sigs + 64;
}

describe('syntheticBlock determinism and chain', () => {
  it('gives byte-identical JSON for the same options and number, in any order of calls', () => {
    const a = syntheticBlock({ seed: 7 }, FIRST + 5);
    for (let n = FIRST; n < FIRST + 5; n++) syntheticBlock({ seed: 7 }, n);
    syntheticBlock({ seed: 8 }, FIRST + 5);
    const b = syntheticBlock({ seed: 7, txPerBlock: 600, firstBlock: FIRST }, FIRST + 5);
    expect(text(b)).toBe(text(a));
  });

  it('differs with the seed, the block number and the other options', () => {
    const base = syntheticBlock({ seed: 1 }, FIRST + 1);
    const others = [
      syntheticBlock({ seed: 2 }, FIRST + 1),
      syntheticBlock({ seed: 1 }, FIRST + 2),
      syntheticBlock({ seed: 1, failedRate: 0.03 }, FIRST + 1),
    ];
    for (const o of others) {
      expect(o.block.blockID).not.toBe(base.block.blockID);
      expect(txsOf(o.block)[0]?.txID).not.toBe(txsOf(base.block)[0]?.txID);
    }
  });

  it('chains parentHash to the previous blockID, numbers and times blocks 3 s apart', () => {
    const opts: SyntheticChainOptions = {
      seed: 3,
      txPerBlock: 20,
      startTimestamp: 1_800_000_000_000,
    };
    let prev: string | undefined;
    for (let n = FIRST - 2; n < FIRST + 8; n++) {
      const { block, infos } = syntheticBlock(opts, n);
      const raw = block.block_header?.raw_data;
      expect(block.blockID).toMatch(HEX64);
      expect(block.blockID?.slice(0, 16)).toBe(n.toString(16).padStart(16, '0'));
      expect(block.blockID).toBe(syntheticBlockId(opts, n));
      // Every block passes verification: its id is its header's hash, its root its transactions'.
      expect(verifyBlock(block, infos)).toMatchObject({ id: block.blockID, root: 'json' });
      // Chained from FIRST on; FIRST's parent (and those below it) is a seeded checkpoint id.
      if (n > FIRST) expect(raw?.parentHash).toBe(prev);
      else expect(raw?.parentHash).not.toBe(prev);
      expect(raw?.number).toBe(n);
      expect(raw?.timestamp).toBe(1_800_000_000_000 + (n - FIRST) * 3000);
      expect(raw?.version).toBe(32);
      expect(raw?.witness_address).toMatch(HEX41);
      expect(raw?.txTrieRoot).toMatch(HEX64);
      expect(block.block_header?.witness_signature).toMatch(/^[0-9a-f]{130}$/);
      prev = block.blockID;
    }
  });

  it('omits `transactions` and gives no infos when txPerBlock is 0', () => {
    const { block, infos, transfers } = syntheticBlock({ txPerBlock: 0 }, FIRST + 3);
    expect(Object.keys(block)).toEqual(['blockID', 'block_header']);
    expect(infos).toEqual([]);
    expect(transfers).toEqual([]);
    expect(block.block_header?.raw_data?.parentHash).toBe(
      syntheticBlockId({ txPerBlock: 0 }, FIRST + 2),
    );
    expect(extractTransfers(block, infos)).toEqual([]);
  });

  it('rejects invalid options and block numbers', () => {
    expect(() => syntheticBlock({ txPerBlock: -1 }, FIRST)).toThrow(RangeError);
    expect(() => syntheticBlock({ addresses: 1 }, FIRST)).toThrow(RangeError);
    expect(() => syntheticBlock({ failedRate: 1.5 }, FIRST)).toThrow(RangeError);
    expect(() => syntheticBlock({}, 0)).toThrow(RangeError);
    expect(() => syntheticBlock({}, 1.5)).toThrow(RangeError);
    expect(() => syntheticAddress({ addresses: 10 }, 10)).toThrow(RangeError);
  });
});

describe('syntheticAddresses', () => {
  it('is a seeded population of distinct lowercase 41-hex addresses', () => {
    const opts = { seed: 5, addresses: 2000 };
    const all = syntheticAddresses(opts);
    expect(all).toHaveLength(2000);
    expect(new Set(all).size).toBe(2000);
    for (const a of all) expect(a).toMatch(HEX41);
    expect(syntheticAddress(opts, 0)).toBe(all[0]);
    expect(syntheticAddress(opts, 1999)).toBe(all[1999]);
    expect(syntheticAddress({ seed: 5 }, 17)).toBe(all[17]); // does not depend on the size
    expect(syntheticAddress({ seed: 6 }, 17)).not.toBe(all[17]);
  });

  it('supplies the accounts of TRX transfers', () => {
    const opts = { seed: 9, addresses: 300 };
    const population = new Set(syntheticAddresses(opts));
    const { transfers } = syntheticBlock(opts, FIRST);
    const trx = transfers.filter((t) => t.asset === 'TRX');
    expect(trx.length).toBeGreaterThan(100);
    for (const t of trx) {
      expect(population.has(t.from)).toBe(true);
      expect(population.has(t.to)).toBe(true);
      expect(t.from).not.toBe(t.to);
    }
  });
});

describe('syntheticBlock shapes', () => {
  const opts: SyntheticChainOptions = { seed: 11 };
  const blocks = [0, 1, 2].map((k) => syntheticBlock(opts, FIRST + 100 + k));

  it('has mainnet-shaped transactions: txID = sha256(raw_data protobuf), unique', () => {
    const ids = new Set<string>();
    for (const { block } of blocks) {
      const txs = txsOf(block);
      expect(txs).toHaveLength(600);
      for (const tx of txs) {
        expect(Object.keys(tx)).toEqual(['ret', 'signature', 'txID', 'raw_data', 'raw_data_hex']);
        expect(tx.txID).toMatch(HEX64);
        expect(ids.has(tx.txID)).toBe(false);
        ids.add(tx.txID);
        const hex = tx.raw_data_hex ?? '';
        expect(createHash('sha256').update(Buffer.from(hex, 'hex')).digest('hex')).toBe(tx.txID);
        expect(encodeRawData(tx.raw_data ?? {}).toString('hex')).toBe(hex);
        expect(tx.signature?.length).toBeGreaterThanOrEqual(1);
        for (const sig of tx.signature ?? []) expect(sig).toMatch(/^[0-9a-f]{130}$/);
        expect(tx.ret).toHaveLength(1);
        expect(tx.raw_data?.contract).toHaveLength(1);
        const raw = tx.raw_data ?? {};
        expect(raw.ref_block_bytes).toMatch(/^[0-9a-f]{4}$/);
        expect(raw.ref_block_hash).toMatch(/^[0-9a-f]{16}$/);
        expect(typeof raw.expiration).toBe('number');
        const c = contractOf(tx);
        expect(c.typeUrl).toBe(`type.googleapis.com/protocol.${c.type}`);
        expect(c.value.owner_address).toMatch(HEX41);
        expect('fee_limit' in raw).toBe(c.type === 'TriggerSmartContract');
        if (c.type === 'TriggerSmartContract') {
          expect(c.value.contract_address).toMatch(HEX41);
          expect(c.value.data).toMatch(/^[0-9a-f]{8}([0-9a-f]{64})*$/);
        } else {
          expect(tx.ret?.[0]?.contractRet).toBe('SUCCESS'); // only calls fail on chain
        }
        if (c.type === 'TransferContract') {
          const amount = c.value.amount;
          expect(typeof amount === 'number' && amount > 0 && amount < 1e15).toBe(true);
        }
      }
    }
  });

  it('references recent blocks by number and id', () => {
    const { block } = blocks[0] ?? syntheticBlock(opts, FIRST + 100);
    for (const tx of txsOf(block)) {
      const bytes = tx.raw_data?.ref_block_bytes as string;
      const n = FIRST + 100;
      const candidates = Array.from({ length: 61 }, (_, k) => n - 1 - k).filter(
        (m) => (m & 0xffff).toString(16).padStart(4, '0') === bytes,
      );
      expect(candidates).toHaveLength(1);
      const ref = syntheticBlockId(opts, candidates[0] as number);
      expect(tx.raw_data?.ref_block_hash).toBe(ref.slice(16, 32));
    }
  });

  it('has one info per transaction, in block order, with java-tron receipts', () => {
    for (const { block, infos } of blocks) {
      const txs = txsOf(block);
      expect(infos).toHaveLength(txs.length);
      txs.forEach((tx, i) => {
        const info = infos[i] as TransactionInfoJson;
        const c = contractOf(tx);
        const ret = tx.ret?.[0]?.contractRet;
        expect(info.id).toBe(tx.txID);
        expect(info.blockNumber).toBe(block.block_header?.raw_data?.number);
        expect(info.blockTimeStamp).toBe(block.block_header?.raw_data?.timestamp);
        expect(Array.isArray(info.contractResult) && info.contractResult.length === 1).toBe(true);
        const receipt = info.receipt ?? {};
        const net = bandwidth(tx);
        if (receipt.net_usage !== undefined) expect(receipt.net_usage).toBe(net);
        else expect([net * 1000, 100_000]).toContain(receipt.net_fee);
        if (info.fee !== undefined) expect(info.fee).toBeGreaterThan(0);
        if (info.log !== undefined) expect(info.log.length).toBeGreaterThan(0);
        if (c.type !== 'TriggerSmartContract') {
          expect(info.contractResult).toEqual(['']);
          expect('contract_address' in info || 'log' in info || 'result' in info).toBe(false);
          expect('result' in receipt).toBe(false);
          return;
        }
        expect(info.contract_address).toBe(c.value.contract_address);
        expect(receipt.result).toBe(ret);
        expect(typeof receipt.energy_usage_total).toBe('number');
        if (ret === 'SUCCESS') {
          expect('result' in info || 'resMessage' in info).toBe(false);
          for (const log of info.log ?? []) {
            expect(log.address).toMatch(/^[0-9a-f]{40}$/);
            for (const t of log.topics ?? []) expect(t).toMatch(HEX64);
            expect(log.data).toMatch(/^([0-9a-f]{64})*$/);
          }
        } else {
          expect(info.result).toBe('FAILED');
          expect(info.resMessage).toMatch(/^([0-9a-f]{2})+$/);
          expect('log' in info).toBe(false);
          const msg = Buffer.from(info.resMessage ?? '', 'hex').toString('utf8');
          if (ret === 'REVERT') expect(msg).toBe('REVERT opcode executed');
          else expect(msg).toMatch(/^Not enough energy for 'SSTORE' operation executing/);
        }
      });
    }
  });

  it('keeps every JSON integer a safe number', () => {
    for (const { block, infos } of blocks) {
      expect(allSafeIntegers(block)).toBe(true);
      expect(allSafeIntegers(infos)).toBe(true);
    }
  });
});

describe('syntheticBlock mix', () => {
  it('contains every kind of transaction, in about mainnet proportions', () => {
    const counts = new Map<string, number>();
    const bump = (k: string) => counts.set(k, (counts.get(k) ?? 0) + 1);
    let total = 0;
    for (let n = FIRST; n < FIRST + 10; n++) {
      const { block, infos } = syntheticBlock({ seed: 21 }, n);
      for (const [i, tx] of txsOf(block).entries()) {
        total++;
        const c = contractOf(tx);
        const ret = tx.ret?.[0]?.contractRet ?? '';
        const logs = infos[i]?.log ?? [];
        if (c.type !== 'TriggerSmartContract') {
          bump(c.type);
          continue;
        }
        if (ret !== 'SUCCESS') {
          bump(`failed ${ret}`);
          continue;
        }
        const data = String(c.value.data);
        const usdtTransfers = logs.filter(
          (l) => l.address === USDT_LOG && l.topics?.[0] === TRANSFER_TOPIC,
        );
        if (c.value.contract_address === USDT_CONTRACT_HEX) {
          if (usdtTransfers.some((l) => BigInt(`0x${l.data}`) === 0n)) bump('usdt zero');
          if (data.startsWith('a9059cbb')) bump('usdt transfer');
          if (data.startsWith('23b872dd')) bump('usdt transferFrom');
          if (data.startsWith('095ea7b3')) {
            expect(logs[0]?.topics?.[0]).toBe(APPROVAL_TOPIC);
            bump('usdt approve');
          }
        } else if (usdtTransfers.length > 0) {
          bump('other contract moving usdt');
          if (logs.some((l) => l.address !== USDT_LOG && l.topics?.[0] === TRANSFER_TOPIC)) {
            bump('usdt mixed with another token');
          }
        } else if (logs.some((l) => l.topics?.[0] === TRANSFER_TOPIC)) bump('other token');
        else if (logs.length === 0) bump('call without logs');
      }
    }
    const share = (k: string) => (counts.get(k) ?? 0) / total;
    expect(total).toBe(6000);
    // Block 79072107: 230/619 = 37% TRX, 152/619 = 25% USDT transfer, 125/619 = 20% delegation.
    expect(share('TransferContract')).toBeGreaterThan(0.3);
    expect(share('TransferContract')).toBeLessThan(0.42);
    expect(share('usdt transfer')).toBeGreaterThan(0.2);
    expect(share('usdt transfer')).toBeLessThan(0.3);
    expect(share('DelegateResourceContract')).toBeGreaterThan(0.15);
    expect(share('failed REVERT') + share('failed OUT_OF_ENERGY')).toBeGreaterThan(0.01);
    for (const k of [
      'UnDelegateResourceContract',
      'TransferAssetContract',
      'AccountCreateContract',
      'FreezeBalanceV2Contract',
      'usdt transferFrom',
      'usdt approve',
      'usdt zero',
      'other contract moving usdt',
      'usdt mixed with another token',
      'other token',
      'call without logs',
      'failed REVERT',
      'failed OUT_OF_ENERGY',
    ]) {
      expect([k, counts.get(k) ?? 0]).not.toEqual([k, 0]);
    }
  });

  it('honours failedRate', () => {
    const none = syntheticBlock({ failedRate: 0, txPerBlock: 300 }, FIRST);
    expect(txsOf(none.block).every((t) => t.ret?.[0]?.contractRet === 'SUCCESS')).toBe(true);
    const all = syntheticBlock({ failedRate: 1, txPerBlock: 100 }, FIRST);
    expect(txsOf(all.block).every((t) => t.ret?.[0]?.contractRet !== 'SUCCESS')).toBe(true);
    expect(all.infos.every((i) => i.result === 'FAILED' && i.log === undefined)).toBe(true);
    expect(all.transfers).toEqual([]);
  });
});

describe('extractTransfers on synthetic blocks', () => {
  const seeds = [1, 2, 3];
  const perSeed = 10;

  it('finds exactly the transfers the generator put in (30 blocks, 3 seeds)', () => {
    const seen = {
      eventIndexAbove0: 0,
      multiTransferTx: 0,
      zeroUsdtLog: 0,
      above2pow53: 0,
      failed: 0,
    };
    for (const seed of seeds) {
      for (let n = FIRST + 1000; n < FIRST + 1000 + perSeed; n++) {
        // The chain starts at FIRST + 1000: a block far above firstBlock needs those below it.
        const { block, infos, transfers } = syntheticBlock({ seed, firstBlock: FIRST + 1000 }, n);
        expect(extractTransfers(block, infos)).toEqual(transfers);

        // What those blocks exercised, counted from the raw data and the expectation.
        const perTx = new Map<string, number>();
        for (const t of transfers) {
          perTx.set(t.txId, (perTx.get(t.txId) ?? 0) + 1);
          if (t.eventIndex > 0) seen.eventIndexAbove0++;
          if (t.amountRaw > 2n ** 53n) seen.above2pow53++;
          expect(t.amountRaw > 0n).toBe(true);
        }
        seen.multiTransferTx += [...perTx.values()].filter((k) => k > 1).length;
        infos.forEach((info, i) => {
          if (info.result === 'FAILED') {
            seen.failed++;
            expect(perTx.has(info.id)).toBe(false);
          }
          for (const log of info.log ?? []) {
            if (log.address === USDT_LOG && log.topics?.[0] === TRANSFER_TOPIC) {
              if (BigInt(`0x${log.data}`) === 0n) seen.zeroUsdtLog++;
            }
          }
          expect(txsOf(block)[i]?.txID).toBe(info.id);
        });
      }
    }
    expect(seen.eventIndexAbove0).toBeGreaterThan(0);
    expect(seen.multiTransferTx).toBeGreaterThan(0);
    expect(seen.zeroUsdtLog).toBeGreaterThan(0);
    expect(seen.above2pow53).toBeGreaterThan(0);
    expect(seen.failed).toBeGreaterThan(0);
  });

  it('survives a JSON round trip through parseNodeJson, big USDT amounts included', () => {
    let checkedBig = false;
    for (let n = FIRST + 1000; n < FIRST + 1000 + perSeed; n++) {
      const { block, infos, transfers } = syntheticBlock({ seed: 1, firstBlock: FIRST + 1000 }, n);
      const parsedBlock = parseNodeJson(JSON.stringify(block)) as BlockJson;
      const parsedInfos = parseNodeJson(JSON.stringify(infos)) as TransactionInfoJson[];
      expect(parsedBlock).toEqual(block);
      expect(parsedInfos).toEqual(infos);
      expect(extractTransfers(parsedBlock, parsedInfos)).toEqual(transfers);
      if (transfers.some((t) => t.amountRaw > 2n ** 53n)) checkedBig = true;
    }
    expect(checkedBig).toBe(true);
  });
});
