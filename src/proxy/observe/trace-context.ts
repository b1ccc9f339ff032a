/**
 * W3C trace context (`traceparent`, `tracestate`) in and out of OpenTelemetry contexts, with
 * OpenTelemetry's own propagator: a malformed `traceparent` is ignored (a new trace starts), as
 * the W3C recommendation says.
 */
import { ROOT_CONTEXT, type Context } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';

const propagator = new W3CTraceContextPropagator();
const getter = {
  keys: (carrier: Record<string, string>) => Object.keys(carrier),
  get: (carrier: Record<string, string>, key: string) => carrier[key],
};

/** The remote parent of a client's headers ('' when absent); ROOT_CONTEXT without a valid one. */
export function contextFromHeaders(traceparent: string, tracestate: string): Context {
  if (traceparent === '') return ROOT_CONTEXT;
  const carrier: Record<string, string> = { traceparent };
  if (tracestate !== '') carrier.tracestate = tracestate;
  return propagator.extract(ROOT_CONTEXT, carrier, getter);
}

/** The W3C headers of a context's span: [traceparent, tracestate ('' when none)]. */
export function headersOfContext(context: Context): [string, string] {
  const carrier: Record<string, string> = {};
  propagator.inject(context, carrier, { set: (c, k, v) => (c[k] = v) });
  return [carrier.traceparent ?? '', carrier.tracestate ?? ''];
}
