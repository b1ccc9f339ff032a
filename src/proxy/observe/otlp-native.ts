/**
 * Requests' spans encoded by the addon (native/otlp/span-ops.h): the same bytes as otlp-proto.ts's
 * encodeRequestSpansInto, at a fraction of its cost on the proxy's path (bench/RESULTS.md,
 * "tracing": in the server, the TypeScript encoder took ~2.5 µs per request).
 *
 * What a span holds is still decided here, in TypeScript: each request becomes a stream of ops
 * (begin a span, its times, a block of bytes, a number attribute, an event, end the span) that
 * walks the same span-attributes.ts functions as the TypeScript encoder, and every string goes as a
 * block the TypeScript encoder's own caches made (a name, a string attribute's whole field, an
 * instance's or a route's attributes), kept in the addon under a small id. The addon knows only the
 * protobuf wire format. test/otlp-native.test.ts holds the two encoders to the same bytes.
 *
 * A request's ops are made when it is added (at its end, its records still in the CPU's caches:
 * read 64 requests later they are not, and that reading was most of the encoder's cost in the
 * server); the addon writes them all at the next flush. Requests with a status message (a failure)
 * or a client's `tracestate` carry strings of their own and go to the TypeScript encoder, written
 * in their turn between the others. Without the addon (KVROUTE_NATIVE=0, or it does not load),
 * every request does.
 *
 * Hazard: block ids stay valid only until the blocks are forgotten, which happens only at the end of
 * a flush, with no op pending, so an op never names a forgotten block.
 */
import { loadNative, nativeDisabledByEnv, type NativeOtlpSpanWriter } from '../../core/native.js';
import {
  CLIENT,
  COMPLETION,
  encodeRequestSpansInto,
  FIRST_TOKEN,
  instanceBlock,
  INTERNAL,
  keyName,
  ROUTE_NAME,
  routeFields,
  SERVER,
  stringAttributeBytes,
  UPSTREAM_NAME,
} from './otlp-proto.js';
import { hexInto, type ProtoWriter } from './proto-writer.js';
import type { RequestTrace } from './request-trace.js';
import { attemptOwnAttributes, requestOwnAttributes, routedAttributes, type Visit } from './span-attributes.js';
import { randomSpanIdInto } from './trace-context.js';

// The ops (native/otlp/span-ops.h) and the doubles each takes after its code.
const BEGIN = 1; // traceIdAt spanIdAt parentAt (-1: none) nameBlock kind
const TIMES = 2; // startMs endMs
const BLOCK = 3; // block
const NUMBER = 4; // keyBlock value
const EVENT = 5; // nameBlock atMs
const END = 6; // remoteParent (0 or 1)

/**
 * Blocks kept before all are forgotten at the end of a flush; past HARD_MAX_BLOCKS (a caller that
 * adds without flushing) requests go to TypeScript until then. The addon keeps up to 65,536.
 */
const MAX_BLOCKS = 16_384;
const HARD_MAX_BLOCKS = 60_000;
/** The most ops and id bytes one span takes: begin, times, ~12 attributes, two events, end. */
const SPAN_OPS = 64;
const SPAN_IDS = 8;

/** Whether the addon can encode `t`'s spans: none carries a string of its own. */
const encodableNatively = (t: RequestTrace): boolean =>
  !t.failed && t.parent.traceState === '' && t.attempts.every((a) => a.errorType === '');

export class NativeSpanEncoder implements SpansEncoder {
  private ops = new Float64Array(4096);
  private opCount = 0;
  private ids = new Uint8Array(1024);
  private idBytes = 0;
  /**
   * The requests added, in order, and where each one's ops end (-1: TypeScript writes it). The
   * records are kept for TypeScript to encode if the addon refuses their ops.
   */
  private readonly traces: RequestTrace[] = [];
  private readonly opEnds: number[] = [];
  /** Blocks kept in the addon: ids 0 to blocks − 1. */
  private blocks = 0;
  /**
   * The ids of the blocks requests name (each kept once: a block is made only when its id is
   * missing here, so no buffer is kept twice): per attribute key
   * (by AttributeKey.index), its name's id and its string values' ids; per instance, its
   * attributes' id; per method and route, the name's and the attributes' ids; the fixed names'.
   * All forgotten with the blocks (forget()).
   */
  private keyIds: number[] = [];
  private valueIds: Map<string, number>[] = [];
  private instanceIds = new Map<string, number>();
  private routeIds = new Map<string, Map<string, { name: number; attributes: number }>>();
  private fixed = { route: -1, upstream: -1, firstToken: -1, completion: -1 };
  private warned = false;

