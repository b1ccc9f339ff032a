/**
 * What flow control is told about a request at admission (src/flow/flow-controller.ts): its
 * tenant and class, its input tokens (the tenant's token bucket pays them), whether it continues
 * a session whose turn just ended, and its cost for fair queueing.
 *
 * The cost is the request's uncached prefill (its input tokens less the longest prefix any
 * instance holds, from router.match()) plus the output it is expected to make: the config's
 * `expectedOutputTokens`, or the body's output cap (`max_completion_tokens`, else `max_tokens`)
 * when that is lower, since the engine stops there. It is a getter: flow control reads it only
 * for a request that must queue, so a request that finds a free slot never pays for the match.
 */
import { queueCost, type FlowEntry } from '../../flow/flow-controller.js';
import type { FlowIdentity } from '../../flow/flow-identity.js';
import type { ProxyState } from '../proxy-state.js';
import type { ParsedRequest } from './request-inputs.js';

export function flowEntry(
  parsed: ParsedRequest,
  identity: FlowIdentity,
  state: ProxyState,
  now: number,
  blockSize: number,
): FlowEntry {
  const route = parsed.route;
  const session = route.session === undefined ? '' : String(route.session);
  const blockTokens = route.blockTokens ?? blockSize;
  const inputTokens = route.inputTokens ?? (route.hashIds?.length ?? 0) * blockTokens;
  const configured = state.admission.flow.flowConfig.expectedOutputTokens;
  const expectedOutput = parsed.maxTokens === undefined ? configured : Math.min(parsed.maxTokens, configured);
  return {
    tenant: identity.tenant,
    classRank: identity.classRank,
    inputTokens,
    continuation: session !== '' && state.sessionTurns.arriving(session, now),
    deadlineMs: identity.deadlineMs,
    get cost(): number {
      return queueCost(inputTokens, matched(parsed, state), blockTokens, expectedOutput);
    },
  };
}

/** The router's match of the request, or null when it cannot match it (its model has no instance). */
function matched(parsed: ParsedRequest, state: ProxyState): Record<string, number> | null {
  try {
    return state.router.match(parsed.route);
  } catch {
    return null;
  }
}
