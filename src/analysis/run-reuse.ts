/**
 * Where a run's cached tokens came from: intra-session, cross-session or shared-prefix reuse
 * (the reference experiments' "real reuse decomposition"). The trace the run replayed is walked exactly as
 * `analyze trace` walks it (characterize.ts: one global block trie, per-session shards,
 * shared = a trie node visited by ≥ `sharedMinSessions` sessions), giving each request its
 * matched blocks any-session (A), intra-session (I) and shared (S). Each record's
 * cached_tokens C (block size B) is then split by cumulative caps, in this order:
 *   shared = min(C, S·B); intra = min(C, max(S, I)·B) − shared;
 *   cross = min(C, max(S, I, A)·B) − shared − intra; unclassified = C − the three.
 * Unclassified: tokens the engine reported cached beyond any earlier request's prefix (a
 * partial block, or a cache the trace cannot explain), and a sessionless request's non-shared
 * reuse (it has no session to be intra to). Failed records and trace requests without a record
 * (a stopped run) count nothing.
 *
 * The trace's fingerprint is computed while it is read and must equal the records' header.
 */
import type { RequestRecord, RunHeader } from '../trace/records.js';
import { TraceFingerprint } from '../trace/trace-fingerprint.js';
import type { TraceRequest } from '../trace/types.js';
import { forEachMatch, matchTrace, type CharacterizeOptions } from './characterize.js';
import { Growable } from './growable.js';
import { isFailed } from './run-metrics.js';

export interface ReuseSplit {
  intra_session: number;
  cross_session: number;
  shared_prefix: number;
  unclassified: number;
}

export interface RunReuse {
  /** Fractions of the attributed cached tokens. */
  fractions: ReuseSplit;
  tokens: ReuseSplit;
  /** Records matched to a trace request by (session, turn). */
  matched_records: number;
  shared_prefix_min_sessions: number;
}

/** The trace does not match the run's records. A data error (exit 1). */
export class TraceMismatchError extends Error {
  readonly code = 'ERR_KVROUTE_RECORDS' as const;
}

/**
 * Each successful record's cached tokens, by session and then turn (an array per session: no
 * key string per request). All runReuse needs of the records, so a caller can let go of them
 * before the trace walk (a million records are ~350 MB of heap the collector would otherwise
 * keep scanning beside the trie).
 */
export type CachedByRequest = Map<string, number[]>;

export function cachedByRequest(records: readonly RequestRecord[]): CachedByRequest {
  const cachedOf: CachedByRequest = new Map();
  for (const r of records) {
    if (isFailed(r)) continue;
    let turns = cachedOf.get(r.session);
    if (turns === undefined) cachedOf.set(r.session, (turns = []));
    turns[r.turn] = r.cached_tokens;
  }
  return cachedOf;
}

/** The reuse split; `cachedOf` from cachedByRequest. */
export async function runReuse(
  tracePath: string,
  source: AsyncIterable<TraceRequest> | Iterable<TraceRequest>,
  cachedOf: CachedByRequest,
  header: RunHeader | undefined,
  options: CharacterizeOptions = {},
): Promise<RunReuse> {
  // Taken as each trace request passes: one typed-array entry per request (the walk keeps each
  // request's block size and sessionless flag itself, in matches.figures). A session's turns are
  // looked up by name once, then by its number: a string key into a map of 10^5 sessions costs a
  // few cache misses per request on the reading thread, the busiest.
  const fingerprint = new TraceFingerprint();
  const cached = new Growable(Float64Array, 1 << 16);
  const turnsOf: (number[] | null)[] = [];
  const matches = await matchTrace(source, options, (request, session) => {
    fingerprint.add(request);
    let turns = turnsOf[session];
    if (turns === undefined) turnsOf[session] = turns = cachedOf.get(request.session) ?? null;
    cached.push(turns?.[request.turn] ?? -1);
  });
  const digest = fingerprint.digest();
  if (header !== undefined && digest !== header.trace.fingerprint)
    throw new TraceMismatchError(
      `${tracePath} is not the trace these records ran: its fingerprint is ${digest}, the records' header says ${header.trace.fingerprint} (${header.trace.path}); read it with the run's trace flags (the run was: kvroute ${header.command.join(' ')})`,
    );
  const tokens: ReuseSplit = { intra_session: 0, cross_session: 0, shared_prefix: 0, unclassified: 0 };
  let matched = 0;
  const cachedView = cached.view();
  const sizes = matches.figures.blockSize.view();
  const noSession = matches.figures.sessionless.view();
  forEachMatch(matches, (r, any, intra, shared) => {
    const c = cachedView[r]!;
    if (c < 0) return;
    matched++;
    const b = sizes[r]!;
    const s = Math.min(c, shared * b);
    const i = noSession[r] ? 0 : Math.min(c, Math.max(shared, intra) * b) - s;
    const x = noSession[r] ? 0 : Math.min(c, Math.max(shared, intra, any) * b) - s - i;
    tokens.shared_prefix += s;
    tokens.intra_session += i;
    tokens.cross_session += x;
    tokens.unclassified += c - s - i - x;
  });
  const total = tokens.intra_session + tokens.cross_session + tokens.shared_prefix + tokens.unclassified;
  const fraction = (n: number): number => (total === 0 ? 0 : n / total);
  return {
    fractions: {
      intra_session: fraction(tokens.intra_session),
      cross_session: fraction(tokens.cross_session),
      shared_prefix: fraction(tokens.shared_prefix),
      unclassified: fraction(tokens.unclassified),
    },
    tokens,
    matched_records: matched,
    shared_prefix_min_sessions: matches.minSessions,
  };
}
