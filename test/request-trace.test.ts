/**
 * A request's span records (src/proxy/observe/request-trace.ts) and the W3C context they hang on
 * (trace-context.ts): the tree and its invariants (every span ends once, children under the
 * request), a retry's second attempt, and a client's unsampled trace recorded nowhere but still
 * propagated.
 */
import { describe, expect, it } from 'vitest';

import { RequestTrace, type FinishedTrace } from '../src/proxy/observe/request-trace.js';
import { parentFromHeaders } from '../src/proxy/observe/trace-context.js';

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

describe('a request trace', () => {
  it('records the request, its decisions and attempts (a retry is a second), each ending once', () => {
    const finished: FinishedTrace[] = [];
    const t = new RequestTrace(
      (f) => finished.push(f),
      parentFromHeaders(`${CLIENT}-01`, 'v=1'),
      'POST',
      '/v1/messages',
    );
    t.routed(facts);
    const [first, state] = t.attempt(facts.instance);
    expect(first).toMatch(/^00-4bf92f3577b34da6a3ce929d0e0e4736-[0-9a-f]{16}-01$/);
    expect(state).toBe('v=1');
    t.attemptFailed('connect', 'ECONNREFUSED');
    t.routed({ ...facts, instance: 'http://10.0.0.2:8000', reason: 'retry' });
    const [second] = t.attempt('http://10.0.0.2:8000');
    t.firstByte();
    t.end(200, 'success', { prompt_tokens: 100, cached_tokens: 48, completion_tokens: 5 } as never, undefined);
    t.end(500, 'error', undefined, 'again'); // ignored
    expect(finished).toHaveLength(1);
    const spans = finished[0]!.spans;
    const root = spans.at(-1)!;
    expect(root).toMatchObject({ name: 'POST /v1/messages', parentSpanId: '00f067aa0ba902b7', status: 0 });
    expect(root.attributes).toMatchObject({ 'http.response.status_code': 200, 'gen_ai.usage.input_tokens': 100 });
    expect(root.events.map((e) => e.name)).toEqual(['first_token', 'completion']);
    const attempts = spans.filter((s) => s.name === 'kvroute.upstream');
    expect(attempts.map((a) => a.attributes['kvroute.attempt'])).toEqual([1, 2]);
    expect(attempts[0]).toMatchObject({ status: 2, statusMessage: 'ECONNREFUSED' });
    expect(attempts[0]!.attributes).toMatchObject({
      'error.type': 'connect',
      'server.address': '10.0.0.1',
      'server.port': 8000,
    });
    expect(second).toContain(attempts[1]!.spanId);
    expect(spans.filter((s) => s.name === 'kvroute.route')).toHaveLength(2);
    for (const s of spans.slice(0, -1)) expect(s.parentSpanId).toBe(root.spanId);
    for (const s of spans) expect(s.end).toBeGreaterThanOrEqual(s.start);
    expect(new Set(spans.map((s) => s.spanId)).size).toBe(spans.length);
  });

  it("records nothing of a client's unsampled trace, and the engine still gets its traceparent", () => {
    const finished: FinishedTrace[] = [];
    const t = new RequestTrace(
      (f) => finished.push(f),
      parentFromHeaders(`${CLIENT}-00`, ''),
      'POST',
      '/v1/chat/completions',
    );
    const [traceparent] = t.attempt(facts.instance);
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
