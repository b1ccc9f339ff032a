/**
 * `kvroute replay`, declared in replay-command.ts: flags → ReplayOptions, the progress display,
 * Ctrl-C/SIGTERM → a graceful stop, and the summary (docs/replay.md).
 *
 * Progress: replay-progress.ts.
 */
import { formatCount, formatDuration } from '../analysis/format-units.js';
import { percentileOfSorted } from '../analysis/percentiles.js';
import { findSrr, parseSlo, type SrrResult, type Trial } from '../replay/find-srr.js';
import { loadTrace, replay, type ReplayOptions, type ReplayResult } from '../replay/replay.js';
import { ReplayError } from '../replay/target-check.js';
import {
  choiceFlag,
  integerFlag,
  InterruptedError,
  numberFlag,
  stringFlag,
  untilStopped,
  UsageError,
  type OptionValues,
} from './common.js';
import { counted } from './counted.js';
import { checkInputFile, TRACE_FILE, withTraceOperand } from './input-file.js';
import type { Progress } from './progress.js';
import { replayProgress } from './replay-progress.js';
import { REPLAY_CLI_DEFAULTS } from './defaults/replay-defaults.js';
import { readerOptions, reportWarnings } from './trace-input.js';

function list(value: string | undefined): string[] | undefined {
  return value
    ?.split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
}

/** The options every run shares (trace, target, bounds), from the flags. */
function baseOptions(values: OptionValues, signal: AbortSignal): ReplayOptions {
  const trace = stringFlag(values, 'trace');
  if (trace === undefined) throw new UsageError('replay needs a trace: replay IN, or --trace IN');
  const target = stringFlag(values, 'target');
  if (target === undefined) throw new UsageError('replay needs --target URL (e.g. http://127.0.0.1:8000)');
  const d = REPLAY_CLI_DEFAULTS;
  const options: ReplayOptions = {
    trace,
    target,
    readerOptions: readerOptions(values),
    speed: numberFlag(values, 'speed') ?? d.speed,
    grace: numberFlag(values, 'grace', true) ?? d.grace,
    connections: integerFlag(values, 'connections', 1) ?? d.connections,
    maxConnectionFailures: integerFlag(values, 'max-connection-failures', 1) ?? d.maxConnectionFailures,
    // commander's negatable flag: true unless --no-ignore-eos was given.
    ignoreEos: values['no-ignore-eos'] !== false,
    sendHashIds: values['no-hash-ids'] !== false,
    signal,
  };
  const maxRequests = integerFlag(values, 'max-requests', 1);
  if (maxRequests !== undefined) options.maxRequests = maxRequests;
  const duration = numberFlag(values, 'duration');
  if (duration !== undefined) options.duration = duration;
  const model = stringFlag(values, 'model');
  if (model !== undefined) options.model = model;
  const engines = list(stringFlag(values, 'engine-state'));
  if (engines !== undefined) options.engineState = engines;
  const records = stringFlag(values, 'records');
  if (records !== undefined) options.records = records;
  return options;
}

export async function replayVerb(given: OptionValues, operands: string[] = []): Promise<void> {
  const values = withTraceOperand('replay', given, operands);
  const stopper = new AbortController();
  let stoppedBy: NodeJS.Signals | undefined;
  const stopped = untilStopped(stopper.signal).then((signal) => {
    stoppedBy = signal;
    if (!stopper.signal.aborted) {
      process.stderr.write('kvroute replay: stopping: no new requests; waiting for those in flight\n');
      stopper.abort();
    }
  });
  try {
    const options = baseOptions(values, stopper.signal);
    if (values['find-srr'] === true) await srrRun(values, options);
    else await singleRun(values, options);
  } catch (error) {
    if (error instanceof InterruptedError && stoppedBy !== undefined)
      throw new InterruptedError(error.message, stoppedBy);
    throw error;
  } finally {
    stopper.abort(); // releases untilStopped's listeners
    await stopped;
  }
}

async function singleRun(values: OptionValues, options: ReplayOptions): Promise<void> {
  const d = REPLAY_CLI_DEFAULTS;
  const mode = choiceFlag(values, 'mode', ['session', 'poisson'] as const) ?? d.mode;
  if (mode === 'poisson') {
    const rate = numberFlag(values, 'rate');
    if (rate === undefined) throw new UsageError('--mode poisson needs --rate R (requests per second)');
    options.dispatch = { mode, rate, seed: integerFlag(values, 'seed', 0) ?? d.seed };
  } else if (stringFlag(values, 'rate') !== undefined) throw new UsageError('--rate needs --mode poisson');
  checkInputFile('replay', options.trace, TRACE_FILE);
  let progress: Progress | undefined;
  options.onStart = (tally, total) => (progress = replayProgress('replay', tally, total));
  let result: ReplayResult;
  try {
    result = await replay(options);
  } finally {
    progress?.stop();
  }
  if (result.traceStats !== undefined) reportWarnings('replay', result.traceStats);
  summarize(values, options, result);
}

