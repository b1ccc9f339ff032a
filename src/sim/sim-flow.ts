/**
 * Flow control in the simulator (docs/flow-control.md "In the simulator"): the proxy's own
 * FlowController (src/flow/), on the virtual clock, between a request's arrival at the router
 * and its route. The simulator asks `enter()` at arrival; a request that must wait is handed back
 * by `next()` when a slot frees (a request that held one completes), or refused by `expired()`
 * past its deadline.
 *
 * A request's tenant and class are its trace fields (`tenant`, `priority`; absent: the config's
 * default tenant and class; an unknown class is an error naming the session and turn). Its cost
 * is its uncached prefill as the router would match it now plus the config's expected output,
 * read only when it must queue, as in the proxy (exchange/flow-entry.ts). A session's turn after
 * its previous one ended within a minute is a continuation (SessionTurns), as in the proxy.
 * Times here are seconds (the simulator's); the controller is given ms.
 */
import { invalidValue } from '../core/errors.js';
import { fleetPredictedTtftMs } from '../core/fleet-ttft.js';
import type { Router } from '../core/router.js';
import { classNames, classRank, resolveFlowConfig, type FlowConfig } from '../flow/flow-config.js';
import { FlowController, queueCost, type FlowDecision } from '../flow/flow-controller.js';
import type { QueuedRequest } from '../flow/queued-request.js';
import { SessionTurns } from '../flow/session-turns.js';
import type { RequestRecord } from '../trace/records.js';
import type { TraceRequest } from '../trace/types.js';

export interface SimFlowOptions {
  /** A FlowConfig or its raw form (a YAML `flow:` section); default: every default. */
  config?: unknown;
  /** Requests routed and not yet complete, fleet-wide; past it they queue. 0: no limit (rate limits and shedding only). */
  maxInFlight: number;
  /** Requests that may wait (default 1,000,000: the simulator refuses only on deadlines). */
  queueSize?: number;
  /** A class's deadline without its own deadlineMs, ms (default 30,000, the proxy's). */
  queueTimeoutMs?: number;
}

export class SimFlow {
  readonly config: FlowConfig;
  private readonly controller: FlowController<TraceRequest>;
  private readonly turns = new SessionTurns();

  /**
   * `router()`: the router whose fleet load shedding predicts the TTFT of (the first replica's;
   * read at each prediction, so it may be made after this).
   */
  constructor(options: SimFlowOptions, router: () => Router) {
    if (!Number.isSafeInteger(options.maxInFlight) || options.maxInFlight < 0)
      throw invalidValue('flow.maxInFlight', 'an integer >= 0', options.maxInFlight);
    this.config = resolveFlowConfig(options.config);
    this.controller = new FlowController(
      this.config,
      {
        maxInFlight: options.maxInFlight,
        queueSize: options.queueSize ?? 1_000_000,
        queueTimeoutMs: options.queueTimeoutMs ?? 30_000,
      },
      (tokens) => fleetPredictedTtftMs(router(), tokens),
    );
  }

  /** The request arrives at the router at `now` (s): route it at once, queue it, or refuse it. */
  enter(request: TraceRequest, router: Router, now: number): FlowDecision<TraceRequest> {
    const name = request.priority ?? this.config.defaultClass;
    const rank = classRank(this.config, name);
    if (rank === undefined)
      throw invalidValue(
        `priority of session ${request.session} turn ${request.turn}`,
        `one of ${classNames(this.config.classes)}`,
        name,
      );
    const expectedOutput = this.config.expectedOutputTokens;
    const continuation = !request.sessionless && this.turns.arriving(request.session, now * 1000);
    return this.controller.enter(
      request,
      {
        tenant: request.tenant ?? this.config.defaultTenant,
        classRank: rank,
        inputTokens: request.inputLength,
        continuation,
        get cost(): number {
          const matched = router.match({ hashIds: request.hashIds });
          return queueCost(request.inputLength, matched, request.blockSize, expectedOutput);
        },
      },
      now * 1000,
    );
  }

  /** A request that held a slot completed at `now` (s): its slot is free (route the waiters next() gives). */
  completed(request: TraceRequest, now: number): void {
    if (!request.sessionless) this.turns.ended(request.session, now * 1000);
    const tenant = request.tenant ?? this.config.defaultTenant;
    this.controller.chargeOutput(tenant, Math.max(1, request.outputLength), now * 1000);
    this.controller.leave(tenant, request.inputLength, now * 1000);
  }

  /** The next waiter to route now (s), holding a slot; undefined when none may go. */
  next(now: number): QueuedRequest<TraceRequest> | undefined {
    return this.controller.next(now * 1000);
  }

  /** The earliest deadline among waiters, s; undefined when none waits. */
  nextDeadline(): number | undefined {
    const ms = this.controller.nextDeadline();
    return ms === undefined ? undefined : ms / 1000;
  }

  /**
   * The waiters past their deadline at `now` (s), removed (then route the waiters next() gives:
   * a new head may take the headroom). Hazard: `now` comes back from
   * nextDeadline()'s ms / 1000, and (d / 1000) × 1000 may fall an ulp short of d, so the
   * comparison allows a nanosecond; without it the deadline event would re-arm itself forever.
   */
  expired(now: number): Array<QueuedRequest<TraceRequest>> {
    return this.controller.expired(now * 1000 + 1e-6);
  }

  /** What flow control adds to a routed request's record: its tenant, class and wait (s). */
  recordFields(request: TraceRequest, queuedS: number): Pick<RequestRecord, 'tenant' | 'priority' | 'queued_s'> {
    return {
      tenant: request.tenant ?? this.config.defaultTenant,
      priority: request.priority ?? this.config.defaultClass,
      queued_s: queuedS,
    };
  }

  /** The record of a request flow control refused at `now` (s): failed (503 when shed, else 429; `cause`), never routed. */
  refusalRecord(request: TraceRequest, arrivedAt: number, now: number, cause: string): RequestRecord {
    return {
      session: request.session,
      turn: request.turn,
      instance: -1,
      dispatch: arrivedAt,
      first_token: now,
      finish: now,
      input_tokens: request.inputLength,
      cached_tokens: 0,
      output_tokens: 0,
      overlapped: false,
      preemptions: 0,
      status: cause === 'shed' ? 503 : 429,
      error: cause,
      ...this.recordFields(request, now - arrivedAt),
    };
  }
}
