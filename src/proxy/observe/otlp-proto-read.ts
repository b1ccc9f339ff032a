/**
 * Reading protobuf (the wire format otlp-proto.ts writes): a message's fields one by one, and what
 * a collector's answer to an export says it could not take.
 */
// Wire types: 0 varint, 1 eight bytes, 2 length-delimited, 5 four bytes.
const VARINT = 0;
const I64 = 1;
const LEN = 2;
const I32 = 5;

/**
 * Visits each field of a protobuf message: varints as numbers (exact below 2^53), length-delimited
 * fields as their bytes; fixed-width fields are skipped. Throws on a truncated message.
 */
export function protoFields(bytes: Uint8Array, visit: (field: number, value: number | Uint8Array) => void): void {
  let at = 0;
  const varint = (): number => {
    let value = 0;
    for (let shift = 1; at < bytes.length; shift *= 0x80) {
      const byte = bytes[at++]!;
      value += (byte & 0x7f) * shift;
      if (byte < 0x80) return value;
    }
    throw new RangeError('a truncated varint');
  };
  while (at < bytes.length) {
    const key = varint();
    const wire = key % 8;
    const field = Math.floor(key / 8);
    if (wire === VARINT) visit(field, varint());
    else if (wire === LEN) {
      const length = varint();
      if (at + length > bytes.length) throw new RangeError('a truncated field');
      visit(field, bytes.subarray(at, (at += length)));
    } else if (wire === I64) at += 8;
    else if (wire === I32) at += 4;
    else throw new RangeError(`wire type ${wire}`);
  }
}

/**
 * What a collector's ExportTraceServiceResponse says it could not take: partial_success (1) with
 * rejected_spans (1, varint) and error_message (2); undefined when it took everything.
 */
export function rejectedSpans(response: Uint8Array): { rejected: number; message: string } | undefined {
  let result: { rejected: number; message: string } | undefined;
  protoFields(response, (field, value) => {
    if (field !== 1 || typeof value === 'number') return;
    const partial = { rejected: 0, message: '' };
    protoFields(value, (inner, v) => {
      if (inner === 1 && typeof v === 'number') partial.rejected = v;
      else if (inner === 2 && typeof v !== 'number') partial.message = Buffer.from(v).toString('utf8');
    });
    if (partial.rejected > 0 || partial.message !== '') result = partial;
  });
  return result;
}
