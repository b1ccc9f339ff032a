/**
 * A set of (session, node) pairs of 32-bit integers: which trie nodes each session has
 * visited. Open addressing with linear probing, at most half full; `firsts` stores
 * session + 1 so 0 marks an empty slot. Holds 10^8 pairs in 16 B each at worst, where a
 * JS Set of composite keys would stop at 2^24.
 */
const MIN_SLOTS = 1 << 12;

export class PairSet {
  private firsts = new Uint32Array(MIN_SLOTS);
  private seconds = new Uint32Array(MIN_SLOTS);
  private mask = MIN_SLOTS - 1;
  private count = 0;
  private readonly seed = (Math.random() * 4294967296) | 0;

  get size(): number {
    return this.count;
  }

  has(first: number, second: number): boolean {
    const tag = first + 1;
    for (let slot = this.slotOf(tag, second); ; slot = (slot + 1) & this.mask) {
      const stored = this.firsts[slot]!;
      if (stored === 0) return false;
      if (stored === tag && this.seconds[slot] === second) return true;
    }
  }

  /** Adds the pair; returns false when it was already present. */
  add(first: number, second: number): boolean {
    if (this.count * 2 >= this.firsts.length) this.grow();
    const tag = first + 1;
    let slot = this.slotOf(tag, second);
    for (; ; slot = (slot + 1) & this.mask) {
      const stored = this.firsts[slot]!;
      if (stored === 0) break;
      if (stored === tag && this.seconds[slot] === second) return false;
    }
    this.firsts[slot] = tag;
    this.seconds[slot] = second;
    this.count++;
    return true;
  }

  private slotOf(tag: number, second: number): number {
    let h = Math.imul(tag ^ this.seed, 0x9e3779b1) ^ Math.imul(second, 0x85ebca77);
    h ^= h >>> 15;
    h = Math.imul(h, 0x2c1b3c6d);
    h ^= h >>> 12;
    return h & this.mask;
  }

  private grow(): void {
    const firsts = this.firsts;
    const seconds = this.seconds;
    this.firsts = new Uint32Array(firsts.length * 2);
    this.seconds = new Uint32Array(firsts.length * 2);
    this.mask = this.firsts.length - 1;
    for (let old = 0; old < firsts.length; old++) {
      const tag = firsts[old]!;
      if (tag === 0) continue;
      let slot = this.slotOf(tag, seconds[old]!);
      while (this.firsts[slot] !== 0) slot = (slot + 1) & this.mask;
      this.firsts[slot] = tag;
      this.seconds[slot] = seconds[old]!;
    }
  }
}
