/**
 * A mixed fleet: groups of engines, each with its own multipliers of the engine preset
 * (docs/engine-model.md#mixed-fleets). The text form is `--fleet`'s:
 *
 *   COUNT[:prefill=X][:decode=Y][:kv=Z][,COUNT…]
 *
 * `3,5:prefill=0.7:decode=0.8` is 3 instances of the preset and 5 whose prefill costs 0.7× and
 * decode 0.8×. Instances are numbered in the order of the groups: 0–2 the first group, 3–7 the
 * second. A group's multipliers are those of --prefill-cost, --decode-cost and --kv-capacity
 * (EngineScaling) and compose with them multiplicatively: the fleet-wide flags scale every
 * engine, then the group's factors scale its own (scalePreset applied twice).
 *
 * Invariants: every count is a positive integer, the total is at most MAX_FLEET_INSTANCES (the
 * router's own limit), every factor is finite, > 0 and ≤ MAX_ENGINE_SCALE. The router is never
 * told a group's factors: they shape the engines only, and the router sees instance ids.
 * A fleet of one group with every factor 1 is the same as `--instances COUNT`, bit for bit.
 */
import { invalidValue } from '../core/errors.js';
import { MAX_ENGINE_SCALE, scalePreset, type EnginePreset, type EngineScaling } from './engine-preset.js';

/** The router's instance limit (core/router-options.ts): a fleet may not exceed it. */
export const MAX_FLEET_INSTANCES = 65_536;

/** One group of identical engines. */
export interface FleetGroup {
  count: number;
  /** Every factor filled in (1 when the spec leaves it out). */
  scaling: Required<EngineScaling>;
}

/** Spec key → EngineScaling field. */
const KEYS = { prefill: 'prefillCost', decode: 'decodeCost', kv: 'kvCapacity' } as const;
type FleetKey = keyof typeof KEYS;

/** Thrown for a spec that cannot be read; its message names the flag and the reason. */
export class FleetSpecError extends RangeError {
  readonly code = 'ERR_KVROUTE_INVALID_ARG_VALUE';
}

/**
 * Reads a fleet spec. `flag` names it in the messages (default `--fleet`): an empty spec or
 * group, a count that is not a positive integer, an unknown or repeated key, a factor that is
 * not a finite number in (0, MAX_ENGINE_SCALE], or a total over MAX_FLEET_INSTANCES throws a
 * FleetSpecError.
 */
export function parseFleet(text: string, flag = '--fleet'): FleetGroup[] {
  const fail = (reason: string): never => {
    throw new FleetSpecError(
      `${flag} ${reason} (in '${text}'; the form is COUNT[:prefill=X][:decode=Y][:kv=Z][,COUNT…])`,
    );
  };
  if (text.trim() === '') fail('is empty');
  let total = 0;
  const groups = text.split(',').map((groupText, index): FleetGroup => {
    const [countText = '', ...pairs] = groupText.trim().split(':');
    const where = `group ${index + 1}`;
    if (countText === '') fail(`${where} has no count`);
    if (!/^\d+$/.test(countText)) fail(`${where}: count must be a positive integer, got ${countText}`);
    const count = Number(countText);
    if (count === 0) fail(`${where}: count must be a positive integer, got 0`);
    total += count;
    const scaling = { prefillCost: 1, decodeCost: 1, kvCapacity: 1 };
    const seen = new Set<string>();
    for (const pair of pairs) {
      const equals = pair.indexOf('=');
      const key = (equals < 0 ? pair : pair.slice(0, equals)).trim();
      if (!Object.hasOwn(KEYS, key)) fail(`${where}: unknown key '${key}' (prefill, decode or kv)`);
      if (seen.has(key)) fail(`${where}: ${key} given twice`);
      seen.add(key);
      const raw = equals < 0 ? '' : pair.slice(equals + 1).trim();
      const value = Number(raw);
      if (raw === '' || Number.isNaN(value))
        fail(`${where}: ${key} must be a number (a multiplier such as 0.7), got '${raw}'`);
      if (!Number.isFinite(value)) fail(`${where}: ${key} must be finite, got ${raw}`);
      if (value <= 0) fail(`${where}: ${key} must be greater than 0, got ${raw}`);
      if (value > MAX_ENGINE_SCALE) fail(`${where}: ${key} must be at most ${MAX_ENGINE_SCALE}, got ${raw}`);
      scaling[KEYS[key as FleetKey]] = value;
    }
    return { count, scaling };
  });
  if (total > MAX_FLEET_INSTANCES) fail(`has ${total} instances in all, more than ${MAX_FLEET_INSTANCES}`);
  return groups;
}

