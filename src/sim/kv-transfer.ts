/**
 * The P→D KV link of a simulated fleet: how long moving a prompt's KV from a prefill instance to
 * a decode instance takes, timed by the shared cost model (src/core/offload-cost.ts transferMs,
 * so the engines are charged what the router's offload layer priced), and which pairs are warm.
 *
 *   transfer(from, to, tokens) = transferMs(model, tokens, cold)
 *     cold: the first transfer from `from` to `to` on this link (a new connection, the reference experiments'
 *     "cold connection penalty"); every later one of the pair is warm. Pairs are ordered:
 *     P→D and D→P are two connections, as the router's coldPair counts them.
 *
 * `tokens` is what the decode instance lacks (EngineModel.lackedTokens): it keeps its own cached
 * prefix and pulls only the rest, as vLLM's connectors do. O(1) per transfer; one Set entry per
 * pair ever used.
 */
import { resolveOffloadCost, transferMs, type OffloadCostModel } from '../core/offload-cost.js';

export interface KvTransferTiming {
  /** Milliseconds of engine time the transfer takes. */
  ms: number;
  /** It was the pair's first transfer. */
  cold: boolean;
}

export class KvTransferLink {
  readonly model: Readonly<OffloadCostModel>;
  private readonly warm = new Set<string>();

  /** `model` is checked (resolveOffloadCost, errors naming `field`) and filled from the defaults. */
  constructor(model: Partial<OffloadCostModel> = {}, field = 'transferCost') {
    this.model = Object.freeze(resolveOffloadCost(field, model));
  }

  /** Whether the next transfer from `from` to `to` would be cold. */
  isCold(from: string | number, to: string | number): boolean {
    return !this.warm.has(`${from}\u0000${to}`);
  }

  /** Times a transfer of `tokens` tokens of KV from `from` to `to`, and warms the pair. */
  transfer(from: string | number, to: string | number, tokens: number): KvTransferTiming {
    const key = `${from}\u0000${to}`;
    const cold = !this.warm.has(key);
    this.warm.add(key);
    return { ms: transferMs(this.model, tokens, cold), cold };
  }

  /** Pairs used so far. */
  get pairs(): number {
    return this.warm.size;
  }
}
