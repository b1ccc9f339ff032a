/**
 * OpenTelemetry tracing end to end: `sim serve` engines behind the proxy, a local OTLP/HTTP
 * receiver in this test, and a header-recording hop in front of each engine. A request that
 * carries W3C trace context yields the span tree docs/tracing.md describes (its root a child of
 * the client's span, the routing decision and the upstream attempt under it, first token and
 * completion marked), and the engine receives the attempt's span as its parent, in the client's
 * trace. With tracing off, the client's headers reach the engine unchanged.
 */
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';

import { SpanKind } from '@opentelemetry/api';
import { ExportResultCode } from '@opentelemetry/core';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { resolveServeConfig } from '../src/cli/serve-config.js';
import { startSimFleet, type SimFleet } from '../src/sim/sim-fleet.js';
import { decodeTraceRequest, type DecodedSpan } from './helpers/otlp-decode.js';
import { MODEL, startProxy } from './helpers/proxy-harness.js';
import { waitFor } from './helpers/wait-for.js';

type OtlpSpan = DecodedSpan;

/** An OTLP/HTTP receiver (protobuf): every span it was sent, with its resource's service name. */
async function otlpReceiver(): Promise<{ url: string; spans: OtlpSpan[]; services: string[]; server: Server }> {
  const spans: OtlpSpan[] = [];
  const services: string[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      expect(req.url).toBe('/v1/traces');
      expect(req.headers['content-type']).toBe('application/x-protobuf');
      const body = decodeTraceRequest(Buffer.concat(chunks));
      for (const attributes of body.resources)
        services.push(String(attributes.find((a) => a.key === 'service.name')?.value.stringValue));
      spans.push(...body.spans);
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, spans, services, server };
}

/** An HTTP hop in front of an engine that keeps every request's headers. */
async function recordingHop(engine: string): Promise<{ url: string; seen: IncomingHttpHeaders[]; server: Server }> {
  const seen: IncomingHttpHeaders[] = [];
  const target = new URL(engine);
  const server = createServer((req, res) => {
    seen.push(req.headers);
    const upstream = request(
      { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode!, answer.headers);
        answer.pipe(res);
      },
    );
    req.pipe(upstream);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen, server };
}

const attr = (span: OtlpSpan, key: string): unknown => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : (value.stringValue ?? Number(value.intValue ?? value.doubleValue));
};

let fleet: SimFleet;
let hops: Array<Awaited<ReturnType<typeof recordingHop>>>;
let receiver: Awaited<ReturnType<typeof otlpReceiver>>;

beforeAll(async () => {
  fleet = await startSimFleet({ instances: 2, port: 0, speed: 50, model: MODEL });
  hops = await Promise.all(fleet.urls.map(recordingHop));
  receiver = await otlpReceiver();
}, 30_000);
afterAll(async () => {
  for (const hop of hops ?? []) hop.server.close();
  receiver?.server.close();
  await fleet?.close();
});

const CLIENT_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CLIENT_SPAN = '00f067aa0ba902b7';

