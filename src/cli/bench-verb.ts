/**
 * `kvroute bench interference` (declared in bench-command.ts): the B2 cells against two
 * live endpoints, or against two simulated engines this process starts (`--sim`), one cell at a
 * time (cells must not overlap: each measures the other's absence).
 */
import { liveInterferenceCell, type LiveInterferenceOptions } from '../live/interference-live.js';
import { checkTarget } from '../replay/target-check.js';
import type { InterferenceCell, InterferenceVariant } from '../sim/interference-protocol.js';
import { INTERFERENCE_PREFILL_TOKENS, INTERFERENCE_VARIANTS } from '../sim/interference-protocol.js';
import { startSimFleet, type SimFleet } from '../sim/sim-fleet.js';
import { BENCH_INTERFERENCE_DEFAULTS } from './defaults/bench-defaults.js';
import { integerFlag, numberFlag, stringFlag, UsageError, type OptionValues } from './common.js';
import { renderInterference } from './sim-tables.js';

function listFlag<T>(
  values: OptionValues,
  name: string,
  parse: (item: string) => T | undefined,
  all: readonly T[],
): T[] {
  const raw = stringFlag(values, name);
  if (raw === undefined) return [...all];
  const items = raw.split(',').map((item) => item.trim());
  return items.map((item) => {
    const value = parse(item);
    if (value === undefined)
      throw new UsageError(`--${name}: ${JSON.stringify(item)} is not one of ${all.join(', ')} or a valid value`);
    return value;
  });
}

function endpoint(values: OptionValues, name: string): string | undefined {
  const raw = stringFlag(values, name);
  if (raw === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--${name} must be an http(s) URL, got ${raw}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new UsageError(`--${name} must be an http(s) URL, got ${raw}`);
  return raw.replace(/\/+$/, '');
}

export async function benchInterferenceVerb(values: OptionValues): Promise<void> {
  const sizes = listFlag(
    values,
    'prefill-sizes',
    (item) => (/^\d+$/.test(item) && Number(item) >= 1 ? Number(item) : undefined),
    INTERFERENCE_PREFILL_TOKENS,
  );
  const variants = listFlag(
    values,
    'variants',
    (item) => INTERFERENCE_VARIANTS.find((v) => v === item),
    INTERFERENCE_VARIANTS,
  ) as InterferenceVariant[];
  const schedule: LiveInterferenceOptions['schedule'] = {};
  const set = (key: keyof NonNullable<typeof schedule>, value: number | undefined): void => {
    if (value !== undefined) schedule[key] = value;
  };
  set('durationS', numberFlag(values, 'duration'));
  set('decodeRate', numberFlag(values, 'decode-rate'));
  set('injections', integerFlag(values, 'injections', 1));
  set('injectionEveryS', numberFlag(values, 'every'));
  const decode = endpoint(values, 'decode-endpoint');
  const prefill = endpoint(values, 'prefill-endpoint');
  if (values.sim === true && (decode !== undefined || prefill !== undefined))
    throw new UsageError('--sim starts its own engines: give it without --decode-endpoint and --prefill-endpoint');
  if (values.sim !== true && (decode === undefined || prefill === undefined))
    throw new UsageError('bench interference needs --decode-endpoint URL and --prefill-endpoint URL, or --sim');
  const speed = numberFlag(values, 'speed') ?? BENCH_INTERFERENCE_DEFAULTS.simSpeed;
  if (values.sim !== true && stringFlag(values, 'speed') !== undefined)
    throw new UsageError('--speed applies to --sim only (live engines run in real time)');
  let fleet: SimFleet | undefined;
  try {
    if (values.sim === true) fleet = await startSimFleet({ instances: 2, port: 0, speed });
    const decodeEndpoint = fleet?.urls[0] ?? decode!;
    const prefillEndpoint = fleet?.urls[1] ?? prefill!;
    // Both endpoints up now is better than a failed cell later; the decode one names the model.
    const model = await checkTarget(decodeEndpoint, stringFlag(values, 'model'));
    await checkTarget(prefillEndpoint, model);
    const options: LiveInterferenceOptions = {
      decodeEndpoint,
      prefillEndpoint,
      model,
      schedule,
      ignoreEos: values.eos !== true,
      speed: fleet === undefined ? 1 : speed,
    };
    const cells: InterferenceCell[] = [];
    for (const variant of variants)
      for (const prefillTokens of sizes) {
        const started = performance.now();
        cells.push(await liveInterferenceCell(variant, prefillTokens, options));
        process.stderr.write(
          `kvroute bench interference: ${variant} ${prefillTokens} tokens done in ${((performance.now() - started) / 1000).toFixed(1)} s (${cells.length}/${variants.length * sizes.length})\n`,
        );
      }
    process.stdout.write(values.json === true ? `${JSON.stringify(cells)}\n` : `${renderInterference(cells)}\n`);
  } finally {
    await fleet?.close();
  }
}
