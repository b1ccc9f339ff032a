/**
 * kvroute — cache-aware request routing for fleets of LLM inference engines.
 *
 *   import { Router } from 'kvroute';
 *   const router = new Router({ instances: ['http://10.0.0.1:8000', 'http://10.0.0.2:8000'] });
 *   const ticket = router.route({ messages, session: 'conv-42' });
 *   send(router.decision.instance);           // then, as the response streams:
 *   router.onFirstToken(ticket); router.complete(ticket);
 *
 * This entry is the routing core only (the addon, or its TypeScript reference): it loads no
 * server, HTTP client, metrics, ZeroMQ or worker pool. The rest has entries of its own, each
 * loading what it needs: kvroute/events (KV event feeds), kvroute/proxy, kvroute/sim,
 * kvroute/replay, kvroute/trace, kvroute/tokenize (src/entries/). test/package-exports.test.ts
 * holds this entry to it.
 */
export { Router } from './core/router.js';
export { hashPrompt, hashTokenBlocks, type HashPromptOptions } from './core/hashing.js';
export { promptText } from './core/prompt-text.js';
export { ALL_POLICY_NAMES, POLICY_NAMES } from './core/policy-spec.js';
export { OFFLOAD_OUTCOMES, REASONS, type ReasonName } from './core/codes.js';
export { isKvrouteError, type KvrouteError, type KvrouteErrorCode } from './core/errors.js';
export type { KvEventIndexStats, KvEventSink, KvEventSinkOwner } from './core/kv-event-sink.js';
export { nativePath } from './core/native.js';
export type { CostSource, RoutingCosts } from './core/instance-costs.js';
export { SessionReturns, type SessionReturnsOptions } from './core/session-returns.js';
export {
  CostLearner,
  DEFAULT_COST_PRIOR,
  predictTtftSeconds,
  type CostCoefficients,
  type CostLearnerOptions,
  type InstanceCostEstimate,
} from './core/cost-learning/index.js';
export {
  ShadowReconciler,
  DEFAULT_RECONCILE_MS,
  type ReconcilerOptions,
  type ReconcileResult,
} from './state/shadow-reconciler.js';
export type {
  BasePolicyName,
  CandidateExplanation,
  CandidateTerms,
  ChatMessage,
  Decision,
  Explanation,
  HashIds,
  InstanceOptions,
  InstanceSpec,
  InstanceStats,
  ObservedState,
  PeerLoad,
  OffloadDecision,
  OffloadExplanation,
  OffloadOutcome,
  PolicyName,
  PolicySpec,
  ResolvedPolicy,
  RouteRequest,
  RouterOptions,
  RouterStats,
} from './core/types.js';