describe('OpenTelemetry tracing', () => {
  it('emits the request, routing and upstream spans in the client’s trace, and the engine continues it', async () => {
    const rig = await startProxy({
      backends: hops.map((h) => h.url),
      tracing: { endpoint: receiver.url, serviceName: 'kvroute-test' },
    });
    const traceparent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
    const stream = await rig.client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'trace me' }], max_tokens: 3, stream: true },
      { headers: { traceparent, tracestate: 'vendor=abc', 'x-session-id': 'traced' } },
    );
    for await (const _ of stream) void _;
    await rig.close(); // flushes the batch
    await waitFor('the spans at the receiver', () => receiver.spans.length >= 3);
    expect(receiver.services).toContain('kvroute-test');
    const byName = (name: string) => receiver.spans.filter((s) => s.name === name);
    const [root] = byName('POST /v1/chat/completions');
    const [routed] = byName('kvroute.route');
    const [upstream] = byName('kvroute.upstream');
    expect(root).toBeDefined();
    // The root continues the client's trace; the other two hang under it.
    expect(root!.traceId).toBe(CLIENT_TRACE);
    expect(root!.parentSpanId).toBe(CLIENT_SPAN);
    expect(root!.kind).toBe(2); // SERVER
    for (const child of [routed!, upstream!]) {
      expect(child.traceId).toBe(CLIENT_TRACE);
      expect(child.parentSpanId).toBe(root!.spanId);
    }
    expect(upstream!.kind).toBe(3); // CLIENT
    expect(attr(root!, 'gen_ai.request.model')).toBe(MODEL);
    expect(attr(root!, 'http.response.status_code')).toBe(200);
    expect(root!.events?.map((e) => e.name)).toEqual(['first_token', 'completion']);
    const instance = attr(routed!, 'kvroute.instance') as string;
    expect(hops.map((h) => h.url)).toContain(instance);
    expect(attr(routed!, 'kvroute.reason')).toEqual(expect.any(String));
    expect(attr(routed!, 'kvroute.matched_blocks')).toBe(0);
    expect(attr(routed!, 'kvroute.predicted_cached_tokens')).toBe(0);
    expect(attr(routed!, 'kvroute.predicted_ttft_ms')).toBeGreaterThan(0);
    expect(attr(routed!, 'kvroute.keys')).toBe('text');
    expect(attr(upstream!, 'kvroute.instance')).toBe(instance);
    expect(attr(upstream!, 'kvroute.attempt')).toBe(1);
    expect(upstream!.events?.map((e) => e.name)).toEqual(['first_token']);
    // The engine got the attempt's span as its parent, in the client's trace, and the tracestate.
    const hop = hops.find((h) => h.url === instance)!;
    const sent = hop.seen.at(-1)!;
    expect(sent.traceparent).toBe(`00-${CLIENT_TRACE}-${upstream!.spanId}-01`);
    expect(sent.tracestate).toBe('vendor=abc');
  });

  it("without tracing, the client's trace headers reach the engine unchanged", async () => {
    const rig = await startProxy({ backends: hops.map((h) => h.url) });
    try {
      const traceparent = `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01`;
      const { response } = await rig.client.chat.completions
        .create(
          { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
          { headers: { traceparent } },
        )
        .withResponse();
      const hop = hops.find((h) => h.url === response.headers.get('x-kvroute-instance'))!;
      expect(hop.seen.at(-1)!.traceparent).toBe(traceparent);
    } finally {
      await rig.close();
    }
  });

  it('a malformed traceparent starts a new trace; the engine still gets a valid one', async () => {
    const before = receiver.spans.length;
    const rig = await startProxy({ backends: hops.map((h) => h.url), tracing: { endpoint: receiver.url } });
    const { response } = await rig.client.chat.completions
      .create(
        { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
        { headers: { traceparent: 'not-a-trace' } },
      )
      .withResponse();
    await rig.close();
    await waitFor('the spans', () => receiver.spans.length >= before + 3);
    const root = receiver.spans.slice(before).find((s) => s.name === 'POST /v1/chat/completions')!;
    expect(root.parentSpanId ?? '').toBe('');
    const hop = hops.find((h) => h.url === response.headers.get('x-kvroute-instance'))!;
    expect(hop.seen.at(-1)!.traceparent).toMatch(new RegExp(`^00-${root.traceId}-[0-9a-f]{16}-01$`));
  });

  it('a sampler that records nothing exports no spans, and the engine still continues the trace, unsampled', async () => {
    const before = receiver.spans.length;
    const rig = await startProxy({
      backends: hops.map((h) => h.url),
      tracing: { endpoint: receiver.url, sampler: 'always_off' },
    });
    const { response } = await rig.client.chat.completions
      .create(
        { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
        { headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } },
      )
      .withResponse();
    await rig.close(); // would flush any span
    expect(receiver.spans.length).toBe(before);
    const hop = hops.find((h) => h.url === response.headers.get('x-kvroute-instance'))!;
    expect(hop.seen.at(-1)!.traceparent).toMatch(new RegExp(`^00-${CLIENT_TRACE}-[0-9a-f]{16}-00$`));
  });

  it("hands an embedder's SpanExporter the SDK's ReadableSpans of the same tree", async () => {
    const spans: ReadableSpan[] = [];
    let shutDown = false;
    const exporter: SpanExporter = {
      export: (batch, done) => {
        spans.push(...batch);
        done({ code: ExportResultCode.SUCCESS });
      },
      shutdown: async () => void (shutDown = true),
    };
    const rig = await startProxy({ backends: hops.map((h) => h.url), tracing: { exporter, serviceName: 'embedded' } });
    await rig.client.chat.completions.create(
      { model: MODEL, messages: [{ role: 'user', content: 'x' }], max_tokens: 1 },
      { headers: { traceparent: `00-${CLIENT_TRACE}-${CLIENT_SPAN}-01` } },
    );
    await rig.close(); // flushes the batch into the exporter, then shuts it down
    expect(shutDown).toBe(true);
    expect(spans.map((s) => s.name).sort()).toEqual(['POST /v1/chat/completions', 'kvroute.route', 'kvroute.upstream']);
    const root = spans.find((s) => s.name === 'POST /v1/chat/completions')!;
    expect(root.spanContext().traceId).toBe(CLIENT_TRACE);
    expect(root.parentSpanContext).toMatchObject({ spanId: CLIENT_SPAN, isRemote: true });
    expect(root.kind).toBe(SpanKind.SERVER);
    expect(root.resource.attributes['service.name']).toBe('embedded');
    expect(root.events.map((e) => e.name)).toEqual(['first_token', 'completion']);
    for (const child of spans.filter((s) => s !== root))
      expect(child.parentSpanContext?.spanId).toBe(root.spanContext().spanId);
  });

  it('serve turns it on from --otlp-endpoint or the OTEL_* variables, and refuses a bad endpoint', () => {
    expect(resolveServeConfig({ 'otlp-endpoint': 'http://collector:4318' }, {}).proxy.tracing).toEqual({
      endpoint: 'http://collector:4318',
    });
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SERVICE_NAME: 'router-a' };
    expect(resolveServeConfig({}, env).proxy.tracing).toEqual({ endpoint: 'http://c:4318', serviceName: 'router-a' });
    expect(
      resolveServeConfig({}, { ...env, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://t:4318/v1/traces' }).proxy.tracing,
    ).toMatchObject({ endpoint: 'http://t:4318/v1/traces' });
    expect(resolveServeConfig({}, { ...env, OTEL_SDK_DISABLED: 'true' }).proxy.tracing).toBeUndefined();
    expect(resolveServeConfig({}, { ...env, OTEL_TRACES_EXPORTER: 'none' }).proxy.tracing).toBeUndefined();
    expect(resolveServeConfig({}, {}).proxy.tracing).toBeUndefined();
    expect(() => resolveServeConfig({ 'otlp-endpoint': 'collector:4318' }, {})).toThrow(
      /^--otlp-endpoint must be an OTLP\/HTTP collector URL/,
    );
    expect(
      resolveServeConfig({}, { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf' }).proxy.tracing,
    ).toBeDefined();
    expect(() => resolveServeConfig({}, { ...env, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'grpc' })).toThrow(
      /^OTEL_EXPORTER_OTLP_TRACES_PROTOCOL must be http\/protobuf .*got "grpc"/,
    );
    expect(() => resolveServeConfig({}, { ...env, OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' })).toThrow(
      /^OTEL_EXPORTER_OTLP_PROTOCOL must be http\/protobuf/,
    );
    expect(() => resolveServeConfig({}, { OTEL_EXPORTER_OTLP_ENDPOINT: 'ftp://x' })).toThrow(
      /^OTEL_EXPORTER_OTLP_ENDPOINT must be an OTLP\/HTTP collector URL/,
    );
  });
});
