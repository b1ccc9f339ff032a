/**
 * kvroute's OTLP protobuf encoder (src/proxy/observe/otlp-proto.ts) against the OpenTelemetry
 * SDK's own (ProtobufTraceSerializer of @opentelemetry/otlp-transformer): random requests' spans
 * encoded by both, the SDK's from the same records as ReadableSpans, decoded field by field and
 * compared. Also: nanosecond times exact past 2^53, long strings truncated, and a collector's
 * partial success read.
 */
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { describe, expect, it } from 'vitest';

import { otlpProtoBody, rejectedSpans } from '../src/proxy/observe/otlp-proto.js';
import { readableSpans } from '../src/proxy/observe/readable-spans.js';
import type { FinishedTrace, SpanRecord } from '../src/proxy/observe/request-trace.js';
import { decodeTraceRequest, type DecodedSpan } from './helpers/otlp-decode.js';
import { Rng } from './helpers/random.js';

const hexOf = (rng: Rng, bytes: number): string =>
  Array.from({ length: bytes }, () => rng.int(0, 255).toString(16).padStart(2, '0')).join('');

const WORDS = [
  'http://10.0.0.1:8000',
  'cache_hit',
  'least_loaded',
  'Qwen/Qwen3-8B',
  'text',
  'naïve ✓ 模型',
  '',
  'a"b\\c\n',
];

function randomTrace(rng: Rng, start: number): FinishedTrace {
  const parentSpanId = rng.chance(0.5) ? hexOf(rng, 8) : '';
  const parent = {
    traceId: hexOf(rng, 16),
    spanId: parentSpanId,
    sampled: true,
    traceState: rng.chance(0.3) ? 'vendor=abc,other=x1' : '',
  };
  const rootId = hexOf(rng, 8);
  const spans: SpanRecord[] = [];
  const count = rng.int(0, 3);
  for (let i = 0; i <= count; i++) {
    const isRoot = i === count;
    const begin = start + rng.next() * 10_000;
    const attributes: Record<string, string | number> = {};
    for (let a = rng.int(0, 8); a > 0; a--) {
      const key = `k.${rng.pick(['instance', 'reason', 'n', 'x', 'ttft_ms', 'port'])}${a}`;
      const kind = rng.int(0, 3);
      attributes[key] =
        kind === 0
          ? rng.pick(WORDS)
          : kind === 1
            ? rng.int(0, 2 ** 31)
            : kind === 2
              ? Number.MAX_SAFE_INTEGER - rng.int(0, 1000)
              : Math.round(rng.next() * 1e6) / 1000;
    }
    const failed = rng.chance(0.3); // a message only with ERROR, as RequestTrace records
    spans.push({
      spanId: isRoot ? rootId : hexOf(rng, 8),
      parentSpanId: isRoot ? parentSpanId : rootId,
      name: isRoot
        ? `POST /v1/${rng.pick(['chat/completions', 'messages'])}`
        : rng.pick(['kvroute.route', 'kvroute.upstream']),
      kind: isRoot ? 1 : rng.pick([0, 2]),
      start: begin,
      end: begin + rng.next() * 5_000,
      attributes,
      events: Array.from({ length: rng.int(0, 2) }, (_, k) => ({
        name: k ? 'completion' : 'first_token',
        at: begin + rng.next() * 100,
      })),
      status: failed ? 2 : 0,
      statusMessage: failed && rng.chance(0.7) ? rng.pick(WORDS) : '',
    });
  }
  return { parent, spans };
}

/** A decoded span with the SDK's defaults made explicit (it writes an UNSET status, kvroute omits it). */
const normal = (s: DecodedSpan): DecodedSpan => ({ ...s, status: s.status ?? { code: 0, message: '' } });

describe('the OTLP protobuf encoder', () => {
  it('encodes what the SDK’s serializer encodes, field by field, over random spans', () => {
    const rng = new Rng(33);
    const resource = { 'service.name': 'kvroute-test', 'service.version': '0.1.0' };
    const scope = { name: 'kvroute', version: '0.1.0' };
    for (let round = 0; round < 40; round++) {
      const traces = Array.from({ length: rng.int(1, 20) }, () => randomTrace(rng, 1.7e12 + rng.next() * 1e11));
      const ours = decodeTraceRequest(
        otlpProtoBody(traces, { resource, scopeName: scope.name, scopeVersion: scope.version }),
      );
      const sdk = decodeTraceRequest(
        ProtobufTraceSerializer.serializeRequest(readableSpans(traces, resourceFromAttributes(resource), scope))!,
      );
      expect(ours.resources).toEqual(sdk.resources);
      expect(ours.scopes).toEqual(sdk.scopes);
      for (let i = 0; i < ours.spans.length; i++)
        expect(normal(ours.spans[i]!), `span ${i}`).toEqual(normal(sdk.spans[i]!));
      expect(ours.spans).toHaveLength(sdk.spans.length);
    }
  });

  it('writes times exactly past 2^53 ns, and truncates strings past 4,096 characters', () => {
    const at = 1_796_374_837_667 + 0.125; // ms, exact in a double: 1796374837667125000 ns, above 2^53
    const trace: FinishedTrace = {
      parent: { traceId: 'ab'.repeat(16), spanId: '', sampled: true, traceState: '' },
      spans: [
        {
          spanId: 'cd'.repeat(8),
          parentSpanId: '',
          name: 'n',
          kind: 1,
          start: at,
          end: at + 1,
          attributes: { long: 'x'.repeat(5000) },
          events: [],
          status: 2,
          statusMessage: 'y'.repeat(10_000),
        },
      ],
    };
    const [span] = decodeTraceRequest(otlpProtoBody([trace], { resource: {}, scopeName: 's', scopeVersion: '' })).spans;
    const nanos = (ms: number) => BigInt(Math.floor(ms)) * 1_000_000n + BigInt(Math.round((ms - Math.floor(ms)) * 1e6));
    expect(span!.startTimeUnixNano).toBe(nanos(at).toString());
    expect(span!.endTimeUnixNano).toBe(nanos(at + 1).toString());
    expect(BigInt(span!.startTimeUnixNano)).toBeGreaterThan(2n ** 53n);
    expect(span!.attributes[0]!.value.stringValue).toHaveLength(4096);
    expect(span!.status).toEqual({ code: 2, message: 'y'.repeat(4096) });
  });

  it("reads a collector's partial success, and nothing from an empty answer", () => {
    // ExportTraceServiceResponse { partial_success (1) { rejected_spans (1): 3, error_message (2): "full" } }
    const body = Buffer.from([0x0a, 0x08, 0x08, 0x03, 0x12, 0x04, ...Buffer.from('full')]);
    expect(rejectedSpans(body)).toEqual({ rejected: 3, message: 'full' });
    expect(rejectedSpans(new Uint8Array())).toBeUndefined();
    expect(() => rejectedSpans(Buffer.from([0x0a, 0x85]))).toThrow(/truncated/);
  });
});
