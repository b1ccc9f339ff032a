/**
 * The exchange's side of tracing (observe/request-trace.ts has the spans): the client's W3C
 * headers in, and per attempt the routing decision's facts out and the attempt's own
 * `traceparent`/`tracestate` into the request to the engine, replacing the client's.
 * Called only when tracing is on.
 */
import type { RequestTrace } from '../observe/request-trace.js';
import type { Tracing } from '../observe/tracing.js';
import type { ProxyState } from '../proxy-state.js';
import type { ParsedRoute } from './request-inputs.js';

/** The value of a header in a [name, value, …] list ('' when absent). */
function headerValue(headers: readonly string[], name: string): string {
  for (let i = 0; i + 1 < headers.length; i += 2) if (headers[i] === name) return headers[i + 1]!;
  return '';
}

/** Sets a header in a [name, value, …] list: replaces it, or appends it; '' removes it. */
function setHeader(headers: string[], name: string, value: string): void {
  for (let i = 0; i + 1 < headers.length; i += 2)
    if (headers[i] === name) {
      if (value === '') headers.splice(i, 2);
      else headers[i + 1] = value;
      return;
    }
  if (value !== '') headers.push(name, value);
}

/**
 * The request's trace, a child of the client's trace context when its headers carry one;
 * `startedAt` is the request's arrival (`performance.now()` ms).
 */
export function startTrace(
  tracing: Tracing,
  path: string,
  headers: readonly string[],
  startedAt: number,
): RequestTrace {
  return tracing.request(
    'POST',
    path,
    headerValue(headers, 'traceparent'),
    headerValue(headers, 'tracestate'),
    startedAt,
  );
}

/**
 * Records the decision route() just made (read in place: call before the next route()) and opens
 * the attempt's span, whose context the engine receives.
 */
export function traceAttempt(
  trace: RequestTrace,
  headers: string[],
  state: ProxyState,
  ticket: number,
  route: ParsedRoute,
): void {
  const at = performance.now(); // the decision's and the attempt's start: one clock read
  // An unsampled trace exports nothing (trace-sampler.ts): its decision is not worth the lookups.
  if (trace.parent.sampled) recordDecision(trace, state, ticket, route, at);
  setHeader(headers, 'traceparent', trace.attempt(state.router.decision.instance, at));
  setHeader(headers, 'tracestate', trace.parent.traceState);
}

/** The decision route() just made, as the trace's routing span. */
function recordDecision(trace: RequestTrace, state: ProxyState, ticket: number, route: ParsedRoute, at: number): void {
  const decision = state.router.decision;
  const ttft = state.costs.predictedTtftSeconds(ticket);
  trace.routed(
    {
      instance: decision.instance,
      reason: decision.reason,
      matchedBlocks: decision.matchedBlocks,
      predictedCachedTokens: decision.predictedCachedTokens,
      predictedTtftMs: ttft === undefined ? undefined : Math.round(ttft * 1e4) / 10,
      keys: route.tokens !== undefined ? 'tokens' : route.idsFrom === 'text' ? 'text' : 'hash_ids',
      policy: state.policyName,
    },
    at,
  );
}
