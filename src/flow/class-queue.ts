/**
 * One priority class's waiting room: start-time fair queueing (SFQ, Goyal et al. 1996) between
 * tenants, charged on each request's cost rather than counted per request.
 *
 * The model, exactly (test/flow-fair-queue.test.ts holds it against a brute-force reference):
 * - The class keeps a virtual time V and each tenant a finish tag F (both start at 0).
 * - A tenant whose F ≤ V is *eligible*. The next request is the eligible tenant's next one whose
 *   (lane, arrival) is least: lane 0 is a continuation (a session's turn after its previous turn
 *   ended), lane 1 a first turn, so a returning agent never waits behind a new session's first
 *   turn that is equally entitled.
 * - With no tenant eligible, V jumps to the least F among the tenants with requests waiting.
 * - Dispatching a request of cost c from a tenant of weight w sets F = max(V, F) + c / w.
 * So each backlogged tenant receives cost in proportion to its weight (within one request's cost
 * of its share), and a tenant that was idle comes back at V: it banks no credit.
 * A tenant's own requests leave in order: its continuations first, then its first turns, each FIFO.
 *
 * Cost: O(log n) per push and pop over n tenants with requests waiting. Tenants sit in one of
 * two heaps (eligible by next request, ahead by F) under a version number; a change pushes a new
 * entry and bumps the version, and stale entries are skipped when they surface (lazy deletion).
 */
import { MinHeap } from '../core/min-heap.js';
import { LazyFifo } from './lazy-fifo.js';
import type { QueuedRequest } from './queued-request.js';

interface TenantLanes<T> {
  readonly name: string;
  finish: number;
  waiting: number;
  version: number;
  readonly continuations: LazyFifo<T>;
  readonly firstTurns: LazyFifo<T>;
}

interface EligibleEntry<T> {
  tenant: TenantLanes<T>;
  version: number;
  lane: number;
  seq: number;
}

interface AheadEntry<T> {
  tenant: TenantLanes<T>;
  version: number;
  finish: number;
  seq: number;
}

const KEEP_IDLE_TENANTS = 4096;

export class ClassQueue<T> {
  /** The class's virtual time V. */
  virtualTime = 0;
  /** Requests waiting in this class. */
  waiting = 0;
  private readonly tenants = new Map<string, TenantLanes<T>>();
  private readonly eligible = new MinHeap<EligibleEntry<T>>((a, b) =>
    a.lane !== b.lane ? a.lane < b.lane : a.seq < b.seq,
  );
  private readonly ahead = new MinHeap<AheadEntry<T>>((a, b) =>
    a.finish !== b.finish ? a.finish < b.finish : a.seq < b.seq,
  );
  /** Every request of the class by arrival: the oldest waiting one is its head. */
  private readonly arrivals = new LazyFifo<T>();

  /** `weight(tenant)` is read at each dispatch, so a live weight change applies from the next one. */
  constructor(private readonly weight: (tenant: string) => number) {}

  push(request: QueuedRequest<T>): void {
    let lanes = this.tenants.get(request.tenant);
    if (lanes === undefined) {
      lanes = {
        name: request.tenant,
        finish: 0,
        waiting: 0,
        version: 0,
        continuations: new LazyFifo(),
        firstTurns: new LazyFifo(),
      };
      this.tenants.set(request.tenant, lanes);
    }
    (request.continuation ? lanes.continuations : lanes.firstTurns).push(request);
    this.arrivals.push(request);
    // Requests leave out of arrival order, so the arrival FIFO holds some that left: compacted
    // when they outnumber the waiting ones, so it never keeps a dispatched request's payload long.
    if (this.arrivals.held > 2 * this.waiting + 1024) this.arrivals.compact();
    lanes.waiting++;
    this.waiting++;
    this.place(lanes);
  }

  /** [tenant, requests waiting] of every tenant with requests waiting. */
  *depths(): IterableIterator<[string, number]> {
    for (const lanes of this.tenants.values()) if (lanes.waiting > 0) yield [lanes.name, lanes.waiting];
  }

  /** The oldest waiting request of the class (anti-starvation reads its wait). */
  oldest(): QueuedRequest<T> | undefined {
    return this.arrivals.peek();
  }

  /** The next request by the model above, removed; undefined when the class is empty. */
  pop(): QueuedRequest<T> | undefined {
    if (this.waiting === 0) return undefined;
    const lanes = this.nextTenant();
    if (lanes === undefined) return undefined;
    const request = nextOf(lanes)!;
    this.dispatch(lanes, request);
    return request;
  }

  /**
   * The request pop() would return, left waiting. Like pop(), it may move V up to the least F
   * when no tenant is eligible: the same step pop() takes first, so a peek changes no decision.
   */
  peek(): QueuedRequest<T> | undefined {
    if (this.waiting === 0) return undefined;
    const lanes = this.nextTenant();
    return lanes === undefined ? undefined : nextOf(lanes);
  }

