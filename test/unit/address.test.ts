import { describe, expect, it } from 'vitest';
import {
  base58ToHex,
  hexToBase58,
  InvalidAddressError,
  isValidAddress,
  parseAddress,
  USDT_CONTRACT_BASE58,
  USDT_CONTRACT_HEX,
} from '../../src/tron/address.js';
import { fixtureJson } from '../helpers/fixtures.js';

// Pairs published together by independent sources: the USDT contract (Tether's own listing) and
// the base58/hex pairs of one TronGrid answer (TronGrid computed the base58 side).
const KNOWN: Array<[string, string]> = [[USDT_CONTRACT_BASE58, USDT_CONTRACT_HEX]];

describe('address codec', () => {
  it('encodes and decodes the USDT contract', () => {
    for (const [b58, hx] of KNOWN) {
      expect(hexToBase58(hx)).toBe(b58);
      expect(base58ToHex(b58)).toBe(hx);
    }
  });

  it('accepts both SPEC input forms and canonicalises hex', () => {
    expect(parseAddress(USDT_CONTRACT_BASE58)).toEqual({
      hex: USDT_CONTRACT_HEX,
      base58: USDT_CONTRACT_BASE58,
    });
    expect(parseAddress(USDT_CONTRACT_HEX.toUpperCase().replace(/^41/, '41'))).toEqual({
      hex: USDT_CONTRACT_HEX,
      base58: USDT_CONTRACT_BASE58,
    });
    expect(parseAddress(`0x${USDT_CONTRACT_HEX}`).base58).toBe(USDT_CONTRACT_BASE58);
  });

  it.each([
    ['empty', ''],
    ['bad checksum (last char changed)', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6u'],
    ['base58 alphabet violation (0)', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj60'],
    ['too short', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6'],
    ['too long', 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6tt'],
    ['hex without 41', 'a614f803b6fd780986a42c78ec9c7f77e6ded13c'],
    ['hex with wrong prefix', '42a614f803b6fd780986a42c78ec9c7f77e6ded13c'],
    ['hex too long', `${USDT_CONTRACT_HEX}00`],
    ['not hex', '41z614f803b6fd780986a42c78ec9c7f77e6ded13c'],
    ['surrounding space', ` ${USDT_CONTRACT_BASE58}`],
    ['ethereum address', '0xdAC17F958D2ee523a2206206994597C13D831ec7'],
    // A valid base58check string whose version byte is not 0x41 (bitcoin genesis address).
    ['valid base58check, other version', '1A1zP1eP5QGefi2DMPTfTL5SLmv7DivfNa'],
  ])('rejects %s', (_name, input) => {
    expect(isValidAddress(input)).toBe(false);
    expect(() => parseAddress(input)).toThrow(InvalidAddressError);
  });

  it('agrees with TronGrid on every recorded base58/hex pair', () => {
    const v1 = fixtureJson<{
      data: Array<{
        from: string;
        detail: {
          raw_data: { contract: Array<{ parameter: { value: { owner_address: string } } }> };
        };
      }>;
    }>('trongrid-v1-trc20-TL24LCps5FKwp3PoU1MvrYrwhi5LU1tHre.extract.json');
    let checked = 0;
    for (const item of v1.data) {
      const owner = item.detail.raw_data.contract[0]?.parameter.value.owner_address;
      if (!owner) continue;
      expect(hexToBase58(owner)).toBe(item.from);
      expect(base58ToHex(item.from)).toBe(owner.toLowerCase());
      checked++;
    }
    expect(checked).toBe(6);
  });
});
