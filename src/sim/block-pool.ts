/**
 * The KV block pool of one engine with vLLM's automatic prefix caching.
 *
 * Every block is in exactly one of three states:
 * - referenced: held by at least one running request (`refs > 0`); never evicted;
 * - cached: unreferenced but still holding a full prompt block under its hash id, so a later
 *   request can reuse it; evicted least recently freed first when space is needed;
 * - free: empty.
 * referenced + cached + free = capacity. Only full prompt blocks carry a hash; partial and
 * generated blocks are anonymous and become free when released.
 */
export interface CachedBlock {
  id: number;
  refs: number;
}

export class BlockPool {
  /** Hash id → block, for every hashed block (referenced or cached). */
  private readonly byId = new Map<number, CachedBlock>();
  /** Cached (unreferenced) hashed blocks in eviction order: oldest first (Map insertion order). */
  private readonly evictable = new Map<number, CachedBlock>();
  private referencedBlocks = 0;
  /** Blocks evicted to make room, over the pool's life. */
  evictions = 0;

  constructor(readonly capacity: number) {
    if (!(Number.isSafeInteger(capacity) && capacity > 0))
      throw new RangeError(`capacity must be a positive integer of blocks, got ${capacity}`);
  }

  get referenced(): number {
    return this.referencedBlocks;
  }

  get cached(): number {
    return this.evictable.size;
  }

  /** Blocks an allocation can take: free ones and evictable cached ones. */
  get available(): number {
    return this.capacity - this.referencedBlocks;
  }

  /** How many leading ids of `ids` are present (referenced or cached). */
  matchPrefix(ids: readonly number[], limit = ids.length): number {
    let n = 0;
    while (n < limit && this.byId.has(ids[n]!)) n++;
    return n;
  }

  /** Takes a reference on the present block `id` (from matchPrefix). */
  acquire(id: number): CachedBlock {
    const block = this.byId.get(id);
    if (block === undefined) throw new Error(`block ${id} is not in the pool`);
    if (block.refs++ === 0) {
      this.evictable.delete(id);
      this.referencedBlocks++;
    }
    return block;
  }

  /**
   * Takes `count` new blocks, evicting cached ones (oldest first) if free ones run out.
   * Returns false, taking nothing, when fewer than `count` are available.
   */
  allocate(count: number): boolean {
    if (count > this.available) return false;
    const free = this.capacity - this.referencedBlocks - this.evictable.size;
    if (free < count) this.evict(count - free);
    this.referencedBlocks += count;
    return true;
  }

  /** Evicts the `count` least recently freed cached blocks. */
  private evict(count: number): void {
    let evicted = 0;
    for (const [id] of this.evictable) {
      if (evicted === count) break;
      this.evictable.delete(id);
      this.byId.delete(id);
      this.evictions++;
      evicted++;
    }
  }

  /**
   * Gives a block allocated by `allocate` the hash `id` once it holds a full prompt block. If
   * another block already holds that id (two requests computed the same block at once), the
   * new one stays anonymous, as in vLLM.
   */
  register(id: number): CachedBlock | undefined {
    if (this.byId.has(id)) return undefined;
    const block = { id, refs: 1 };
    this.byId.set(id, block);
    return block;
  }

  /** Drops a reference on a hashed block; at zero it becomes cached (most recently freed). */
  release(block: CachedBlock): void {
    if (block.refs <= 0) throw new Error(`block ${block.id} released more often than acquired`);
    if (--block.refs === 0) {
      this.referencedBlocks--;
      this.evictable.set(block.id, block);
    }
  }

  /** Returns `count` anonymous blocks to the free list. */
  releaseAnonymous(count: number): void {
    if (count > this.referencedBlocks) throw new Error('anonymous blocks released beyond those referenced');
    this.referencedBlocks -= count;
  }
}
