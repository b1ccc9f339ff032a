/**
 * `kvroute sim run` (replay a trace through the router and simulated engines in virtual time) and
 * `kvroute sim interference`, declared in sim-command.ts.
 */
import { runMetrics, type RunMetrics } from '../analysis/run-metrics.js';
import { POLICY_NAMES } from '../core/policy-spec.js';
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { interferenceTable } from '../sim/interference-bench.js';
import { simulateStream, type SimulationOptions } from '../sim/simulator.js';
import { readTrace } from '../trace/read-trace.js';
import { writeRecords } from '../trace/record-file.js';
import { choiceFlag, integerFlag, numberFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { SIM_RUN_DEFAULTS } from './sim-command.js';
import { readerOptions, reportWarnings } from './trace-input.js';

export async function simRunVerb(values: OptionValues): Promise<void> {
  const trace = stringFlag(values, 'trace');
  if (trace === undefined) throw new UsageError('sim run needs --trace FILE');
  const d = SIM_RUN_DEFAULTS;
  const options: SimulationOptions = {
    policy: choiceFlag(values, 'policy', POLICY_NAMES) ?? d.policy,
    instances: integerFlag(values, 'instances', 1) ?? d.instances,
    engineState: choiceFlag(values, 'engine-state', ['shadow', 'shm'] as const) ?? d.engineState,
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? d.preset,
  };
  const rate = numberFlag(values, 'rate');
  if (rate !== undefined) options.dispatch = { mode: 'poisson', rate, seed: integerFlag(values, 'seed', 0) ?? d.seed };
  const started = performance.now();
  const reader = readTrace(trace, readerOptions(values));
  const result = await simulateStream(reader, options);
  reportWarnings('sim run', reader.stats);
  const metrics = runMetrics(result.records);
  const records = stringFlag(values, 'records');
  if (records !== undefined) writeRecords(records, result.records);
  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({ ...metrics, makespan_s: result.makespan, preemptions: result.preemptions, evictions: result.evictions })}\n`,
    );
    return;
  }
  process.stdout.write(`${renderMetrics(options, metrics, result.makespan)}\n`);
  process.stderr.write(`(${((performance.now() - started) / 1000).toFixed(1)} s wall, ${result.steps} engine steps)\n`);
}

export function interferenceVerb(values: OptionValues): void {
  const cells = interferenceTable(ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(cells)}\n`);
    return;
  }
  const index = (value: number | null): string => (value === null ? '-' : value.toFixed(2)).padStart(9);
  const lines = ['variant     prefill  overlap  clean  TPOT idx  TTFT idx'];
  for (const c of cells)
    lines.push(
      `${c.variant.padEnd(10)}${String(c.prefill_tokens).padStart(8)}${String(c.n_overlap).padStart(9)}${String(c.n_clean).padStart(7)}${index(c.tpot_index)}${index(c.ttft_index)}`,
    );
  process.stdout.write(`${lines.join('\n')}\n`);
}

function renderMetrics(options: SimulationOptions, m: RunMetrics, makespan: number): string {
  const q = (x: { p50: number; p90: number; p99: number }, digits: number): string =>
    [x.p50, x.p90, x.p99].map((v) => v.toFixed(digits).padStart(9)).join('');
  const policy = typeof options.policy === 'string' ? options.policy : options.policy.name;
  return [
    `${policy} · ${options.instances} instances · engine state ${options.engineState} · ${m.requests} requests · ${makespan.toFixed(0)} s simulated`,
    '                  p50      p90      p99',
    `  TTFT s    ${q(m.ttft_s, 2)}`,
    `  TPOT ms   ${q(m.tpot_ms, 1)}`,
    `  E2E s     ${q(m.e2e_s, 2)}`,
    `APC ${(m.apc * 100).toFixed(1)}% · interference ${m.interference_index?.toFixed(2) ?? '-'} · hotspot ${m.hotspot_index?.toFixed(2) ?? '-'} · instances per session ${m.instances_per_session.toFixed(2)} · preempted requests ${m.preempted_requests}`,
  ].join('\n');
}
