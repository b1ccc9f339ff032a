/**
 * `--find-srr`: the sustainable request rate, the highest Poisson rate whose run meets an SLO.
 *
 * Algorithm: a trial is a poisson replay of the trace's first `trialRequests` requests at one
 * rate. Start at `startRate`; while trials pass, double the rate (while they fail, halve it)
 * until one passes and one fails: the bracket [pass, fail]. Then bisect it until the trials run
 * out or the bracket is within `tolerance` (relative). The rate found is the bracket's low end.
 *
 * A trial passes when at most `maxErrorFraction` of its requests failed, at least one succeeded,
 * and every SLO term holds: `ttft_p90=10` means the 90th percentile of TTFT (first_token −
 * dispatch, successful requests) is at most 10 s; `tpot_pNN` is over (finish − first_token) ÷
 * (output_tokens − 1) of successful requests with two or more output tokens.
 *
 * Caches: trial k replays the same requests with block ids moved to its own id space (saltBlocks),
 * so no trial finds the prefixes an earlier trial left in the engines' caches; the engines'
 * capacity still holds earlier trials' blocks until evicted. `warm` replays the trace's ids in
 * every trial instead.
 *
 * Tunables: maxTrials (default 12), tolerance (0.05), maxErrorFraction (0.01).
 * Cost: maxTrials replays at most; each trial's records go to `${records}.trialN` (N from 1).
 */
import { percentileOfSorted } from '../analysis/percentiles.js';
import type { TraceRequest } from '../trace/types.js';
import { loadTrace, replay, type ReplayOptions, type ReplayResult } from './replay.js';

export interface SloTerm {
  metric: 'ttft' | 'tpot';
  percentile: number;
  /** Seconds. */
  limit: number;
}

/** Parses `ttft_p90=10,tpot_p90=0.1`; throws RangeError with the bad term. */
export function parseSlo(spec: string): SloTerm[] {
  const terms: SloTerm[] = [];
  for (const part of spec.split(',')) {
    const match = /^\s*(ttft|tpot)_p(\d{1,2}(?:\.\d+)?)\s*=\s*([0-9.eE+-]+)\s*$/.exec(part);
    const limit = Number(match?.[3]);
    const percentile = Number(match?.[2]);
    if (match === null || !(limit > 0) || !Number.isFinite(limit) || !(percentile > 0 && percentile < 100))
      throw new RangeError(
        `--slo: "${part}" is not a term like ttft_p90=10 or tpot_p99=0.1 (metric ttft or tpot, a percentile in (0, 100), a limit in seconds > 0)`,
      );
    terms.push({ metric: match[1] as SloTerm['metric'], percentile, limit });
  }
  return terms;
}

export interface Trial {
  /** 1-based. */
  n: number;
  rate: number;
  pass: boolean;
  sent: number;
  errors: number;
  /** `ttft_p90` etc. → seconds measured. */
  measured: Record<string, number>;
  records?: string;
}

export interface SrrResult {
  /** The highest passing rate; undefined when no trial passed. */
  rate: number | undefined;
  /** [highest pass, lowest fail]; either side undefined when no trial landed there. */
  bracket: [number | undefined, number | undefined];
  trials: Trial[];
  stoppedBy: 'converged' | 'trials' | 'signal' | 'target-down';
}

export interface SrrOptions {
  replay: Omit<ReplayOptions, 'dispatch' | 'maxRequests' | 'records'>;
  records?: string;
  slo: SloTerm[];
  startRate: number;
  seed: number;
  maxTrials: number;
  trialRequests: number;
  tolerance?: number;
  maxErrorFraction?: number;
  /** Called as trial `n` (1-based) starts, with its rate. */
  onTrialStart?: (n: number, rate: number) => void;
  onTrial?: (trial: Trial) => void;
  /** Replay the same block ids in every trial (later trials find earlier trials' caches). */
  warm?: boolean;
}

/** Added to block ids per trial: trials stay apart below 2^53 for ids under 2^44. */
const TRIAL_SALT = 2 ** 44;

