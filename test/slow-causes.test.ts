/**
 * Slow-request labels on crafted records: one case per label, and each threshold just inside and
 * just outside; and the run metrics' treatment of failed live requests.
 */
import { describe, expect, it } from 'vitest';

import { EngineStates } from '../src/analysis/engine-state-samples.js';
import { runMetrics } from '../src/analysis/run-metrics.js';
import { labelSlowRequests, parseSlo, type SlowCause } from '../src/analysis/slow-causes.js';
import type { RequestRecord } from '../src/trace/records.js';

let next = 0;
/** A fast, fully cached request on instance 0, unless told otherwise. */
function rec(fields: Partial<RequestRecord>): RequestRecord {
  return {
    session: `s${next++}`,
    turn: 0,
    instance: 0,
    dispatch: 0,
    first_token: 0.1,
    finish: 1,
    input_tokens: 100,
    cached_tokens: 100,
    output_tokens: 1,
    overlapped: false,
    preemptions: 0,
    ...fields,
  };
}

/** The label of the first record (undefined: not slow). */
function causeOfFirst(records: RequestRecord[], instances = 4, states?: EngineStates): SlowCause | undefined {
  return labelSlowRequests(records, { ttft_s: 5, tpot_ms: 100 }, instances, states).labels.get(0);
}

/** Slow by TPOT: a decode of 101 tokens over 10 s (100.0 ms + ε per token), TTFT 1 s. */
const slowDecode = (fields: Partial<RequestRecord> = {}): RequestRecord =>
  rec({ dispatch: 0, first_token: 1, finish: 11.001, output_tokens: 101, ...fields });
/** Slow by TTFT: 6 s to the first token, dispatched at 10. */
const slowFirstToken = (fields: Partial<RequestRecord> = {}): RequestRecord =>
  rec({ dispatch: 10, first_token: 16, finish: 16, ...fields });

describe('slow requests', () => {
  it('are those over the SLO, strictly, and never failed ones', () => {
    expect(causeOfFirst([rec({ first_token: 5, finish: 5 })])).toBeUndefined();
    expect(causeOfFirst([rec({ first_token: 5.001, finish: 5.001 })])).toBe('unknown');
    expect(causeOfFirst([rec({ first_token: 1, finish: 11, output_tokens: 101 })])).toBeUndefined(); // 100 ms
    expect(causeOfFirst([slowDecode()])).toBe('unknown');
    expect(causeOfFirst([rec({ first_token: 9, finish: 9, status: 502, error: 'upstream' })])).toBeUndefined();
  });
});

describe('same_worker_overlap', () => {
  const prefill = (dispatch: number, firstToken: number, instance = 0): RequestRecord =>
    rec({ dispatch, first_token: firstToken, finish: firstToken + 0.5, instance });

  it('another prefill on the instance during the decode, with positive overlap', () => {
    expect(causeOfFirst([slowDecode(), prefill(0.5, 1.001)])).toBe('same_worker_overlap');
    expect(causeOfFirst([slowDecode(), prefill(0.5, 1)])).toBe('unknown'); // ends as the decode starts
    expect(causeOfFirst([slowDecode(), prefill(11, 12)])).toBe('same_worker_overlap'); // starts before 11.001
    expect(causeOfFirst([slowDecode(), prefill(11.001, 12)])).toBe('unknown'); // starts as it finishes
    expect(causeOfFirst([slowDecode(), prefill(2, 3, 1)])).toBe('unknown'); // another instance
  });

  it('needs a decode, or the simulator flag', () => {
    expect(causeOfFirst([slowFirstToken(), prefill(12, 20)])).not.toBe('same_worker_overlap');
    expect(causeOfFirst([slowFirstToken({ overlapped: true })])).toBe('same_worker_overlap');
  });

  it("ignores a failed request's window", () => {
    expect(causeOfFirst([slowDecode(), rec({ dispatch: 2, first_token: 3, finish: 3, status: 500 })])).toBe('unknown');
  });
});

describe('hot_worker_queue', () => {
  /** In flight on `instance` while the slow request is dispatched at 10. */
  const busy = (instance: number, from = 5, to = 20): RequestRecord =>
    rec({ instance, dispatch: from, first_token: from + 0.1, finish: to });

  it('at least 2 in flight on the instance', () => {
    expect(causeOfFirst([slowFirstToken(), busy(0), busy(0)])).toBe('hot_worker_queue');
    expect(causeOfFirst([slowFirstToken(), busy(0)])).toBe('unknown');
  });

  it('more than 2 × the fleet mean in flight per instance', () => {
    // 2 on instance 0, 1 elsewhere: mean 3/4, 2 > 1.5 → hot; 2 elsewhere: mean 1, 2 > 2 fails.
    expect(causeOfFirst([slowFirstToken(), busy(0), busy(0), busy(1)])).toBe('hot_worker_queue');
    expect(causeOfFirst([slowFirstToken(), busy(0), busy(0), busy(1), busy(2)])).toBe('unknown');
    // The fleet size comes from the header: on 2 instances the same load is 2 > 2 × 3/2, false.
    expect(causeOfFirst([slowFirstToken(), busy(0), busy(0), busy(1)], 2)).toBe('unknown');
  });

  it('counts requests dispatched before and finishing after the dispatch, strictly', () => {
    expect(causeOfFirst([slowFirstToken(), busy(0, 5, 10), busy(0)])).toBe('unknown'); // finished at 10
    expect(causeOfFirst([slowFirstToken(), busy(0, 10, 20), busy(0)])).toBe('unknown'); // sent at 10
    expect(causeOfFirst([slowFirstToken(), busy(0, 5, 10.001), busy(0, 9.999, 20)])).toBe('hot_worker_queue');
  });
});

