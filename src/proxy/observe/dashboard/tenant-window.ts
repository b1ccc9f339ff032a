/**
 * The dashboard's per tenant and priority class numbers over a sliding window (the tenants panel,
 * docs/flow-control.md): flow control's decisions by outcome, the queue wait of every decided
 * request, and the input and output tokens charged, each summed over the last W seconds (the
 * current partial second included, so a decision shows at once).
 *
 * Algorithm: per (tenant, class), a ring of W one-second slots tagged with their whole second, as
 * sliding-window.ts does: adding into a slot tagged with an older second clears it first, and
 * readers skip slots whose tag is outside the window, so a quiet tenant ages out with no timer.
 * Waits go into log-spaced bins (each WAIT_GROWTH times wider than the last, from 1 ms; below
 * 1 ms reads as 0): a p90 is its bin's geometric midpoint, within ±12%, and the bins of several
 * tenants add up, so the folded `other` rows get a true p90 of their merged samples.
 *
 * Outcomes are data, not code: the known ones (KNOWN_OUTCOMES) are always listed, and any other
 * outcome string an observer call brings (a new refusal cause) gets the next column index, up to
 * MAX_OUTCOMES; `outcomes` lists them in that order.
 *
 * Bounds (tenants come from clients: a header, an API key's hash): at most MAX_TENANTS tenants
 * are tracked at once, as the metrics' tenant label is bounded; a tenant past that counts as
 * `other` until a tracked one goes quiet for a whole window and is pruned (totals()). Memory is
 * about 9 KB per tracked (tenant, class) with W = 30.
 *
 * Cost: add O(1) (one or two Map lookups, a slot's clear once a second); totals() O(keys × W ×
 * (MAX_OUTCOMES + WAIT_BINS)), skipping slots outside the window; run once a second per frame.
 */
import type { FlowOutcome } from '../proxy-observer.js';

/** The outcomes every panel lists, in this order; others follow as they are seen. */
export const KNOWN_OUTCOMES: readonly FlowOutcome[] = ['admitted', 'rate_limited', 'queue_full', 'queue_timeout'];
/** Distinct outcomes counted; FlowOutcome has 4. Past this an outcome is not counted (never expected). */
const MAX_OUTCOMES = 8;
/** Named tenants tracked at once (the metrics' label bound); later ones count as OTHER. */
export const MAX_TENANTS = 1000;
/** The tenant name of everything beyond the bound (as in the metrics), and of the panel's folded rows. */
export const OTHER = 'other';

const WAIT_GROWTH = 1.25;
/** Bin 0: under 1 ms (a free slot's 0); bin b: [G^(b-1), G^b) ms; the last holds ≥ ~8.7 min. */
export const WAIT_BINS = 60;
const LOG_WAIT_GROWTH = Math.log(WAIT_GROWTH);

const second = (nowMs: number): number => Math.floor(nowMs / 1000);

/** The wait bin of a queue wait (ms). */
export function waitBin(ms: number): number {
  if (!(ms >= 1)) return 0; // also NaN and negatives
  return Math.min(WAIT_BINS - 1, 1 + Math.floor(Math.log(ms) / LOG_WAIT_GROWTH));
}

/** What a wait bin reads as (ms): 0 for bin 0, else its geometric midpoint. */
export function waitBinValue(bin: number): number {
  return bin === 0 ? 0 : WAIT_GROWTH ** (bin - 0.5);
}

/** One (tenant, class)'s sums over a window. */
export interface WindowTotals {
  /** Decisions by outcome index (TenantWindows.outcomes). */
  readonly counts: Float64Array;
  /** Decided requests by wait bin. */
  readonly waits: Float64Array;
  inputTokens: number;
  outputTokens: number;
}

export function emptyTotals(): WindowTotals {
  return {
    counts: new Float64Array(MAX_OUTCOMES),
    waits: new Float64Array(WAIT_BINS),
    inputTokens: 0,
    outputTokens: 0,
  };
}

/** into += from. */
export function addTotals(into: WindowTotals, from: WindowTotals): void {
  for (let i = 0; i < MAX_OUTCOMES; i++) into.counts[i]! += from.counts[i]!;
  for (let b = 0; b < WAIT_BINS; b++) into.waits[b]! += from.waits[b]!;
  into.inputTokens += from.inputTokens;
  into.outputTokens += from.outputTokens;
}

/** The q-quantile of the waits (ms, nearest rank), null with none. */
export function waitQuantile(totals: WindowTotals, q: number): number | null {
  let n = 0;
  for (let b = 0; b < WAIT_BINS; b++) n += totals.waits[b]!;
  if (n === 0) return null;
  const rank = Math.max(1, Math.ceil(q * n));
  let seen = 0;
  let bin = 0;
  while (bin < WAIT_BINS - 1 && (seen += totals.waits[bin]!) < rank) bin++;
  return waitBinValue(bin);
}

/** One (tenant, class)'s ring of one-second slots. */
class Series {
  private readonly tags: Float64Array;
  private readonly counts: Uint32Array;
  private readonly waits: Uint32Array;
  private readonly tokens: Float64Array;
  /** The newest second anything was added in. */
  newest = -1;

