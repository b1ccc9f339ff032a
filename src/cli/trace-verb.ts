/** `kvroute trace synth | transform | validate` (declared in trace-command.ts). */
import { parseTenantSpec } from '../trace/tenant-spec.js';
import { formatTotal } from '../analysis/format-units.js';
import { readTrace } from '../trace/read-trace.js';
import { synthesizeTrace, type SynthOptions, type SynthProgress } from '../trace/synth.js';
import { ARRIVAL_PROCESSES } from '../trace/synth-arrivals.js';
import { transformTrace, type TransformOptions } from '../trace/transforms.js';
import { TRACE_FORMATS } from '../trace/types.js';
import { writeTrace } from '../trace/write-trace.js';
import { choiceFlag, integerFlag, numberFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { withProgress } from './progress.js';
import { checkInputFile, TRACE_FILE } from './input-file.js';
import { readerOptions, reportWarnings } from './trace-input.js';
import { readerProgress, synthProgress } from './work-progress.js';

export async function synthVerb(values: OptionValues): Promise<void> {
  const options: SynthOptions = {};
  const set = <K extends keyof SynthOptions>(key: K, value: SynthOptions[K] | undefined): void => {
    if (value !== undefined) options[key] = value;
  };
  set('sessions', integerFlag(values, 'sessions', 1));
  set('duration', numberFlag(values, 'duration'));
  set('arrivals', choiceFlag(values, 'arrivals', ARRIVAL_PROCESSES));
  set('burstOn', numberFlag(values, 'burst-on'));
  set('burstOff', numberFlag(values, 'burst-off', true));
  for (const flag of ['burst-on', 'burst-off'])
    if (values[flag] !== undefined && options.arrivals !== 'on-off')
      throw new UsageError(`--${flag} applies only to --arrivals on-off`);
  set('seed', integerFlag(values, 'seed', 0));
  set('blockSize', integerFlag(values, 'block-size', 1));
  set('scale', numberFlag(values, 'scale'));
  set('systemPrefixTokens', integerFlag(values, 'system-prefix', 0));
  const format = choiceFlag(values, 'to', TRACE_FORMATS) ?? 'session';
  const output = stringFlag(values, 'output');
  const counter: SynthProgress = { requests: 0, totalRequests: undefined };
  const trace = synthesizeWithFlagNames(options, counter);
  const { requests } = await withProgress(synthProgress(counter, output ?? '-'), () =>
    writeTrace(trace, output ?? '-', format),
  );
  if (output !== undefined)
    process.stderr.write(`kvroute trace synth: wrote ${formatTotal(requests, 'requests')} to ${output}\n`);
}

/** The generator's option names, as the flags that set them. */
const SYNTH_FLAGS: Record<string, string> = {
  sessions: '--sessions',
  duration: '--duration',
  arrivals: '--arrivals',
  burstOn: '--burst-on',
  burstOff: '--burst-off',
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

export async function transformVerb(values: OptionValues, [input]: string[]): Promise<void> {
  const transform: TransformOptions = {};
  const set = (key: Exclude<keyof TransformOptions, 'tenants'>, value: number | undefined): void => {
    if (value !== undefined) transform[key] = value;
  };
  set('window', numberFlag(values, 'window'));
  set('windowStart', numberFlag(values, 'window-start', true));
  set('sampleSessions', numberFlag(values, 'sample-sessions'));
  set('seed', integerFlag(values, 'seed', 0));
  set('capTurns', integerFlag(values, 'cap-turns', 1));
  set('timeScale', numberFlag(values, 'time-scale'));
  set('blockSize', integerFlag(values, 'reblock', 1));
  const tenants = stringFlag(values, 'tenants');
  if (tenants !== undefined) {
    try {
      transform.tenants = parseTenantSpec(tenants);
    } catch (error) {
      throw new UsageError(`--${(error as Error).message}`);
    }
  }
  if (transform.sampleSessions !== undefined && transform.sampleSessions > 1)
    throw new UsageError(`--sample-sessions must be a fraction in (0, 1], got ${values['sample-sessions']}`);
  const reader = readTrace(input!, readerOptions(values));
  const to = choiceFlag(values, 'to', TRACE_FORMATS);
  // The output format defaults to the input's, known once the first line is read.
  const requests = transformTrace(reader, transform);
  const first = await requests.next();
  const format = to ?? reader.stats.format ?? 'session';
  async function* all() {
    if (!first.done) yield first.value;
    yield* requests;
  }
  const output = stringFlag(values, 'output');
  const { requests: written } = await withProgress(readerProgress('trace transform', reader, output ?? '-'), () =>
    writeTrace(all(), output ?? '-', format),
  );
  reportWarnings('trace transform', reader.stats);
  process.stderr.write(
    `kvroute trace transform: read ${formatTotal(reader.stats.requests, 'requests')}, wrote ${formatTotal(written)}${output === undefined ? '' : ` to ${output}`}\n`,
  );
}

export async function validateVerb(values: OptionValues, [input]: string[]): Promise<void> {
  checkInputFile('trace validate', input!, TRACE_FILE);
  const reader = readTrace(input!, readerOptions(values));
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
