/**
 * `sim run --cache-state events` (docs/scale-out.md): every replica's cache state fed from every
 * engine's KV events. Replicas behind a random balancer then keep the cache a single router keeps
 * (where their own beliefs lose it); predictions match what the engines serve; a run is a pure
 * function of its options, the same with the addon or the TypeScript reference and with or
 * without run-ahead; the CLI carries `cache_state` and refuses a bad value naming the flag.
 */
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { predictionAccuracy } from '../src/analysis/prediction-accuracy.js';
import { runMetrics } from '../src/analysis/run-metrics.js';
import { derivedBlockTokens, derivedPromptTokens } from '../src/sim/derived-tokens.js';
import { simulate, type SimulationOptions } from '../src/sim/simulator.js';
import { readRecordFile } from '../src/trace/record-file.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const trace = [...synthesizeTrace({ sessions: 40, seed: 2, duration: 60 })];
const { dir, traceFile } = synthTraceDir('cache-events', ['--sessions', '30', '--seed', '3']);

const apc = (options: SimulationOptions) => runMetrics(simulate(trace, options).records).apc;

describe('derivedPromptTokens', () => {
  it("is each block's derived tokens in order, cut to the prompt's length", () => {
    const tokens = derivedPromptTokens([5, -3, 2 ** 40], 4, 10);
    expect(Array.from(tokens)).toEqual([
      ...derivedBlockTokens(5, 4),
      ...derivedBlockTokens(-3, 4),
      ...derivedBlockTokens(2 ** 40, 4).slice(0, 2),
    ]);
  });
});

describe('simulate with event-fed cache state', () => {
  it('keeps the cache across randomly assigned replicas that lose it on their own beliefs', () => {
    const base: SimulationOptions = { policy: 'min_ttft', instances: 8 };
    const single = apc(base);
    const ownSplit = apc({ ...base, replicas: 8, replicaAssign: 'random' });
    const eventSplit = apc({ ...base, replicas: 8, replicaAssign: 'random', cacheState: 'events' });
    expect(ownSplit).toBeLessThan(single - 0.05);
    expect(eventSplit).toBeGreaterThan(ownSplit + 0.05);
    expect(Math.abs(eventSplit - single)).toBeLessThan(0.03);
  });

  it("predicts what the engines serve: each route's cached tokens are the engine's hit", () => {
    const { records } = simulate(trace, { policy: 'min_ttft', instances: 4, replicas: 4, cacheState: 'events' });
    const accuracy = predictionAccuracy(records)!;
    expect(accuracy.requests).toBe(trace.length);
    expect(accuracy.exact_fraction).toBeGreaterThan(0.99);
  });

  it('is a pure function of its options: addon = reference, run-ahead or not, run after run', () => {
    for (const options of [
      { policy: 'min_ttft', instances: 4, replicas: 3, cacheState: 'events' },
      {
        policy: 'unified+A+B',
        instances: 4,
        engineState: 'shm',
        replicas: 2,
        replicaAssign: 'session',
        cacheState: 'events',
      },
    ] as SimulationOptions[]) {
      const native = simulate(trace, options).records;
      expect(simulate(trace, options).records).toEqual(native);
      expect(simulate(trace, { ...options, native: false }).records).toEqual(native);
      expect(simulate(trace, { ...options, runAhead: false }).records).toEqual(native);
    }
  });

  it('changes nothing with cacheState own, and refuses another value naming the option', () => {
    const base: SimulationOptions = { policy: 'min_ttft', instances: 3, replicas: 2 };
    expect(simulate(trace, { ...base, cacheState: 'own' }).records).toEqual(simulate(trace, base).records);
    expect(() => simulate(trace, { ...base, cacheState: 'gossip' as 'own' })).toThrow(
      /^cacheState must be one of own, events, got "gossip"/,
    );
  });
});

describe('kvroute sim run --cache-state', () => {
  const run = (...args: string[]) => kvroute(['sim', 'run', '--trace', traceFile, '--instances', '4', ...args]);

  it('carries cache_state in --json, the records header and the table; own prints what no flag does', () => {
    const out = run('--replicas', '2', '--cache-state', 'events', '--json', '--records', join(dir, 'ev.msgpack'));
    expect(out.status, out.stderr).toBe(0);
    expect(JSON.parse(out.stdout)).toMatchObject({ replicas: 2, cache_state: 'events' });
    expect(readRecordFile(join(dir, 'ev.msgpack')).header).toMatchObject({ cache_state: 'events' });
    expect(run('--cache-state', 'events').stdout).toMatch(/· engine state shadow · cache state from KV events ·/);
    expect(run('--replicas', '2', '--cache-state', 'own', '--json').stdout).toBe(
      run('--replicas', '2', '--json').stdout,
    );
  });

  it('refuses a bad --cache-state, naming the flag', () => {
    const bad = run('--cache-state', 'gossip');
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch('--cache-state must be one of own, events, got gossip');
  });
});