  constructor(
    private readonly writer: NativeOtlpSpanWriter,
    private readonly warn: (line: string) => void,
  ) {
    this.forget();
  }

  /** The visit that turns a span's attributes into ops. */
  private readonly attribute: Visit = (key, value) => {
    if (typeof value === 'string') {
      const values = (this.valueIds[key.index] ??= new Map());
      let id = values.get(value);
      if (id === undefined) values.set(value, (id = this.blockId(stringAttributeBytes(key, value))));
      this.op2(BLOCK, id);
    } else this.op3(NUMBER, (this.keyIds[key.index] ??= this.blockId(keyName(key))), value);
  };

  /** Forgets every block, here and in the addon (no op may be pending). */
  private forget(): void {
    this.blocks = 0;
    this.writer.clear();
    this.keyIds = [];
    this.valueIds = [];
    this.instanceIds.clear();
    this.routeIds.clear();
    this.fixed = {
      route: this.blockId(ROUTE_NAME),
      upstream: this.blockId(UPSTREAM_NAME),
      firstToken: this.blockId(FIRST_TOKEN),
      completion: this.blockId(COMPLETION),
    };
  }

  /** Requests added and not yet written. */
  get pending(): number {
    return this.traces.length;
  }

  add(t: RequestTrace): void {
    if (!encodableNatively(t) || this.blocks >= HARD_MAX_BLOCKS) {
      this.traces.push(t);
      this.opEnds.push(-1); // written by TypeScript at the flush
      return;
    }
    const spans = t.routes.length + t.attempts.length + 1;
    this.reserve(spans * SPAN_OPS, 16 + spans * SPAN_IDS);
    this.request(t);
    this.traces.push(t);
    this.opEnds.push(this.opCount);
  }

  flushInto(w: ProtoWriter): void {
    const traces = this.traces;
    let opStart = 0;
    for (let i = 0; i < traces.length;) {
      if (this.opEnds[i]! < 0) {
        encodeRequestSpansInto([traces[i]!], w);
        i++;
        continue;
      }
      let last = i;
      while (last + 1 < traces.length && this.opEnds[last + 1]! >= 0) last++;
      const opEnd = this.opEnds[last]!;
      this.write(opStart, opEnd, traces.slice(i, last + 1), w);
      opStart = opEnd;
      i = last + 1;
    }
    this.traces.length = 0;
    this.opEnds.length = 0;
    this.opCount = 0;
    this.idBytes = 0;
    if (this.blocks > MAX_BLOCKS) this.forget();
  }

  /** One request's ops: its decisions, its attempts, then the request (encodeRequest's order). */
  private request(t: RequestTrace): void {
    const trace = this.idBytes;
    this.idBytes += hexInto(this.ids, trace, t.parent.traceId);
    const requestSpan = this.newSpanId();
    for (const r of t.routes) {
      this.begin(trace, this.newSpanId(), requestSpan, this.fixed.route, INTERNAL);
      this.op3(TIMES, r.at, r.at);
      routedAttributes(r, this.attribute);
      this.op2(END, 0);
    }
    for (const a of t.attempts) {
      const span = this.idBytes;
      this.idBytes += hexInto(this.ids, span, a.spanId);
      this.begin(trace, span, requestSpan, this.fixed.upstream, CLIENT);
      this.op3(TIMES, a.start, a.end);
      let instance = this.instanceIds.get(a.instance);
      if (instance === undefined)
        this.instanceIds.set(a.instance, (instance = this.blockId(instanceBlock(a.instance))));
      this.op2(BLOCK, instance);
      attemptOwnAttributes(a, this.attribute);
      if (a.firstByteAt !== 0) this.op3(EVENT, this.fixed.firstToken, a.firstByteAt);
      this.op2(END, 0);
    }
    let parent = -1;
    if (t.parent.spanId !== '') {
      parent = this.idBytes;
      this.idBytes += hexInto(this.ids, parent, t.parent.spanId);
    }
    const route = this.route(t);
    this.begin(trace, requestSpan, parent, route.name, SERVER);
    this.op3(TIMES, t.start, t.endedAt);
    this.op2(BLOCK, route.attributes);
    requestOwnAttributes(t, this.attribute);
    if (t.firstByteAt !== 0) this.op3(EVENT, this.fixed.firstToken, t.firstByteAt);
    this.op3(EVENT, this.fixed.completion, t.endedAt);
    this.op2(END, parent < 0 ? 0 : 1);
  }

