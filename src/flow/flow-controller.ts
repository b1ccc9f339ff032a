/**
 * Flow control (docs/flow-control.md): who gets a slot when the fleet is full. One
 * FlowController decides for the proxy (wall clock) and the simulator (virtual time); it holds
 * no timers, every call takes `now` (ms).
 *
 * A request enters with its tenant, class, cost and input tokens:
 * 0. **shedding** (load-shedder.ts, when configured): past its class's bound on the fleet's
 *    predicted TTFT it is refused at once, `shed` (503, Retry-After);
 * 1. **rate limits** (rate-limits.ts): past its tenant's requests or tokens per minute it is
 *    refused at once, `rate_limited` (429, Retry-After when the bucket refills);
 * 2. **a slot** (`maxInFlight`; 0: no limit): taken at once when one is free and nobody waits,
 *    except the **headroom**: the last floor(maxInFlight × headroom) free slots go only to a tenant
 *    holding no more than its share (of the prompt tokens holding slots, by its weight among the
 *    tenants active now; slot-shares.ts). So a flood that fills the fleet leaves a few slots free, and a
 *    quiet tenant's request takes one at once rather than waiting for a completion;
 * 3. **the queue** (fair-queue.ts) otherwise: past `queueSize` the tenant with the most waiting
 *    (by weight) loses its newest request (`queue_full`, 429) to make room, or the newcomer is
 *    refused when that is its own tenant; then it waits for a slot in priority, fair-share and deadline order; past its deadline it leaves
 *    refused `queue_timeout` (429).
 * Whoever holds a slot gives it back once (leave()); the caller then takes waiters with next()
 * until it returns undefined, and does the same after cancel(), expired() and configure().
 * Invariants: active ≤ maxInFlight; while requests wait, either no slot is free, or only
 * headroom slots are and every waiter's tenant holds more than its share (as of the last
 * decision: shares move as tenants come and go, and the next decision catches up). So a
 * newcomer within its share takes a headroom slot without passing anyone entitled to it.
 *
 * Configuration changes apply live (configure()): weights and starvation bounds from the next
 * dispatch, rate limits keeping what each bucket holds; the class list itself is fixed for the
 * controller's life (requests already queued carry their class rank).
 */
import { FairQueue } from './fair-queue.js';
import { LoadShedder, type ShedRefusal } from './load-shedder.js';
import type { FlowConfig, FlowTenant } from './flow-config.js';
import type { QueuedRequest } from './queued-request.js';
import { RateLimits, type RateLimit } from './rate-limits.js';
import { LocalSlots, type SlotCounter } from './slot-counter.js';
import { SlotShares } from './slot-shares.js';

export interface FlowLimits {
  /** Requests holding a slot at once; 0: no limit (nothing ever queues). */
  maxInFlight: number;
  /** Requests that may wait; past it, queue_full. */
  queueSize: number;
  /** Longest wait of a class without its own deadlineMs, ms. */
  queueTimeoutMs: number;
}

export interface FlowEntry {
  tenant: string;
  classRank: number;
  /** Token-equivalents fair queueing charges (uncached prefill + expected output). */
  cost: number;
  /** Input tokens the tenant's token bucket pays on entry. */
  inputTokens: number;
  /** A session's next turn after its previous one ended: it keeps its place (class-queue.ts). */
  continuation?: boolean;
  /** The client's own bound on the wait, ms (the deadline header); the class's applies when shorter. */
  deadlineMs?: number;
}

export type FlowRefusalCause = 'rate_limited' | 'queue_full' | 'queue_timeout' | 'shed';

export type FlowRefusal = ShedRefusal | QueueRefusal;

export interface QueueRefusal {
  cause: Exclude<FlowRefusalCause, 'shed'>;
  /** Which limit, for `rate_limited`. */
  limit?: RateLimit;
  /** When the same request could pass, ms from now (Retry-After). */
  retryAfterMs: number;
}

export type FlowDecision<T> =
  | { kind: 'go' }
  /** `evicted`: a full queue's longest tenant's newest request, refused (queue_full) to make room (fair-queue.ts victim). */
  | { kind: 'queued'; request: QueuedRequest<T>; evicted?: QueuedRequest<T> }
  | { kind: 'refused'; refusal: FlowRefusal };

export class FlowController<T> {
  private config: FlowConfig;
  private readonly queue: FairQueue<T>;
  private readonly rates: RateLimits;
  private readonly shares: SlotShares;
  private readonly shedder: LoadShedder | undefined;

