/**
 * Open-loop arrivals of the synthetic trace (src/trace/synth-arrivals.ts, `trace synth
 * --arrivals`): the default stays byte-identical to the trace before the option existed, each
 * process is deterministic per seed, poisson and on-off keep the mean rate, on-off starts no root
 * in an OFF period, and bad values are refused naming the option (or the flag, through the CLI).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';

import { describe, expect, it } from 'vitest';

import { drawOpenLoopStarts, onSecondsWithin, wallTimeOf, type ArrivalSpec } from '../src/trace/synth-arrivals.js';
import { buildPlan } from '../src/trace/synth-plan.js';
import { SYNTH_MODEL, synthesizeTrace, validateSynthOptions, type SynthOptions } from '../src/trace/synth.js';

const CLI = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const kvroute = (args: string[]) =>
  spawnSync(process.execPath, [CLI, ...args], {
    encoding: 'utf8',
    timeout: 60_000,
    maxBuffer: 1 << 28,
  });

const digest = (options: SynthOptions): string =>
  createHash('sha256')
    .update(JSON.stringify([...synthesizeTrace(options)]))
    .digest('hex');

const small: SynthOptions = { sessions: 40, duration: 120, seed: 7 };

/** True when wall time `t` lies in an OFF period of `on`/`off` seconds (ON first, from 0). */
const inOff = (t: number, on: number, off: number): boolean => t % (on + off) >= on + 1e-9;

describe('the uniform default is the trace from before --arrivals', () => {
  // Digests of the trace generated before the option existed (commit 097a248).
  it.each([
    [{}, 'fd10494c71c02fb6afb2e7d93240ff7e6233d84e5888eb65fc6a5c49b1f4178c'],
    [small, 'f3996ee5647c63783253e7c2c6f8338141508d0cd7f8944168e11ffcfb0887f1'],
  ])('%o', (options, expected) => {
    expect(digest(options)).toBe(expected);
    expect(digest({ ...options, arrivals: 'uniform' })).toBe(expected);
  });
});

describe('poisson and on-off arrivals', () => {
  it.each(['poisson', 'on-off'] as const)(
    '%s: the same seed gives the same trace, another seed another',
    (arrivals) => {
      expect(digest({ ...small, arrivals })).toBe(digest({ ...small, arrivals }));
      expect(digest({ ...small, arrivals, seed: 8 })).not.toBe(digest({ ...small, arrivals }));
      expect(digest({ ...small, arrivals })).not.toBe(digest(small));
    },
  );

  it.each(['poisson', 'on-off'] as const)('%s: only the start times change, not the sessions', (arrivals) => {
    const options = validateSynthOptions({ ...small, arrivals });
    const uniform = buildPlan(validateSynthOptions(small), SYNTH_MODEL);
    const open = buildPlan(options, SYNTH_MODEL);
    expect(open.start).not.toEqual(uniform.start);
    expect({ ...open, start: undefined }).toEqual({ ...uniform, start: undefined });
    const requests = (o: SynthOptions) => [...synthesizeTrace(o)].map((r) => r.inputLength).sort((a, b) => a - b);
    expect(requests({ ...small, arrivals })).toEqual(requests(small));
  });

  const spec = (process: ArrivalSpec['process'], seed = 3): ArrivalSpec => ({
    process,
    duration: 1_000,
    seed,
    burstOn: 30,
    burstOff: 90,
  });

  it('poisson: exponential gaps at rate n / duration', () => {
    const n = 20_000;
    const start = new Float64Array(n);
    drawOpenLoopStarts(start, spec('poisson'));
    const gaps = start.map((t, i) => t - (i === 0 ? 0 : start[i - 1]!));
    const mean = gaps.reduce((a, g) => a + g, 0) / n;
    const sd = Math.sqrt(gaps.reduce((a, g) => a + (g - mean) ** 2, 0) / n);
    expect(mean).toBeCloseTo(1_000 / n, 4); // the sum's relative sd is 1/√n ≈ 0.7%
    expect(sd / mean).toBeGreaterThan(0.97); // an exponential's coefficient of variation is 1
    expect(sd / mean).toBeLessThan(1.03);
    expect(start[n - 1]).toBeGreaterThan(970);
    expect(start[n - 1]).toBeLessThan(1_030);
  });

  it('on-off: every start in an ON period, the same count over about the same duration', () => {
    const n = 20_000;
    const start = new Float64Array(n);
    drawOpenLoopStarts(start, spec('on-off'));
    for (let i = 1; i < n; i += 1) expect(start[i]!).toBeGreaterThanOrEqual(start[i - 1]!);
    expect(start.filter((t) => inOff(t, 30, 90))).toHaveLength(0);
    // [0, 1000) holds 8 whole periods (240 s ON) and 40 s of a ninth: 270 s of ON time.
    expect(onSecondsWithin(1_000, 30, 90)).toBe(270);
    const inside = start.filter((t) => t < 1_000).length;
    expect(inside / n).toBeGreaterThan(0.97);
    expect(start[n - 1]).toBeLessThan(1_000 + 90 + 30);
    // Within an ON period the rate is n / 270 s: about 3.7× the uniform rate.
    const firstOn = start.filter((t) => t < 30).length;
    expect(firstOn / (n * (30 / 270))).toBeGreaterThan(0.9);
    expect(firstOn / (n * (30 / 270))).toBeLessThan(1.1);
  });

  it('on-off: maps ON time to wall time across OFF periods, never into one', () => {
    expect(wallTimeOf(0, 30, 90)).toBe(0);
    expect(wallTimeOf(29.5, 30, 90)).toBe(29.5);
    expect(wallTimeOf(30, 30, 90)).toBe(120);
    expect(wallTimeOf(75, 30, 90)).toBe(255);
    // ON times that are not exact in binary, on periods that are (so the check's % is exact).
    for (let k = 1; k < 2_000; k += 1) expect(inOff(wallTimeOf(k * 0.3, 2.5, 7.5), 2.5, 7.5)).toBe(false);
  });

  it('on-off through the trace: no root session’s first request in an OFF period', () => {
    const trace = [
      ...synthesizeTrace({ ...small, sessions: 200, subagentShare: 0, arrivals: 'on-off', burstOn: 10, burstOff: 20 }),
    ];
    const first = trace.filter((r) => r.turn === 1).map((r) => r.arrival);
    expect(first).toHaveLength(200);
    expect(first.filter((t) => inOff(t, 10, 20))).toEqual([]);
  });

  it('a zero duration starts every root at 0, as uniform does', () => {
    for (const process of ['poisson', 'on-off'] as const) {
      const start = new Float64Array(5);
      drawOpenLoopStarts(start, { ...spec(process), duration: 0 });
      expect([...start]).toEqual([0, 0, 0, 0, 0]);
    }
  });
});

