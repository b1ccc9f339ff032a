/**
 * Options of the synthetic agentic trace generator (src/trace/synth.ts): their defaults, which
 * reproduce the window-1 w600 workload (docs/synth.md), and their validation.
 *
 * Validation throws kvroute errors (src/core/errors.ts) whose message names the field as written
 * here (`sessions`, `blockSize`, ...): TypeError for a non-number, RangeError for a bad value.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { checkInteger, checkNumber } from '../core/validate.js';
import { ARRIVAL_PROCESSES, type ArrivalProcess } from './synth-arrivals.js';

export interface SynthOptions {
  /** Sessions in the trace, sub-agent sessions included (before `scale`). Default 274. */
  sessions?: number;
  /** Seconds over which root sessions start (see `arrivals`); their later turns may run past it. Default 600. */
  duration?: number;
  /**
   * How root sessions start (synth-arrivals.ts): `uniform` over `duration` (the default),
   * `poisson` (exponential gaps at rate roots / duration) or `on-off` (Poisson inside ON periods
   * of `burstOn` seconds separated by OFF periods of `burstOff`, at the rate that keeps the count).
   */
  arrivals?: ArrivalProcess;
  /** `on-off` only: seconds of each ON period, > 0. Default 30. */
  burstOn?: number;
  /** `on-off` only: seconds of each OFF period, >= 0. Default 90. */
  burstOff?: number;
  /** PRNG seed, any safe integer >= 0. The same options give a byte-identical trace. Default 1. */
  seed?: number;
  /** Tokens per hash block. Default 16. */
  blockSize?: number;
  /**
   * Multiplies the session count: `round(sessions × scale)` sessions over the same `duration`
   * (so the arrival rate grows with it). Default 1; ~830 gives 1,000,000 requests.
   */
  scale?: number;
  /** Tokens of the system prefix shared by the sessions that use it (0: none). Default 512. */
  systemPrefixTokens?: number;
  /** Fraction of root sessions (of each class, rounded) that start with the system prefix. Default 0.09. */
  systemPrefixShare?: number;
  /** Fraction of sessions that are sub-agents forked from a parent session's context. Default 0.088. */
  subagentShare?: number;
  /** Prompt limit (a 128k-context model): sessions compact before reaching it. Default 131072. */
  contextTokens?: number;
}

export const SYNTH_DEFAULTS: Readonly<Required<SynthOptions>> = Object.freeze({
  sessions: 274,
  duration: 600,
  arrivals: 'uniform',
  burstOn: 30,
  burstOff: 90,
  seed: 1,
  blockSize: 16,
  scale: 1,
  systemPrefixTokens: 512,
  systemPrefixShare: 0.09,
  subagentShare: 0.088,
  contextTokens: 131_072,
});

/**
 * The plan's typed arrays index sessions with 32-bit integers and cost ~26 bytes per session
 * (plus ~28 while it is built); this bound keeps it around 1 GiB.
 */
export const MAX_SYNTH_SESSIONS = 1 << 25;

/** Smallest context limit: room for a compaction summary plus a turn's growth. */
export const MIN_CONTEXT_TOKENS = 4_096;

function checkPositive(field: string, value: unknown): number {
  if (typeof value !== 'number') throw invalidType(field, 'a number', value);
  if (!(value > 0 && Number.isFinite(value))) throw invalidValue(field, 'a finite number > 0', value);
  return value;
}

/** Sessions a validated option set produces (sub-agents included). */
export function scaledSessionCount(options: Required<SynthOptions>): number {
  return Math.round(options.sessions * options.scale);
}

/** Fills in defaults and checks every field; returns a fresh object. */
export function validateSynthOptions(options: SynthOptions): Required<SynthOptions> {
  if (typeof options !== 'object' || options === null || Array.isArray(options)) {
    throw invalidType('options', 'an object', options);
  }
  // Only the known fields are read; `undefined` means "use the default".
  const field = <K extends keyof SynthOptions>(key: K): unknown =>
    options[key] === undefined ? SYNTH_DEFAULTS[key] : options[key];
  const sessions = checkInteger('sessions', field('sessions'), 1, MAX_SYNTH_SESSIONS);
  const duration = checkNumber('duration', field('duration'), 0, Number.MAX_VALUE);
  const arrivals = field('arrivals');
  if (typeof arrivals !== 'string') throw invalidType('arrivals', 'a string', arrivals);
  if (!(ARRIVAL_PROCESSES as readonly string[]).includes(arrivals)) {
    throw invalidValue('arrivals', `one of ${ARRIVAL_PROCESSES.join(', ')}`, arrivals);
  }
  const burstOn = checkPositive('burstOn', field('burstOn'));
  const burstOff = checkNumber('burstOff', field('burstOff'), 0, Number.MAX_VALUE);
  const seed = checkInteger('seed', field('seed'), 0);
  const blockSize = checkInteger('blockSize', field('blockSize'), 1, 1 << 20);
  const scale = checkPositive('scale', field('scale'));
  const scaled = Math.round(sessions * scale);
  if (scaled < 1 || scaled > MAX_SYNTH_SESSIONS) {
    throw invalidValue('scale', `such that round(sessions × scale) is in [1, ${MAX_SYNTH_SESSIONS}]`, scale);
  }
  const contextTokens = checkInteger('contextTokens', field('contextTokens'), MIN_CONTEXT_TOKENS, 1 << 30);
  const systemPrefixTokens = checkInteger(
    'systemPrefixTokens',
    field('systemPrefixTokens'),
    0,
    Math.floor(contextTokens / 4),
  );
  return {
    sessions,
    duration,
    arrivals: arrivals as ArrivalProcess,
    burstOn,
    burstOff,
    seed,
    blockSize,
    scale,
    systemPrefixTokens,
    systemPrefixShare: checkNumber('systemPrefixShare', field('systemPrefixShare'), 0, 1),
    subagentShare: checkNumber('subagentShare', field('subagentShare'), 0, 0.9),
    contextTokens,
  };
}
