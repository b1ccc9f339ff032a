/**
 * Public types of the routing core. Both implementations (the native addon
 * and the TypeScript reference) sit behind the same `Router` and accept and
 * return exactly these shapes.
 */
import type { PolicyKindName, ReasonName } from './codes.js';
import type { OffloadCostModel } from './offload-cost.js';

/** Block ids of a request; typed arrays are the fast path (zero conversion). */
export type HashIds = BigUint64Array | Float64Array | Uint32Array | readonly number[] | readonly bigint[];

/** One chat message as the OpenAI API sends it (only what hashing needs). */
export interface ChatMessage {
  role: string;
  content?: string | null | ReadonlyArray<unknown>;
  name?: string;
  tool_calls?: unknown;
  tool_call_id?: string;
}

/**
 * A request to place. Give its block ids (`hashIds`, e.g. a trace's
 * `hash_ids`), or its prompt (`prompt` text or chat `messages`), which the
 * router hashes into chained ids itself. None of the three means no cacheable
 * prefix.
 */
export interface RouteRequest {
  hashIds?: HashIds;
  prompt?: string;
  messages?: readonly ChatMessage[];
  /**
   * The prompt's token ids, as the engine tokenizes it: the router keys it by token block keys
   * (hashTokenBlocks at the router's `blockSize`; docs/hashing.md), and instances fed by KV events
   * answer its match from what their engine reported (docs/kv-events.md). `inputTokens` defaults
   * to its length. Not with `hashIds`, `prompt` or `messages`.
   */
  tokens?: Uint32Array | readonly number[];
  /**
   * `text` when `hashIds` were hashed from the prompt's text by the caller (the proxy's request
   * scanner does so, with hashPrompt's chunks): explain() then reports the request as keyed by
   * text, as it would had the router hashed the prompt itself. Changes nothing else.
   */
  idsFrom?: 'text';
  /** Session (conversation) id: drives `sticky` and `session_hash`. */
  session?: string | number;
  /** Prompt length in tokens. Default: ids × blockTokens, or UTF-8 bytes / 4 for prompts. */
  inputTokens?: number;
  /**
   * The model the request asks for (the OpenAI `model`; a vLLM LoRA adapter is a model too). Its
   * candidates are the routable instances that declare it and those that serve any model; a model
   * no instance declares goes to the latter only. No candidate: route() throws
   * ERR_KVROUTE_NO_INSTANCE naming the model. Omitted: every routable instance, whatever it declares.
   */
  model?: string;
  /**
   * Tokens per block of this request's `hashIds` (an integer >= 1), overriding the router's
   * `blockSize` for this request: it scales cached tokens (matched blocks × blockTokens) and the
   * default `inputTokens`. For ids hashed from prompt text, pass `hashChunkBytes / 4`, what the
   * router uses when it hashes a `prompt` itself. Not allowed with `prompt` or `messages`.
   */
  blockTokens?: number;
}

/** A policy without the offload layer: a kind, or a preset of one. */
export type BasePolicyName = PolicyKindName | 'unified+A+B';

/**
 * Every policy name: a base policy, the same with the offload layer (`<base>+offload`,
 * docs/policies.md "The offload layer"), or `v3`, the B3 sweep's name for `unified+A+B+offload`.
 */
export type PolicyName = BasePolicyName | `${BasePolicyName}+offload` | 'v3';

export interface PolicySpec {
  name: PolicyName;
  /**
   * The offload layer over the base policy: `true` with the default cost model
   * (DEFAULT_OFFLOAD_COST), or the fields to change. A `+offload` name (or `v3`) implies `true`.
   */
  offload?: true | Partial<OffloadCostModel>;
  /** unified*: the best match ratio must exceed this (default 0.5). */
  affinityThreshold?: number;
  /** unified*: the best-cached instance may carry at most this × mean load (default 2.0; 1.3 in unified+A+B). */
  overloadFactor?: number;
  /** lmetric and unified* fallbacks: weight of a decoding request in the batch (default 1; 0.01 in unified+A+B). */
  decodeWeight?: number;
  /** session_hash: ring points per instance (default 160). */
  ringVnodes?: number;
  /** min_ttft: how much each request already on an instance slows its prefill (default 0.2). */
  batchWeight?: number;
  /** min_ttft: attention cost per token of context, relative to a token's own prefill (default 1.213e-4). */
  attentionWeight?: number;
  /** min_ttft: the best-cached instance wins while its score is within (1 + slack) × the lowest (default 0.3). */
  affinitySlack?: number;
  /** min_ttft: scores within (1 + tolerance) × the lowest are a tie, spread by session (default 0.02). */
  tieTolerance?: number;
  /** min_ttft: score penalty per unit of KV usage past kvThreshold once the request is placed (default 6). */
  kvWeight?: number;
  /** min_ttft: the KV usage (in-flight blocks ÷ capacity) where kvWeight starts (default 0.5). */
  kvThreshold?: number;
  /**
   * sticky, lmetric, unified*, min_ttft: 1 sends a session this router has not placed to its
   * session-ring instance, so router replicas agree on it (default 0: off). docs/policies.md.
   */
  ringFirstTurn?: number;
}

