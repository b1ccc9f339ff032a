/**
 * Policy names, presets and tunables as users give them, resolved into the
 * numeric PolicyConfig the cores take.
 *
 * TUNABLES is the one table of a policy's numeric parameters: resolvePolicy checks a spec
 * against it, and `kvroute tune` searches what it lists. A new parameter is a field of
 * PolicySpec and ResolvedPolicy (src/core/types.ts) plus one row here; the compiler refuses a
 * ResolvedPolicy field without a row. The one field that is not a tunable is `offload`, the
 * offload layer's cost model (src/core/offload-cost.ts): a layer over any base policy, named
 * `<base>+offload` (or `v3`, the B3 sweep's `unified+A+B+offload`) or switched on by a spec's
 * `offload` field, and checked by resolveOffloadCost.
 */
import { POLICY_KINDS, type PolicyKindName } from './codes.js';
import type { CorePolicy } from './core-router.js';
import { invalidType, rangeError } from './errors.js';
import { DEFAULT_OFFLOAD_COST, resolveOffloadCost, type OffloadCostModel } from './offload-cost.js';
import type { BasePolicyName, PolicyName, PolicySpec, ResolvedPolicy } from './types.js';
import { checkInteger, checkNumber } from './validate.js';

export const DEFAULT_POLICY: PolicyName = 'min_ttft';

/** A numeric field of PolicySpec: every field of ResolvedPolicy but its name, kind and offload layer. */
export type TunableName = Exclude<keyof ResolvedPolicy, 'name' | 'kind' | 'offload'>;

/** One row of TUNABLES. */
export interface Tunable {
  /** The allowed range, both ends included: resolvePolicy refuses a value outside it. */
  min: number;
  max: number;
  /** Whole numbers only. */
  integer: boolean;
  /** The value when neither the spec nor the policy's preset gives one. */
  default: number;
  /** The policy kinds whose decisions read it (docs/policies.md); tuning it for another is refused. */
  kinds: readonly PolicyKindName[];
  /** What it does, in one line (kvroute tune --help, docs/tune.md). */
  meaning: string;
}

export const TUNABLES: Readonly<Record<TunableName, Tunable>> = {
  affinityThreshold: {
    min: 0,
    max: 1,
    integer: false,
    default: 0.5,
    kinds: ['unified', 'unified_kv_both'],
    meaning: 'the best-cached instance wins only if its matched share of the prompt exceeds this',
  },
  overloadFactor: {
    min: 0,
    max: 1e9,
    integer: false,
    default: 2.0,
    kinds: ['unified', 'unified_kv_both'],
    meaning: "… and only if its load is at most this × the candidates' mean load",
  },
  decodeWeight: {
    min: 0,
    max: 1,
    integer: false,
    default: 1.0,
    kinds: ['lmetric', 'unified', 'unified_kv_both'],
    meaning: 'weight of a decoding request in the LMetric batch',
  },
  ringVnodes: {
    min: 1,
    max: 65536,
    integer: true,
    default: 160,
    kinds: ['session_hash'],
    meaning: 'points per instance on the session ring',
  },
  batchWeight: {
    min: 0,
    max: 1e3,
    integer: false,
    default: 0.2,
    kinds: ['min_ttft'],
    meaning: "how much each request already on an instance slows a new request's prefill",
  },
  attentionWeight: {
    min: 0,
    max: 1,
    integer: false,
    // The H20 preset's attention cost per token pair over its cost per token (5.48e-6 / 0.04518 ms).
    default: 1.213e-4,
    kinds: ['min_ttft'],
    meaning: "attention cost per token of context, relative to a token's own prefill cost",
  },
  affinitySlack: {
    min: 0,
    max: 1e3,
    integer: false,
    default: 0.3,
    kinds: ['min_ttft'],
    meaning: 'the best-cached instance wins while its score is within (1 + this) × the lowest',
  },
  tieTolerance: {
    min: 0,
    max: 1,
    integer: false,
    default: 0.02,
    kinds: ['min_ttft'],
    meaning: 'scores within (1 + this) × the lowest are a tie, spread by fewest requests, then session',
  },
  kvWeight: {
    min: 0,
    max: 1e3,
    integer: false,
    default: 6,
    kinds: ['min_ttft'],
    meaning: 'score penalty per unit of KV usage past kvThreshold once the request is placed',
  },
  kvThreshold: {
    min: 0,
    max: 10,
    integer: false,
    default: 0.5,
    kinds: ['min_ttft'],
    meaning: "the KV usage (in-flight blocks ÷ capacity) where kvWeight's penalty starts",
  },
  ringFirstTurn: {
    min: 0,
    max: 1,
    integer: true,
    // Off: a single router, or replicas behind a session-affine balancer, place first turns by load.
    default: 0,
    kinds: ['sticky', 'lmetric', 'unified', 'unified_kv_both', 'min_ttft'],
    meaning: '1: a session this router has not placed goes to its session-ring instance (consistent across replicas)',
  },
};

export const TUNABLE_NAMES = Object.keys(TUNABLES) as TunableName[];

/** Every key a PolicySpec may have. */
export const POLICY_SPEC_KEYS: readonly string[] = ['name', 'offload', ...TUNABLE_NAMES];

