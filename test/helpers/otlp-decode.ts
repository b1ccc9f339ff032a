/**
 * An OTLP/HTTP protobuf trace request decoded for tests: a generic protobuf wire-format reader (no
 * schema) and, on top, ExportTraceServiceRequest's spans in the shape of OTLP's JSON mapping (hex
 * ids, attributes as {key, value: {stringValue | intValue | doubleValue}}), so tests read both the
 * same way. Field numbers: opentelemetry-proto's trace.proto and common.proto.
 */

/** A field's values by number; varints as bigint, fixed64 as 8 bytes, lengths as bytes. */
export type Fields = Map<number, Array<bigint | Uint8Array>>;

export function decodeFields(bytes: Uint8Array): Fields {
  const fields: Fields = new Map();
  let at = 0;
  const varint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (at >= bytes.length) throw new RangeError('truncated varint');
      const byte = bytes[at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if (byte < 0x80) return value;
    }
  };
  const take = (n: number): Uint8Array => {
    if (at + n > bytes.length) throw new RangeError('truncated field');
    return bytes.subarray(at, (at += n));
  };
  while (at < bytes.length) {
    const key = Number(varint());
    const field = key >>> 3;
    const wire = key & 7;
    const value =
      wire === 0
        ? varint()
        : wire === 1
          ? take(8)
          : wire === 2
            ? take(Number(varint()))
            : wire === 5
              ? take(4)
              : undefined;
    if (value === undefined) throw new RangeError(`wire type ${wire}`);
    const values = fields.get(field);
    if (values === undefined) fields.set(field, [value]);
    else values.push(value); // not a copy per value: a body of 20,000 spans decodes in linear time
  }
  return fields;
}

const bytesOf = (f: Fields, n: number): Uint8Array[] => (f.get(n) ?? []) as Uint8Array[];
const hex = (b: Uint8Array | undefined): string => (b === undefined ? '' : Buffer.from(b).toString('hex'));
const text = (b: Uint8Array | undefined): string => (b === undefined ? '' : Buffer.from(b).toString('utf8'));
const fixed64 = (b: Uint8Array): string => Buffer.from(b).readBigUInt64LE().toString();

export interface DecodedAttribute {
  key: string;
  value: { stringValue?: string; intValue?: string; doubleValue?: number; boolValue?: boolean };
}

export interface DecodedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string;
  traceState: string;
  name: string;
  kind: number;
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: DecodedAttribute[];
  events: Array<{ name: string; timeUnixNano: string }>;
  status?: { code: number; message: string };
  flags?: number;
}

function attribute(bytes: Uint8Array): DecodedAttribute {
  const kv = decodeFields(bytes);
  const any = decodeFields(bytesOf(kv, 2)[0] ?? new Uint8Array());
  const value: DecodedAttribute['value'] = {};
  if (any.has(1)) value.stringValue = text(bytesOf(any, 1)[0]);
  if (any.has(2)) value.boolValue = any.get(2)![0] === 1n;
  if (any.has(3)) value.intValue = BigInt.asIntN(64, any.get(3)![0] as bigint).toString();
  if (any.has(4)) value.doubleValue = Buffer.from(bytesOf(any, 4)[0]!).readDoubleLE();
  return { key: text(bytesOf(kv, 1)[0]), value };
}

export function decodeSpan(bytes: Uint8Array): DecodedSpan {
  const f = decodeFields(bytes);
  const span: DecodedSpan = {
    traceId: hex(bytesOf(f, 1)[0]),
    spanId: hex(bytesOf(f, 2)[0]),
    traceState: text(bytesOf(f, 3)[0]),
    parentSpanId: hex(bytesOf(f, 4)[0]),
    name: text(bytesOf(f, 5)[0]),
    kind: Number(f.get(6)?.[0] ?? 0n),
    startTimeUnixNano: fixed64(bytesOf(f, 7)[0]!),
    endTimeUnixNano: fixed64(bytesOf(f, 8)[0]!),
    attributes: bytesOf(f, 9).map(attribute),
    events: bytesOf(f, 11).map((e) => {
      const ef = decodeFields(e);
      return { timeUnixNano: fixed64(bytesOf(ef, 1)[0]!), name: text(bytesOf(ef, 2)[0]) };
    }),
  };
  const status = bytesOf(f, 15)[0];
  if (status !== undefined) {
    const sf = decodeFields(status);
    span.status = { code: Number(sf.get(3)?.[0] ?? 0n), message: text(bytesOf(sf, 2)[0]) };
  }
  const flags = bytesOf(f, 16)[0];
  if (flags !== undefined) span.flags = Buffer.from(flags).readUInt32LE();
  return span;
}

/** A request's resources (their attributes) and spans, in order. */
export function decodeTraceRequest(body: Uint8Array): {
  resources: DecodedAttribute[][];
  scopes: Array<{ name: string; version: string }>;
  spans: DecodedSpan[];
} {
  const out = {
    resources: [] as DecodedAttribute[][],
    scopes: [] as Array<{ name: string; version: string }>,
    spans: [] as DecodedSpan[],
  };
  for (const rs of bytesOf(decodeFields(body), 1)) {
    const rf = decodeFields(rs);
    out.resources.push(bytesOf(decodeFields(bytesOf(rf, 1)[0] ?? new Uint8Array()), 1).map(attribute));
    for (const ss of bytesOf(rf, 2)) {
      const sf = decodeFields(ss);
      const scope = decodeFields(bytesOf(sf, 1)[0] ?? new Uint8Array());
      out.scopes.push({ name: text(bytesOf(scope, 1)[0]), version: text(bytesOf(scope, 2)[0]) });
      out.spans.push(...bytesOf(sf, 2).map(decodeSpan));
    }
  }
  return out;
}
