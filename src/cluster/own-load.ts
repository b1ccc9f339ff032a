/**
 * What a replica says of itself on the load plane: its own in-flight totals per instance (the
 * router's shadow counters, `stats().instances[].shadow`, which never include what peers said)
 * and the sessions it placed, turned into the next LoadMessage's contents.
 *
 * Invariant: after next(), `published` holds exactly the totals the message stated, so the next
 * delta names only instances whose totals changed since (an instance that left the fleet is
 * stated as zeros once, then forgotten).
 */
import type { Router } from '../core/router.js';
import type { LoadMessage, LoadTotals } from './load-message.js';

/** Placements kept at most between two flushes; past it the oldest are dropped (a peer learns them by routing). */
const MAX_PENDING_PLACEMENTS = 10_000;

export class OwnLoad {
  private readonly published = new Map<string, LoadTotals>();
  private placements = new Map<string, readonly [string, string, string | null]>();

  constructor(private readonly router: Router) {}

  /** `session`'s request of `model` was placed on `instance` here (its last attempt). */
  placed(session: string, instance: string, model: string | undefined): void {
    this.placements.delete(session); // the latest placement wins, and goes last
    this.placements.set(session, [session, instance, model ?? null]);
    if (this.placements.size > MAX_PENDING_PLACEMENTS) this.placements.delete(this.placements.keys().next().value!);
  }

  /** The load and placements of the next message: every instance when `full`, else the changed ones. */
  next(full: boolean): Pick<LoadMessage, 'load' | 'placements'> {
    const load: Array<readonly [string, LoadTotals]> = [];
    const present = new Set<string>();
    for (const s of this.router.stats().instances) {
      present.add(s.instance);
      const totals: LoadTotals = [s.shadow.running, s.shadow.waiting, s.shadow.prefillTokens, s.shadow.activeBlocks];
      const before = this.published.get(s.instance);
      if (full || before === undefined || !same(before, totals)) {
        // A never-stated instance at zero needs no delta (receivers start at zero).
        if (full || before !== undefined || totals.some((x) => x !== 0)) load.push([s.instance, totals]);
        this.published.set(s.instance, totals);
      }
    }
    for (const instance of [...this.published.keys()]) {
      if (present.has(instance)) continue;
      this.published.delete(instance);
      if (!full) load.push([instance, [0, 0, 0, 0]]);
    }
    const placements = [...this.placements.values()];
    this.placements = new Map();
    return { load, placements };
  }
}

const same = (a: LoadTotals, b: LoadTotals): boolean =>
  a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