/** Named presets: a kind plus tunables. `unified+A+B` is the B3 sweep's tuned champion. */
const PRESETS: Record<BasePolicyName, { kind: PolicyKindName } & Partial<Record<TunableName, number>>> = {
  round_robin: { kind: 'round_robin' },
  session_hash: { kind: 'session_hash' },
  load_only: { kind: 'load_only' },
  lmetric: { kind: 'lmetric' },
  sticky: { kind: 'sticky' },
  unified: { kind: 'unified' },
  'unified+A+B': { kind: 'unified', overloadFactor: 1.3, decodeWeight: 0.01 },
  unified_kv_both: { kind: 'unified_kv_both' },
  min_ttft: { kind: 'min_ttft' },
};

/** The base policies (the presets), in table order. */
export const POLICY_NAMES = Object.keys(PRESETS) as BasePolicyName[];

/** The suffix that puts the offload layer over a base policy. */
export const OFFLOAD_SUFFIX = '+offload';
/** The seeds' name for `unified+A+B+offload`. */
export const V3_BASE: BasePolicyName = 'unified+A+B';

/** Every policy name: the base policies, each with the offload layer, and `v3`. */
export const ALL_POLICY_NAMES: readonly PolicyName[] = [
  ...POLICY_NAMES,
  ...POLICY_NAMES.map((name): PolicyName => `${name}+offload`),
  'v3',
];

/** The known names in one line, for help and error messages. */
export const POLICY_NAMES_TEXT = `${POLICY_NAMES.join(', ')}, each with ${OFFLOAD_SUFFIX} (e.g. min_ttft+offload), v3 (= unified+A+B+offload)`;

/** A policy name split into its base and whether it names the offload layer. */
export function parsePolicyName(
  field: string,
  name: unknown,
): { name: PolicyName; base: BasePolicyName; offload: boolean } {
  if (typeof name !== 'string') throw invalidType(field, 'a policy name', name);
  if (name === 'v3') return { name, base: V3_BASE, offload: true };
  const offload = name.endsWith(OFFLOAD_SUFFIX);
  const base = offload ? name.slice(0, -OFFLOAD_SUFFIX.length) : name;
  if (!Object.hasOwn(PRESETS, base)) {
    throw rangeError(
      'ERR_KVROUTE_UNKNOWN_POLICY',
      `${field} ${JSON.stringify(name)} is unknown; known: ${POLICY_NAMES_TEXT}`,
    );
  }
  return { name: name as PolicyName, base: base as BasePolicyName, offload };
}

/** The offload layer a spec asks for: its `offload` field over what the name implies. */
function offloadOf(field: string, named: boolean, given: unknown): OffloadCostModel | null {
  if (given === undefined) return named ? { ...DEFAULT_OFFLOAD_COST } : null;
  if (given === true) return { ...DEFAULT_OFFLOAD_COST };
  if (typeof given !== 'object' || given === null || Array.isArray(given))
    throw invalidType(field, 'true or an object of offload cost fields (docs/policies.md)', given);
  return resolveOffloadCost(field, given as Partial<OffloadCostModel>);
}

export function resolvePolicy(input: PolicyName | PolicySpec | undefined, field = 'policy'): ResolvedPolicy {
  if (input === undefined) input = DEFAULT_POLICY;
  if (typeof input === 'string') input = { name: input };
  if (typeof input !== 'object' || input === null) throw invalidType(field, 'a policy name or spec', input);
  // A misspelt tunable must not be dropped in silence: the router would run on the default.
  // `kind` is allowed so that a ResolvedPolicy resolves again (its kind follows from its name).
  const unknown = Object.keys(input).find((key) => !POLICY_SPEC_KEYS.includes(key) && key !== 'kind');
  if (unknown !== undefined)
    throw rangeError(
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      `${field} has an unknown key ${JSON.stringify(unknown.slice(0, 200))}; known: ${POLICY_SPEC_KEYS.join(', ')}`,
    );
  const parsed = parsePolicyName(`${field}.name`, input.name);
  const preset = PRESETS[parsed.base];
  const offload = offloadOf(`${field}.offload`, parsed.offload, (input as { offload?: unknown }).offload);
  // A base name given with `offload` is named as the layer over it, so stats and explain() say so.
  const name: PolicyName = offload !== null && !parsed.offload ? `${parsed.base}+offload` : parsed.name;
  const resolved = { name, kind: preset.kind, offload } as ResolvedPolicy;
  for (const tunable of TUNABLE_NAMES) {
    const row = TUNABLES[tunable];
    const given: unknown = input[tunable];
    if (given === undefined) resolved[tunable] = preset[tunable] ?? row.default;
    else resolved[tunable] = (row.integer ? checkInteger : checkNumber)(`${field}.${tunable}`, given, row.min, row.max);
  }
  return resolved;
}

/** The tunables `kind` reads, in table order. */
export function tunablesOf(kind: PolicyKindName): TunableName[] {
  return TUNABLE_NAMES.filter((name) => TUNABLES[name].kinds.includes(kind));
}

export function toCorePolicy(p: ResolvedPolicy): CorePolicy {
  const core = {
    kind: POLICY_KINDS.indexOf(p.kind),
    offload: p.offload === null ? null : { ...p.offload },
  } as CorePolicy;
  for (const name of TUNABLE_NAMES) core[name] = p[name];
  return core;
}
