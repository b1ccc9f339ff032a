/**
 * Requests' spans as an OTLP/HTTP protobuf body (ExportTraceServiceRequest of
 * opentelemetry-proto's collector/trace/v1, `application/x-protobuf`), written straight from the
 * records into one growing buffer.
 *
 * Hand-written because it is the measured hot path (bench/RESULTS.md, "tracing"): the OTLP
 * exporter's serializers build objects per span first (33 µs per request of three spans for JSON,
 * 22 for protobuf, here). This one copies pre-encoded pieces: every string attribute's whole
 * KeyValue (instances, reasons, models and keys repeat), every key's prefix, every name, cached
 * after their first use (bounded caches, cleared when full).
 *
 * Wire format (protobuf encoding): a field is a varint tag (number << 3 | wire type) then its
 * value; wire type 0 varint, 1 eight bytes little-endian, 2 varint length then bytes. Field
 * numbers are the .proto's (trace.proto, common.proto, resource.proto), named at each constant.
 * test/otlp-proto.test.ts decodes this against the SDK's own protobuf serializer on random spans.
 *
 * Invariant: strings are truncated to MAX_STRING_BYTES code units, so a nested message (a span,
 * an attribute) is shorter than 2^21 bytes: its length fits the three bytes begin() reserves.
 */
import type { RequestTrace } from './request-trace.js';
import {
  attemptAttributes,
  requestAttributes,
  requestStatusMessage,
  routedAttributes,
  type Visit,
} from './span-attributes.js';

/** The body's fixed parts: the resource's attributes and the instrumentation scope. */
export interface OtlpEnvelope {
  resource: Record<string, string | number>;
  scopeName: string;
  scopeVersion: string;
}

const MAX_STRING_BYTES = 4096;
const CACHE_MAX = 4096;

// Tags: (field number << 3) | wire type.
const LEN = 2;
const VARINT = 0;
const I64 = 1;
const I32 = 5;
const tag = (field: number, wire: number): number => (field << 3) | wire;
// ExportTraceServiceRequest.resource_spans = 1; ResourceSpans.resource = 1, .scope_spans = 2;
// Resource.attributes = 1; ScopeSpans.scope = 1, .spans = 2; InstrumentationScope.name = 1, .version = 2.
const REQUEST_RESOURCE_SPANS = tag(1, LEN);
const RESOURCE_SPANS_RESOURCE = tag(1, LEN);
const RESOURCE_SPANS_SCOPE_SPANS = tag(2, LEN);
const RESOURCE_ATTRIBUTES = tag(1, LEN);
const SCOPE_SPANS_SCOPE = tag(1, LEN);
const SCOPE_SPANS_SPANS = tag(2, LEN);
const SCOPE_NAME = tag(1, LEN);
const SCOPE_VERSION = tag(2, LEN);
// Span: trace_id 1, span_id 2, trace_state 3, parent_span_id 4, name 5, kind 6 (enum),
// start_time_unix_nano 7 and end_time_unix_nano 8 (fixed64), attributes 9, events 11, status 15,
// flags 16 (fixed32).
const SPAN_TRACE_ID = tag(1, LEN);
const SPAN_SPAN_ID = tag(2, LEN);
const SPAN_TRACE_STATE = tag(3, LEN);
const SPAN_PARENT_SPAN_ID = tag(4, LEN);
const SPAN_NAME = tag(5, LEN);
const SPAN_KIND = tag(6, VARINT);
const SPAN_START = tag(7, I64);
const SPAN_END = tag(8, I64);
const SPAN_ATTRIBUTES = tag(9, LEN);
const SPAN_EVENTS = tag(11, LEN);
const SPAN_STATUS = tag(15, LEN);
const SPAN_FLAGS = tag(16, I32);
// Span.Event: time_unix_nano 1 (fixed64), name 2. Status: message 2, code 3 (enum).
const EVENT_TIME = tag(1, I64);
const EVENT_NAME = tag(2, LEN);
const STATUS_MESSAGE = tag(2, LEN);
const STATUS_CODE = tag(3, VARINT);
// KeyValue: key 1, value 2 (AnyValue: string_value 1, int_value 3 (varint), double_value 4 (fixed64)).
const KEY = tag(1, LEN);
const VALUE = tag(2, LEN);
const STRING_VALUE = tag(1, LEN);
const INT_VALUE = tag(3, VARINT);
const DOUBLE_VALUE = tag(4, I64);
// SpanFlags: the W3C trace flags in the low byte; bit 8: bit 9 is meaningful; bit 9: the parent is remote.
const FLAGS_HAS_IS_REMOTE = 0x100;
const FLAGS_IS_REMOTE = 0x200;

