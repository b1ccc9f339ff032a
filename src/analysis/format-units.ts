/**
 * Numbers for people: counts with SI prefixes ("41.6 G tokens"), byte sizes in IEC units
 * ("1.9 GiB") and durations in the unit that fits ("850.0 ms", "2.5 min"). Only the human
 * (non --json) output uses these; JSON keeps raw numbers. Lives in the analysis layer (which
 * imports nothing outside the trace layer) so render-summary and the CLI can both use it.
 *
 * Invariants:
 * - One decimal once a prefix applies; a value is placed after rounding, so 999,950 reads
 *   "1.0 M", never "1000.0 k" (the same for 1023.96 KiB → "1.0 MiB", 59.96 s → "1.0 min").
 * - Below the first prefix a whole number prints as it is ("999", "512 B"), a fraction with one
 *   decimal; negative values keep their sign; NaN, ±Infinity, null and undefined print "-".
 * - The largest unit is the last rung (T, TiB, h): bigger values grow digits, not prefixes.
 *
 * Tables pick one unit per column or row (`bytesScale`, `durationScale`) and name it in the
 * header, so a row's cells compare at a glance; `formatIn` renders a cell in that unit.
 */

export const MISSING = '-';

interface Rung {
  unit: string;
  /** The rung's size in the base unit (1 for '' / B / s). */
  size: number;
}

const COUNT: readonly Rung[] = [
  { unit: '', size: 1 },
  { unit: 'k', size: 1e3 },
  { unit: 'M', size: 1e6 },
  { unit: 'G', size: 1e9 },
  { unit: 'T', size: 1e12 },
];

const BYTES: readonly Rung[] = [
  { unit: 'B', size: 1 },
  { unit: 'KiB', size: 1024 },
  { unit: 'MiB', size: 1024 ** 2 },
  { unit: 'GiB', size: 1024 ** 3 },
  { unit: 'TiB', size: 1024 ** 4 },
];

const DURATION: readonly Rung[] = [
  { unit: 'µs', size: 1e-6 },
  { unit: 'ms', size: 1e-3 },
  { unit: 's', size: 1 },
  { unit: 'min', size: 60 },
  { unit: 'h', size: 3600 },
];

/** The largest rung whose size is at most `magnitude` (the first rung below it). */
function rungIndex(ladder: readonly Rung[], magnitude: number): number {
  let index = 0;
  while (index + 1 < ladder.length && magnitude >= ladder[index + 1]!.size) index++;
  return index;
}

/** `magnitude` (≥ 0, finite) in `ladder`, moved up a rung when rounding reaches the next one. */
function place(ladder: readonly Rung[], magnitude: number, wholeBase: boolean): { digits: string; unit: string } {
  let index = rungIndex(ladder, magnitude);
  for (;;) {
    const inRung = magnitude / ladder[index]!.size;
    const digits = index === 0 && wholeBase && Number.isInteger(inRung) ? String(inRung) : inRung.toFixed(1);
    const next = ladder[index + 1];
    // Rungs are whole multiples of each other (1000, 1024, 60); rounding the ratio drops the
    // float noise of 1e-3 / 1e-6.
    if (next === undefined || Number(digits) < Math.round(next.size / ladder[index]!.size))
      return { digits, unit: ladder[index]!.unit };
    index++;
  }
}

function render(ladder: readonly Rung[], value: number | null | undefined, wholeBase: boolean): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return MISSING;
  const { digits, unit } = place(ladder, Math.abs(value), wholeBase);
  const sign = value < 0 && /[1-9]/.test(digits) ? '-' : '';
  return unit === '' ? `${sign}${digits}` : `${sign}${digits} ${unit}`;
}

/**
 * A count of things people quote exactly (requests, sessions, blocks): the whole number with
 * thousands separators below a million ("3,993 requests"), an SI prefix above ("1.2 M requests").
 */
export function formatTotal(value: number | null | undefined, unit?: string): string {
  if (value === null || value === undefined || !Number.isInteger(value) || Math.abs(value) >= 1e6)
    return formatCount(value, unit);
  const digits = value.toLocaleString('en-US');
  return unit === undefined ? digits : `${digits} ${unit}`;
}

/** A count with an SI prefix: 41.6e9 → "41.6 G", or "41.6 G tokens" with `unit`. */
export function formatCount(value: number | null | undefined, unit?: string): string {
  const text = render(COUNT, value, true);
  return unit === undefined || text === MISSING ? text : `${text} ${unit}`;
}

/** A byte size in IEC units: 2.04e9 → "1.9 GiB"; below 1 KiB "512 B". */
export function formatBytes(value: number | null | undefined): string {
  return render(BYTES, value, true);
}

/** A duration given in seconds, in µs, ms, s, min or h as fits: 0.85 → "850.0 ms"; 0 → "0 s". */
export function formatDuration(seconds: number | null | undefined): string {
  if (seconds === 0) return '0 s';
  return render(DURATION, seconds, false);
}

/** One unit for a table's column or row: its name for the header and what to divide by. */
export interface Scale {
  unit: string;
  divisor: number;
}

/** The IEC unit in which the largest of `bytes` reads from 1 to 1024 (B below 1 KiB). */
export function bytesScale(bytes: readonly number[]): Scale {
  const finite = bytes.filter(Number.isFinite).map(Math.abs);
  const rung = BYTES[rungIndex(BYTES, finite.length === 0 ? 0 : Math.max(...finite))]!;
  return { unit: rung.unit, divisor: rung.size };
}

/**
 * The unit for a column of durations (seconds), by its largest value: µs, ms or s by SI steps,
 * and seconds stay up to 999 s (a latency column of 0.9 s to 140 s reads "s", not "min"), then
 * min up to 999 min, then h. All zero (or none finite) reads "s".
 */
export function durationScale(seconds: readonly number[]): Scale {
  const finite = seconds.filter(Number.isFinite).map(Math.abs);
  const max = finite.length === 0 ? 0 : Math.max(...finite);
  const unit =
    max === 0 || (max >= 1 && max < 1000) ? 's' : max < 1e-3 ? 'µs' : max < 1 ? 'ms' : max < 60_000 ? 'min' : 'h';
  return { unit, divisor: DURATION.find((rung) => rung.unit === unit)!.size };
}

/** `value` in `scale` with `decimals` places, "-" when it is not a finite number. */
export function formatIn(value: number | null | undefined, scale: Scale, decimals: number): string {
  if (value === null || value === undefined || !Number.isFinite(value)) return MISSING;
  return (value / scale.divisor).toFixed(decimals);
}
