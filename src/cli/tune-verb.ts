/** `kvroute tune` (declared in tune-command.ts): flags to TuneOptions, the search, its report. */
import { accessSync, constants, existsSync, statSync } from 'node:fs';
import { basename, dirname } from 'node:path';

import { formatDuration } from '../analysis/format-units.js';
import { ALL_POLICY_NAMES, POLICY_NAMES_TEXT } from '../core/policy-spec.js';
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { choiceFlag, integerFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { fleetFlags } from './fleet-options.js';
import { flowFlags } from './flow-flags.js';
import { checkInputFile, TRACE_FILE, withTraceOperand } from './input-file.js';
import { startProgress } from './progress.js';
import { ENGINE_STATES, writeAtomically } from './sweep-layout.js';
import { readerOptions, reportWarnings } from './trace-input.js';
import { TUNE_DEFAULTS } from './defaults/tune-defaults.js';
import { AGGREGATES, OBJECTIVE_NAMES, OBJECTIVES } from './tune-objectives.js';
import { parseParams } from './tune-params.js';
import { runTune, type EvaluationNote, type TuneOptions } from './tune-run.js';
import { renderTune } from './tune-tables.js';

/** `--name A,B`: files, at least one, none repeated, none stdin. */
function fileList(values: OptionValues, name: string): string[] {
  const raw = stringFlag(values, name);
  if (raw === undefined) return [];
  const files = raw
    .split(',')
    .map((file) => file.trim())
    .filter((file) => file !== '');
  if (files.length === 0) throw new UsageError(`--${name} is empty; give one or more trace files`);
  if (files.includes('-')) throw new UsageError(`--${name}: tune reads each trace once per point, so not stdin`);
  const repeated = files.find((file, i) => files.indexOf(file) !== i);
  if (repeated !== undefined) throw new UsageError(`--${name}: ${repeated} is listed twice`);
  return files;
}

/** The options from the flags; every refusal is a UsageError naming its flag, made before any simulation. */
export function tuneOptions(values: OptionValues): TuneOptions {
  const d = TUNE_DEFAULTS;
  const traces = fileList(values, 'trace');
  if (traces.length === 0) throw new UsageError('tune needs traces: tune IN[,IN…], or --trace IN[,IN…]');
  for (const trace of traces) checkInputFile('tune', trace, TRACE_FILE);
  const policy = choiceFlag(values, 'policy', ALL_POLICY_NAMES);
  if (policy === undefined) throw new UsageError(`tune needs --policy P; one of ${POLICY_NAMES_TEXT}`);
  const param = stringFlag(values, 'param');
  if (param === undefined) throw new UsageError('tune needs --param NAME=LO:HI[,NAME=LO:HI…]; see kvroute tune --help');
  const samples = integerFlag(values, 'samples', 1) ?? d.samples;
  const refine = integerFlag(values, 'refine', 0) ?? Math.floor(samples / d.refineShare);
  if (refine > 0 && samples - refine < 2)
    throw new UsageError(`--refine ${refine} leaves fewer than 2 of --samples ${samples} for the first round`);
  const holdout = fileList(values, 'holdout');
  const shared = holdout.find((file) => traces.includes(file));
  if (shared !== undefined)
    throw new UsageError(`--holdout ${shared} is also a --trace; a holdout trace must be unseen`);
  const options: TuneOptions = {
    traces,
    holdout,
    reader: readerOptions(values),
    policy,
    params: parseParams(param, policy),
    samples,
    refine,
    seed: integerFlag(values, 'seed', 0) ?? d.seed,
    objective: choiceFlag(values, 'objective', OBJECTIVE_NAMES) ?? d.objective,
    aggregate: choiceFlag(values, 'aggregate', AGGREGATES) ?? d.aggregate,
    ...fleetFlags(values, d.instances),
    preset: choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? d.preset,
    engineState: choiceFlag(values, 'engine-state', ENGINE_STATES) ?? d.engineState,
    command: process.argv.slice(2),
  };
  const flow = flowFlags(values);
  if (flow !== undefined) options.flow = flow;
  else if (OBJECTIVES[options.objective].needsFlow)
    throw new UsageError(
      `--objective ${options.objective} needs --max-in-flight N: the tenants' figures exist only with flow control`,
    );
  const out = stringFlag(values, 'out');
  if (out !== undefined) checkWritable(out);
  const workers = integerFlag(values, 'workers', 1);
  if (workers !== undefined) options.workers = workers;
  return options;
}

export async function tuneVerb(given: OptionValues, operands: string[] = []): Promise<void> {
  const values = withTraceOperand('tune', given, operands);
  const options = tuneOptions(values);
  const out = stringFlag(values, 'out');
  const counter = { done: 0, planned: 0 };
  options.counter = counter;
  const progress = startProgress({
    label: 'tune',
    unit: 'simulations',
    total: () => counter.planned,
    poll: () => counter.done,
  });
  const { unit } = OBJECTIVES[options.objective];
  if (process.stderr.isTTY !== true)
    options.onEvaluation = ({ done, planned }, note) =>
      process.stderr.write(`kvroute tune: ${done}/${planned} ${evaluationLine(note, options, unit)}\n`);
  let outcome;
  try {
    outcome = await runTune(options);
  } finally {
    progress.stop();
  }
  for (const { stats } of outcome.readStats) reportWarnings('tune', stats);
  const json = `${JSON.stringify(outcome.result)}\n`;
  if (out !== undefined) writeAtomically(out, json);
  process.stdout.write(values.json === true ? json : `${renderTune(outcome.result)}\n`);
  const simulations = outcome.result.search.simulations;
  process.stderr.write(
    `kvroute tune: ${simulations} simulations, ${formatDuration(outcome.result.wall_s)} wall${out === undefined ? '' : `; wrote ${out}`}\n`,
  );
}

/** Refuses, before any simulation, an --out whose directory is missing or not writable. */
function checkWritable(out: string): void {
  try {
    accessSync(dirname(out), constants.W_OK);
  } catch (error) {
    throw new UsageError(`--out ${out} is not writable: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
  if (existsSync(out) && statSync(out).isDirectory()) throw new UsageError(`--out ${out} is a directory`);
}

/** "#3 on seed1.jsonl: ttft_p90 9.863 s (1.2 s)". */
function evaluationLine(note: EvaluationNote, options: TuneOptions, unit: string): string {
  const point = note.point === 'defaults' ? 'defaults' : `#${note.point}`;
  return `${point} on ${basename(note.trace)}: ${options.objective} ${note.value.toFixed(3)} ${unit} (${formatDuration(note.wall_s)})`;
}
