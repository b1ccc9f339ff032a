/**
 * The engine-model perturbation flags `sim run`, `sim serve` and `sweep` share, declared once:
 * `--prefill-cost X`, `--decode-cost X`, `--kv-capacity X`, multipliers of the preset
 * (scalePreset in src/sim/engine-preset.ts; docs/engine-model.md#perturbing-the-model). Also
 * how they are read back, passed on to a child `sim serve`, and written into files.
 *
 * Also `--fleet SPEC`'s declaration (a mixed fleet; fleet-options.ts reads it).
 *
 * Loaded by every `kvroute` run (the declarations), so it imports nothing heavier than the
 * engine presets.
 */
import type { Command } from 'commander';

import { engineScaling, MAX_ENGINE_SCALE, type EngineScaling } from '../sim/engine-preset.js';
import type { EngineScalingRecord } from '../trace/records.js';
import { addOptionGroup, withDefault } from './command-kit.js';
import { multiplierFlag, type OptionValues } from './common.js';

/** Flag name → EngineScaling field. */
const FLAGS = [
  ['prefill-cost', 'prefillCost'],
  ['decode-cost', 'decodeCost'],
  ['kv-capacity', 'kvCapacity'],
] as const;

/** --prefill-cost, --decode-cost, --kv-capacity under their own heading; `what` names the engines. */
export function addEngineScalingOptions(command: Command, what = "each engine's"): Command {
  const range = `(0 < X ≤ ${MAX_ENGINE_SCALE})`;
  return addOptionGroup(command, 'Engine model perturbation (multipliers, docs/engine-model.md):', [
    [
      '--prefill-cost <X>',
      withDefault(`multiply ${what} prefill step time (overhead, per-token and attention terms) by X ${range}`, 1),
    ],
    [
      '--decode-cost <X>',
      withDefault(`multiply ${what} decode step time (base, per-sequence and KV-read terms) by X ${range}`, 1),
    ],
    ['--kv-capacity <X>', withDefault(`multiply ${what} KV cache, so its capacity in blocks, by X ${range}`, 1)],
  ]);
}

/** The three flags as an EngineScaling, every factor filled in (1 when absent); a bad one is a UsageError. */
export function engineScalingFlags(values: OptionValues): Required<EngineScaling> {
  const scaling: EngineScaling = {};
  for (const [flag, field] of FLAGS) {
    const value = multiplierFlag(values, flag, MAX_ENGINE_SCALE);
    if (value !== undefined) scaling[field] = value;
  }
  return engineScaling(scaling);
}

/** The flags that give `scaling` to a child `kvroute sim serve` (none for a factor of 1). */
export function engineScalingArgs(scaling: EngineScaling): string[] {
  const resolved = engineScaling(scaling);
  return FLAGS.flatMap(([flag, field]) => (resolved[field] === 1 ? [] : [`--${flag}`, String(resolved[field])]));
}

/** `scaling` as record headers, sweep.json and summaries write it. */
export function scalingRecord(scaling: EngineScaling): EngineScalingRecord {
  const s = engineScaling(scaling);
  return { prefill_cost: s.prefillCost, decode_cost: s.decodeCost, kv_capacity: s.kvCapacity };
}

/** `--fleet SPEC`, a mixed fleet instead of --instances (src/sim/fleet-spec.ts). */
export function addFleetOption(command: Command): Command {
  return command.option(
    '--fleet <SPEC>',
    "a mixed fleet instead of --instances: COUNT[:prefill=X][:decode=Y][:kv=Z][,COUNT…], each group's multipliers composing with --prefill-cost, --decode-cost and --kv-capacity (docs/engine-model.md#mixed-fleets)",
  );
}
