/**
 * Protobuf wire-format writing (the encoding guide's varints, fixed-width fields, length-delimited
 * fields) into one growing buffer: the primitives of the OTLP encoder (otlp-proto.ts), which
 * names the fields. A field is a varint tag (number << 3 | wire type) then its value; wire type 0
 * varint, 1 eight bytes little-endian, 2 varint length then bytes, 5 four bytes little-endian.
 */
import { randomSpanIdInto } from './trace-context.js';

/** Bytes of a non-negative integer's varint (below 2^53). */
export function varintSize(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  let size = 4;
  for (v = Math.floor(v / 0x200000); v >= 0x80; v = Math.floor(v / 0x80)) size++;
  return size;
}

/** Each hex digit's value, by character code (0 for anything else: ids are checked before). */
const HEX_VALUE = new Uint8Array(128);
for (let d = 0; d < 16; d++) HEX_VALUE[d.toString(16).charCodeAt(0)] = d;

/** Writes the bytes of hex digits into `buf` at `at`; returns how many. */
export function hexInto(buf: Uint8Array, at: number, hex: string): number {
  for (let i = 0; i < hex.length; i += 2)
    buf[at++] = (HEX_VALUE[hex.charCodeAt(i)]! << 4) | HEX_VALUE[hex.charCodeAt(i + 1)]!;
  return hex.length >> 1;
}

export class ProtoWriter {
  buf: Buffer;
  pos = 0;

  /**
   * @param grow where a larger buffer comes from when the writer outgrows `buf` (its bytes so far
   *   are copied over; the old buffer is the caller's to reuse, it can tell by `buf` changing).
   */
  constructor(
    size = 1 << 16,
    private readonly grow: (bytes: number) => Buffer = Buffer.allocUnsafe,
  ) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = this.grow(Math.max(this.buf.length * 2, this.pos + bytes));
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  /** A non-negative integer below 2^53. */
  varint(v: number): void {
    while (v >= 0x80) {
      this.buf[this.pos++] = (v % 0x80) | 0x80;
      v = Math.floor(v / 0x80);
    }
    this.buf[this.pos++] = v;
  }

  raw(bytes: Uint8Array): void {
    this.ensure(bytes.length);
    // set() even for short pieces: a byte loop up to 64 bytes cost 20% more of the encoding (measured).
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /**
   * A bytes field from hex digits (ids: lower-case hex, as trace-context.ts makes and checks
   * them), decoded here byte by byte: Buffer.write(…, 'hex') costs more than the decoding.
   */
  hex(fieldTag: number, hex: string): void {
    this.ensure(2 + (hex.length >> 1));
    this.buf[this.pos++] = fieldTag;
    this.buf[this.pos++] = hex.length >> 1;
    this.pos += hexInto(this.buf, this.pos, hex);
  }

  /** An id field: `id`'s bytes, or a new random span id's (8 bytes) when `id` is undefined. */
  id(fieldTag: number, id: Uint8Array | undefined): void {
    const length = id === undefined ? 8 : id.length;
    this.ensure(2 + length);
    const buf = this.buf;
    buf[this.pos++] = fieldTag;
    buf[this.pos++] = length;
    if (id === undefined) randomSpanIdInto(buf, this.pos);
    else for (let i = 0; i < length; i++) buf[this.pos + i] = id[i]!;
    this.pos += length;
  }

  /** A little-endian 32-bit unsigned integer. */
  u32(value: number): void {
    const buf = this.buf;
    const at = this.pos;
    buf[at] = value;
    buf[at + 1] = value >>> 8;
    buf[at + 2] = value >>> 16;
    buf[at + 3] = value >>> 24;
    this.pos = at + 4;
  }

  /**
   * A fixed64 field of ms since the epoch, as nanoseconds, exact past 2^53: seconds·10^9 + the
   * rounded rest (as the SDK's hrTime). The low word comes exact from the 32-bit product
   * (Math.imul keeps the product's low 32 bits for any seconds); the high word from the double
   * sum, whose error (a few hundred ns) is far below 2^31, less the low word, rounded.
   */
  nanos(fieldTag: number, ms: number): void {
    this.ensure(9);
    this.buf[this.pos++] = fieldTag;
    const seconds = Math.floor(ms / 1000);
    const rest = Math.round((ms - seconds * 1000) * 1e6); // 0 … 10^9
    const low = ((Math.imul(seconds, 1e9) >>> 0) + rest) >>> 0;
    this.u32(low);
    this.u32(Math.round((seconds * 1e9 + rest - low) / 0x100000000));
  }

  /**
   * Starts a length-delimited field; end(start) writes its length. Two bytes are reserved for it:
   * a span's length (128 to 16,383 bytes) then fits in place, and only a shorter or longer field's
   * bytes move.
   */
  begin(fieldTag: number): number {
    this.ensure(3);
    this.buf[this.pos++] = fieldTag;
    const start = this.pos;
    this.pos += 2;
    return start;
  }

  end(start: number): void {
    const length = this.pos - start - 2;
    const size = varintSize(length);
    if (size > 3) throw new RangeError(`an OTLP message of ${length} bytes is longer than 2^21`);
    if (size !== 2) {
      this.ensure(1);
      this.buf.copyWithin(start + size, start + 2, this.pos);
    }
    const buf = this.buf;
    if (size === 2) {
      buf[start] = (length & 0x7f) | 0x80;
      buf[start + 1] = length >>> 7;
    } else {
      this.pos = start;
      this.varint(length);
    }
    this.pos = start + size + length;
  }
}