  /**
   * `predictTtftMs(typicalTokens)`: the fleet's predicted TTFT for load shedding
   * (src/core/fleet-ttft.ts); without it nothing is shed, whatever the config says.
   */
  constructor(
    config: FlowConfig,
    private readonly limits: FlowLimits,
    predictTtftMs?: (typicalTokens: number) => number | undefined,
    /** The slot count: this controller's own, or one shared by the threads of a process (slot-counter.ts). */
    private readonly slots: SlotCounter = new LocalSlots(),
  ) {
    this.config = config;
    this.queue = new FairQueue<T>(
      config.classes.length,
      (rank) => this.config.classes[rank]!.starveAfterMs,
      (tenant) => this.tenant(tenant).weight,
    );
    this.rates = new RateLimits((tenant) => this.tenant(tenant));
    this.shares = new SlotShares((tenant) => this.tenant(tenant).weight);
    this.shedder = predictTtftMs === undefined ? undefined : new LoadShedder(predictTtftMs);
  }

  get flowConfig(): FlowConfig {
    return this.config;
  }

  /** Requests holding a slot. */
  get active(): number {
    return this.slots.value;
  }

  /** Slots only a tenant within its share may take (the headroom). */
  get headroom(): number {
    return Math.floor(this.limits.maxInFlight * this.config.headroom);
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.queue.size;
  }

  get limited(): boolean {
    return this.limits.maxInFlight > 0;
  }

  /** The tenant's settings: its own, else the defaults for unlisted tenants. */
  tenant(name: string): FlowTenant {
    return this.config.tenants[name] ?? this.config.tenantDefaults;
  }

  /** [tenant, class rank, requests waiting] of every tenant with requests waiting (metrics). */
  depths(): IterableIterator<[string, number, number]> {
    return this.queue.depths();
  }

  /** What the tenant's rate-limit buckets hold now (metrics, admin API). */
  remaining(tenant: string, now: number): { requests?: number; tokens?: number } {
    return this.rates.remaining(tenant, now);
  }

  /** Tenants whose rate-limit buckets are not full now, and what they hold (RateLimits.drawn). */
  drawn(now: number): IterableIterator<[string, number | undefined, number | undefined]> {
    return this.rates.drawn(now);
  }

  /** The fleet's predicted TTFT shedding decides on now, ms (admin API); undefined: shedding off or no prediction. */
  predictedTtftMs(now: number): number | undefined {
    const shedding = this.config.shedding;
    return shedding === undefined ? undefined : this.shedder?.predictedTtftMs(shedding, now);
  }

  enter(payload: T, entry: FlowEntry, now: number): FlowDecision<T> {
    const refusal = this.check(entry, now);
    return refusal === undefined ? this.enterSlot(payload, entry, now) : { kind: 'refused', refusal };
  }

  /** Steps 0 and 1 alone: shedding and the tenant's rate limits (paid when it passes). */
  check(entry: FlowEntry, now: number): FlowRefusal | undefined {
    const shed = this.shedder?.check(this.config, entry.classRank, now);
    if (shed !== undefined) return shed;
    const rate = this.rates.admit(entry.tenant, entry.inputTokens, now);
    return rate === undefined ? undefined : { cause: 'rate_limited', ...rate };
  }

  /** Steps 2 and 3 alone: a slot, or the queue (a thread checked the rest: thread-admission.ts). */
  enterSlot(payload: T, entry: FlowEntry, now: number): FlowDecision<T> {
    if (this.limits.maxInFlight === 0) return { kind: 'go' };
    const free = this.limits.maxInFlight - this.active;
    // With waiters, only headroom slots can be free (the invariant): a tenant within its share takes one.
    if (free > 0 && (this.queue.size === 0 || free <= this.headroom) && this.mayTake(entry.tenant, free, now)) {
      if (this.slots.tryTake(this.limits.maxInFlight)) {
        this.shares.take(entry.tenant, entry.inputTokens, now);
        return { kind: 'go' };
      }
    }
    // A full queue refuses the newcomer, unless another tenant holds more of it: then that
    // tenant's newest request makes room (longest-queue drop), so a flood cannot fill the queue
    // and refuse everyone else.
    let evicted: QueuedRequest<T> | undefined;
    if (this.queue.size >= this.limits.queueSize) {
      evicted = this.queue.victim(entry.tenant, (tenant) => this.tenant(tenant).weight);
      if (evicted === undefined) return { kind: 'refused', refusal: { cause: 'queue_full', retryAfterMs: 1_000 } };
      this.queue.remove(evicted);
    }
    const classDeadline = this.config.classes[entry.classRank]!.deadlineMs ?? this.limits.queueTimeoutMs;
    const waitMs = entry.deadlineMs === undefined ? classDeadline : Math.min(entry.deadlineMs, classDeadline);
    const request = this.queue.push(
      payload,
      {
        tenant: entry.tenant,
        classRank: entry.classRank,
        cost: Math.max(1, entry.cost),
        continuation: entry.continuation,
        inputTokens: entry.inputTokens,
        deadline: now + waitMs,
      },
      now,
    );
    return evicted === undefined ? { kind: 'queued', request } : { kind: 'queued', request, evicted };
  }

