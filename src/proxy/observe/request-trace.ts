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
 * Invariant: every span started here ends exactly once: an attempt at its failure or at the
 * request's end, the request at end(); calls after end() are ignored.
 */
import { SpanKind, SpanStatusCode, trace, type Context, type Span, type Tracer } from '@opentelemetry/api';

import type { RequestOutcome, UsageCounts } from './proxy-observer.js';
import { headersOfContext } from './trace-context.js';

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

export class RequestTrace {
  private attemptSpan: Span | undefined;
  private attempts = 0;
  private ended = false;

  constructor(
    private readonly tracer: Tracer,
    private readonly context: Context,
    private readonly span: Span,
  ) {}

  model(model: string): void {
    this.span.setAttribute('gen_ai.request.model', model);
  }

  routed(facts: RoutedFacts): void {
    if (this.ended) return;
    const attributes: Record<string, string | number> = {
      'kvroute.instance': facts.instance,
      'kvroute.reason': facts.reason,
      'kvroute.matched_blocks': facts.matchedBlocks,
      'kvroute.predicted_cached_tokens': facts.predictedCachedTokens,
      'kvroute.keys': facts.keys,
      'kvroute.policy': facts.policy,
    };
    if (facts.predictedTtftMs !== undefined) attributes['kvroute.predicted_ttft_ms'] = facts.predictedTtftMs;
    this.tracer.startSpan('kvroute.route', { kind: SpanKind.INTERNAL, attributes }, this.context).end();
  }

  /** An attempt leaves for `instance`: its span, and the traceparent/tracestate the engine gets. */
  attempt(instance: string): [string, string] {
    this.endAttempt(undefined);
    this.attempts += 1;
    const url = safeUrl(instance);
    this.attemptSpan = this.tracer.startSpan(
      'kvroute.upstream',
      {
        kind: SpanKind.CLIENT,
        attributes: {
          'kvroute.instance': instance,
          'kvroute.attempt': this.attempts,
          ...(url === undefined ? {} : { 'server.address': url.hostname, 'server.port': Number(url.port || 80) }),
        },
      },
      this.context,
    );
    return headersOfContext(trace.setSpan(this.context, this.attemptSpan));
  }

  firstByte(): void {
    this.span.addEvent('first_token');
    this.attemptSpan?.addEvent('first_token');
  }

  /** The attempt failed before its answer (a retry may follow). */
  attemptFailed(kind: string, message: string): void {
    this.endAttempt({ kind, message });
  }

  end(status: number, outcome: RequestOutcome, usage: UsageCounts | undefined, error: string | undefined): void {
    if (this.ended) return;
    this.ended = true;
    this.attemptSpan?.setAttribute('http.response.status_code', status);
    this.endAttempt(status >= 500 ? { kind: outcome, message: error ?? '' } : undefined);
    const span = this.span;
    span.setAttribute('http.response.status_code', status);
    span.setAttribute('kvroute.outcome', outcome);
    if (usage !== undefined) {
      span.setAttribute('gen_ai.usage.input_tokens', usage.prompt_tokens);
      span.setAttribute('kvroute.usage.cached_tokens', usage.cached_tokens);
    }
    span.addEvent('completion');
    if (status >= 500 || outcome === 'interrupted')
      span.setStatus({ code: SpanStatusCode.ERROR, message: error ?? outcome });
    span.end();
  }

  private endAttempt(failure: { kind: string; message: string } | undefined): void {
    const span = this.attemptSpan;
    if (span === undefined) return;
    this.attemptSpan = undefined;
    if (failure !== undefined) {
      span.setAttribute('error.type', failure.kind);
      span.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
    }
    span.end();
  }
}

function safeUrl(instance: string): URL | undefined {
  try {
    return new URL(instance);
  } catch {
    return undefined;
  }
}
