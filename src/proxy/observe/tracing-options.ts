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
  /**
   * Which traces are recorded, as `OTEL_TRACES_SAMPLER` names them (default
   * `parentbased_always_on`: every request unless its client's trace is unsampled).
   */
  sampler?: SamplerName;
  /** The share of traces the `traceidratio` samplers record, 0 to 1 (default 1). */
  sampleRatio?: number;
}

/** OpenTelemetry's standard samplers (`OTEL_TRACES_SAMPLER`) kvroute implements. */
export const SAMPLER_NAMES = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const;
export type SamplerName = (typeof SAMPLER_NAMES)[number];

export const isSamplerName = (name: unknown): name is SamplerName =>
  typeof name === 'string' && (SAMPLER_NAMES as readonly string[]).includes(name);

/** Whether `ratio` is a sampling ratio: a number from 0 to 1. */
export const isSampleRatio = (ratio: unknown): ratio is number =>
  typeof ratio === 'number' && Number.isFinite(ratio) && ratio >= 0 && ratio <= 1;

/** The traces URL of an OTLP/HTTP endpoint option. */
export function tracesUrl(endpoint: string): string {
  const url = new URL(endpoint);
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error(`the OTLP endpoint must be an http:// or https:// URL, got ${endpoint}`);
  return url.pathname.endsWith('/v1/traces') ? url.href : new URL('v1/traces', url.href.replace(/\/?$/, '/')).href;
}
