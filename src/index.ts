/**
 * kvroute — cache-aware request routing for fleets of LLM inference engines.
 *
 *   import { Router } from 'kvroute';
 *   const router = new Router({ instances: ['http://10.0.0.1:8000', 'http://10.0.0.2:8000'] });
 *   const ticket = router.route({ messages, session: 'conv-42' });
 *   send(router.decision.instance);           // then, as the response streams:
 *   router.onFirstToken(ticket); router.complete(ticket);
 */
export { Router } from './core/router.js';
export { hashPrompt, hashTokenBlocks, type HashPromptOptions } from './core/hashing.js';
export { promptText } from './core/prompt-text.js';
export { ALL_POLICY_NAMES, POLICY_NAMES } from './core/policy-spec.js';
export { OFFLOAD_OUTCOMES, REASONS, type ReasonName } from './core/codes.js';
export { isKvrouteError, type KvrouteError, type KvrouteErrorCode } from './core/errors.js';
export type { KvEventIndexStats, KvEventSink, KvEventSinkOwner } from './core/kv-event-sink.js';
// KV events fed in from outside the core (src/events/): a ZeroMQ subscription, or your own transport.
export { applyKvEvents, type AppliedKvEvents } from './events/direct-kv-events.js';
export { subscribeKvEvents, type KvEventEndpoints, type KvEventSubscription } from './events/kv-event-subscription.js';
export { nativePath } from './core/native.js';
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

// Traces: read, write, transform, generate (src/trace/), and characterize (src/analysis/).
export { readTrace, type ReadTraceOptions, type TraceReadStats, type TraceReader } from './trace/read-trace.js';
export { writeTrace, formatTraceLine } from './trace/write-trace.js';
export { transformTrace, type TransformOptions } from './trace/transforms.js';
export { synthesizeTrace, SYNTH_DEFAULTS, type SynthOptions, type SynthProgress } from './trace/synth.js';
export { MODEL_PRESETS, kvBytesPerToken, type ModelPreset } from './trace/model-presets.js';
export type { TraceRequest, TraceFormat } from './trace/types.js';
export { characterizeTrace, type CharacterizeOptions } from './analysis/characterize.js';
export type { TraceSummary } from './analysis/trace-summary.js';

// Simulated vLLM engines over HTTP (src/sim/): for demos and tests of anything OpenAI-shaped.
export { startSimFleet, type SimFleet, type SimFleetOptions } from './sim/sim-fleet.js';
export type { EngineScaling } from './sim/engine-preset.js';

// Request tokenization (src/tokenize/): tokenizer + chat template as vLLM renders them, on workers.
export {
  TokenizerPool,
  loadTokenizer,
  bundledTokenizerDir,
  TokenizerError,
  type TokenizerPoolOptions,
  type TokenizerPoolStats,
  type ChatExtras,
  type TokenizerErrorCode,
} from './tokenize/index.js';

// The proxy (src/proxy/): an OpenAI-compatible routing server on uWebSockets.js or Node's http.
export { createProxy, type NodeHandler, type Proxy } from './proxy/proxy-server.js';
export { kvrouteFastify, type FastifyPlugin } from './proxy/fastify-plugin.js';
export { createProxyMetrics, type ProxyMetrics, type ProxyMetricsOptions } from './proxy/proxy-metrics.js';
export { adminMount } from './proxy/admin-api.js';
export { createDashboard, type Dashboard, type DashboardOptions } from './proxy/dashboard/dashboard.js';
export type { DashboardFrame, InstanceFrame } from './proxy/dashboard/dashboard-frame.js';
export { PROXY_DEFAULTS, type BackendSpec, type ProxyMount, type ProxyOptions } from './proxy/proxy-options.js';
export type {
  ProxyObserver,
  RequestOutcome,
  RequestRecord,
  UpstreamErrorKind,
  UsageCounts,
} from './proxy/proxy-observer.js';
export type { MountApp, RouteHandler } from './proxy/route-table.js';
export type { ClientRequestHead, ClientResponse } from './proxy/client-io.js';
export type { ModelCard } from './proxy/backend.js';
export { openAccessLog, formatRecord, type AccessLog, type AccessLogOptions } from './proxy/access-log.js';
export type { BackendSnapshot, ModelAvailability, ProxyState } from './proxy/proxy-state.js';

// Live replay (src/replay/): drive an OpenAI-compatible endpoint with a trace, recording each request.
export {
  replay,
  loadTrace,
  REPLAY_DEFAULTS,
  type ReplayOptions,
  type ReplayResult,
  type StopCause,
} from './replay/replay.js';
export { findSrr, parseSlo, type SloTerm, type SrrOptions, type SrrResult, type Trial } from './replay/find-srr.js';
export type { DispatchMode } from './replay/dispatcher.js';
export type { ReplayTally } from './replay/replay-tally.js';
export { ReplayError } from './replay/target-check.js';
