/**
 * Requests' traces as the SDK's ReadableSpans, for an embedder's own SpanExporter (the
 * `tracing.exporter` option): made per batch, off the request path, with the attributes
 * span-attributes.ts lists (as the OTLP encoder writes them).
 */
import { SpanKind, SpanStatusCode, TraceFlags, type HrTime, type SpanContext } from '@opentelemetry/api';
import { ExportResultCode, TraceState } from '@opentelemetry/core';
import type { Resource } from '@opentelemetry/resources';
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace-base';

import type { RequestTrace } from './request-trace.js';
import { newSpanId } from './trace-context.js';
import {
  attemptAttributes,
  requestAttributes,
  requestStatusMessage,
  routedAttributes,
  type Visit,
} from './span-attributes.js';
import type { TraceSender } from './trace-batch.js';

/** ms since the epoch as [seconds, nanoseconds]. */
function hrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1e6)];
}

function attributesOf<T>(of: T, walk: (of: T, visit: Visit) => void): Record<string, string | number> {
  const attributes: Record<string, string | number> = {};
  walk(of, (key, value) => (attributes[key.name] = value));
  return attributes;
}

export function readableSpans(
  traces: readonly RequestTrace[],
  resource: Resource,
  scope: { name: string; version: string },
): ReadableSpan[] {
  const out: ReadableSpan[] = [];
  for (const t of traces) {
    // The request's and its decisions' span ids are made here (the OTLP encoder makes its own):
    // only an attempt's id is known before, as the engine got it.
    const requestSpanId = newSpanId();
    const traceState = t.parent.traceState === '' ? undefined : new TraceState(t.parent.traceState);
    const contextOf = (spanId: string, isRemote: boolean): SpanContext => ({
      traceId: t.parent.traceId,
      spanId,
      traceFlags: TraceFlags.SAMPLED,
      isRemote,
      ...(traceState === undefined ? {} : { traceState }),
    });
    const span = (
      name: string,
      kind: SpanKind,
      spanId: string,
      parentSpanId: string,
      start: number,
      end: number,
      attributes: Record<string, string | number>,
      events: Array<{ name: string; at: number }>,
      error: string | undefined,
    ): ReadableSpan => {
      const context = contextOf(spanId, false);
      const durationMs = end - start;
      return {
        name,
        kind,
        spanContext: () => context,
        ...(parentSpanId === ''
          ? {}
          : { parentSpanContext: contextOf(parentSpanId, parentSpanId === t.parent.spanId) }),
        startTime: hrTime(start),
        endTime: hrTime(end),
        status:
          error === undefined
            ? { code: SpanStatusCode.UNSET }
            : { code: SpanStatusCode.ERROR, ...(error === '' ? {} : { message: error }) },
        attributes,
        links: [],
        events: events.map((e) => ({ name: e.name, time: hrTime(e.at) })),
        duration: [Math.floor(durationMs / 1000), Math.round((durationMs % 1000) * 1e6)],
        ended: true,
        resource,
        instrumentationScope: scope,
        droppedAttributesCount: 0,
        droppedEventsCount: 0,
        droppedLinksCount: 0,
      };
    };
    for (const r of t.routes)
      out.push(
        span(
          'kvroute.route',
          SpanKind.INTERNAL,
          newSpanId(),
          requestSpanId,
          r.at,
          r.at,
          attributesOf(r, routedAttributes),
          [],
          undefined,
        ),
      );
    for (const a of t.attempts)
      out.push(
        span(
          'kvroute.upstream',
          SpanKind.CLIENT,
          a.spanId,
          requestSpanId,
          a.start,
          a.end,
          attributesOf(a, attemptAttributes),
          a.firstByteAt === 0 ? [] : [{ name: 'first_token', at: a.firstByteAt }],
          a.errorType === '' ? undefined : a.errorMessage,
        ),
      );
    out.push(
      span(
        t.name,
        SpanKind.SERVER,
        requestSpanId,
        t.parent.spanId,
        t.start,
        t.endedAt,
        attributesOf(t, requestAttributes),
        [
          ...(t.firstByteAt === 0 ? [] : [{ name: 'first_token', at: t.firstByteAt }]),
          { name: 'completion', at: t.endedAt },
        ],
        t.failed ? requestStatusMessage(t) : undefined,
      ),
    );
  }
  return out;
}

/** A sender to an embedder's SpanExporter. */
export function spanExporterSender(
  exporter: SpanExporter,
  resource: Resource,
  scope: { name: string; version: string },
): { send: TraceSender<RequestTrace>; shutdown(): Promise<void> } {
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