/** Bytes of a non-negative integer's varint (below 2^53). */
function varintSize(v: number): number {
  let size = 1;
  for (; v >= 0x80; v = Math.floor(v / 0x80)) size++;
  return size;
}

/** Each hex digit's value, by character code (0 for anything else: ids are checked before). */
const HEX_VALUE = new Uint8Array(128);
for (let d = 0; d < 16; d++) HEX_VALUE[d.toString(16).charCodeAt(0)] = d;

class ProtoWriter {
  buf: Buffer;
  pos = 0;

  constructor(size = 1 << 16) {
    this.buf = Buffer.allocUnsafe(size);
  }

  ensure(bytes: number): void {
    if (this.pos + bytes <= this.buf.length) return;
    const grown = Buffer.allocUnsafe(Math.max(this.buf.length * 2, this.pos + bytes));
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
    this.buf.set(bytes, this.pos);
    this.pos += bytes.length;
  }

  /**
   * A bytes field from hex digits (ids: lower-case hex, as trace-context.ts makes and checks
   * them), decoded here byte by byte: Buffer.write(…, 'hex') costs more than the decoding.
   */
  hex(fieldTag: number, hex: string): void {
    const length = hex.length >> 1;
    this.ensure(2 + length);
    const buf = this.buf;
    let at = this.pos;
    buf[at++] = fieldTag;
    buf[at++] = length;
    for (let i = 0; i < hex.length; i += 2)
      buf[at++] = (HEX_VALUE[hex.charCodeAt(i)]! << 4) | HEX_VALUE[hex.charCodeAt(i + 1)]!;
    this.pos = at;
  }

  /** A little-endian 32-bit unsigned integer. */
  u32(value: number): void {
    const buf = this.buf;
    buf[this.pos++] = value & 0xff;
    buf[this.pos++] = (value >>> 8) & 0xff;
    buf[this.pos++] = (value >>> 16) & 0xff;
    buf[this.pos++] = (value >>> 24) & 0xff;
  }

  /** A fixed64 field of ms since the epoch, as nanoseconds: exact past 2^53 (two 32-bit halves). */
  nanos(fieldTag: number, ms: number): void {
    this.ensure(9);
    this.buf[this.pos++] = fieldTag;
    const whole = Math.floor(ms);
    const fraction = Math.min(999_999, Math.round((ms - whole) * 1e6));
    // ns = whole·10^6 + fraction, with whole = high·2^20 + low, every product below 2^53.
    const high = Math.floor(whole / 0x100000);
    const low = whole % 0x100000;
    const highNs = high * 1e6; // ns = highNs·2^20 + lowNs
    const lowNs = low * 1e6 + fraction;
    const mid = (highNs % 0x1000) * 0x100000 + lowNs; // below 2^42
    this.u32(mid % 0x100000000);
    this.u32(Math.floor(highNs / 0x1000) + Math.floor(mid / 0x100000000));
  }

  /** Starts a length-delimited field; end(start) writes its length. */
  begin(fieldTag: number): number {
    this.ensure(4);
    this.buf[this.pos++] = fieldTag;
    const start = this.pos;
    this.pos += 3;
    return start;
  }

  end(start: number): void {
    const length = this.pos - start - 3;
    const size = varintSize(length);
    if (size > 3) throw new RangeError(`an OTLP message of ${length} bytes is longer than 2^21`);
    if (size < 3) this.buf.copyWithin(start + size, start + 3, this.pos);
    this.pos = start;
    this.varint(length);
    this.pos += length;
  }
}

const truncated = (s: string): string => (s.length > MAX_STRING_BYTES ? s.slice(0, MAX_STRING_BYTES) : s);

/** A string's length-prefixed UTF-8, cached. */
const prefixed = new Map<string, Buffer>();
function lengthPrefixed(s: string): Buffer {
  let bytes = prefixed.get(s);
  if (bytes === undefined) {
    const utf8 = Buffer.from(truncated(s), 'utf8');
    const w = new ProtoWriter(varintSize(utf8.length) + utf8.length);
    w.varint(utf8.length);
    utf8.copy(w.buf, w.pos);
    bytes = w.buf;
    if (prefixed.size >= CACHE_MAX) prefixed.clear();
    prefixed.set(s, bytes);
  }
  return bytes;
}

function stringField(w: ProtoWriter, fieldTag: number, s: string): void {
  const bytes = lengthPrefixed(s);
  w.ensure(1 + bytes.length);
  w.buf[w.pos++] = fieldTag;
  w.raw(bytes);
}

/** Whole `attributes` fields of string KeyValues, by key then value. */
const stringAttributes = new Map<string, Map<string, Buffer>>();
let stringAttributeCount = 0;

