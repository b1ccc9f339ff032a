/**
 * `kvroute tune --param name=lo:hi[,name=lo:hi…]`: the search box, checked against the policy's
 * tunables (TUNABLES in src/core/policy-spec.ts). Every refusal is a UsageError (exit 2) that
 * quotes the --param item and says what is wrong with it.
 */
import { resolvePolicy, TUNABLE_NAMES, TUNABLES, tunablesOf, type TunableName } from '../core/policy-spec.js';
import type { PolicyName } from '../core/types.js';
import { UsageError } from './common.js';

/** One searched parameter: its bounds, both included. */
export interface ParamRange {
  name: TunableName;
  lo: number;
  hi: number;
  integer: boolean;
}

/** `--param` parsed and checked for `policy`; the ranges in the order given. */
export function parseParams(text: string, policy: PolicyName): ParamRange[] {
  const kind = resolvePolicy(policy).kind;
  const readable = tunablesOf(kind);
  const items = text
    .split(',')
    .map((item) => item.trim())
    .filter((item) => item !== '');
  if (items.length === 0)
    throw new UsageError(`--param is empty; ${policy} reads: ${readable.join(', ') || 'no tunable parameter'}`);
  const ranges: ParamRange[] = [];
  for (const item of items) {
    const range = parseOne(item, policy, readable);
    if (ranges.some((r) => r.name === range.name))
      throw new UsageError(`--param ${item}: ${range.name} is given twice`);
    ranges.push(range);
  }
  return ranges;
}

function parseOne(item: string, policy: PolicyName, readable: readonly TunableName[]): ParamRange {
  const fail = (reason: string): never => {
    throw new UsageError(`--param ${item}: ${reason}`);
  };
  const match = /^([^=]*)=([^:]*):([^:]*)$/.exec(item);
  if (match === null) return fail('expected name=lo:hi, e.g. overloadFactor=1:3');
  const name = match[1]!.trim();
  if (!(TUNABLE_NAMES as string[]).includes(name))
    return fail(`unknown parameter ${JSON.stringify(name)}; tunable: ${TUNABLE_NAMES.join(', ')}`);
  const row = TUNABLES[name as TunableName];
  if (!readable.includes(name as TunableName))
    return fail(
      `policy ${policy} does not read ${name} (read by ${row.kinds.join(', ')}); ${policy} reads: ${readable.join(', ') || 'none'}`,
    );
  const bound = (which: 'lo' | 'hi', raw: string): number => {
    const value = Number(raw);
    if (raw.trim() === '' || !Number.isFinite(value)) return fail(`${which} ${JSON.stringify(raw)} is not a number`);
    if (row.integer && !Number.isInteger(value)) return fail(`${which} ${raw} is not an integer (${name} is one)`);
    if (value < row.min || value > row.max)
      return fail(`${which} ${raw} is outside ${name}'s range [${row.min}, ${row.max}]`);
    return value;
  };
  const lo = bound('lo', match[2]!);
  const hi = bound('hi', match[3]!);
  if (lo > hi) return fail(`lo ${lo} is greater than hi ${hi}`);
  return { name: name as TunableName, lo, hi, integer: row.integer };
}
