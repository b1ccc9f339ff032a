/**
 * A mixed fleet's run, group by group (`sim run` on `--fleet`, docs/engine-model.md#mixed-fleets):
 * how many requests each group of instances served, their TTFT and APC. The groups number the
 * instances in order, so a record's `instance` names its group. Only a mixed fleet has groups to
 * show; a uniform one prints and writes what `--instances` always did.
 */
import { formatDuration } from '../analysis/format-units.js';
import { runMetrics, type Quantiles } from '../analysis/run-metrics.js';
import { formatFleet, groupOfInstance, isUniformFleet, type FleetGroup } from '../sim/fleet-spec.js';
import type { RequestRecord } from '../trace/records.js';

export interface FleetGroupMetrics {
  /** The group's own spec, `4:prefill=0.5:decode=0.7`. */
  group: string;
  /** Its first and last instance. */
  instances: [number, number];
  requests: number;
  /** Null when the group served nothing. */
  ttft_mean_s: number | null;
  ttft_s: Quantiles | null;
  apc: number | null;
}

/** Each group's figures; [] for a uniform fleet (or none). */
export function fleetGroupMetrics(
  fleet: readonly FleetGroup[] | undefined,
  records: readonly RequestRecord[],
): FleetGroupMetrics[] {
  if (fleet === undefined || isUniformFleet(fleet)) return [];
  const groupOf = groupOfInstance(fleet);
  const byGroup = fleet.map((): RequestRecord[] => []);
  for (const record of records) byGroup[groupOf[record.instance]!]!.push(record);
  let first = 0;
  return fleet.map((group, index) => {
    const served = byGroup[index]!;
    const range: [number, number] = [first, first + group.count - 1];
    first += group.count;
    const metrics = served.length === 0 ? undefined : runMetrics(served);
    const ttftSum = served.reduce((sum, r) => sum + (r.first_token - r.dispatch), 0);
    return {
      group: formatFleet([group]),
      instances: range,
      requests: served.length,
      ttft_mean_s: served.length === 0 ? null : ttftSum / served.length,
      ttft_s: metrics?.ttft_s ?? null,
      apc: metrics?.apc ?? null,
    };
  });
}

/** One line per group: `  instances 4–7 (4:prefill=0.5): 642 requests · TTFT mean 1.08 s · p90 3.20 s · APC 78.0%`. */
export function renderFleetGroups(groups: readonly FleetGroupMetrics[]): string[] {
  return groups.map((g) => {
    const figures =
      g.ttft_s === null
        ? 'no requests'
        : `${g.requests} requests · TTFT mean ${formatDuration(g.ttft_mean_s!)} · p90 ${formatDuration(g.ttft_s.p90)} · APC ${(g.apc! * 100).toFixed(1)}%`;
    return `  instances ${g.instances[0]}–${g.instances[1]} (${g.group}): ${figures}`;
  });
}
