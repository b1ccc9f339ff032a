/**
 * Requests' spans encoded by the addon (native/otlp/request-rows.h, span-ops.h): the same bytes as
 * otlp-proto.ts's encodeRequestSpansInto, at a fraction of its cost on the proxy's path
 * (bench/RESULTS.md, "tracing": in the server, the TypeScript encoder took ~2.9 µs per request).
 *
 * Each request becomes, as it ends (its records still in the CPU's caches), one row of numbers in
 * a Float64Array: its times, counts and numbers, and every string as a block id. A block is bytes
 * the TypeScript encoder's own caches made (a string attribute's whole field, an instance's or a
 * route's attributes, a name), kept in the addon under a small id. At the next flush the addon
 * turns 64 requests' rows into their spans: the decisions', the attempts', the request's, with the
 * attributes of span-attributes.ts in its order (request-rows.cc mirrors it; test/otlp-native.test.ts
 * holds the two encoders to the same spans on random requests). The addon also draws the new span
 * ids (the request's and its decisions'); the trace id and the attempts' ids, which left in a
 * `traceparent`, go as bytes.
 *
 * Requests with a status message (a failure) or a client's `tracestate` carry strings of their own
 * and go to the TypeScript encoder, written in their turn between the others. Without the addon
 * (KVROUTE_NATIVE=0, or it does not load), every request does.
 *
 * Hazard: block ids stay valid only until the blocks are forgotten, which happens only at the end of
 * a flush, with no row pending, so a row never names a forgotten block.
 */
import { loadNative, nativeDisabledByEnv, type NativeOtlpSpanWriter } from '../../core/native.js';
import {
  COMPLETION,
  encodeRequestSpansInto,
  FIRST_TOKEN,
  instanceBlock,
  keyName,
  ROUTE_NAME,
  routeFields,
  stringAttributeBytes,
  UPSTREAM_NAME,
} from './otlp-proto.js';
import { hexInto, type ProtoWriter } from './proto-writer.js';
import type { RequestTrace } from './request-trace.js';
import {
  ATTEMPT,
  attributeKeyCount,
  CACHED_TOKENS,
  INPUT_TOKENS,
  INSTANCE,
  KEYS,
  MATCHED_BLOCKS,
  OUTCOME,
  POLICY,
  PREDICTED_CACHED_TOKENS,
  PREDICTED_TTFT_MS,
  REASON,
  REQUEST_MODEL,
  STATUS_CODE,
  type AttributeKey,
} from './span-attributes.js';

// A request's row (request-rows.h: RequestRowField, then RouteRowField per decision and
// AttemptRowField per attempt); the comments name the fields in order.
/** traceIdAt parentAt start end firstByteAt nameBlock routeBlock modelBlock status outcomeBlock hasUsage inputTokens cachedTokens routes attempts */
const ROW_FIELDS = 15;
/** at instanceBlock reasonBlock matchedBlocks predictedCached keysBlock policyBlock hasTtft predictedTtft */
const ROUTE_FIELDS = 9;
/** spanIdAt start end instanceBlock number status firstByteAt */
const ATTEMPT_FIELDS = 7;

/**
 * Blocks kept before all are forgotten at the end of a flush; past HARD_MAX_BLOCKS (a caller that
 * adds without flushing) requests go to TypeScript until then. The addon keeps up to 65,536.
 */
const MAX_BLOCKS = 16_384;
const HARD_MAX_BLOCKS = 60_000;

/** Whether the addon can encode `t`'s spans: none carries a string of its own. */
function encodableNatively(t: RequestTrace): boolean {
  if (t.failed || t.parent.traceState !== '') return false;
  for (const a of t.attempts) if (a.errorType !== '') return false;
  return true;
}

