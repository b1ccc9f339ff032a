/**
 * CostLearner: learns each instance's cost coefficients from what a Router already sees per
 * ticket (docs/policies.md "Learned costs"), off the routing hot path. The embedder (or the proxy)
 * tells it what it tells the router, right after:
 *
 *   const ticket = router.route(request);  learner.routed(ticket);
 *   router.onFirstToken(ticket);            learner.firstToken(ticket);
 *   router.complete(ticket);                learner.completed(ticket, { outputTokens });
 *   router.abort(ticket);                   learner.aborted(ticket);
 *
 * routed() reads the decision in place (`router.decision`: the chosen instance, its predicted
 * uncached and cached tokens, the prefill and requests ahead of the request there) and keeps
 * those facts per ticket; nothing in route() itself changes or waits. A ticket becomes an
 * observation only when it completes: its TTFT (route → first token) feeds the instance's TTFT
 * model, and (finish − first token) / (output tokens − 1) its decode model. So an aborted
 * request, or a retry's failed attempt, is never an observation. An offloaded request's TTFT
 * spans two instances and is not one either.
 *
 * With `steer: true` the learner also prices the router with what it learns (docs/policies.md
 * "Learned costs"): at construction the router's fleet default becomes the prior, and each
 * observation pushes that instance's new prefill cost and overhead (Router.setInstanceCosts), so
 * min_ttft scores predicted seconds per instance. The interference it learns is reported, not
 * pushed: min_ttft keeps the policy's batchWeight, a guard of the tail tuned as such (the learned
 * one is lower and gave a worse TTFT p90: docs/policies.md). It steers with an instance's estimate
 * only while the model fits that instance (robust residual scale <= `steerMaxResidual`, 0.1): an
 * overloaded instance, whose first tokens wait for KV and preemptions the model has no term for,
 * is priced with the fleet default instead. The default is the prior, then the median of the
 * fitted instances; an instance within `fleetBand` (±10%) of it is priced with it too, so a
 * uniform fleet stays uniformly priced and only real differences in speed move decisions.
 * Without `steer` the learner only watches, and the router keeps its fixed token-equivalent
 * prices.
 *
 * Invariants: at most `maxOpen` tickets are remembered (the oldest forgotten first, as a ticket
 * whose complete() never comes must not leak); a ticket unknown to the learner is ignored, as
 * the router ignores repeats. Times are ms on the learner's clock (`now`, default
 * performance.now()); a simulator passes its virtual times instead.
 * Complexity: O(1) per call, but a steering completed() is O(instances × log instances) (the
 * fleet median) plus, when the median moves by more than 1%, one push per instance; estimates()
 * is O(instances).
 */
import { invalidValue, rangeError } from '../errors.js';
import type { RoutingCosts } from '../instance-costs.js';
import type { Router } from '../router.js';
import {
  DEFAULT_COST_PRIOR,
  DEFAULT_ESTIMATOR_OPTIONS,
  InstanceCostEstimator,
  checkCostPrior,
  type CostCoefficients,
  type CostEstimatorOptions,
  type InstanceCostEstimate,
} from './instance-cost-estimator.js';

export interface CostLearnerOptions extends Partial<CostEstimatorOptions> {
  /** The prior of every instance (default: the H20 preset's, DEFAULT_COST_PRIOR). */
  prior?: CostCoefficients;
  /** Per-instance priors, by instance id, over `prior`. */
  priors?: Record<string, CostCoefficients>;
  /** The clock, ms (default performance.now()). */
  now?: () => number;
  /** Open tickets remembered at most (default 65,536). */
  maxOpen?: number;
  /** Push every estimate into the router, so min_ttft prices each instance with it (default false). */
  steer?: boolean;
  /**
   * Steer with an instance's estimate only while its TTFT model fits it: the robust scale of its
   * relative residuals at most this (default 0.1); past it the instance is priced with the fleet default.
   */
  steerMaxResidual?: number;
  /**
   * An instance whose learned prefill cost is within ± this of the fleet's median (over the
   * instances whose model fits) is priced with the median instance's costs, the router's fleet
   * default (default 0.1): a uniform fleet stays uniformly priced, so estimation noise of a few
   * percent moves no decision.
   */
  fleetBand?: number;
}

