/**
 * The schema-less protobuf reader (src/tron/protobuf.ts pbFields): its number fast path (one-byte
 * tags, varints below 2^49) and its bigint path (longer tags and varints) give the same fields,
 * and every malformed input is refused with PbDecodeError, whichever path reads it.
 */
import { describe, expect, it } from 'vitest';
import { PbDecodeError, PbWriter, pbFields } from '../../src/tron/protobuf.js';

const bytes = (...b: number[]) => Uint8Array.from(b);

describe('pbFields', () => {
  it('reads one-byte and multi-byte tags, small and 64-bit varints, and lengths', () => {
    const w = new PbWriter()
      .varint(1, 150)
      .varint(2, 2n ** 49n + 3n) // 8 bytes: past the number fast path
      .varint(3, 2n ** 64n - 1n) // 10 bytes
      .bytes(4, Uint8Array.from([1, 2, 3]))
      .varint(1002, 7) // a two-byte tag (as in a real transaction's ret)
      .bytes(20, new Uint8Array(300)); // a two-byte length
    const f = pbFields(w.finish());
    expect(f.map((x) => [x.field, x.wire])).toEqual([
      [1, 0],
      [2, 0],
      [3, 0],
      [4, 2],
      [1002, 0],
      [20, 2],
    ]);
    expect(f[0]).toMatchObject({ value: 150n });
    expect(f[1]).toMatchObject({ value: 2n ** 49n + 3n });
    expect(f[2]).toMatchObject({ value: 2n ** 64n - 1n });
    expect(Array.from((f[3] as { bytes: Uint8Array }).bytes)).toEqual([1, 2, 3]);
    expect(f[4]).toMatchObject({ value: 7n });
    expect((f[5] as { bytes: Uint8Array }).bytes.length).toBe(300);
  });

  it('refuses truncated, over-long and unsupported input', () => {
    const bad: Array<[string, Uint8Array]> = [
      ['varint value past the end', bytes(0x08, 0x80)],
      ['varint value longer than 10 bytes', bytes(0x08, ...new Array(11).fill(0x80), 0x01)],
      ['length past the end (one-byte length)', bytes(0x12, 0x05, 1, 2)],
      [
        'length past the end (8-byte length)',
        bytes(0x12, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01),
      ],
      ['tag past the end', bytes(0x80)],
      ['field number 0', bytes(0x00, 0x01)],
      ['group wire type', bytes(0x0b)],
      ['fixed64 past the end', bytes(0x09, 1, 2, 3)],
    ];
    for (const [what, b] of bad) expect(() => pbFields(b), what).toThrow(PbDecodeError);
  });
});
