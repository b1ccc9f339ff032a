/**
 * OpenTelemetry tracing of the proxy's requests (docs/tracing.md): each request's spans
 * (request-trace.ts) batched (trace-batch.ts) to an OTLP/HTTP collector (otlp-sender.ts, protobuf to
 * `<endpoint>/v1/traces`, encoded straight into each request's body: otlp-body.ts), or to a
 * SpanExporter the embedder gives (readable-spans.ts).
 *
 * Off (no `tracing` option) the proxy loads none of this and makes no trace: each request pays one
 * `undefined` check. On, W3C trace context (`traceparent`, `tracestate`) is read from the client's
 * headers and written, with the upstream attempt's span, into the request to the engine; off, the
 * client's headers pass through as they came (the engine continues the client's trace).
 *
 * Spans are kvroute's own records, encoded by kvroute (otlp-proto.ts), not the SDK's span objects
 * and serializer: those cost ~60–100 µs of CPU per request, against a budget of 10 (bench/
 * RESULTS.md, "tracing"). OpenTelemetry's packages still parse the trace context, make the
 * resource and carry the export (the OTLP exporter's transport and its OTEL_EXPORTER_OTLP_*
 * settings). Nothing is registered as the process's global: an embedder's own OpenTelemetry setup
 * is untouched. close() exports what is buffered.
 */
import { resourceFromAttributes } from '@opentelemetry/resources';

import { kvrouteVersion } from '../../core/version.js';
import { OtlpBodyBuilder, type OtlpBody } from './otlp-body.js';
import { spansEncoder } from './otlp-native.js';
import { otlpSender } from './otlp-sender.js';
import { spanExporterSender } from './readable-spans.js';
import { RequestTrace } from './request-trace.js';
import { TraceBatch } from './trace-batch.js';
import { parentFromHeaders } from './trace-context.js';
import { traceSampler, type TraceSampler } from './trace-sampler.js';
import { tracesUrl, type TracingOptions } from './tracing-options.js';

/** Requests per body (an export request): about 3,000 spans, a megabyte. */
const BODY_REQUESTS = 1024;

export class Tracing {
  private readonly batch: TraceBatch<RequestTrace> | TraceBatch<OtlpBody>;
  /** Where a request's spans go when it ends. */
  private readonly finished: (trace: RequestTrace) => void;
  private readonly shutdown: () => Promise<void>;
  private readonly sampler: TraceSampler;

  constructor(options: TracingOptions, warn: (line: string) => void) {
    this.sampler = traceSampler(options.sampler, options.sampleRatio);
    const attributes = { 'service.name': options.serviceName ?? 'kvroute', 'service.version': kvrouteVersion() };
    const scope = { name: 'kvroute', version: kvrouteVersion() };
    if (options.exporter !== undefined) {
      const sender = spanExporterSender(options.exporter, resourceFromAttributes(attributes), scope);
      const batch = new TraceBatch(sender.send, { warn });
      this.batch = batch;
      this.finished = batch.add;
      this.shutdown = sender.shutdown;
    } else {
      const envelope = { resource: attributes, scopeName: scope.name, scopeVersion: scope.version };
      const sender = otlpSender(tracesUrl(options.endpoint ?? ''), envelope, warn);
      const body = new OtlpBodyBuilder(envelope, sender.buffers, spansEncoder(warn));
      const finishBody = (): void => {
        const finished = body.finish();
        if (finished !== undefined) batch.add(finished, finished.requests);
      };
      // A body is one batch (maxBatch 1: each is sent as soon as it is added); the timed flush
      // finishes a part-filled one, so no request waits longer than the batch delay.
      const batch = new TraceBatch<OtlpBody>(sender.send, {
        warn,
        maxBatch: 1,
        drain: finishBody,
      });
      this.batch = batch;
      this.finished = (trace) => {
        body.add(trace);
        if (body.requests >= BODY_REQUESTS) finishBody();
      };
      this.shutdown = sender.shutdown;
    }
  }

  /**
   * A request's trace, its root span a child of the client's `traceparent` (with its
   * `tracestate`) when it sent a valid one; `startedAt` is its arrival, `performance.now()` ms.
   */
  request(
    method: string,
    path: string,
    traceparent: string,
    tracestate: string,
    startedAt: number = performance.now(),
  ): RequestTrace {
    const query = path.indexOf('?');
    return new RequestTrace(
      this.finished,
      parentFromHeaders(traceparent, tracestate, this.sampler),
      method,
      query < 0 ? path : path.slice(0, query),
      startedAt,
    );
  }

  /** Exports what is buffered, then stops. */
  async close(): Promise<void> {
    await this.batch.close();
    await this.shutdown();
  }
}
