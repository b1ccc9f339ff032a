/**
 * The P→D KV link flags `sim breakeven` and `sim serve` share (docs/offload.md): `--link-gbps G`,
 * `--warm-overhead-ms MS`, `--cold-penalty-ms MS`, `--layerwise`. They set the transfer fields of
 * the shared offload cost model (src/core/offload-cost.ts); absent ones keep its defaults.
 *
 * Loaded by every `kvroute` run (the declarations), so it imports only the cost model.
 */
import type { Command } from 'commander';

import { DEFAULT_OFFLOAD_COST, type OffloadCostModel } from '../core/offload-cost.js';
import { addOptionGroup, withDefault } from './command-kit.js';
import { numberFlag, type OptionValues } from './common.js';

export type LinkFlags = Partial<Pick<OffloadCostModel, 'linkGbps' | 'warmOverheadMs' | 'coldPenaltyMs' | 'layerwise'>>;

/** The four flags under their own heading. */
export function addLinkOptions(command: Command): Command {
  const d = DEFAULT_OFFLOAD_COST;
  return addOptionGroup(command, 'P→D KV link (the offload cost model, docs/offload.md):', [
    ['--link-gbps <G>', withDefault('link bandwidth, gigabits per second', d.linkGbps)],
    ['--warm-overhead-ms <MS>', withDefault('fixed cost of a transfer over a warm connection', d.warmOverheadMs)],
    ['--cold-penalty-ms <MS>', withDefault("added to a prefill→decode pair's first transfer", d.coldPenaltyMs)],
    ['--layerwise', "layer-wise transfer: only the last layer's wire time is exposed"],
  ]);
}

/** The flags given, as cost-model fields; a bad value is a UsageError naming its flag. */
export function linkFlags(values: OptionValues): LinkFlags {
  const link: LinkFlags = {};
  const gbps = numberFlag(values, 'link-gbps');
  const warm = numberFlag(values, 'warm-overhead-ms', true);
  const cold = numberFlag(values, 'cold-penalty-ms', true);
  if (gbps !== undefined) link.linkGbps = gbps;
  if (warm !== undefined) link.warmOverheadMs = warm;
  if (cold !== undefined) link.coldPenaltyMs = cold;
  if (values.layerwise === true) link.layerwise = true;
  return link;
}

/** "100 Gbps, layer-wise, warm overhead 5 ms, cold penalty 20 ms": the link, defaults filled in. */
export function describeLink(link: LinkFlags): string {
  const m = { ...DEFAULT_OFFLOAD_COST, ...link };
  return `${m.linkGbps} Gbps, ${m.layerwise ? 'layer-wise' : 'bulk'}, warm overhead ${m.warmOverheadMs} ms, cold penalty ${m.coldPenaltyMs} ms`;
}
