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
  private readonly held = new Map<string, number>();
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

  /** 'go', 'full', or the queued request. */
  enter(spec: Omit<RefRequest, 'seq' | 'enqueuedAt'>, now: number): 'go' | 'full' | RefRequest {
    const free = this.maxInFlight - this.active;
    const reserved = Math.floor(this.maxInFlight * this.headroom);
    if (free > 0 && (this.queue.size === 0 || free <= reserved) && this.mayTake(spec.tenant, free, now)) {
      this.take(spec.tenant, now);
      return 'go';
    }
    if (this.queue.size >= this.queueSize) return 'full';
    return this.queue.push(spec, now);
  }

  leave(tenant: string, now: number): void {
    this.active--;
    this.held.set(tenant, this.held.get(tenant)! - 1);
    this.lastAt.set(tenant, now);
  }

  next(now: number): RefRequest | undefined {
    const free = this.maxInFlight - this.active;
    if (free <= 0 || this.queue.size === 0) return undefined;
    if (!this.mayTake(this.queue.peek(now)!.tenant, free, now)) return undefined;
    const request = this.queue.pop(now)!;
    this.take(request.tenant, now);
    return request;
  }

  private take(tenant: string, now: number): void {
    this.active++;
    this.held.set(tenant, (this.held.get(tenant) ?? 0) + 1);
    this.lastAt.set(tenant, now);
  }

  /** Beyond the headroom anyone may; within it, only a tenant holding no more than its share. */
  private mayTake(tenant: string, free: number, now: number): boolean {
    if (free > Math.floor(this.maxInFlight * this.headroom)) return true;
    let total = 0;
    for (const [other, at] of this.lastAt)
      if (other !== tenant && ((this.held.get(other) ?? 0) > 0 || now - at < WINDOW_MS)) total += this.weight(other);
    total += this.weight(tenant);
    return (this.held.get(tenant) ?? 0) <= (this.maxInFlight * this.weight(tenant)) / total;
  }
}
