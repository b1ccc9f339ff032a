/**
 * What the proxy tells flow control about a request (src/proxy/exchange/flow-entry.ts): its cost
 * is the uncached prefill plus the expected output, which is the config's expectedOutputTokens or
 * the body's output cap (max_completion_tokens, else max_tokens) when that is lower. The state is
 * a stand-in holding just what flowEntry reads: the flow config, the router's match and the
 * session turns.
 */
import { describe, expect, it } from 'vitest';

import { resolveFlowConfig } from '../src/flow/flow-config.js';
import { SessionTurns } from '../src/flow/session-turns.js';
import { flowEntry } from '../src/proxy/exchange/flow-entry.js';
import type { ParsedRequest } from '../src/proxy/exchange/request-inputs.js';
import type { ProxyState } from '../src/proxy/proxy-state.js';

/** A state whose router holds `matched` leading blocks of every request on instance `a`. */
function stateWith(matched: number, config: unknown = undefined): ProxyState {
  return {
    admission: { flow: { flowConfig: resolveFlowConfig(config) } },
    router: { match: () => ({ a: matched }) },
    sessionTurns: new SessionTurns(),
  } as unknown as ProxyState;
}

/** A request of 1,000 input tokens in blocks of 32 tokens, with the body's output cap `maxTokens`. */
function request(maxTokens: number | undefined): ParsedRequest {
  return {
    model: 'm',
    route: { hashIds: new Float64Array(32), inputTokens: 1_000, blockTokens: 32 },
    body: Buffer.from('{}'),
    stream: false,
    priority: undefined,
    maxTokens,
  };
}

const IDENTITY = { tenant: 't', classRank: 1, deadlineMs: undefined };
const cost = (maxTokens: number | undefined, matched = 0, config?: unknown) =>
  flowEntry(request(maxTokens), IDENTITY, stateWith(matched, config), 0, 32).cost;

describe('flowEntry: the cost of a request', () => {
  it('counts the expected output, lowered to the body’s output cap', () => {
    expect(cost(undefined)).toBe(1_000 + 256);
    expect(cost(10)).toBe(1_000 + 10);
    expect(cost(0)).toBe(1_000);
    expect(cost(255)).toBe(1_000 + 255);
    // A cap above the expected output changes nothing: the expectation is already lower.
    expect(cost(256)).toBe(1_000 + 256);
    expect(cost(100_000)).toBe(1_000 + 256);
    expect(cost(100_000, 0, { expectedOutputTokens: 4_096 })).toBe(1_000 + 4_096);
    expect(cost(64, 0, { expectedOutputTokens: 4_096 })).toBe(1_000 + 64);
  });

  it('charges only the prefill the best-placed instance lacks', () => {
    expect(cost(10, 10)).toBe(1_000 - 10 * 32 + 10);
    expect(cost(undefined, 40)).toBe(256);
  });

  it('passes on the identity and the input tokens', () => {
    const entry = flowEntry(request(5), { tenant: 'acme', classRank: 0, deadlineMs: 50 }, stateWith(0), 0, 32);
    expect(entry).toMatchObject({ tenant: 'acme', classRank: 0, inputTokens: 1_000, deadlineMs: 50 });
  });
});
