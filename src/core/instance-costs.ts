/**
 * InstanceCosts — min_ttft's per-instance prices, as the public Router keeps and pushes them
 * into its core (native/core/instance-costs.h; docs/policies.md "Learned costs").
 *
 * Without costs, every instance is priced in token-equivalents of prefill work with the
 * policy's batchWeight, as min_ttft always was. With costs, min_ttft's score on an instance is
 * its predicted TTFT in seconds: overhead + prefill seconds per token × work × (1 + interference
 * × requests). Mixing the two units in one fleet would compare seconds with tokens, so the
 * table has a fleet default: once set (setDefault), every instance without costs of its own is
 * priced with it, new instances included, and an instance's own costs cleared fall back to it.
 * A CostLearner sets the default to its prior, then pushes each instance's estimate.
 *
 * Invariants: the core holds, for every live slot, exactly `own ?? default ?? none`; the values
 * pushed were checked here first (a RangeError naming the field, nothing changed on refusal).
 * Complexity: O(1) per instance change, O(instances) for a new default.
 */
import { COST_FIELDS, COST_INTERFERENCE, COST_OVERHEAD_SECONDS, COST_SECONDS_PER_TOKEN } from './core-router.js';
import type { CoreRouter } from './core-router.js';
import { invalidType, invalidValue } from './errors.js';
import { checkObject } from './validate.js';

/** What min_ttft prices one instance with: its predicted TTFT in seconds. */
export interface RoutingCosts {
  /** Prefill seconds per token-equivalent of work (> 0). */
  prefillSecondsPerToken: number;
  /** Seconds of every first token that do not grow with the work (>= 0). */
  prefillOverheadSeconds: number;
  /**
   * How much each request on the instance slows its prefill (>= 0): its own batchWeight.
   * Omitted: the policy's batchWeight, following setPolicy().
   */
  interference?: number;
}

/** Where the costs of an instance come from: its own, the fleet default, or none (token-equivalents). */
export type CostSource = 'instance' | 'default' | 'none';

function checkCosts(field: string, costs: RoutingCosts): Readonly<RoutingCosts> {
  const c = checkObject(field, costs);
  const finite = (key: keyof RoutingCosts, positive: boolean): number => {
    const v = c[key];
    if (key === 'interference' && v === undefined) return NaN;
    if (typeof v !== 'number') throw invalidType(`${field}.${key}`, 'a number', v);
    if (!(Number.isFinite(v) && (positive ? v > 0 : v >= 0)))
      throw invalidValue(`${field}.${key}`, `a finite number ${positive ? '>' : '>='} 0`, v);
    return v;
  };
  const interference = finite('interference', false);
  return Object.freeze({
    prefillSecondsPerToken: finite('prefillSecondsPerToken', true),
    prefillOverheadSeconds: finite('prefillOverheadSeconds', false),
    ...(Number.isNaN(interference) ? {} : { interference }),
  });
}

export class InstanceCostTable {
  private fleetDefault: Readonly<RoutingCosts> | null = null;
  private readonly own: Array<Readonly<RoutingCosts> | undefined> = [];
  private readonly buf = new Float64Array(COST_FIELDS);

  constructor(private readonly core: CoreRouter) {}

  /** The fleet default for every instance without its own (null: token-equivalents). */
  setDefault(costs: RoutingCosts | null, liveSlots: Iterable<number>): void {
    this.fleetDefault = costs === null ? null : checkCosts('costs', costs);
    for (const slot of liveSlots) if (this.own[slot] === undefined) this.push(slot);
  }

  /** An instance's own costs (null: back to the fleet default). */
  set(slot: number, costs: RoutingCosts | null): void {
    this.own[slot] = costs === null ? undefined : checkCosts('costs', costs);
    this.push(slot);
  }

  /** A new instance in `slot`: priced with the default (the core starts it at none). */
  added(slot: number): void {
    this.own[slot] = undefined;
    if (this.fleetDefault !== null) this.push(slot);
  }

  removed(slot: number): void {
    this.own[slot] = undefined;
  }

  /** The costs in force on the slot, and where they come from; null costs: token-equivalents. */
  inForce(slot: number): { costs: Readonly<RoutingCosts> | null; source: CostSource } {
    const own = this.own[slot];
    if (own !== undefined) return { costs: own, source: 'instance' };
    return this.fleetDefault === null
      ? { costs: null, source: 'none' }
      : { costs: this.fleetDefault, source: 'default' };
  }

  private push(slot: number): void {
    const c = this.own[slot] ?? this.fleetDefault;
    if (c === null) {
      this.core.setInstanceCosts(slot, null);
      return;
    }
    this.buf[COST_SECONDS_PER_TOKEN] = c.prefillSecondsPerToken;
    this.buf[COST_OVERHEAD_SECONDS] = c.prefillOverheadSeconds;
    this.buf[COST_INTERFERENCE] = c.interference ?? NaN; // NaN: the policy's batchWeight
    this.core.setInstanceCosts(slot, this.buf);
  }
}
