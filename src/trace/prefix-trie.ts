/**
 * A trie of block-id sequences, stored flat: node n has a parent and the block id on the edge
 * into it (node-indexed arrays), and an open-addressing table finds a child by its prefix.
 * Built for traces of 10^8 blocks, where a JS Map (capped at 2^24 entries, ~80 B each) would
 * not do: about 28 bytes per node.
 *
 * Invariants:
 * - node 0 is the root (the empty prefix); real nodes are 1..size-1;
 * - nodes are numbered in insertion order, so a parent's number is smaller than its
 *   children's, and one pass in number order visits every parent before its children;
 * - a node's table slot comes from a rolling hash of its whole prefix, not from (parent, id):
 *   every depth's hash is known before any lookup, so the CPU overlaps the table's cache
 *   misses instead of waiting for each parent in turn;
 * - the table is at most half full, probed linearly; a slot is [node, prefix hash]
 *   (node 0 = empty). A lookup compares the hash first and then (parent, id) exactly through
 *   the node arrays, so a hash collision costs a probe, never a wrong answer. Growing reads
 *   the old table in order and needs no node arrays;
 * - a request inserts its new blocks as a run of consecutive node numbers, so the child of
 *   node n is usually n + 1: the walk checks that (sequential memory) before the table.
 * Ids are safe integers, split exactly into two 32-bit halves. The hash is seeded per trie,
 * so a crafted trace cannot make every prefix collide.
 *
 * This is the reference: the addon's PrefixTrie (native/trie/prefix-trie.h, about 18 bytes per node
 * and several times faster) gives exactly its results, and trace analysis uses it when the addon
 * loads (make-prefix-trie.ts).
 */
import type { BlockTrie } from '../core/block-trie.js';

export type { BlockTrie };

const MIN_SLOTS = 1 << 12;
const TWO_32 = 4294967296;

export class PrefixTrie implements BlockTrie {
  private parents = new Uint32Array(MIN_SLOTS / 2);
  private edgeLow = new Int32Array(MIN_SLOTS / 2);
  private edgeHigh = new Int32Array(MIN_SLOTS / 2);
  private table = new Int32Array(MIN_SLOTS * 2);
  private mask = MIN_SLOTS - 1;
  private nodes = 1;
  private readonly seed = (Math.random() * TWO_32) | 0;

  /** Number of nodes, the root included. */
  get size(): number {
    return this.nodes;
  }

  parentOf(node: number): number {
    return this.parents[node]!;
  }

  /**
   * Walks `ids` from the root, inserting what is missing, and writes the node of every block
   * into `path` (which must hold `ids.length` entries). Returns how many leading blocks were
   * already present: the request's longest previously seen prefix. Once a block is missing,
   * every deeper one is new, so inserting stops probing.
   */
  walk(ids: ArrayLike<number>, path: Uint32Array): number {
    return this.walkRange(ids, 0, ids.length, path, 0);
  }

  walkBatch(batch: Float64Array, seen: Uint32Array, paths: Uint32Array): number {
    let requests = 0;
    for (let at = 0; at < batch.length;) {
      const length = batch[at + 1]!;
      paths[at] = batch[at]!;
      paths[at + 1] = length;
      seen[requests++] = this.walkRange(batch, at + 2, length, paths, at + 2);
      at += 2 + length;
    }
    return requests;
  }

  markedDepths(counts: Uint8Array, minCount: number, depth: Uint32Array): void {
    depth[0] = 0;
    for (let node = 1; node < this.nodes; node++)
      depth[node] = depth[this.parents[node]!]! + ((counts[node] ?? 0) >= minCount ? 1 : 0);
  }

  /** walk() over ids[from, from + length), writing path[to, to + length). */
  private walkRange(ids: ArrayLike<number>, from: number, length: number, path: Uint32Array, to: number): number {
    let node = 0;
    let hash = this.seed;
    let depth = 0;
    for (; depth < length; depth++) {
      const id = ids[from + depth]!;
      const low = id | 0;
      const high = Math.floor(id / TWO_32) | 0;
      hash = extend(hash, low, high);
      const next = node + 1;
      const child =
        next < this.nodes && this.parents[next] === node && this.edgeLow[next] === low && this.edgeHigh[next] === high
          ? next
          : this.lookup(hash, node, low, high);
      if (child === 0) break;
      path[to + depth] = node = child;
    }
    const seen = depth;
    for (; depth < length; depth++) {
      const id = ids[from + depth]!;
      const low = id | 0;
      const high = Math.floor(id / TWO_32) | 0;
      // The first missing depth's hash was computed by the loop above.
      if (depth > seen) hash = extend(hash, low, high);
      path[to + depth] = node = this.insert(hash, node, low, high);
    }
    return seen;
  }

  /** The child of `parent` along (low, high) whose prefix hashes to `hash`, or 0. */
  private lookup(hash: number, parent: number, low: number, high: number): number {
    const table = this.table;
    for (let slot = hash & this.mask; ; slot = (slot + 1) & this.mask) {
      const node = table[slot << 1]!;
      if (node === 0) return 0;
      if (
        table[(slot << 1) + 1] === hash &&
        this.parents[node] === parent &&
        this.edgeLow[node] === low &&
        this.edgeHigh[node] === high
      )
        return node;
    }
  }

  /** Adds a child known to be absent and returns its number. */
  private insert(hash: number, parent: number, low: number, high: number): number {
    if (this.nodes * 2 >= this.mask + 1) this.grow();
    const node = this.nodes++;
    if (node >= this.parents.length) this.growNodes();
    this.parents[node] = parent;
    this.edgeLow[node] = low;
    this.edgeHigh[node] = high;
    this.place(this.table, this.mask, node, hash);
    return node;
  }

  private place(table: Int32Array, mask: number, node: number, hash: number): void {
    let slot = hash & mask;
    while (table[slot << 1] !== 0) slot = (slot + 1) & mask;
    table[slot << 1] = node;
    table[(slot << 1) + 1] = hash;
  }

  private grow(): void {
    const old = this.table;
    const table = new Int32Array(old.length * 2);
    const mask = table.length / 2 - 1;
    for (let at = 0; at < old.length; at += 2) if (old[at] !== 0) this.place(table, mask, old[at]!, old[at + 1]!);
    this.table = table;
    this.mask = mask;
  }

  private growNodes(): void {
    const grown = <A extends Int32Array | Uint32Array>(old: A, make: new (length: number) => A): A => {
      const array = new make(old.length * 2);
      array.set(old);
      return array;
    };
    this.parents = grown(this.parents, Uint32Array);
    this.edgeLow = grown(this.edgeLow, Int32Array);
    this.edgeHigh = grown(this.edgeHigh, Int32Array);
  }
}

/** The hash of a prefix extended by one id (a 32-bit mix; the root's hash is the seed). */
function extend(parentHash: number, low: number, high: number): number {
  let h = (parentHash ^ Math.imul(low, 0x85ebca77)) + Math.imul(high ^ 0x27d4eb2f, 0xc2b2ae3d);
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
  return h ^ (h >>> 12);
}
