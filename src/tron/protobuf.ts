/**
 * The protobuf wire format, as far as checking TRON blocks needs it (tron/verify.ts): read the
 * fields of a message without a schema, and write the few messages whose hashes we recompute
 * (BlockHeader.raw, Transaction.Result). Source: the Protocol Buffers encoding specification
 * (https://protobuf.dev/programming-guides/encoding/): a message is a sequence of
 * (tag = field << 3 | wire type, value); wire types 0 varint, 1 fixed 64-bit, 2 length-delimited,
 * 5 fixed 32-bit (3 and 4, groups, are not used by java-tron's protocol and are refused).
 * Java's protobuf serialises known fields in field-number order and omits proto3 defaults
 * (0, empty bytes, false); unknown fields are kept and re-serialised after the known ones.
 */

/** One field of a message: number, wire type, and its value (varint as bigint, else the bytes). */
export type PbField =
  | { field: number; wire: 0; value: bigint }
  | { field: number; wire: 1 | 2 | 5; bytes: Uint8Array };

/** Bytes that are not a well-formed protobuf message. */
export class PbDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PbDecodeError';
  }
}

/**
 * Read one varint at `pos`.
 * @returns the value (at most 64 bits) and the position after it.
 * @throws PbDecodeError when it runs past the end or past 10 bytes.
 */
function readVarint(buf: Uint8Array, pos: number): [bigint, number] {
  // Fast path: up to 7 bytes (49 bits) in a double, exact; longer ones through bigint.
  let small = 0;
  let mul = 1;
  for (let i = 0; i < 7; i++) {
    const b = buf[pos + i];
    if (b === undefined) throw new PbDecodeError('varint runs past the end');
    small += (b & 0x7f) * mul;
    if (b < 0x80) return [BigInt(small), pos + i + 1];
    mul *= 128;
  }
  let result = 0n;
  let shift = 0n;
  for (let i = 0; i < 10; i++) {
    const b = buf[pos + i];
    if (b === undefined) throw new PbDecodeError('varint runs past the end');
    result |= BigInt(b & 0x7f) << shift;
    if (b < 0x80) return [BigInt.asUintN(64, result), pos + i + 1];
    shift += 7n;
  }
  throw new PbDecodeError('varint longer than 10 bytes');
}

/**
 * Every field of the message in `buf`, in wire order (a repeated field appears once per value).
 * Length-delimited values are views into `buf` (no copy).
 * @throws PbDecodeError on a truncated message, a group, or an unknown wire type.
 */
export function pbFields(buf: Uint8Array): PbField[] {
  const out: PbField[] = [];
  const n = buf.length;
  let pos = 0;
  while (pos < n) {
    // One-byte tags (fields 1–15) and varints below 2^49 are read as numbers, without a bigint or
    // a tuple per read (a block of 600 transactions has about 15,000 fields); anything longer
    // goes through readVarint, with the same results and errors.
    let field: number;
    let wire: number;
    const t0 = buf[pos] as number;
    if (t0 < 0x80) {
      field = t0 >> 3;
      wire = t0 & 7;
      pos++;
    } else {
      const [tag, p] = readVarint(buf, pos);
      pos = p;
      field = Number(tag >> 3n);
      wire = Number(tag & 7n);
    }
    if (field === 0) throw new PbDecodeError('field number 0');
    if (wire === 0) {
      const small = smallVarint(buf, pos);
      if (small >= 0) {
        pos = smallEnd;
        out.push({ field, wire, value: BigInt(small) });
      } else {
        const [value, q] = readVarint(buf, pos);
        pos = q;
        out.push({ field, wire, value });
      }
    } else if (wire === 2) {
      const small = smallVarint(buf, pos);
      if (small >= 0 && smallEnd + small <= n) {
        out.push({ field, wire, bytes: buf.subarray(smallEnd, smallEnd + small) });
        pos = smallEnd + small;
        continue;
      }
      const [len, q] = readVarint(buf, pos);
      const end = q + Number(len);
      if (len > BigInt(n) || end > n) {
        throw new PbDecodeError(`field ${field}: length ${len} runs past the end`);
      }
      out.push({ field, wire, bytes: buf.subarray(q, end) });
      pos = end;
    } else if (wire === 1 || wire === 5) {
      const end = pos + (wire === 1 ? 8 : 4);
      if (end > n) throw new PbDecodeError(`field ${field}: fixed value runs past the end`);
      out.push({ field, wire, bytes: buf.subarray(pos, end) });
      pos = end;
    } else {
      throw new PbDecodeError(`field ${field}: wire type ${wire} is not supported`);
    }
  }
  return out;
}