export class NativeSpanEncoder implements SpansEncoder {
  private rows = new Float64Array(4096);
  private rowCount = 0;
  private ids = new Uint8Array(1024);
  private idBytes = 0;
  /** The block ids every row's spans use (request-rows.h: RowLayoutSlot), set by forget(). */
  private layout = new Float64Array(0);
  /**
   * The requests added, in order, and where each one's row ends (-1: TypeScript writes it). The
   * records are kept for TypeScript to encode if the addon refuses their rows.
   */
  private readonly traces: RequestTrace[] = [];
  private readonly rowEnds: number[] = [];
  /** Blocks kept in the addon: ids 0 to blocks − 1. */
  private blocks = 0;
  /**
   * The ids of the blocks rows name (each kept once: a block is made only when its id is missing
   * here): per string attribute's key (by AttributeKey.index) its values' ids, and the last value
   * asked for with its id (a request's model, outcome, reason, keys and policy are mostly the
   * previous one's: one comparison, no lookup); per instance, its attributes' id; per method and
   * route, the name's and the attributes' ids. All forgotten with the blocks (forget()).
   */
  private valueIds: Map<string, number>[] = [];
  private lastValue: (string | undefined)[] = [];
  private lastId: number[] = [];
  private instanceIds = new Map<string, number>();
  private routeIds = new Map<string, Map<string, { name: number; attributes: number }>>();
  private lastRoute: { method: string; route: string; ids: { name: number; attributes: number } } | undefined;
  private warned = false;

  constructor(
    private readonly writer: NativeOtlpSpanWriter,
    private readonly warn: (line: string) => void,
  ) {
    this.forget();
  }

  /** Forgets every block, here and in the addon (no row may be pending). */
  private forget(): void {
    this.blocks = 0;
    this.writer.clear();
    this.valueIds = [];
    this.lastValue = new Array<string | undefined>(attributeKeyCount).fill(undefined);
    this.lastId = new Array<number>(attributeKeyCount).fill(-1);
    this.instanceIds.clear();
    this.routeIds.clear();
    this.lastRoute = undefined;
    // RowLayoutSlot's order.
    this.layout = Float64Array.of(
      this.blockId(ROUTE_NAME),
      this.blockId(UPSTREAM_NAME),
      this.blockId(FIRST_TOKEN),
      this.blockId(COMPLETION),
      this.blockId(keyName(STATUS_CODE)),
      this.blockId(keyName(INPUT_TOKENS)),
      this.blockId(keyName(CACHED_TOKENS)),
      this.blockId(keyName(MATCHED_BLOCKS)),
      this.blockId(keyName(PREDICTED_CACHED_TOKENS)),
      this.blockId(keyName(PREDICTED_TTFT_MS)),
      this.blockId(keyName(ATTEMPT)),
    );
  }

  /** Requests added and not yet written. */
  get pending(): number {
    return this.traces.length;
  }

  add(t: RequestTrace): void {
    if (!encodableNatively(t) || this.blocks >= HARD_MAX_BLOCKS) {
      this.traces.push(t);
      this.rowEnds.push(-1); // written by TypeScript at the flush
      return;
    }
    this.request(t);
    this.traces.push(t);
    this.rowEnds.push(this.rowCount);
  }

  flushInto(w: ProtoWriter): void {
    const traces = this.traces;
    let rowStart = 0;
    for (let i = 0; i < traces.length;) {
      if (this.rowEnds[i]! < 0) {
        encodeRequestSpansInto([traces[i]!], w);
        i++;
        continue;
      }
      let last = i;
      while (last + 1 < traces.length && this.rowEnds[last + 1]! >= 0) last++;
      const rowEnd = this.rowEnds[last]!;
      this.write(rowStart, rowEnd, traces.slice(i, last + 1), w);
      rowStart = rowEnd;
      i = last + 1;
    }
    this.traces.length = 0;
    this.rowEnds.length = 0;
    this.rowCount = 0;
    this.idBytes = 0;
    if (this.blocks > MAX_BLOCKS) this.forget();
  }