/** A policy with every tunable filled in. */
export interface ResolvedPolicy {
  /** As given, or `<base>+offload` for a base name given with `offload` in a spec. */
  name: PolicyName;
  kind: PolicyKindName;
  /** The offload layer's cost model; null for a policy without the layer. Not a tunable. */
  offload: OffloadCostModel | null;
  affinityThreshold: number;
  overloadFactor: number;
  decodeWeight: number;
  ringVnodes: number;
  batchWeight: number;
  attentionWeight: number;
  affinitySlack: number;
  tieTolerance: number;
  kvWeight: number;
  kvThreshold: number;
  ringFirstTurn: number;
}

/** What `addInstance` takes besides the id. */
export interface InstanceOptions {
  /** This instance's cache capacity in blocks (default: the router's capacityBlocks). */
  capacityBlocks?: number;
  /**
   * The models this instance serves (non-empty names; duplicates are dropped). Omitted: any model
   * (a wildcard). An empty array: none, so it only takes requests that name no model.
   */
  models?: readonly string[];
}

export interface InstanceSpec extends InstanceOptions {
  id: string;
}

export interface RouterOptions {
  /** Instance ids, specs (`{ id, capacityBlocks?, models? }`), or a count (ids `engine-0` …). */
  instances: number | ReadonlyArray<string | InstanceSpec>;
  /** Default `min_ttft`. */
  policy?: PolicyName | PolicySpec;
  /** Tokens per block of `hashIds` (default 16, vLLM's block size; Mooncake traces use 512). */
  blockSize?: number;
  /** Cache capacity per instance in blocks; mirror the engine's KV blocks (default 65,536). */
  capacityBlocks?: number;
  /** Bytes per prompt-hash chunk (default 128). */
  hashChunkBytes?: number;
  /** Observed engine state older than this is ignored (default 2,000 ms). */
  stalenessMs?: number;
  /** Sticky pins kept before the least recently used is forgotten (default 1,048,576). */
  maxSessions?: number;
  /** `real` (default) reads the wall clock; `manual` moves only with setTime() (simulation). */
  clock?: 'real' | 'manual';
  /** false selects the TypeScript reference. Default: the addon unless KVROUTE_NATIVE=0. */
  native?: boolean;
  /**
   * Where real engine state comes from besides the router's shadow counters. `shadow` (default):
   * nowhere. `{ shm }`: the shared-memory feed at /dev/shm/NAME (or a path), read on every
   * decision; feed slot i is the i-th instance. A snapshot counts while younger than
   * `stalenessMs` on the wall clock. A missing or malformed feed leaves every instance on shadow
   * and calls `onWarning` once when the condition starts.
   */
  engineState?: 'shadow' | { shm: string };
  /** Hears the router's warnings (default: process.emitWarning). */
  onWarning?: (message: string) => void;
  /**
   * Routes with another router's native core in this process: the handle its `share()` returned
   * (`kvroute serve --threads`, docs/scale-out.md). The block index, shadow counters, pins, policy
   * and engine-state feed are that core's; `instances` must be empty and `blockSize`,
   * `hashChunkBytes` are the sharer's. Instances are named by `adoptMirror()`, never added here.
   */
  attach?: number;
}

/** A snapshot of an engine's real state (from /metrics or shared memory). Omitted fields are unknown. */
export interface ObservedState {
  /** When the engine published it (ms since the epoch, or the manual clock). Default: now. */
  timestampMs?: number;
  running?: number;
  waiting?: number;
  kvBlocksUsed?: number;
  kvBlocksTotal?: number;
  pendingPrefillTokens?: number;
  maxPrefillRemaining?: number;
  decodeBatch?: number;
}

/**
 * Other router replicas' in-flight requests on one engine (docs/scale-out.md, "The load plane"), in
 * the router's own shadow-counter terms: `waiting` dispatched without a first token yet, `running`
 * past it, `prefillTokens` the uncached prompt tokens of the waiting ones, `activeBlocks` the prompt
 * blocks of them all. Each an integer >= 0; omitted = 0.
 */
export interface PeerLoad {
  running?: number;
  waiting?: number;
  prefillTokens?: number;
  activeBlocks?: number;
}

