/**
 * Requests' span records as the SDK's ReadableSpans, for an embedder's own SpanExporter (the
 * `tracing.exporter` option): made per batch, off the request path.
 */
import { TraceFlags, type HrTime, type SpanContext } from '@opentelemetry/api';
import { ExportResultCode, TraceState } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

import type { FinishedTrace } from './request-trace.js';
import type { TraceSender } from './trace-batch.js';

/** ms since the epoch as [seconds, nanoseconds]. */
function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

export function readableSpans(
  traces: readonly FinishedTrace[],
  resource: Resource,
  scope: { name: string; version: string },
): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  for (const { parent, spans } of traces) {
    const traceState = parent.traceState === '' ? undefined : new TraceState(parent.traceState);
    const contextOf = (spanId: string, isRemote: boolean): SpanContext => ({
      traceId: parent.traceId,
      spanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote,
      ...(traceState === undefined ? {} : { traceState }),
    });
    for (const span of spans) {
      const context = contextOf(span.spanId, false);
      const durationMs = span.end - span.start;
      out.push({
        name: span.name,
        kind: span.kind,
        spanContext: () => context,
        ...(span.parentSpanId === ''
          ? {}
          : { parentSpanContext: contextOf(span.parentSpanId, span.parentSpanId === parent.spanId) }),
        startTime: hrTime(span.start),
        endTime: hrTime(span.end),
        status: span.statusMessage === '' ? { code: span.status } : { code: span.status, message: span.statusMessage },
        attributes: span.attributes,
        links: [],
        events: span.events.map((e) => ({ name: e.name, time: hrTime(e.at) })),
        duration: [Math.floor(durationMs / 1000), Math.round((durationMs % 1000) * 1e6)],
        ended: true,
        resource,
        instrumentationScope: scope,
        droppedAttributesCount: 0,
        droppedEventsCount: 0,
        droppedLinksCount: 0,
      });
    }
  }
  return out;
}

/** A sender to an embedder's SpanExporter. */
export function spanExporterSender(
  exporter: SpanExporter,
  resource: Resource,
  scope: { name: string; version: string },
): { send: TraceSender; shutdown(): Promise<void> } {
  return {
    send: (batch) =>
      new Promise((resolve, reject) =>
        exporter.export(readableSpans(batch, resource, scope), (result) =>
          result.code === ExportResultCode.SUCCESS
            ? resolve()
            : reject(result.error ?? new Error('the exporter did not take the spans')),
        ),
      ),
    shutdown: () => exporter.shutdown(),
  };
}
