/**
 * Perturbing the engine model (docs/engine-model.md#perturbing-the-model): scalePreset scales
 * prefill steps, decode steps and KV capacity as documented; `sim run`, `sweep` (its simulator
 * cells and its --live fleet) and `sim serve` take --prefill-cost, --decode-cost and
 * --kv-capacity, refuse bad values naming the flag, and record the scaling in record headers,
 * sweep.json, cell summaries and the report.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

import { beforeAll, describe, expect, it } from 'vitest';

import { multiplierFlag, UsageError } from '../src/cli/common.js';
import { engineScalingArgs, engineScalingFlags } from '../src/cli/engine-options.js';
import { simServeVerb } from '../src/cli/sim-serve-verb.js';
import type { CellSummary, SweepManifest } from '../src/cli/sweep-layout.js';
import { startFleet, type LiveCellRunner } from '../src/cli/sweep-live.js';
import { runSweep } from '../src/cli/sweep-run.js';
import { loadReportInput } from '../src/report/report-input.js';
import {
  capacityBlocks,
  DEFAULT_ENGINE_PRESET,
  ENGINE_PRESETS,
  scalePreset,
  stepMs,
  type PrefillChunk,
} from '../src/sim/engine-preset.js';
import { startSimFleet } from '../src/sim/sim-fleet.js';
import { simulate } from '../src/sim/simulator.js';
import { readRecordFile, writeRecords } from '../src/trace/record-file.js';
import { RECORDS_FORMAT, RECORDS_VERSION } from '../src/trace/records.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
const { dir, traceFile: trace } = synthTraceDir('scaling', ['--sessions', '20', '--seed', '3']);

describe('scalePreset', () => {
  const chunks: PrefillChunk[] = [
    { tokens: 8192, context: 0 },
    { tokens: 2048, context: 30_000 },
  ];
  const prefillOnly = (p = preset): number => stepMs(p, chunks, 0);
  const decodeOnly = (p = preset): number => stepMs(p, [], 12, 400_000);

  it('multiplies prefill steps (overhead included) by prefillCost and decode steps by decodeCost', () => {
    const scaled = scalePreset(preset, { prefillCost: 1.3, decodeCost: 0.7 });
    expect(prefillOnly(scaled)).toBeCloseTo(1.3 * prefillOnly(), 9);
    expect(decodeOnly(scaled)).toBeCloseTo(0.7 * decodeOnly(), 9);
    // A mixed step: each part by its own factor.
    expect(stepMs(scaled, chunks, 12, 400_000)).toBeCloseTo(1.3 * prefillOnly() + 0.7 * decodeOnly(), 9);
    // An isolated prefill of any length, overhead and all, takes exactly prefillCost times as long.
    for (const tokens of [16, 2048, 32_768])
      expect(stepMs(scaled, [{ tokens, context: 0 }], 0)).toBeCloseTo(
        1.3 * stepMs(preset, [{ tokens, context: 0 }], 0),
        9,
      );
  });

  it('multiplies the KV cache by kvCapacity and leaves the rest, and the original, alone', () => {
    const half = scalePreset(preset, { kvCapacity: 0.5 });
    expect(half.kvCacheBytes).toBe(preset.kvCacheBytes * 0.5);
    expect(Math.abs(capacityBlocks(half, 16) - capacityBlocks(preset, 16) / 2)).toBeLessThanOrEqual(1);
    expect(stepMs(half, chunks, 12, 400_000)).toBe(stepMs(preset, chunks, 12, 400_000));
    for (const key of ['maxBatchedTokens', 'maxRunning', 'maxModelLen', 'model'] as const)
      expect(half[key]).toBe(preset[key]);
    expect(half.name).toContain('KV capacity ×0.5');
    expect(preset.kvCacheBytes).toBe(ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!.kvCacheBytes);
    expect(scalePreset(preset, {})).toBe(preset);
    expect(scalePreset(preset, { prefillCost: 1, decodeCost: 1, kvCapacity: 1 })).toBe(preset);
  });

  it.each([0, -1, Number.NaN, Infinity, 101])('refuses a factor of %s, naming it', (bad) => {
    for (const field of ['prefillCost', 'decodeCost', 'kvCapacity'] as const)
      expect(() => scalePreset(preset, { [field]: bad })).toThrow(
        expect.objectContaining({
          code: 'ERR_KVROUTE_INVALID_ARG_VALUE',
          message: expect.stringContaining(`scaling.${field}`),
        }),
      );
  });
});

describe('the simulator under a scaled preset', () => {
  const small = [...synthesizeTrace({ sessions: 12, seed: 5, duration: 60 })];

  it('sizes engines and router by the scaled KV capacity, and refuses an explicit capacityBlocks beside it', () => {
    const full = simulate(small, { policy: 'sticky', instances: 2 });
    const half = simulate(small, { policy: 'sticky', instances: 2, scaling: { kvCapacity: 0.5 } });
    expect(half.capacityBlocks).toBe(capacityBlocks(scalePreset(preset, { kvCapacity: 0.5 }), 16));
    expect(Math.abs(half.capacityBlocks - full.capacityBlocks / 2)).toBeLessThanOrEqual(1);
    expect(() =>
      simulate(small, { policy: 'sticky', instances: 2, capacityBlocks: 9000, scaling: { kvCapacity: 2 } }),
    ).toThrow(/capacityBlocks must be absent when scaling.kvCapacity is given/);
    expect(() => simulate(small, { policy: 'sticky', instances: 2, scaling: { kvCapacity: 1e-7 } })).toThrow(
      /scaling.kvCapacity must be large enough for one 16-token KV block/,
    );
  });
});

describe('the flags', () => {
  it.each([
    ['0', 'greater than 0'],
    ['-1', 'greater than 0'],
    ['NaN', 'a number'],
    ['abc', 'a number'],
    ['', 'a number'],
    ['Infinity', 'finite'],
    ['-Infinity', 'finite'],
    ['101', 'at most 100'],
  ])('refuses %j: %s', (raw, reason) => {
    expect(() => multiplierFlag({ 'kv-capacity': raw }, 'kv-capacity', 100)).toThrow(UsageError);
    expect(() => multiplierFlag({ 'kv-capacity': raw }, 'kv-capacity', 100)).toThrow(`--kv-capacity must be ${reason}`);
  });

  it('read as factors with 1 for what is absent, and pass only what is not 1 to a child sim serve', () => {
    expect(engineScalingFlags({ 'prefill-cost': '1.3', 'kv-capacity': '0.5' })).toEqual({
      prefillCost: 1.3,
      decodeCost: 1,
      kvCapacity: 0.5,
    });
    expect(engineScalingArgs({ prefillCost: 1.3, decodeCost: 1, kvCapacity: 0.5 })).toEqual([
      '--prefill-cost',
      '1.3',
      '--kv-capacity',
      '0.5',
    ]);
    expect(engineScalingArgs({})).toEqual([]);
  });

  // Each bad value once per command, the flag rotating, so every flag sees bad values everywhere.
  const FLAGS = ['--prefill-cost', '--decode-cost', '--kv-capacity'];
  const BAD = ['0', '-1', 'NaN', 'abc', 'Infinity'];
  const cases = (offset: number) => BAD.map((value, i) => [FLAGS[(i + offset) % 3]!, value] as const);

  it.each(cases(0))('sim run refuses %s %s (exit 2, the flag named)', (flag, value) => {
    const run = kvroute(['sim', 'run', '--trace', trace, flag, value]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^kvroute sim: ${flag} must be `));
  });

  it.each(cases(1))('sweep refuses %s %s (exit 2, the flag named, no --out made)', (flag, value) => {
    const out = join(dir, 'refused');
    const run = kvroute(['sweep', '--trace', trace, '--out', out, flag, value]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(new RegExp(`^kvroute sweep: ${flag} must be `));
    expect(existsSync(out)).toBe(false);
  });

  it.each(cases(2))('sim serve refuses %s %s before listening', async (flag, value) => {
    await expect(simServeVerb({ port: '0', instances: '1', [flag.slice(2)]: value })).rejects.toThrow(
      new RegExp(`^${flag} must be `),
    );
  });

  it('sweep refuses them with --backends: real engines are what they are', () => {
    const run = kvroute([
      'sweep',
      '--trace',
      trace,
      '--out',
      join(dir, 'b'),
      '--backends',
      'http://127.0.0.1:1',
      '--kv-capacity',
      '0.5',
    ]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('apply to simulated engines, not --backends');
  });
});

describe('kvroute sim run', () => {
  const simRun = (...args: string[]) => {
    const run = kvroute(['sim', 'run', '--trace', trace, '--policy', 'unified', '--instances', '2', '--json', ...args]);
    expect(run.status, run.stderr).toBe(0);
    return JSON.parse(run.stdout) as CellSummary;
  };
  let base: CellSummary;
  beforeAll(() => {
    base = simRun();
  });

  it('--kv-capacity 0.5 halves the capacity in blocks and evicts more', () => {
    const records = join(dir, 'half.msgpack');
    const half = simRun('--kv-capacity', '0.5', '--records', records);
    expect(Math.abs(half.capacity_blocks! - base.capacity_blocks! / 2)).toBeLessThanOrEqual(1);
    expect(half.evictions).toBeGreaterThan(base.evictions);
    expect(half.engine_scaling).toEqual({ prefill_cost: 1, decode_cost: 1, kv_capacity: 0.5 });
    expect(readRecordFile(records).header).toMatchObject({
      preset: DEFAULT_ENGINE_PRESET,
      engine_scaling: { prefill_cost: 1, decode_cost: 1, kv_capacity: 0.5 },
      capacity_blocks: half.capacity_blocks,
    });
    expect(loadReportInput(records).engine).toBe(`${DEFAULT_ENGINE_PRESET} · KV capacity ×0.5`);
  });

  it('--prefill-cost 1.3 raises TTFT; --decode-cost 1.3 raises TPOT', () => {
    const prefill = simRun('--prefill-cost', '1.3');
    expect(prefill.ttft_s.p50).toBeGreaterThan(base.ttft_s.p50 * 1.15);
    expect(prefill.ttft_s.p90).toBeGreaterThan(base.ttft_s.p90 * 1.15);
    const decode = simRun('--decode-cost', '1.3');
    expect(decode.tpot_ms.p50).toBeGreaterThan(base.tpot_ms.p50 * 1.15);
  });

  it('reads a record file written before the engine model was recorded', () => {
    const old = join(dir, 'old.msgpack');
    const { records } = simulate([...synthesizeTrace({ sessions: 2, seed: 1, duration: 10 })], {
      policy: 'sticky',
      instances: 1,
    });
    writeRecords(old, records, {
      format: RECORDS_FORMAT,
      version: RECORDS_VERSION,
      source: 'sim',
      trace: { path: 't.jsonl', fingerprint: 'sha256:0000000000000000:1' },
      policy: 'sticky',
      kvroute_version: '0.1.0',
      command: ['sim', 'run', '--trace', 't.jsonl'],
      started_at: '2026-11-30T00:00:00.000Z',
    });
    expect(readRecordFile(old).header?.engine_scaling).toBeUndefined();
    expect(loadReportInput(old).engine).toBeUndefined();
  });
});

describe('kvroute sweep', () => {
  it('runs every simulator cell scaled, and records it in sweep.json, summaries, headers, tables and the report', () => {
    const out = join(dir, 'sweep');
    const run = kvroute([
      'sweep',
      '--trace',
      trace,
      '--out',
      out,
      '--policies',
      'sticky,unified',
      '--engine-state',
      'shadow',
      '--instances',
      '2',
      '--prefill-cost',
      '1.3',
      '--kv-capacity',
      '0.5',
    ]);
    expect(run.status, run.stderr).toBe(0);
    const scaling = { prefill_cost: 1.3, decode_cost: 1, kv_capacity: 0.5 };
    const manifest = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepManifest;
    expect(manifest).toMatchObject({ preset: DEFAULT_ENGINE_PRESET, engine_scaling: scaling });
    // sim run's learned costs come from the live simulation, and its cost mode is sweep.json's: a
    // sweep cell's summary has neither.
    const {
      learned_costs: _learned,
      costs,
      session_returns: returns,
      ...alone
    } = JSON.parse(
      kvroute([
        'sim',
        'run',
        '--trace',
        trace,
        '--policy',
        'sticky',
        '--instances',
        '2',
        '--prefill-cost',
        '1.3',
        '--kv-capacity',
        '0.5',
        '--json',
      ]).stdout,
    ) as CellSummary & { learned_costs: unknown; costs: string; session_returns: boolean };
    expect(manifest.costs).toBe(costs);
    expect(manifest.session_returns).toBe(returns);
    for (const cell of manifest.cells) {
      const summary = JSON.parse(readFileSync(join(out, cell.summary), 'utf8')) as CellSummary;
      expect(summary).toMatchObject({
        preset: DEFAULT_ENGINE_PRESET,
        engine_scaling: scaling,
        capacity_blocks: alone.capacity_blocks,
      });
      expect(readRecordFile(join(out, cell.records)).header).toMatchObject({ engine_scaling: scaling });
    }
    const { slow: _slow, ...sticky } = JSON.parse(
      readFileSync(join(out, 'cells/sticky-shadow/summary.json'), 'utf8'),
    ) as CellSummary;
    expect(sticky).toEqual(alone);
    expect(run.stdout).toMatch(/^Engine model perturbed: prefill cost ×1\.3 · KV capacity ×0\.5 /);
    expect(loadReportInput(out).engine).toBe(`${DEFAULT_ENGINE_PRESET} · prefill cost ×1.3 · KV capacity ×0.5`);
  }, 60_000);

  it('hands the preset and scaling to the --live fleet, whose engines run them', async () => {
    const seen: unknown[] = [];
    const runner: LiveCellRunner = async (_cell, options) => {
      seen.push({ preset: options.preset, scaling: options.scaling });
      writeRecords(options.records, []);
      return { fingerprint: '' };
    };
    await runSweep({
      trace,
      reader: {},
      policies: ['sticky'],
      engineStates: ['shadow'],
      out: join(dir, 'live'),
      force: false,
      mode: 'live',
      instances: 1,
      preset: DEFAULT_ENGINE_PRESET,
      scaling: { kvCapacity: 0.5 },
      live: { mode: 'live', instances: 1 },
      liveRunner: runner,
      command: ['sweep', '--live', '--kv-capacity', '0.5'],
    });
    expect(seen).toEqual([{ preset: DEFAULT_ENGINE_PRESET, scaling: { kvCapacity: 0.5 } }]);
    const spawned: string[][] = [];
    const fleet = await startFleet(1, undefined, 50, (_pid, args) => spawned.push(args), {
      preset: DEFAULT_ENGINE_PRESET,
      scaling: { kvCapacity: 0.5 },
    });
    try {
      expect(spawned[0]).toEqual(expect.arrayContaining(['--preset', DEFAULT_ENGINE_PRESET, '--kv-capacity', '0.5']));
      const models = (await (await fetch(`${fleet.urls[0]}/v1/models`)).json()) as {
        data: { max_model_len: number }[];
      };
      expect(models.data[0]!.max_model_len).toBe(capacityBlocks(scalePreset(preset, { kvCapacity: 0.5 }), 16) * 16);
    } finally {
      await fleet.stop();
    }
  }, 60_000);
});

describe('kvroute sim serve', () => {
  it("scales each engine's model: capacity and max_model_len follow --kv-capacity", async () => {
    const fleet = await startSimFleet({ instances: 1, port: 0, scaling: { kvCapacity: 0.25, decodeCost: 2 } });
    try {
      const server = fleet.engines[0]!;
      const scaled = scalePreset(preset, { kvCapacity: 0.25, decodeCost: 2 });
      expect(server.engine.pool.capacity).toBe(capacityBlocks(scaled, 16));
      expect(server.maxModelLen).toBe(capacityBlocks(scaled, 16) * 16);
    } finally {
      await fleet.close();
    }
  });
});