interface OpenTicket {
  instance: string;
  routedAtMs: number;
  firstTokenAtMs: number;
  pendingPrefillTokens: number;
  ownTokens: number;
  requests: number;
}

export class CostLearner {
  private readonly open = new Map<number, OpenTicket>();
  private readonly estimators = new Map<string, InstanceCostEstimator>();
  private readonly options: CostEstimatorOptions;
  private readonly now: () => number;
  private readonly maxOpen: number;
  private skippedCount = 0;
  /** Whether this learner prices the router with its estimates (`steer`). */
  readonly steer: boolean;
  private readonly steerMaxResidual: number;
  private readonly fleetBand: number;
  /** The costs each instance would steer with on its own (those whose model fits it). */
  private readonly fitted = new Map<string, RoutingCosts>();
  /** The router's fleet default as last pushed: the prior, then the fitted median. */
  private fleetDefault: RoutingCosts;

  constructor(
    private readonly router: Router,
    private readonly learnerOptions: CostLearnerOptions = {},
  ) {
    this.options = { ...DEFAULT_ESTIMATOR_OPTIONS, ...withoutUndefined(learnerOptions) };
    const o = this.options;
    if (!(o.forgetting > 0 && o.forgetting <= 1)) throw invalidValue('forgetting', 'a number in (0, 1]', o.forgetting);
    if (!(o.priorStrength > 0 && Number.isFinite(o.priorStrength)))
      throw invalidValue('priorStrength', 'a finite number > 0', o.priorStrength);
    if (!(o.clip > 0 && Number.isFinite(o.clip))) throw invalidValue('clip', 'a finite number > 0', o.clip);
    if (!(Number.isInteger(o.persistence) && o.persistence >= 1))
      throw invalidValue('persistence', 'an integer >= 1', o.persistence);
    if (!(o.clampRatio > 1 && Number.isFinite(o.clampRatio)))
      throw invalidValue('clampRatio', 'a finite number > 1', o.clampRatio);
    if (learnerOptions.prior !== undefined) checkCostPrior('prior', learnerOptions.prior);
    for (const [id, prior] of Object.entries(learnerOptions.priors ?? {})) checkCostPrior(`priors.${id}`, prior);
    this.now = learnerOptions.now ?? (() => performance.now());
    this.maxOpen = learnerOptions.maxOpen ?? 65_536;
    if (!(Number.isInteger(this.maxOpen) && this.maxOpen >= 1))
      throw invalidValue('maxOpen', 'an integer >= 1', this.maxOpen);
    this.steer = learnerOptions.steer === true;
    this.steerMaxResidual = learnerOptions.steerMaxResidual ?? 0.1;
    this.fleetBand = learnerOptions.fleetBand ?? 0.1;
    if (!(this.fleetBand >= 0)) throw invalidValue('fleetBand', 'a number >= 0', this.fleetBand);
    if (!(this.steerMaxResidual >= 0)) throw invalidValue('steerMaxResidual', 'a number >= 0', this.steerMaxResidual);
    this.fleetDefault = routingCostsOf(learnerOptions.prior ?? DEFAULT_COST_PRIOR);
    if (this.steer) {
      router.setDefaultCosts(this.fleetDefault);
      for (const id of router.instances()) this.push(id);
    }
  }

