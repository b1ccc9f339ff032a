/**
 * The brute-force reference of flow control's slot rules (src/flow/flow-controller.ts with
 * slot-shares.ts): the queue is the reference queue (flow-reference.ts); slots, shares and the
 * headroom are stated as plainly as possible, every share a sum over every tenant. For
 * differential tests only; rate limits are left out (the tests give tenants none).
 */
import { ReferenceQueue, type RefRequest } from './flow-reference.js';

export const WINDOW_MS = 10_000;

export class ReferenceController {
  active = 0;
  readonly queue: ReferenceQueue;
  /** Prompt tokens held, by tenant (0 when it holds none). */
  private readonly held = new Map<string, number>();
  private readonly slots = new Map<string, number>();
  private readonly lastAt = new Map<string, number>();

  constructor(
    private readonly maxInFlight: number,
    private readonly headroom: number,
    private readonly queueSize: number,
    starveAfterMs: readonly number[],
    private readonly weight: (tenant: string) => number,
  ) {
    this.queue = new ReferenceQueue(starveAfterMs, (tenant) => weight(tenant));
  }

  /** 'go', 'full', or the queued request (with the request a full queue refused to make room). */
  enter(
    spec: Omit<RefRequest, 'seq' | 'enqueuedAt'>,
    now: number,
  ): 'go' | 'full' | { request: RefRequest; evicted?: RefRequest } {
    const free = this.maxInFlight - this.active;
    const reserved = Math.floor(this.maxInFlight * this.headroom);
    if (free > 0 && (this.queue.size === 0 || free <= reserved) && this.mayTake(spec.tenant, free, now)) {
      this.take(spec.tenant, spec.inputTokens ?? 0, now);
      return 'go';
    }
    let evicted: RefRequest | undefined;
    if (this.queue.size >= this.queueSize) {
      evicted = this.queue.victim(spec.tenant, this.weight);
      if (evicted === undefined) return 'full';
      this.queue.remove(evicted.seq);
    }
    return { request: this.queue.push(spec, now), ...(evicted === undefined ? {} : { evicted }) };
  }

  leave(tenant: string, tokens: number, now: number): void {
    this.active--;
    this.held.set(tenant, this.held.get(tenant)! - tokens);
    this.slots.set(tenant, this.slots.get(tenant)! - 1);
    this.lastAt.set(tenant, now);
  }

  next(now: number): RefRequest | undefined {
    const free = this.maxInFlight - this.active;
    if (free <= 0 || this.queue.size === 0) return undefined;
    // Only headroom free and the head over its share: the next of the tenants within theirs.
    const request = this.mayTake(this.queue.peek(now)!.tenant, free, now)
      ? this.queue.pop(now)!
      : this.queue.popAdmissible((tenant) => this.mayTake(tenant, free, now));
    if (request === undefined) return undefined;
    this.take(request.tenant, request.inputTokens ?? 0, now);
    return request;
  }

  private take(tenant: string, tokens: number, now: number): void {
    this.active++;
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + tokens);
    this.slots.set(tenant, (this.slots.get(tenant) ?? 0) + 1);
    this.lastAt.set(tenant, now);
  }

  /**
   * Beyond the headroom anyone may; within it, only a tenant holding no more than its share:
   * maxInFlight slots' worth of the prompt tokens holding slots (per slot held), by weight among
   * the active tenants (itself counted).
   */
  private mayTake(tenant: string, free: number, now: number): boolean {
    if (free > Math.floor(this.maxInFlight * this.headroom)) return true;
    let weights = 0;
    for (const [other, at] of this.lastAt)
      if (other !== tenant && ((this.slots.get(other) ?? 0) > 0 || now - at < WINDOW_MS)) weights += this.weight(other);
    weights += this.weight(tenant);
    let tokens = 0;
    for (const held of this.held.values()) tokens += held;
    // held ≤ (tokens ÷ active) × maxInFlight × w ÷ weights, multiplied out (exact in integers).
    return (this.held.get(tenant) ?? 0) * this.active * weights <= tokens * this.maxInFlight * this.weight(tenant);
  }
}
