/**
 * `--fleet` on the command line (docs/engine-model.md#mixed-fleets): every verb refuses a bad
 * spec and `--fleet` beside `--instances` with exit 2, naming `--fleet`; `sim run --fleet N` writes
 * the records of `--instances N` byte for byte; a mixed fleet is recorded in --json and the run
 * header, and `sim serve` gives each engine its group's model.
 */
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';

import type { FleetGroupMetrics } from '../src/cli/fleet-groups.js';
import { simServeVerb } from '../src/cli/sim-serve-verb.js';
import { startFleet } from '../src/cli/sweep-live.js';
import type { CellSummary, SweepManifest } from '../src/cli/sweep-layout.js';
import { loadEvaluation } from '../src/report/evaluation-input.js';
import { loadReportInput } from '../src/report/report-input.js';
import { capacityBlocks, DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, scalePreset } from '../src/sim/engine-preset.js';
import { parseFleet } from '../src/sim/fleet-spec.js';
import { startSimFleet } from '../src/sim/sim-fleet.js';
import { readRecordFile } from '../src/trace/record-file.js';
import { kvroute, synthTraceDir } from './helpers/cli-trace.js';

const { dir, traceFile: trace } = synthTraceDir('fleet', ['--sessions', '20', '--seed', '3']);

describe('--fleet refusals', () => {
  const BAD = [
    ['', 'is empty'],
    ['0', 'count must be a positive integer'],
    ['1.5', 'count must be a positive integer'],
    ['2:fast=1', "unknown key 'fast'"],
    ['2:kv=1:kv=2', 'kv given twice'],
    ['2:prefill=0', 'prefill must be greater than 0'],
    ['2:decode=Infinity', 'decode must be finite'],
    ['70000', 'more than 65536'],
  ] as const;

  it.each(BAD)('sim run refuses --fleet %j (exit 2: %s)', (spec, reason) => {
    const run = kvroute(['sim', 'run', '--trace', trace, '--fleet', spec]);
    expect(run.status).toBe(2);
    expect(run.stderr).toMatch(/^kvroute sim: --fleet /);
    expect(run.stderr).toContain(reason);
  });

  it.each([
    ['sim', 'run', '--trace', trace],
    ['sweep', '--trace', trace, '--out', join(dir, 'refused')],
    [
      'tune',
      '--trace',
      trace,
      '--policy',
      'unified',
      '--param',
      'overloadFactor=1:3',
      '--out',
      join(dir, 'refused-tune'),
    ],
  ])('%s %s refuses --fleet beside --instances, and a bad spec (exit 2, naming both flags)', (...args) => {
    const both = kvroute([...args, '--fleet', '2,2:prefill=0.5', '--instances', '4']);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('--fleet and --instances exclude each other');
    const bad = kvroute([...args, '--fleet', '2:prefill=-1']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--fleet group 1: prefill must be greater than 0');
    expect(existsSync(join(dir, 'refused'))).toBe(false);
  });

  it('sim serve refuses them before listening', async () => {
    await expect(simServeVerb({ port: '0', fleet: '1:kv=0' })).rejects.toThrow(/^--fleet group 1: kv must be/);
    await expect(simServeVerb({ port: '0', fleet: '2', instances: '2' })).rejects.toThrow(
      '--fleet and --instances exclude each other',
    );
  });
});

const file0Count = (path: string) => readRecordFile(path).records.length;

describe('kvroute sim run --fleet', () => {
  it('--fleet 4 writes the records of --instances 4, byte for byte', () => {
    const a = join(dir, 'instances.msgpack');
    const b = join(dir, 'fleet.msgpack');
    expect(kvroute(['sim', 'run', '--trace', trace, '--instances', '4', '--records', a]).status).toBe(0);
    expect(kvroute(['sim', 'run', '--trace', trace, '--fleet', '4', '--records', b]).status).toBe(0);
    expect(readRecordFile(b).records).toEqual(readRecordFile(a).records);
    // The files differ only in the header (its command and start time): the records' bytes are equal.
    const records = (file: string) => {
      const bytes = readFileSync(file);
      let headerEnd = 0;
      new Unpackr({ useRecords: true, sequential: true }).unpackMultiple(bytes, (_value, _start, end) => {
        headerEnd = end!;
        return false;
      });
      return bytes.subarray(headerEnd);
    };
    expect(records(b).length).toBeGreaterThan(1000);
    expect(records(b).equals(records(a))).toBe(true);
    expect(readRecordFile(b).header?.fleet).toBeUndefined();
  });

  it('records a mixed fleet in --json and the run header; the fast group answers faster', () => {
    const records = join(dir, 'mixed.msgpack');
    const run = kvroute([
      'sim',
      'run',
      '--trace',
      trace,
      '--policy',
      'round_robin',
      '--fleet',
      '2,2:prefill=0.5:decode=0.5:kv=0.5',
      '--records',
      records,
      '--json',
    ]);
    expect(run.status, run.stderr).toBe(0);
    const json = JSON.parse(run.stdout) as {
      fleet: string;
      fleet_capacity_blocks: number[];
      capacity_blocks: number;
      fleet_groups: FleetGroupMetrics[];
    };
    expect(json.fleet).toBe('2,2:prefill=0.5:decode=0.5:kv=0.5');
    expect(json.fleet_groups.map((g) => [g.group, g.instances])).toEqual([
      ['2', [0, 1]],
      ['2:prefill=0.5:decode=0.5:kv=0.5', [2, 3]],
    ]);
    expect(json.fleet_groups[0]!.requests + json.fleet_groups[1]!.requests).toBe(file0Count(records));
    expect(json.fleet_capacity_blocks[0]).toBe(json.capacity_blocks);
    expect(Math.abs(json.fleet_capacity_blocks[1]! - json.capacity_blocks / 2)).toBeLessThanOrEqual(1);
    const file = readRecordFile(records);
    expect(file.header).toMatchObject({
      instances: 4,
      fleet: json.fleet,
      fleet_capacity_blocks: json.fleet_capacity_blocks,
    });
    const ttftPerToken = (fast: boolean) => {
      const chosen = file.records.filter((r) => r.instance >= 2 === fast && r.input_tokens - r.cached_tokens > 512);
      return (
        chosen.reduce((s, r) => s + (r.first_token - r.dispatch) / (r.input_tokens - r.cached_tokens), 0) /
        chosen.length
      );
    };
    expect(ttftPerToken(true)).toBeLessThan(ttftPerToken(false) * 0.75);
    const text = kvroute(['sim', 'run', '--trace', trace, '--fleet', '1,1:decode=2']);
    expect(text.status, text.stderr).toBe(0);
    expect(text.stdout.split('\n')[0]).toContain('2 instances (fleet 1,1:decode=2)');
    expect(text.stdout).toMatch(
      /^by group:\n {2}instances 0–0 \(1\): \d+ requests · TTFT mean .+\n {2}instances 1–1 \(1:decode=2\): \d+ requests/m,
    );
  });
});

describe('kvroute sim serve --fleet', () => {
  it('a group with prefill=0.5 answers an 8k-token prompt in about half the model time', async () => {
    const fleet = await startSimFleet({ port: 0, speed: 2, fleet: parseFleet('1,1:prefill=0.5') });
    try {
      const ttft = await Promise.all(
        fleet.urls.map(async (url, i) => {
          const prompt = Array.from({ length: 8192 }, (_, t) => 1000 + i * 10_000 + t);
          const response = await fetch(`${url}/v1/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json' },
            body: JSON.stringify({ model: 'qwen3-coder-30b-a3b', prompt, max_tokens: 1 }),
          });
          expect(response.status).toBe(200);
          await response.text();
          const metrics = await (await fetch(`${url}/metrics`)).text();
          return Number(/^vllm:time_to_first_token_seconds_sum\{[^}]*\} (\S+)$/m.exec(metrics)![1]);
        }),
      );
      // The model's isolated 8k prefill is 589 ms (docs/engine-model.md); the fast engine's 295 ms.
      expect(ttft[0]).toBeGreaterThan(0.55);
      expect(ttft[1]).toBeLessThan(ttft[0]! * 0.65);
    } finally {
      await fleet.close();
    }
  });

  it("gives each engine its group's model", async () => {
    const fleet = await startSimFleet({
      port: 0,
      fleet: parseFleet('1,1:kv=0.25:decode=2'),
      scaling: { prefillCost: 2 },
    });
    try {
      const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
      const [slow, small] = fleet.engines;
      expect(fleet.engines).toHaveLength(2);
      expect(slow!.engine.pool.capacity).toBe(capacityBlocks(preset, 16));
      const scaled = scalePreset(scalePreset(preset, { prefillCost: 2 }), { kvCapacity: 0.25, decodeCost: 2 });
      expect(small!.engine.pool.capacity).toBe(capacityBlocks(scaled, 16));
      expect(small!.maxModelLen).toBe(capacityBlocks(scaled, 16) * 16);
    } finally {
      await fleet.close();
    }
  });
});

describe('kvroute sweep --fleet', () => {
  it('runs every cell on the mixed fleet and records it in sweep.json, summaries, headers, tables and the report', () => {
    const out = join(dir, 'sweep');
    const fleet = '1,1:prefill=0.5:kv=0.5';
    const run = kvroute([
      'sweep',
      '--trace',
      trace,
      '--out',
      out,
      '--policies',
      'unified',
      '--engine-state',
      'shadow',
      '--fleet',
      fleet,
      '--workers',
      '1',
    ]);
    expect(run.status, run.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as SweepManifest;
    expect(manifest.fleet).toBe(fleet);
    const cell = manifest.cells[0]!;
    const summary = JSON.parse(readFileSync(join(out, cell.summary), 'utf8')) as CellSummary;
    expect(summary.fleet).toBe(fleet);
    expect(summary.fleet_capacity_blocks![1]).toBeLessThan(summary.fleet_capacity_blocks![0]!);
    expect(readRecordFile(join(out, cell.records)).header).toMatchObject({ instances: 2, fleet });
    expect(new Set(readRecordFile(join(out, cell.records)).records.map((r) => r.instance))).toEqual(new Set([0, 1]));
    expect(readFileSync(join(out, 'tables.md'), 'utf8')).toContain(`mixed fleet ${fleet}`);
    expect(loadReportInput(out).fleet).toBe(fleet);
    const report = kvroute(['report', out, '-o', join(dir, 'report.html')]);
    expect(report.status, report.stderr).toBe(0);
    expect(readFileSync(join(dir, 'report.md'), 'utf8')).toContain(fleet);
    expect(readFileSync(join(dir, 'report.html'), 'utf8')).toContain(fleet);
  });

  it('refuses --fleet with --backends: real engines are what they are', () => {
    const run = kvroute([
      'sweep',
      '--trace',
      trace,
      '--out',
      join(dir, 'b'),
      '--backends',
      'http://127.0.0.1:1',
      '--fleet',
      '2',
    ]);
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('--fleet applies to simulated engines, not --backends');
  });

  it('--live starts `sim serve --fleet`', async () => {
    const spawned: string[][] = [];
    const fleet = await startFleet(2, undefined, 50, (_pid, args) => spawned.push(args), {
      groups: parseFleet('1,1:kv=0.5'),
    });
    try {
      expect(spawned[0]).toEqual(expect.arrayContaining(['--fleet', '1,1:kv=0.5']));
      expect(spawned[0]).not.toContain('--instances');
      const lens = await Promise.all(
        fleet.urls.map(async (url) => {
          const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { max_model_len: number }[] };
          return models.data[0]!.max_model_len;
        }),
      );
      expect(lens[1]).toBeLessThan(lens[0]!);
    } finally {
      await fleet.stop();
    }
  }, 60_000);
});

describe('kvroute tune --fleet', () => {
  it('simulates every point on the mixed fleet and records it as setup.fleet', () => {
    const args = ['tune', trace, '--policy', 'unified', '--param', 'overloadFactor=1:3', '--samples', '3', '--json'];
    // The fast group first: on this light trace `unified` keeps to the lowest instance ids.
    const mixed = kvroute([...args, '--fleet', '2:prefill=0.5:decode=0.7,2', '--workers', '1']);
    expect(mixed.status, mixed.stderr).toBe(0);
    const result = JSON.parse(mixed.stdout) as {
      setup: { instances: number; fleet?: string };
      defaults: { objective: number };
    };
    expect(result.setup).toMatchObject({ instances: 4, fleet: '2:prefill=0.5:decode=0.7,2' });
    const uniform = kvroute([...args, '--fleet', '4', '--workers', '1']);
    expect(uniform.status, uniform.stderr).toBe(0);
    const plain = JSON.parse(uniform.stdout) as typeof result;
    expect(plain.setup.fleet).toBeUndefined();
    // Instances 0–1 twice as fast at prefill: the defaults' TTFT p90 is lower.
    expect(result.defaults.objective).toBeLessThan(plain.defaults.objective);
  });
});

describe('a policy evaluation on a mixed fleet (scripts/policy-eval.mjs --fleet)', () => {
  it("is read beside the uniform one, its fleet in the set's heading", () => {
    const evaluation = join(dir, 'evaluation');
    mkdirSync(evaluation);
    const cells = { default: { unified: [{ seed: 11, ttft_p90: 5, apc: 0.7, hotspot: 1.5 }] } };
    const uniform = { seeds: [11], policies: ['unified'], cells };
    writeFileSync(join(evaluation, 'regimes-seeds-11.json'), JSON.stringify(uniform));
    writeFileSync(
      join(evaluation, 'regimes-seeds-11-fleet-4-4-prefill-0.5.json'),
      JSON.stringify({ ...uniform, fleet: '4,4:prefill=0.5' }),
    );
    const sets = loadEvaluation(evaluation);
    expect(sets.map((s) => [s.set, s.seeds, s.fleet])).toEqual([
      ['regimes', [11], '4,4:prefill=0.5'],
      ['regimes', [11], undefined],
    ]);
    const report = kvroute(['report', evaluation]);
    expect(report.status, report.stderr).toBe(0);
    expect(readFileSync(join(evaluation, 'report.md'), 'utf8')).toContain('regimes (seeds 11; fleet 4,4:prefill=0.5;');
  });
});
