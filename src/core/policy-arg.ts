/**
 * A policy as one command-line word: `NAME` or `NAME:KEY=VALUE[:KEY=VALUE…]`, e.g.
 * `min_ttft:batchWeight=0.29:kvWeight=9.6`, so a setting `kvroute tune` found can be given to
 * `kvroute serve --policy`, `sim run --policy` and `sweep --policies` (whose list is
 * comma-separated, hence the colons). Keys are the TUNABLES the policy reads; values are numbers
 * in each tunable's range. Every mistake throws an error naming the field and the reason.
 */
import { invalidValue } from './errors.js';
import { POLICY_NAMES, resolvePolicy, TUNABLES, tunablesOf, type TunableName } from './policy-spec.js';
import type { PolicyName, PolicySpec } from './types.js';

/** The policy `text` names, as a name (no parameters) or a spec; `field` names it in errors. */
export function parsePolicyArg(text: string, field: string): PolicyName | PolicySpec {
  const [name, ...pairs] = text.split(':');
  if (!POLICY_NAMES.includes(name as PolicyName))
    throw invalidValue(field, `one of ${POLICY_NAMES.join(', ')} (then :KEY=VALUE… to set its tunables)`, text);
  if (pairs.length === 0) return name as PolicyName;
  const kind = resolvePolicy(name as PolicyName).kind;
  const readable = tunablesOf(kind);
  const spec: PolicySpec = { name: name as PolicyName };
  for (const pair of pairs) {
    const match = /^([A-Za-z]+)=(.+)$/.exec(pair);
    if (match === null) throw invalidValue(field, `KEY=VALUE after "${name}:"`, pair);
    const key = match[1] as TunableName;
    if (!Object.hasOwn(TUNABLES, key) || !readable.includes(key)) {
      const meant = readable.find((r) => r.toLowerCase() === key.toLowerCase());
      throw invalidValue(
        field,
        `a tunable ${name} reads (${meant === undefined ? `${readable.join(', ') || 'none'}; docs/policies.md` : `did you mean ${meant}?`})`,
        match[1],
      );
    }
    if (Object.hasOwn(spec, key)) throw invalidValue(field, `each tunable once`, pair);
    const value = Number(match[2]);
    if (!/^[-+0-9.eE]+$/.test(match[2]!) || !Number.isFinite(value))
      throw invalidValue(`${field} ${key}`, 'a finite number', match[2]);
    spec[key] = value;
  }
  // Ranges and integers, with the same messages as a spec given to the Router.
  resolvePolicy(spec, field);
  return spec;
}

/** The one-word form of `policy` (parsePolicyArg's inverse). */
export function formatPolicyArg(policy: PolicyName | PolicySpec): string {
  if (typeof policy === 'string') return policy;
  const pairs = Object.entries(policy)
    .filter(([key]) => key !== 'name')
    .map(([key, value]) => `${key}=${String(value)}`);
  return [policy.name, ...pairs].join(':');
}
