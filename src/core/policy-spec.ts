/**
 * Policy names, presets and tunables as users give them, resolved into the
 * numeric PolicyConfig the cores take.
 */
import { POLICY_KINDS, type PolicyKindName } from './codes.js';
import type { CorePolicy } from './core-router.js';
import { invalidType, rangeError } from './errors.js';
import type { PolicyName, PolicySpec, ResolvedPolicy } from './types.js';
import { checkInteger, checkNumber } from './validate.js';

export const DEFAULT_POLICY: PolicyName = 'unified';

const DEFAULTS = { affinityThreshold: 0.5, overloadFactor: 2.0, decodeWeight: 1.0, ringVnodes: 160 };

/** Named presets: a kind plus tunables. `unified+A+B` is the seeds' tuned champion. */
const PRESETS: Record<PolicyName, { kind: PolicyKindName; overloadFactor?: number; decodeWeight?: number }> = {
  round_robin: { kind: 'round_robin' },
  session_hash: { kind: 'session_hash' },
  load_only: { kind: 'load_only' },
  lmetric: { kind: 'lmetric' },
  sticky: { kind: 'sticky' },
  unified: { kind: 'unified' },
  'unified+A+B': { kind: 'unified', overloadFactor: 1.3, decodeWeight: 0.01 },
  unified_kv_both: { kind: 'unified_kv_both' },
};

export const POLICY_NAMES = Object.keys(PRESETS) as PolicyName[];

function presetOf(field: string, name: unknown): (typeof PRESETS)[PolicyName] & { name: PolicyName } {
  if (typeof name !== 'string') throw invalidType(field, 'a policy name', name);
  if (!Object.hasOwn(PRESETS, name)) {
    throw rangeError(
      'ERR_KVROUTE_UNKNOWN_POLICY',
      `${field} ${JSON.stringify(name)} is unknown; known: ${POLICY_NAMES.join(', ')}`,
    );
  }
  return { ...PRESETS[name as PolicyName], name: name as PolicyName };
}

export function resolvePolicy(input: PolicyName | PolicySpec | undefined, field = 'policy'): ResolvedPolicy {
  if (input === undefined) input = DEFAULT_POLICY;
  if (typeof input === 'string') input = { name: input };
  if (typeof input !== 'object' || input === null) throw invalidType(field, 'a policy name or spec', input);
  const preset = presetOf(`${field}.name`, input.name);
  const pick = (key: 'overloadFactor' | 'decodeWeight') => preset[key] ?? DEFAULTS[key];
  return {
    name: preset.name,
    kind: preset.kind,
    affinityThreshold:
      input.affinityThreshold === undefined
        ? DEFAULTS.affinityThreshold
        : checkNumber(`${field}.affinityThreshold`, input.affinityThreshold, 0, 1),
    overloadFactor:
      input.overloadFactor === undefined
        ? pick('overloadFactor')
        : checkNumber(`${field}.overloadFactor`, input.overloadFactor, 0, 1e9),
    decodeWeight:
      input.decodeWeight === undefined
        ? pick('decodeWeight')
        : checkNumber(`${field}.decodeWeight`, input.decodeWeight, 0, 1),
    ringVnodes:
      input.ringVnodes === undefined
        ? DEFAULTS.ringVnodes
        : checkInteger(`${field}.ringVnodes`, input.ringVnodes, 1, 65536),
  };
}

export function toCorePolicy(p: ResolvedPolicy): CorePolicy {
  return {
    kind: POLICY_KINDS.indexOf(p.kind),
    affinityThreshold: p.affinityThreshold,
    overloadFactor: p.overloadFactor,
    decodeWeight: p.decodeWeight,
    ringVnodes: p.ringVnodes,
  };
}
