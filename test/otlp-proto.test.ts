/**
 * kvroute's OTLP protobuf encoder (src/proxy/observe/otlp-proto.ts) against the OpenTelemetry
 * SDK's own (ProtobufTraceSerializer of @opentelemetry/otlp-transformer): random requests' traces
 * (made through RequestTrace's API) encoded by both, the SDK's from the same traces as
 * ReadableSpans (readable-spans.ts), decoded field by field and compared. Also: nanosecond times exact past 2^53, long strings truncated, and a collector's
 * partial success read.
 */
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { describe, expect, it } from 'vitest';

import { encodeRequestSpans, otlpProtoBody } from '../src/proxy/observe/otlp-proto.js';
import { rejectedSpans } from '../src/proxy/observe/otlp-proto-read.js';
import { readableSpans } from '../src/proxy/observe/readable-spans.js';
import { RequestTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { decodeTraceRequest } from './helpers/otlp-decode.js';
import { Rng } from './helpers/random.js';
import { byPosition, normal, randomTrace } from './helpers/random-traces.js';

describe('the OTLP protobuf encoder', () => {
  it('encodes what the SDK’s serializer encodes, field by field, over random spans', () => {
    const rng = new Rng(33);
    const resource = { 'service.name': 'kvroute-test', 'service.version': '0.1.0' };
    const scope = { name: 'kvroute', version: '0.1.0' };
    for (let round = 0; round < 40; round++) {
      const traces = Array.from({ length: rng.int(1, 20) }, () => randomTrace(rng));
      // Encoded in chunks of random sizes, as Tracing does (several chunks make one body).
      const chunks: Buffer[] = [];
      for (let i = 0; i < traces.length;) {
        const n = rng.int(1, 8);
        chunks.push(encodeRequestSpans(traces.slice(i, (i += n))));
      }
      const ours = decodeTraceRequest(
        otlpProtoBody(chunks, { resource, scopeName: scope.name, scopeVersion: scope.version }),
      );
      const sdk = decodeTraceRequest(
        ProtobufTraceSerializer.serializeRequest(readableSpans(traces, resourceFromAttributes(resource), scope))!,
      );
      expect(ours.resources).toEqual(sdk.resources);
      expect(ours.scopes).toEqual(sdk.scopes);
      const [mine, theirs] = [byPosition(ours.spans), byPosition(sdk.spans)];
      for (let i = 0; i < mine.length; i++) expect(normal(mine[i]!), `span ${i}`).toEqual(normal(theirs[i]!));
      expect(mine).toHaveLength(theirs.length);
      // The ids kvroute made: 8 bytes, not all zero, each its own.
      for (const s of ours.spans) expect(s.spanId).toMatch(/^(?!0{16})[0-9a-f]{16}$/);
      expect(new Set(ours.spans.map((s) => s.spanId)).size).toBe(ours.spans.length);
    }
  });

  it('writes times exactly past 2^53 ns, and truncates strings past 4,096 characters', () => {
    const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
    t.model('x'.repeat(5000));
    t.end(502, 'error', undefined, 'y'.repeat(10_000));
    const at = 1_796_374_837_667 + 0.125; // ms, exact in a double: 1796374837667125000 ns, above 2^53
    Object.assign(t, { start: at, endedAt: at + 1 });
    const span = decodeTraceRequest(
      otlpProtoBody([encodeRequestSpans([t])], { resource: {}, scopeName: 's', scopeVersion: '' }),
    ).spans.at(-1)!;
    expect(span.startTimeUnixNano).toBe('1796374837667125000');
    expect(span.endTimeUnixNano).toBe('1796374837668125000');
    expect(span.attributes.find((a) => a.key === 'gen_ai.request.model')!.value.stringValue).toHaveLength(4096);
    expect(span.status).toEqual({ code: 2, message: 'y'.repeat(4096) });
  });

  it('writes a span longer than 16,383 bytes (a three-byte length) between two short ones', () => {
    const traces = ['a', '€'.repeat(5000), 'b'].map((model) => {
      const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
      t.model(model);
      t.end(502, 'error', undefined, model);
      return t;
    });
    const chunk = encodeRequestSpans(traces);
    expect(chunk.length).toBeGreaterThan(2 * 3 * 4096);
    const spans = decodeTraceRequest(otlpProtoBody([chunk], { resource: {}, scopeName: 's', scopeVersion: '' })).spans;
    const models = spans.map((s) => s.attributes.find((a) => a.key === 'gen_ai.request.model')!.value.stringValue);
    expect(models).toEqual(['a', '€'.repeat(4096), 'b']);
    expect(spans.map((s) => s.status?.message)).toEqual(['a', '€'.repeat(4096), 'b']);
  });

  it("reads a collector's partial success, and nothing from an empty answer", () => {
    // ExportTraceServiceResponse { partial_success (1) { rejected_spans (1): 3, error_message (2): "full" } }
    const body = Buffer.from([0x0a, 0x08, 0x08, 0x03, 0x12, 0x04, ...Buffer.from('full')]);
    expect(rejectedSpans(body)).toEqual({ rejected: 3, message: 'full' });
    expect(rejectedSpans(new Uint8Array())).toBeUndefined();
    expect(() => rejectedSpans(Buffer.from([0x0a, 0x85]))).toThrow(/truncated/);
  });
});