/** The fleet of `instances` identical engines: what --instances N means. */
export function uniformFleet(instances: number): FleetGroup[] {
  return [{ count: instances, scaling: { prefillCost: 1, decodeCost: 1, kvCapacity: 1 } }];
}

/** Instances in all. */
export function fleetSize(groups: readonly FleetGroup[]): number {
  return groups.reduce((sum, group) => sum + group.count, 0);
}

/** True when every group is the preset: the fleet is `--instances fleetSize`. */
export function isUniformFleet(groups: readonly FleetGroup[]): boolean {
  return groups.every(
    ({ scaling }) => scaling.prefillCost === 1 && scaling.decodeCost === 1 && scaling.kvCapacity === 1,
  );
}

/** The canonical spec text (factors of 1 left out): parseFleet(formatFleet(g)) equals g. */
export function formatFleet(groups: readonly FleetGroup[]): string {
  return groups
    .map(({ count, scaling }) => {
      const parts = [String(count)];
      for (const [key, field] of Object.entries(KEYS) as [FleetKey, keyof EngineScaling][])
        if (scaling[field] !== 1) parts.push(`${key}=${scaling[field]}`);
      return parts.join(':');
    })
    .join(',');
}

/** Each instance's group index, in instance order. */
export function groupOfInstance(groups: readonly FleetGroup[]): number[] {
  return groups.flatMap((group, index) => new Array<number>(group.count).fill(index));
}

/**
 * One preset per instance: `preset` (already scaled by the fleet-wide flags) scaled again by its
 * group's factors. A group of factors 1 gets `preset` itself, so a uniform fleet is unchanged.
 */
export function fleetPresets(preset: EnginePreset, groups: readonly FleetGroup[]): EnginePreset[] {
  return groups.flatMap((group) => {
    const scaled = scalePreset(preset, group.scaling);
    return new Array<EnginePreset>(group.count).fill(scaled);
  });
}

/** checkFleet, and that `fleet` has `instances` engines and, when mixed, no fixed `capacityBlocks`. */
export function checkFleetOf(fleet: readonly FleetGroup[], instances: number, capacityBlocks?: number): void {
  checkFleet(fleet);
  if (fleetSize(fleet) !== instances)
    throw invalidValue('instances', `the fleet's size, ${fleetSize(fleet)}`, instances);
  if (capacityBlocks !== undefined && !isUniformFleet(fleet))
    throw invalidValue('capacityBlocks', 'absent with a mixed fleet', capacityBlocks);
}

/** Checks a fleet given from code (not parsed): the same rules parseFleet applies. */
export function checkFleet(groups: readonly FleetGroup[], field = 'fleet'): void {
  if (!Array.isArray(groups) || groups.length === 0) throw invalidValue(field, 'a non-empty array of groups', groups);
  for (const [index, group] of groups.entries()) {
    if (!(Number.isSafeInteger(group.count) && group.count > 0))
      throw invalidValue(`${field}[${index}].count`, 'a positive integer', group.count);
    for (const [name, value] of Object.entries(group.scaling))
      if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0 || value > MAX_ENGINE_SCALE)
        throw invalidValue(
          `${field}[${index}].scaling.${name}`,
          `a finite number > 0 and ≤ ${MAX_ENGINE_SCALE}`,
          value,
        );
  }
  const total = fleetSize(groups);
  if (total > MAX_FLEET_INSTANCES) throw invalidValue(`${field} size`, `at most ${MAX_FLEET_INSTANCES}`, total);
}
