/**
 * The shape of a prefix trie of block-id sequences, as trace analysis uses it. Two classes
 * implement it alike: the TypeScript reference (src/trace/prefix-trie.ts) and the addon's
 * PrefixTrie (native/trie/prefix-trie.h, typed in native.ts). It lives in the core, beside the addon's
 * typings, so the core names it without importing a trace module; src/trace re-exports it.
 */
/** What trace analysis needs of a prefix trie. */
export interface BlockTrie {
  /** Number of nodes, the root included. */
  readonly size: number;
  /** The parent of `node` (< size); the root's is 0. */
  parentOf(node: number): number;
  /** See PrefixTrie.walk. */
  walk(ids: Float64Array, path: Uint32Array): number;
  /**
   * Walks every request of an IdBatch (repeated [session, length, id_0 … id_{length-1}]) in
   * order: `paths` gets the batch's layout with each id replaced by its node (headers copied),
   * `seen[r]` request r's walk() result. Returns the number of requests.
   */
  walkBatch(batch: Float64Array, seen: Uint32Array, paths: Uint32Array): number;
  /**
   * Fills `depth` (size entries): for every node, how many nodes on its path (itself included,
   * the root not) have `counts[node] >= minCount` (counts past the end are 0).
   */
  markedDepths(counts: Uint8Array, minCount: number, depth: Uint32Array): void;
}
