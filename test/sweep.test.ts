/**
 * `kvroute sweep` offline: the default sweep (5 policies × shadow, shm) on the default synthetic
 * trace, its directory layout, and the simulator's B3 rows restated for an exact-counter router
 * (docs/engine-model.md): sticky and unified within 5 % of the intra-session APC ceiling,
 * load_only ≥ 10 pp below it, lmetric moving sessions more than unified, load_only's TTFT p90
 * the worst of the five.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runMetrics } from '../src/analysis/run-metrics.js';
import type { TraceSummary } from '../src/analysis/trace-summary.js';
import { cellId, type CellSummary, type SweepManifest } from '../src/cli/sweep-layout.js';
import { runSweep, type SweepOutcome } from '../src/cli/sweep-run.js';
import { readRecordFile } from '../src/trace/record-file.js';

const cli = fileURLToPath(new URL('../dist/cli.js', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-sweep-'));
const trace = join(dir, 'synth.jsonl');
const out = join(dir, 'out');
const POLICIES = ['lmetric', 'load_only', 'sticky', 'unified', 'unified+A+B'];
let outcome: SweepOutcome;

beforeAll(async () => {
  const synth = spawnSync(process.execPath, [cli, 'trace', 'synth', '-o', trace], { encoding: 'utf8' });
  expect(synth.status, synth.stderr).toBe(0);
  outcome = await runSweep({
    trace,
    reader: {},
    policies: POLICIES,
    engineStates: ['shadow', 'shm'],
    out,
    force: false,
    mode: 'sim',
    instances: 8,
    preset: 'h20-qwen3-coder-30b-a3b',
    command: ['sweep', '--trace', trace, '--out', out],
  });
}, 90_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const json = <T>(path: string): T => JSON.parse(readFileSync(join(out, path), 'utf8')) as T;

describe('sweep layout', () => {
  it('names every cell file in sweep.json, and every file exists', () => {
    const manifest = json<SweepManifest>('sweep.json');
    expect(manifest.cells.map((c) => c.id)).toEqual(POLICIES.flatMap((p) => [cellId(p, 'shadow'), cellId(p, 'shm')]));
    expect(manifest.cells[8]).toMatchObject({
      id: 'unified_A_B-shadow',
      policy: 'unified+A+B',
      engine_state: 'shadow',
      mode: 'sim',
      records: 'cells/unified_A_B-shadow/records.msgpack',
      summary: 'cells/unified_A_B-shadow/summary.json',
    });
    for (const file of [manifest.trace_summary, manifest.interference, manifest.tables])
      expect(existsSync(join(out, file))).toBe(true);
    expect(manifest.trace.fingerprint).toMatch(/^sha256:[0-9a-f]{16}:1255$/);
    expect(manifest.command).toEqual(['sweep', '--trace', trace, '--out', out]);
    expect(manifest.preset).toBe('h20-qwen3-coder-30b-a3b');
    expect(manifest.engine_scaling).toEqual({ prefill_cost: 1, decode_cost: 1, kv_capacity: 1 });
    expect(json<TraceSummary>('trace-summary.json').requests).toBe(1255);
    expect(json<unknown[]>('interference.json')).toHaveLength(10);
  });

  it("writes each cell's records with a header, and the summary sim run --json prints", () => {
    for (const cell of outcome.manifest.cells) {
      const file = readRecordFile(join(out, cell.records));
      expect(file.header).toMatchObject({
        source: 'sim',
        policy: cell.policy,
        engine_state: cell.engine_state,
        instances: 8,
        trace: { path: trace, fingerprint: outcome.manifest.trace.fingerprint },
      });
      const summary = json<CellSummary>(cell.summary);
      expect(summary).toMatchObject(runMetrics(file.records));
      expect(summary.makespan_s).toBeGreaterThan(0);
    }
  });

  it('matches kvroute sim run --json for one cell, plus the slow requests by cause', () => {
    const run = spawnSync(
      process.execPath,
      [cli, 'sim', 'run', '--trace', trace, '--policy', 'unified+A+B', '--engine-state', 'shm', '--json'],
      { encoding: 'utf8', timeout: 60_000 },
    );
    expect(run.status, run.stderr).toBe(0);
    const { slow, ...metrics } = json<CellSummary>('cells/unified_A_B-shm/summary.json');
    // sim run's learned costs come from the live simulation, and its cost mode is the sweep's
    // (sweep.json `costs`): a cell's summary has neither.
    const {
      learned_costs: _learned,
      costs,
      session_returns: returns,
      ...simRun
    } = JSON.parse(run.stdout) as CellSummary & { learned_costs: unknown; costs: string; session_returns: boolean };
    expect(costs).toBe(json<{ costs: string }>('sweep.json').costs);
    expect(returns).toBe(json<{ session_returns: boolean }>('sweep.json').session_returns);
    expect(metrics).toEqual(simRun);
    const records = join(out, 'cells/unified_A_B-shm/records.msgpack');
    const analyzed = spawnSync(process.execPath, [cli, 'analyze', 'run', records, '--json', '--skip-reuse'], {
      encoding: 'utf8',
      timeout: 60_000,
    });
    expect(analyzed.status, analyzed.stderr).toBe(0);
    expect(slow).toEqual(JSON.parse(analyzed.stdout).slow);
  }, 60_000);
});

describe("the simulator's B3 rows (exact-counter router)", () => {
  const summary = (policy: string, es = 'shadow'): CellSummary => outcome.summaries.get(cellId(policy, es))!;
  const ceiling = (): number => outcome.traceSummary.apc_ceiling.intra_session.token_ratio;

  it('sticky and unified reach 95 % of the intra-session APC ceiling; load_only is 10 pp below it', () => {
    for (const es of ['shadow', 'shm']) {
      expect(summary('sticky', es).apc).toBeGreaterThanOrEqual(0.95 * ceiling());
      expect(summary('unified', es).apc).toBeGreaterThanOrEqual(0.95 * ceiling());
      expect(summary('load_only', es).apc).toBeLessThanOrEqual(0.95 * ceiling() - 0.1);
    }
  });

  it('lmetric moves sessions more than unified; load_only has the worst TTFT p90', () => {
    for (const es of ['shadow', 'shm']) {
      expect(summary('lmetric', es).instances_per_session).toBeGreaterThan(
        summary('unified', es).instances_per_session,
      );
      const worst = Math.max(...POLICIES.map((p) => summary(p, es).ttft_s.p90));
      expect(summary('load_only', es).ttft_s.p90).toBe(worst);
    }
  });

  it('prints the B3 and ES tables with units, and the verdict thresholds', () => {
    const tables = readFileSync(join(out, 'tables.md'), 'utf8');
    expect(tables).toBe(outcome.tables);
    expect(tables).toContain('| TTFT p50/p90/p99 (s) | TPOT p50/p90/p99 (ms) |');
    expect(tables).toContain('| unified_A_B-shm |');
    expect(tables).toContain('HELPS at ≤ −5 %, HURTS at ≥ +5 %, wash between');
    expect(outcome.pairs.map((p) => p.policy)).toEqual(POLICIES);
    const sticky = outcome.pairs.find((p) => p.policy === 'sticky')!.comparison;
    expect(sticky.instances_per_session_a).toBe(1);
    expect(sticky.instances_per_session_b).toBe(1);
  });
});
