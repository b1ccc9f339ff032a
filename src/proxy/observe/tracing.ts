/**
 * OpenTelemetry tracing of the proxy's requests (docs/tracing.md): one tracer provider per proxy,
 * its spans batched to an OTLP/HTTP collector (`@opentelemetry/exporter-trace-otlp-http`, JSON to
 * `<endpoint>/v1/traces`), or to an exporter the embedder gives.
 *
 * Off (no `tracing` option) the proxy makes no tracer, no span and no context: each request pays
 * one `undefined` check. On, a request's spans come from request-trace.ts. W3C trace context
 * (`traceparent`, `tracestate`) is read from the client's headers and written, with the upstream
 * attempt's span, into the request to the engine; off, the client's headers pass through as they
 * came (the engine continues the client's trace).
 *
 * The provider is the proxy's own: it is never registered as the process's global, so an embedder's
 * own OpenTelemetry setup is untouched. Its spans are flushed at close().
 */
import { SpanKind, trace, type Tracer } from '@opentelemetry/api';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base';

import { RequestTrace } from './request-trace.js';
import { tracesUrl, type TracingOptions } from './tracing-options.js';
import { contextFromHeaders } from './trace-context.js';

export class Tracing {
  private readonly provider: BasicTracerProvider;
  readonly tracer: Tracer;

  constructor(options: TracingOptions) {
    const exporter = options.exporter ?? new OTLPTraceExporter({ url: tracesUrl(options.endpoint ?? '') });
    this.provider = new BasicTracerProvider({
      resource: resourceFromAttributes({ 'service.name': options.serviceName ?? 'kvroute' }),
      // A deeper queue than the SDK's 2,048 spans: at a few thousand requests per second (three
      // spans each) the default drops spans between two exports.
      spanProcessors: [
        new BatchSpanProcessor(exporter, {
          maxQueueSize: 32_768,
          maxExportBatchSize: 2_048,
          scheduledDelayMillis: 1_000,
        }),
      ],
    });
    this.tracer = this.provider.getTracer('kvroute');
  }

  /**
   * A request's trace, its root span a child of the client's `traceparent` (with its
   * `tracestate`) when it sent a valid one.
   */
  request(method: string, path: string, traceparent: string, tracestate: string): RequestTrace {
    const parent = contextFromHeaders(traceparent, tracestate);
    const route = path.split('?', 1)[0]!;
    const span = this.tracer.startSpan(
      `${method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.path': route, 'http.route': route },
      },
      parent,
    );
    return new RequestTrace(this.tracer, trace.setSpan(parent, span), span);
  }

  /** Exports what is buffered, then stops. */
  async close(): Promise<void> {
    await this.provider.shutdown();
  }
}