  /** Records the facts of the route() that returned `ticket`; call it before the next route(). */
  routed(ticket: number, atMs: number = this.now()): void {
    const d = this.router.decision;
    if (d.ticket !== ticket || d.instance === '')
      throw rangeError(
        'ERR_KVROUTE_UNKNOWN_TICKET',
        `ticket ${ticket} is not the last route()'s: call routed() right after route()`,
      );
    checkTime('atMs', atMs);
    if (d.offload.outcome === 'offload') return;
    const uncached = d.predictedUncachedTokens;
    const cached = d.predictedCachedTokens;
    const attention = this.router.policy.attentionWeight;
    if (this.open.size >= this.maxOpen) this.open.delete(this.open.keys().next().value!);
    this.open.set(ticket, {
      instance: d.instance,
      routedAtMs: atMs,
      firstTokenAtMs: NaN,
      pendingPrefillTokens: d.pendingPrefillTokens,
      ownTokens: uncached * (1 + attention * (cached + uncached / 2)),
      requests: d.requestsAhead,
    });
  }

  /**
   * The TTFT the instance's current estimate predicts for a ticket routed() and not yet completed,
   * seconds (the same model the estimate is fitted to); undefined for a ticket it does not hold.
   */
  predictedTtftSeconds(ticket: number): number | undefined {
    const t = this.open.get(ticket);
    if (t === undefined) return undefined;
    return this.estimatorOf(t.instance).predictedTtftSeconds(t.pendingPrefillTokens + t.ownTokens, t.requests);
  }

  /** The ticket's first token came (repeats keep the first). */
  firstToken(ticket: number, atMs: number = this.now()): void {
    checkTime('atMs', atMs);
    const t = this.open.get(ticket);
    if (t !== undefined && Number.isNaN(t.firstTokenAtMs)) t.firstTokenAtMs = atMs;
  }

  /**
   * The ticket completed: its TTFT, and with `outputTokens` ≥ 2 its decode time per token, become
   * observations of its instance. A TTFT that is not positive (a coarse clock, or times out of
   * order) is skipped and counted in `skipped`, never thrown into the caller's completion path.
   */
  completed(ticket: number, facts: { outputTokens?: number; atMs?: number } = {}): void {
    const atMs = facts.atMs ?? this.now();
    checkTime('atMs', atMs);
    const t = this.open.get(ticket);
    if (t === undefined) return;
    this.open.delete(ticket);
    if (Number.isNaN(t.firstTokenAtMs)) return;
    const ttftSeconds = (t.firstTokenAtMs - t.routedAtMs) / 1000;
    // A first token at or before the route is the clock's doing, not the instance's: no observation.
    if (!(ttftSeconds > 0)) {
      this.skippedCount += 1;
      return;
    }
    const estimator = this.estimatorOf(t.instance);
    estimator.observeTtft({
      ttftSeconds,
      pendingPrefillTokens: t.pendingPrefillTokens,
      ownTokens: t.ownTokens,
      requests: t.requests,
    });
    if (this.steer) this.push(t.instance);
    const out = facts.outputTokens;
    if (out !== undefined && out >= 2 && atMs > t.firstTokenAtMs)
      estimator.observeDecode({ secondsPerToken: (atMs - t.firstTokenAtMs) / 1000 / (out - 1), batch: t.requests + 1 });
  }

  /** The ticket was aborted (or failed, or is being retried): it is forgotten, never an observation. */
  aborted(ticket: number): void {
    this.open.delete(ticket);
  }

  /**
   * A mean decode time per token at a mean batch, e.g. from the deltas of an engine's
   * `vllm:inter_token_latency_seconds` histogram (src/state/decode-time-samples.ts). Throws
   * ERR_KVROUTE_UNKNOWN_INSTANCE for an instance the router does not have, and naming the field
   * for a bad time or batch.
   */
  observeDecode(instance: string, secondsPerToken: number, batch: number): void {
    if (!this.router.instances().includes(instance))
      throw rangeError('ERR_KVROUTE_UNKNOWN_INSTANCE', `instance ${JSON.stringify(instance)} is not known`);
    this.estimatorOf(instance).observeDecode({ secondsPerToken, batch });
  }

  /** One instance's estimate (its prior before any observation). */
  estimate(instance: string): InstanceCostEstimate {
    return this.estimatorOf(instance).estimate();
  }

