/**
 * The addon's span encoder (src/proxy/observe/otlp-native.ts over native/otlp/span-ops.h) against
 * the TypeScript one (otlp-proto.ts, itself held to the SDK's serializer by otlp-proto.test.ts):
 * random requests, plain ones (which the addon writes) and failed ones (which it hands back to
 * TypeScript) mixed, encoded by both into bodies, decoded and compared span by span. And the
 * addon's own refusals: a bad op names its index and what is wrong, a full buffer is not a failure.
 */
import { describe, expect, it } from 'vitest';

import { loadNative } from '../src/core/native.js';
import { NativeSpanEncoder, spansEncoder, type SpansEncoder } from '../src/proxy/observe/otlp-native.js';
import { otlpProtoBody } from '../src/proxy/observe/otlp-proto.js';
import { ProtoWriter } from '../src/proxy/observe/proto-writer.js';
import { RequestTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { decodeTraceRequest } from './helpers/otlp-decode.js';
import { Rng } from './helpers/random.js';
import { byPosition, plainTrace, randomTrace } from './helpers/random-traces.js';

const envelope = { resource: { 'service.name': 'kvroute-test' }, scopeName: 'kvroute', scopeVersion: '0.1.0' };

/** Traces' spans encoded by `encoder`, flushed after chunks of `sizes`, as one body's decoded spans. */
function encoded(encoder: SpansEncoder, traces: RequestTrace[], sizes: number[]) {
  // A small first buffer: the addon meets a full buffer and the writer grows.
  const w = new ProtoWriter(64);
  for (let i = 0, c = 0; i < traces.length; c++) {
    for (const t of traces.slice(i, (i += sizes[c % sizes.length]!))) encoder.add(t);
    expect(encoder.pending).toBeGreaterThan(0);
    encoder.flushInto(w);
    expect(encoder.pending).toBe(0);
  }
  return decodeTraceRequest(otlpProtoBody([w.buf.subarray(0, w.pos)], envelope)).spans;
}

describe('the addon’s span encoder', () => {
  it('writes what the TypeScript encoder writes, span by span, over random requests', () => {
    const warnings: string[] = [];
    const native = spansEncoder((line) => warnings.push(line), true);
    const typescript = spansEncoder(() => {}, false);
    expect(native.constructor.name, 'the addon’s encoder (not the TypeScript fallback)').toBe('NativeSpanEncoder');
    const rng = new Rng(3301);
    for (let round = 0; round < 60; round++) {
      const traces = Array.from({ length: rng.int(1, 40) }, () =>
        rng.chance(0.8) ? plainTrace(rng) : randomTrace(rng),
      );
      const sizes = Array.from({ length: 4 }, () => rng.int(1, 12));
      const mine = byPosition(encoded(native, traces, sizes));
      const theirs = byPosition(encoded(typescript, traces, sizes));
      for (let i = 0; i < theirs.length; i++) expect(mine[i], `round ${round}, span ${i}`).toEqual(theirs[i]);
      expect(mine).toHaveLength(theirs.length);
      // The ids the addon wrote for decisions and requests: 8 bytes, not all zero, each its own.
      const ids = encoded(native, traces, sizes).map((s) => s.spanId);
      for (const id of ids) expect(id).toMatch(/^(?!0{16})[0-9a-f]{16}$/);
      expect(new Set(ids).size).toBe(ids.length);
    }
    expect(warnings).toEqual([]);
  });

  it('keeps encoding past its block table’s bound (blocks forgotten between requests)', () => {
    const native = spansEncoder(() => {}, true);
    // 20,000 distinct models: more blocks than the table keeps, so it is cleared on the way.
    const traces = Array.from({ length: 20_000 }, (_, i) => {
      const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
      t.model(`model-${i}`);
      t.end(200, 'success', undefined, undefined);
      return t;
    });
    const spans = encoded(native, traces, [64]);
    const models = spans.flatMap((s) => s.attributes.filter((a) => a.key === 'gen_ai.request.model'));
    expect(models.map((a) => a.value.stringValue)).toEqual(traces.map((t) => t.requestModel));
  });

  it('encodes in TypeScript what the addon refuses, and says so', () => {
    const real = new (loadNative().OtlpSpanWriter)();
    const refusing = {
      block: (id: number, bytes: Uint8Array) => real.block(id, bytes),
      clear: () => real.clear(),
      write: () => {
        throw new RangeError('ops[0]: unknown op');
      },
      writeRequests: () => {
        throw new RangeError('rows[0]: the request’s row is cut short');
      },
    };
    const warnings: string[] = [];
    const rng = new Rng(11);
    const traces = Array.from({ length: 30 }, () => plainTrace(rng));
    const mine = byPosition(encoded(new NativeSpanEncoder(refusing, (line) => warnings.push(line)), traces, [7]));
    expect(mine).toEqual(
      byPosition(
        encoded(
          spansEncoder(() => {}, false),
          traces,
          [7],
        ),
      ),
    );
    expect(warnings[0]).toMatch(
      /the addon refused spans \(rows\[0\]: the request’s row is cut short\); encoded in TypeScript/,
    );
    expect(warnings, 'said once, not per chunk').toHaveLength(1);
  });

  it('refuses a bad op by its index, and answers -1 when the spans do not fit', () => {
    const writer = new (loadNative().OtlpSpanWriter)();
    const ids = new Uint8Array(24).fill(1);
    const out = new Uint8Array(4096);
    writer.block(0, Uint8Array.from([0x2a, 1, 0x61])); // a name field: "a"
    const ops = (...xs: number[]) => Float64Array.from(xs);
    const span = [1, 0, 16, -1, 0, 1, 2, 1, 2, 6, 0]; // begin, times, end
    expect(writer.write(ops(...span), span.length, ids, out, 0)).toBeGreaterThan(30);
    expect(writer.write(ops(...span), span.length, ids, new Uint8Array(20), 0)).toBe(-1);
    const refused = (xs: number[], pattern: RegExp) =>
      expect(() => writer.write(ops(...xs), xs.length, ids, out, 0)).toThrow(pattern);
    refused([9], /ops\[0\]: unknown op/);
    refused([...span, 3, 7], /ops\[11\]: outside a span/);
    refused([1, 0, 16, -1, 5, 1, 6, 0], /ops\[0\]: unknown name block/);
    refused([1, 0, 20, -1, 0, 1, 6, 0], /ops\[0\]: id offset out of range/);
    refused([1, 0, 16, -1, 0, 1, 2, Number.NaN, 1, 6, 0], /ops\[6\]: times must be/);
    refused([1, 0, 16, -1, 0, 1], /ops\[6\]: the last span does not end/);
    refused([1, 0, 16, -1, 0], /ops\[0\]: its arguments run past the end/);
    expect(() => writer.block(1, new Uint8Array(0))).toThrow(/bytes must be 1 to 65536 bytes long, got 0/);
    expect(() => writer.block(70_000, Uint8Array.of(1))).toThrow(/id must be between/);
    expect(() => writer.write(ops(...span), span.length + 1, ids, out, 0)).toThrow(/opCount must be between/);
  });

  it('refuses a bad row by where it is, and answers -1 when the spans do not fit', () => {
    const writer = new (loadNative().OtlpSpanWriter)();
    const ids = new Uint8Array(32).fill(1);
    const out = new Uint8Array(4096);
    writer.block(0, Uint8Array.from([0x2a, 1, 0x61])); // a name field: "a"
    writer.block(1, Uint8Array.from([0x4a, 0])); // an empty attribute field
    const layout = new Float64Array(11); // every name and key: block 0
    // traceIdAt parentAt start end firstByteAt name route model status outcome hasUsage input cached routes attempts
    const request = [0, -1, 1, 2, 0, 0, 1, -1, 200, 1, 0, 0, 0, 0, 0];
    const write = (xs: number[], bytes = out, at = 0) =>
      writer.writeRequests(Float64Array.from(xs), xs.length, layout, ids, ids.length, bytes, at);
    expect(write(request)).toBeGreaterThan(40);
    expect(write([...request, ...request])).toBeGreaterThan(2 * 40);
    expect(write(request, new Uint8Array(20))).toBe(-1);
    const refused = (xs: number[], pattern: RegExp) => expect(() => write(xs)).toThrow(pattern);
    refused(request.slice(0, 14), /rows\[0\]: the request's row is cut short/);
    refused([...request.slice(0, 13), 1, 0], /rows\[0\]: the request's row is cut short/); // a decision promised
    refused([...request.slice(0, 13), 1.5, 0], /rows\[13\]: decisions must be a whole number 0 to 1024/);
    refused([...request.slice(0, 14), -1], /rows\[14\]: attempts must be/);
    refused([...request.slice(0, 10), 2, ...request.slice(11)], /rows\[10\]: a flag must be 0 or 1/);
    const decision = [5, 1, 1, 0, 0, 1, 1, 3, 0]; // hasTtft 3
    refused([...request.slice(0, 13), 1, 0, ...decision], /rows\[22\]: a flag must be 0 or 1/);
    // Blocks, ids and times are checked as the spans are written, and named by their request.
    refused([...request, ...request.slice(0, 6), 99, ...request.slice(7)], /the request at rows\[15\]: unknown block/);
    refused([28, ...request.slice(1)], /the request at rows\[0\]: id offset out of range/);
    refused([0, -1, -5, ...request.slice(3)], /the request at rows\[0\]: times must be 0 to 10\^15 ms/);
    expect(() => writer.writeRequests(new Float64Array(15), 15, new Float64Array(3), ids, 0, out, 0)).toThrow(
      /layout must hold 11 block ids, got 3/,
    );
    expect(() => writer.writeRequests(new Float64Array(15), 15, layout, ids, 33, out, 0)).toThrow(
      /idBytes must be between/,
    );
    expect(() => writer.writeRequests(new Float64Array(15), 16, layout, ids, 0, out, 0)).toThrow(
      /rowCount must be between/,
    );
  });
});
