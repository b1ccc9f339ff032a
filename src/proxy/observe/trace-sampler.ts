/**
 * Which traces are recorded: OpenTelemetry's standard samplers (`OTEL_TRACES_SAMPLER`), decided
 * as its SDK decides them, so a trace kvroute records is the one the SDK-instrumented services
 * around it record too (the ratio samplers hash the trace id, TraceIdRatioBasedSampler's own).
 *
 * An unsampled request records no routing decision and exports nothing; the engine still gets a `traceparent`,
 * with the sampled flag 00, so the trace stays one trace across the hop.
 */
import { ROOT_CONTEXT } from '@opentelemetry/api';
import { SamplingDecision, TraceIdRatioBasedSampler } from '@opentelemetry/sdk-trace-base';

import type { SamplerName } from './tracing-options.js';

export interface TraceSampler {
  /** Whether a client's `traceparent` decides (its sampled flag), as the `parentbased_*` samplers. */
  readonly parentBased: boolean;
  /** Whether trace `traceId` (32 hex digits) is recorded when no parent decides. */
  sample(traceId: string): boolean;
}

/** The sampler `name` (default `parentbased_always_on`, the SDK's); `ratio` for the ratio samplers, 0 to 1. */
export function traceSampler(name: SamplerName = 'parentbased_always_on', ratio = 1): TraceSampler {
  const parentBased = name.startsWith('parentbased_');
  const root = parentBased ? name.slice('parentbased_'.length) : name;
  if (root === 'always_on') return { parentBased, sample: () => true };
  if (root === 'always_off') return { parentBased, sample: () => false };
  const sampler = new TraceIdRatioBasedSampler(ratio);
  return {
    parentBased,
    sample: (traceId) => sampler.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED,
  };
}

/** Every request's trace recorded unless its client's is unsampled: the SDK's default. */
export const DEFAULT_SAMPLER: TraceSampler = traceSampler();
