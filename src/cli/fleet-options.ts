/**
 * `--fleet SPEC` read back (a mixed fleet, src/sim/fleet-spec.ts; declared in engine-options.ts):
 * its groups and size, its refusal beside --instances, how it is written into headers, sweep.json
 * and --json, and passed on to a child `sim serve`. Loaded by the verbs only, not by --help.
 */
import {
  FleetSpecError,
  fleetSize,
  formatFleet,
  isUniformFleet,
  parseFleet,
  type FleetGroup,
} from '../sim/fleet-spec.js';
import { integerFlag, stringFlag, UsageError, type OptionValues } from './common.js';

/** The fleet's size and, with --fleet, its groups; --fleet and --instances together are a UsageError. */
export function fleetFlags(
  values: OptionValues,
  defaultInstances: number,
): { instances: number; fleet?: FleetGroup[] } {
  const spec = stringFlag(values, 'fleet');
  const instances = integerFlag(values, 'instances', 1);
  if (spec === undefined) return { instances: instances ?? defaultInstances };
  if (instances !== undefined)
    throw new UsageError('--fleet and --instances exclude each other: --fleet gives the instance count');
  let fleet: FleetGroup[];
  try {
    fleet = parseFleet(spec);
  } catch (error) {
    if (error instanceof FleetSpecError) throw new UsageError(error.message);
    throw error;
  }
  return { instances: fleetSize(fleet), fleet };
}

/** The fleet as headers, sweep.json and --json write it: its spec, only when it is mixed. */
export function fleetRecord(fleet: readonly FleetGroup[] | undefined): { fleet?: string } {
  return fleet === undefined || isUniformFleet(fleet) ? {} : { fleet: formatFleet(fleet) };
}

/** A mixed fleet's spec and each group's KV blocks per engine (from each engine's, in instance order). */
export function fleetFields(
  fleet: readonly FleetGroup[] | undefined,
  engineBlocks: readonly number[],
): { fleet?: string; fleet_capacity_blocks?: number[] } {
  const record = fleetRecord(fleet);
  if (record.fleet === undefined || fleet === undefined) return {};
  let first = 0;
  const perGroup = fleet.map((group) => {
    const blocks = engineBlocks[first] ?? 0;
    first += group.count;
    return blocks;
  });
  return { ...record, fleet_capacity_blocks: perGroup };
}

/** The flags that give `fleet` to a child `kvroute sim serve` of `instances` engines. */
export function fleetArgs(instances: number, fleet: readonly FleetGroup[] | undefined): string[] {
  return fleet === undefined ? ['--instances', String(instances)] : ['--fleet', formatFleet(fleet)];
}