/**
 * The requests with their block ids moved to trial `k`'s own id space ((id + k × 2^44) mod
 * 2^53): the same sharing structure within the trial, nothing shared with another trial, so
 * every trial starts on caches the earlier trials did not fill with its prefixes (their prompts
 * differ from the first block). Trial 0 keeps the trace's ids.
 */
export function saltBlocks(requests: readonly TraceRequest[], k: number): TraceRequest[] {
  if (k === 0) return [...requests];
  const salt = k * TRIAL_SALT;
  return requests.map((r) => ({ ...r, hashIds: r.hashIds.map((id) => (id + salt) % 2 ** 53) }));
}

function judge(result: ReplayResult, slo: SloTerm[], maxErrorFraction: number): Pick<Trial, 'pass' | 'measured'> {
  const sorted = { ttft: Float64Array.from(result.ttft).sort(), tpot: Float64Array.from(result.tpot).sort() };
  const measured: Record<string, number> = {};
  let pass = result.sent > 0 && result.errors < result.sent && result.errors <= maxErrorFraction * result.sent;
  for (const term of slo) {
    const value = percentileOfSorted(sorted[term.metric], term.percentile);
    measured[`${term.metric}_p${term.percentile}`] = value;
    if (sorted[term.metric].length === 0 || value > term.limit) pass = false;
  }
  return { pass, measured };
}

export async function findSrr(options: SrrOptions): Promise<SrrResult> {
  const tolerance = options.tolerance ?? 0.05;
  const maxErrorFraction = options.maxErrorFraction ?? 0.01;
  const trials: Trial[] = [];
  let low: number | undefined;
  let high: number | undefined;
  let stoppedBy: SrrResult['stoppedBy'] = 'trials';
  let requests = options.replay.requests;
  let fingerprint = options.replay.fingerprint;
  if (requests === undefined) {
    const loaded = await loadTrace(options.replay.trace, options.replay.readerOptions, options.trialRequests);
    ({ requests, fingerprint } = loaded);
  }
  const base = requests.slice(0, options.trialRequests);
  const run = async (rate: number): Promise<boolean | undefined> => {
    const n = trials.length + 1;
    const records = options.records === undefined ? undefined : `${options.records}.trial${n}`;
    options.onTrialStart?.(n, rate);
    const result = await replay({
      ...options.replay,
      requests: options.warm === true ? base : saltBlocks(base, n - 1),
      ...(fingerprint === undefined ? {} : { fingerprint }),
      ...(records === undefined ? {} : { records }),
      dispatch: { mode: 'poisson', rate, seed: options.seed },
    });
    const trial: Trial = {
      n,
      rate,
      sent: result.sent,
      errors: result.errors,
      ...judge(result, options.slo, maxErrorFraction),
    };
    if (records !== undefined) trial.records = records;
    trials.push(trial);
    options.onTrial?.(trial);
    if (result.stoppedBy === 'signal' || result.stoppedBy === 'target-down') {
      stoppedBy = result.stoppedBy;
      return undefined;
    }
    if (trial.pass) low = Math.max(low ?? 0, rate);
    else high = Math.min(high ?? Infinity, rate);
    return trial.pass;
  };
  let rate = options.startRate;
  while (trials.length < options.maxTrials && (low === undefined || high === undefined)) {
    const pass = await run(rate);
    if (pass === undefined) return { rate: low, bracket: [low, high], trials, stoppedBy };
    rate = pass ? rate * 2 : rate / 2;
  }
  while (low !== undefined && high !== undefined && trials.length < options.maxTrials) {
    if ((high - low) / high <= tolerance) {
      stoppedBy = 'converged';
      break;
    }
    if ((await run((low + high) / 2)) === undefined) break;
  }
  if (stoppedBy === 'trials' && low !== undefined && high !== undefined && (high - low) / high <= tolerance)
    stoppedBy = 'converged';
  return { rate: low, bracket: [low, high], trials, stoppedBy };
}
