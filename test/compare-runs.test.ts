/** analyze compare on crafted pairs: reroute %, the verdict at its thresholds, and refusals of different traces. */
import { describe, expect, it } from 'vitest';

import { checkSameTrace, compareRuns, verdictOf } from '../src/analysis/compare-runs.js';
import type { RecordFile } from '../src/trace/record-file.js';
import type { RequestRecord, RunHeader } from '../src/trace/records.js';

/** Ten requests, sessions s0..s4 × turns 0..1, each with TTFT `ttft` (exact: dispatched at 0) on `instance(i)`. */
function run(ttft: number, instance: (i: number) => number = () => 0): RequestRecord[] {
  return Array.from({ length: 10 }, (_, i) => ({
    session: `s${i >> 1}`,
    turn: i & 1,
    instance: instance(i),
    dispatch: 0,
    first_token: ttft,
    finish: ttft + 1,
    input_tokens: 100,
    cached_tokens: 50,
    output_tokens: 10,
    overlapped: false,
    preemptions: 0,
  }));
}

const header = (fingerprint: string, path = 't.jsonl'): RunHeader => ({
  format: 'kvroute-records',
  version: 2,
  source: 'sim',
  trace: { path, fingerprint },
  kvroute_version: '0.1.0',
  command: [],
  started_at: '2026-12-01T00:00:00Z',
});
const file = (records: RequestRecord[], h?: RunHeader): RecordFile => ({ header: h, records, truncated: undefined });

describe('compareRuns', () => {
  it('matches by (session, turn) and counts the requests sent elsewhere', () => {
    const c = compareRuns(
      run(1),
      run(1, (i) => (i < 3 ? 1 : 0)),
    );
    expect(c).toMatchObject({ matched: 10, rerouted: 3, reroute_pct: 30, verdict: 'wash' });
    expect(c.a.instances_per_session).toBe(1);
    expect(c.b.instances_per_session).toBe(1.2); // s1 on 1 then 0
    expect(c.ttft_p90_change_pct).toBe(0);
  });

  it('ignores requests only one run holds, and failed ones in the latencies', () => {
    const b = run(2).slice(0, 6);
    b[0] = { ...b[0]!, status: 502, error: 'upstream', first_token: 100 };
    const c = compareRuns(run(1), b);
    expect(c.matched).toBe(6);
    expect(c.b).toMatchObject({ requests: 6, failed: 1, ttft_p90_s: 2, ttft_mean_s: 2 });
    expect(c.ttft_p90_change_pct).toBeCloseTo(100);
  });

  it.each([
    [0.95, 'HELPS'],
    [0.9501, 'wash'],
    [1.0499, 'wash'],
    [1.05, 'HURTS'],
  ])('TTFT p90 1 s → %f s is %s', (ttft, verdict) => {
    expect(compareRuns(run(1), run(ttft)).verdict).toBe(verdict);
  });

  it('verdict thresholds: HELPS ≤ −5 %, HURTS ≥ +5 %', () => {
    expect([-5, -4.999, 0, 4.999, 5, null].map(verdictOf)).toEqual(['HELPS', 'wash', 'wash', 'wash', 'HURTS', null]);
  });
});

describe('checkSameTrace', () => {
  it('refuses different fingerprints, naming both files and traces', () => {
    expect(() =>
      checkSameTrace(
        'a.rec',
        file(run(1), header('sha256:aa:10')),
        'b.rec',
        file(run(1), header('sha256:bb:10', 'u.jsonl')),
      ),
    ).toThrow('a.rec and b.rec ran different traces (t.jsonl sha256:aa:10 vs u.jsonl sha256:bb:10)');
    expect(() =>
      checkSameTrace('a.rec', file(run(1), header('sha256:aa:10')), 'b.rec', file(run(2), header('sha256:aa:10'))),
    ).not.toThrow();
  });

  it('matches header-less files by their (session, turn) sets', () => {
    expect(() => checkSameTrace('a.rec', file(run(1)), 'b.rec', file(run(1).slice(1)))).toThrow(
      /^a\.rec and b\.rec hold different requests \(1 \(session, turn\) only in the first, 0 only in the second/,
    );
    expect(() => checkSameTrace('a.rec', file(run(1)), 'b.rec', file(run(1).reverse(), header('x')))).not.toThrow();
  });
});
