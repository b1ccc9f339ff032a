/** `kvroute trace synth | transform | validate`. */
import { parseArgs } from 'node:util';

import { formatTotal } from '../analysis/format-units.js';
import { readTrace } from '../trace/read-trace.js';
import { synthesizeTrace, type SynthOptions, type SynthProgress } from '../trace/synth.js';
import { transformTrace, type TransformOptions } from '../trace/transforms.js';
import { TRACE_FORMATS } from '../trace/types.js';
import { writeTrace } from '../trace/write-trace.js';
import { choiceFlag, integerFlag, numberFlag, UsageError } from './common.js';
import { withProgress } from './progress.js';
import { readerOptions, reportWarnings, TRACE_INPUT_OPTIONS, TRACE_INPUT_USAGE } from './trace-input.js';
import { readerProgress, synthProgress } from './work-progress.js';

export const TRACE_USAGE = `  trace synth       write a synthetic agentic-coding session trace (calibrated to the seeds' w600)
                    -o, --output FILE  (default stdout; files are written atomically)
                    --sessions N --duration S --seed K --block-size B --scale X
                    --system-prefix TOKENS   --to session|mooncake
  trace transform IN  window, sample, cap, rescale or re-block a trace (IN may be -)
                    -o, --output FILE  --to session|mooncake (default: the input's format)
                    --window S [--window-start T]   keep arrivals in [T, T+S), re-based to 0
                                      (T: the first arrival unless given)
                    --sample-sessions R [--seed K]  keep each session with probability R
                    --cap-turns N     keep each session's first N requests
                    --time-scale F    multiply arrival times by F
                    --reblock B       merge blocks into B-token blocks (a multiple of the input's)
${TRACE_INPUT_USAGE}
  trace validate IN   check every line; print counts and warnings (--json)`;

export async function traceVerb(args: string[]): Promise<void> {
  const [sub, ...rest] = args;
  if (sub === 'synth') return synthVerb(rest);
  if (sub === 'transform') return transformVerb(rest);
  if (sub === 'validate') return validateVerb(rest);
  throw new UsageError(
    `trace needs a sub-command: synth, transform or validate${sub === undefined ? '' : `, got ${sub}`}`,
  );
}

async function synthVerb(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    allowPositionals: false,
    options: {
      output: { type: 'string', short: 'o' },
      sessions: { type: 'string' },
      duration: { type: 'string' },
      seed: { type: 'string' },
      'block-size': { type: 'string' },
      scale: { type: 'string' },
      'system-prefix': { type: 'string' },
      to: { type: 'string' },
    },
  });
  const options: SynthOptions = {};
  const set = <K extends keyof SynthOptions>(key: K, value: SynthOptions[K] | undefined): void => {
    if (value !== undefined) options[key] = value;
  };
  set('sessions', integerFlag(values, 'sessions', 1));
  set('duration', numberFlag(values, 'duration'));
  set('seed', integerFlag(values, 'seed', 0));
  set('blockSize', integerFlag(values, 'block-size', 1));
  set('scale', numberFlag(values, 'scale'));
  set('systemPrefixTokens', integerFlag(values, 'system-prefix', 0));
  const format = choiceFlag(values, 'to', TRACE_FORMATS) ?? 'session';
  const counter: SynthProgress = { requests: 0, totalRequests: undefined };
  const trace = synthesizeWithFlagNames(options, counter);
  const { requests } = await withProgress(synthProgress(counter, values.output ?? '-'), () =>
    writeTrace(trace, values.output ?? '-', format),
  );
  if (values.output !== undefined)
    process.stderr.write(`kvroute trace synth: wrote ${formatTotal(requests, 'requests')} to ${values.output}\n`);
}

/** The generator's option names, as the flags that set them. */
const SYNTH_FLAGS: Record<string, string> = {
  sessions: '--sessions',
  duration: '--duration',
  seed: '--seed',
  blockSize: '--block-size',
  scale: '--scale',
  systemPrefixTokens: '--system-prefix',
};