  /**
   * pop() among the tenants `admissible` accepts, as if the others had nothing waiting: the
   * eligible admissible tenant's next request by (lane, arrival); with none eligible, V jumps to
   * the least F among admissible tenants with requests waiting. Entries of the others are set
   * aside while looking and filed back after, so the cost is O((k + 1) log n) for k tenants
   * passed over (the few over their share, where the caller uses it).
   */
  popAdmissible(admissible: (tenant: string) => boolean): QueuedRequest<T> | undefined {
    if (this.waiting === 0) return undefined;
    const asideEligible: Array<EligibleEntry<T>> = [];
    const asideAhead: Array<AheadEntry<T>> = [];
    let found: TenantLanes<T> | undefined;
    for (;;) {
      const top = this.eligible.peek();
      if (top !== undefined) {
        if (top.version !== top.tenant.version) this.eligible.pop();
        else if (!admissible(top.tenant.name)) asideEligible.push(this.eligible.pop()!);
        else {
          found = top.tenant;
          break;
        }
        continue;
      }
      const first = this.ahead.peek();
      if (first === undefined) break;
      if (first.version !== first.tenant.version) this.ahead.pop();
      else if (first.tenant.waiting === 0) {
        this.ahead.pop();
        this.forget(first.tenant);
      } else if (!admissible(first.tenant.name)) asideAhead.push(this.ahead.pop()!);
      else {
        this.virtualTime = first.finish;
        this.promote();
      }
    }
    for (const entry of asideEligible) this.eligible.push(entry);
    // V may have passed a tenant set aside from `ahead`: it is eligible now, filed anew.
    for (const entry of asideAhead)
      if (entry.finish > this.virtualTime) this.ahead.push(entry);
      else if (entry.version === entry.tenant.version) this.place(entry.tenant);
    if (found === undefined) return undefined;
    const request = nextOf(found)!;
    this.dispatch(found, request);
    return request;
  }

  /** Dispatches `request` out of turn (anti-starvation), charged to its tenant as any dispatch. */
  take(request: QueuedRequest<T>): void {
    this.dispatch(this.tenants.get(request.tenant)!, request);
  }

  /** A waiting request left without being dispatched (its client went away, or its deadline passed). */
  remove(request: QueuedRequest<T>): void {
    const lanes = this.tenants.get(request.tenant)!;
    request.waiting = false;
    this.left(lanes);
  }

  private dispatch(lanes: TenantLanes<T>, request: QueuedRequest<T>): void {
    request.waiting = false;
    lanes.finish = Math.max(this.virtualTime, lanes.finish) + request.cost / this.weight(lanes.name);
    this.left(lanes);
  }

  private left(lanes: TenantLanes<T>): void {
    lanes.waiting--;
    this.waiting--;
    if (lanes.waiting === 0) {
      const version = ++lanes.version;
      // An idle tenant at or behind V has nothing to remember. One ahead keeps its F (it must not
      // come back at V with its last dispatch unpaid) until V passes it: an entry in `ahead`
      // forgets it then.
      if (lanes.finish <= this.virtualTime) this.forget(lanes);
      else this.ahead.push({ tenant: lanes, version, finish: lanes.finish, seq: -1 });
      return;
    }
    this.place(lanes);
  }

  /**
   * An idle tenant with no debt: the same as a new one, so it may go. The first KEEP_IDLE_TENANTS
   * stay (a tenant that comes and goes is not remade each time); past them the map forgets, so it
   * holds at most that many idle tenants beyond those waiting or in debt.
   */
  private forget(lanes: TenantLanes<T>): void {
    if (this.tenants.size > KEEP_IDLE_TENANTS) this.tenants.delete(lanes.name);
  }

  /** Files the tenant under its current key in the heap its F says (a new version). */
  private place(lanes: TenantLanes<T>): void {
    const version = ++lanes.version;
    const next = nextOf(lanes)!;
    if (lanes.finish <= this.virtualTime)
      this.eligible.push({ tenant: lanes, version, lane: next.continuation ? 0 : 1, seq: next.seq });
    else this.ahead.push({ tenant: lanes, version, finish: lanes.finish, seq: next.seq });
  }

  private nextTenant(): TenantLanes<T> | undefined {
    for (;;) {
      const top = this.eligible.peek();
      if (top !== undefined) {
        if (top.version === top.tenant.version) return top.tenant;
        this.eligible.pop();
        continue;
      }
      const first = this.ahead.peek();
      if (first === undefined) return undefined;
      if (first.version !== first.tenant.version) {
        this.ahead.pop();
        continue;
      }
      if (first.tenant.waiting === 0) {
        // An idle tenant's debt: V is about to pass it (a waiting tenant's F is the larger).
        this.ahead.pop();
        this.forget(first.tenant);
        continue;
      }
      // No tenant eligible: V jumps to the least finish tag, and every tenant at it becomes eligible.
      this.virtualTime = first.finish;
      this.promote();
    }
  }

  /** Moves the tenants whose F ≤ V from `ahead` into `eligible`. */
  private promote(): void {
    for (let top = this.ahead.peek(); top !== undefined && top.finish <= this.virtualTime; top = this.ahead.peek()) {
      this.ahead.pop();
      if (top.version !== top.tenant.version) continue;
      if (top.tenant.waiting === 0) this.forget(top.tenant);
      else this.place(top.tenant);
    }
  }
}

function nextOf<T>(lanes: TenantLanes<T>): QueuedRequest<T> | undefined {
  return lanes.continuations.peek() ?? lanes.firstTurns.peek();
}
