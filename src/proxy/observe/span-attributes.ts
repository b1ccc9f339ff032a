/**
 * The attributes of a request's spans (docs/tracing.md), in one place: the OTLP encoder
 * (otlp-proto.ts) and the conversion for an embedder's exporter (readable-spans.ts) both walk
 * them here, so the two never disagree. Each function calls `visit` once per attribute, in order.
 */
import type { AttemptSpan, RequestTrace, RoutedSpan } from './request-trace.js';

export type Visit = (key: string, value: string | number) => void;

/** `server.address` and `server.port` of an instance URL, parsed once per instance. */
const servers = new Map<string, { address: string; port: number } | null>();
function serverOf(instance: string): { address: string; port: number } | null {
  let known = servers.get(instance);
  if (known === undefined) {
    try {
      const url = new URL(instance);
      known = { address: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
    } catch {
      known = null;
    }
    if (servers.size >= 4096) servers.clear(); // instances come and go (discovery): stay bounded
    servers.set(instance, known);
  }
  return known;
}

export function requestAttributes(t: RequestTrace, visit: Visit): void {
  visit('http.request.method', t.method);
  visit('url.path', t.route);
  visit('http.route', t.route);
  if (t.requestModel !== '') visit('gen_ai.request.model', t.requestModel);
  visit('http.response.status_code', t.status);
  visit('kvroute.outcome', t.outcome);
  if (t.usage !== undefined) {
    visit('gen_ai.usage.input_tokens', t.usage.prompt_tokens);
    visit('kvroute.usage.cached_tokens', t.usage.cached_tokens);
  }
}

export function routedAttributes(r: RoutedSpan, visit: Visit): void {
  const f = r.facts;
  visit('kvroute.instance', f.instance);
  visit('kvroute.reason', f.reason);
  visit('kvroute.matched_blocks', f.matchedBlocks);
  visit('kvroute.predicted_cached_tokens', f.predictedCachedTokens);
  visit('kvroute.keys', f.keys);
  visit('kvroute.policy', f.policy);
  if (f.predictedTtftMs !== undefined) visit('kvroute.predicted_ttft_ms', f.predictedTtftMs);
}

export function attemptAttributes(a: AttemptSpan, visit: Visit): void {
  visit('kvroute.instance', a.instance);
  visit('kvroute.attempt', a.number);
  const server = serverOf(a.instance);
  if (server !== null) {
    visit('server.address', server.address);
    visit('server.port', server.port);
  }
  if (a.status !== 0) visit('http.response.status_code', a.status);
  if (a.errorType !== '') visit('error.type', a.errorType);
}

/** A span's status: the request's when it failed (a 5xx, a cut stream), an attempt's when it failed. */
export const requestStatusMessage = (t: RequestTrace): string => (t.error !== '' ? t.error : t.outcome);
