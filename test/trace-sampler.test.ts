/**
 * Trace sampling (src/proxy/observe/trace-sampler.ts): OTEL_TRACES_SAMPLER's samplers, each request's
 * decision against the OpenTelemetry SDK's own samplers on random trace ids and client contexts,
 * and the refusals of a sampler or ratio kvroute cannot honour (serve's variables, the library's
 * options).
 */
import { randomBytes } from 'node:crypto';

import { context, SpanKind, trace, TraceFlags } from '@opentelemetry/api';
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  ParentBasedSampler,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  type Sampler,
} from '@opentelemetry/sdk-trace-base';
import { describe, expect, it } from 'vitest';

import { resolveServeConfig } from '../src/cli/serve-config.js';
import { resolveProxyOptions } from '../src/proxy/proxy-options.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { traceSampler } from '../src/proxy/observe/trace-sampler.js';
import { SAMPLER_NAMES, type SamplerName } from '../src/proxy/observe/tracing-options.js';

/** The SDK's sampler for OTEL_TRACES_SAMPLER=`name` (its ParentBased: remote parents decide). */
function sdkSampler(name: SamplerName, ratio: number): Sampler {
  const root = name.replace('parentbased_', '');
  const base =
    root === 'always_on'
      ? new AlwaysOnSampler()
      : root === 'always_off'
        ? new AlwaysOffSampler()
        : new TraceIdRatioBasedSampler(ratio);
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root: base }) : base;
}

/** The SDK's decision for a trace `traceId` whose remote parent is `parent` (undefined: a new trace). */
function sdkDecision(sampler: Sampler, traceId: string, parent: { spanId: string; sampled: boolean } | undefined) {
  const ctx =
    parent === undefined
      ? context.active()
      : trace.setSpanContext(context.active(), {
          traceId,
          spanId: parent.spanId,
          traceFlags: parent.sampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
          isRemote: true,
        });
  return (
    sampler.shouldSample(ctx, traceId, 'POST /v1/chat/completions', SpanKind.SERVER, {}, []).decision ===
    SamplingDecision.RECORD_AND_SAMPLED
  );
}

describe('trace sampling', () => {
  it('decides every request as the SDK samplers do, for new traces and for clients’ sampled and unsampled ones', () => {
    for (const name of SAMPLER_NAMES) {
      for (const ratio of [0, 0.25, 0.5, 1]) {
        if (!name.endsWith('traceidratio') && ratio !== 1) continue;
        const ours = traceSampler(name, ratio);
        const theirs = sdkSampler(name, ratio);
        let sampled = 0;
        for (let i = 0; i < 400; i++) {
          const traceId = randomBytes(16).toString('hex');
          const spanId = randomBytes(8).toString('hex');
          const clientSampled = i % 3 !== 0;
          const fromClient = parentFromHeaders(`00-${traceId}-${spanId}-${clientSampled ? '01' : '00'}`, '', ours);
          expect(fromClient.traceId).toBe(traceId);
          expect(fromClient.sampled, `${name} ${ratio} client ${clientSampled}`).toBe(
            sdkDecision(theirs, traceId, { spanId, sampled: clientSampled }),
          );
          const fresh = parentFromHeaders('', '', ours);
          expect(fresh.sampled, `${name} ${ratio} new trace`).toBe(sdkDecision(theirs, fresh.traceId, undefined));
          if (fresh.sampled) sampled++;
        }
        // The ratio is kept: 400 new traces at 0.25 or 0.5 land well within ±0.1 of it.
        if (name.endsWith('traceidratio')) expect(Math.abs(sampled / 400 - ratio)).toBeLessThan(0.1);
      }
    }
  });

  it('by default records every request unless its client’s trace is unsampled', () => {
    const id = '4bf92f3577b34da6a3ce929d0e0e4736';
    expect(parentFromHeaders('', '').sampled).toBe(true);
    expect(parentFromHeaders(`00-${id}-00f067aa0ba902b7-01`, '').sampled).toBe(true);
    expect(parentFromHeaders(`00-${id}-00f067aa0ba902b7-00`, '').sampled).toBe(false);
  });

  it('serve reads OTEL_TRACES_SAMPLER and its ratio, and refuses what it cannot honour', () => {
    const env = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318' };
    expect(resolveServeConfig({}, env).proxy.tracing).toEqual({ endpoint: 'http://c:4318' });
    expect(resolveServeConfig({}, { ...env, OTEL_TRACES_SAMPLER: 'always_off' }).proxy.tracing).toEqual({
      endpoint: 'http://c:4318',
      sampler: 'always_off',
    });
    expect(
      resolveServeConfig(
        {},
        { ...env, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.1' },
      ).proxy.tracing,
    ).toEqual({ endpoint: 'http://c:4318', sampler: 'parentbased_traceidratio', sampleRatio: 0.1 });
    // The argument belongs to the ratio samplers; with another it is ignored, as the SDKs do.
    expect(
      resolveServeConfig({}, { ...env, OTEL_TRACES_SAMPLER: 'always_on', OTEL_TRACES_SAMPLER_ARG: '0.1' }).proxy
        .tracing,
    ).toEqual({ endpoint: 'http://c:4318', sampler: 'always_on' });
    expect(() => resolveServeConfig({}, { ...env, OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toThrow(
      /^OTEL_TRACES_SAMPLER must be one of always_on, always_off, traceidratio, .*got "jaeger_remote"/,
    );
    for (const arg of ['1.5', '-0.1', 'half', 'NaN'])
      expect(() =>
        resolveServeConfig({}, { ...env, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: arg }),
      ).toThrow(new RegExp(`^OTEL_TRACES_SAMPLER_ARG must be a number from 0 to 1, got "${arg}"`));
  });

  it('the library refuses a sampler it does not know and a ratio out of range or without a ratio sampler', () => {
    const base = { backends: ['http://127.0.0.1:9'] };
    const tracing = (extra: object) => ({ ...base, tracing: { endpoint: 'http://127.0.0.1:4318', ...extra } });
    expect(resolveProxyOptions(tracing({ sampler: 'traceidratio', sampleRatio: 0.5 })).tracing).toMatchObject({
      sampler: 'traceidratio',
      sampleRatio: 0.5,
    });
    expect(() => resolveProxyOptions(tracing({ sampler: 'sometimes' }))).toThrow(
      /^options\.tracing\.sampler must be one of always_on, .*got "sometimes"/,
    );
    expect(() => resolveProxyOptions(tracing({ sampler: 'traceidratio', sampleRatio: 2 }))).toThrow(
      /^options\.tracing\.sampleRatio must be a number from 0 to 1, got 2/,
    );
    expect(() => resolveProxyOptions(tracing({ sampleRatio: 0.5 }))).toThrow(
      /^options\.tracing\.sampleRatio needs sampler traceidratio or parentbased_traceidratio/,
    );
  });
});
