/**
 * The prefill-offload break-even table (issue #18, docs/offload.md; `kvroute sim breakeven`):
 * what a cold prefill of P tokens costs the decodes it lands beside, what moving its KV to the
 * decode instance costs instead, and the smallest P at which offload pays, against the reference experiments'
 * "Combined Break-Even Analysis" (the B2 microbenchmark analysis, docs/glossary.md).
 *
 *   prefill(P)        the engine model's time to the first token of a cold P-token prompt on
 *                     an idle engine: Σ stepMs over its chunks of maxBatchedTokens (exactly
 *                     what EngineModel.step charges; the test holds them equal)
 *   interference(P)   prefill(P) × D, D decoding requests stalled for the prefill's steps
 *                     (the cost model's interferenceMs)
 *   transfer(P)       transferMs(model, P, cold): warm, cold (a pair's first use), and either
 *                     bulk or layer-wise (only the last layer's wire time exposed)
 *   saving(P)         interference(P) − transfer(P); offload pays iff it is > 0
 *
 * The break-even search scans every P from 1 to the preset's max_model_len (the terms are not
 * monotone in general: chunk overheads step, and a slow link can outgrow the linear prefill
 * term), reporting the smallest P where offload pays and the smallest from which it always pays.
 * O(maxModelLen × chunks), a few milliseconds.
 */
import { resolveOffloadCost, transferMs, type OffloadCostModel } from '../core/offload-cost.js';
import { MODEL_PRESETS } from '../trace/model-presets.js';
import { stepMs, type EnginePreset } from './engine-preset.js';

/** The reference experiments' prompt sizes. */
export const BREAKEVEN_PROMPTS = [2048, 8192, 16384, 32768] as const;

/**
 * The reference experiments' "Combined Break-Even Analysis" (the B2 microbenchmark analysis), in ms: interference (the
 * cold prefill's duration), transfer, and net saving. At 8,192 the reference experiments give a range, 33–258 ms
 * (a measured warm overhead, and the 25 Gbps bulk figure of their summary); the bulk end is what
 * a bulk transfer model compares with, and the net saving of that end is 331 ms.
 */
export const SEEDS_BREAKEVEN: Readonly<Record<number, SeedsRow>> = {
  2048: { interference_ms: 139, transfer_ms: 36, net_saving_ms: 103, transfer_basis: 'measured PD-sep overhead' },
  8192: { interference_ms: 589, transfer_ms: 258, net_saving_ms: 331, transfer_basis: 'bulk end of 33–258' },
  16384: { interference_ms: 1544, transfer_ms: 515, net_saving_ms: 1029, transfer_basis: 'theoretical, 25 Gbps' },
  32768: { interference_ms: 4575, transfer_ms: 1031, net_saving_ms: 3544, transfer_basis: 'theoretical, 25 Gbps' },
};

export interface SeedsRow {
  interference_ms: number;
  transfer_ms: number;
  net_saving_ms: number;
  /** Where the reference experiments' transfer figure comes from. */
  transfer_basis: string;
}

export interface BreakEvenOptions {
  preset: EnginePreset;
  /** D: decoding requests on the target (≥ 1). */
  decodeBatch: number;
  /** The link (linkGbps, warmOverheadMs, coldPenaltyMs, layerwise); the model's KV size comes from the preset. */
  link?: Partial<Pick<OffloadCostModel, 'linkGbps' | 'warmOverheadMs' | 'coldPenaltyMs' | 'layerwise'>>;
}

export interface TransferCosts {
  warm_ms: number;
  cold_ms: number;
  /** Layer-wise over a warm connection, whatever the selected mode. */
  layerwise_warm_ms: number;
}

export interface BreakEvenRow {
  prompt_tokens: number;
  prefill_ms: number;
  interference_ms: number;
  transfer: TransferCosts;
  /** interference − transfer in the selected mode (bulk, or layer-wise with `link.layerwise`). */
  net_saving_warm_ms: number;
  net_saving_cold_ms: number;
  /** The reference experiments' row, compared with D = 1 in the selected mode: model − seeds, in % of the reference experiments'. */
  seeds: (SeedsRow & { interference_diff_pct: number; transfer_diff_pct: number; net_saving_diff_pct: number }) | null;
}

