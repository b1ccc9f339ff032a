/** The reuse split of a run's cached tokens, on a crafted trace and records (block size 4). */
import { describe, expect, it } from 'vitest';

import { cachedByRequest, runReuse } from '../src/analysis/run-reuse.js';
import type { RequestRecord, RunHeader } from '../src/trace/records.js';
import { TraceFingerprint } from '../src/trace/trace-fingerprint.js';
import type { TraceRequest } from '../src/trace/types.js';

const request = (session: string, turn: number, hashIds: number[], sessionless = false): TraceRequest => ({
  session,
  turn,
  arrival: turn,
  inputLength: hashIds.length * 4,
  outputLength: 2,
  hashIds,
  blockSize: 4,
  ...(sessionless ? { sessionless } : {}),
});

// s1 sends [1,2] then [1,2,3]; s2 then sends [1,2,3,4]: its first 3 blocks were seen, by s1 only.
const TRACE = [request('s1', 0, [1, 2]), request('s1', 1, [1, 2, 3]), request('s2', 0, [1, 2, 3, 4])];

const record = (session: string, turn: number, cached: number, extra: Partial<RequestRecord> = {}): RequestRecord => ({
  session,
  turn,
  instance: 0,
  dispatch: 0,
  first_token: 1,
  finish: 2,
  input_tokens: 16,
  cached_tokens: cached,
  output_tokens: 2,
  overlapped: false,
  preemptions: 0,
  ...extra,
});

const RECORDS = [record('s1', 0, 0), record('s1', 1, 8), record('s2', 0, 14)];

function header(trace: TraceRequest[]): RunHeader {
  const fingerprint = new TraceFingerprint();
  for (const r of trace) fingerprint.add(r);
  return {
    format: 'kvroute-records',
    version: 2,
    source: 'sim',
    trace: { path: 't.jsonl', fingerprint: fingerprint.digest() },
    kvroute_version: '0.1.0',
    command: [],
    started_at: '2026-12-01T00:00:00Z',
  };
}

describe('runReuse', () => {
  it('splits cached tokens intra, cross, and beyond any earlier prefix unclassified', async () => {
    const reuse = await runReuse('t.jsonl', TRACE, cachedByRequest(RECORDS), header(TRACE), {
      workers: 0,
      sharedMinSessions: 3,
    });
    // s1 turn 1: 8 tokens its own session saw; s2: 12 seen by s1, 2 beyond the 3 matched blocks.
    expect(reuse.tokens).toEqual({ intra_session: 8, cross_session: 12, shared_prefix: 0, unclassified: 2 });
    expect(reuse.fractions.cross_session).toBeCloseTo(12 / 22);
    expect(reuse.matched_records).toBe(3);
  });

  it('gives shared-prefix blocks (visited by ≥ N sessions) precedence over intra and cross', async () => {
    const reuse = await runReuse('t.jsonl', TRACE, cachedByRequest(RECORDS), header(TRACE), {
      workers: 0,
      sharedMinSessions: 2,
    });
    // Prefixes [1], [1,2], [1,2,3] are visited by both sessions: shared for s1 turn 1 (8) and s2 (12).
    expect(reuse.tokens).toEqual({ intra_session: 0, cross_session: 0, shared_prefix: 20, unclassified: 2 });
  });

  it('counts nothing for failed records, caps at cached_tokens, and runs on Piscina threads alike', async () => {
    const records = [record('s1', 1, 3), record('s2', 0, 14, { status: 503, error: 'overloaded' })];
    const inline = await runReuse('t.jsonl', TRACE, cachedByRequest(records), header(TRACE), {
      workers: 0,
      sharedMinSessions: 3,
    });
    expect(inline.tokens).toEqual({ intra_session: 3, cross_session: 0, shared_prefix: 0, unclassified: 0 });
    expect(inline.matched_records).toBe(1);
    const threaded = await runReuse('t.jsonl', TRACE, cachedByRequest(records), header(TRACE), {
      workers: 2,
      sharedMinSessions: 3,
    });
    expect(threaded.tokens).toEqual(inline.tokens);
  });

  it('leaves a sessionless request its shared reuse only', async () => {
    const trace = [request('a', 0, [1, 2]), request('b', 0, [1, 2, 3], true)];
    const reuse = await runReuse('t.jsonl', trace, cachedByRequest([record('b', 0, 8)]), header(trace), { workers: 0 });
    expect(reuse.tokens).toEqual({ intra_session: 0, cross_session: 0, shared_prefix: 0, unclassified: 8 });
  });

  it('refuses a trace whose fingerprint differs, naming both', async () => {
    const other = TRACE.slice(0, 2);
    await expect(runReuse('u.jsonl', other, cachedByRequest(RECORDS), header(TRACE), { workers: 0 })).rejects.toThrow(
      /^u\.jsonl is not the trace these records ran: its fingerprint is sha256:\w+:2, the records' header says sha256:\w+:3 \(t\.jsonl\); read it with the run's trace flags \(the run was: kvroute \)$/,
    );
  });
});
