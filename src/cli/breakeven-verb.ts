/**
 * `kvroute sim breakeven` (declared in sim-command.ts): the prefill-offload break-even table on
 * the engine model, against the reference experiments' (src/sim/breakeven.ts, docs/offload.md).
 */
import { ENGINE_PRESETS } from '../sim/engine-preset.js';
import { breakEvenTable } from '../sim/breakeven.js';
import { choiceFlag, integerFlag, type OptionValues } from './common.js';
import { renderBreakEven } from './breakeven-tables.js';
import { linkFlags } from './link-options.js';
import { SIM_RUN_DEFAULTS } from './defaults/sim-defaults.js';

export function breakEvenVerb(values: OptionValues): void {
  const presetName = choiceFlag(values, 'preset', Object.keys(ENGINE_PRESETS)) ?? SIM_RUN_DEFAULTS.preset;
  const table = breakEvenTable({
    preset: ENGINE_PRESETS[presetName]!,
    decodeBatch: integerFlag(values, 'decode-batch', 1) ?? 1,
    link: linkFlags(values),
  });
  if (values.json === true) {
    process.stdout.write(`${JSON.stringify(table)}\n`);
    return;
  }
  process.stdout.write(`${renderBreakEven(table)}\n`);
}
