/** Streaming transforms: window, session sampling, turn cap, time scaling, re-blocking. */
import { describe, expect, it } from 'vitest';

import { reblock, sessionDraw, transformTrace, type TransformOptions } from '../src/trace/transforms.js';
import type { TraceRequest } from '../src/trace/types.js';
import { Rng } from './helpers/random.js';

async function run(requests: TraceRequest[], options: TransformOptions): Promise<TraceRequest[]> {
  async function* source() {
    yield* requests;
  }
  const out: TraceRequest[] = [];
  for await (const request of transformTrace(source(), options)) out.push(request);
  return out;
}

/** 60 sessions of 1–12 turns, one arrival per second, chained 16-token blocks. */
function trace(): TraceRequest[] {
  const rng = new Rng(5);
  const requests: TraceRequest[] = [];
  const open = new Map<string, { turn: number; ids: number[] }>();
  let nextId = 0;
  for (let second = 0; requests.length < 400; second++) {
    const session = `s${rng.int(0, 59)}`;
    const state = open.get(session) ?? { turn: 0, ids: [] };
    state.turn++;
    for (let k = rng.int(1, 9); k > 0; k--) state.ids.push(nextId++);
    open.set(session, state);
    const inputLength = state.ids.length * 16;
    requests.push({
      session,
      turn: state.turn,
      arrival: second,
      inputLength,
      outputLength: 3,
      hashIds: [...state.ids],
      blockSize: 16,
    });
  }
  return requests;
}

describe('transformTrace', () => {
  const input = trace();

  it('keeps a time window and re-bases it to 0', async () => {
    const out = await run(input, { windowStart: 100, window: 50 });
    expect(out).toHaveLength(50);
    expect(out[0]).toEqual({ ...input[100], arrival: 0 });
    expect(out.at(-1)!.arrival).toBe(49);
  });

  it('opens the window at the first arrival when no start is given', async () => {
    const late = input.map((r) => ({ ...r, arrival: r.arrival + 1_700_000_000 }));
    const out = await run(late, { window: 50 });
    expect(out).toEqual(input.slice(0, 50));
  });

  it('samples whole sessions, reproducibly for a seed', async () => {
    const a = await run(input, { sampleSessions: 0.3, seed: 11 });
    const b = await run(input, { sampleSessions: 0.3, seed: 11 });
    const c = await run(input, { sampleSessions: 0.3, seed: 12 });
    expect(a).toEqual(b);
    expect(a).not.toEqual(c);
    const kept = new Set(a.map((r) => r.session));
    expect(kept.size).toBeGreaterThan(5);
    expect(kept.size).toBeLessThan(35);
    // Whole sessions: every request of a kept session is kept.
    expect(a).toEqual(input.filter((r) => kept.has(r.session)));
    expect(a.every((r) => sessionDraw(r.session, 11) < 0.3)).toBe(true);
  });

  it('caps each session at its first N requests', async () => {
    const out = await run(input, { capTurns: 3 });
    const perSession = new Map<string, number>();
    for (const r of out) perSession.set(r.session, (perSession.get(r.session) ?? 0) + 1);
    expect(Math.max(...perSession.values())).toBe(3);
    expect(out).toEqual(input.filter((r) => r.turn <= 3));
  });

  it('scales time', async () => {
    const out = await run(input, { timeScale: 0.25 });
    expect(out.map((r) => r.arrival)).toEqual(input.map((r) => r.arrival * 0.25));
  });

  it('re-blocks to a multiple of the block size, keeping the chained meaning of ids', async () => {
    const out = await run(input, { blockSize: 64 });
    for (const [k, r] of out.entries()) {
      expect(r.blockSize).toBe(64);
      expect(r.hashIds).toHaveLength(Math.ceil(input[k]!.inputLength / 64));
    }
    // Two re-blocked requests share merged block i exactly when they share its last 16-token block.
    expect(reblock({ ...input[0]!, hashIds: [1, 2, 3, 4, 5], inputLength: 80 }, 32)).toEqual([2, 4, 5]);
    await expect(run(input, { blockSize: 24 })).rejects.toThrow(
      /blockSize must be a multiple of the trace's block size 16/,
    );
  });

  it('applies the transforms together', async () => {
    const out = await run(input, {
      windowStart: 50,
      window: 200,
      sampleSessions: 0.5,
      seed: 1,
      capTurns: 2,
      timeScale: 2,
    });
    expect(out.length).toBeGreaterThan(10);
    expect(out.every((r) => r.arrival >= 0 && r.arrival < 400)).toBe(true);
  });

  it('refuses bad options, naming them', async () => {
    const bad: Array<[TransformOptions, RegExp]> = [
      [{ window: 0 }, /window must be a positive number, got 0/],
      [{ windowStart: -1 }, /windowStart must be a non-negative number/],
      [{ sampleSessions: 1.5 }, /sampleSessions must be a fraction in \(0, 1\], got 1.5/],
      [{ capTurns: 2.5 }, /capTurns must be a positive integer, got 2.5/],
      [{ timeScale: Number.NaN }, /timeScale must be a positive number, got NaN/],
      [{ blockSize: 0 }, /blockSize must be a positive integer/],
    ];
    for (const [options, message] of bad) await expect(run(input, options)).rejects.toThrow(message);
  });
});
