/**
 * Flow control in `kvroute sweep` and `kvroute tune` (docs/flow-control.md "In the simulator"),
 * through the built CLI on the demo trace of scripts/flow-demo-trace.mjs (a noisy tenant at
 * 20 req/s beside three quiet ones at 2 req/s, 1.6× what 4 engines with 16 slots serve): the
 * flags reach every simulation on the worker threads (a cell's and a point's figures are what
 * `sim run` measures with the same flags), the fairness columns and objectives move when the
 * flow config does, and every bad flag or flow file is refused (exit 2) before anything runs.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { jainIndex, worstTenant, type FlowGroupMetrics, type FlowMetrics } from '../src/analysis/flow-metrics.js';
import { readRecordFile } from '../src/trace/record-file.js';
import type { TuneResult } from '../src/cli/tune-result.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const cli = join(root, 'dist/cli.js');
const dir = mkdtempSync(join(tmpdir(), 'kvroute-sweep-flow-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const trace = join(dir, 'tenants.jsonl');
/** Equal weights (the default) against a noisy tenant weighing 50: close to one FIFO in its favour. */
const heavy = join(dir, 'heavy.yaml');
const badWeight = join(dir, 'bad.yaml');

const kvroute = (args: string[]) =>
  spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', timeout: 90_000, maxBuffer: 1 << 26 });

beforeAll(() => {
  const made = spawnSync(process.execPath, [join(root, 'scripts/flow-demo-trace.mjs'), trace], { encoding: 'utf8' });
  expect(made.status, made.stderr).toBe(0);
  writeFileSync(heavy, 'tenants:\n  noisy: { weight: 50 }\n');
  writeFileSync(badWeight, 'tenants:\n  q1: { weight: -1 }\n');
});

const FLEET = ['--instances', '4', '--max-in-flight', '16'];

/** `kvroute sim run --json`'s flow_metrics with `args`. */
function simFlow(policy: string, args: string[]): FlowMetrics & { requests: number } {
  const run = kvroute(['sim', 'run', trace, '--policy', policy, ...FLEET, ...args, '--json']);
  expect(run.status, run.stderr).toBe(0);
  const printed = JSON.parse(run.stdout) as { requests: number; flow_metrics: FlowMetrics };
  return { ...printed.flow_metrics, requests: printed.requests };
}

const omitRequests = ({ requests: _, ...flow }: FlowMetrics & { requests: number }): FlowMetrics => flow;
const quiet = (flow: FlowMetrics): FlowGroupMetrics[] => flow.tenants.filter((t) => t.name !== 'noisy');

