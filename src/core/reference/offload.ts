/**
 * The offload layer's decision, the twin of native/core/offload.h (docs/policies.md "The offload
 * layer"): after the base policy picked the target T, whether T also prefills the request or an
 * instance free of decodes does and ships the KV to T. Costs come from src/core/offload-cost.ts,
 * the one cost model every part of kvroute reads.
 *
 *   decode batch of T = 0             → not_decoding
 *   uncached on T ≤ thresholdTokens   → below_threshold
 *   P = least-loaded candidate ≠ T with decode batch 0 (fewest requests, then least pending
 *       prefill, then lowest slot); none → no_prefill_instance (transfer priced warm)
 *   interferenceMs > transferMs(pair (P, T) cold?) → offload, else colocate
 *
 * With chargePrefill (opt-in; off, the rule above holds bit for bit), P is the decode-free
 * candidate minimising ownMs(P) = prefillMs(n_P, input − n_P) + prefillMs(pendingPrefill_P, 0)
 * (ties: fewest requests, least pending prefill, lowest slot), extraPrefillMs = ownMs(P) −
 * prefillMs(n, c), and offload needs interferenceMs > transferMs + max(0, extraPrefillMs).
 *
 * A pair is warm once a dispatched offload used it; removing either instance makes it cold.
 * O(candidates) per decision.
 */
import { OffloadOutcomeCode } from '../codes.js';
import { interferenceMs, prefillMs, transferMs, type OffloadCostModel } from '../offload-cost.js';
import type { EffectiveState } from './engine-state.js';

export interface OffloadResult {
  /** An OffloadOutcomeCode. */
  outcome: number;
  /** `offload` only; else -1. */
  prefillSlot: number;
  interferenceMs: number;
  transferMs: number;
  /** chargePrefill with a P only: ownMs(P) − prefillMs(n, c); else 0. */
  extraPrefillMs: number;
  coldPair: boolean;
}

/** Which (prefill slot, decode slot) pairs have carried an offload. */
export class ReferenceWarmPairs {
  private readonly pairs = new Map<number, Set<number>>();

  warm(prefill: number, decode: number): boolean {
    return this.pairs.get(prefill)?.has(decode) ?? false;
  }

  mark(prefill: number, decode: number): void {
    let row = this.pairs.get(prefill);
    if (row === undefined) this.pairs.set(prefill, (row = new Set()));
    row.add(decode);
  }

  /** Every pair with `slot` on either side becomes cold (its instance was removed). */
  forget(slot: number): void {
    this.pairs.delete(slot);
    for (const row of this.pairs.values()) row.delete(slot);
  }
}

export interface OffloadContext {
  model: OffloadCostModel;
  target: number;
  /** The request's candidate slots, ascending. */
  candidates: readonly number[];
  eff: readonly EffectiveState[];
  uncached: readonly number[];
  inputTokens: number;
  pairs: ReferenceWarmPairs;
}

export function decideOffload(c: OffloadContext): OffloadResult {
  const r: OffloadResult = {
    outcome: OffloadOutcomeCode.NotDecoding,
    prefillSlot: -1,
    interferenceMs: 0,
    transferMs: 0,
    extraPrefillMs: 0,
    coldPair: false,
  };
  const t = c.eff[c.target]!;
  if (!(t.decodeBatch > 0)) return r;
  const n = c.uncached[c.target]!;
  if (n <= c.model.thresholdTokens) {
    r.outcome = OffloadOutcomeCode.BelowThreshold;
    return r;
  }
  r.interferenceMs = interferenceMs(c.model, n, c.inputTokens - n, t.decodeBatch);
  const { best, ownMs } = choosePrefill(c);
  if (best < 0) {
    r.outcome = OffloadOutcomeCode.NoPrefillInstance;
    r.transferMs = transferMs(c.model, n, false);
    return r;
  }
  r.coldPair = !c.pairs.warm(best, c.target);
  r.transferMs = transferMs(c.model, n, r.coldPair);
  let cost = r.transferMs;
  if (c.model.chargePrefill) {
    r.extraPrefillMs = ownMs - prefillMs(c.model, n, c.inputTokens - n);
    cost = r.transferMs + Math.max(0, r.extraPrefillMs);
  }
  if (r.interferenceMs > cost) {
    r.outcome = OffloadOutcomeCode.Offload;
    r.prefillSlot = best;
  } else r.outcome = OffloadOutcomeCode.Colocate;
  return r;
}

/**
 * The least-loaded decode-free candidate other than the target (-1 if none), or with
 * chargePrefill the one whose own prefill (its queue, then the request's uncached part) finishes
 * first, ties by load; `ownMs` is that time (chargePrefill only).
 */
function choosePrefill(c: OffloadContext): { best: number; ownMs: number } {
  let best = -1;
  let bestOwnMs = 0;
  for (const s of c.candidates) {
    const e = c.eff[s]!;
    if (s === c.target || e.decodeBatch > 0) continue;
    const b = best < 0 ? undefined : c.eff[best]!;
    const lessLoaded =
      b === undefined ||
      e.numRequests < b.numRequests ||
      (e.numRequests === b.numRequests && e.pendingPrefill < b.pendingPrefill);
    if (!c.model.chargePrefill) {
      if (lessLoaded) best = s;
      continue;
    }
    const u = c.uncached[s]!;
    const own = prefillMs(c.model, u, c.inputTokens - u) + prefillMs(c.model, e.pendingPrefill, 0);
    if (best < 0 || own < bestOwnMs || (own === bestOwnMs && lessLoaded)) {
      best = s;
      bestOwnMs = own;
    }
  }
  return { best, ownMs: bestOwnMs };
}
