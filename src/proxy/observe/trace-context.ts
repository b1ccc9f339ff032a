/**
 * W3C trace context (`traceparent`, `tracestate`) in and out, and the ids of new spans.
 *
 * Parsing is OpenTelemetry's own (`parseTraceParent`, `TraceState` of @opentelemetry/core): a
 * malformed `traceparent` is ignored (a new trace starts), as the W3C recommendation says, and a
 * `tracestate` is kept only beside a valid `traceparent`, re-serialized (invalid members dropped).
 *
 * Ids are drawn from a pool of random bytes refilled 4 KiB at a time (crypto.randomFillSync): a
 * request's span ids and trace id cost a slice of it, not a system call each. Ids that go out in a
 * header are hex; the others are copied as bytes straight into the OTLP encoding (randomSpanIdInto).
 */
import { randomFillSync } from 'node:crypto';

import { TraceFlags } from '@opentelemetry/api';
import { parseTraceParent, TraceState } from '@opentelemetry/core';

import { DEFAULT_SAMPLER, type TraceSampler } from './trace-sampler.js';

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

/**
 * 4 KiB: the hex of 64 KiB took 0.55 ms, 8 ns a byte (its 128 KiB string is a large object, freed
 * only by a full collection), the hex of 4 KiB 5 µs, 1.2 ns a byte (measured, Node 20).
 */
const POOL_BYTES = 4096;
const pool = Buffer.allocUnsafe(POOL_BYTES);
/**
 * The pool as hex, made once per refill: an id's hex is a slice of it (V8 makes a slice of 13
 * characters or more a view, not a copy; a toString('hex') per id cost more than the rest of the
 * request's recording). Hazard: a live id keeps its pool's whole hex (8 KiB) alive.
 */
let poolHex = '';
let offset = POOL_BYTES;

/** Where the next `bytes` random bytes start in the pool, never all zero (an invalid id). */
function randomBytesAt(bytes: number): number {
  for (;;) {
    if (offset + bytes > POOL_BYTES) {
      randomFillSync(pool);
      poolHex = pool.toString('hex');
      offset = 0;
    }
    const start = offset;
    offset += bytes;
    for (let i = start; i < offset; i++) if (pool[i] !== 0) return start;
  }
}

/** `bytes` random bytes as hex, never all zero. */
function randomHex(bytes: number): string {
  const start = randomBytesAt(bytes);
  return poolHex.slice(2 * start, 2 * (start + bytes));
}

/** A new span id's 8 bytes written into `target` at `at`, never all zero. */
export function randomSpanIdInto(target: Uint8Array, at: number): void {
  const start = randomBytesAt(8);
  for (let i = 0; i < 8; i++) target[at + i] = pool[start + i]!;
}

export const newTraceId = (): string => randomHex(16);
export const newSpanId = (): string => randomHex(8);

/**
 * The parent of a request: the client's valid `traceparent` (with its `tracestate`), else a new
 * trace; whether it is recorded, `sampler`'s decision (trace-sampler.ts).
 */
export function parentFromHeaders(
  traceparent: string,
  tracestate: string,
  sampler: TraceSampler = DEFAULT_SAMPLER,
): ParentContext {
  const parsed = traceparent === '' ? null : parseTraceParent(traceparent);
  if (parsed === null) {
    const traceId = newTraceId();
    return { traceId, spanId: '', sampled: sampler.sample(traceId), traceState: '' };
  }
  return {
    traceId: parsed.traceId,
    spanId: parsed.spanId,
    sampled: sampler.parentBased
      ? (parsed.traceFlags & TraceFlags.SAMPLED) === TraceFlags.SAMPLED
      : sampler.sample(parsed.traceId),
    traceState: tracestate === '' ? '' : new TraceState(tracestate).serialize(),
  };
}

/** The `traceparent` that makes span `spanId` of `parent`'s trace the engine's parent. */
export function traceparentOf(parent: ParentContext, spanId: string): string {
  return `00-${parent.traceId}-${spanId}-${parent.sampled ? '01' : '00'}`;
}