describe('kvroute sweep --max-in-flight --flow --queue-timeout', () => {
  interface Swept {
    stdout: string;
    manifest: { flow?: unknown };
    flow: (cell: string) => FlowMetrics | undefined;
  }
  function sweep(name: string, args: string[]): Swept {
    const out = join(dir, name);
    const run = kvroute([
      'sweep',
      trace,
      '--policies',
      'min_ttft,unified',
      '--engine-state',
      'shadow',
      ...args,
      '--out',
      out,
    ]);
    expect(run.status, run.stderr).toBe(0);
    const summary = (cell: string) =>
      JSON.parse(readFileSync(join(out, 'cells', cell, 'summary.json'), 'utf8')) as { flow_metrics?: FlowMetrics };
    return {
      stdout: run.stdout,
      manifest: JSON.parse(readFileSync(join(out, 'sweep.json'), 'utf8')) as { flow?: unknown },
      flow: (cell) => summary(cell).flow_metrics,
    };
  }
  /** The Flow control table's row of `cell`: tenants, Jain's index, worst tenant, refused. */
  const flowRow = (stdout: string, cell: string): string[] => {
    const table = stdout.slice(stdout.indexOf('## Flow control'));
    const line = table.split('\n').find((l) => l.startsWith(`| ${cell} |`))!;
    return line
      .split('|')
      .slice(2, -1)
      .map((c) => c.trim());
  };

  let fair: Swept;
  let favoured: Swept;
  beforeAll(() => {
    fair = sweep('fair', FLEET);
    favoured = sweep('favoured', [...FLEET, '--flow', heavy, '--queue-timeout', '10000']);
  });

  it("measures each cell as sim run does with the same flags: the flags reach the workers' simulations", () => {
    for (const policy of ['min_ttft', 'unified']) {
      expect(fair.flow(`${policy}-shadow`)).toEqual(omitRequests(simFlow(policy, [])));
      expect(favoured.flow(`${policy}-shadow`)).toEqual(
        omitRequests(simFlow(policy, ['--flow', heavy, '--queue-timeout', '10000'])),
      );
    }
    expect(fair.manifest.flow).toEqual({ max_in_flight: 16 });
    expect(favoured.manifest.flow).toEqual({ max_in_flight: 16, file: heavy, queue_timeout_ms: 10_000 });
    // RunHeader does not declare `flow` (sim run writes it too): read it as the file holds it.
    const header = readRecordFile(join(dir, 'favoured', 'cells', 'unified-shadow', 'records.msgpack')).header as {
      flow?: unknown;
    };
    expect(header.flow).toEqual({ max_in_flight: 16, file: heavy, queue_timeout_ms: 10_000 });
  });

  it('prints the fairness columns, and they move when the flow config does', () => {
    const flow = fair.flow('min_ttft-shadow')!;
    const worst = worstTenant(flow)!;
    const refused = flow.tenants.reduce((n, t) => n + t.refused, 0);
    expect(flowRow(fair.stdout, 'min_ttft-shadow')).toEqual([
      '4',
      flow.jain_tokens.toFixed(3),
      `${worst.ttft_p90_s.toFixed(2)} (${worst.name})`,
      `${refused} (${((refused / 1560) * 100).toFixed(1)} %)`,
    ]);
    // Equal weights: the flood waits on itself, refused at its deadline; the quiet tenants do not wait.
    expect(worst.name).toBe('noisy');
    expect(refused).toBeGreaterThan(0);
    for (const t of quiet(flow)) expect(t).toMatchObject({ refused: 0 });
    expect(Math.max(...quiet(flow).map((t) => t.ttft_p90_s))).toBeLessThan(2);
    // The noisy tenant weighing 50: a quiet one is now the worst served, seconds behind the flood.
    const other = favoured.flow('min_ttft-shadow')!;
    const otherWorst = worstTenant(other)!;
    expect(otherWorst.name).not.toBe('noisy');
    expect(otherWorst.ttft_p90_s).toBeGreaterThan(5);
    expect(other.jain_tokens).not.toBeCloseTo(flow.jain_tokens, 3);
    expect(flowRow(favoured.stdout, 'min_ttft-shadow')[2]).toBe(
      `${otherWorst.ttft_p90_s.toFixed(2)} (${otherWorst.name})`,
    );
  });

  it('without --max-in-flight has no flow table and no flow_metrics', () => {
    const plain = sweep('plain', ['--instances', '4']);
    expect(plain.stdout).not.toContain('## Flow control');
    expect(plain.flow('min_ttft-shadow')).toBeUndefined();
    expect(plain.manifest.flow).toBeUndefined();
  });

  const refusals: [string, string[], string][] = [
    [
      'a bad flow file, naming the key',
      [...FLEET, '--flow', badWeight],
      `--flow ${badWeight}: flow.tenants.q1.weight must be a number > 0, got -1`,
    ],
    ['--flow without --max-in-flight', ['--flow', heavy], '--flow and --queue-timeout need --max-in-flight N'],
    ['--max-in-flight 0', ['--max-in-flight', '0'], '--max-in-flight must be'],
    ['flow control on --live cells', ['--live', ...FLEET], 'apply to simulated cells, not --live or --backends'],
  ];
  it.each(refusals)('refuses %s (exit 2) before any cell', (_name, args, message) => {
    const out = join(dir, 'refused');
    const run = kvroute(['sweep', trace, '--out', out, ...args]);
    expect(run.stderr).toContain(message);
    expect(run.status).toBe(2);
    expect(existsSync(out)).toBe(false);
  });
});

