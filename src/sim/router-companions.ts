/**
 * What runs beside each simulated router replica, off its routing path, told what the replica is
 * told at the same virtual instants: its cost learner (sim-cost-learning.ts: learned costs,
 * steering under `costs: 'learned'`), its SessionReturns (src/core/session-returns.ts: the
 * expected return of sessions between turns, with `sessionReturns`) and, with `syncLoad`, the load
 * plane between replicas (replica-sync.ts: peers' in-flight load and session placements). The simulator calls these
 * hooks and nothing else of either, so adding a companion touches this file, not the event loop.
 *
 * Invariants: arriving() precedes the replica's route() of a session's request (so peers' due
 * changes are applied before it), routed() follows it before any other route(); completed() follows the replica's complete(). Times are virtual
 * seconds, handed to the companions as ms.
 */
import type { Router } from '../core/router.js';
import { SessionReturns } from '../core/session-returns.js';
import type { EnginePreset } from './engine-preset.js';
import { ReplicaSync } from './replica-sync.js';
import { SimCostLearning, type InstanceLearnedCost } from './sim-cost-learning.js';

export { checkCostMode } from './sim-cost-learning.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';

export class RouterCompanions {
  private readonly learning: SimCostLearning | undefined;
  private readonly returns: SessionReturns[] | undefined;
  private readonly sync: ReplicaSync | undefined;

  constructor(
    options: {
      preset?: string;
      learnCosts?: boolean;
      costs?: CostMode;
      sessionReturns?: boolean;
      syncLoad?: boolean;
      syncDelayMs?: number;
    },
    routers: readonly Router[],
    presets: readonly EnginePreset[],
    instanceIds: readonly string[],
  ) {
    this.learning = SimCostLearning.forRun(options, routers, presets, instanceIds);
    if (options.sessionReturns !== false)
      this.returns = routers.map((router) => new SessionReturns(router, { now: () => 0 }));
    if (options.syncLoad === true && routers.length > 1)
      // A session a peer placed is no longer idle here: it is in flight elsewhere.
      this.sync = new ReplicaSync(routers, instanceIds, (options.syncDelayMs ?? 0) / 1000, (replica, session, now) =>
        this.returns?.[replica]!.arriving(session, now * 1000),
      );
  }

  /** Before `replica` routes a request of `session` at virtual second `now`. */
  arriving(replica: number, session: string, now: number): void {
    this.sync?.deliver(replica, now);
    this.returns?.[replica]!.arriving(session, now * 1000);
  }

  /**
   * Right after `replica`'s route() returned `ticket`, placed on instance `placement.instance`
   * with `uncached` prompt tokens to compute and `blocks` prompt blocks.
   */
  routed(
    replica: number,
    ticket: number,
    session: string,
    now: number,
    placement: { instance: number; uncached: number; blocks: number },
  ): void {
    this.learning?.routed(replica, ticket, now);
    this.returns?.[replica]!.routed(ticket, session);
    this.sync?.routed(replica, ticket, { ...placement, session }, now);
  }

  firstToken(replica: number, ticket: number, now: number): void {
    this.learning?.firstToken(replica, ticket, now);
    this.sync?.firstToken(replica, ticket, now);
  }

  completed(replica: number, ticket: number, outputTokens: number, now: number): void {
    this.learning?.completed(replica, ticket, outputTokens, now);
    this.returns?.[replica]!.completed(ticket, now * 1000);
    this.sync?.completed(replica, ticket, now);
  }

  /** Every instance's learned costs beside its engine's true ones; [] without learners. */
  costs(): InstanceLearnedCost[] {
    return this.learning?.costs() ?? [];
  }
}