function stringAttribute(w: ProtoWriter, fieldTag: number, key: string, value: string): void {
  const cached = fieldTag === SPAN_ATTRIBUTES;
  let encoded = cached ? stringAttributes.get(key)?.get(value) : undefined;
  if (encoded === undefined) {
    const scratch = new ProtoWriter(64 + 2 * (key.length + value.length));
    const kv = scratch.begin(fieldTag);
    stringField(scratch, KEY, key);
    const any = scratch.begin(VALUE);
    stringField(scratch, STRING_VALUE, value);
    scratch.end(any);
    scratch.end(kv);
    encoded = Buffer.from(scratch.buf.subarray(0, scratch.pos));
    if (cached) {
      if (stringAttributeCount >= CACHE_MAX) {
        stringAttributes.clear();
        stringAttributeCount = 0;
      }
      let byValue = stringAttributes.get(key);
      if (byValue === undefined) stringAttributes.set(key, (byValue = new Map()));
      byValue.set(value, encoded);
      stringAttributeCount++;
    }
  }
  w.raw(encoded);
}

function numberAttribute(w: ProtoWriter, fieldTag: number, key: string, value: number): void {
  const keyBytes = lengthPrefixed(key);
  if (Number.isSafeInteger(value) && value >= 0) {
    const any = 1 + varintSize(value);
    const content = 1 + keyBytes.length + 1 + varintSize(any) + any;
    w.ensure(1 + varintSize(content) + content);
    w.buf[w.pos++] = fieldTag;
    w.varint(content);
    w.buf[w.pos++] = KEY;
    w.raw(keyBytes);
    w.buf[w.pos++] = VALUE;
    w.varint(any);
    w.buf[w.pos++] = INT_VALUE;
    w.varint(value);
  } else {
    // Doubles (and the negative or huge integers kvroute never records) as double_value.
    const content = 1 + keyBytes.length + 1 + 1 + 9;
    w.ensure(2 + content);
    w.buf[w.pos++] = fieldTag;
    w.varint(content);
    w.buf[w.pos++] = KEY;
    w.raw(keyBytes);
    w.buf[w.pos++] = VALUE;
    w.buf[w.pos++] = 9;
    w.buf[w.pos++] = DOUBLE_VALUE;
    w.buf.writeDoubleLE(value, w.pos);
    w.pos += 8;
  }
}

function attributes(w: ProtoWriter, fieldTag: number, values: Record<string, string | number>): void {
  for (const key in values) {
    const value = values[key]!;
    if (typeof value === 'string') stringAttribute(w, fieldTag, key, value);
    else numberAttribute(w, fieldTag, key, value);
  }
}

/** Where a request's spans are encoded before they are copied out (reused: encoding is synchronous). */
const scratch = new ProtoWriter(1 << 16);

/** A span attribute into the scratch writer (the Visit of span-attributes.ts). */
const spanAttribute: Visit = (key, value) => {
  if (typeof value === 'string') stringAttribute(scratch, SPAN_ATTRIBUTES, key, value);
  else numberAttribute(scratch, SPAN_ATTRIBUTES, key, value);
};

// OTLP's SpanKind (UNSPECIFIED = 0, INTERNAL = 1, SERVER = 2, CLIENT = 3).
const INTERNAL = 1;
const SERVER = 2;
const CLIENT = 3;

/** Starts a span: its ids, name, kind and times; returns where its length goes (ProtoWriter.end). */
function spanHead(
  w: ProtoWriter,
  t: RequestTrace,
  spanId: string,
  parentSpanId: string,
  name: string,
  kind: number,
  start: number,
  end: number,
): number {
  const at = w.begin(SCOPE_SPANS_SPANS);
  w.hex(SPAN_TRACE_ID, t.parent.traceId);
  w.hex(SPAN_SPAN_ID, spanId);
  if (t.parent.traceState !== '') stringField(w, SPAN_TRACE_STATE, t.parent.traceState);
  if (parentSpanId !== '') w.hex(SPAN_PARENT_SPAN_ID, parentSpanId);
  stringField(w, SPAN_NAME, name);
  w.ensure(2);
  w.buf[w.pos++] = SPAN_KIND;
  w.buf[w.pos++] = kind;
  w.nanos(SPAN_START, start);
  w.nanos(SPAN_END, end);
  return at;
}

function event(w: ProtoWriter, name: string, at: number): void {
  const bytes = lengthPrefixed(name);
  w.ensure(4);
  w.buf[w.pos++] = SPAN_EVENTS;
  w.varint(9 + 1 + bytes.length);
  w.nanos(EVENT_TIME, at);
  w.ensure(1);
  w.buf[w.pos++] = EVENT_NAME;
  w.raw(bytes);
}

