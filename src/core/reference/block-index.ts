/**
 * The reference prefix cache of one instance: the per-block model that
 * native/core/block-index.cc implements with radix segments (docs/block-index.md).
 *
 * One Map entry per held block, in least-to-most-recently-used order. A
 * dispatch re-inserts its path deepest-first, so the shallowest block ends up
 * most recent and, within one dispatch, deeper blocks are evicted first:
 * eviction takes the Map's first entry and can never strand a block without
 * its prefix. Matching walks the request from the front; O(n) where the addon
 * binary-searches, which is exactly what makes it a useful oracle.
 */

interface Block {
  depth: number;
  /** The id in front of this one when it was inserted; undefined at depth 0. */
  parent: bigint | undefined;
}

export class ReferenceBlockIndex {
  private readonly blocks = new Map<bigint, Block>();

  constructor(private capacityBlocks: number) {}

  get capacity(): number {
    return this.capacityBlocks;
  }

  get size(): number {
    return this.blocks.size;
  }

  holds(id: bigint, depth: number): boolean {
    return this.blocks.get(id)?.depth === depth;
  }

  match(ids: readonly bigint[]): number {
    let matched = 0;
    while (matched < ids.length && this.holds(ids[matched]!, matched)) matched += 1;
    return matched;
  }

  /** Touches ids[0..matched), inserts the rest, evicts to capacity. */
  commit(ids: readonly bigint[], matched: number): void {
    // An id already held elsewhere means the ids are not chained: stop there.
    let end = matched;
    while (end < ids.length && !this.blocks.has(ids[end]!)) end += 1;
    for (let depth = end - 1; depth >= 0; depth -= 1) {
      const id = ids[depth]!;
      const block = this.blocks.get(id) ?? { depth, parent: depth > 0 ? ids[depth - 1] : undefined };
      this.blocks.delete(id);
      this.blocks.set(id, block);
    }
    this.evictToCapacity();
  }

  /** Forgets each listed id that is held, with everything below it. */
  remove(ids: readonly bigint[]): number {
    let removed = 0;
    for (const id of ids) {
      if (this.blocks.has(id)) removed += this.removeSubtree(id);
    }
    return removed;
  }

  clear(): void {
    this.blocks.clear();
  }

  setCapacity(capacityBlocks: number): number {
    this.capacityBlocks = capacityBlocks;
    return this.evictToCapacity();
  }

  private evictToCapacity(): number {
    let evicted = 0;
    for (const id of this.blocks.keys()) {
      if (this.blocks.size <= this.capacityBlocks) break;
      this.blocks.delete(id);
      evicted += 1;
    }
    return evicted;
  }

  private removeSubtree(root: bigint): number {
    const doomed = new Set<bigint>([root]);
    // Parents are always more recent than their children, so walking from the
    // most recent end decides every parent before its children.
    const entries = [...this.blocks];
    for (let i = entries.length - 1; i >= 0; i -= 1) {
      const [id, block] = entries[i]!;
      if (block.parent !== undefined && doomed.has(block.parent)) doomed.add(id);
    }
    for (const id of doomed) this.blocks.delete(id);
    return doomed.size;
  }
}
