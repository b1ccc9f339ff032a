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
 * an attribute) is shorter than 2^21 bytes: its length's varint has at most three bytes.
 */
import type { RequestTrace } from './request-trace.js';
import { hexInto, ProtoWriter, varintSize } from './proto-writer.js';
import { randomSpanIdInto } from './trace-context.js';
import {
  attemptOwnAttributes,
  attributeKeyCount,
  instanceAttributes,
  requestOwnAttributes,
  requestStatusMessage,
  routeAttributes,
  routedAttributes,
  type AttributeKey,
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

/**
 * A KeyValue field's head: its tag and length, the key, and the tag and length of its AnyValue
 * (`any` bytes long), which the caller writes next (having made room for it).
 */
function keyValueHead(w: ProtoWriter, fieldTag: number, keyBytes: Buffer, any: number): void {
  const content = 1 + keyBytes.length + 1 + varintSize(any) + any;
  w.ensure(1 + varintSize(content) + content);
  w.buf[w.pos++] = fieldTag;
  w.varint(content);
  w.buf[w.pos++] = KEY;
  w.raw(keyBytes);
  w.buf[w.pos++] = VALUE;
  w.varint(any);
}

/** A KeyValue field: the key's length-prefixed name, then a string's or a number's AnyValue. */
function keyValue(w: ProtoWriter, fieldTag: number, keyBytes: Buffer, value: string | number): void {
  if (typeof value === 'string') {
    const valueBytes = lengthPrefixed(value);
    keyValueHead(w, fieldTag, keyBytes, 1 + valueBytes.length);
    w.buf[w.pos++] = STRING_VALUE;
    w.raw(valueBytes);
  } else if (Number.isSafeInteger(value) && value >= 0) {
    keyValueHead(w, fieldTag, keyBytes, 1 + varintSize(value));
    w.buf[w.pos++] = INT_VALUE;
    w.varint(value);
  } else {
    // Doubles (and the negative or huge integers kvroute never records) as double_value.
    keyValueHead(w, fieldTag, keyBytes, 9);
    w.buf[w.pos++] = DOUBLE_VALUE;
    w.buf.writeDoubleLE(value, w.pos);
    w.pos += 8;
  }
}

function attributes(w: ProtoWriter, fieldTag: number, values: Record<string, string | number>): void {
  for (const key in values) keyValue(w, fieldTag, lengthPrefixed(key), values[key]!);
}

/**
 * Per span attribute key (by AttributeKey.index): its length-prefixed name, and the whole
 * `attributes` fields of its string values seen so far (instances, reasons, models repeat).
 */
const keyNames: Buffer[] = [];
const keyStringValues: Map<string, Buffer>[] = Array.from({ length: attributeKeyCount }, () => new Map());
let keyStringValueCount = 0;

export function keyName(key: AttributeKey): Buffer {
  return (keyNames[key.index] ??= lengthPrefixed(key.name));
}

/** A string attribute's whole field, encoded and cached. */
function stringAttributeField(key: AttributeKey, value: string): Buffer {
  const field = new ProtoWriter(64 + 3 * (key.name.length + value.length));
  keyValue(field, SPAN_ATTRIBUTES, keyName(key), value);
  const encoded = Buffer.from(field.buf.subarray(0, field.pos));
  if (keyStringValueCount >= CACHE_MAX) {
    for (const values of keyStringValues) values.clear();
    keyStringValueCount = 0;
  }
  keyStringValues[key.index]!.set(value, encoded);
  keyStringValueCount++;
  return encoded;
}

/** A string attribute's whole `attributes` field (cached): what spanAttribute writes for it. */
export function stringAttributeBytes(key: AttributeKey, value: string): Buffer {
  return keyStringValues[key.index]!.get(value) ?? stringAttributeField(key, value);
}

/** Where encodeRequestSpans encodes before copying out (reused: encoding is synchronous). */
const scratch = new ProtoWriter(1 << 16);
/** Where spanAttribute writes: the writer of the encoding under way, or a block's (attributeBlock). */
let into = scratch;

/**
 * Per key (by AttributeKey.index), then per varint size (1 to 8 bytes): an integer attribute's
 * field up to its value (tag, length, key, AnyValue tag and length, int_value tag), encoded once.
 */
const intHeads: Buffer[][] = Array.from({ length: attributeKeyCount }, () => []);

function intHead(key: AttributeKey, size: number): Buffer {
  const head = new ProtoWriter(64 + 3 * key.name.length);
  keyValueHead(head, SPAN_ATTRIBUTES, keyName(key), 1 + size);
  head.buf[head.pos++] = INT_VALUE;
  return (intHeads[key.index]![size] = Buffer.from(head.buf.subarray(0, head.pos)));
}

/** Per key (by AttributeKey.index): a double attribute's field up to its 8 bytes, encoded once. */
const doubleHeads: Buffer[] = [];

function doubleHead(key: AttributeKey): Buffer {
  const head = new ProtoWriter(64 + 3 * key.name.length);
  keyValueHead(head, SPAN_ATTRIBUTES, keyName(key), 9);
  head.buf[head.pos++] = DOUBLE_VALUE;
  return (doubleHeads[key.index] = Buffer.from(head.buf.subarray(0, head.pos)));
}

/** A span attribute into `into` (the Visit of span-attributes.ts). */
const spanAttribute: Visit = (key, value) => {
  const w = into;
  if (typeof value === 'string') w.raw(stringAttributeBytes(key, value));
  else if (value >= 0 && value <= 0xffffffff && Math.floor(value) === value) {
    const size = varintSize(value);
    const head = intHeads[key.index]![size] ?? intHead(key, size);
    w.ensure(head.length + size);
    w.raw(head);
    w.varint(value);
  } else if (Number.isSafeInteger(value) && value >= 0) keyValue(w, SPAN_ATTRIBUTES, keyName(key), value);
  else {
    // Doubles (and the negative integers kvroute never records): double_value.
    const head = doubleHeads[key.index] ?? doubleHead(key);
    w.ensure(head.length + 8);
    w.raw(head);
    w.buf.writeDoubleLE(value, w.pos);
    w.pos += 8;
  }
};

/** The attributes `write` visits, encoded as one block (attributes fields back to back). */
function attributeBlock(write: (visit: Visit) => void): Buffer {
  const saved = into;
  const block = (into = new ProtoWriter(256));
  try {
    write(spanAttribute);
  } finally {
    into = saved;
  }
  return Buffer.from(block.buf.subarray(0, block.pos));
}

/** Attempts' instanceAttributes, a block per instance. */
const instanceBlocks = new Map<string, Buffer>();

export function instanceBlock(instance: string): Buffer {
  let block = instanceBlocks.get(instance);
  if (block === undefined) {
    block = attributeBlock((visit) => instanceAttributes(instance, visit));
    if (instanceBlocks.size >= CACHE_MAX) instanceBlocks.clear(); // instances come and go: stay bounded
    instanceBlocks.set(instance, block);
  }
  return block;
}

// OTLP's SpanKind (UNSPECIFIED = 0, INTERNAL = 1, SERVER = 2, CLIENT = 3).
export const INTERNAL = 1;
export const SERVER = 2;
export const CLIENT = 3;

/** A name field's bytes (tag, length, UTF-8), encoded once. */
function nameField(name: string): Buffer {
  const w = new ProtoWriter(16 + 3 * name.length);
  stringField(w, SPAN_NAME, name);
  return Buffer.from(w.buf.subarray(0, w.pos));
}

export const ROUTE_NAME = nameField('kvroute.route');
export const UPSTREAM_NAME = nameField('kvroute.upstream');
/** What a request span's method and route make: its name field, and its routeAttributes as a block. */
interface RouteFields {
  name: Buffer;
  attributes: Buffer;
}

/** By method then route (`POST`, `/v1/chat/completions`). */
const routeFieldsCache = new Map<string, Map<string, RouteFields>>();

export function routeFields(t: RequestTrace): RouteFields {
  let byRoute = routeFieldsCache.get(t.method);
  if (byRoute === undefined) routeFieldsCache.set(t.method, (byRoute = new Map()));
  let fields = byRoute.get(t.route);
  if (fields === undefined) {
    if (byRoute.size >= CACHE_MAX) byRoute.clear();
    fields = {
      name: nameField(t.name),
      attributes: attributeBlock((visit) => routeAttributes(t.method, t.route, visit)),
    };
    byRoute.set(t.route, fields);
  }
  return fields;
}

/**
 * The id of the request span being written: made when its spans are written (only an attempt's
 * id leaves earlier, to the engine), and named by its children as their parent.
 */
const requestSpanId = Buffer.alloc(8);
/** The trace id of the request being written, decoded once for its spans. */
const traceId = Buffer.alloc(16);

/**
 * Starts a span: its trace, its id (`spanId`: an attempt's hex id; a Uint8Array; undefined for a
 * new one) and its parent's, its name and kind; returns where its length goes (ProtoWriter.end).
 */
function spanHead(
  w: ProtoWriter,
  t: RequestTrace,
  spanId: string | Uint8Array | undefined,
  parentSpanId: string | Uint8Array,
  name: Buffer,
  kind: number,
): number {
  const at = w.begin(SCOPE_SPANS_SPANS);
  w.id(SPAN_TRACE_ID, traceId);
  if (typeof spanId === 'string') w.hex(SPAN_SPAN_ID, spanId);
  else w.id(SPAN_SPAN_ID, spanId);
  if (t.parent.traceState !== '') stringField(w, SPAN_TRACE_STATE, t.parent.traceState);
  if (typeof parentSpanId !== 'string') w.id(SPAN_PARENT_SPAN_ID, parentSpanId);
  else if (parentSpanId !== '') w.hex(SPAN_PARENT_SPAN_ID, parentSpanId);
  w.raw(name);
  w.ensure(2);
  w.buf[w.pos++] = SPAN_KIND;
  w.buf[w.pos++] = kind;
  return at;
}

/** A span's start and end times. */
function spanTimes(w: ProtoWriter, start: number, end: number): void {
  w.nanos(SPAN_START, start);
  w.nanos(SPAN_END, end);
}

export const FIRST_TOKEN = lengthPrefixed('first_token');
export const COMPLETION = lengthPrefixed('completion');

/** An event (name: FIRST_TOKEN or COMPLETION) at `at`. */
function event(w: ProtoWriter, bytes: Buffer, at: number): void {
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
 * Requests' spans as ScopeSpans.spans fields, ready to be placed in a body, in a new buffer of
 * their size. Each request's order: decisions, attempts, the request.
 */
export function encodeRequestSpans(traces: readonly RequestTrace[]): Buffer {
  scratch.pos = 0;
  encodeRequestSpansInto(traces, scratch);
  return Buffer.from(scratch.buf.subarray(0, scratch.pos));
}

/** Requests' spans as encodeRequestSpans makes them, written at `w.pos` (`w` grows as needed). */
export function encodeRequestSpansInto(traces: readonly RequestTrace[], w: ProtoWriter): void {
  const saved = into;
  into = w;
  try {
    for (const t of traces) encodeRequest(w, t);
  } finally {
    into = saved;
  }
}

/** One request's spans: its decisions, its attempts, then the request. */
function encodeRequest(w: ProtoWriter, t: RequestTrace): void {
  hexInto(traceId, 0, t.parent.traceId);
  randomSpanIdInto(requestSpanId, 0);
  for (const r of t.routes) {
    const at = spanHead(w, t, undefined, requestSpanId, ROUTE_NAME, INTERNAL);
    spanTimes(w, r.at, r.at);
    routedAttributes(r, spanAttribute);
    spanTail(w, at, false);
  }
  for (const a of t.attempts) {
    const at = spanHead(w, t, a.spanId, requestSpanId, UPSTREAM_NAME, CLIENT);
    spanTimes(w, a.start, a.end);
    w.raw(instanceBlock(a.instance));
    attemptOwnAttributes(a, spanAttribute);
    if (a.firstByteAt !== 0) event(w, FIRST_TOKEN, a.firstByteAt);
    if (a.errorType !== '') errorStatus(w, a.errorMessage);
    spanTail(w, at, false);
  }
  const route = routeFields(t);
  const at = spanHead(w, t, requestSpanId, t.parent.spanId, route.name, SERVER);
  spanTimes(w, t.start, t.endedAt);
  w.raw(route.attributes);
  requestOwnAttributes(t, spanAttribute);
  if (t.firstByteAt !== 0) event(w, FIRST_TOKEN, t.firstByteAt);
  event(w, COMPLETION, t.endedAt);
  if (t.failed) errorStatus(w, requestStatusMessage(t));
  spanTail(w, at, t.parent.spanId !== '');
}

/** The encoded `resource` and `scope` fields of a body's envelope (they never change). */
export interface EnvelopeFields {
  resource: Buffer;
  scope: Buffer;
}

export function envelopeFields(envelope: OtlpEnvelope): EnvelopeFields {
  const resource = new ProtoWriter(256);
  const start = resource.begin(RESOURCE_SPANS_RESOURCE);
  attributes(resource, RESOURCE_ATTRIBUTES, envelope.resource);
  resource.end(start);
  const scope = new ProtoWriter(128);
  const scopeStart = scope.begin(SCOPE_SPANS_SCOPE);
  stringField(scope, SCOPE_NAME, envelope.scopeName);
  stringField(scope, SCOPE_VERSION, envelope.scopeVersion);
  scope.end(scopeStart);
  return { resource: resource.buf.subarray(0, resource.pos), scope: scope.buf.subarray(0, scope.pos) };
}

/** The most bytes bodyPrefix() writes: the envelope's fields, two tags and two lengths. */
export const maxBodyPrefixBytes = (fields: EnvelopeFields): number =>
  fields.resource.length + fields.scope.length + 2 + 2 * 8;

/**
 * A body's bytes before its spans (`spansBytes` of ScopeSpans.spans fields): the outer lengths are
 * known only once the spans are. Written into `out` so that it ends at `end`; returns where it starts.
 */
export function bodyPrefix(fields: EnvelopeFields, spansBytes: number, out: Buffer, end: number): number {
  const scopeSpansLength = fields.scope.length + spansBytes;
  const resourceSpansLength = fields.resource.length + 1 + varintSize(scopeSpansLength) + scopeSpansLength;
  const bytes =
    1 +
    varintSize(resourceSpansLength) +
    fields.resource.length +
    1 +
    varintSize(scopeSpansLength) +
    fields.scope.length;
  const w = new ProtoWriter(0);
  w.buf = out;
  w.pos = end - bytes;
  w.buf[w.pos++] = REQUEST_RESOURCE_SPANS;
  w.varint(resourceSpansLength);
  w.raw(fields.resource);
  w.buf[w.pos++] = RESOURCE_SPANS_SCOPE_SPANS;
  w.varint(scopeSpansLength);
  w.raw(fields.scope);
  return end - bytes;
}

/**
 * One OTLP/HTTP protobuf request body (ExportTraceServiceRequest { resource_spans { resource,
 * scope_spans { scope, spans… } } }) around requests' encoded spans (copied), in a new buffer.
 * The proxy writes its spans straight into their body instead (otlp-body.ts).
 */
export function otlpProtoBody(requests: readonly Uint8Array[], envelope: OtlpEnvelope): Buffer {
  const fields = envelopeFields(envelope);
  let spans = 0;
  for (const r of requests) spans += r.length;
  const room = maxBodyPrefixBytes(fields);
  const out = Buffer.allocUnsafe(room + spans);
  let at = room;
  for (const r of requests) {
    out.set(r, at);
    at += r.length;
  }
  return out.subarray(bodyPrefix(fields, spans, out, room));
}