/** The last route() decision, read in place: valid until the next route(). */
export interface Decision {
  /**
   * The chosen instance's id: after a route() that returned a ticket, always the instance to
   * send the request to. '' when there is none: before the first route(), after an explain()
   * that found no candidate, or once the chosen instance was removed.
   */
  readonly instance: string;
  readonly index: number;
  readonly reason: ReasonName;
  readonly ticket: number;
  /**
   * Prompt tokens the router predicts the chosen instance serves from its prefix cache (what the
   * engine reports as `usage.prompt_tokens_details.cached_tokens`), by vLLM's rule: the chosen
   * instance's matched blocks × the request's tokens per block (`blockTokens`, else `blockSize`
   * for hashIds, chunkBytes / 4 for prompt text), but at most floor((inputTokens − 1) /
   * blockTokens) blocks, since the engine always recomputes a prompt's last token. Without
   * `request.inputTokens` the prompt's token count is unknown and the cap is matched × blockTokens
   * (one block too many when the whole prompt is matched). 0 when nothing matched or nothing was
   * chosen. Works for every index mode: it reads the matched blocks the decision itself read.
   */
  readonly predictedCachedTokens: number;
  /** Prompt blocks the chosen instance holds: the match predictedCachedTokens is made of. */
  readonly matchedBlocks: number;
  /**
   * What the decision read of the chosen instance (its `terms` in explain(), read in place): the
   * request's tokens it does not hold (`uncached`), the prefill queued ahead of the request there
   * (`pending_prefill`) and its requests running or waiting before this one (`num_requests`).
   * 0 when nothing was chosen. For an offloaded request, the decode instance's. The facts a
   * CostLearner records per ticket (docs/policies.md "Learned costs").
   */
  readonly predictedUncachedTokens: number;
  readonly pendingPrefillTokens: number;
  readonly requestsAhead: number;
  /** The offload layer's decision (`outcome: 'off'` for a policy without one). */
  readonly offload: OffloadDecision;
}

/**
 * What the `offload` layer (docs/policies.md "The offload layer") decided for the last route():
 * `off` when the policy has no offload layer; else why the prefill stayed with the decode
 * (`not_decoding`: the base policy's target holds no decoding request; `below_threshold`: the
 * uncached prefill is at most the threshold; `no_prefill_instance`: no other candidate is free
 * of decodes; `colocate`: the transfer costs at least the interference), or `offload`.
 */
export type OffloadOutcome =
  'off' | 'not_decoding' | 'below_threshold' | 'no_prefill_instance' | 'colocate' | 'offload';

/** The offload layer's part of a decision, read in place (valid until the next route()). */
export interface OffloadDecision {
  readonly outcome: OffloadOutcome;
  /** `offload`: the instance that prefills (the decision's `instance` decodes); else undefined. */
  readonly prefillInstance: string | undefined;
  /** Its index, or -1. */
  readonly prefillIndex: number;
  /**
   * `offload` on a non-dry route: the ticket of the prefill phase on the prefill instance
   * (report its firstToken()/complete()/abort() like any ticket); else -1.
   */
  readonly prefillTicket: number;
  /** Decode time the prefill would cost the target's decodes, ms (0 when not computed). */
  readonly interferenceMs: number;
  /** Time to move the prefill's KV to the target, ms (0 when not computed). */
  readonly transferMs: number;
  /**
   * With the cost model's `chargePrefill`: the request's own prefill time on the prefill
   * instance (its queue, then the request's uncached part) minus its prefill on the target, ms;
   * negative when the prefill instance would be faster. 0 when not computed.
   */
  readonly extraPrefillMs: number;
  /** The transfer would be the first between this prefill and decode instance. */
  readonly coldPair: boolean;
}

export interface CandidateExplanation {
  instance: string;
  index: number;
  drained: boolean;
  /** Leading blocks of the request this instance holds. */
  matchedBlocks: number;
  /** The policy's score (lower is better); null when not a candidate (drained, or not serving the request's model). */
  score: number | null;
  /** What the decision read of this candidate (its score is built from these); null when not a candidate. */
  terms: CandidateTerms | null;
  /**
   * Where `matchedBlocks` came from: `events` (the engine's KV events, for a request keyed by
   * tokens on an event-fed instance), else `belief` (the router's own index).
   */
  matchedFrom: 'events' | 'belief';
}

