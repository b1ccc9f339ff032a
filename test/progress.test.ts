/**
 * The progress line: drawn on a fake TTY (frames with the amount, rate and ETA), silent on
 * anything else, its line cleared on stop and on error; and the counters it polls.
 */
import { statSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { startProgress, withProgress, type ProgressOptions } from '../src/cli/progress.js';
import { readTrace } from '../src/trace/read-trace.js';
import { synthesizeTrace, type SynthProgress } from '../src/trace/synth.js';

const MOONCAKE = fileURLToPath(new URL('../data/mooncake_synthetic_trace.jsonl', import.meta.url));
const MIB = 1024 ** 2;
const CLEAR_LINE = '\u001b[2K';
// eslint-disable-next-line no-control-regex
const CONTROL = /\u001b(\[[0-9;?]*[A-Za-z]|[78])/g;

function fakeStream(isTTY: boolean | undefined, columns = 120) {
  const chunks: string[] = [];
  return {
    isTTY,
    columns,
    chunks,
    write(chunk: string): boolean {
      chunks.push(chunk);
      return true;
    },
    /** The text drawn, one entry per redraw (control sequences left out). */
    frames(): string[] {
      return chunks.map((c) => c.replace(CONTROL, '')).filter((c) => c !== '');
    },
  };
}

/** Work that advances at `perSecond` units of fake time. */
function steady(perSecond: number): () => number {
  const started = Date.now();
  return () => ((Date.now() - started) * perSecond) / 1000;
}

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('startProgress on a TTY', () => {
  it('draws the amount, the rate and the ETA against a known total', () => {
    const stream = fakeStream(true);
    const progress = startProgress({
      label: 'analyze trace',
      unit: 'bytes',
      total: 10 * MIB,
      poll: steady(10 * MIB),
      stream,
    });
    vi.advanceTimersByTime(500);
    expect(stream.frames()).toContain(
      `analyze trace ${'█'.repeat(15)}${'░'.repeat(15)} 50% · 5.0 MiB / 10.0 MiB · 10.0 MiB/s · ETA 500.0 ms`,
    );
    progress.stop();
  });

  it('shows the amount, rate and elapsed time without a total, and no ETA', () => {
    const stream = fakeStream(true);
    const progress = startProgress({ label: 'trace validate', unit: 'requests', poll: steady(2_500), stream });
    vi.advanceTimersByTime(2_000);
    const last = stream.frames().at(-1)!;
    expect(last).toBe('trace validate 5.0 k requests · 2.5 k/s · 2.0 s elapsed');
    progress.stop();
  });

  it('takes a total that becomes known later', () => {
    const stream = fakeStream(true);
    const plan: { total?: number } = {};
    const progress = startProgress({
      label: 'trace synth',
      unit: 'requests',
      total: () => plan.total,
      poll: steady(100),
      stream,
    });
    vi.advanceTimersByTime(1_000);
    expect(stream.frames().at(-1)).not.toMatch(/ETA|%/);
    plan.total = 1_000;
    vi.advanceTimersByTime(1_000);
    expect(stream.frames().at(-1)).toMatch(/ 20% · 200 \/ 1.0 k requests · 100\/s · ETA 8.0 s$/);
    progress.stop();
  });

  it('redraws at most 10 times a second however often the work moves', () => {
    const stream = fakeStream(true);
    const progress = startProgress({ label: 'sim run', unit: 'bytes', total: 1e12, poll: steady(1e9), stream });
    vi.advanceTimersByTime(3_000);
    expect(stream.frames().length).toBeLessThanOrEqual(32);
    expect(stream.frames().length).toBeGreaterThanOrEqual(10);
    progress.stop();
  });

  it('narrows the bar to fit the terminal, and drops it when there is no room', () => {
    const medium = fakeStream(true, 80);
    const shown = startProgress({
      label: 'sim run',
      unit: 'bytes',
      total: 10 * MIB,
      poll: steady(MIB),
      stream: medium,
    });
    vi.advanceTimersByTime(1_000);
    shown.stop();
    const frame = medium.frames().at(-1)!;
    expect(frame.length).toBe(79);
    expect(frame).toMatch(/^sim run [█░]{10,30} 10% · /);
    const stream = fakeStream(true, 60);
    const progress = startProgress({ label: 'sim run', unit: 'bytes', total: 10 * MIB, poll: steady(MIB), stream });
    vi.advanceTimersByTime(1_000);
    for (const frame of stream.frames()) {
      expect(frame.length).toBeLessThan(60);
      expect(frame).not.toContain('█');
    }
    progress.stop();
  });

  it('leaves the line cleared on stop, and then writes nothing more', () => {
    const stream = fakeStream(true);
    const progress = startProgress({ label: 'x', unit: 'bytes', total: 100, poll: steady(10), stream });
    vi.advanceTimersByTime(1_000);
    progress.stop();
    expect(stream.chunks.at(-1)).toBe(CLEAR_LINE);
    const written = stream.chunks.length;
    progress.stop();
    vi.advanceTimersByTime(5_000);
    expect(stream.chunks.length).toBe(written);
  });

  it('withProgress clears the line when the work fails, and passes the error on', async () => {
    const stream = fakeStream(true);
    const options: ProgressOptions = { label: 'x', unit: 'bytes', poll: () => 0, stream };
    await expect(withProgress(options, () => Promise.reject(new Error('bad line')))).rejects.toThrow('bad line');
    expect(stream.chunks.at(-1)).toBe(CLEAR_LINE);
    expect(await withProgress(options, () => Promise.resolve(42))).toBe(42);
    expect(stream.chunks.at(-1)).toBe(CLEAR_LINE);
  });
});

describe('startProgress elsewhere', () => {
  it('writes nothing to a stream that is not a TTY, or when disabled', () => {
    for (const stream of [fakeStream(false), fakeStream(undefined)]) {
      const progress = startProgress({ label: 'x', unit: 'bytes', total: 100, poll: steady(10), stream });
      vi.advanceTimersByTime(2_000);
      progress.stop();
      expect(stream.chunks).toEqual([]);
    }
    const tty = fakeStream(true);
    startProgress({ label: 'x', unit: 'bytes', poll: () => 0, stream: tty, enabled: false }).stop();
    vi.advanceTimersByTime(1_000);
    expect(tty.chunks).toEqual([]);
  });
});

describe('the counters a progress line polls', () => {
  it('TraceReader: bytesRead reaches totalBytes, the file size', async () => {
    vi.useRealTimers();
    const reader = readTrace(MOONCAKE);
    expect(reader.bytesRead).toBe(0);
    expect(reader.totalBytes).toBe(statSync(MOONCAKE).size);
    for await (const _ of reader);
    expect(reader.bytesRead).toBe(statSync(MOONCAKE).size);
    expect(readTrace('-').totalBytes).toBeUndefined();
    expect(readTrace('/nonexistent/trace.jsonl').totalBytes).toBeUndefined();
  });

  it('synthesizeTrace: counts the requests it yields against the plan’s total, the output unchanged', () => {
    vi.useRealTimers();
    const counter: SynthProgress = { requests: 0, totalRequests: undefined };
    const counted = synthesizeTrace({ sessions: 40, seed: 9 }, counter);
    expect(counter.totalRequests).toBeUndefined(); // the plan is built on the first request
    const first = counted.next();
    expect(counter).toMatchObject({ requests: 1 });
    const rest = [...counted];
    const all = [first.value, ...rest];
    expect(counter.requests).toBe(all.length);
    expect(counter.totalRequests).toBe(all.length);
    expect(all).toEqual([...synthesizeTrace({ sessions: 40, seed: 9 })]);
  });
});
