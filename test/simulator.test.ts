/**
 * The discrete-event simulator and run metrics: determinism, session-sequential dispatch,
 * Poisson open-loop dispatch, records, and the metric definitions on hand-made records.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { runMetrics } from '../src/analysis/run-metrics.js';
import { simulate, simulateStream, type SimulationOptions } from '../src/sim/simulator.js';
import { readRecords, writeRecords } from '../src/trace/record-file.js';
import type { RequestRecord } from '../src/trace/records.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { Rng } from './helpers/random.js';
import { startSimServe } from './helpers/sim-serve-child.js';

const trace = [...synthesizeTrace({ sessions: 40, seed: 2, duration: 60 })];
const dir = mkdtempSync(join(tmpdir(), 'kvroute-sim-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('simulate', () => {
  it('is deterministic: the same trace and options give the same records', () => {
    for (const options of [
      { policy: 'unified+A+B' as const, instances: 4 },
      { policy: 'lmetric' as const, instances: 4, engineState: 'shm' as const },
      { policy: 'sticky' as const, instances: 3, dispatch: { mode: 'poisson' as const, rate: 2, seed: 9 } },
    ]) {
      const a = simulate(trace, options);
      const b = simulate(trace, options);
      expect(a.records).toEqual(b.records);
      expect(a.records).toHaveLength(trace.length);
    }
  });

  it('runs silent steps ahead without changing a single record (randomized, against one event per step)', () => {
    const random = new Rng(41);
    let preemptions = 0;
    for (let round = 0; round < 12; round++) {
      const small = [...synthesizeTrace({ sessions: random.int(6, 25), seed: 100 + round, duration: 30 })];
      const options: SimulationOptions = {
        policy: random.pick(['unified+A+B', 'lmetric', 'sticky', 'load_only', 'round_robin'] as const),
        instances: random.int(1, 5),
        engineState: random.pick(['shadow', 'shm'] as const),
        // Small pools in some rounds, so preemptions and evictions happen.
        ...(random.chance(0.5) ? { capacityBlocks: random.int(8_400, 12_000) } : {}),
        ...(random.chance(0.3) ? { dispatch: { mode: 'poisson' as const, rate: random.int(1, 8), seed: round } } : {}),
      };
      const ahead = simulate(small, options);
      const stepwise = simulate(small, { ...options, runAhead: false });
      expect(ahead.records).toEqual(stepwise.records);
      expect([ahead.steps, ahead.preemptions, ahead.evictions]).toEqual([
        stepwise.steps,
        stepwise.preemptions,
        stepwise.evictions,
      ]);
      preemptions += ahead.preemptions;
    }
    expect(preemptions).toBeGreaterThan(0); // the small pools did bite
  });

  it('refuses a request larger than an engine’s whole KV cache, naming it', () => {
    const big = { ...trace[0]!, inputLength: 40_000, outputLength: 10 };
    expect(() => simulate([big], { policy: 'unified', instances: 2, capacityBlocks: 2_000 })).toThrow(
      /input_length \+ output_length of session s\d+ turn 1 must be at most 32000 tokens, the KV cache of one engine, got 40010/,
    );
  });

  it('reads an asynchronous source lazily and gives the records an array gives', async () => {
    const options = { policy: 'unified' as const, instances: 3 };
    let read = 0;
    async function* source() {
      for (const request of trace) {
        read++;
        yield request;
      }
    }
    const streamed = await simulateStream(source(), options);
    expect(read).toBe(trace.length);
    expect(streamed.records).toEqual(simulate(trace, options).records);
  });

  it('dispatches sessions sequentially: a turn waits for its trace time and the previous turn', () => {
    const { records } = simulate(trace, { policy: 'unified', instances: 4 });
    const bySession = new Map<string, RequestRecord[]>();
    for (const r of records) bySession.set(r.session, [...(bySession.get(r.session) ?? []), r]);
    const arrival = new Map(trace.map((t) => [`${t.session}/${t.turn}`, t.arrival]));
    for (const turns of bySession.values()) {
      turns.sort((x, y) => x.turn - y.turn);
      turns.forEach((r, k) => {
        expect(r.dispatch).toBeGreaterThanOrEqual(arrival.get(`${r.session}/${r.turn}`)!);
        if (k > 0) expect(r.dispatch).toBeGreaterThanOrEqual(turns[k - 1]!.finish);
        expect(r.first_token).toBeGreaterThan(r.dispatch);
        expect(r.finish).toBeGreaterThanOrEqual(r.first_token);
      });
    }
  });

  it('keeps sessions on one instance under sticky, and caches more than round_robin', () => {
    const sticky = runMetrics(simulate(trace, { policy: 'sticky', instances: 4 }).records);
    const spread = runMetrics(simulate(trace, { policy: 'round_robin', instances: 4 }).records);
    expect(sticky.instances_per_session).toBe(1);
    expect(spread.instances_per_session).toBeGreaterThan(1);
    expect(sticky.apc).toBeGreaterThan(spread.apc + 0.2);
  });

  it('sends Poisson arrivals open-loop at the given rate', () => {
    const { records } = simulate(trace, {
      policy: 'lmetric',
      instances: 4,
      dispatch: { mode: 'poisson', rate: 5, seed: 1 },
    });
    const dispatches = records.map((r) => r.dispatch).sort((a, b) => a - b);
    const meanGap = (dispatches.at(-1)! - dispatches[0]!) / (dispatches.length - 1);
    expect(meanGap).toBeGreaterThan(0.15);
    expect(meanGap).toBeLessThan(0.25);
  });
});

describe('runMetrics', () => {
  const record = (over: Partial<RequestRecord>): RequestRecord => ({
    session: 'a',
    turn: 1,
    instance: 0,
    dispatch: 0,
    first_token: 1,
    finish: 2,
    input_tokens: 100,
    cached_tokens: 0,
    output_tokens: 11,
    overlapped: false,
    preemptions: 0,
    ...over,
  });

  it('computes the B3 definitions on hand-made records', () => {
    const records = [
      record({ instance: 0, first_token: 1, finish: 2, cached_tokens: 50 }), // TTFT 1 s, TPOT 100 ms
      record({ instance: 1, first_token: 3, finish: 4, session: 'b' }), // TTFT 3 s
      record({ instance: 1, first_token: 3, finish: 7, session: 'a', turn: 2, overlapped: true }), // TPOT 400 ms
      record({ instance: 2, first_token: 2, finish: 2, output_tokens: 1, session: 'b', turn: 2, preemptions: 1 }),
    ];
    const m = runMetrics(records);
    expect(m.requests).toBe(4);
    expect(m.apc).toBe(50 / 400);
    expect(m.ttft_s.p50).toBe(2.5);
    expect(m.tpot_ms.p50).toBeCloseTo(100, 9);
    // Overlapped TPOT p90 400 ms over clean p90: clean TPOTs are 100 and 100 ms.
    expect(m.interference_index).toBeCloseTo(4, 9);
    // Worker TTFT p90s: 1, 3, 2 → max 3 over median 2.
    expect(m.hotspot_index).toBe(1.5);
    expect(m.instances_per_session).toBe(2); // a: {0, 1}; b: {1, 2}
    expect(m.preempted_requests).toBe(1);
    expect(runMetrics([record({})]).interference_index).toBeNull();
  });
});

describe('record files and kvroute sim run', () => {
  it('round-trips records through MessagePack', () => {
    const { records } = simulate(trace, { policy: 'unified', instances: 2 });
    const path = join(dir, 'records.msgpack');
    writeRecords(path, records);
    expect(readRecords(path)).toEqual(records);
  });

  it('prints the metrics as JSON and refuses bad flags', () => {
    const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
    const tracePath = join(dir, 'trace.jsonl');
    const kvroute = (args: string[]) =>
      spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 60_000 });
    expect(kvroute(['trace', 'synth', '--sessions', '20', '--seed', '4', '-o', tracePath]).status).toBe(0);
    const run = kvroute(['sim', 'run', '--trace', tracePath, '--policy', 'sticky', '--instances', '3', '--json']);
    expect(run.status).toBe(0);
    const summary = JSON.parse(run.stdout);
    for (const key of ['ttft_s', 'tpot_ms', 'e2e_s'])
      expect(Object.keys(summary[key]).sort()).toEqual(['p50', 'p90', 'p99']);
    for (const key of ['apc', 'interference_index', 'hotspot_index', 'instances_per_session', 'requests'])
      expect(summary).toHaveProperty(key);
    expect(summary.instances_per_session).toBe(1);
    expect(kvroute(['sim', 'run', '--trace', tracePath, '--policy', 'fastest']).stderr).toMatch(
      /--policy must be one of/,
    );
    expect(kvroute(['sim', 'run']).stderr).toMatch(/sim run needs a trace: sim run IN, or --trace IN/);
    expect(kvroute(['sim', 'run', '--trace', tracePath, '--engine-state', 'psychic']).status).toBe(2);
    expect(kvroute(['sim', 'fly'])).toMatchObject({
      status: 2,
      stderr: expect.stringMatching(/^kvroute sim: unknown command 'fly'/),
    });
  });

  it('kvroute sim serve starts engines that answer, and exits 0 on SIGTERM', async () => {
    const serve = await startSimServe(2);
    try {
      for (const url of serve.urls) expect((await fetch(`${url}/health`)).status).toBe(200);
    } finally {
      expect(await serve.stop()).toBe(0);
    }
  });
});
