/**
 * One request's spans (docs/tracing.md), made by Tracing.request() when tracing is on:
 *
 *   POST /v1/chat/completions   SERVER    the request, arrival to its last byte
 *     ├ kvroute.route           INTERNAL  one per routing decision: instance, reason, matched blocks,
 *     │                                   predicted cached tokens and TTFT, key kind, policy
 *     └ kvroute.upstream        CLIENT    one per attempt (a retry is a second one): the engine,
 *                                         its answer's status; the engine continues the trace
 *
 * Events: `first_token` on the request and its attempt at the answer's first byte; `completion` on
 * the request at its end, with the usage. Attributes follow the OpenTelemetry conventions where
 * they have one (`http.*`, `server.address`, `gen_ai.request.model`, `gen_ai.usage.*`), and
 * `kvroute.*` otherwise. A request's session id is not recorded (it may identify a user).
 *
 * Spans are plain records (SpanRecord), not SDK span objects: this runs on every request's path,
 * and the SDK's spans cost more than the whole budget (bench/RESULTS.md, "tracing"). At end() the
 * request's records go to the batch (trace-batch.ts) in one piece, unless the client's trace is
 * unsampled: then nothing is recorded, and the engine still gets a `traceparent` (flag 00).
 *
 * Invariant: every span started here ends exactly once: an attempt at its failure or at the
 * request's end, the request at end(); calls after end() are ignored.
 */
import { SpanKind, SpanStatusCode } from '@opentelemetry/api';

import type { RequestOutcome, UsageCounts } from './proxy-observer.js';
import { newSpanId, traceparentOf, type ParentContext } from './trace-context.js';

export type AttributeValue = string | number;

/** A finished span. Times are ms since the epoch, with sub-ms fractions. */
export interface SpanRecord {
  readonly spanId: string;
  /** '' for a root span. */
  readonly parentSpanId: string;
  readonly name: string;
  readonly kind: SpanKind;
  readonly start: number;
  end: number;
  readonly attributes: Record<string, AttributeValue>;
  readonly events: Array<{ name: string; at: number }>;
  status: SpanStatusCode;
  statusMessage: string;
}

/** A request's spans, its root last, with the trace they belong to. */
export interface FinishedTrace {
  readonly parent: ParentContext;
  readonly spans: readonly SpanRecord[];
}

/** What the routing decision span records. */
export interface RoutedFacts {
  instance: string;
  reason: string;
  matchedBlocks: number;
  predictedCachedTokens: number;
  /** The learned costs' predicted TTFT, ms; undefined when they have none for the decision. */
  predictedTtftMs: number | undefined;
  /** What the request was keyed by: `tokens`, `text` or `hash_ids`. */
  keys: string;
  policy: string;
}

/** Wall-clock ms since the epoch, with the monotonic clock's sub-ms precision. */
const now = (): number => performance.timeOrigin + performance.now();

const NO_EVENTS: Array<{ name: string; at: number }> = [];

/** `server.address` and `server.port` of an instance URL, parsed once per instance. */
const serverOf = new Map<string, { address: string; port: number } | null>();
function server(instance: string): { address: string; port: number } | null {
  let known = serverOf.get(instance);
  if (known === undefined) {
    try {
      const url = new URL(instance);
      known = { address: url.hostname, port: Number(url.port || (url.protocol === 'https:' ? 443 : 80)) };
    } catch {
      known = null;
    }
    if (serverOf.size > 4096) serverOf.clear(); // instances come and go (discovery): stay bounded
    serverOf.set(instance, known);
  }
  return known;
}

function span(
  parentSpanId: string,
  name: string,
  kind: SpanKind,
  start: number,
  attributes: Record<string, AttributeValue>,
  events: Array<{ name: string; at: number }>,
): SpanRecord {
  return {
    spanId: newSpanId(),
    parentSpanId,
    name,
    kind,
    start,
    end: start,
    attributes,
    events,
    status: SpanStatusCode.UNSET,
    statusMessage: '',
  };
}