function summarize(values: OptionValues, options: ReplayOptions, result: ReplayResult): void {
  const ttft = Float64Array.from(result.ttft).sort();
  const p = (q: number): number => percentileOfSorted(ttft, q * 100);
  const summary = {
    sent: result.sent,
    done: result.done,
    errors: result.errors,
    aborted: result.aborted,
    stopped_by: result.stoppedBy,
    interrupted: result.stoppedBy === 'signal',
    elapsed_s: result.elapsed,
    rate_rps: result.elapsed > 0 ? result.done / result.elapsed : 0,
    ttft_p50_s: p(0.5),
    ttft_p90_s: p(0.9),
    cached_fraction: result.inputTokens > 0 ? result.cachedTokens / result.inputTokens : 0,
    model: result.model,
    instances: result.instances,
    ...(options.records === undefined ? {} : { records: options.records }),
  };
  if (values.json === true) process.stdout.write(`${JSON.stringify(summary)}\n`);
  else {
    const lines = [
      `${result.stoppedBy === 'signal' ? 'INTERRUPTED: ' : ''}replayed ${counted(result.sent, 'request')} to ${options.target} (${result.model}) in ${formatDuration(result.elapsed)}: ${result.done - result.errors} ok, ${result.errors} failed${result.aborted > 0 ? ` (${result.aborted} aborted)` : ''}`,
      `TTFT p50 ${formatDuration(summary.ttft_p50_s)}, p90 ${formatDuration(summary.ttft_p90_s)}; ${summary.rate_rps.toFixed(2)} req/s; cached ${(summary.cached_fraction * 100).toFixed(1)}% of ${formatCount(result.inputTokens)} prompt tokens`,
    ];
    if (result.instances.length > 0)
      lines.push(`instances: ${result.instances.map((id, i) => `${i}=${id}`).join(' ')}`);
    if (options.records !== undefined) lines.push(`records: ${options.records}`);
    if (result.lastError !== undefined) lines.push(`last error: ${result.lastError}`);
    process.stdout.write(`${lines.join('\n')}\n`);
  }
  if (result.stoppedBy === 'target-down')
    throw new ReplayError(
      `stopped: ${options.maxConnectionFailures ?? REPLAY_CLI_DEFAULTS.maxConnectionFailures} requests in a row got no response from ${options.target} (last: ${result.lastError ?? 'unknown'}); ${result.done} records${options.records === undefined ? '' : ` in ${options.records}`}`,
    );
  if (result.stoppedBy === 'signal')
    throw new InterruptedError(
      `interrupted: stopped sending after ${counted(result.sent, 'request')}; ${counted(result.done, 'record')}${options.records === undefined ? '' : ` in ${options.records}`} hold only what completed before the signal`,
    );
}

async function srrRun(values: OptionValues, options: ReplayOptions): Promise<void> {
  const d = REPLAY_CLI_DEFAULTS;
  let slo;
  try {
    slo = parseSlo(stringFlag(values, 'slo') ?? d.slo);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const trialRequests = integerFlag(values, 'trial-requests', 1) ?? d.trialRequests;
  const loaded = await loadTrace(options.trace, options.readerOptions, options.maxRequests ?? trialRequests);
  reportWarnings('replay', loaded.stats);
  const { records, ...rest } = options;
  const onTrial = (trial: Trial): void => {
    const measured = Object.entries(trial.measured)
      .map(([k, v]) => `${k} ${v.toFixed(3)} s`)
      .join(', ');
    process.stderr.write(
      `kvroute replay: trial ${trial.n}: ${trial.rate.toPrecision(4)} req/s ${trial.pass ? 'pass' : 'FAIL'} (${measured}; ${trial.errors}/${trial.sent} errors)\n`,
    );
  };
  checkInputFile('replay', options.trace, TRACE_FILE);
  const result: SrrResult = await findSrr({
    replay: { ...rest, requests: loaded.requests, fingerprint: loaded.fingerprint },
    ...(records === undefined ? {} : { records }),
    slo,
    startRate: numberFlag(values, 'rate') ?? 1,
    seed: integerFlag(values, 'seed', 0) ?? d.seed,
    maxTrials: integerFlag(values, 'max-trials', 1) ?? d.maxTrials,
    trialRequests,
    warm: values['warm-trials'] === true,
    onTrial,
  });
  const fmt = (x: number | undefined): string => (x === undefined ? '-' : x.toPrecision(4));
  if (values.json === true) process.stdout.write(`${JSON.stringify(result)}\n`);
  else
    process.stdout.write(
      `sustainable request rate: ${fmt(result.rate)} req/s (bracket [${fmt(result.bracket[0])}, ${fmt(result.bracket[1])}], ${result.trials.length} trials, ${result.stoppedBy})\n`,
    );
  if (result.stoppedBy === 'target-down')
    throw new ReplayError(`stopped: the target ${options.target} stopped answering`);
  if (result.stoppedBy === 'signal')
    throw new InterruptedError(
      `interrupted after ${counted(result.trials.length, 'trial')}: the rate above is a partial search, not a result`,
    );
}