export interface PaysFrom {
  /** The smallest P at which offload pays; null when it never does up to max_model_len. */
  first: number | null;
  /** The smallest P from which it pays for every larger P; null when it does not pay at max_model_len. */
  always: number | null;
}

export interface BreakEvenTable {
  preset: string;
  decode_batch: number;
  /** The transfer model used (the preset's KV bytes per token and layers). */
  link: OffloadCostModel;
  rows: BreakEvenRow[];
  pays_from: { warm: PaysFrom; cold: PaysFrom };
  /** The prompts searched: 1 .. this. */
  max_prompt_tokens: number;
}

/** The engine model's time in ms to the first token of a cold `tokens`-token prompt on an idle engine. */
export function isolatedPrefillMs(preset: EnginePreset, tokens: number): number {
  let ms = 0;
  for (let done = 0; done < tokens;) {
    const chunk = Math.min(preset.maxBatchedTokens, tokens - done);
    ms += stepMs(preset, [{ tokens: chunk, context: done }], 0);
    done += chunk;
  }
  return ms;
}

/** The cost model of the link in `options`, sized by the preset's model (KV bytes per token, layers). */
export function linkModel(options: BreakEvenOptions): OffloadCostModel {
  const model = MODEL_PRESETS[options.preset.model];
  if (model === undefined)
    throw new Error(`engine preset ${options.preset.name} names unknown model ${options.preset.model}`);
  const kvBytesPerToken = 2 * model.layers * model.kvHeads * model.headDim * model.dtypeBytes;
  return resolveOffloadCost('link', { ...options.link, layers: model.layers, kvBytesPerToken });
}

const diffPct = (model: number, seeds: number): number => ((model - seeds) / seeds) * 100;

export function breakEvenTable(options: BreakEvenOptions): BreakEvenTable {
  const { preset, decodeBatch } = options;
  if (!(Number.isSafeInteger(decodeBatch) && decodeBatch >= 1))
    throw new RangeError(`decodeBatch must be an integer ≥ 1, got ${decodeBatch}`);
  const link = linkModel(options);
  const layerwise = { ...link, layerwise: true };
  const rows = BREAKEVEN_PROMPTS.map((tokens): BreakEvenRow => {
    const prefill = isolatedPrefillMs(preset, tokens);
    const interference = prefill * decodeBatch;
    const warm = transferMs(link, tokens, false);
    const cold = transferMs(link, tokens, true);
    const seeds = SEEDS_BREAKEVEN[tokens];
    return {
      prompt_tokens: tokens,
      prefill_ms: prefill,
      interference_ms: interference,
      transfer: { warm_ms: warm, cold_ms: cold, layerwise_warm_ms: transferMs(layerwise, tokens, false) },
      net_saving_warm_ms: interference - warm,
      net_saving_cold_ms: interference - cold,
      seeds:
        seeds === undefined
          ? null
          : {
              ...seeds,
              interference_diff_pct: diffPct(prefill, seeds.interference_ms),
              transfer_diff_pct: diffPct(warm, seeds.transfer_ms),
              net_saving_diff_pct: diffPct(prefill - warm, seeds.net_saving_ms),
            },
    };
  });
  const max = preset.maxModelLen;
  return {
    preset: preset.name,
    decode_batch: decodeBatch,
    link,
    rows,
    pays_from: {
      warm: paysFrom(max, (p) => isolatedPrefillMs(preset, p) * decodeBatch - transferMs(link, p, false)),
      cold: paysFrom(max, (p) => isolatedPrefillMs(preset, p) * decodeBatch - transferMs(link, p, true)),
    },
    max_prompt_tokens: max,
  };
}

/** Scans P = 1 .. max for where `saving(P)` > 0 (see the header). */
export function paysFrom(max: number, saving: (tokens: number) => number): PaysFrom {
  let first: number | null = null;
  let lastLoss = 0;
  for (let p = 1; p <= max; p++) {
    if (saving(p) > 0) first ??= p;
    else lastLoss = p;
  }
  return { first, always: lastLoss === max ? null : lastLoss + 1 };
}
