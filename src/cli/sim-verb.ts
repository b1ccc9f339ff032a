/** `kvroute sim run`: replay a trace through the router and simulated engines in virtual time. */
import { parseArgs } from 'node:util';

import { formatCount, formatDuration } from '../analysis/format-units.js';
import { runMetrics } from '../analysis/run-metrics.js';
import { POLICY_NAMES } from '../core/policy-spec.js';
import type { PolicyName } from '../core/types.js';
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { interferenceTable } from '../sim/interference-bench.js';
import { simulateStream, type SimulationOptions } from '../sim/simulator.js';
import { readTrace } from '../trace/read-trace.js';
import { writeRecords } from '../trace/record-file.js';
import { choiceFlag, integerFlag, numberFlag, UsageError } from './common.js';
import { withProgress } from './progress.js';
import { SIM_SERVE_USAGE, simServeVerb } from './sim-serve-verb.js';
import { renderInterference, renderMetrics } from './sim-tables.js';
import { readerOptions, reportWarnings, TRACE_INPUT_OPTIONS } from './trace-input.js';
import { readerProgress } from './work-progress.js';

export const SIM_USAGE = `  sim run --trace IN  replay a trace in virtual time through the router and N engine models
                    --policy P        ${POLICY_NAMES.join(', ')} (default unified)
                    --instances N     engines (default 8)
                    --engine-state shadow|shm   router sees its shadow counters only, or the
                                      engines' true state every 50 ms (default shadow)
                    --rate R [--seed K]   open-loop Poisson at R requests/s instead of
                                      session-sequential dispatch
                    --records OUT     write per-request records (MessagePack)
                    --json            print the metrics as JSON
  sim interference    the seeds' B2 microbench on two engine models: TTFT and TPOT indices of a
                      steady decode load when large prefills land on the same or another engine
                    --json            print the cells as JSON
${SIM_SERVE_USAGE}`;

export async function simVerb(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === 'interference') return interferenceVerb(rest);
  if (sub === 'serve') return simServeVerb(rest);
  if (sub !== 'run')
    throw new UsageError(
      `sim needs a sub-command: run, serve or interference${sub === undefined ? '' : `, got ${sub}`}`,
    );
  const { values } = parseArgs({
    args: rest,
    allowPositionals: false,
    options: {
      ...TRACE_INPUT_OPTIONS,
      trace: { type: 'string' },
      policy: { type: 'string' },
      instances: { type: 'string' },
      'engine-state': { type: 'string' },
      preset: { type: 'string' },
      rate: { type: 'string' },
      seed: { type: 'string' },
      records: { type: 'string' },
      json: { type: 'boolean' },
    },
  });
  if (values.trace === undefined) throw new UsageError('sim run needs --trace FILE');
  const options: SimulationOptions = {
    policy: choiceFlag(values, 'policy', POLICY_NAMES) ?? ('unified' as PolicyName),
    instances: integerFlag(values, 'instances', 1) ?? 8,
    engineState: choiceFlag(values, 'engine-state', ['shadow', 'shm'] as const) ?? 'shadow',
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? 'h20-qwen3-coder-30b-a3b',
  };
  const rate = numberFlag(values, 'rate');
  if (rate !== undefined) options.dispatch = { mode: 'poisson', rate, seed: integerFlag(values, 'seed', 0) ?? 1 };
  const started = performance.now();
  const reader = readTrace(values.trace, readerOptions(values));
  const result = await withProgress(readerProgress('sim run', reader), () => simulateStream(reader, options));
  reportWarnings('sim run', reader.stats);
  const metrics = runMetrics(result.records);
  if (values.records !== undefined) writeRecords(values.records, result.records);
  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({ ...metrics, makespan_s: result.makespan, preemptions: result.preemptions, evictions: result.evictions })}\n`,
    );
    return;
  }
  process.stdout.write(`${renderMetrics(options, metrics, result.makespan)}\n`);
  process.stderr.write(
    `(${formatDuration((performance.now() - started) / 1000)} wall, ${formatCount(result.steps)} engine steps)\n`,
  );
}

function interferenceVerb(args: string[]): void {
  const { values } = parseArgs({ args, allowPositionals: false, options: { json: { type: 'boolean' } } });
  const cells = interferenceTable(ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(cells)}\n`);
    return;
  }
  process.stdout.write(`${renderInterference(cells)}\n`);
}