/** Status ERROR (2) with its message. */
function errorStatus(w: ProtoWriter, message: string): void {
  const at = w.begin(SPAN_STATUS);
  if (message !== '') stringField(w, STATUS_MESSAGE, message);
  w.ensure(2);
  w.buf[w.pos++] = STATUS_CODE;
  w.buf[w.pos++] = 2;
  w.end(at);
}

/** Ends a span: its flags (sampled; whether its parent is remote), then its length. */
function spanTail(w: ProtoWriter, at: number, remoteParent: boolean): void {
  w.ensure(6);
  w.buf[w.pos++] = (SPAN_FLAGS & 0x7f) | 0x80; // tag 16·8+5 = 133: two varint bytes
  w.buf[w.pos++] = SPAN_FLAGS >> 7;
  w.u32(FLAGS_HAS_IS_REMOTE | (remoteParent ? FLAGS_IS_REMOTE : 0) | 0x01);
  w.end(at);
}

/**
 * A request's spans as ScopeSpans.spans fields, ready to be placed in a body: encoded when the
 * request ends, so its objects die young (kept until their batch leaves, they would reach the
 * old generation: measured as costly as the encoding). Order: decisions, attempts, the request.
 */
export function encodeRequestSpans(t: RequestTrace): Buffer {
  const w = scratch;
  w.pos = 0;
  for (const r of t.routes) {
    const at = spanHead(w, t, r.spanId, t.spanId, 'kvroute.route', INTERNAL, r.at, r.at);
    routedAttributes(r, spanAttribute);
    spanTail(w, at, false);
  }
  for (const a of t.attempts) {
    const at = spanHead(w, t, a.spanId, t.spanId, 'kvroute.upstream', CLIENT, a.start, a.end);
    attemptAttributes(a, spanAttribute);
    if (a.firstByteAt !== 0) event(w, 'first_token', a.firstByteAt);
    if (a.errorType !== '') errorStatus(w, a.errorMessage);
    spanTail(w, at, false);
  }
  const at = spanHead(w, t, t.spanId, t.parent.spanId, t.name, SERVER, t.start, t.endedAt);
  requestAttributes(t, spanAttribute);
  if (t.firstByteAt !== 0) event(w, 'first_token', t.firstByteAt);
  event(w, 'completion', t.endedAt);
  if (t.failed) errorStatus(w, requestStatusMessage(t));
  spanTail(w, at, t.parent.spanId !== '');
  return Buffer.from(w.buf.subarray(0, w.pos));
}

/**
 * One OTLP/HTTP protobuf request body (ExportTraceServiceRequest { resource_spans { resource,
 * scope_spans { scope, spans… } } }) around requests' encoded spans, in a buffer from
 * `allocate(bytes)` (a caller that reuses its buffers passes them here; by default a new one).
 */
export function otlpProtoBody(
  requests: readonly Uint8Array[],
  envelope: OtlpEnvelope,
  allocate: (bytes: number) => Buffer = (bytes) => Buffer.allocUnsafe(bytes),
): Buffer {
  const resource = new ProtoWriter(256);
  const start = resource.begin(RESOURCE_SPANS_RESOURCE);
  attributes(resource, RESOURCE_ATTRIBUTES, envelope.resource);
  resource.end(start);
  const scope = new ProtoWriter(128);
  const scopeStart = scope.begin(SCOPE_SPANS_SCOPE);
  stringField(scope, SCOPE_NAME, envelope.scopeName);
  stringField(scope, SCOPE_VERSION, envelope.scopeVersion);
  scope.end(scopeStart);
  let spans = 0;
  for (const r of requests) spans += r.length;
  // The two outer lengths are known only now: the tags and lengths, then the parts behind them.
  const scopeSpansLength = scope.pos + spans;
  const resourceSpansLength = resource.pos + 1 + varintSize(scopeSpansLength) + scopeSpansLength;
  const out = new ProtoWriter(0);
  out.buf = allocate(1 + varintSize(resourceSpansLength) + resourceSpansLength);
  out.buf[out.pos++] = REQUEST_RESOURCE_SPANS;
  out.varint(resourceSpansLength);
  out.raw(resource.buf.subarray(0, resource.pos));
  out.buf[out.pos++] = RESOURCE_SPANS_SCOPE_SPANS;
  out.varint(scopeSpansLength);
  out.raw(scope.buf.subarray(0, scope.pos));
  for (const r of requests) out.raw(r);
  return out.buf.subarray(0, out.pos);
}

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
