/**
 * Flow control's queue: requests waiting for a slot, by priority class, tenant and deadline.
 *
 * - **Between classes, strict priority** with an anti-starvation bound: the queue serves the
 *   highest class (rank 0 first) that has a request waiting, except that a lower class whose
 *   oldest request has waited `starveAfterMs` or longer is served first, its oldest request
 *   (the most-starved class first, by that request's arrival). So no request at the head of its
 *   class waits more than its class's bound behind higher classes.
 * - **Within a class, fair queueing between tenants** on cost, with continuations first
 *   (class-queue.ts).
 * - **Deadlines:** every request carries one; expired(now) hands back, and forgets, those past it.
 *
 * The queue has no clock and no timers: every call that depends on time takes `now` (ms), so the
 * proxy (wall clock) and the simulator (virtual time) run the same code. Ties break on arrival
 * order, so a run is a pure function of its calls.
 */
import { MinHeap } from '../core/min-heap.js';
import { ClassQueue } from './class-queue.js';
import type { QueuedRequest, QueueRequestSpec } from './queued-request.js';
import { TenantBacklog } from './tenant-backlog.js';

export class FairQueue<T> {
  private readonly classes: Array<ClassQueue<T>>;
  private readonly deadlines = new MinHeap<QueuedRequest<T>>((a, b) =>
    a.deadline !== b.deadline ? a.deadline < b.deadline : a.seq < b.seq,
  );
  private arrivals = 0;
  private readonly backlog = new TenantBacklog<T>();
  /** Requests waiting, over every class. */
  size = 0;

  /**
   * `classCount` classes, rank 0 served first. `starveAfterMs(rank)`: a request at the head of
   * class `rank` waits at most this long behind higher classes (Infinity: no bound).
   * `weight(tenant, rank)` and `starveAfterMs` are read when needed, so a live change of either
   * applies from the next dispatch.
   */
  constructor(
    classCount: number,
    private readonly starveAfterMs: (rank: number) => number,
    weight: (tenant: string, rank: number) => number,
  ) {
    this.classes = Array.from({ length: classCount }, (_, rank) => new ClassQueue<T>((tenant) => weight(tenant, rank)));
  }

  push(payload: T, spec: QueueRequestSpec, now: number): QueuedRequest<T> {
    const request: QueuedRequest<T> = {
      payload,
      tenant: spec.tenant,
      classRank: spec.classRank,
      cost: spec.cost,
      continuation: spec.continuation === true,
      inputTokens: spec.inputTokens ?? 0,
      enqueuedAt: now,
      deadline: spec.deadline,
      seq: this.arrivals++,
      waiting: true,
    };
    this.classes[spec.classRank]!.push(request);
    this.backlog.pushed(request);
    this.deadlines.push(request);
    // Dispatched and removed requests stay in the deadline heap until they surface; dropped in one
    // pass when they outnumber the waiting ones, so the heap never holds a payload long after it left.
    if (this.deadlines.size > 2 * this.size + 1024) this.deadlines.retain((r) => r.waiting);
    this.size++;
    return request;
  }

  /** The next request to admit, removed; undefined when none waits. */
  pop(now: number): QueuedRequest<T> | undefined {
    if (this.size === 0) return undefined;
    const starved = this.mostStarved(now);
    if (starved !== undefined) {
      this.classes[starved.classRank]!.take(starved);
      return this.left(starved);
    }
    for (const queue of this.classes) {
      const request = queue.pop();
      if (request !== undefined) return this.left(request);
    }
    return undefined;
  }

  /** The request pop(now) would return, left waiting; undefined when none waits. */
  peek(now: number): QueuedRequest<T> | undefined {
    if (this.size === 0) return undefined;
    const starved = this.mostStarved(now);
    if (starved !== undefined) return starved;
    for (const queue of this.classes) if (queue.waiting > 0) return queue.peek();
    return undefined;
  }

  /**
   * The next request among the tenants `admissible` accepts, removed: strict priority between
   * classes and fair queueing among those tenants (ClassQueue.popAdmissible), without the
   * anti-starvation bound; undefined when none of them waits. Flow control uses it for a headroom
   * slot whose head of queue belongs to a tenant over its share.
   */
  popAdmissible(admissible: (tenant: string) => boolean): QueuedRequest<T> | undefined {
    for (const queue of this.classes) {
      const request = queue.popAdmissible(admissible);
      if (request !== undefined) return this.left(request);
    }
    return undefined;
  }

  /** Bookkeeping of a request that left the queue (dispatched or removed); returns it. */
  private left(request: QueuedRequest<T>): QueuedRequest<T> {
    this.size--;
    this.backlog.left(request);
    return request;
  }

  /** A waiting request leaves unserved (its client went away). False if it was no longer waiting. */
  remove(request: QueuedRequest<T>): boolean {
    if (!request.waiting) return false;
    this.classes[request.classRank]!.remove(request);
    this.left(request);
    return true;
  }

  /**
   * Whom a full queue refuses when a request of `tenant` arrives (longest-queue drop,
   * tenant-backlog.ts): the newest waiting request of the tenant with the most waiting per unit
   * of `weight`, when that is another tenant and the newcomer's tenant would still have fewer
   * waiting per unit of weight with it; else undefined (refuse the newcomer).
   */
  victim(tenant: string, weight: (tenant: string) => number): QueuedRequest<T> | undefined {
    const longest = this.backlog.longest(weight);
    if (longest === undefined || longest === tenant) return undefined;
    const mine = (this.backlog.count(tenant) + 1) / weight(tenant);
    return mine < this.backlog.count(longest) / weight(longest) ? this.backlog.newest(longest) : undefined;
  }

  /** The earliest deadline of a waiting request; undefined when none waits. */
  nextDeadline(): number | undefined {
    return this.liveDeadline()?.deadline;
  }

  /** Removes and returns the waiting requests whose deadline is at or before `now`, earliest first. */
  expired(now: number): Array<QueuedRequest<T>> {
    const out: Array<QueuedRequest<T>> = [];
    for (let top = this.liveDeadline(); top !== undefined && top.deadline <= now; top = this.liveDeadline()) {
      this.deadlines.pop();
      this.remove(top);
      out.push(top);
    }
    return out;
  }

  /** [tenant, class rank, requests waiting] of every tenant with requests waiting (metrics). */
  *depths(): IterableIterator<[string, number, number]> {
    for (let rank = 0; rank < this.classes.length; rank++)
      for (const [tenant, waiting] of this.classes[rank]!.depths()) yield [tenant, rank, waiting];
  }

  private liveDeadline(): QueuedRequest<T> | undefined {
    for (let top = this.deadlines.peek(); top !== undefined; top = this.deadlines.peek()) {
      if (top.waiting) return top;
      this.deadlines.pop();
    }
    return undefined;
  }

  /**
   * The oldest request of the most-starved class below the highest one with requests waiting,
   * if any class has waited past its bound; undefined otherwise.
   */
  private mostStarved(now: number): QueuedRequest<T> | undefined {
    let best: QueuedRequest<T> | undefined;
    let higherWaiting = false;
    for (let rank = 0; rank < this.classes.length; rank++) {
      const queue = this.classes[rank]!;
      if (queue.waiting === 0) continue;
      if (higherWaiting) {
        const oldest = queue.oldest()!;
        if (now - oldest.enqueuedAt >= this.starveAfterMs(rank) && (best === undefined || oldest.seq < best.seq))
          best = oldest;
      }
      higherWaiting = true;
    }
    return best;
  }
}
