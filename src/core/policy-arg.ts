/**
 * A policy as one command-line word: `NAME` or `NAME:KEY=VALUE[:KEY=VALUE…]`, e.g.
 * `min_ttft:batchWeight=0.29:kvWeight=9.6`, so a setting `kvroute tune` found can be given to
 * `kvroute serve --policy`, `sim run --policy` and `sweep --policies` (whose list is
 * comma-separated, hence the colons). Keys are the TUNABLES the policy reads; values are numbers
 * in each tunable's range. A policy with the offload layer (`NAME+offload`, `v3`) also takes the
 * offload cost fields (`v3:linkGbps=100:layerwise=true`, `min_ttft+offload:chargePrefill=true`), which go to the spec's `offload`.
 * Every mistake throws an error naming the field and the reason.
 */
import { invalidValue } from './errors.js';
import { DEFAULT_OFFLOAD_COST, type OffloadCostModel } from './offload-cost.js';
import {
  ALL_POLICY_NAMES,
  parsePolicyName,
  POLICY_NAMES_TEXT,
  resolvePolicy,
  TUNABLES,
  tunablesOf,
  type TunableName,
} from './policy-spec.js';
import type { PolicyName, PolicySpec } from './types.js';

const OFFLOAD_KEYS = Object.keys(DEFAULT_OFFLOAD_COST) as Array<keyof OffloadCostModel>;

/** The policy `text` names, as a name (no parameters) or a spec; `field` names it in errors. */
export function parsePolicyArg(text: string, field: string): PolicyName | PolicySpec {
  const [name, ...pairs] = text.split(':');
  if (!ALL_POLICY_NAMES.includes(name as PolicyName))
    throw invalidValue(field, `one of ${POLICY_NAMES_TEXT} (then :KEY=VALUE… to set its tunables)`, text);
  if (pairs.length === 0) return name as PolicyName;
  const parsed = parsePolicyName(field, name);
  const readable: string[] = tunablesOf(resolvePolicy(parsed.base).kind);
  if (parsed.offload) readable.push(...OFFLOAD_KEYS);
  const spec: PolicySpec = { name: name as PolicyName };
  const offload: Partial<Record<keyof OffloadCostModel, number | boolean>> = {};
  for (const pair of pairs) {
    const match = /^([A-Za-z0-9]+)=(.+)$/.exec(pair);
    if (match === null) throw invalidValue(field, `KEY=VALUE after "${name}:"`, pair);
    const key = match[1]!;
    if (!readable.includes(key)) {
      const meant = readable.find((r) => r.toLowerCase() === key.toLowerCase());
      throw invalidValue(
        field,
        `a tunable ${name} reads (${meant === undefined ? `${readable.join(', ') || 'none'}; docs/policies.md` : `did you mean ${meant}?`})`,
        key,
      );
    }
    const isOffload = !Object.hasOwn(TUNABLES, key);
    if (Object.hasOwn(isOffload ? offload : spec, key)) throw invalidValue(field, `each tunable once`, pair);
    if (key === 'layerwise' || key === 'chargePrefill') {
      if (match[2] !== 'true' && match[2] !== 'false') throw invalidValue(`${field} ${key}`, 'true or false', match[2]);
      offload[key] = match[2] === 'true';
      continue;
    }
    const value = Number(match[2]);
    if (!/^[-+0-9.eE]+$/.test(match[2]!) || !Number.isFinite(value))
      throw invalidValue(`${field} ${key}`, 'a finite number', match[2]);
    if (isOffload) offload[key as keyof OffloadCostModel] = value;
    else spec[key as TunableName] = value;
  }
  if (Object.keys(offload).length > 0) spec.offload = offload as Partial<OffloadCostModel>;
  // Ranges and integers, with the same messages as a spec given to the Router.
  resolvePolicy(spec, field);
  return spec;
}

/** The one-word form of `policy` (parsePolicyArg's inverse). */
export function formatPolicyArg(policy: PolicyName | PolicySpec): string {
  if (typeof policy === 'string') return policy;
  const { name, offload, ...tunables } = policy;
  const withLayer = offload !== undefined && !name.endsWith('+offload') && name !== 'v3' ? `${name}+offload` : name;
  const pairs = [...Object.entries(tunables), ...(typeof offload === 'object' ? Object.entries(offload) : [])].map(
    ([key, value]) => `${key}=${String(value)}`,
  );
  return [withLayer, ...pairs].join(':');
}
