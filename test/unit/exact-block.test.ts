/**
 * A block read once as exact bytes (src/tron/exact-block.ts): the real mainnet block 79072107's
 * gRPC answer decodes into what its recorded JSON says for every field matching and verification
 * read, and passes verification from those bytes alone with all 384 of its transfers `signed`;
 * the 100 real headers decode to their JSON; a synthetic block round-trips; malformed bytes are
 * refused, an empty answer is "no block".
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { encodeBlockExtention } from '../../src/devnet/replay-node.js';
import { syntheticBlock } from '../../src/devnet/synthetic.js';
import { decodeBlockExtention } from '../../src/tron/exact-block.js';
import { parseNodeJson } from '../../src/tron/json.js';
import { PbDecodeError } from '../../src/tron/protobuf.js';
import type { BlockJson, TransactionInfoJson } from '../../src/tron/types.js';
import { blockIdFromRaw, verifyBlock } from '../../src/tron/verify.js';
import { chainDir, fixtureJson, fixtureText } from '../helpers/fixtures.js';

const REAL = 79072107;
const REAL_ID = '0000000004b68b6be6d7223b1ecf2850f00f700292beeead2810c18e9e1548e2';

const realBytes = () => readFileSync(path.join(chainDir(), `blockext-${REAL}.bin`));
const realJson = () => parseNodeJson(fixtureText(`chain/block-${REAL}.json`)) as BlockJson;
const realInfos = () =>
  parseNodeJson(fixtureText(`chain/txinfo-${REAL}.json`)) as TransactionInfoJson[];

describe('decoding the real block 79072107 from its gRPC bytes', () => {
  it('gives what its JSON says: header, signature, and per transaction id, bytes, ret, contracts', () => {
    const d = decodeBlockExtention(realBytes());
    if (!d) throw new Error('no block decoded');
    const json = realJson();
    expect(d.block.blockID).toBe(REAL_ID);
    expect(d.block.block_header).toEqual(json.block_header);
    const txs = d.block.transactions ?? [];
    const want = json.transactions ?? [];
    expect(txs).toHaveLength(619);
    expect(d.exact.transactions).toHaveLength(619);
    let matched = 0;
    for (let i = 0; i < want.length; i++) {
      const a = txs[i];
      const b = want[i];
      expect(a?.txID).toBe(b?.txID);
      expect(a?.raw_data_hex).toBe(b?.raw_data_hex);
      expect(a?.signature).toEqual(b?.signature);
      expect(a?.ret).toEqual(b?.ret);
      const ca = a?.raw_data?.contract ?? [];
      const cb = b?.raw_data?.contract ?? [];
      expect(ca.map((c) => c.type)).toEqual(cb.map((c) => c.type));
      expect(ca.map((c) => c.parameter?.type_url)).toEqual(cb.map((c) => c.parameter?.type_url));
      for (let c = 0; c < cb.length; c++) {
        const type = cb[c]?.type;
        if (type !== 'TransferContract' && type !== 'TriggerSmartContract') continue;
        expect(ca[c]?.parameter?.value).toEqual(cb[c]?.parameter?.value);
        matched++;
      }
    }
    // 230 TRX transfers and 158 contract calls, their fields compared one by one.
    expect(matched).toBe(388);
  });

  it('passes verification from the bytes alone: root exact, 384 transfers, all signed', () => {
    const d = decodeBlockExtention(realBytes());
    if (!d) throw new Error('no block decoded');
    const v = verifyBlock(d.block, realInfos(), d.exact);
    expect(v.id).toBe(REAL_ID);
    expect(v.root).toBe('exact');
    expect(v.transfers).toHaveLength(384);
    expect(v.transfers.filter((t) => t.asset === 'TRX')).toHaveLength(230);
    expect(v.transfers.every((t) => t.proof === 'signed')).toBe(true);
    // The same block read as JSON plus its bytes (the three-request way) agrees on everything.
    const before = verifyBlock(realJson(), realInfos(), d.exact);
    expect(v.fingerprint).toBe(before.fingerprint);
  });

  it('refuses truncated bytes, and reads an empty answer as no block', () => {
    const bytes = realBytes();
    expect(() => decodeBlockExtention(bytes.subarray(0, bytes.length - 7))).toThrow(PbDecodeError);
    expect(decodeBlockExtention(new Uint8Array(0))).toBeUndefined();
  });
});

describe('other blocks', () => {
  it('the 100 real headers decode to their JSON (number, time, roots, witness, signature)', () => {
    const headers = fixtureJson<BlockJson[]>('headers-78000000-78000099.json');
    expect(headers).toHaveLength(100);
    for (const h of headers) {
      const d = decodeBlockExtention(encodeBlockExtention(JSON.stringify(h)));
      expect(d?.block).toEqual(h);
      // Its header bytes hash to the real blockID (the transactions are not in the file).
      const number = BigInt(Number(h.block_header?.raw_data?.number));
      expect(blockIdFromRaw(number, d?.exact.headerRaw as Uint8Array)).toBe(h.blockID);
    }
  });

  it('a synthetic block round-trips and verifies as its JSON does', () => {
    const b = syntheticBlock({ seed: 3, firstBlock: 1000, txPerBlock: 60, addresses: 20 }, 1000);
    const d = decodeBlockExtention(encodeBlockExtention(JSON.stringify(b.block)));
    if (!d) throw new Error('no block decoded');
    const fromBytes = verifyBlock(d.block, b.infos, d.exact);
    const fromJson = verifyBlock(b.block, b.infos);
    expect(fromBytes.root).toBe('exact');
    expect(fromBytes.fingerprint).toBe(fromJson.fingerprint);
    expect(fromBytes.transfers.length).toBe(b.transfers.length);
  });
});