  /** Every current instance's estimate, by id. */
  estimates(): Record<string, InstanceCostEstimate> {
    const out: Record<string, InstanceCostEstimate> = {};
    for (const id of this.router.instances()) out[id] = this.estimate(id);
    return out;
  }

  /** Completed tickets whose TTFT was not positive, so not an observation. */
  get skipped(): number {
    return this.skippedCount;
  }

  /** Tickets routed and not yet completed or aborted. */
  get openTickets(): number {
    return this.open.size;
  }

  /** Prices `instance` in the router with its estimate, when it is still there (it may have left). */
  private push(instance: string): void {
    if (!this.router.hasInstance(instance)) return;
    const estimate = this.estimatorOf(instance).estimate();
    // A model that does not fit the instance (overload: KV waits and preemptions the TTFT model has
    // no term for) learns costs that misprice it: the fleet default prices it then.
    if (estimate.ttftResidualScale > this.steerMaxResidual) this.fitted.delete(instance);
    else this.fitted.set(instance, routingCostsOf(estimate));
    const median = this.fleetMedian();
    // The default follows the median, pushed when it moves by more than 1% (an O(fleet) push).
    if (median !== undefined && relativeChange(median, this.fleetDefault) > 0.01) {
      this.fleetDefault = median;
      this.router.setDefaultCosts(median);
    }
    const own = this.fitted.get(instance);
    const inBand =
      own === undefined ||
      Math.abs(own.prefillSecondsPerToken / this.fleetDefault.prefillSecondsPerToken - 1) <= this.fleetBand;
    this.router.setInstanceCosts(instance, inBand ? null : own);
  }

  /**
   * The costs of the median instance by prefill cost, over the instances whose model fits that
   * are still in the router. O(n log n) in the fleet, per observation, off the routing path.
   */
  private fleetMedian(): RoutingCosts | undefined {
    const costs: RoutingCosts[] = [];
    for (const [id, c] of this.fitted) {
      if (this.router.hasInstance(id)) costs.push(c);
      else this.fitted.delete(id);
    }
    costs.sort((a, b) => a.prefillSecondsPerToken - b.prefillSecondsPerToken);
    return costs[(costs.length - 1) >> 1];
  }

  private estimatorOf(instance: string): InstanceCostEstimator {
    let estimator = this.estimators.get(instance);
    if (estimator === undefined) {
      const prior = this.learnerOptions.priors?.[instance] ?? this.learnerOptions.prior ?? DEFAULT_COST_PRIOR;
      estimator = new InstanceCostEstimator(prior, this.options);
      this.estimators.set(instance, estimator);
    }
    return estimator;
  }
}

/** What the router is told of an estimate: its prefill cost and overhead; interference stays the policy's. */
function routingCostsOf(c: CostCoefficients): RoutingCosts {
  return { prefillSecondsPerToken: c.prefillSecondsPerToken, prefillOverheadSeconds: c.prefillOverheadSeconds };
}

/** The larger relative change of the two costs a steering learner pushes. */
function relativeChange(a: RoutingCosts, b: RoutingCosts): number {
  const change = (x: number, y: number): number => (y === 0 ? (x === 0 ? 0 : Infinity) : Math.abs(x / y - 1));
  return Math.max(
    change(a.prefillSecondsPerToken, b.prefillSecondsPerToken),
    change(a.prefillOverheadSeconds, b.prefillOverheadSeconds),
  );
}

function checkTime(field: string, value: number): void {
  if (!Number.isFinite(value)) throw invalidValue(field, 'a finite number of ms', value);
}

function withoutUndefined(o: Partial<CostEstimatorOptions>): Partial<CostEstimatorOptions> {
  const out: Partial<CostEstimatorOptions> = {};
  for (const key of ['forgetting', 'priorStrength', 'clip', 'persistence', 'clampRatio'] as const)
    if (o[key] !== undefined) out[key] = o[key];
  return out;
}