  /** One request's row (request-rows.h). */
  private request(t: RequestTrace): void {
    const { routes, attempts } = t;
    this.reserve(
      ROW_FIELDS + routes.length * ROUTE_FIELDS + attempts.length * ATTEMPT_FIELDS,
      24 + 8 * attempts.length,
    );
    const rows = this.rows;
    const ids = this.ids;
    let n = this.rowCount;
    const trace = this.idBytes;
    this.idBytes += hexInto(ids, trace, t.parent.traceId);
    let parent = -1;
    if (t.parent.spanId !== '') {
      parent = this.idBytes;
      this.idBytes += hexInto(ids, parent, t.parent.spanId);
    }
    const route = this.route(t);
    rows[n] = trace;
    rows[n + 1] = parent;
    rows[n + 2] = t.start;
    rows[n + 3] = t.endedAt;
    rows[n + 4] = t.firstByteAt;
    rows[n + 5] = route.name;
    rows[n + 6] = route.attributes;
    rows[n + 7] = t.requestModel === '' ? -1 : this.valueId(REQUEST_MODEL, t.requestModel);
    rows[n + 8] = t.status;
    rows[n + 9] = this.valueId(OUTCOME, t.outcome);
    const usage = t.usage;
    rows[n + 10] = usage === undefined ? 0 : 1;
    rows[n + 11] = usage === undefined ? 0 : usage.prompt_tokens;
    rows[n + 12] = usage === undefined ? 0 : usage.cached_tokens;
    rows[n + 13] = routes.length;
    rows[n + 14] = attempts.length;
    n += ROW_FIELDS;
    for (const r of routes) {
      rows[n] = r.at;
      rows[n + 1] = this.valueId(INSTANCE, r.instance);
      rows[n + 2] = this.valueId(REASON, r.reason);
      rows[n + 3] = r.matchedBlocks;
      rows[n + 4] = r.predictedCachedTokens;
      rows[n + 5] = this.valueId(KEYS, r.keys);
      rows[n + 6] = this.valueId(POLICY, r.policy);
      rows[n + 7] = r.predictedTtftMs === undefined ? 0 : 1;
      rows[n + 8] = r.predictedTtftMs ?? 0;
      n += ROUTE_FIELDS;
    }
    for (const a of attempts) {
      const span = this.idBytes;
      this.idBytes += hexInto(ids, span, a.spanId);
      let instance = this.instanceIds.get(a.instance);
      if (instance === undefined)
        this.instanceIds.set(a.instance, (instance = this.blockId(instanceBlock(a.instance))));
      rows[n] = span;
      rows[n + 1] = a.start;
      rows[n + 2] = a.end;
      rows[n + 3] = instance;
      rows[n + 4] = a.number;
      rows[n + 5] = a.status;
      rows[n + 6] = a.firstByteAt;
      n += ATTEMPT_FIELDS;
    }
    this.rowCount = n;
  }

  /** The id of the block of string attribute `key` = `value`. */
  private valueId(key: AttributeKey, value: string): number {
    const k = key.index;
    if (this.lastValue[k] === value) return this.lastId[k]!;
    const values = (this.valueIds[k] ??= new Map());
    let id = values.get(value);
    if (id === undefined) values.set(value, (id = this.blockId(stringAttributeBytes(key, value))));
    this.lastValue[k] = value;
    this.lastId[k] = id;
    return id;
  }

  /** Writes the rows in rows[rowStart, rowEnd), the spans of `traces`, at `w.pos`. */
  private write(rowStart: number, rowEnd: number, traces: readonly RequestTrace[], w: ProtoWriter): void {
    try {
      const rows = this.rows.subarray(rowStart, rowEnd);
      for (;;) {
        const end = this.writer.writeRequests(rows, rows.length, this.layout, this.ids, this.idBytes, w.buf, w.pos);
        if (end >= 0) {
          w.pos = end;
          return;
        }
        w.ensure(w.buf.length - w.pos + 1); // no room: the buffer doubles, and the spans are written again
      }
    } catch (error) {
      // A refused row is kvroute's bug, not the requests': their spans still go out, encoded in
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
    // The previous request's route, mostly: two string comparisons instead of two lookups (a
    // request's path is a new string, hashed afresh by every Map lookup).
    const last = this.lastRoute;
    if (last !== undefined && last.method === t.method && last.route === t.route) return last.ids;
    const ids = this.routeIdsOf(t);
    this.lastRoute = { method: t.method, route: t.route, ids };
    return ids;
  }

  private routeIdsOf(t: RequestTrace): { name: number; attributes: number } {
    let byRoute = this.routeIds.get(t.method);
    if (byRoute === undefined) this.routeIds.set(t.method, (byRoute = new Map()));
    let ids = byRoute.get(t.route);
    if (ids === undefined) {
      const fields = routeFields(t);
      byRoute.set(t.route, (ids = { name: this.blockId(fields.name), attributes: this.blockId(fields.attributes) }));
    }
    return ids;
  }

  /** Keeps `bytes` in the addon as a new block: its id. */
  private blockId(bytes: Uint8Array): number {
    this.writer.block(this.blocks, bytes);
    return this.blocks++;
  }

  /** Room for `fields` more row fields and `ids` more id bytes: the arrays grow (their contents kept). */
  private reserve(fields: number, ids: number): void {
    if (this.rowCount + fields > this.rows.length) {
      const grown = new Float64Array(Math.max(2 * this.rows.length, this.rowCount + fields));
      grown.set(this.rows.subarray(0, this.rowCount));
      this.rows = grown;
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
