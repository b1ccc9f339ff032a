/**
 * `sim run --replicas R --replica-assign random|session` (docs/scale-out.md): one router replica
 * changes nothing, session assignment keeps a session on one replica, random assignment is a
 * function of its seed, each replica routes exactly the requests its records name, and bad flags
 * are refused naming the flag.
 */
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { SIM_RUN_DEFAULTS } from '../src/cli/defaults/sim-defaults.js';
import { MAX_REPLICAS, ReplicaAssigner } from '../src/sim/replica-assign.js';
import { simulate, type SimulationOptions } from '../src/sim/simulator.js';
import { readRecordFile } from '../src/trace/record-file.js';
import type { RequestRecord } from '../src/trace/records.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const trace = [...synthesizeTrace({ sessions: 40, seed: 2, duration: 60 })];
const { dir, traceFile } = synthTraceDir('replicas', ['--sessions', '30', '--seed', '3']);

/** Requests per replica, as the records say. */
function recordedPerReplica(records: RequestRecord[], replicas: number): number[] {
  const counts = new Array<number>(replicas).fill(0);
  for (const r of records) counts[r.replica!]!++;
  return counts;
}

describe('simulate with router replicas', () => {
  const cases: SimulationOptions[] = [
    { policy: 'min_ttft', instances: 4 },
    { policy: 'unified+A+B', instances: 4, engineState: 'shm' },
    { policy: 'sticky', instances: 3, dispatch: { mode: 'poisson', rate: 2, seed: 9 } },
  ];

  it('with one replica gives the records of no replicas at all, whatever the assignment', () => {
    for (const options of cases) {
      const plain = simulate(trace, options);
      for (const replicaAssign of ['random', 'session'] as const) {
        const one = simulate(trace, { ...options, replicas: 1, replicaAssign, replicaSeed: 5 });
        expect(one.records).toEqual(plain.records);
        expect(one.replicaRoutes).toEqual([trace.length]);
      }
      expect(plain.records.every((r) => !('replica' in r))).toBe(true);
    }
  });

  it('session assignment routes every turn of a session through one replica', () => {
    for (const options of cases.slice(0, 2)) {
      const { records } = simulate(trace, { ...options, replicas: 2, replicaAssign: 'session' });
      const bySession = new Map<string, Set<number>>();
      for (const r of records) {
        if (!bySession.has(r.session)) bySession.set(r.session, new Set());
        bySession.get(r.session)!.add(r.replica!);
      }
      expect([...bySession.values()].every((replicas) => replicas.size === 1)).toBe(true);
      const used = new Set(records.map((r) => r.replica));
      expect(used).toEqual(new Set([0, 1]));
    }
  });

  it('random assignment is a function of its seed, and spreads a session over replicas', () => {
    const options: SimulationOptions = { policy: 'min_ttft', instances: 4, replicas: 4, replicaAssign: 'random' };
    const a = simulate(trace, { ...options, replicaSeed: 7 });
    const b = simulate(trace, { ...options, replicaSeed: 7 });
    const c = simulate(trace, { ...options, replicaSeed: 8 });
    expect(a.records).toEqual(b.records);
    expect(c.records.map((r) => r.replica)).not.toEqual(a.records.map((r) => r.replica));
    const spread = new Set(a.records.filter((r) => r.session === a.records[0]!.session).map((r) => r.replica));
    const turns = a.records.filter((r) => r.session === a.records[0]!.session).length;
    if (turns >= 4) expect(spread.size).toBeGreaterThan(1);
    expect(new Set(a.records.map((r) => r.replica))).toEqual(new Set([0, 1, 2, 3]));
  });

  it("each replica's router routes exactly the requests whose records name it (shadow, shm, offload)", () => {
    for (const options of [...cases, { policy: 'v3', instances: 4 } as SimulationOptions]) {
      for (const replicaAssign of ['random', 'session'] as const) {
        const result = simulate(trace, { ...options, replicas: 3, replicaAssign });
        expect(result.records).toHaveLength(trace.length);
        expect(result.replicaRoutes).toEqual(recordedPerReplica(result.records, 3));
      }
    }
  });

  it('refuses a bad replica count, assignment or seed, naming the option', () => {
    const base: SimulationOptions = { policy: 'min_ttft', instances: 2 };
    for (const replicas of [0, -1, 1.5, MAX_REPLICAS + 1, Number.NaN])
      expect(() => simulate(trace, { ...base, replicas })).toThrow(/^replicas must be an integer from 1 to 64/);
    expect(() => simulate(trace, { ...base, replicaAssign: 'round-robin' as 'random' })).toThrow(/^replicaAssign must/);
    expect(() => new ReplicaAssigner(2, 'random', -1)).toThrow(/^replicaSeed must/);
    expect(SIM_RUN_DEFAULTS.maxReplicas).toBe(MAX_REPLICAS);
  });
});

describe('kvroute sim run --replicas', () => {
  const run = (...args: string[]) => kvroute(['sim', 'run', '--trace', traceFile, '--instances', '4', ...args]);

  it('--replicas 1 prints and records byte for byte what no flag does', () => {
    for (const extra of [[], ['--engine-state', 'shm', '--policy', 'unified+A+B']]) {
      const plain = run(...extra, '--records', join(dir, 'plain.msgpack'));
      const one = run(
        ...extra,
        '--replicas',
        '1',
        '--replica-assign',
        'session',
        '--records',
        join(dir, 'one.msgpack'),
      );
      expect(plain.status, plain.stderr).toBe(0);
      expect(one.stdout).toBe(plain.stdout);
      const a = readRecordFile(join(dir, 'plain.msgpack'));
      const b = readRecordFile(join(dir, 'one.msgpack'));
      expect(b.records).toEqual(a.records);
      const { started_at: _s, command: _c, ...headerA } = a.header!;
      const { started_at: _t, command: _d, ...headerB } = b.header!;
      expect(headerB).toEqual(headerA);
      expect(run(...extra, '--json').stdout).toBe(run(...extra, '--replicas', '1', '--json').stdout);
    }
  });

  it('with R > 1 records each request’s replica, and --json and the header carry replicas and replica_assign', () => {
    const out = run('--replicas', '2', '--replica-assign', 'session', '--json', '--records', join(dir, 'two.msgpack'));
    expect(out.status, out.stderr).toBe(0);
    const json = JSON.parse(out.stdout) as { replicas: number; replica_assign: string; requests: number };
    expect(json).toMatchObject({ replicas: 2, replica_assign: 'session' });
    const file = readRecordFile(join(dir, 'two.msgpack'));
    expect(file.header).toMatchObject({ replicas: 2, replica_assign: 'session' });
    expect(file.records).toHaveLength(json.requests);
    expect(file.records.every((r) => r.replica === 0 || r.replica === 1)).toBe(true);
    const table = run('--replicas', '2');
    expect(table.stdout).toMatch(/· 4 instances · 2 replicas \(random\) ·/);
  });

  it('refuses a bad --replicas or --replica-assign, naming the flag', () => {
    for (const bad of ['0', '-1', '1.5', '65', 'two', ''])
      expect(run(`--replicas=${bad}`).stderr).toMatch(`--replicas must be an integer from 1 to 64, got ${bad}`);
    const assign = run('--replicas', '2', '--replica-assign', 'round-robin');
    expect(assign.status).toBe(2);
    expect(assign.stderr).toMatch('--replica-assign must be one of random, session, got round-robin');
  });
});