describe('kvroute tune with flow control', () => {
  const BASE = [
    'tune',
    trace,
    '--policy',
    'unified',
    '--param',
    'overloadFactor=1:3',
    '--samples',
    '2',
    '--workers',
    '2',
  ];
  function tune(args: string[]): TuneResult {
    const run = kvroute([...BASE, ...args, '--json']);
    expect(run.status, run.stderr).toBe(0);
    return JSON.parse(run.stdout) as TuneResult;
  }

  it("minimizes the worst tenant's TTFT p90, measured as sim run does, and it moves with the flow config", () => {
    const fair = tune([...FLEET, '--objective', 'worst_tenant_ttft_p90']);
    expect(fair.objective).toEqual({ name: 'worst_tenant_ttft_p90', unit: 's', aggregate: 'mean' });
    expect(fair.setup.flow).toEqual({ max_in_flight: 16 });
    expect(fair.defaults.per_trace).toEqual([worstTenant(simFlow('unified', []))!.ttft_p90_s]);
    const favoured = tune([...FLEET, '--flow', heavy, '--objective', 'worst_tenant_ttft_p90']);
    expect(favoured.setup.flow).toEqual({ max_in_flight: 16, file: heavy });
    expect(favoured.defaults.per_trace).toEqual([worstTenant(simFlow('unified', ['--flow', heavy]))!.ttft_p90_s]);
    expect(favoured.defaults.objective).not.toBe(fair.defaults.objective);
  });

  it('minimizes the refused share, which a shorter --queue-timeout raises', () => {
    const share = (args: string[]): number => {
      const flow = simFlow('unified', args);
      return (flow.tenants.reduce((n, t) => n + t.refused, 0) / flow.requests) * 100;
    };
    const long = tune([...FLEET, '--objective', 'refused_pct']);
    const short = tune([...FLEET, '--queue-timeout', '3000', '--objective', 'refused_pct']);
    expect(long.objective.unit).toBe('%');
    expect(long.defaults.per_trace).toEqual([share([])]);
    expect(short.defaults.per_trace).toEqual([share(['--queue-timeout', '3000'])]);
    expect(short.defaults.objective).toBeGreaterThan(long.defaults.objective);
  });

  const refusals: [string, string[], string][] = [
    [
      'a flow objective without --max-in-flight',
      ['--objective', 'worst_tenant_ttft_p90'],
      '--objective worst_tenant_ttft_p90 needs --max-in-flight N',
    ],
    [
      'a bad flow file, naming the key',
      [...FLEET, '--flow', badWeight],
      'flow.tenants.q1.weight must be a number > 0, got -1',
    ],
    [
      '--queue-timeout without --max-in-flight',
      ['--queue-timeout', '100'],
      '--flow and --queue-timeout need --max-in-flight N',
    ],
  ];
  it.each(refusals)('refuses %s (exit 2)', (_name, args, message) => {
    const run = kvroute([...BASE, ...args]);
    expect(run.stderr).toContain(message);
    expect(run.status).toBe(2);
  });
});

describe('worstTenant', () => {
  const tenant = (name: string, requests: number, refused: number, ttft: number): FlowGroupMetrics => ({
    name,
    requests,
    refused,
    ttft_p90_s: ttft,
    queued_p90_s: 0,
    tokens: 1,
  });
  it('is the highest TTFT p90 among tenants with an answered request', () => {
    const flow = {
      tenants: [tenant('a', 4, 0, 1), tenant('b', 3, 3, 0), tenant('c', 5, 1, 2)],
      classes: [],
      jain_tokens: jainIndex([1, 1, 1]),
    };
    expect(worstTenant(flow)?.name).toBe('c');
    expect(worstTenant({ ...flow, tenants: [tenant('b', 3, 3, 0)] })).toBeUndefined();
  });
});
