import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { formatAmount, formatAmountDigits } from '../../src/tron/amount.js';
import { parseNodeJson, toBigInt } from '../../src/tron/json.js';

describe('formatAmount', () => {
  it.each([
    [0n, '0'],
    [1n, '0.000001'],
    [10n, '0.00001'],
    [1_000_000n, '1'],
    [1_500_000n, '1.5'],
    [50_000_000n, '50'],
    [41_677_389n, '41.677389'],
    [123_456_789_012n, '123456.789012'],
    [
      2n ** 256n - 1n,
      '115792089237316195423570985008687907853269984665640564039457584007913129.639935',
    ],
  ])('%s → %s', (raw, text) => {
    expect(formatAmount(raw)).toBe(text);
  });
  it('refuses negatives', () => {
    expect(() => formatAmount(-1n)).toThrow(RangeError);
  });
});

describe('formatAmountDigits', () => {
  it('writes what formatAmount writes, for every non-negative integer up to 2^256', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 0n, max: 2n ** 256n }),
        fc.integer({ min: 0, max: 18 }),
        (raw, d) => {
          expect(formatAmountDigits(raw.toString(), d)).toBe(formatAmount(raw, d));
        },
      ),
      { numRuns: 5000 },
    );
    for (const raw of [0n, 1n, 10n, 100_000n, 999_999n, 1_000_000n, 1_000_001n, 10n ** 30n])
      expect(formatAmountDigits(raw.toString())).toBe(formatAmount(raw));
  });
  it.each(['', '-1', '007', '00', '1e6', '1.5', ' 1', '1 ', '+1', '١'])('refuses %j', (text) => {
    expect(() => formatAmountDigits(text)).toThrow(RangeError);
  });
});

describe('parseNodeJson', () => {
  it('keeps safe integers as numbers (fast path)', () => {
    expect(parseNodeJson('{"amount":7,"timestamp":1767879414000}')).toEqual({
      amount: 7,
      timestamp: 1767879414000,
    });
  });
  it('parses integers above 2^53 exactly as bigint', () => {
    const v = parseNodeJson(
      '{"amount":9007199254740993,"list":[12345678901234567890],"small":1}',
    ) as Record<string, unknown>;
    expect(v.amount).toBe(9007199254740993n);
    expect(v.list).toEqual([12345678901234567890n]);
    expect(v.small).toBe(1);
    // JSON.parse would have rounded it: the test would fail on a float path.
    expect((JSON.parse('{"a":9007199254740993}') as { a: number }).a).toBe(9007199254740992);
  });
  it('keeps 16-digit runs inside strings as strings', () => {
    expect(parseNodeJson('{"data":"x:12345678901234567890","n":9007199254740993}')).toEqual({
      data: 'x:12345678901234567890',
      n: 9007199254740993n,
    });
  });
  it('throws on malformed JSON', () => {
    expect(() => parseNodeJson('{"a":')).toThrow(SyntaxError);
  });
  it('toBigInt accepts number, bigint and integer strings only', () => {
    expect(toBigInt(5)).toBe(5n);
    expect(toBigInt(5n)).toBe(5n);
    expect(toBigInt('9007199254740993')).toBe(9007199254740993n);
    expect(() => toBigInt(1.5)).toThrow(TypeError);
    expect(() => toBigInt('0x10')).toThrow(TypeError);
  });
});
