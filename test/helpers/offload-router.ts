/**
 * Forces the routing core's `+offload` decision onto a chosen pair, so the proxy's two-phase
 * exchange is driven deterministically (whatever the cost model would say): every route() of the
 * proxy's router decides `offload` with the decode on `decode` and the prefill on `prefill`, both
 * tickets real. test/offload-e2e.test.ts runs the real layer.
 *
 * How: the real route() runs twice in one synchronous turn, with every other routable instance
 * drained, first for the decode (its ticket and decision are the decision's), then for the prefill
 * (its ticket is `offload.prefillTicket`, so the prefill's load, firstToken/complete/abort land in
 * the router as the core will have them); the drains are undone before route() returns. The
 * router's `decision` is replaced by a view of the decode's decision plus that offload part.
 * When either instance is not routable (breaker open), or `when` says no, route() runs as it is
 * with `offload.outcome` 'off'.
 */
import { NO_OFFLOAD } from '../../src/core/decision-view.js';
import type { Proxy } from '../../src/proxy/server/proxy-server.js';
import type { Decision, OffloadDecision, RouteRequest } from '../../src/core/types.js';

const OFF = NO_OFFLOAD;

export interface ForcedOffload {
  /** The offload part of the last decision. */
  readonly last: OffloadDecision;
  /** Puts the router back as it was. */
  restore(): void;
}

export function forceOffload(
  proxy: Proxy,
  pair: { decode: string; prefill: string },
  when: (request: RouteRequest) => boolean = () => true,
): ForcedOffload {
  const router = proxy.router;
  const real = router.decision;
  const route = router.route.bind(router);
  let decision = { instance: real.instance, index: real.index, reason: real.reason, ticket: real.ticket, predicted: 0 };
  let offload: OffloadDecision = OFF;
  const view: Decision = {
    get instance() {
      return decision.instance;
    },
    get index() {
      return decision.index;
    },
    get reason() {
      return decision.reason;
    },
    get ticket() {
      return decision.ticket;
    },
    get matchedBlocks() {
      return 0;
    },
    get predictedCachedTokens() {
      return decision.predicted;
    },
    predictedUncachedTokens: 0,
    pendingPrefillTokens: 0,
    requestsAhead: 0,
    get offload() {
      return offload;
    },
  };
  const keep = (ticket: number): number => {
    decision = {
      instance: real.instance,
      index: real.index,
      reason: real.reason,
      ticket,
      predicted: real.predictedCachedTokens,
    };
    return ticket;
  };
  Object.defineProperty(router, 'decision', { value: view, configurable: true, writable: true });
  router.route = (request: RouteRequest): number => {
    const routable = proxy.state
      .list()
      .filter((b) => b.healthy && !b.drained)
      .map((b) => b.id);
    offload = OFF;
    if (!routable.includes(pair.decode) || !routable.includes(pair.prefill) || !when(request))
      return keep(route(request));
    for (const id of routable) if (id !== pair.decode) router.drainInstance(id);
    try {
      const ticket = keep(route(request));
      router.drainInstance(pair.decode);
      router.resumeInstance(pair.prefill);
      const prefillTicket = route(request);
      offload = {
        outcome: 'offload',
        prefillInstance: pair.prefill,
        prefillIndex: real.index,
        prefillTicket,
        interferenceMs: 589,
        transferMs: 293,
        extraPrefillMs: 0,
        coldPair: true,
      };
      return ticket;
    } finally {
      for (const id of routable) router.resumeInstance(id);
    }
  };
  return {
    get last() {
      return offload;
    },
    restore() {
      Object.defineProperty(router, 'decision', { value: real, configurable: true, writable: true });
      router.route = route;
    },
  };
}
