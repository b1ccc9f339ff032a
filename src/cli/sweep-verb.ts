/** `kvroute sweep` (declared in sweep-command.ts): flags to SweepOptions, the run, its tables. */
import { formatDuration } from '../analysis/format-units.js';
import { parsePolicyArg } from '../core/policy-arg.js';
import { POLICY_NAMES } from '../core/policy-spec.js';
import { ENGINE_PRESETS, isUnscaled } from '../sim/engine-preset.js';
import { choiceFlag, integerFlag, numberFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { checkInputFile, TRACE_FILE, withTraceOperand } from './input-file.js';
import { engineScalingFlags } from './engine-options.js';
import { fleetFlags } from './fleet-options.js';
import { flowFlags } from './flow-flags.js';
import { COST_MODES } from '../core/cost-learning/cost-mode.js';
import { SWEEP_DEFAULTS } from './defaults/sweep-defaults.js';
import { ENGINE_STATES, type CellMode, type EngineStateName } from './sweep-layout.js';
import type { LiveOptions } from './sweep-live.js';
import { runSweep, type SweepOptions } from './sweep-run.js';
import { readerOptions, reportWarnings } from './trace-input.js';
import { counted } from './counted.js';

/**
 * A comma-separated list: each item in `known` (or accepted by `check`, which throws on a bad
 * one), no repeats, at least one.
 */
export function listFlag<T extends string>(
  values: OptionValues,
  name: string,
  known: readonly T[],
  fallback: string,
  check?: (item: string) => void,
): T[] {
  const raw = stringFlag(values, name) ?? fallback;
  const items = raw
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0) throw new UsageError(`--${name} is empty; give one or more of ${known.join(', ')}`);
  for (const item of items) {
    if (check !== undefined) check(item);
    else if (!known.includes(item as T)) throw new UsageError(`--${name}: unknown ${item}; known: ${known.join(', ')}`);
  }
  const repeated = items.find((item, i) => items.indexOf(item) !== i);
  if (repeated !== undefined) throw new UsageError(`--${name}: ${repeated} is listed twice`);
  return items as T[];
}

export function sweepOptions(values: OptionValues): SweepOptions {
  const trace = stringFlag(values, 'trace');
  if (trace === undefined) throw new UsageError('sweep needs a trace: sweep IN, or --trace IN');
  if (trace === '-') throw new UsageError('sweep reads the trace once per cell: --trace must be a file, not stdin');
  checkInputFile('sweep', trace, TRACE_FILE);
  const out = stringFlag(values, 'out');
  if (out === undefined) throw new UsageError('sweep needs --out DIR');
  const backends = stringFlag(values, 'backends');
  if (values.live === true && backends !== undefined) throw new UsageError('--live and --backends exclude each other');
  const mode: CellMode = values.live === true ? 'live' : backends !== undefined ? 'backends' : 'sim';
  const d = SWEEP_DEFAULTS;
  const { instances, fleet } = fleetFlags(values, mode === 'live' ? d.liveInstances : d.instances);
  const options: SweepOptions = {
    trace,
    reader: readerOptions(values),
    // NAME or NAME:KEY=VALUE… (a tuned setting), each checked before any cell runs.
    policies: listFlag(values, 'policies', POLICY_NAMES, d.policies, (item) => parsePolicyArg(item, '--policies item')),
    engineStates: listFlag<EngineStateName>(values, 'engine-state', ENGINE_STATES, d.engineStates),
    out,
    force: values.force === true,
    mode,
    instances,
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? d.preset,
    scaling: engineScalingFlags(values),
    ...(fleet === undefined ? {} : { fleet }),
    costs: choiceFlag(values, 'costs', COST_MODES) ?? d.costs,
    sessionReturns: values['no-session-returns'] !== false,
    command: process.argv.slice(2),
  };
  if (mode === 'backends' && fleet !== undefined)
    throw new UsageError('--fleet applies to simulated engines, not --backends: give --instances');
  if (mode === 'backends' && !isUnscaled(options.scaling))
    throw new UsageError('--prefill-cost, --decode-cost and --kv-capacity apply to simulated engines, not --backends');
  const flow = flowFlags(values);
  if (flow !== undefined) {
    // A live proxy's flow control is `kvroute serve`'s own (--max-in-flight, --flow there).
    if (mode !== 'sim')
      throw new UsageError(
        '--max-in-flight, --flow and --queue-timeout apply to simulated cells, not --live or --backends',
      );
    options.flow = flow;
  }
  const workers = integerFlag(values, 'workers', 1);
  if (workers !== undefined) options.workers = workers;
  if (mode !== 'sim') options.live = liveOptions(values, mode, instances, backends);
  else if (values.hot === true || values.speed !== undefined)
    throw new UsageError('--hot and --speed apply to --live only');
  return options;
}

function liveOptions(
  values: OptionValues,
  mode: 'live' | 'backends',
  instances: number,
  backends?: string,
): LiveOptions {
  const live: LiveOptions = { mode, instances, hot: values.hot === true };
  const speed = numberFlag(values, 'speed');
  if (speed !== undefined) live.speed = speed;
  if (backends !== undefined) {
    const urls = backends.split(',').map((url) => url.trim());
    for (const url of urls)
      if (!/^https?:\/\/[^\s/]+/.test(url))
        throw new UsageError(`--backends: ${JSON.stringify(url)} is not an http(s) URL`);
    live.backends = urls;
  }
  return live;
}

export async function sweepVerb(given: OptionValues, operands: string[] = []): Promise<void> {
  const values = withTraceOperand('sweep', given, operands);
  const options = sweepOptions(values);
  const started = performance.now();
  let done = 0;
  const cells = options.policies.length * options.engineStates.length;
  options.onCell = (cell, wall) =>
    process.stderr.write(`kvroute sweep: ${++done}/${cells} ${cell.id} (${formatDuration(wall)})\n`);
  const outcome = await stoppedCleanlyOnSignal(options, () => `${done} of ${cells}`);
  reportWarnings('sweep', outcome.readStats);
  if (values.json === true) {
    const summaries = Object.fromEntries(outcome.summaries);
    process.stdout.write(`${JSON.stringify({ sweep: outcome.manifest, summaries, es_ablation: outcome.pairs })}\n`);
  } else process.stdout.write(outcome.tables);
  process.stderr.write(
    `kvroute sweep: wrote ${options.out}/sweep.json (${counted(cells, 'cell')}, ${formatDuration((performance.now() - started) / 1000)} wall)\n`,
  );
}

/**
 * A sweep that SIGINT or SIGTERM stops visibly: a live sweep's children (fleet, proxy, replay)
 * are stopped first; then the sweep says how many cells finished and how to start over, and exits
 * 130 or 143 without writing sweep.json (whose absence marks the directory as interrupted).
 */
async function stoppedCleanlyOnSignal(
  options: SweepOptions,
  finished: () => string,
): Promise<Awaited<ReturnType<typeof runSweep>>> {
  const stopChildren = options.mode === 'sim' ? undefined : (await import('./sweep-live.js')).stopAllChildren;
  const onSignal = (signal: NodeJS.Signals): void => {
    if (stopChildren !== undefined) process.stderr.write(`kvroute sweep: ${signal}: stopping the cell's processes\n`);
    void (stopChildren?.() ?? Promise.resolve()).then(() => {
      process.stderr.write(
        `kvroute sweep: interrupted by ${signal} after ${finished()} cells; ${options.out} holds a partial sweep (no sweep.json): run again with --force to start over, or remove it\n`,
      );
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    return await runSweep(options);
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