  /** Writes ops[opStart, opEnd), the spans of `traces`, at `w.pos`. */
  private write(opStart: number, opEnd: number, traces: readonly RequestTrace[], w: ProtoWriter): void {
    try {
      const ops = this.ops.subarray(opStart, opEnd);
      for (;;) {
        const end = this.writer.write(ops, ops.length, this.ids, w.buf, w.pos);
        if (end >= 0) {
          w.pos = end;
          return;
        }
        w.ensure(w.buf.length - w.pos + 1); // no room: the buffer doubles, and the spans are written again
      }
    } catch (error) {
      // A refused op is kvroute's bug, not the requests': their spans still go out, encoded in
      // TypeScript, and it is said once (a bug repeats on every chunk).
      if (!this.warned)
        this.warn(
          `kvroute proxy: tracing: the addon refused spans (${(error as Error).message}); encoded in TypeScript`,
        );
      this.warned = true;
      encodeRequestSpansInto(traces, w);
    }
  }

  /** The ids of a request span's name and its route's attributes (routeFields' blocks). */
  private route(t: RequestTrace): { name: number; attributes: number } {
    let byRoute = this.routeIds.get(t.method);
    if (byRoute === undefined) this.routeIds.set(t.method, (byRoute = new Map()));
    let ids = byRoute.get(t.route);
    if (ids === undefined) {
      const fields = routeFields(t);
      byRoute.set(t.route, (ids = { name: this.blockId(fields.name), attributes: this.blockId(fields.attributes) }));
    }
    return ids;
  }

  private begin(trace: number, span: number, parent: number, name: number, kind: number): void {
    const ops = this.ops;
    let n = this.opCount;
    ops[n++] = BEGIN;
    ops[n++] = trace;
    ops[n++] = span;
    ops[n++] = parent;
    ops[n++] = name;
    ops[n++] = kind;
    this.opCount = n;
  }

  private op2(code: number, a: number): void {
    this.ops[this.opCount++] = code;
    this.ops[this.opCount++] = a;
  }

  private op3(code: number, a: number, b: number): void {
    this.ops[this.opCount++] = code;
    this.ops[this.opCount++] = a;
    this.ops[this.opCount++] = b;
  }

  private newSpanId(): number {
    const at = this.idBytes;
    randomSpanIdInto(this.ids, at);
    this.idBytes += 8;
    return at;
  }

  /** Keeps `bytes` in the addon as a new block: its id. */
  private blockId(bytes: Uint8Array): number {
    this.writer.block(this.blocks, bytes);
    return this.blocks++;
  }

  /** Room for `ops` more ops and `ids` more id bytes: the arrays grow (their contents kept). */
  private reserve(ops: number, ids: number): void {
    if (this.opCount + ops > this.ops.length) {
      const grown = new Float64Array(Math.max(2 * this.ops.length, this.opCount + ops));
      grown.set(this.ops.subarray(0, this.opCount));
      this.ops = grown;
    }
    if (this.idBytes + ids > this.ids.length) {
      const grown = new Uint8Array(Math.max(2 * this.ids.length, this.idBytes + ids));
      grown.set(this.ids.subarray(0, this.idBytes));
      this.ids = grown;
    }
  }
}

/**
 * Requests' spans, written as encodeRequestSpansInto writes them: add() each request as it ends,
 * flushInto() writes those added, in their order, at `w.pos`.
 */
export interface SpansEncoder {
  add(trace: RequestTrace): void;
  /** Requests added and not yet written. */
  readonly pending: number;
  flushInto(w: ProtoWriter): void;
}

/** The TypeScript encoder, as a SpansEncoder: requests wait as they are, then are encoded together. */
class TypeScriptSpansEncoder implements SpansEncoder {
  private readonly traces: RequestTrace[] = [];

  get pending(): number {
    return this.traces.length;
  }

  add(trace: RequestTrace): void {
    this.traces.push(trace);
  }

  flushInto(w: ProtoWriter): void {
    encodeRequestSpansInto(this.traces, w);
    this.traces.length = 0;
  }
}

/**
 * The addon's encoder when it loads (and KVROUTE_NATIVE is not 0), else the TypeScript one.
 * `warn` hears of spans the addon refused (then encoded in TypeScript).
 */
export function spansEncoder(warn: (line: string) => void, native = !nativeDisabledByEnv()): SpansEncoder {
  if (native) {
    try {
      return new NativeSpanEncoder(new (loadNative().OtlpSpanWriter)(), warn);
    } catch {
      // No addon (or one built before it had the encoder): the TypeScript encoder does it all.
    }
  }
  return new TypeScriptSpansEncoder();
}
