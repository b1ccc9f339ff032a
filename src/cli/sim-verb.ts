/**
 * `kvroute sim run` (replay a trace through the router and simulated engines in virtual time) and
 * `kvroute sim interference`, declared in sim-command.ts.
 */
import { formatCount, formatDuration } from '../analysis/format-units.js';
import { offloadMetrics } from '../analysis/offload-metrics.js';
import { predictionAccuracy } from '../analysis/prediction-accuracy.js';
import { runMetrics } from '../analysis/run-metrics.js';
import { flowMetrics } from '../analysis/flow-metrics.js';
import { flowFlags } from './flow-flags.js';
import { formatPolicyArg } from '../core/policy-arg.js';
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { CACHE_STATES } from '../sim/event-fed-cache.js';
import { interferenceTable } from '../sim/interference-bench.js';
import { simulateStream, type SimulationOptions } from '../sim/simulator.js';
import { COST_MODES } from '../core/cost-learning/cost-mode.js';
import { readTrace } from '../trace/read-trace.js';
import { writeRecords } from '../trace/record-file.js';
import { fingerprinted, TraceFingerprint } from '../trace/trace-fingerprint.js';
import {
  choiceFlag,
  integerFlag,
  numberFlag,
  policyFlag,
  stringFlag,
  UsageError,
  type OptionValues,
} from './common.js';
import { engineScalingFlags, scalingRecord } from './engine-options.js';
import { fleetFields, fleetFlags } from './fleet-options.js';
import { fleetGroupMetrics, renderFleetGroups } from './fleet-groups.js';
import { learnedCostFields, renderLearnedCosts } from './learned-costs.js';
import { replicaFlags } from './replica-options.js';
import { withProgress } from './progress.js';
import { runHeader } from '../trace/run-header.js';
import { SIM_RUN_DEFAULTS } from './defaults/sim-defaults.js';
import { renderFlowMetrics, renderInterference, renderMetrics } from './sim-tables.js';
import { checkInputFile, TRACE_FILE, traceOperand } from './input-file.js';
import { readerOptions, reportWarnings } from './trace-input.js';
import { readerProgress } from './work-progress.js';

export async function simRunVerb(values: OptionValues, operands: string[] = []): Promise<void> {
  const trace = traceOperand('sim run', values, operands);
  if (trace === undefined) throw new UsageError('sim run needs a trace: sim run IN, or --trace IN');
  checkInputFile('sim run', trace, TRACE_FILE);
  const d = SIM_RUN_DEFAULTS;
  const { instances, fleet } = fleetFlags(values, d.instances);
  const options: SimulationOptions = {
    policy: policyFlag(values) ?? d.policy,
    instances,
    ...(fleet === undefined ? {} : { fleet }),
    engineState: choiceFlag(values, 'engine-state', ['shadow', 'shm'] as const) ?? d.engineState,
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? d.preset,
    scaling: engineScalingFlags(values),
  };
  const rate = numberFlag(values, 'rate');
  const seed = integerFlag(values, 'seed', 0) ?? d.seed;
  if (rate !== undefined) options.dispatch = { mode: 'poisson', rate, seed };
  const replicas = replicaFlags(values, seed);
  Object.assign(options, replicas.options);
  const cacheState = options.cacheState ?? choiceFlag(values, 'cache-state', CACHE_STATES) ?? d.cacheState;
  // Only `events` is written out: a run without the flag prints what it always printed.
  const cacheFields = cacheState === 'events' ? { cache_state: cacheState } : {};
  if (cacheState === 'events') options.cacheState = cacheState;
  options.costs = choiceFlag(values, 'costs', COST_MODES) ?? d.costs;
  options.sessionReturns = values['no-session-returns'] !== false;
  const returnsFields = { session_returns: options.sessionReturns };
  const flowGiven = flowFlags(values);
  if (flowGiven !== undefined) options.flow = flowGiven.options;
  const flowFields = flowGiven === undefined ? {} : { flow: flowGiven.fields };
  const started = performance.now();
  const startedAt = new Date();
  const reader = readTrace(trace, readerOptions(values));
  const fingerprint = new TraceFingerprint();
  const result = await withProgress(readerProgress('sim run', reader), () =>
    simulateStream(fingerprinted(reader, fingerprint), options),
  );
  reportWarnings('sim run', reader.stats);
  const metrics = runMetrics(result.records);
  const offload = offloadMetrics(result.records);
  const engine = {
    preset: options.preset!,
    engine_scaling: scalingRecord(options.scaling!),
    capacity_blocks: result.capacityBlocks,
    ...fleetFields(fleet, result.engineCapacityBlocks),
  };
  const records = stringFlag(values, 'records');
  if (records !== undefined) {
    const header = runHeader(
      {
        source: 'sim',
        trace: { path: trace, fingerprint: fingerprint.digest() },
        policy: formatPolicyArg(options.policy),
        engine_state: options.engineState ?? 'shadow',
        instances: options.instances,
        mode: options.dispatch?.mode ?? 'session',
        ...(rate === undefined ? {} : { rate }),
        ...replicas.fields,
        ...cacheFields,
        costs: options.costs,
        ...returnsFields,
        ...flowFields,
        ...engine,
      },
      startedAt,
    );
    writeRecords(records, result.records, header);
  }
  const groups = fleetGroupMetrics(fleet, result.records);
  const groupFields = groups.length === 0 ? {} : { fleet_groups: groups };
  const learnedCosts = learnedCostFields(result.learnedCosts, fleet);
  const flow = flowMetrics(result.records);
  if (values.json) {
    process.stdout.write(
      `${JSON.stringify({ ...metrics, makespan_s: result.makespan, preemptions: result.preemptions, evictions: result.evictions, ...offload, ...engine, ...groupFields, ...replicas.fields, ...cacheFields, costs: options.costs, ...returnsFields, ...flowFields, prediction: predictionAccuracy(result.records), learned_costs: learnedCosts, ...(flow === undefined ? {} : { flow_metrics: flow }) })}\n`,
    );
    return;
  }
  process.stdout.write(`${renderMetrics(options, metrics, result.makespan, offload)}\n`);
  if (flow !== undefined) process.stdout.write(`${renderFlowMetrics(flow).join('\n')}\n`);
  if (groups.length > 0) process.stdout.write(`by group:\n${renderFleetGroups(groups).join('\n')}\n`);
  if (learnedCosts.length > 0)
    process.stdout.write(
      `learned costs (prefill tokens/s, learned vs true; error of the cost per token):\n${renderLearnedCosts(learnedCosts).join('\n')}\n`,
    );
  process.stderr.write(
    `(${formatDuration((performance.now() - started) / 1000)} wall, ${formatCount(result.steps)} engine steps)\n`,
  );
}

export function interferenceVerb(values: OptionValues): void {
  const cells = interferenceTable(ENGINE_PRESETS['h20-qwen3-coder-30b-a3b']!);
  if (values.json) {
    process.stdout.write(`${JSON.stringify(cells)}\n`);
    return;
  }
  process.stdout.write(`${renderInterference(cells)}\n`);
}