/** Position after the varint smallVarint last read. */
let smallEnd = 0;

/**
 * The varint at `pos` as a number when it ends within 7 bytes (below 2^49: exact), its end in
 * `smallEnd`; −1 when it is longer or runs past the end (the caller then reads it with
 * readVarint, which returns it or throws the error).
 */
function smallVarint(buf: Uint8Array, pos: number): number {
  let x = 0;
  let mul = 1;
  const n = buf.length;
  for (let i = 0; i < 7; i++) {
    if (pos + i >= n) return -1;
    const b = buf[pos + i] as number;
    x += (b & 0x7f) * mul;
    if (b < 0x80) {
      smallEnd = pos + i + 1;
      return x;
    }
    mul *= 128;
  }
  return -1;
}

/** The bytes of every length-delimited occurrence of `field`, in order. */
export function pbBytesAll(fields: readonly PbField[], field: number): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (const f of fields) if (f.field === field && f.wire === 2) out.push(f.bytes);
  return out;
}

/** The last length-delimited occurrence of `field` (proto3: the last one wins), or undefined. */
export function pbBytes(fields: readonly PbField[], field: number): Uint8Array | undefined {
  let v: Uint8Array | undefined;
  for (const f of fields) if (f.field === field && f.wire === 2) v = f.bytes;
  return v;
}

/** The last varint occurrence of `field`, or 0n (the proto3 default) when absent. */
export function pbVarint(fields: readonly PbField[], field: number): bigint {
  let v = 0n;
  for (const f of fields) if (f.field === field && f.wire === 0) v = f.value;
  return v;
}

/**
 * A protobuf writer for small messages: fields are appended in call order (call them in
 * field-number order to match Java's serialisation), proto3 defaults are skipped.
 */
export class PbWriter {
  private readonly parts: number[] = [];
  private readonly chunks: Uint8Array[] = [];
  private size = 0;

  private flushParts(): void {
    if (this.parts.length === 0) return;
    const b = Uint8Array.from(this.parts);
    this.chunks.push(b);
    this.size += b.length;
    this.parts.length = 0;
  }

  private varintRaw(v: bigint): void {
    let x = BigInt.asUintN(64, v); // int64: a negative value is its two's complement, 10 bytes
    while (x >= 0x80n) {
      this.parts.push(Number(x & 0x7fn) | 0x80);
      x >>= 7n;
    }
    this.parts.push(Number(x));
  }

  /** Field `field` as a varint (int32/int64/enum/bool); skipped when 0. */
  varint(field: number, v: bigint | number): this {
    const x = BigInt(v);
    if (x === 0n) return this;
    this.varintRaw(BigInt(field << 3));
    this.varintRaw(x);
    return this;
  }

  /** Field `field` as length-delimited bytes; skipped when empty unless `keepEmpty`. */
  bytes(field: number, b: Uint8Array, keepEmpty = false): this {
    if (b.length === 0 && !keepEmpty) return this;
    this.varintRaw(BigInt((field << 3) | 2));
    this.varintRaw(BigInt(b.length));
    this.flushParts();
    this.chunks.push(b);
    this.size += b.length;
    return this;
  }

  /** The message written so far. */
  finish(): Uint8Array {
    this.flushParts();
    const out = new Uint8Array(this.size);
    let pos = 0;
    for (const c of this.chunks) {
      out.set(c, pos);
      pos += c.length;
    }
    return out;
  }
}