describe('hot_worker_queue from the engine-state log', () => {
  /** Samples at time t: engine i reports waiting[i]. */
  const states = (t: number, waiting: number[]): EngineStates =>
    new EngineStates(waiting.map((w, engine) => ({ t, engine, waiting: w })));

  it('at least 1 waiting, more than 2 × the fleet mean waiting', () => {
    expect(causeOfFirst([slowFirstToken()], 4, states(9, [1, 0, 0, 0]))).toBe('hot_worker_queue');
    expect(causeOfFirst([slowFirstToken()], 4, states(9, [0, 0, 0, 0]))).toBe('unknown');
    expect(causeOfFirst([slowFirstToken()], 4, states(9, [2, 1, 0, 0]))).toBe('hot_worker_queue'); // 2 > 1.5
    expect(causeOfFirst([slowFirstToken()], 4, states(9, [2, 2, 0, 0]))).toBe('unknown'); // 2 > 2 fails
  });

  it('reads the latest sample at or before the dispatch, at most 2 s old', () => {
    expect(causeOfFirst([slowFirstToken()], 4, states(8, [1, 0, 0, 0]))).toBe('hot_worker_queue');
    expect(causeOfFirst([slowFirstToken()], 4, states(7.999, [1, 0, 0, 0]))).toBe('unknown');
    expect(causeOfFirst([slowFirstToken()], 4, states(10.001, [1, 0, 0, 0]))).toBe('unknown');
  });
});

describe('cache_miss_large_append', () => {
  it('hit ratio under 0.5 and an append of 1024 tokens or more', () => {
    expect(causeOfFirst([slowFirstToken({ input_tokens: 4096, cached_tokens: 2047 })])).toBe('cache_miss_large_append');
    expect(causeOfFirst([slowFirstToken({ input_tokens: 4096, cached_tokens: 2048 })])).toBe('unknown'); // ratio 0.5
    expect(causeOfFirst([slowFirstToken({ input_tokens: 2047, cached_tokens: 1023 })])).toBe('cache_miss_large_append');
    expect(causeOfFirst([slowFirstToken({ input_tokens: 2046, cached_tokens: 1023 })])).toBe('unknown'); // 1023 new
    expect(causeOfFirst([slowFirstToken({ input_tokens: 1023, cached_tokens: 0 })])).toBe('unknown');
  });
});

describe('precedence', () => {
  const miss = { input_tokens: 8192, cached_tokens: 0 };
  const busy = (): RequestRecord => rec({ dispatch: 5, first_token: 5.1, finish: 30 });

  it('overlap, then hot queue, then cache miss, then unknown', () => {
    expect(causeOfFirst([slowFirstToken({ ...miss, overlapped: true }), busy(), busy()])).toBe('same_worker_overlap');
    expect(causeOfFirst([slowFirstToken(miss), busy(), busy()])).toBe('hot_worker_queue');
    expect(causeOfFirst([slowFirstToken(miss)])).toBe('cache_miss_large_append');
  });

  it('counts every slow request once', () => {
    const { summary } = labelSlowRequests(
      [slowFirstToken({ ...miss, overlapped: true }), slowFirstToken(miss), rec({}), slowDecode({ instance: 3 })],
      undefined,
      4,
    );
    expect(summary.n_slow).toBe(3);
    expect(summary.causes).toEqual({
      same_worker_overlap: 1,
      hot_worker_queue: 0,
      cache_miss_large_append: 1,
      unknown: 1,
    });
  });
});

describe('parseSlo', () => {
  it('reads units and keeps the default for what is not given', () => {
    expect(parseSlo('ttft=2s,tpot=50ms')).toEqual({ ttft_s: 2, tpot_ms: 50 });
    expect(parseSlo('ttft=500ms')).toEqual({ ttft_s: 0.5, tpot_ms: 100 });
    expect(parseSlo('tpot=0.2s, ttft=3')).toEqual({ ttft_s: 3, tpot_ms: 200 });
  });

  it.each(['ttft=fast', 'ttft=0', 'latency=3s', 'ttft=3h', ''])('refuses %j, naming the flag', (text) => {
    expect(() => parseSlo(text)).toThrow(/^--slo must be ttft=SECONDS,tpot=MILLISECONDS/);
  });
});

describe('runMetrics with failed live requests', () => {
  it('counts them in failed and leaves them out of every other figure', () => {
    const ok = [
      rec({ instance: 0, first_token: 1, finish: 2, input_tokens: 100, cached_tokens: 50 }),
      rec({ instance: 1, first_token: 3, finish: 4, input_tokens: 100, cached_tokens: 0 }),
    ];
    const failed = [
      rec({ instance: 1, first_token: 60, finish: 60, input_tokens: 100, cached_tokens: 0, status: 502 }),
      rec({ instance: 2, first_token: 9, finish: 9, input_tokens: 100, cached_tokens: 0, error: 'ECONNRESET' }),
    ];
    const m = runMetrics([...ok, ...failed, rec({ status: 200, first_token: 1, finish: 2 })]);
    expect(m).toMatchObject({ requests: 5, failed: 2, apc: 150 / 300 });
    expect(m.ttft_s.p99).toBeLessThanOrEqual(3);
    expect(m.per_instance).toEqual([
      { instance: 0, requests: 2, ttft_p90_s: 1 },
      { instance: 1, requests: 1, ttft_p90_s: 3 },
    ]);
  });
});
