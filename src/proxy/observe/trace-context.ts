/**
 * W3C trace context (`traceparent`, `tracestate`) in and out, and the ids of new spans.
 *
 * Parsing is OpenTelemetry's own (`parseTraceParent`, `TraceState` of @opentelemetry/core): a
 * malformed `traceparent` is ignored (a new trace starts), as the W3C recommendation says, and a
 * `tracestate` is kept only beside a valid `traceparent`, re-serialized (invalid members dropped).
 *
 * Ids are hex, drawn from a pool of random bytes refilled 64 KiB at a time (crypto.randomFillSync):
 * a request's three span ids and trace id cost a slice of it, not a system call each.
 */
import { randomFillSync } from 'node:crypto';

import { TraceFlags } from '@opentelemetry/api';
import { parseTraceParent, TraceState } from '@opentelemetry/core';

/** Where a request's trace continues from. */
export interface ParentContext {
  /** 32 hex digits: the client's trace, or a new one. */
  traceId: string;
  /** 16 hex digits of the client's span; '' when the trace is new. */
  spanId: string;
  /** Whether the trace is recorded (W3C `sampled`): a client's unsampled trace is not. */
  sampled: boolean;
  /** The client's tracestate, re-serialized; '' when none. */
  traceState: string;
}

const POOL_BYTES = 65_536;
const pool = Buffer.allocUnsafe(POOL_BYTES);
let offset = POOL_BYTES;

/** `bytes` random bytes as hex, never all zero (an invalid id). */
function randomHex(bytes: number): string {
  for (;;) {
    if (offset + bytes > POOL_BYTES) {
      randomFillSync(pool);
      offset = 0;
    }
    const start = offset;
    offset += bytes;
    for (let i = start; i < offset; i++) if (pool[i] !== 0) return pool.toString('hex', start, offset);
  }
}

export const newTraceId = (): string => randomHex(16);
export const newSpanId = (): string => randomHex(8);

/** The parent of a request: the client's valid `traceparent` (with its `tracestate`), else a new trace. */
export function parentFromHeaders(traceparent: string, tracestate: string): ParentContext {
  const parsed = traceparent === '' ? null : parseTraceParent(traceparent);
  if (parsed === null) return { traceId: newTraceId(), spanId: '', sampled: true, traceState: '' };
  return {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    sampled: (parsed.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED,
    traceState: tracestate === '' ? '' : new TraceState(tracestate).serialize(),
  };
}

/** The `traceparent` that makes span `spanId` of `parent`'s trace the engine's parent. */
export function traceparentOf(parent: ParentContext, spanId: string): string {
  return `00-${parent.traceId}-${spanId}-${parent.sampled ? '01' : '00'}`;
}
