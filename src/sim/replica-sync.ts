/**
 * `sim run --replicas R --sync load|all` (docs/scale-out.md, "Sync between replicas"): the load
 * plane between simulated router replicas, as `kvroute serve` replicas sharing one over NATS
 * would have it. Each replica's own in-flight load per instance (what its shadow counters hold:
 * dispatched without a first token, running, the waiting ones' uncached prompt tokens, every open
 * request's prompt blocks) and each session it places reach every other replica `delayMs` later;
 * a replica about to route first applies everything due, through the same Router calls the live
 * load plane makes (setPeerLoad with the sum over its peers, pinSession).
 *
 * The changes form one queue in virtual-time order (a replica's changes are made at its
 * dispatches, first tokens and completions, which the event loop visits in time order), and each
 * replica keeps a cursor into it, so with a constant delay every replica sees every peer's
 * changes in the order they were made, none lost: the idealised bus. A prefill-offload phase's
 * ticket is not published (the decode ticket is): the grid runs without offload.
 *
 * Invariants: sum[q][i] = Σ over replicas r ≠ q of the deltas r made on instance i up to the
 * last entry q applied; routers[q] is told sum[q][i] for every instance that changed since.
 */
import type { Router } from '../core/router.js';

/** One published change: a replica's load delta on an instance, or a session it placed. */
interface SyncEntry {
  at: number;
  replica: number;
  instance: number;
  /** Load delta [running, waiting, prefillTokens, activeBlocks]; undefined for a placement. */
  delta?: readonly [number, number, number, number];
  /** The session placed on `instance`; undefined for a load delta. */
  session?: string;
}

/** What a replica published of one of its open tickets, to undo it at first token and completion. */
interface OpenTicket {
  instance: number;
  uncached: number;
  blocks: number;
  decoding: boolean;
}

/** Consumed queue entries are dropped in batches of this many (amortised O(1) per entry). */
const COMPACT_AFTER = 4096;

export class ReplicaSync {
  private queue: SyncEntry[] = [];
  private readonly cursor: number[];
  private readonly sums: Float64Array[];
  private readonly dirty: Uint8Array[];
  private readonly open: Array<Map<number, OpenTicket>>;

  constructor(
    private readonly routers: readonly Router[],
    private readonly instanceIds: readonly string[],
    /** Virtual seconds between a change and its arrival at the other replicas. */
    private readonly delayS: number,
    /** Told when a peer's placement of `session` reaches `replica` (its session tracking follows). */
    private readonly peerPlaced: (replica: number, session: string, now: number) => void = () => {},
  ) {
    const instances = instanceIds.length;
    this.cursor = routers.map(() => 0);
    this.sums = routers.map(() => new Float64Array(instances * 4));
    this.dirty = routers.map(() => new Uint8Array(instances));
    this.open = routers.map(() => new Map());
  }

  /** Before `replica` routes at virtual second `now`: applies its peers' changes that are due. */
  deliver(replica: number, now: number): void {
    const sums = this.sums[replica]!;
    const dirty = this.dirty[replica]!;
    const router = this.routers[replica]!;
    let at = this.cursor[replica]!;
    let changed = false;
    for (; at < this.queue.length; at += 1) {
      const entry = this.queue[at]!;
      if (entry.at + this.delayS > now) break;
      if (entry.replica === replica) continue;
      if (entry.session !== undefined) {
        router.pinSession(entry.session, this.instanceIds[entry.instance]!);
        this.peerPlaced(replica, entry.session, now);
        continue;
      }
      const d = entry.delta!;
      const base = entry.instance * 4;
      for (let k = 0; k < 4; k += 1) sums[base + k]! += d[k]!;
      dirty[entry.instance] = 1;
      changed = true;
    }
    this.cursor[replica] = at;
    if (changed) {
      for (let i = 0; i < dirty.length; i += 1) {
        if (dirty[i] === 0) continue;
        dirty[i] = 0;
        const b = i * 4;
        router.setPeerLoad(this.instanceIds[i]!, {
          running: sums[b]!,
          waiting: sums[b + 1]!,
          prefillTokens: sums[b + 2]!,
          activeBlocks: sums[b + 3]!,
        });
      }
    }
    this.compact();
  }

  /** `replica` placed `ticket` of `session` (if any) on `instance`, `uncached` prompt tokens to compute. */
  routed(
    replica: number,
    ticket: number,
    placement: { instance: number; session?: string; uncached: number; blocks: number },
    now: number,
  ): void {
    const { instance, uncached, blocks } = placement;
    this.open[replica]!.set(ticket, { instance, uncached, blocks, decoding: false });
    this.queue.push({ at: now, replica, instance, delta: [0, 1, uncached, blocks] });
    if (placement.session !== undefined) this.queue.push({ at: now, replica, instance, session: placement.session });
  }

  firstToken(replica: number, ticket: number, now: number): void {
    const t = this.open[replica]!.get(ticket);
    if (t === undefined || t.decoding) return;
    t.decoding = true;
    this.queue.push({ at: now, replica, instance: t.instance, delta: [1, -1, -t.uncached, 0] });
  }

  completed(replica: number, ticket: number, now: number): void {
    const t = this.open[replica]!.get(ticket);
    if (t === undefined) return;
    this.open[replica]!.delete(ticket);
    const delta: [number, number, number, number] = t.decoding
      ? [-1, 0, 0, -t.blocks]
      : [0, -1, -t.uncached, -t.blocks];
    this.queue.push({ at: now, replica, instance: t.instance, delta });
  }

  /** Drops the entries every replica has passed. */
  private compact(): void {
    const passed = Math.min(...this.cursor);
    if (passed < COMPACT_AFTER) return;
    this.queue = this.queue.slice(passed);
    for (let r = 0; r < this.cursor.length; r += 1) this.cursor[r]! -= passed;
  }
}
