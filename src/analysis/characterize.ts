/**
 * Workload characterization of a trace before any request is sent (the B1′): counts,
 * turns and input lengths, theoretical APC ceilings, reuse decomposition, KV footprint.
 *
 * One streaming pass through a three-stage pipeline (pipeline.ts):
 * 1. this thread reads and validates the trace, numbers the sessions, keeps each request's
 *    lengths, and batches its ids to the trie stage;
 * 2. the trie stage walks every request through the one global prefix trie (the any-session
 *    ceiling needs all sessions in one trie; the addon's when it loads) and sends each
 *    request's path of node numbers to its session's shard;
 * 3. the session shards (Piscina workers; sessions sharded by number) compute intra-session
 *    matches and per-node session counts, merged by summing since shards hold disjoint
 *    sessions.
 * The merged counts mark the shared-prefix nodes, and every per-request figure is a function
 * of (any match, intra match, shared depth). Definitions: docs/traces.md.
 */
import type { TraceRequest } from '../trace/types.js';
import { DEFAULT_MODEL_PRESET, MODEL_PRESETS, kvBytesPerToken } from '../trace/model-presets.js';
import { nativeTrieByDefault } from '../trace/make-prefix-trie.js';
import { invalidValue } from '../trace/trace-errors.js';
import { Growable } from './growable.js';
import { defaultWorkers, inlinePipeline, threadedPipeline, type Pipeline } from './pipeline.js';
import type { ShardResult } from './session-shard.js';
import { summarize, type RequestFigures, type TraceSummary } from './trace-summary.js';
import { shardOf, type TrieResult } from './trie-stage.js';

export interface CharacterizeOptions {
  /** Session shards, each on a Piscina thread (plus one thread for the trie stage); 0 runs
   *  everything in this thread. Default: one per core beyond the first, at least 1. */
  workers?: number;
  /** Shard count when `workers` is 0 (default 1). */
  shards?: number;
  /** Model preset for the KV footprint (MODEL_PRESETS key). */
  model?: string;
  /** Sessions a prefix needs to count as a shared (system) prefix. */
  sharedMinSessions?: number;
  /** Walk the addon's prefix trie (true: it must load) or the TypeScript reference (false); the
   *  results are identical. Default: the addon's when it loads and KVROUTE_NATIVE is not 0. */
  native?: boolean;
}

const BATCH_WORDS = 1 << 17;

export async function characterizeTrace(
  source: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  options: CharacterizeOptions = {},
): Promise<TraceSummary> {
  const modelKey = options.model ?? DEFAULT_MODEL_PRESET;
  const preset = MODEL_PRESETS[modelKey];
  if (preset === undefined) throw invalidValue('model', `one of ${Object.keys(MODEL_PRESETS).join(', ')}`, modelKey);
  const { figures, trie, shards, minSessions } = await matchTrace(source, options);
  return summarize(figures, trie, shards, {
    modelKey,
    preset,
    kvBytesPerToken: kvBytesPerToken(preset),
    sharedMinSessions: minSessions,
  });
}

/** Every request's walk: what summarize() reads, and what run-reuse.ts attributes cached tokens by. */
export interface TraceMatches {
  figures: RequestFigures;
  trie: TrieResult;
  shards: ShardResult[];
  minSessions: number;
}

/** Runs the pipeline over `source` (options as characterizeTrace's; `model` unused). */
/**
 * Walks the trace through the tries. `observe`, when given, sees every request as it is read, in
 * arrival order, with its session's number (0-based, in order of first appearance; a sessionless
 * request has one of its own): what a caller keeps per request beside the walk, without a
 * generator of its own around `source` (one per request costs a promise).
 */