describe('refusal of bad values', () => {
  it.each([
    [{ arrivals: 'bursty' }, 'arrivals', 'ERR_KVROUTE_INVALID_ARG_VALUE'],
    [{ arrivals: 3 }, 'arrivals', 'ERR_KVROUTE_INVALID_ARG_TYPE'],
    [{ burstOn: 0 }, 'burstOn', 'ERR_KVROUTE_INVALID_ARG_VALUE'],
    [{ burstOn: Infinity }, 'burstOn', 'ERR_KVROUTE_INVALID_ARG_VALUE'],
    [{ burstOff: -1 }, 'burstOff', 'ERR_KVROUTE_INVALID_ARG_VALUE'],
    [{ burstOff: Number.NaN }, 'burstOff', 'ERR_KVROUTE_INVALID_ARG_VALUE'],
  ])('the generator refuses %o naming %s', (options, field, code) => {
    expect(() => synthesizeTrace(options as SynthOptions)).toThrow(
      expect.objectContaining({ code, message: expect.stringMatching(new RegExp(`^${field} `)) }),
    );
  });

  it.each([
    [['--arrivals', 'bursty'], /--arrivals must be one of uniform, poisson, on-off, got bursty/],
    [['--arrivals', 'on-off', '--burst-on', '0'], /--burst-on must be a positive number, got 0/],
    [['--arrivals', 'on-off', '--burst-off', '-5'], /--burst-off must be a non-negative number, got -5/],
    [['--burst-on', '10'], /--burst-on applies only to --arrivals on-off/],
    [['--arrivals', 'poisson', '--burst-off', '10'], /--burst-off applies only to --arrivals on-off/],
  ])('trace synth %j is refused naming the flag', (args, message) => {
    const run = kvroute(['trace', 'synth', '--sessions', '5', ...args]);
    expect(run.status).not.toBe(0);
    expect(run.stderr).toMatch(message);
  });

  it('trace synth --arrivals on-off writes a trace', () => {
    const run = kvroute(['trace', 'synth', '--sessions', '20', '--arrivals', 'on-off', '--burst-on', '5']);
    expect(run.status).toBe(0);
    expect(run.stdout.trim().split('\n').length).toBeGreaterThan(20);
  });
});
