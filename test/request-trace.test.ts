/**
 * A request's trace (src/proxy/observe/request-trace.ts), as its encoded spans say it
 * (otlp-proto.ts, decoded): the tree and its invariants (every span ends once, children under
 * the request), a retry's second attempt, a client's unsampled trace recorded nowhere but still
 * propagated, and the W3C context parsing (trace-context.ts).
 */
import { describe, expect, it } from 'vitest';

import { encodeRequestSpans, otlpProtoBody } from '../src/proxy/observe/otlp-proto.js';
import { RequestTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';
import { decodeTraceRequest, type DecodedSpan } from './helpers/otlp-decode.js';

const CLIENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7';
const facts = {
  instance: 'http://10.0.0.1:8000',
  reason: 'cache_hit',
  matchedBlocks: 3,
  predictedCachedTokens: 48,
  predictedTtftMs: undefined,
  keys: 'text',
  policy: 'min_ttft',
};

const spansOf = (t: RequestTrace): DecodedSpan[] =>
  decodeTraceRequest(otlpProtoBody([encodeRequestSpans([t])], { resource: {}, scopeName: 'k', scopeVersion: '' }))
    .spans;
const attrs = (s: DecodedSpan) =>
  Object.fromEntries(
    s.attributes.map((a) => [a.key, a.value.stringValue ?? Number(a.value.intValue ?? a.value.doubleValue)]),
  );

describe('a request trace', () => {
  it('records the request, its decisions and attempts (a retry is a second), each ending once', () => {
    const finished: RequestTrace[] = [];
    const t = new RequestTrace(
      (f) => finished.push(f),
      parentFromHeaders(`${CLIENT}-01`, 'v=1'),
      'POST',
      '/v1/messages',
    );
    t.model('claude-x');
    t.routed(facts);
    const first = t.attempt(facts.instance);
    expect(first).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(t.parent.traceState).toBe('v=1');
    t.attemptFailed('connect', 'ECONNREFUSED');
    t.routed({ ...facts, instance: 'http://10.0.0.2:8000', reason: 'retry' });
    const second = t.attempt('http://10.0.0.2:8000');
    t.firstByte();
    t.end(200, 'success', { prompt_tokens: 100, cached_tokens: 48 }, undefined);
    t.end(500, 'error', undefined, 'again'); // ignored
    t.routed(facts); // ignored
    expect(finished).toEqual([t]);
    const spans = spansOf(t);
    const root = spans.at(-1)!;
    expect(root).toMatchObject({
      name: 'POST /v1/messages',
      parentSpanId: '00f067aa0ba902b7',
      kind: 2,
      traceState: 'v=1',
    });
    expect(root.status).toBeUndefined();
    expect(attrs(root)).toMatchObject({
      'http.response.status_code': 200,
      'gen_ai.request.model': 'claude-x',
      'gen_ai.usage.input_tokens': 100,
      'kvroute.usage.cached_tokens': 48,
      'kvroute.outcome': 'success',
    });
    expect(root.events.map((e) => e.name)).toEqual(['first_token', 'completion']);
    const attempts = spans.filter((s) => s.name === 'kvroute.upstream');
    expect(attempts.map((a) => attrs(a)['kvroute.attempt'])).toEqual([1, 2]);
    expect(attempts[0]!.status).toEqual({ code: 2, message: 'ECONNREFUSED' });
    expect(attrs(attempts[0]!)).toMatchObject({
      'error.type': 'connect',
      'server.address': '10.0.0.1',
      'server.port': 8000,
    });
    expect(attrs(attempts[1]!)).toMatchObject({ 'http.response.status_code': 200 });
    expect(attempts[1]!.events.map((e) => e.name)).toEqual(['first_token']);
    expect(second).toContain(attempts[1]!.spanId);
    expect(spans.filter((s) => s.name === 'kvroute.route').map((s) => attrs(s)['kvroute.reason'])).toEqual([
      'cache_hit',
      'retry',
    ]);
    for (const s of spans.slice(0, -1)) expect(s.parentSpanId).toBe(root.spanId);
    for (const s of spans) expect(BigInt(s.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(s.startTimeUnixNano));
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
  });

  it('marks a 5xx or a cut stream as an error on the request and its attempt', () => {
    const t = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
    t.attempt(facts.instance);
    t.end(502, 'error', undefined, 'engine answered 502');
    const spans = spansOf(t);
    expect(spans.at(-1)!.status).toEqual({ code: 2, message: 'engine answered 502' });
    expect(spans[0]!.status).toEqual({ code: 2, message: 'engine answered 502' });
    const cut = new RequestTrace(() => {}, parentFromHeaders('', ''), 'POST', '/v1/chat/completions');
    cut.end(200, 'interrupted', undefined, undefined);
    expect(spansOf(cut).at(-1)!.status).toEqual({ code: 2, message: 'interrupted' });
  });

  it("records nothing of a client's unsampled trace, and the engine still gets its traceparent", () => {
    const finished: RequestTrace[] = [];
    const t = new RequestTrace(
      (f) => finished.push(f),
      parentFromHeaders(`${CLIENT}-00`, ''),
      'POST',
      '/v1/chat/completions',
    );
    const traceparent = t.attempt(facts.instance);
    expect(traceparent).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-00$/);
    t.end(200, 'success', undefined, undefined);
    expect(finished).toHaveLength(0);
  });

  it('starts a new trace for a missing or malformed traceparent, and keeps only a valid tracestate', () => {
    for (const bad of [
      '',
      'not-a-trace',
      '00-00000000000000000000000000000000-00f067aa0ba902b7-01',
      `ff-${CLIENT.slice(3)}-01`,
    ]) {
      const parent = parentFromHeaders(bad, 'v=1');
      expect(parent).toMatchObject({ spanId: '', sampled: true, traceState: '' });
      expect(parent.traceId).toMatch(/^[0-9a-f]{32}$/);
      expect(parent.traceId).not.toBe('0'.repeat(32));
    }
    expect(parentFromHeaders(`${CLIENT}-01`, 'a=1, bad key=2 ,b=3').traceState).toBe('a=1,b=3');
  });
});
