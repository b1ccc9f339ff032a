/**
 * `router.decision`: the last route()'s decision, read in place from the typed arrays the core
 * writes (core-router.ts DECISION_* and OFFLOAD_*), so a route allocates nothing to report it.
 * `decision.offload` is a frozen constant for a policy without the offload layer and one reused
 * view over the same arrays otherwise: either way valid until the next route() or explain().
 */
import { OFFLOAD_OUTCOMES, REASONS, type ReasonName } from './codes.js';
import {
  TERM_COUNT,
  TERM_PENDING_PREFILL,
  TERM_REQUESTS,
  TERM_UNCACHED,
  DECISION_COLD_PAIR,
  DECISION_OFFLOAD,
  DECISION_PREFILL_SLOT,
  DECISION_REASON,
  DECISION_SLOT,
  OFFLOAD_EXTRA_PREFILL_MS,
  OFFLOAD_INTERFERENCE_MS,
  OFFLOAD_PREFILL_TICKET,
  OFFLOAD_TRANSFER_MS,
} from './core-router.js';
import { predictCachedTokens } from './predicted-cached.js';
import type { Decision, OffloadDecision, OffloadOutcome } from './types.js';

// The codes' table and the public type must name the same outcomes.
const OUTCOMES: readonly OffloadOutcome[] = OFFLOAD_OUTCOMES;

/** The offload part of a decision by a policy without the offload layer. */
export const NO_OFFLOAD: OffloadDecision = Object.freeze({
  outcome: 'off',
  prefillInstance: undefined,
  prefillIndex: -1,
  prefillTicket: -1,
  interferenceMs: 0,
  transferMs: 0,
  extraPrefillMs: 0,
  coldPair: false,
});

/**
 * The offload layer's part of the last decision, read from the decision arrays. Its fields are
 * own enumerable accessors, so a spread (`{ ...decision.offload }`), JSON.stringify and test
 * matchers see plain values.
 */
class OffloadView implements OffloadDecision {
  declare readonly outcome: OffloadOutcome;
  declare readonly prefillInstance: string | undefined;
  declare readonly prefillIndex: number;
  declare readonly prefillTicket: number;
  declare readonly interferenceMs: number;
  declare readonly transferMs: number;
  declare readonly extraPrefillMs: number;
  declare readonly coldPair: boolean;
  constructor(buf: Int32Array, values: Float64Array, names: Array<string | undefined>) {
    const field = <T>(get: () => T): PropertyDescriptor => ({ enumerable: true, get });
    Object.defineProperties(this, {
      outcome: field(() => OUTCOMES[buf[DECISION_OFFLOAD]!]!),
      prefillInstance: field(() => {
        const slot = buf[DECISION_PREFILL_SLOT]!;
        return slot < 0 ? undefined : names[slot];
      }),
      prefillIndex: field(() => buf[DECISION_PREFILL_SLOT]!),
      prefillTicket: field(() => values[OFFLOAD_PREFILL_TICKET]!),
      interferenceMs: field(() => values[OFFLOAD_INTERFERENCE_MS]!),
      transferMs: field(() => values[OFFLOAD_TRANSFER_MS]!),
      extraPrefillMs: field(() => values[OFFLOAD_EXTRA_PREFILL_MS]!),
      coldPair: field(() => buf[DECISION_COLD_PAIR] === 1),
    });
  }
}

/** The last decision, read from the decision array without allocating. */
export class DecisionView implements Decision {
  ticket = -1;
  /** The route's explain buffer of matched blocks (the Router swaps it when it grows). */
  matched: Int32Array;
  /** The route's explain buffer of candidate terms, TERM_COUNT per slot (swapped with `matched`). */
  terms: Float64Array;
  /** The decided request's tokens per block, and its prompt tokens (NaN: not given). */
  blockTokens = 0;
  promptTokens = NaN;
  private readonly offloadView: OffloadView;
  constructor(
    private readonly buf: Int32Array,
    offloadValues: Float64Array,
    private readonly names: Array<string | undefined>,
    matched: Int32Array,
    terms: Float64Array,
  ) {
    this.matched = matched;
    this.terms = terms;
    this.offloadView = new OffloadView(buf, offloadValues, names);
  }
  get index(): number {
    return this.buf[DECISION_SLOT]!;
  }
  get instance(): string {
    const slot = this.buf[DECISION_SLOT]!;
    return (slot < 0 ? undefined : this.names[slot]) ?? '';
  }
  get reason(): ReasonName {
    return REASONS[this.buf[DECISION_REASON]!]!;
  }
  get predictedCachedTokens(): number {
    const slot = this.buf[DECISION_SLOT]!;
    return slot < 0 ? 0 : predictCachedTokens(this.matched[slot]!, this.blockTokens, this.promptTokens);
  }
  /** Prompt blocks the chosen instance holds (the match the prediction is made of); 0 when none was chosen. */
  get matchedBlocks(): number {
    const slot = this.buf[DECISION_SLOT]!;
    return slot < 0 ? 0 : this.matched[slot]!;
  }
  get predictedUncachedTokens(): number {
    return this.chosenTerm(TERM_UNCACHED);
  }
  get pendingPrefillTokens(): number {
    return this.chosenTerm(TERM_PENDING_PREFILL);
  }
  get requestsAhead(): number {
    return this.chosenTerm(TERM_REQUESTS);
  }
  /** A term the decision read of the chosen instance; 0 when nothing was chosen. */
  private chosenTerm(term: number): number {
    const slot = this.buf[DECISION_SLOT]!;
    return slot < 0 ? 0 : this.terms[TERM_COUNT * slot + term]!;
  }
  get offload(): OffloadDecision {
    return this.buf[DECISION_OFFLOAD] === 0 ? NO_OFFLOAD : this.offloadView;
  }
}
