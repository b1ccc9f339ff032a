/**
 * The proxy's side of flow control (src/flow/, docs/flow-control.md): one FlowController on the
 * wall clock, the one timer that refuses waiters past their deadline, and the ClientErrors of
 * every refusal. `--max-in-flight` requests are routed and forwarded at once; the next ones wait
 * in flow control's queue (priority, fair share between tenants, deadlines), at most
 * `--queue-size`. Rate limits refuse at once. Every refusal is a 429 with Retry-After (the openai
 * SDK backs off and retries on that) and an OpenAI-style body.
 *
 * Why queue at the router rather than leave it to the engines: every engine queues on its own,
 * so an overloaded fleet piles requests behind whichever engine the policy picked when they
 * arrived. Held here, a request is routed when a slot frees, against the fleet's state then,
 * and the slot goes to whoever flow control says is next.
 *
 * Contract with the exchange (the Admittable):
 * - enter() once, after the body is read and valid: 'go' (it holds a slot now when `limited`),
 *   'queued' (its admit() runs later, or expire() when its deadline passes) or a ClientError
 *   (refuse with it).
 * - Whoever holds a slot calls leave(tenant, inputTokens) exactly once, when it finishes however it finishes;
 *   that admits the waiters that may take the slot (admit() runs synchronously inside leave()).
 * - A queued request whose client goes away calls cancel(); it never held a slot.
 */
import { fleetPredictedTtftMs } from '../../core/fleet-ttft.js';
import type { Router } from '../../core/router.js';
import { scaleRateLimits, type FlowConfig } from '../../flow/flow-config.js';
import {
  FlowController,
  expiredRefusal,
  type FlowDecision,
  type FlowEntry,
  type FlowRefusal,
} from '../../flow/flow-controller.js';
import type { QueuedRequest } from '../../flow/queued-request.js';
import type { SharedSlots } from '../../flow/slot-counter.js';
import { ClientError } from '../server/error-body.js';

export interface Admittable {
  /** A slot is free: route and forward now. */
  admit(): void;
  /** Its deadline passed without a slot, or the proxy is closing: refuse with this error. */
  expire(error: ClientError): void;
}

export interface AdmissionLimits {
  /** Requests routed and forwarded at once; 0: no limit. */
  maxInFlight: number;
  /** Requests that may wait for a slot; past it, 429 at once. */
  queueSize: number;
  /** Longest wait for a slot of a class without its own deadline, ms. */
  queueTimeoutMs: number;
  /** The slot count the threads of one `serve --threads N` share (slot-counter.ts); absent: this proxy's own. */
  flowSlots?: SharedArrayBuffer | undefined;
}

export type AdmissionRefusal = 'queue_full' | 'queue_timeout' | 'rate_limited' | 'shed';

export class Admission {
  readonly flow: FlowController<Admittable>;
  /** Refused since start, by reason. */
  readonly refused: Record<AdmissionRefusal, number> = { queue_full: 0, queue_timeout: 0, rate_limited: 0, shed: 0 };
  private readonly waiting = new Map<Admittable, QueuedRequest<Admittable>>();
  /** drain() is running: a leave() inside an admit() leaves the next waiter to its loop. */
  private draining = false;
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;

  /**
   * `config` holds whole-process limits; this admission enforces `share` of its rate limits (a
   * thread of `serve --threads N` takes 1/N; thread-limits.ts). `router`: the fleet load
   * shedding predicts the TTFT of; without it nothing is shed. `shared`: the slot count of a
   * process's threads, when this is the main thread's admission, which owns the one queue
   * (threads/flow-hub.ts); it publishes the queue's length there after each change.
   */
  constructor(
    protected readonly limits: AdmissionLimits,
    private flowConfig: FlowConfig,
    private readonly share = 1,
    router?: () => Router,
    private readonly shared?: SharedSlots,
  ) {
    // Load shedding predicts on the router's fleet (read at each prediction: it may be made after this).
    const predict = router === undefined ? undefined : (tokens: number) => fleetPredictedTtftMs(router(), tokens);
    this.flow = new FlowController<Admittable>(scaleRateLimits(flowConfig, share), limits, predict, shared);
  }

  /** Flow control's config as set: whole-process limits (the admin API shows it, threads copy it). */
  get config(): FlowConfig {
    return this.flowConfig;
  }

  /** A live change: weights, bounds and limits from the next decision; the class list must stay (FlowController.configure). */
  configure(config: FlowConfig): void {
    this.flow.configure(scaleRateLimits(config, this.share), performance.now());
    this.flowConfig = config;
    this.drain();
  }

  /** Requests waiting for a slot now. */
  get queued(): number {
    return this.flow.queued;
  }

  /** Requests hold slots (and so must leave()). */
  get limited(): boolean {
    return this.limits.maxInFlight > 0;
  }

  enter(who: Admittable, entry: FlowEntry): 'go' | 'queued' | ClientError {
    return this.decide(who, entry, this.flow.enter(who, entry, performance.now()));
  }

  /** A request another thread let in past shedding and its rate limits: a slot or the queue (flow-hub.ts). */
  enterChecked(who: Admittable, entry: FlowEntry): 'go' | 'queued' | ClientError {
    return this.decide(who, entry, this.flow.enterSlot(who, entry, performance.now()));
  }

