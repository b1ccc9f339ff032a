/**
 * `sim run --replicas R --sync none|events|load|all --sync-delay MS` (docs/scale-out.md, "Sync
 * between replicas"): replicas sharing each one's in-flight load and session placements (the load
 * plane) and the engines' KV events, a delay late. ReplicaSync delivers a peer's changes exactly
 * when due and in order; replicas synced with `all` route like one router where unsynced ones lose
 * the cache; `none` and a run without the flags are the same run; the CLI refuses bad flags naming
 * them.
 */
import { describe, expect, it } from 'vitest';

import { runMetrics } from '../src/analysis/run-metrics.js';
import { Router } from '../src/index.js';
import { ReplicaSync } from '../src/sim/replica-sync.js';
import { simulate, type SimulationOptions } from '../src/sim/simulator.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const trace = [...synthesizeTrace({ sessions: 40, seed: 2, duration: 60 })];
const { traceFile } = synthTraceDir('replica-sync', ['--sessions', '20', '--seed', '4']);

const effective = (router: Router, id: string) => router.stats().instances.find((s) => s.instance === id)!.effective;

describe('ReplicaSync', () => {
  it("hands a peer's load and placements to the others when due, never to itself", () => {
    const routers = [0, 1, 2].map(() => new Router({ instances: ['a', 'b'], policy: 'sticky', clock: 'manual' }));
    const placed: string[] = [];
    const sync = new ReplicaSync(routers, ['a', 'b'], 0.005, (replica, session) =>
      placed.push(`${replica}:${session}`),
    );
    sync.routed(0, 7, { instance: 1, session: 's', uncached: 300, blocks: 20 }, 1.0);
    sync.deliver(1, 1.004); // not yet due
    expect(effective(routers[1]!, 'b').waiting).toBe(0);
    sync.deliver(1, 1.006);
    expect(effective(routers[1]!, 'b')).toMatchObject({ waiting: 1, pendingPrefillTokens: 300 });
    expect(placed).toEqual(['1:s']);
    routers[1]!.route({ hashIds: [1, 2], session: 's' });
    expect(routers[1]!.decision).toMatchObject({ instance: 'b', reason: 'pinned' });
    sync.deliver(0, 2); // its own changes: nothing
    expect(effective(routers[0]!, 'b').waiting).toBe(0);
    sync.firstToken(0, 7, 1.1);
    sync.deliver(2, 1.2);
    expect(effective(routers[2]!, 'b')).toMatchObject({ waiting: 0, running: 1, pendingPrefillTokens: 0 });
    sync.completed(0, 7, 1.3);
    sync.deliver(2, 1.4);
    expect(effective(routers[2]!, 'b')).toMatchObject({ waiting: 0, running: 0, kvUsage: 0 });
    expect(placed).toEqual(['1:s', '2:s']);
  });
});

describe('simulate with replicas in sync', () => {
  const base: SimulationOptions = { policy: 'min_ttft', instances: 8 };
  const metrics = (options: SimulationOptions) => runMetrics(simulate(trace, options).records);

  it("keeps one router's cache and latency where unsynced replicas lose them", () => {
    const single = metrics(base);
    const split = { ...base, replicas: 8, replicaAssign: 'random' as const };
    const unsynced = metrics(split);
    const synced = metrics({ ...split, cacheState: 'events', syncLoad: true, syncDelayMs: 5 });
    expect(unsynced.apc).toBeLessThan(single.apc - 0.05);
    expect(Math.abs(synced.apc - single.apc)).toBeLessThan(0.02);
    expect(synced.ttft_s.p90).toBeLessThan(unsynced.ttft_s.p90);
    expect(synced.ttft_s.p90).toBeLessThan(single.ttft_s.p90 * 1.15);
  });

  it('sees load late by the delay: a long delay behaves more like no load sync', () => {
    const split = { ...base, replicas: 8, replicaAssign: 'random' as const, cacheState: 'events' as const };
    const prompt = simulate(trace, { ...split, syncLoad: true, syncDelayMs: 1 }).records;
    const late = simulate(trace, { ...split, syncLoad: true, syncDelayMs: 60_000 }).records;
    const none = simulate(trace, split).records;
    expect(late).not.toEqual(prompt);
    expect(runMetrics(late).instances_per_session).not.toBe(runMetrics(prompt).instances_per_session);
    expect(none.length).toBe(prompt.length);
  });

  it('refuses a bad delay naming the option', () => {
    expect(() => simulate(trace, { ...base, replicas: 2, syncLoad: true, syncDelayMs: -1 })).toThrow(
      /^syncDelayMs must be a finite number of milliseconds >= 0, got -1/,
    );
  });
});

describe('kvroute sim run --sync', () => {
  const run = (...args: string[]) => kvroute(['sim', 'run', traceFile, '--json', ...args]);

  it('carries sync and sync_delay_ms, and --sync none is the run without the flag', () => {
    const synced = run('--replicas', '4', '--sync', 'all', '--sync-delay', '2');
    expect(synced.status, synced.stderr).toBe(0);
    expect(JSON.parse(synced.stdout)).toMatchObject({
      replicas: 4,
      sync: 'all',
      sync_delay_ms: 2,
      cache_state: 'events',
    });
    const none = run('--replicas', '4', '--sync', 'none');
    const plain = run('--replicas', '4');
    expect(none.status, none.stderr).toBe(0);
    const strip = (out: string) => ({ ...JSON.parse(out), wall_s: undefined, started_at: undefined });
    expect(strip(none.stdout)).toEqual(strip(plain.stdout));
  });

  it('refuses bad flags naming them', () => {
    const cases: Array<[string[], string]> = [
      [['--replicas', '2', '--sync', 'gossip'], '--sync'],
      [
        ['--replicas', '2', '--sync', 'load', '--sync-delay', '-3'],
        '--sync-delay must be a number of milliseconds >= 0, got -3',
      ],
      [['--replicas', '2', '--sync-delay', '5'], '--sync-delay needs --sync events, load or all'],
      [['--sync', 'all'], '--sync all needs --replicas above 1'],
      [['--replicas', '2', '--sync', 'events', '--cache-state', 'own'], 'drop --cache-state'],
    ];
    for (const [args, message] of cases) {
      const out = run(...args);
      expect(out.status, args.join(' ')).not.toBe(0);
      expect(out.stderr).toContain(message);
    }
  });
});