  constructor(private readonly seconds: number) {
    this.tags = new Float64Array(seconds).fill(-1);
    this.counts = new Uint32Array(seconds * MAX_OUTCOMES);
    this.waits = new Uint32Array(seconds * WAIT_BINS);
    this.tokens = new Float64Array(seconds * 2);
  }

  /** The slot of the second of `nowMs`, cleared when it held an older second. */
  private slot(nowMs: number): number {
    const s = second(nowMs);
    const k = s % this.seconds;
    if (this.tags[k] !== s) {
      this.tags[k] = s;
      this.counts.fill(0, k * MAX_OUTCOMES, (k + 1) * MAX_OUTCOMES);
      this.waits.fill(0, k * WAIT_BINS, (k + 1) * WAIT_BINS);
      this.tokens.fill(0, k * 2, k * 2 + 2);
    }
    if (s > this.newest) this.newest = s;
    return k;
  }

  decided(nowMs: number, outcome: number, waitMs: number, inputTokens: number): void {
    const k = this.slot(nowMs);
    this.counts[k * MAX_OUTCOMES + outcome]!++;
    this.waits[k * WAIT_BINS + waitBin(waitMs)]!++;
    if (inputTokens > 0) this.tokens[k * 2]! += inputTokens;
  }

  output(nowMs: number, outputTokens: number): void {
    if (outputTokens > 0) this.tokens[this.slot(nowMs) * 2 + 1]! += outputTokens;
  }

  /** Adds the slots within the window ending at `nowMs` into `into`. */
  sumInto(nowMs: number, into: WindowTotals): void {
    const now = second(nowMs);
    for (let k = 0; k < this.seconds; k++) {
      const tag = this.tags[k]!;
      if (tag > now || tag <= now - this.seconds) continue;
      for (let i = 0; i < MAX_OUTCOMES; i++) into.counts[i]! += this.counts[k * MAX_OUTCOMES + i]!;
      for (let b = 0; b < WAIT_BINS; b++) into.waits[b]! += this.waits[k * WAIT_BINS + b]!;
      into.inputTokens += this.tokens[k * 2]!;
      into.outputTokens += this.tokens[k * 2 + 1]!;
    }
  }
}

/** Every tracked (tenant, class)'s window, fed by DashboardObserver.onFlow and onFlowOutput. */
export class TenantWindows {
  /** Outcome names by column index: KNOWN_OUTCOMES, then others in the order first seen. */
  readonly outcomes: string[] = [...KNOWN_OUTCOMES];
  private readonly outcomeIndex = new Map<string, number>(KNOWN_OUTCOMES.map((o, i) => [o, i]));
  private readonly tenants = new Map<string, Map<string, Series>>();

  constructor(readonly seconds: number) {
    if (!Number.isSafeInteger(seconds) || seconds < 1 || seconds > 3600)
      throw new RangeError(`the tenants window must be an integer number of seconds in 1..3600, got ${seconds}`);
  }

  /** Tenants tracked now: at most MAX_TENANTS named ones, plus `other` past the bound. */
  get size(): number {
    return this.tenants.size;
  }

  decided(nowMs: number, tenant: string, priority: string, outcome: string, waitMs: number, inputTokens: number): void {
    let index = this.outcomeIndex.get(outcome);
    if (index === undefined) {
      if (this.outcomes.length >= MAX_OUTCOMES) return;
      index = this.outcomes.push(outcome) - 1;
      this.outcomeIndex.set(outcome, index);
    }
    this.series(tenant, priority).decided(nowMs, index, waitMs, inputTokens);
  }

  output(nowMs: number, tenant: string, priority: string, outputTokens: number): void {
    this.series(tenant, priority).output(nowMs, outputTokens);
  }

  /**
   * Every tracked (tenant, class) with something in the window, and its sums; a tenant with
   * nothing in the window is forgotten (its place under MAX_TENANTS freed).
   */
  totals(nowMs: number): Array<{ tenant: string; priority: string; totals: WindowTotals }> {
    const oldest = second(nowMs) - this.seconds;
    const out: Array<{ tenant: string; priority: string; totals: WindowTotals }> = [];
    for (const [tenant, classes] of this.tenants) {
      for (const [priority, series] of classes) {
        if (series.newest <= oldest) {
          classes.delete(priority);
          continue;
        }
        const totals = emptyTotals();
        series.sumInto(nowMs, totals);
        out.push({ tenant, priority, totals });
      }
      if (classes.size === 0) this.tenants.delete(tenant);
    }
    return out;
  }

  private series(tenant: string, priority: string): Series {
    let classes = this.tenants.get(tenant);
    if (classes === undefined) {
      if (this.tenants.size >= MAX_TENANTS && tenant !== OTHER) return this.series(OTHER, priority);
      classes = new Map();
      this.tenants.set(tenant, classes);
    }
    let series = classes.get(priority);
    if (series === undefined) {
      series = new Series(this.seconds);
      classes.set(priority, series);
    }
    return series;
  }
}
