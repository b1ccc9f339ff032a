/** Streaming transforms: window, session sampling, turn cap, time scaling, re-blocking, tenants. */
import { describe, expect, it } from 'vitest';

import { reblock, sessionDraw, transformTrace, type TransformOptions } from '../src/trace/transforms.js';
import { parseTenantSpec } from '../src/trace/tenant-spec.js';
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

describe('--tenants', () => {
  it('gives each session one tenant by share and class, the same on every run', async () => {
    const tenants = parseTenantSpec('noisy=8:low, q1=1, q2=1');
    expect(tenants).toEqual([
      { name: 'noisy', share: 8, priority: 'low' },
      { name: 'q1', share: 1 },
      { name: 'q2', share: 1 },
    ]);
    const input = trace().map((r) => ({ ...r, tenant: 'old', priority: 'high' }));
    const out = await run(input, { tenants });
    expect(await run(input, { tenants })).toEqual(out);
    const bySession = new Map<string, string>();
    for (const r of out) {
      expect(bySession.get(r.session) ?? r.tenant).toBe(r.tenant);
      bySession.set(r.session, r.tenant!);
      expect(r.priority).toBe(r.tenant === 'noisy' ? 'low' : undefined);
    }
    const sessions = [...bySession.values()];
    const noisy = sessions.filter((t) => t === 'noisy').length / sessions.length;
    expect(noisy).toBeGreaterThan(0.6);
    expect(noisy).toBeLessThan(0.95);
    expect(new Set(sessions)).toEqual(new Set(['noisy', 'q1', 'q2']));
    // Everything else is as read.
    const rest = (r: TraceRequest) => ({ ...r, tenant: undefined, priority: undefined });
    expect(out.map(rest)).toEqual(input.map(rest));
  });

  it.each([
    ['noisy', /^tenants must be NAME=SHARE\[:CLASS\]/],
    ['a=0', /^tenants a=0 must be a share > 0, got "0"$/],
    ['a=1,a=2', /^tenants must be each tenant once, got "a"$/],
    ['a b=1', /^tenants a b=1 must be a name of 1 to 128/],
    ['a=1:bad class', /^tenants a=1:bad class must be a class of 1 to 64/],
  ])('refuses %s, naming the entry', (spec, message) => {
    expect(() => parseTenantSpec(spec)).toThrow(message);
  });
});
