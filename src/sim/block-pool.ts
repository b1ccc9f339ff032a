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
 * `head`); an open-addressing table (linear probing, each entry's id stored beside it) maps
 * ids to slots. The table has at least 4 × capacity entries; deletion leaves a tombstone, and
 * the table is rebuilt once blocks and tombstones together pass half of it, so a probe always
 * ends at an empty entry. There are `capacity` slots, and hashed blocks never exceed the
 * capacity, so a slot is always there for a block being named.
 *
 * Listening (KV cache events, docs/kv-events.md): an optional `listener` hears a block named
 * (`register`), a cached block evicted, and the prefix cache reset. With no listener the cost
 * is one field test per naming or eviction; the pool never calls out otherwise. The `origin`
 * and `position` given to `register` are passed through untouched, so the caller can say which
 * request's which block it was (the engine model uses them for the block's tokens and parent).
 */
const NONE = -1;
const EMPTY = 0;
const TOMBSTONE = -1;
const TWO_32 = 4294967296;

/** Hears a pool's named, evicted and cleared blocks (see the header). Calls are synchronous. */
export interface BlockPoolListener<Origin> {
  /** `id` now names a block holding a full prompt block: `register(id, origin, position)`. */
  named(id: number, origin: Origin | undefined, position: number): void;
  /** The cached block `id` was evicted to make room; its id is no longer in the pool. */
  evicted(id: number): void;
  /** `resetPrefixCache` dropped every cached block (none was referenced). */
  cleared(): void;
}

export class BlockPool<Origin = unknown> {
  /** Optional; see BlockPoolListener. Set it before the first block is named to hear them all. */
  listener: BlockPoolListener<Origin> | undefined = undefined;
  private readonly ids: Float64Array;
  private readonly refs: Int32Array;
  private readonly prev: Int32Array;
  private readonly next: Int32Array;
  private readonly unusedSlots: Int32Array;
  private unusedTop: number;
  private readonly table: Int32Array;
  /** The id of each table entry, beside it, so a probe reads one place, not the slot too. */
  private readonly keys: Float64Array;
  private readonly mask: number;
  private tombstones = 0;
  /** 32 − log2(groups of eight entries): the top bits of a group hash pick the group. */
  private readonly groupShift: number;
  private head = NONE;
  private tail = NONE;
  private cachedBlocks = 0;
  private referencedBlocks = 0;
  /** Blocks evicted to make room, over the pool's life. */
  evictions = 0;
  /**
   * Bumped by every change that can let a refused admission succeed: a reference dropped (space
   * freed) or a block named (a longer cached prefix). Allocations and acquisitions only take.
   */
  version = 0;

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
    while (size < capacity * 4) size *= 2;
    this.table = new Int32Array(size); // slot + 1; EMPTY or TOMBSTONE
    this.keys = new Float64Array(size);
    this.mask = size - 1;
    this.groupShift = 32 - Math.log2(size / 8);
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

  /**
   * Takes a reference on each leading id of `ids` that is present, up to `limit`, appending the
   * handles to `handles`; returns how many. One probe per block (matchPrefix + acquire is two).
   */
  acquirePrefix(ids: readonly number[], limit: number, handles: number[]): number {
    const { refs } = this;
    let n = 0;
    for (; n < limit; n++) {
      const slot = this.find(ids[n]!);
      if (slot === NONE) break;
      if (refs[slot]!++ === 0) {
        this.unlink(slot);
        this.cachedBlocks--;
        this.referencedBlocks++;
      }
      handles.push(slot);
    }
    return n;
  }

  /**
   * Drops one reference for each handle in `handles`; a NONE entry is an anonymous block, which
   * becomes free. Named blocks reaching zero become cached, most recently freed last, in order.
   */
  releaseAll(handles: readonly number[]): void {
    const { refs, prev, next } = this;
    this.version++;
    let anonymous = 0;
    for (const slot of handles) {
      if (slot === NONE) {
        anonymous++;
        continue;
      }
      if (refs[slot]! <= 0) throw new Error(`block ${this.ids[slot]} released more often than acquired`);
      if (--refs[slot]! !== 0) continue;
      this.referencedBlocks--;
      this.cachedBlocks++;
      prev[slot] = this.tail;
      next[slot] = NONE;
      if (this.tail === NONE) this.head = slot;
      else next[this.tail] = slot;
      this.tail = slot;
    }
    this.releaseAnonymous(anonymous);
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
   * same block at once), the new one stays anonymous (NONE), as in vLLM. `origin` and `position`
   * only reach the listener.
   */
  register(id: number, origin?: Origin, position = 0): number {
    if (this.find(id) !== NONE) return NONE;
    this.version++;
    const slot = this.unusedSlots[--this.unusedTop]!;
    this.ids[slot] = id;
    this.refs[slot] = 1;
    let at = this.home(id);
    while (this.table[at]! > 0) at = (at + 1) & this.mask;
    if (this.table[at] === TOMBSTONE) this.tombstones--;
    this.table[at] = slot + 1;
    this.keys[at] = id;
    if (this.listener !== undefined) this.listener.named(id, origin, position);
    return slot;
  }