export class RequestTrace {
  private readonly spans: SpanRecord[] = [];
  private readonly root: SpanRecord;
  private attemptSpan: SpanRecord | undefined;
  private attempts = 0;
  private ended = false;

  constructor(
    private readonly finished: (trace: FinishedTrace) => void,
    readonly parent: ParentContext,
    method: string,
    route: string,
  ) {
    this.root = span(
      parent.spanId,
      `${method} ${route}`,
      SpanKind.SERVER,
      now(),
      { 'http.request.method': method, 'url.path': route, 'http.route': route },
      [],
    );
  }

  model(model: string): void {
    this.root.attributes['gen_ai.request.model'] = model;
  }

  routed(facts: RoutedFacts): void {
    if (this.ended) return;
    const attributes: Record<string, AttributeValue> = {
      'kvroute.instance': facts.instance,
      'kvroute.reason': facts.reason,
      'kvroute.matched_blocks': facts.matchedBlocks,
      'kvroute.predicted_cached_tokens': facts.predictedCachedTokens,
      'kvroute.keys': facts.keys,
      'kvroute.policy': facts.policy,
    };
    if (facts.predictedTtftMs !== undefined) attributes['kvroute.predicted_ttft_ms'] = facts.predictedTtftMs;
    this.spans.push(span(this.root.spanId, 'kvroute.route', SpanKind.INTERNAL, now(), attributes, NO_EVENTS));
  }

  /** An attempt leaves for `instance`: its span, and the traceparent/tracestate the engine gets. */
  attempt(instance: string): [string, string] {
    this.endAttempt(undefined);
    this.attempts += 1;
    const attributes: Record<string, AttributeValue> = {
      'kvroute.instance': instance,
      'kvroute.attempt': this.attempts,
    };
    const address = server(instance);
    if (address !== null) {
      attributes['server.address'] = address.address;
      attributes['server.port'] = address.port;
    }
    const attempt = span(this.root.spanId, 'kvroute.upstream', SpanKind.CLIENT, now(), attributes, []);
    this.attemptSpan = attempt;
    return [traceparentOf(this.parent, attempt.spanId), this.parent.traceState];
  }

  firstByte(): void {
    const at = now();
    this.root.events.push({ name: 'first_token', at });
    this.attemptSpan?.events.push({ name: 'first_token', at });
  }

  /** The attempt failed before its answer (a retry may follow). */
  attemptFailed(kind: string, message: string): void {
    this.endAttempt({ kind, message });
  }

  end(status: number, outcome: RequestOutcome, usage: UsageCounts | undefined, error: string | undefined): void {
    if (this.ended) return;
    this.ended = true;
    if (this.attemptSpan !== undefined) this.attemptSpan.attributes['http.response.status_code'] = status;
    this.endAttempt(status >= 500 ? { kind: outcome, message: error ?? '' } : undefined);
    const root = this.root;
    root.attributes['http.response.status_code'] = status;
    root.attributes['kvroute.outcome'] = outcome;
    if (usage !== undefined) {
      root.attributes['gen_ai.usage.input_tokens'] = usage.prompt_tokens;
      root.attributes['kvroute.usage.cached_tokens'] = usage.cached_tokens;
    }
    root.end = now();
    root.events.push({ name: 'completion', at: root.end });
    if (status >= 500 || outcome === 'interrupted') {
      root.status = SpanStatusCode.ERROR;
      root.statusMessage = error ?? outcome;
    }
    this.spans.push(root);
    if (this.parent.sampled) this.finished({ parent: this.parent, spans: this.spans });
  }

  private endAttempt(failure: { kind: string; message: string } | undefined): void {
    const attempt = this.attemptSpan;
    if (attempt === undefined) return;
    this.attemptSpan = undefined;
    if (failure !== undefined) {
      attempt.attributes['error.type'] = failure.kind;
      attempt.status = SpanStatusCode.ERROR;
      attempt.statusMessage = failure.message;
    }
    attempt.end = now();
    this.spans.push(attempt);
  }
}
