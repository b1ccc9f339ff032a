/**
 * Turns the per-request figures of one characterization pass into the summary. Definitions
 * (as in B1′, made exact in docs/traces.md):
 * - matched blocks of a request: the longest prefix of its hash_ids seen before it, in the
 *   global trie (any-session), in its session's trie (intra-session), or in the global trie
 *   restricted to shared nodes (shared-prefix: nodes visited by ≥ sharedMinSessions sessions
 *   over the whole trace);
 * - token ratio: Σ min(matched × block_size, input_length) ÷ Σ input_length; block ratio:
 *   Σ matched ÷ Σ blocks; hit requests: those with matched > 0;
 * - reuse: each block of the any-session match is shared-prefix (a shared node), else
 *   intra-session (its session saw it), else cross-session; requests without a session
 *   (Mooncake read without --infer-sessions) cannot tell the last two apart: unclassified.
 */
import type { ModelPreset } from '../trace/model-presets.js';
import type { Growable } from './growable.js';
import { percentileOfSorted, spread, type Spread } from './percentiles.js';
import type { ShardResult } from './session-shard.js';
import type { TrieResult } from './trie-stage.js';

/** What the reading thread keeps per request, in arrival order. */
export interface RequestFigures {
  shard: Growable<Uint8Array>;
  inputLength: Growable<Float64Array>;
  outputLength: Growable<Float64Array>;
  blockSize: Growable<Uint32Array>;
  sessionless: Growable<Uint8Array>;
  totals: { firstArrival: number; lastArrival: number; blocks: number };
  /** Requests per session, by session number. */
  sessionRequests: Growable<Uint32Array>;
}

export interface Ceiling {
  token_ratio: number;
  block_ratio: number;
  hit_requests: number;
}

export interface ReuseSplit {
  intra_session: number;
  cross_session: number;
  shared_prefix: number;
  unclassified: number;
}

export interface TraceSummary {
  requests: number;
  sessions: number;
  input_tokens: number;
  output_tokens: number;
  blocks: number;
  distinct_blocks: number;
  block_size: number | null;
  duration_s: number;
  turns_per_session: Spread & { mean: number };
  input_length: Spread & { mean: number };
  apc_ceiling: { any_session: Ceiling; intra_session: Ceiling; shared_prefix: Ceiling };
  shared_prefix_min_sessions: number;
  /** Fractions of the any-session matched blocks. */
  reuse: ReuseSplit;
  reuse_blocks: ReuseSplit;
  model: { preset: string; name: string; kv_bytes_per_token: number };
  kv_footprint_bytes: { p50: number; p90: number; p95: number; p99: number; max: number };
  /** [fraction of requests, footprint in bytes] at every percentile 0..100. */
  kv_footprint_cdf: Array<[number, number]>;
}

export interface SummaryModel {
  modelKey: string;
  preset: ModelPreset;
  kvBytesPerToken: number;
  sharedMinSessions: number;
}

export function summarize(
  figures: RequestFigures,
  trie: TrieResult,
  shards: ShardResult[],
  model: SummaryModel,
): TraceSummary {
  const requests = figures.inputLength.length;
  const any = trie.anyMatch;
  const sharedDepth = trie.sharedDepth;
  const shardOf = figures.shard.view();
  const input = figures.inputLength.view();
  const output = figures.outputLength.view();
  const blockSize = figures.blockSize.view();
  const sessionless = figures.sessionless.view();
  const cursor = new Array<number>(shards.length).fill(0);
  const ceilings = { any: new Tally(), intra: new Tally(), shared: new Tally() };
  const reuse: ReuseSplit = { intra_session: 0, cross_session: 0, shared_prefix: 0, unclassified: 0 };
  let inputTokens = 0;
  let outputTokens = 0;
  const blocks = figures.totals.blocks;
  const footprint = new Float64Array(requests);
  for (let r = 0; r < requests; r++) {
    const shard = shardOf[r]!;
    const intra = shards[shard]!.intraMatches[cursor[shard]!++]!;
    const matched = any[r]!;
    const shared = Math.min(matched, sharedDepth[r]!);
    const length = input[r]!;
    const size = blockSize[r]!;
    ceilings.any.add(matched, size, length);
    ceilings.intra.add(intra, size, length);
    ceilings.shared.add(shared, size, length);
    const intraOnly = Math.max(0, intra - shared);
    reuse.shared_prefix += shared;
    reuse.intra_session += intraOnly;
    if (sessionless[r]) reuse.unclassified += matched - shared - intraOnly;
    else reuse.cross_session += matched - shared - intraOnly;
    inputTokens += length;
    outputTokens += output[r]!;
    footprint[r] = (length + output[r]!) * model.kvBytesPerToken;
  }
  const reused = reuse.intra_session + reuse.cross_session + reuse.shared_prefix + reuse.unclassified;
  const fraction = (count: number): number => (reused === 0 ? 0 : count / reused);
  const sessions = figures.sessionRequests.length;
  const turns = figures.sessionRequests.view().slice();
  const inputSorted = input.slice();
  footprint.sort();
  const sizes = blockSize.length === 0 ? [] : [...new Set(blockSize)];
  return {
    requests,
    sessions,
    input_tokens: inputTokens,
    output_tokens: outputTokens,
    blocks,
    distinct_blocks: trie.distinctBlocks,
    block_size: sizes.length === 1 ? sizes[0]! : null,
    duration_s: requests === 0 ? 0 : figures.totals.lastArrival - figures.totals.firstArrival,
    turns_per_session: { ...spread(turns), mean: sessions === 0 ? 0 : requests / sessions },
    input_length: { ...spread(inputSorted), mean: requests === 0 ? 0 : inputTokens / requests },
    apc_ceiling: {
      any_session: ceilings.any.ceiling(inputTokens, blocks),
      intra_session: ceilings.intra.ceiling(inputTokens, blocks),
      shared_prefix: ceilings.shared.ceiling(inputTokens, blocks),
    },
    shared_prefix_min_sessions: model.sharedMinSessions,
    reuse: {
      intra_session: fraction(reuse.intra_session),
      cross_session: fraction(reuse.cross_session),
      shared_prefix: fraction(reuse.shared_prefix),
      unclassified: fraction(reuse.unclassified),
    },
    reuse_blocks: reuse,
    model: { preset: model.modelKey, name: model.preset.name, kv_bytes_per_token: model.kvBytesPerToken },
    kv_footprint_bytes: {
      p50: percentileOfSorted(footprint, 50),
      p90: percentileOfSorted(footprint, 90),
      p95: percentileOfSorted(footprint, 95),
      p99: percentileOfSorted(footprint, 99),
      max: requests === 0 ? 0 : footprint[requests - 1]!,
    },
    kv_footprint_cdf: Array.from({ length: 101 }, (_, p): [number, number] => [
      p / 100,
      percentileOfSorted(footprint, p),
    ]),
  };
}

class Tally {
  private tokens = 0;
  private blocks = 0;
  private hits = 0;

  add(matched: number, blockSize: number, inputLength: number): void {
    this.tokens += Math.min(matched * blockSize, inputLength);
    this.blocks += matched;
    if (matched > 0) this.hits++;
  }

  ceiling(inputTokens: number, blocks: number): Ceiling {
    return {
      token_ratio: inputTokens === 0 ? 0 : this.tokens / inputTokens,
      block_ratio: blocks === 0 ? 0 : this.blocks / blocks,
      hit_requests: this.hits,
    };
  }
}
