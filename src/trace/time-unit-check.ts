/**
 * Catches timestamps written in the wrong unit (a Mooncake trace in seconds, a session trace in
 * milliseconds), which would change every simulated latency by orders of magnitude. The lines
 * read ahead give an arrival rate and an input-token rate under the format's unit; when those
 * are implausible for any serving fleet and the other unit makes them plausible, the reader
 * warns with both readings. Stating `--time-unit` silences the check.
 *
 * The bounds are wide on purpose (a false alarm costs a flag; a miss costs a wrong report):
 * from one request per 10 minutes to 2,000 requests/s, and at most 50 M input tokens/s
 * (a thousand GPUs' worth of prefill, cached tokens included).
 */
import type { TimeUnit } from './types.js';

const MIN_RATE = 1 / 600;
const MAX_RATE = 2000;
const MAX_TOKEN_RATE = 50e6;
/** Fewer lines than this say too little about a rate. */
const MIN_LINES = 32;
const SECONDS: Record<TimeUnit, number> = { s: 1, ms: 1000 };

export interface TimedLine {
  /** The timestamp as written, in the file's unit. */
  timestamp: number;
  inputLength: number;
}

interface Reading {
  span: number;
  rate: number;
  tokenRate: number;
}

function reading(lines: readonly TimedLine[], unit: TimeUnit, tokens: number): Reading {
  let first = Infinity;
  let last = -Infinity;
  for (const { timestamp } of lines) {
    first = Math.min(first, timestamp);
    last = Math.max(last, timestamp);
  }
  const span = (last - first) / SECONDS[unit];
  return { span, rate: (lines.length - 1) / span, tokenRate: tokens / span };
}

function plausible(r: Reading): boolean {
  return r.rate >= MIN_RATE && r.rate <= MAX_RATE && r.tokenRate <= MAX_TOKEN_RATE;
}

const count = (x: number): string =>
  x >= 1e6 ? `${(x / 1e6).toFixed(1)} M` : x >= 1e3 ? `${(x / 1e3).toFixed(1)} k` : x.toPrecision(3);
const seconds = (x: number): string => (x >= 86_400 ? `${(x / 86_400).toFixed(1)} days` : `${x.toPrecision(4)} s`);
const describe = (r: Reading): string =>
  `${count(r.rate)} requests/s and ${count(r.tokenRate)} input tokens/s over ${seconds(r.span)}`;

/** A warning when `unit` (the format's) makes the lines implausible and the other unit does not. */
export function timeUnitWarning(lines: readonly TimedLine[], unit: TimeUnit, formatName: string): string | undefined {
  if (lines.length < MIN_LINES) return undefined;
  let tokens = 0;
  for (const line of lines) tokens += line.inputLength;
  const stated = reading(lines, unit, tokens);
  if (!(stated.span > 0) || plausible(stated)) return undefined;
  const other: TimeUnit = unit === 'ms' ? 's' : 'ms';
  const alternative = reading(lines, other, tokens);
  if (!plausible(alternative)) return undefined;
  const name = (u: TimeUnit): string => (u === 'ms' ? 'milliseconds' : 'seconds');
  return `timestamps look like ${name(other)}, not ${name(unit)}: read as ${name(unit)} (the ${formatName} format's unit), the first ${lines.length} lines arrive at ${describe(stated)}; read as ${name(other)}, ${describe(alternative)}. State the unit with --time-unit ${other} (or --time-unit ${unit} to keep this reading)`;
}
