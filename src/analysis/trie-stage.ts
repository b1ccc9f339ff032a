/**
 * The global half of trace characterization: every request, in arrival order, walks the one
 * prefix trie of the whole trace (the any-session ceiling needs all sessions in one trie). For
 * each request it records the previously-seen prefix (any-session match) and its leaf node,
 * and forwards the request's path of node numbers to its session's shard. At the end, given
 * the merged per-node session counts, it turns each leaf into the request's shared depth.
 *
 * The trie is the addon's or the TypeScript reference (make-prefix-trie.ts), with identical
 * results; either walks a whole id batch per call (walkBatch), so the addon is crossed about
 * once per 128k ids, not once per request.
 */
import { makePrefixTrie } from '../trace/make-prefix-trie.js';
import type { BlockTrie } from '../trace/prefix-trie.js';
import { Growable } from './growable.js';
import type { ShardBatch } from './session-shard.js';

/** A batch of requests: repeated [session, length, id_0 … id_{length-1}], ids as doubles. */
export type IdBatch = Float64Array;

/** Where the stage sends each shard's batches; may ask the stage to wait. */
export type ShardSink = (batch: ShardBatch) => Promise<void> | void;

export interface TrieResult {
  /** Any-session matched blocks per request, in arrival order. */
  anyMatch: Uint32Array;
  /** Shared-prefix nodes on each request's path (a prefix of it), in arrival order. */
  sharedDepth: Uint32Array;
  /** Trie nodes, the root excluded: distinct prefixes in the trace. */
  distinctBlocks: number;
}

const SHARD_BATCH_WORDS = 1 << 18;

/** The shard that owns a session: the reader and the trie stage must agree on it. */
export function shardOf(session: number, shards: number): number {
  return session % shards;
}

export class TrieStage {
  private readonly trie: BlockTrie;
  private readonly anyMatch = new Growable(Uint32Array, 1 << 12);
  private readonly leaf = new Growable(Uint32Array, 1 << 12);
  private readonly outgoing: PathBatchBuilder[];
  /** walkBatch's output: per request its walk() result, and the batch's layout with nodes for ids. */
  private seen = new Uint32Array(1 << 12);
  private paths = new Uint32Array(1 << 12);

  /** `native`: the addon's trie (it must load) or the TypeScript reference. */
  constructor(
    private readonly sinks: ShardSink[],
    native: boolean,
  ) {
    this.trie = makePrefixTrie(native);
    this.outgoing = sinks.map(() => new PathBatchBuilder());
  }

  /** Walks every request of `batch`; resolves when the shards have taken what they were sent. */
  async add(batch: IdBatch): Promise<void> {
    // A request takes at least its two header words.
    if (this.seen.length < batch.length / 2) this.seen = new Uint32Array(Math.ceil(batch.length / 2));
    if (this.paths.length < batch.length) this.paths = new Uint32Array(batch.length);
    const { seen, paths } = this;
    const requests = this.trie.walkBatch(batch, seen, paths);
    const shards = this.sinks.length;
    for (let r = 0, at = 0; r < requests; r++) {
      const session = paths[at]!;
      const length = paths[at + 1]!;
      this.anyMatch.push(seen[r]!);
      this.leaf.push(length === 0 ? 0 : paths[at + 1 + length]!);
      const shard = shardOf(session, shards);
      const out = this.outgoing[shard]!;
      if (!out.fits(length)) await this.sinks[shard]!(out.take());
      out.append(paths, at, 2 + length);
      at += 2 + length;
    }
  }

  /** Sends what is still buffered to the shards. */
  async flush(): Promise<void> {
    for (let shard = 0; shard < this.sinks.length; shard++) {
      if (this.outgoing[shard]!.words > 0) await this.sinks[shard]!(this.outgoing[shard]!.take());
    }
  }

  /**
   * `nodeSessions`: distinct sessions per node over the whole trace (saturating). A node is
   * visited by every session that visits its children, so shared nodes (≥ `minSessions`) form
   * a prefix of every path, and one pass in node order (parents first) gives each node the
   * number of shared nodes on its path.
   */
  finish(nodeSessions: Uint8Array, minSessions: number): TrieResult {
    const trie = this.trie;
    const depth = new Uint32Array(trie.size);
    trie.markedDepths(nodeSessions, minSessions, depth);
    const leaves = this.leaf.view();
    const sharedDepth = new Uint32Array(leaves.length);
    for (let r = 0; r < leaves.length; r++) sharedDepth[r] = depth[leaves[r]!]!;
    return { anyMatch: this.anyMatch.view().slice(), sharedDepth, distinctBlocks: trie.size - 1 };
  }
}

/** Packs [session, length, nodes…] records for one shard into a transferable buffer. */
class PathBatchBuilder {
  private buffer = new Uint32Array(SHARD_BATCH_WORDS);
  words = 0;

  fits(length: number): boolean {
    return this.words === 0 || this.words + 2 + length <= this.buffer.length;
  }

  /** Appends the record records[at, at + words): [session, length, nodes…]. */
  append(records: Uint32Array, at: number, words: number): void {
    if (this.words + words > this.buffer.length) this.buffer = new Uint32Array(words);
    const buffer = this.buffer;
    // Most records are short: a loop beats a subarray and set() per record.
    if (words < 64) for (let i = 0; i < words; i++) buffer[this.words + i] = records[at + i]!;
    else buffer.set(records.subarray(at, at + words), this.words);
    this.words += words;
  }

  /** The filled batch; the builder starts a fresh buffer (the old one may be transferred). */
  take(): Uint32Array {
    const batch = this.buffer.subarray(0, this.words);
    this.buffer = new Uint32Array(SHARD_BATCH_WORDS);
    this.words = 0;
    return batch;
  }
}

/** Sums per-shard node session counts (shards hold disjoint sessions), saturating at 255. */
export function mergeNodeSessions(counts: Uint8Array[]): Uint8Array {
  const merged = new Uint8Array(Math.max(0, ...counts.map((c) => c.length)));
  for (const shard of counts) {
    for (let node = 0; node < shard.length; node++) merged[node] = Math.min(255, merged[node]! + shard[node]!);
  }
  return merged;
}
