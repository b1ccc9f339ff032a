import { describe, expect, it } from 'vitest';

import { comparePairedRuns, verdictOf } from '../src/analysis/paired-compare.js';
import type { RequestRecord } from '../src/trace/records.js';

function record(session: string, turn: number, instance: number, ttft: number): RequestRecord {
  return {
    session,
    turn,
    instance,
    dispatch: 10,
    first_token: 10 + ttft,
    finish: 20 + ttft,
    input_tokens: 100,
    cached_tokens: 0,
    output_tokens: 10,
    overlapped: false,
    preemptions: 0,
  };
}

describe('comparePairedRuns', () => {
  it('matches by (session, turn), counts reroutes and instances per session', () => {
    const a = [record('s1', 0, 0, 1), record('s1', 1, 0, 1), record('s2', 0, 1, 1), record('s2', 1, 1, 1)];
    // b completes in another order; s1 turn 1 moves, s3 has no partner.
    const b = [record('s2', 1, 1, 1), record('s1', 1, 2, 1), record('s1', 0, 0, 1), record('s2', 0, 1, 1)];
    b.push(record('s3', 0, 0, 1));
    const c = comparePairedRuns(a, b);
    expect(c.matched).toBe(4);
    expect(c.rerouted).toBe(1);
    expect(c.reroute_pct).toBe(25);
    expect(c.instances_per_session_a).toBe(1);
    expect(c.instances_per_session_b).toBeCloseTo(4 / 3);
  });

  it('gives the TTFT changes and the verdict on the p90 change', () => {
    const a = Array.from({ length: 11 }, (_, i) => record(`s${i}`, 0, 0, i));
    const slower = a.map((r) => ({ ...r, first_token: r.dispatch + (r.first_token - r.dispatch) * 1.2 }));
    const c = comparePairedRuns(a, slower);
    expect(c.ttft_p90_a).toBe(9);
    expect(c.ttft_p90_b).toBeCloseTo(10.8);
    expect(c.ttft_p90_change_pct).toBeCloseTo(20);
    expect(c.ttft_mean_change_pct).toBeCloseTo(20);
    expect(c.verdict).toBe('HURTS');
    expect(comparePairedRuns(slower, a).verdict).toBe('HELPS');
    expect(comparePairedRuns(a, a).verdict).toBe('wash');
  });

  it("uses the reference experiments' thresholds and leaves failed live requests out of TTFT", () => {
    expect([-26, -5, -4.9, 1.8, 4.9, 5, 16.6].map(verdictOf)).toEqual([
      'HELPS',
      'HELPS',
      'wash',
      'wash',
      'wash',
      'HURTS',
      'HURTS',
    ]);
    expect(verdictOf(null)).toBeNull();
    const a = [record('s', 0, 0, 2), { ...record('s', 1, 0, 50), status: 503, error: 'upstream' }];
    const c = comparePairedRuns(a, a);
    expect(c.ttft_p90_a).toBe(2);
    expect(comparePairedRuns([], []).verdict).toBeNull();
  });
});
