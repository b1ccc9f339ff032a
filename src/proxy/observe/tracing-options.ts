/**
 * What turns tracing on (docs/tracing.md), apart from tracing.ts so that checking options loads no
 * OpenTelemetry package: the SDK is imported only by a proxy that traces.
 */
import type { SpanExporter } from '@opentelemetry/sdk-trace-base';

export interface TracingOptions {
  /**
   * The collector's OTLP/HTTP endpoint, e.g. `http://otel-collector:4318`: spans go to its
   * `/v1/traces` (a URL already ending in `/v1/traces` is used as is).
   */
  endpoint?: string;
  /** The `service.name` resource attribute (default `kvroute`). */
  serviceName?: string;
  /** Export here instead of OTLP (an embedder's exporter; tests). */
  exporter?: SpanExporter;
}

/** The traces URL of an OTLP/HTTP endpoint option. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error(`the OTLP endpoint must be an http:// or https:// URL, got ${endpoint}`);
  return url.pathname.endsWith('/v1/traces') ? url.href : new URL('v1/traces', url.href.replace(/\/?$/, '/')).href;
}