export async function matchTrace(
  source: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  options: CharacterizeOptions = {},
  observe?: (request: TraceRequest, session: number) => void,
): Promise<TraceMatches> {
  const workers = options.workers ?? defaultWorkers();
  if (!Number.isSafeInteger(workers) || workers < 0) throw invalidValue('workers', 'a non-negative integer', workers);
  const shards = workers === 0 ? (options.shards ?? 1) : workers;
  if (!Number.isSafeInteger(shards) || shards < 1 || shards > 255)
    throw invalidValue('shards', 'an integer in [1, 255]', shards);
  const minSessions = options.sharedMinSessions ?? 8;
  if (!Number.isSafeInteger(minSessions) || minSessions < 1)
    throw invalidValue('sharedMinSessions', 'a positive integer', minSessions);
  const native = options.native ?? nativeTrieByDefault();
  const pipeline = workers === 0 ? inlinePipeline(shards, native) : threadedPipeline(shards, native);
  try {
    const figures = await read(source, pipeline, shards, observe);
    const { trie, shards: results } = await pipeline.finish(minSessions);
    return { figures, trie, shards: results, minSessions };
  } finally {
    await pipeline.close();
  }
}

/** Calls `visit` for every request in arrival order with its matched blocks: any-session, intra-session, shared. */
export function forEachMatch(
  m: TraceMatches,
  visit: (request: number, any: number, intra: number, shared: number) => void,
): void {
  const shardOf = m.figures.shard.view();
  const cursor = new Array<number>(m.shards.length).fill(0);
  for (let r = 0; r < shardOf.length; r++) {
    const shard = shardOf[r]!;
    const any = m.trie.anyMatch[r]!;
    visit(r, any, m.shards[shard]!.intraMatches[cursor[shard]!++]!, Math.min(any, m.trie.sharedDepth[r]!));
  }
}

async function read(
  source: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  pipeline: Pipeline,
  shardCount: number,
  observe: ((request: TraceRequest, session: number) => void) | undefined,
): Promise<RequestFigures> {
  const figures: RequestFigures = {
    shard: new Growable(Uint8Array),
    inputLength: new Growable(Float64Array),
    outputLength: new Growable(Float64Array),
    blockSize: new Growable(Uint32Array),
    sessionless: new Growable(Uint8Array),
    totals: { firstArrival: Infinity, lastArrival: -Infinity, blocks: 0 },
    sessionRequests: new Growable(Uint32Array),
  };
  const sessionNumbers = new Map<string, number>();
  let batch = new Float64Array(BATCH_WORDS);
  let words = 0;
  for await (const request of source) {
    const ids = request.hashIds;
    figures.inputLength.push(request.inputLength);
    figures.outputLength.push(request.outputLength);
    figures.blockSize.push(request.blockSize);
    figures.sessionless.push(request.sessionless ? 1 : 0);
    figures.totals.firstArrival = Math.min(figures.totals.firstArrival, request.arrival);
    figures.totals.lastArrival = Math.max(figures.totals.lastArrival, request.arrival);
    figures.totals.blocks += ids.length;

    // Sessionless requests are sessions of their own, numbered but not remembered.
    let session = request.sessionless ? undefined : sessionNumbers.get(request.session);
    if (session === undefined) {
      session = figures.sessionRequests.length;
      figures.sessionRequests.push(0);
      if (!request.sessionless) sessionNumbers.set(request.session, session);
    }
    figures.sessionRequests.raw[session]!++;
    observe?.(request, session);
    figures.shard.push(shardOf(session, shardCount));

    if (words > 0 && words + 2 + ids.length > batch.length) {
      await pipeline.send(batch.subarray(0, words));
      batch = new Float64Array(Math.max(BATCH_WORDS, 2 + ids.length));
      words = 0;
    } else if (2 + ids.length > batch.length) {
      batch = new Float64Array(2 + ids.length);
    }
    batch[words++] = session;
    batch[words++] = ids.length;
    for (let i = 0; i < ids.length; i++) batch[words++] = ids[i]!;
  }
  if (words > 0) await pipeline.send(batch.subarray(0, words));
  return figures;
}