/** A candidate's inputs to the decision (docs/policies.md "What a decision reads"). */
export interface CandidateTerms {
  /** Effective queued prefill tokens (`pending_prefill`). */
  pendingPrefillTokens: number;
  /** Effective running + waiting (`num_requests`). */
  requests: number;
  /** Effective fraction of KV in use by in-flight requests (`kv_usage`), before this request. */
  kvUsage: number;
  /** This request's tokens the instance does not hold (`uncached`). */
  uncachedTokens: number;
  /** Expected prefill of sessions idle on the instance between turns (`returning`; 0 unless set). */
  returningTokens: number;
  /**
   * The costs min_ttft priced the instance with (docs/policies.md "Learned costs"): seconds per
   * token-equivalent, overhead seconds and interference per request. Without costs: 1, 0 and the
   * policy's batchWeight, and the score is in token-equivalents; with them, in seconds.
   */
  prefillSecondsPerToken: number;
  prefillOverheadSeconds: number;
  interference: number;
}

export interface Explanation {
  policy: PolicyName;
  instance: string | null;
  reason: ReasonName | null;
  /** null for dry runs. */
  ticket: number | null;
  dryRun: boolean;
  /**
   * What the request was keyed by: `tokens` (token block keys), `hash_ids` (given ids), `text`
   * (chunks of the prompt's text), or null (no prompt). The proxy keys by text when a model has no
   * tokenizer, and says so in `x-kvroute-reason`.
   */
  keys: 'tokens' | 'hash_ids' | 'text' | null;
  candidates: CandidateExplanation[];
  /** The offload layer's decision and both its costs; null for a policy without the layer. */
  offload: OffloadExplanation | null;
}

/** explain()'s offload section (docs/policies.md "The offload layer"). */
export interface OffloadExplanation {
  outcome: OffloadOutcome;
  /** `offload`: the instance that prefills (`instance` decodes); else null. */
  prefillInstance: string | null;
  /** `offload` on a dispatched route: the prefill phase's ticket; else null. */
  prefillTicket: number | null;
  /** Decode time the prefill would cost the target's decodes, ms (0 when not computed). */
  interferenceMs: number;
  /** Time to move the KV to the target, ms (0 when not computed). */
  transferMs: number;
  /** `chargePrefill`: the request's prefill on the prefill instance minus on the target, ms (0 when not computed). */
  extraPrefillMs: number;
  /** The (prefill, decode) pair has not carried an offload of this router yet. */
  coldPair: boolean;
  /** The policy's threshold: the layer weighs costs only above this many uncached tokens. */
  thresholdTokens: number;
}

/** The counters the core keeps for one instance's event-fed index (Router.kvEventSink). */
export interface KvEventIndexStats {
  /** Whether routing reads the event index now (live), else the belief index. */
  fed: boolean;
  /** Token block keys held, and engine block hashes mapped. */
  heldKeys: number;
  engineBlocks: number;
  /** Blocks stored, engine hashes removed, AllBlocksCleared events. */
  stored: number;
  removed: number;
  cleared: number;
  /** Blocks of another medium or a LoRA adapter (not keyed). */
  ignored: number;
  /** Blocks stored under a parent hash the index did not hold (not keyed). */
  orphaned: number;
  unknownRemoved: number;
}

/** An event-fed instance's KV event feed (a subscription's counters) and index (docs/kv-events.md). */
export interface KvEventInstanceStats extends KvEventIndexStats {
  endpoint: string;
  replay: string | null;
  /** connecting, live, replaying (a gap being filled) or down. */
  state: 'connecting' | 'live' | 'replaying' | 'down';
  messages: number;
  malformed: number;
  unknownEvents: number;
  gaps: number;
  missing: number;
  stale: number;
  restarts: number;
  replays: number;
  replayFailures: number;
  rebuilds: number;
  disconnects: number;
  lastError: string | null;
}

export interface InstanceStats {
  instance: string;
  index: number;
  drained: boolean;
  /** The models it declares, sorted; null when it serves any model. */
  models: string[] | null;
  capacityBlocks: number;
  blocks: number;
  /** Radix segments of the native index; null for the TypeScript reference. */
  segments: number | null;
  /** Heap bytes of the native index; null for the TypeScript reference. */
  bytes: number | null;
  shadow: { running: number; waiting: number; prefillTokens: number; activeBlocks: number };
  effective: {
    running: number;
    waiting: number;
    numRequests: number;
    pendingPrefillTokens: number;
    decodeBatch: number;
    kvUsage: number;
  };
  observedFresh: boolean;
  routed: number;
  completed: number;
  aborted: number;
  /** null when the instance has no KV event endpoint. */
  kvEvents: KvEventInstanceStats | null;
}

export interface RouterStats {
  native: boolean;
  policy: ResolvedPolicy;
  inFlight: number;
  sessions: number;
  /** Heap bytes of the native fleet index (which instances hold each strided block); null for the reference. */
  fleetBytes: number | null;
  decisions: Record<ReasonName, number>;
  instances: InstanceStats[];
}
