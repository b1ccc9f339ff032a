/** Consistent-hash ring, the twin of native/core/hash-ring.h. */
import { xxhash64String } from './xxhash64.js';

export class ReferenceHashRing {
  private points: Array<{ point: bigint; slot: number }> = [];

  rebuild(names: ReadonlyArray<string | null>, vnodes: number): void {
    this.points = [];
    names.forEach((name, slot) => {
      if (name === null) return;
      for (let v = 0; v < vnodes; v += 1) this.points.push({ point: xxhash64String(name, BigInt(v)), slot });
    });
    this.points.sort((a, b) => (a.point < b.point ? -1 : a.point > b.point ? 1 : a.slot - b.slot));
  }

  /** First routable slot clockwise from `key`, or -1. */
  lookup(key: bigint, routable: (slot: number) => boolean): number {
    const count = this.points.length;
    if (count === 0) return -1;
    let lo = 0;
    let hi = count;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.points[mid]!.point < key) lo = mid + 1;
      else hi = mid;
    }
    for (let step = 0; step < count; step += 1) {
      const { slot } = this.points[(lo + step) % count]!;
      if (routable(slot)) return slot;
    }
    return -1;
  }
}