  /**
   * A slot holder finished: its slot is free. `inputTokens` are those it entered with. The caller
   * then takes waiters with next().
   */
  leave(tenant: string, inputTokens: number, now: number): void {
    if (this.limits.maxInFlight === 0) return;
    this.slots.release();
    this.shares.giveBack(tenant, inputTokens, now);
  }

  /**
   * Slots taken (`slots` > 0) or given back by another thread on its own (thread-admission.ts):
   * the count is shared already; this keeps the tenants' shares in step.
   */
  heldElsewhere(tenant: string, slots: number, inputTokens: number, now: number): void {
    this.shares.adjust(tenant, slots, inputTokens, now);
  }

  /**
   * The next waiter, removed and holding a slot; undefined when none waits, no slot is free, or
   * only headroom is and every waiter's tenant holds more than its share. With only headroom
   * free and the head's tenant over its share, the next is the one fair queueing picks among the
   * tenants within theirs (FairQueue.popAdmissible).
   */
  next(now: number): QueuedRequest<T> | undefined {
    const free = this.limits.maxInFlight - this.active;
    if (free <= 0 || this.queue.size === 0) return undefined;
    // The slot first (another thread may take the last one meanwhile), then who gets it.
    if (!this.slots.tryTake(this.limits.maxInFlight)) return undefined;
    // Only headroom free and the head over its share: the next of the tenants within theirs
    // (shares as they stood before this slot was taken).
    const holding = this.active - 1;
    const request = this.mayTake(this.queue.peek(now)!.tenant, free, now, holding)
      ? this.queue.pop(now)!
      : this.queue.popAdmissible((tenant) => this.mayTake(tenant, free, now, holding));
    if (request === undefined) {
      this.slots.release();
      return undefined;
    }
    this.shares.take(request.tenant, request.inputTokens, now);
    return request;
  }

  /** A waiter's client went away; false if it was no longer waiting. */
  cancel(request: QueuedRequest<T>): boolean {
    return this.queue.remove(request);
  }

  /** The earliest deadline among waiters (ms), for the caller's one timer; undefined when none waits. */
  nextDeadline(): number | undefined {
    return this.queue.nextDeadline();
  }

  /** Removes and returns the waiters past their deadline; refuse each with expiredRefusal(). */
  expired(now: number): Array<QueuedRequest<T>> {
    return this.queue.expired(now);
  }

  /** Output tokens streamed to a tenant, charged to its token bucket. */
  chargeOutput(tenant: string, tokens: number, now: number): void {
    this.rates.chargeOutput(tenant, tokens, now);
  }

  /**
   * A live change (admin API): the new config must keep the class list (names, in order);
   * weights, bounds, deadlines and tenants apply from the next decision.
   */
  configure(config: FlowConfig, now: number): void {
    const was = this.config.classes.map((c) => c.name).join(',');
    const is = config.classes.map((c) => c.name).join(',');
    if (was !== is)
      throw new RangeError(`flow.classes cannot change while serving (${was} → ${is}); restart with the new list`);
    this.config = config;
    this.rates.reconfigure(now);
    this.shares.reweigh();
  }

  /** The tenant may take one of `free` slots: beyond the headroom anyone may, within it only a tenant within its share. */
  private mayTake(tenant: string, free: number, now: number, holding = this.active): boolean {
    return free > this.headroom || !this.shares.overShare(tenant, this.limits.maxInFlight, holding, now);
  }
}

/**
 * The cost fair queueing charges a request (FlowEntry.cost): its prefill the best-placed instance
 * lacks, from the router's match (`matchedBlocks`: leading blocks held, by instance; null when
 * the router could not match it, which costs the whole prompt), plus the output it is expected to
 * make. The proxy and the simulator both price with it.
 */
export function queueCost(
  inputTokens: number,
  matchedBlocks: Readonly<Record<string, number>> | null,
  blockTokens: number,
  expectedOutput: number,
): number {
  let longest = 0;
  if (matchedBlocks !== null) for (const blocks of Object.values(matchedBlocks)) longest = Math.max(longest, blocks);
  return Math.max(0, inputTokens - longest * blockTokens) + expectedOutput;
}

/** The refusal of a waiter whose deadline passed. */
export function expiredRefusal(): FlowRefusal {
  return { cause: 'queue_timeout', retryAfterMs: 1_000 };
}
