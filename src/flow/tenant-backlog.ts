/**
 * What each tenant has waiting in flow control's queue, for the choice of whom a full queue
 * refuses (fair-queue.ts `victim`): longest-queue drop. A flood fills the queue with its own
 * requests; when a quiet tenant's request arrives at a full queue, the flood's newest waiting
 * request is refused in its place, not the quiet one.
 *
 * Invariants: `waiting` counts each tenant's requests waiting (entries only for counts > 0);
 * `stacks` holds each such tenant's requests in arrival order, plus some that left (marked
 * `waiting = false`): those at the top are dropped whenever the newest is asked for, and the
 * rest in one pass once they outnumber the waiting ones, so memory follows what waits.
 */
import type { QueuedRequest } from './queued-request.js';

export class TenantBacklog<T> {
  private readonly waiting = new Map<string, number>();
  private readonly stacks = new Map<string, Array<QueuedRequest<T>>>();

  pushed(request: QueuedRequest<T>): void {
    const count = (this.waiting.get(request.tenant) ?? 0) + 1;
    this.waiting.set(request.tenant, count);
    let stack = this.stacks.get(request.tenant);
    if (stack === undefined) this.stacks.set(request.tenant, (stack = []));
    stack.push(request);
    if (stack.length > 2 * count + 64)
      this.stacks.set(
        request.tenant,
        stack.filter((r) => r.waiting),
      );
  }

  /** The request left the queue (dispatched, removed, expired): already marked `waiting = false`. */
  left(request: QueuedRequest<T>): void {
    const count = (this.waiting.get(request.tenant) ?? 1) - 1;
    if (count > 0) this.waiting.set(request.tenant, count);
    else {
      this.waiting.delete(request.tenant);
      this.stacks.delete(request.tenant);
    }
  }

  /** Requests the tenant has waiting. */
  count(tenant: string): number {
    return this.waiting.get(tenant) ?? 0;
  }

  /**
   * The tenant with the most requests waiting per unit of weight (ties: the one whose newest
   * request is newer), or undefined when none waits. O(tenants with requests waiting).
   */
  longest(weight: (tenant: string) => number): string | undefined {
    let best: string | undefined;
    let bestLoad = -1;
    let bestSeq = -1;
    for (const [tenant, count] of this.waiting) {
      const load = count / weight(tenant);
      if (load < bestLoad) continue;
      const seq = this.newest(tenant)!.seq;
      if (load > bestLoad || seq > bestSeq) {
        best = tenant;
        bestLoad = load;
        bestSeq = seq;
      }
    }
    return best;
  }

  /** The tenant's newest waiting request. */
  newest(tenant: string): QueuedRequest<T> | undefined {
    const stack = this.stacks.get(tenant);
    if (stack === undefined) return undefined;
    while (stack.length > 0 && !stack[stack.length - 1]!.waiting) stack.pop();
    return stack[stack.length - 1];
  }
}
