/**
 * The real mainnet fixtures (test/fixtures/tron-mainnet/, README there) are what they claim to
 * be: every hash the chain commits to is recomputed here from the files themselves.
 */
import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseNodeJson } from '../../src/tron/json.js';
import type { BlockJson, TransactionInfoJson, TransactionJson } from '../../src/tron/types.js';
import {
  blockIdFromRaw,
  encodeHeaderRaw,
  merkleRoot,
  parseExactBlock,
  verifyBlock,
} from '../../src/tron/verify.js';
import { fixtureJson, fixturesDir, fixtureText } from '../helpers/fixtures.js';

const sha256 = (b: Uint8Array) => createHash('sha256').update(b).digest();
const txIdOf = (tx: TransactionJson) =>
  sha256(Buffer.from(tx.raw_data_hex ?? '', 'hex')).toString('hex');

describe('test/fixtures/tron-mainnet', () => {
  it('block 79072107: its gRPC bytes are the source original, and hash to its header and root', () => {
    const original = fixtureJson<{ blockExtention: string; blockNumber: string }>(
      'source-originals/untron-v3_tron_blockext_raw_79072107.json',
    );
    const bin = readFileSync(path.join(fixturesDir, 'chain', 'blockext-79072107.bin'));
    expect(`0x${bin.toString('hex')}`).toBe(original.blockExtention);
    expect(original.blockNumber).toBe('79072107');
    const exact = parseExactBlock(bin, 'extention');
    if (!exact) throw new Error('no block in the gRPC bytes');
    const block = parseNodeJson(fixtureText('chain/block-79072107.json')) as BlockJson;
    const raw = block.block_header?.raw_data as Record<string, unknown>;
    expect(Buffer.from(exact.headerRaw).equals(Buffer.from(encodeHeaderRaw(raw, 79072107)))).toBe(
      true,
    );
    expect(blockIdFromRaw(79072107n, exact.headerRaw)).toBe(block.blockID);
    expect(merkleRoot(exact.transactions.map(sha256))).toBe(raw.txTrieRoot);
    const txs = block.transactions ?? [];
    expect(txs).toHaveLength(619);
    for (const tx of txs) expect(txIdOf(tx)).toBe(tx.txID);
    // The JSON holds the same transactions as the bytes, in order (and its derived receipts fit).
    const infos = parseNodeJson(fixtureText('chain/txinfo-79072107.json')) as TransactionInfoJson[];
    expect(verifyBlock(block, infos, exact).root).toBe('exact');
  });

  it('the 100 headers: re-encode to their raw bytes, re-hash to their ids, chain by parentHash', () => {
    const headers = fixtureJson<BlockJson[]>('headers-78000000-78000099.json');
    expect(headers).toHaveLength(100);
    let prev: string | undefined;
    for (const [i, h] of headers.entries()) {
      const raw = h.block_header?.raw_data as Record<string, unknown>;
      expect(raw.number).toBe(78_000_000 + i);
      const bytes = encodeHeaderRaw(raw, 78_000_000 + i);
      expect(blockIdFromRaw(BigInt(78_000_000 + i), bytes)).toBe(h.blockID);
      if (prev !== undefined) expect(raw.parentHash).toBe(prev);
      prev = h.blockID;
    }
  });

  it('every single transaction and receipt: txID = SHA-256 of raw_data_hex, receipt id = txID', () => {
    const dir = path.join(fixturesDir, 'ledger-live-pairs');
    const ids = readdirSync(dir)
      .filter((f) => f.endsWith('.tx.json'))
      .map((f) => f.slice(0, -'.tx.json'.length));
    expect(ids).toHaveLength(5);
    for (const id of ids) {
      const tx = fixtureJson<TransactionJson>(`ledger-live-pairs/${id}.tx.json`);
      const info = fixtureJson<TransactionInfoJson>(`ledger-live-pairs/${id}.info.json`);
      expect(txIdOf(tx)).toBe(id);
      expect(tx.txID).toBe(id);
      expect(info.id).toBe(id);
    }
    for (const f of readdirSync(fixturesDir).filter((x) => /^tx-[0-9a-f]{64}\.json$/.test(x))) {
      const tx = fixtureJson<TransactionJson>(f);
      expect(txIdOf(tx), f).toBe(f.slice(3, 67));
      expect(tx.txID).toBe(f.slice(3, 67));
    }
    const info = fixtureJson<TransactionInfoJson>(
      'txinfo-5a9935a1b7be0150a511111582bbfed62ddb873333b3986bd712e6105fe90ad5.json',
    );
    expect(info.id).toBe('5a9935a1b7be0150a511111582bbfed62ddb873333b3986bd712e6105fe90ad5');
  });
});