/** Validates now (the generator is lazy), naming a bad option by its flag. */
function synthesizeWithFlagNames(options: SynthOptions, progress: SynthProgress): ReturnType<typeof synthesizeTrace> {
  try {
    return synthesizeTrace(options, progress);
  } catch (error) {
    const field = /^(\w+) /.exec((error as Error).message)?.[1];
    const flag = field === undefined ? undefined : SYNTH_FLAGS[field];
    if (flag !== undefined) (error as Error).message = (error as Error).message.replace(field!, flag);
    throw error;
  }
}

async function transformVerb(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      ...TRACE_INPUT_OPTIONS,
      output: { type: 'string', short: 'o' },
      to: { type: 'string' },
      window: { type: 'string' },
      'window-start': { type: 'string' },
      'sample-sessions': { type: 'string' },
      seed: { type: 'string' },
      'cap-turns': { type: 'string' },
      'time-scale': { type: 'string' },
      reblock: { type: 'string' },
    },
  });
  const input = onlyInput(positionals, 'transform');
  const transform: TransformOptions = {};
  const set = <K extends keyof TransformOptions>(key: K, value: number | undefined): void => {
    if (value !== undefined) transform[key] = value;
  };
  set('window', numberFlag(values, 'window'));
  set('windowStart', numberFlag(values, 'window-start', true));
  set('sampleSessions', numberFlag(values, 'sample-sessions'));
  set('seed', integerFlag(values, 'seed', 0));
  set('capTurns', integerFlag(values, 'cap-turns', 1));
  set('timeScale', numberFlag(values, 'time-scale'));
  set('blockSize', integerFlag(values, 'reblock', 1));
  if (transform.sampleSessions !== undefined && transform.sampleSessions > 1)
    throw new UsageError(`--sample-sessions must be a fraction in (0, 1], got ${values['sample-sessions']}`);
  const reader = readTrace(input, readerOptions(values));
  const to = choiceFlag(values, 'to', TRACE_FORMATS);
  // The output format defaults to the input's, known once the first line is read.
  const requests = transformTrace(reader, transform);
  const first = await requests.next();
  const format = to ?? reader.stats.format ?? 'session';
  async function* all() {
    if (!first.done) yield first.value;
    yield* requests;
  }
  const { requests: written } = await withProgress(
    readerProgress('trace transform', reader, values.output ?? '-'),
    () => writeTrace(all(), values.output ?? '-', format),
  );
  reportWarnings('trace transform', reader.stats);
  process.stderr.write(
    `kvroute trace transform: read ${formatTotal(reader.stats.requests, 'requests')}, wrote ${formatTotal(written)}${values.output === undefined ? '' : ` to ${values.output}`}\n`,
  );
}

async function validateVerb(args: string[]): Promise<void> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...TRACE_INPUT_OPTIONS, json: { type: 'boolean' } },
  });
  const reader = readTrace(onlyInput(positionals, 'validate'), readerOptions(values));
  await withProgress(readerProgress('trace validate', reader), async () => {
    for await (const _ of reader);
  });
  const { stats } = reader;
  if (values.json) {
    const { firstWarning: _, ...counts } = stats;
    process.stdout.write(`${JSON.stringify(counts)}\n`);
  } else {
    process.stdout.write(
      `${stats.format} trace: ${formatTotal(stats.requests, 'requests')}, ${formatTotal(stats.sessions, 'sessions')}, block size ${stats.blockSize === undefined ? '-' : `${stats.blockSize} tokens`}\n`,
    );
  }
  reportWarnings('trace validate', stats);
}

function onlyInput(positionals: string[], verb: string): string {
  if (positionals.length !== 1) throw new UsageError(`trace ${verb} takes one input file (or -)`);
  return positionals[0]!;
}
