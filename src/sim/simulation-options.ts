/**
 * What a simulation takes and gives (src/sim/simulator.ts runs it; simulator.ts re-exports
 * these): the policy, fleet, engine model and dispatch mode, and the records and totals of a run.
 */
import type { OffloadCostModel } from '../core/offload-cost.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import type { RequestRecord } from '../trace/records.js';
import type { EngineScaling } from './engine-preset.js';
import type { CacheState } from './event-fed-cache.js';
import type { FleetGroup } from './fleet-spec.js';
import type { ReplicaAssign } from './replica-assign.js';
import type { CostMode } from '../core/cost-learning/cost-mode.js';
import type { InstanceLearnedCost } from './sim-cost-learning.js';
import type { SimFlowOptions } from './sim-flow.js';

export type Dispatch = { mode: 'session' } | { mode: 'poisson'; rate: number; seed: number };

export interface SimulationOptions {
  policy: PolicyName | PolicySpec;
  instances: number;
  engineState?: 'shadow' | 'shm';
  /** Publish period of the shm feed, ms (default 50). */
  publishMs?: number;
  /** ENGINE_PRESETS key. */
  preset?: string;
  /**
   * Multipliers of the preset's prefill cost, decode cost and KV capacity (scalePreset); the
   * router's capacity follows the engines'. A kvCapacity other than 1 excludes `capacityBlocks`.
   */
  scaling?: EngineScaling;
  /**
   * A mixed fleet (fleet-spec.ts): groups whose counts add up to `instances`, each engine scaled
   * by its group's factors on top of `scaling`. The router is not told them: its capacity is the
   * fleet-wide one. Default: `instances` engines of the (scaled) preset.
   */
  fleet?: FleetGroup[];
  /** KV blocks per engine; default: the (scaled) preset's KV bytes at the trace's block size. */
  capacityBlocks?: number;
  dispatch?: Dispatch;
  /** false runs the TypeScript reference router. */
  native?: boolean;
  /**
   * false queues every engine step as its own event instead of running silent steps ahead
   * (kick). The records are identical either way (a test holds them so); only speed differs.
   */
  runAhead?: boolean;
  /**
   * The link offloaded prefills' KV crosses (its transfer fields: linkGbps, warmOverheadMs,
   * coldPenaltyMs, layerwise, layers, kvBytesPerToken). Default: the policy's offload cost
   * model, so the engines are charged what the router priced; DEFAULT_OFFLOAD_COST without one.
   */
  transferCost?: Partial<OffloadCostModel>;
  /**
   * Independent router replicas over the one fleet (default 1, at most 64; docs/scale-out.md):
   * each has its own belief index, shadow counters and sticky pins, hears only its own
   * dispatches' first tokens and completions, and with `shm` reads every engine's state.
   */
  replicas?: number;
  /** Which replica dispatches each request (replica-assign.ts); default `random`. */
  replicaAssign?: ReplicaAssign;
  /** The seed of the replica assignment (default 1). */
  replicaSeed?: number;
  /**
   * Where each replica's cache state comes from (docs/scale-out.md): `own` (default), the
   * replica's belief from its own dispatches; `events`, every engine's KV events, fed to every
   * replica before each route (idealised: no delay, no loss).
   */
  cacheState?: CacheState;
  /**
   * Share each replica's in-flight load per instance and its session placements with the other
   * replicas (the load plane, replica-sync.ts; docs/scale-out.md "Sync between replicas"), as
   * `kvroute serve --cluster` does over NATS. Default false.
   */
  syncLoad?: boolean;
  /**
   * Virtual milliseconds between a change (a replica's load or placement, with `syncLoad`; an
   * engine's KV event, with `cacheState: 'events'`) and its arrival at the replicas. Default 0:
   * none (the idealised feed `cacheState: 'events'` always had).
   */
  syncDelayMs?: number;
  /**
   * false runs no cost learners beside the routers (sim-cost-learning.ts). They change no
   * decision, so the records are the same either way (a test holds them so); default true.
   */
  learnCosts?: boolean;
  /**
   * How min_ttft prices each instance (docs/policies.md "Learned costs"): `learned` (default),
   * each replica's learner pushes its estimates into its router, so scores are predicted seconds
   * per instance; `fixed`, the preset's token-equivalents for every instance, as the learners
   * only watch (reproducible whatever the learner does). `learned` needs `learnCosts`.
   */
  costs?: CostMode;
  /**
   * Count the expected return of sessions idle between turns on their instance (a SessionReturns
   * per replica, src/core/session-returns.ts; docs/policies.md "Sessions between turns"): min_ttft
   * sees it as prefill queued there. Default true; false for the runs before it existed.
   */
  sessionReturns?: boolean;
  /**
   * Flow control between the trace and the routers (sim-flow.ts, docs/flow-control.md): at most
   * `maxInFlight` requests routed at once fleet-wide, the rest queued by class and tenant (the
   * trace's `priority` and `tenant`), refused past their deadline or a rate limit. Records then
   * carry `tenant`, `priority` and `queued_s`, and `dispatch` is the arrival at the router.
   * Absent (default): every request is routed on arrival.
   */
  flow?: SimFlowOptions;
}

/** `sim run --sync`: what the replicas share (docs/scale-out.md). */
export type ReplicaSyncMode = 'none' | 'events' | 'load' | 'all';
export const REPLICA_SYNCS: readonly ReplicaSyncMode[] = ['none', 'events', 'load', 'all'];

export interface SimulationResult {
  /** One per request, in completion order. */
  records: RequestRecord[];
  /** Virtual seconds from the first dispatch to the last completion. */
  makespan: number;
  preemptions: number;
  /** Cached blocks evicted to make room, over all engines. */
  evictions: number;
  steps: number;
  /** KV blocks of each engine (and the router's capacity per instance); 0 when nothing ran. */
  capacityBlocks: number;
  /** KV blocks of each engine, in instance order (a mixed fleet's differ); [] when nothing ran. */
  engineCapacityBlocks: number[];
  /** Requests each replica's router routed, by its own count (RouterStats decisions); [n] for one. */
  replicaRoutes: number[];
  /** Each instance's learned costs beside its engine's true ones; [] when nothing ran or `learnCosts` is false. */
  learnedCosts: InstanceLearnedCost[];
}