  /**
   * vLLM's `reset_prefix_cache`: when no block is referenced, drops every cached block (they
   * become free, unnamed) and tells the listener `cleared` (not one `evicted` per block, as vLLM
   * sends one AllBlocksCleared). Returns false, changing nothing, while any block is referenced.
   */
  resetPrefixCache(): boolean {
    if (this.referencedBlocks > 0) return false;
    for (let slot = this.head; slot !== NONE; slot = this.next[slot]!) this.unusedSlots[this.unusedTop++] = slot;
    this.head = NONE;
    this.tail = NONE;
    this.cachedBlocks = 0;
    this.table.fill(EMPTY);
    this.tombstones = 0;
    this.version++;
    if (this.listener !== undefined) this.listener.cleared();
    return true;
  }

  /** Drops a reference on a named block; at zero it becomes cached (most recently freed). */
  release(slot: number): void {
    this.version++;
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
    this.version++;
    if (count > this.referencedBlocks) throw new Error('anonymous blocks released beyond those referenced');
    this.referencedBlocks -= count;
  }

  private evictOldest(): void {
    const slot = this.head;
    this.unlink(slot);
    this.cachedBlocks--;
    this.evictions++;
    const id = this.ids[slot]!;
    this.remove(id);
    this.unusedSlots[this.unusedTop++] = slot;
    if (this.listener !== undefined) this.listener.evicted(id);
  }

  private unlink(slot: number): void {
    const before = this.prev[slot]!;
    const after = this.next[slot]!;
    if (before === NONE) this.head = after;
    else this.next[before] = after;
    if (after === NONE) this.tail = before;
    else this.prev[after] = before;
  }

  /**
   * Table position of `id`. Ids are grouped by eight (id >> 3) and a group is hashed (Fibonacci
   * hashing of both 32-bit halves) to a run of eight entries, where the id's low three bits
   * place it. Trace ids are often consecutive within a request, so a prefix probes a few cache
   * lines instead of one per block; random ids (hashed text) spread as well as before.
   */
  private home(id: number): number {
    let mixed: number;
    if (id >>> 0 === id)
      mixed = id >>> 3; // ids below 2^32: integer arithmetic only
    else {
      const group = Math.floor(id / 8);
      mixed = (group | 0) ^ Math.imul(Math.floor(group / TWO_32) | 0, 0x85ebca77);
    }
    return ((Math.imul(mixed, 0x9e3779b1) >>> this.groupShift) << 3) | (id & 7);
  }

  private find(id: number): number {
    const { table, keys, mask } = this;
    for (let at = this.home(id); ; at = (at + 1) & mask) {
      const entry = table[at]!;
      if (entry === EMPTY) return NONE;
      if (entry !== TOMBSTONE && keys[at] === id) return entry - 1;
    }
  }

  /** Deletes the present `id` from the table, leaving a tombstone. */
  private remove(id: number): void {
    const { table, keys, mask } = this;
    let at = this.home(id);
    while (!(table[at]! > 0 && keys[at] === id)) at = (at + 1) & mask;
    table[at] = TOMBSTONE;
    if (++this.tombstones + this.cachedBlocks + this.referencedBlocks > table.length / 2) this.rebuild();
  }

  /** Re-inserts every live entry into a table cleared of tombstones. */
  private rebuild(): void {
    const { table, keys, mask } = this;
    const slots: number[] = [];
    for (let at = 0; at < table.length; at++) if (table[at]! > 0) slots.push(table[at]! - 1);
    table.fill(EMPTY);
    this.tombstones = 0;
    for (const slot of slots) {
      let at = this.home(this.ids[slot]!);
      while (table[at] !== EMPTY) at = (at + 1) & mask;
      table[at] = slot + 1;
      keys[at] = this.ids[slot]!;
    }
  }
}
