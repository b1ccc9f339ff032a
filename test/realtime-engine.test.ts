/**
 * The real-time driver of an engine model, on fake timers and a fake clock: tokens arrive when
 * the clock reaches the end of the step that made them, `--speed` divides wall time, late timers
 * catch up, an abort mid-step emits nothing more, and close leaves no timer behind.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { EngineModel, type EngineRequest } from '../src/sim/engine-model.js';
import { ENGINE_PRESETS, stepMs } from '../src/sim/engine-preset.js';
import { RealtimeEngine, type GenerationListener } from '../src/sim/realtime-engine.js';

const preset = ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!;

function recorder(): GenerationListener & { at: number[]; finishedAt: number | undefined } {
  const log = {
    at: [] as number[],
    finishedAt: undefined as number | undefined,
    tokens(count: number, at: number) {
      for (let i = 0; i < count; i++) log.at.push(at);
    },
    finished(at: number) {
      log.finishedAt = at;
    },
  };
  return log;
}

const request = (id: number, inputLength: number, outputLength: number): EngineRequest => ({
  id,
  hashIds: [],
  inputLength,
  outputLength,
});

describe('RealtimeEngine', () => {
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  function start(speed: number) {
    const engine = new EngineModel({ preset, blockSize: 16 });
    return { engine, realtime: new RealtimeEngine(engine, { speed, clock: () => Date.now() }) };
  }

  it('delivers each token when the clock reaches the end of its step', () => {
    const { realtime } = start(1);
    const log = recorder();
    realtime.submit(request(1, 2048, 3), log);
    const prefill = stepMs(preset, [{ tokens: 2048, context: 0 }], 0);
    vi.advanceTimersByTime(Math.floor(prefill) - 1);
    expect(log.at).toEqual([]);
    vi.advanceTimersByTime(2);
    expect(log.at).toHaveLength(1);
    expect(log.at[0]).toBeCloseTo(prefill / 1000, 6);
    vi.advanceTimersByTime(1000);
    expect(log.at).toHaveLength(3);
    const decode = stepMs(preset, [], 1, 2049) / 1000;
    expect(log.at[1]! - log.at[0]!).toBeCloseTo(decode, 6);
    expect(log.finishedAt).toBe(log.at[2]);
    expect(realtime.liveRequests).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });

  it('runs --speed times faster in wall time, with the same virtual timestamps', () => {
    const slow = start(1);
    const fast = start(10);
    const a = recorder();
    const b = recorder();
    slow.realtime.submit(request(1, 2048, 5), a);
    fast.realtime.submit(request(1, 2048, 5), b);
    const prefill = stepMs(preset, [{ tokens: 2048, context: 0 }], 0);
    vi.advanceTimersByTime(Math.ceil(prefill / 10));
    expect(b.at).toHaveLength(1);
    expect(a.at).toHaveLength(0);
    vi.advanceTimersByTime(10_000);
    expect(b.at).toEqual(a.at.map((t) => expect.closeTo(t, 6)));
  });

  it('catches up on late timers: every due step is delivered, in order', () => {
    const { realtime } = start(1000); // decode steps of ~6 µs wall: many per timer tick
    const log = recorder();
    realtime.submit(request(1, 64, 200), log);
    vi.advanceTimersByTime(5);
    expect(log.at).toHaveLength(200);
    for (let i = 1; i < log.at.length; i++) expect(log.at[i]!).toBeGreaterThan(log.at[i - 1]!);
    expect(log.finishedAt).toBeDefined();
  });

  it('an abort mid-step removes the request at once and nothing is emitted after it', () => {
    const { engine, realtime } = start(1);
    const log = recorder();
    const other = recorder();
    const generation = realtime.submit(request(1, 2048, 100), log);
    realtime.submit(request(2, 512, 2), other);
    vi.advanceTimersByTime(50); // inside the first (prefill) step
    generation.cancel();
    expect(engine.state().running + engine.state().waiting).toBe(1);
    vi.advanceTimersByTime(60_000);
    expect(log.at).toEqual([]);
    expect(log.finishedAt).toBeUndefined();
    expect(other.finishedAt).toBeDefined();
    expect(engine.idle).toBe(true);
    expect(engine.pool.referenced).toBe(0);
    expect(realtime.counters).toMatchObject({ aborted: 1, finished: 1, generationTokens: 2 });
    generation.cancel(); // twice is harmless
  });

  it('close clears its timer and aborts what is live', () => {
    const { engine, realtime } = start(1);
    const log = recorder();
    realtime.submit(request(1, 4096, 10), log);
    expect(vi.getTimerCount()).toBe(1);
    realtime.close();
    expect(vi.getTimerCount()).toBe(0);
    expect(engine.idle).toBe(true);
    expect(() => realtime.submit(request(2, 16, 1), recorder())).toThrow('closed');
    expect(() => new RealtimeEngine(engine, { speed: 0 })).toThrow('speed must be a positive number');
  });

  it('after(seconds) fires in engine time, scaled by --speed, never early; cancel and close stop it', () => {
    const { realtime } = start(10);
    const fired: number[] = [];
    realtime.after(2, () => fired.push(realtime.now()));
    const cancel = realtime.after(1, () => fired.push(-1));
    vi.advanceTimersByTime(50);
    cancel(); // before its 100 ms of wall time
    vi.advanceTimersByTime(149);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([2]);
    expect(vi.getTimerCount()).toBe(0);

    // A timer that fires before the clock reaches the time re-arms instead of firing early.
    let skewMs = 0;
    const skewed = new RealtimeEngine(new EngineModel({ preset, blockSize: 16 }), {
      speed: 1,
      clock: () => Date.now() - skewMs,
    });
    const late: number[] = [];
    skewed.after(0.5, () => late.push(skewed.now()));
    skewMs = 30;
    vi.advanceTimersByTime(500);
    expect(late).toEqual([]);
    vi.advanceTimersByTime(40);
    expect(late).toHaveLength(1);
    expect(late[0]).toBeGreaterThanOrEqual(0.5);
    expect(late[0]).toBeLessThan(0.51);

    skewed.after(1, () => late.push(-1));
    skewed.close();
    expect(vi.getTimerCount()).toBe(0);
    vi.advanceTimersByTime(5000);
    expect(late).toHaveLength(1);
    expect(() => realtime.after(-1, () => {})).toThrow('seconds must be ≥ 0, got -1');
  });

  it('releaseHeld frees a held prefill’s blocks and lets a request waiting for them in', () => {
    const engine = new EngineModel({ preset, blockSize: 16, capacityBlocks: 10 });
    const realtime = new RealtimeEngine(engine, { speed: 1, clock: () => Date.now() });
    const held = realtime.submit({ ...request(1, 128, 1), holdBlocks: true }, recorder()); // 8 blocks
    vi.advanceTimersByTime(1000);
    expect(engine.heldRequests).toBe(1);
    const waiting = recorder();
    realtime.submit(request(2, 100, 1), waiting); // 7 blocks: does not fit beside the held 8
    vi.advanceTimersByTime(1000);
    expect(waiting.finishedAt).toBeUndefined();
    expect(realtime.releaseHeld(held.sequence)).toBe(true);
    expect(realtime.releaseHeld(held.sequence)).toBe(false);
    vi.advanceTimersByTime(1000);
    expect(waiting.finishedAt).toBeDefined();
    expect(engine.pool.referenced).toBe(0);
  });
});
