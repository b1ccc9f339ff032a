/**
 * The KV block pool of one engine with vLLM's automatic prefix caching.
 *
 * Every block is in exactly one of three states:
 * - referenced: held by at least one running request (`refs > 0`); never evicted;
 * - cached: unreferenced but still holding a full prompt block under its hash id, so a later
 *   request can reuse it; evicted least recently freed first when space is needed;
 * - free: empty.
 * referenced + cached + free = capacity. Only full prompt blocks carry a hash; partial and
 * generated blocks are anonymous (counted, not stored) and become free when released.
 *
 * Storage is flat, for the simulator's hot path: a hashed block lives in a slot (its handle)
 * with its id and reference count; cached slots form an index-linked LRU list (oldest at
 * `head`); an open-addressing table (linear probing, backward-shift deletion, at most half
 * full) maps ids to slots. There are `capacity` slots, and hashed blocks never exceed the
 * capacity, so a slot is always there for a block being named.
 */
const NONE = -1;
const TWO_32 = 4294967296;

export class BlockPool {
  private readonly ids: Float64Array;
  private readonly refs: Int32Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly unusedSlots: Int32Array;
  private unusedTop: number;
  private readonly table: Int32Array;
  private readonly mask: number;
  private head = NONE;
  private tail = NONE;
  private cachedBlocks = 0;
  private referencedBlocks = 0;
  /** Blocks evicted to make room, over the pool's life. */
  evictions = 0;

  constructor(readonly capacity: number) {
    if (!(Number.isSafeInteger(capacity) && capacity > 0))
      throw new RangeError(`capacity must be a positive integer of blocks, got ${capacity}`);
    this.ids = new Float64Array(capacity);
    this.refs = new Int32Array(capacity);
    this.prev = new Int32Array(capacity).fill(NONE);
    this.next = new Int32Array(capacity).fill(NONE);
    this.unusedSlots = Int32Array.from({ length: capacity }, (_, i) => capacity - 1 - i);
    this.unusedTop = capacity;
    let size = 16;
    while (size < capacity * 2) size *= 2;
    this.table = new Int32Array(size); // slot + 1; 0 = empty
    this.mask = size - 1;
  }

  get referenced(): number {
    return this.referencedBlocks;
  }

  get cached(): number {
    return this.cachedBlocks;
  }

  /** Blocks an allocation can take: free ones and evictable cached ones. */
  get available(): number {
    return this.capacity - this.referencedBlocks;
  }

  /** How many leading ids of `ids` are present (referenced or cached). */
  matchPrefix(ids: readonly number[], limit = ids.length): number {
    let n = 0;
    while (n < limit && this.find(ids[n]!) !== NONE) n++;
    return n;
  }

  /** Takes a reference on the present block `id` (from matchPrefix); returns its handle. */
  acquire(id: number): number {
    const slot = this.find(id);
    if (slot === NONE) throw new Error(`block ${id} is not in the pool`);
    if (this.refs[slot]!++ === 0) {
      this.unlink(slot);
      this.cachedBlocks--;
      this.referencedBlocks++;
    }
    return slot;
  }

  /**
   * Takes `count` new blocks, evicting cached ones (oldest first) if free ones run out.
   * Returns false, taking nothing, when fewer than `count` are available.
   */
  allocate(count: number): boolean {
    if (count > this.available) return false;
    for (let free = this.capacity - this.referencedBlocks - this.cachedBlocks; free < count; free++) this.evictOldest();
    this.referencedBlocks += count;
    return true;
  }

  /**
   * Names a block allocated by `allocate` with the hash `id` once it holds a full prompt block,
   * returning its handle. If another block already holds that id (two requests computed the
   * same block at once), the new one stays anonymous (NONE), as in vLLM.
   */
  register(id: number): number {
    if (this.find(id) !== NONE) return NONE;
    const slot = this.unusedSlots[--this.unusedTop]!;
    this.ids[slot] = id;
    this.refs[slot] = 1;
    let at = this.home(id);
    while (this.table[at] !== 0) at = (at + 1) & this.mask;
    this.table[at] = slot + 1;
    return slot;
  }

  /** Drops a reference on a named block; at zero it becomes cached (most recently freed). */
  release(slot: number): void {
    if (this.refs[slot]! <= 0) throw new Error(`block ${this.ids[slot]} released more often than acquired`);
    if (--this.refs[slot]! === 0) {
      this.referencedBlocks--;
      this.cachedBlocks++;
      this.prev[slot] = this.tail;
      this.next[slot] = NONE;
      if (this.tail === NONE) this.head = slot;
      else this.next[this.tail] = slot;
      this.tail = slot;
    }
  }

  /** Returns `count` anonymous blocks to the free list. */
  releaseAnonymous(count: number): void {
    if (count > this.referencedBlocks) throw new Error('anonymous blocks released beyond those referenced');
    this.referencedBlocks -= count;
  }

  private evictOldest(): void {
    const slot = this.head;
    this.unlink(slot);
    this.cachedBlocks--;
    this.evictions++;
    this.remove(this.ids[slot]!);
    this.unusedSlots[this.unusedTop++] = slot;
  }

  private unlink(slot: number): void {
    const before = this.prev[slot]!;
    const after = this.next[slot]!;
    if (before === NONE) this.head = after;
    else this.next[before] = after;
    if (after === NONE) this.tail = before;
    else this.prev[after] = before;
  }

  private home(id: number): number {
    let h = Math.imul(id | 0, 0x9e3779b1) ^ Math.imul(Math.floor(id / TWO_32) | 0, 0x85ebca77);
    h ^= h >>> 15;
    h = Math.imul(h, 0x2c1b3c6d);
    h ^= h >>> 12;
    return h & this.mask;
  }

  private find(id: number): number {
    for (let at = this.home(id); ; at = (at + 1) & this.mask) {
      const entry = this.table[at]!;
      if (entry === 0) return NONE;
      if (this.ids[entry - 1] === id) return entry - 1;
    }
  }

  /** Deletes `id` from the table, shifting later entries of its probe run back into the gap. */
  private remove(id: number): void {
    let gap = this.home(id);
    while (this.ids[this.table[gap]! - 1] !== id) gap = (gap + 1) & this.mask;
    for (let at = (gap + 1) & this.mask; this.table[at] !== 0; at = (at + 1) & this.mask) {
      const home = this.home(this.ids[this.table[at]! - 1]!);
      // The entry may move into the gap unless its home lies cyclically in (gap, at].
      const stays = gap <= at ? home > gap && home <= at : home > gap || home <= at;
      if (stays) continue;
      this.table[gap] = this.table[at]!;
      gap = at;
    }
    this.table[gap] = 0;
  }
}
