/**
 * The brute-force reference of flow control's queue (src/flow/fair-queue.ts, class-queue.ts):
 * the same model stated as plainly as possible, every decision a scan over every waiting request.
 * O(n) per call; for differential tests only.
 */
export interface RefRequest {
  seq: number;
  tenant: string;
  classRank: number;
  cost: number;
  continuation: boolean;
  inputTokens?: number;
  enqueuedAt: number;
  deadline: number;
}

export class ReferenceQueue {
  private waiting: RefRequest[] = [];
  private readonly virtualTimes: number[];
  /** Finish tag by class, by tenant (absent: 0). */
  private readonly finishes: Array<Map<string, number>>;
  private seq = 0;

  constructor(
    private readonly starveAfterMs: readonly number[],
    private readonly weight: (tenant: string, rank: number) => number,
  ) {
    this.virtualTimes = starveAfterMs.map(() => 0);
    this.finishes = starveAfterMs.map(() => new Map());
  }

  get size(): number {
    return this.waiting.length;
  }

  push(spec: Omit<RefRequest, 'seq' | 'enqueuedAt'>, now: number): RefRequest {
    const request = { ...spec, seq: this.seq++, enqueuedAt: now };
    this.waiting.push(request);
    return request;
  }

  remove(seq: number): boolean {
    const before = this.waiting.length;
    this.waiting = this.waiting.filter((r) => r.seq !== seq);
    return this.waiting.length < before;
  }

  expired(now: number): RefRequest[] {
    const out = this.waiting.filter((r) => r.deadline <= now).sort((a, b) => a.deadline - b.deadline || a.seq - b.seq);
    this.waiting = this.waiting.filter((r) => r.deadline > now);
    return out;
  }

  pop(now: number): RefRequest | undefined {
    const chosen = this.peek(now);
    if (chosen === undefined) return undefined;
    this.charge(chosen);
    this.remove(chosen.seq);
    return chosen;
  }

  /** The request pop() would take, left waiting (V may jump, as in pop). */
  peek(now: number): RefRequest | undefined {
    if (this.waiting.length === 0) return undefined;
    const ranks = [...new Set(this.waiting.map((r) => r.classRank))].sort((a, b) => a - b);
    // Anti-starvation: below the highest waiting class, the oldest request of a class past its bound.
    const starved = ranks
      .slice(1)
      .map((rank) => this.inClass(rank).sort((a, b) => a.seq - b.seq)[0]!)
      .filter((oldest) => now - oldest.enqueuedAt >= this.starveAfterMs[oldest.classRank]!)
      .sort((a, b) => a.seq - b.seq)[0];
    return starved ?? this.fairPick(ranks[0]!);
  }

  /**
   * Longest-queue drop: the newest waiting request of the tenant with the most waiting per unit
   * of weight (ties: the newer newest request), when that is not `tenant` and `tenant` with one
   * more would still have fewer per unit of weight; else undefined.
   */
  victim(tenant: string, weight: (tenant: string) => number): RefRequest | undefined {
    const tenants = [...new Set(this.waiting.map((r) => r.tenant))];
    const count = (t: string) => this.waiting.filter((r) => r.tenant === t).length;
    const newest = (t: string) => this.waiting.filter((r) => r.tenant === t).sort((a, b) => b.seq - a.seq)[0]!;
    const longest = tenants.sort(
      (a, b) => count(b) / weight(b) - count(a) / weight(a) || newest(b).seq - newest(a).seq,
    )[0];
    if (longest === undefined || longest === tenant) return undefined;
    return (count(tenant) + 1) / weight(tenant) < count(longest) / weight(longest) ? newest(longest) : undefined;
  }

  /** pop() among admissible tenants' requests only, without the anti-starvation bound. */
  popAdmissible(admissible: (tenant: string) => boolean): RefRequest | undefined {
    const mine = this.waiting.filter((r) => admissible(r.tenant));
    if (mine.length === 0) return undefined;
    const rank = Math.min(...mine.map((r) => r.classRank));
    const chosen = this.fairPick(rank, admissible);
    this.charge(chosen);
    this.remove(chosen.seq);
    return chosen;
  }

  private inClass(rank: number): RefRequest[] {
    return this.waiting.filter((r) => r.classRank === rank);
  }

  private finish(rank: number, tenant: string): number {
    return this.finishes[rank]!.get(tenant) ?? 0;
  }

  /** Start-time fair queueing: eligible tenants have F ≤ V; none: V jumps to the least F. */
  private fairPick(rank: number, admissible: (tenant: string) => boolean = () => true): RefRequest {
    const requests = this.inClass(rank).filter((r) => admissible(r.tenant));
    const tenants = [...new Set(requests.map((r) => r.tenant))];
    let eligible = tenants.filter((t) => this.finish(rank, t) <= this.virtualTimes[rank]!);
    if (eligible.length === 0) {
      this.virtualTimes[rank] = Math.min(...tenants.map((t) => this.finish(rank, t)));
      eligible = tenants.filter((t) => this.finish(rank, t) <= this.virtualTimes[rank]!);
    }
    // Each eligible tenant's next request (continuations first, then arrival); the least of those.
    const key = (r: RefRequest): [number, number] => [r.continuation ? 0 : 1, r.seq];
    const less = (a: RefRequest, b: RefRequest): boolean => {
      const [la, sa] = key(a);
      const [lb, sb] = key(b);
      return la !== lb ? la < lb : sa < sb;
    };
    let best: RefRequest | undefined;
    for (const r of requests) if (eligible.includes(r.tenant) && (best === undefined || less(r, best))) best = r;
    return best!;
  }

  private charge(request: RefRequest): void {
    const rank = request.classRank;
    const start = Math.max(this.virtualTimes[rank]!, this.finish(rank, request.tenant));
    this.finishes[rank]!.set(request.tenant, start + request.cost / this.weight(request.tenant, rank));
  }
}