  private decide(who: Admittable, entry: FlowEntry, decision: FlowDecision<Admittable>): 'go' | 'queued' | ClientError {
    if (decision.kind === 'go') return 'go';
    if (decision.kind === 'refused') {
      this.refused[decision.refusal.cause]++;
      return refusalError(decision.refusal, entry.tenant, this.limits);
    }
    this.waiting.set(who, decision.request);
    const evicted = decision.evicted;
    if (evicted !== undefined) {
      // The full queue's longest tenant made room (FlowController): its newest request is refused.
      this.waiting.delete(evicted.payload);
      this.refused.queue_full++;
      evicted.payload.expire(refusalError({ cause: 'queue_full', retryAfterMs: 1_000 }, evicted.tenant, this.limits));
    }
    this.armTimer();
    this.publish();
    // Another thread may have given a slot back while this one queued (SharedSlots' hazard).
    if (this.shared !== undefined) this.drain();
    return 'queued';
  }

  /**
   * A slot holder of `tenant` that entered with `inputTokens` finished: the slot goes to the next
   * waiter that may take it, if any. (`who` matters to a thread's admission: thread-admission.ts.)
   */
  leave(tenant: string, inputTokens: number, who?: Admittable): void {
    void who;
    if (!this.limited) return;
    this.flow.leave(tenant, inputTokens, performance.now());
    this.drain();
  }

  /** A waiter's client went away (a new head may take the headroom). */
  cancel(who: Admittable): void {
    const request = this.waiting.get(who);
    if (request === undefined) return;
    this.waiting.delete(who);
    this.flow.cancel(request);
    this.drain();
  }

  /**
   * Admits every waiter flow control lets take a free slot (also when another thread gave one
   * back: flow-hub.ts). An admitted waiter may finish at once (no healthy backend) and leave()
   * from inside admit(): that frees its slot and returns, and this loop's next call takes the
   * slot, so a long queue never recurses.
   */
  drain(): void {
    if (this.draining) return;
    this.draining = true;
    try {
      for (let next = this.flow.next(performance.now()); next !== undefined; next = this.flow.next(performance.now())) {
        this.waiting.delete(next.payload);
        next.payload.admit();
      }
    } finally {
      this.draining = false;
      this.publish();
    }
  }

  /** The queue's length, for the threads' fast path (SharedSlots.waiting). */
  private publish(): void {
    if (this.shared !== undefined) this.shared.waiting = this.flow.queued;
  }

  /** Refuses every waiter (the proxy is closing). */
  close(error: ClientError): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    for (const [who, request] of [...this.waiting]) {
      this.waiting.delete(who);
      this.flow.cancel(request);
      who.expire(error);
    }
    this.publish();
  }

  /** One timer, at the earliest deadline among waiters (requests share it, so n waiters cost one). */
  private armTimer(): void {
    const at = this.flow.nextDeadline();
    if (at === undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
      this.timerAt = Infinity;
      return;
    }
    if (at >= this.timerAt && this.timer !== undefined) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => this.expireDue(), Math.max(0, Math.ceil(at - performance.now())));
  }

  private expireDue(): void {
    this.timer = undefined;
    this.timerAt = Infinity;
    for (const request of this.flow.expired(performance.now())) {
      this.waiting.delete(request.payload);
      this.refused.queue_timeout++;
      request.payload.expire(refusalError(expiredRefusal(), request.tenant, this.limits, request));
    }
    this.drain();
    this.armTimer();
  }
}

/**
 * The error of a refusal with its Retry-After: 429 for the tenant's own limits and the queue,
 * 503 for shedding (the fleet, not the client, is over); the message names the limit, never the
 * API key.
 */
export function refusalError(
  refusal: FlowRefusal,
  tenant: string,
  limits: AdmissionLimits,
  waited?: QueuedRequest<unknown>,
): ClientError {
  let message: string;
  switch (refusal.cause) {
    case 'rate_limited':
      message = `tenant ${tenant} is over its ${refusal.limit === 'rpm' ? 'requests' : 'tokens'} per minute limit; retry after ${Math.ceil(refusal.retryAfterMs / 1000)} s`;
      break;
    case 'queue_full':
      message = `the proxy is at --max-in-flight (${limits.maxInFlight}) with ${limits.queueSize} requests waiting; retry shortly`;
      break;
    case 'queue_timeout':
      message = `no slot came free within the request's deadline (${waited === undefined ? limits.queueTimeoutMs : Math.round(waited.deadline - waited.enqueuedAt)} ms); retry shortly`;
      break;
    case 'shed':
      message = `the fleet is overloaded: its predicted time to first token (${Math.round(refusal.predictedMs)} ms) is past this priority class's bound (${Math.round(refusal.boundMs)} ms); retry after ${Math.ceil(refusal.retryAfterMs / 1000)} s`;
      break;
  }
  const error = new ClientError(refusal.cause === 'shed' ? 503 : 429, message, refusal.cause);
  error.retryAfterSeconds = Math.max(1, Math.ceil(refusal.retryAfterMs / 1000));
  return error;
}
