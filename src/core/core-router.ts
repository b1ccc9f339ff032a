/**
 * The surface both routing implementations share: the addon's NativeRouter
 * (native/bindings/js-router.h) and the TypeScript ReferenceRouter. The public Router
 * validates, then calls exactly these methods, so swapping implementations
 * changes nothing else.
 *
 * Numbers cross in caller-owned typed arrays (layouts below) so that a route()
 * builds no JS objects: the request slab carries the numeric inputs, the
 * decision array receives the choice, and the explain buffers receive every
 * instance's matched blocks and score.
 */
import type { ResolvedPolicy } from './types.js';

/** Ids a core accepts: validated typed arrays only (the public Router converts arrays). */
export type CoreIds = BigUint64Array | Float64Array | Uint32Array;

/** Native PolicyConfig (native/core/policy.h). */
/** A candidate's terms in the explain buffer, per slot (native/core/router.h kTerm*). */
export const TERM_PENDING_PREFILL = 0;
export const TERM_REQUESTS = 1;
export const TERM_KV_USAGE = 2;
export const TERM_UNCACHED = 3;
/** The costs min_ttft priced the candidate with (native/core/instance-costs.h): returning sessions' expected prefill, */
export const TERM_RETURNING = 4;
/** ...seconds per token-equivalent (1 without costs), */
export const TERM_SECONDS_PER_TOKEN = 5;
/** ...the overhead in seconds (0 without costs), */
export const TERM_OVERHEAD = 6;
/** ...and the interference per request (the policy's batchWeight without costs). */
export const TERM_INTERFERENCE = 7;
export const TERM_COUNT = 8;

/** setInstanceCosts()'s array: [secondsPerToken, overheadSeconds, interference]. */
export const COST_SECONDS_PER_TOKEN = 0;
export const COST_OVERHEAD_SECONDS = 1;
export const COST_INTERFERENCE = 2;
export const COST_FIELDS = 3;

/**
 * A resolved policy as the cores take it: the kind as its PolicyKind number, every tunable, and
 * the offload layer's cost model (null: no layer; native PolicyConfig.offload).
 */
export type CorePolicy = Omit<ResolvedPolicy, 'name' | 'kind'> & { kind: number };

export interface CoreConfig {
  policy: CorePolicy;
  blockTokens: number;
  chunkBytes: number;
  stalenessMs: number;
  maxSessions: number;
  manualClock: boolean;
  /** The shared-memory engine-state feed to read (docs/shm-layout.md); null: shadow only. */
  feedPath: string | null;
  /** Native only: attach to the shared core of this handle instead of making one (shared-core.h). */
  attach?: number;
}

/**
 * Layout written by lockStats(), which first applies the queued ticket events: [the number of this
 * wrapper's previous locked call, this call's number (its queued events were applied at it), the
 * core's locked calls, calls that had to wait for the lock]. Zeros while the core is not shared.
 */
export const LOCK_STAT_FIELDS = 4;

export interface CoreBuffers {
  /**
   * [inputTokens (NaN = default), flags (1 = dry run), ids kind (see IDS_*), model group (-1 = no
   * model), blockTokens (NaN = default)]: see REQUEST_*.
   */
  request: Float64Array;
  /**
   * [chosen slot (-1 = none), reason code, offload outcome (OFFLOAD_OUTCOMES), prefill slot (-1 =
   * none), cold pair (0/1)]: see DECISION_*. Entries past the outcome are written only when the
   * outcome is not `off` (0), so a policy without the layer pays one store.
   */
  decision: Int32Array;
  /** [prefill ticket (-1 = none), interference ms, transfer ms]: see OFFLOAD_*; as the entries above. */
  offload: Float64Array;
  /**
   * Ticket events queued without a call into the core: [count, ticket0,
   * kind0, ticket1, kind1, ...]. The caller validates each ticket first; the
   * core applies and clears the queue at the start of every method, so every
   * decision sees exactly what eager calls would have produced.
   */
  events: Float64Array;
}

export const DECISION_SLOT = 0;
export const DECISION_REASON = 1;
export const DECISION_OFFLOAD = 2;
export const DECISION_PREFILL_SLOT = 3;
export const DECISION_COLD_PAIR = 4;
export const DECISION_FIELDS = 5;
export const OFFLOAD_PREFILL_TICKET = 0;
export const OFFLOAD_INTERFERENCE_MS = 1;
export const OFFLOAD_TRANSFER_MS = 2;
/** chargePrefill's extraPrefillMs (0 when not computed). */
export const OFFLOAD_EXTRA_PREFILL_MS = 3;
export const OFFLOAD_FIELDS = 4;

export const EVENT_FIRST_TOKEN = 1;
export const EVENT_COMPLETE = 2;
export const EVENT_ABORT = 3;

export const REQUEST_INPUT_TOKENS = 0;
export const REQUEST_FLAGS = 1;
export const REQUEST_IDS_KIND = 2;
/**
 * The request's model group: -1 = no model (every routable instance is a candidate); else a group
 * id below the core's group count (the routable instances declaring it, and the wildcards).
 */
export const REQUEST_GROUP = 3;
/** Tokens per block of the request's ids, an integer in [1, 2^24]; NaN = the core's default. */
export const REQUEST_BLOCK_TOKENS = 4;
export const REQUEST_FIELDS = 5;
/** Group ids a core accepts are below this (native Router::kMaxGroups). */
export const MAX_GROUPS = 65_536;
/** REQUEST_FLAGS is a bitmask of these; any other value is refused. */
export const FLAG_DRY_RUN = 1;
/**
 * The request's ids are token block keys (hashTokenBlocks, docs/hashing.md): event-fed instances
 * answer its match from the event index (docs/kv-events.md), capped at floor((inputTokens - 1) /
 * blockTokens) blocks as vLLM reports `cached_tokens`; the others from their block index.
 */
export const FLAG_TOKEN_KEYS = 2;

/**
 * What the caller says the `ids` argument of route() and match() is.
 * IDS_ARGUMENT: nothing (the core finds out: a typed array of any supported
 * kind, a prompt string, or undefined). Otherwise: a typed array of that
 * kind. Saying so is the cheap path: asking the runtime for a typed array's
 * kind costs the addon a chain of type tests per call. A wrong hint can
 * misread ids, never memory (the addon bounds every read by the view's byte
 * length).
 */
export const IDS_ARGUMENT = 0;
export const IDS_U64 = 1;
export const IDS_F64 = 2;
export const IDS_U32 = 3;

/** Observed-state layout: see ObservedState in native/core/engine-state.h. */
export const OBSERVED_FIELDS = 8;
/** setPeerLoad()'s layout: [running, waiting, prefillTokens, activeBlocks] (ShadowCounters). */
export const PEER_LOAD_FIELDS = 4;

/** Stats layout written by CoreRouter.stats(). */
export const Stat = {
  CapacityBlocks: 0,
  Blocks: 1,
  Segments: 2,
  Bytes: 3,
  ShadowRunning: 4,
  ShadowWaiting: 5,
  ShadowPrefillTokens: 6,
  ShadowActiveBlocks: 7,
  EffRunning: 8,
  EffWaiting: 9,
  EffPendingPrefill: 10,
  EffDecodeBatch: 11,
  EffKvUsage: 12,
  ObservedFresh: 13,
  Routed: 14,
  Completed: 15,
  Aborted: 16,
  Drained: 17,
  EffNumRequests: 18,
} as const;
export const STAT_FIELDS = 19;

/**
 * Layout written by CoreRouter.eventStats(slot, out): the slot's event-fed index. Counters are
 * cumulative since the instance was added (clearKvEvents keeps them) and count blocks, except
 * Cleared (AllBlocksCleared events). docs/kv-events.md.
 */
export const EventStat = {
  /** Blocks of applied BlockStored events (re-stores of a mapped engine hash included). */
  Stored: 0,
  /** Engine hashes unmapped by BlockRemoved. */
  Removed: 1,
  /** AllBlocksCleared events. */
  Cleared: 2,
  /** Blocks of events for a medium other than GPU (or null), or of a LoRA adapter. */
  Ignored: 3,
  /** Blocks of BlockStored events whose parent hash was not mapped. */
  Orphaned: 4,
  /** BlockRemoved hashes that were not mapped. */
  UnknownRemoved: 5,
  /** Distinct token block keys the slot holds now. */
  HeldKeys: 6,
  /** Engine block hashes mapped now. */
  EngineBlocks: 7,
  /** 1 when route() answers this slot's FLAG_TOKEN_KEYS matches from events. */
  EventFed: 8,
} as const;
export const EVENT_STAT_FIELDS = 9;

/**
 * One applyKvEvents() call's events, packed (src/events/packed-kv-events.ts writes it; the arrays
 * may be longer than the lengths, which bound what is read). `ops` holds PACKED_OP_WORDS words per
 * record: [op, flags, count, blockSize].
 * - PACKED_OP_STORED: flags of PACKED_FLAG_*; `count` blocks of `blockSize` (1 to 2^24) tokens;
 *   takes the parent hash (with PACKED_FLAG_PARENT) then `count` hashes, and count × blockSize
 *   tokens.
 * - PACKED_OP_REMOVED: flags 0 or PACKED_FLAG_OTHER_MEDIUM; takes `count` hashes; blockSize 0.
 * - PACKED_OP_CLEARED: flags, count and blockSize 0.
 * An ignored record takes its hashes and tokens too, and the records must take exactly
 * hashesLength hashes and tokensLength tokens. A stream breaking any rule is refused whole
 * (RangeError naming the word) before anything is applied.
 */
export interface PackedKvEvents {
  ops: Uint32Array;
  opsLength: number;
  hashes: BigUint64Array;
  hashesLength: number;
  tokens: Uint32Array;
  tokensLength: number;
}
export const PACKED_OP_STORED = 1;
export const PACKED_OP_REMOVED = 2;
export const PACKED_OP_CLEARED = 3;
export const PACKED_OP_WORDS = 4;
export const PACKED_FLAG_PARENT = 1;
/** The event's medium is neither null nor "GPU" (an offload tier): ignored. */
export const PACKED_FLAG_OTHER_MEDIUM = 2;
/** The event's lora_id is not null (an adapter's blocks, another model's cache): ignored. */
export const PACKED_FLAG_LORA = 4;
export const PACKED_MAX_BLOCK_SIZE = 1 << 24;

/** Layout written by CoreRouter.counts(): [open tickets, sessions, slot count, fleet index bytes (NaN: none)]. */
export const COUNT_FIELDS = 4;

/** Most ids one request may carry: depths are 24-bit in the native index. */
export const MAX_REQUEST_IDS = 16_777_215;

export interface CoreRouter {
  addInstance(id: string, capacityBlocks: number): number;
  /** drained false puts the instance back into routing. */
  drainInstance(slot: number, drained?: boolean): void;
  removeInstance(slot: number): void;
  /**
   * The model groups the instance serves: null = any (a wildcard, what addInstance gives), else
   * exactly these group ids (none for an empty array), each below MAX_GROUPS. A core's group
   * count grows to cover every id it is given and never shrinks; group 0 always exists.
   */
  setInstanceGroups(slot: number, groups: Uint32Array | null): void;
  /**
   * Where route() writes each slot's matched blocks and score, and (optional) its TERM_COUNT
   * terms: what the policy read of the candidate (TERM_* below). A non-candidate's score is NaN
   * and its terms are left as they were (explain() shows null for both).
   */
  setExplainBuffers(matched: Int32Array, scores: Float64Array, terms?: Float64Array): void;
  /**
   * Returns the ticket, or -1 for a dry run or when no instance is routable. An `offload` decision
   * (decision[DECISION_OFFLOAD]) of a dispatched route also opens the prefill ticket on the prefill
   * slot (offload[OFFLOAD_PREFILL_TICKET]); the returned ticket is the decode's, on the chosen slot.
   */
  route(ids: CoreIds | string | undefined, session: string | undefined): number;
  match(ids: CoreIds | string | undefined): void;
  firstToken(ticket: number): boolean;
  complete(ticket: number): boolean;
  abort(ticket: number): boolean;
  setObserved(slot: number, observed: Float64Array | null): void;
  /**
   * min_ttft's price of the instance (native/core/instance-costs.h): COST_FIELDS values
   * [secondsPerToken > 0, overheadSeconds >= 0, interference >= 0 or NaN for the policy's
   * batchWeight], or null for token-equivalents
   * (1, 0, the policy's batchWeight). A bad value is a RangeError naming the field; nothing changes.
   */
  setInstanceCosts(slot: number, costs: Float64Array | null): void;
  /** The expected prefill of sessions idle on the instance between turns: a finite number >= 0. */
  setReturningTokens(slot: number, tokens: number): void;
  /**
   * Other router replicas' in-flight load on the instance (native/core/engine-state.h), replacing
   * the last: PEER_LOAD_FIELDS integers >= 0, or null for none. Policies read own + peer.
   */
  setPeerLoad(slot: number, load: Float64Array | null): void;
  /**
   * Pins `session` of model group `group` (-1: no model) to `slot`, as another replica placed it
   * (native/core/router.h pinSession): sticky honours it, ringFirstTurn counts the session known.
   */
  pinSession(session: string, group: number, slot: number): void;
  setTime(nowMs: number): void;
  setPolicy(policy: CorePolicy): void;
  stats(slot: number, out: Float64Array): void;
  removeBlocks(slot: number, ids: CoreIds | undefined): number;
  clearBlocks(slot: number): void;
  setCapacity(slot: number, capacityBlocks: number): number;
  reasonCounts(out: Float64Array): void;
  counts(out: Float64Array): void;
  /** "" when every internal invariant holds; else the first violation. For tests. */
  checkInvariants(): string;
  /** Applies the queued ticket events now (every other method does so first). */
  drainEvents(): void;
  /** -1 without a feed; else the feed reader's status code (0 = ok). */
  feedStatus(): number;
  /**
   * Whether route()/match() answer this slot's match from its event index for requests flagged
   * FLAG_TOKEN_KEYS. The index is kept (and fed) either way; add/removeInstance turn it off.
   */
  setEventFed(slot: number, on: boolean): void;
  /** Applies a packed stream of the slot's KV events in order (all or nothing: see PackedKvEvents). */
  applyKvEvents(slot: number, packed: PackedKvEvents): void;
  /** Empties the slot's event index (a sequence gap, an engine restart); counters stay. */
  clearKvEvents(slot: number): void;
  /** Writes the slot's EVENT_STAT_FIELDS event counters (EventStat) into out. */
  eventStats(slot: number, out: Float64Array): void;
  /**
   * Native only: publishes the core to the process's other threads and returns its handle
   * (CoreConfig.attach). From then on every call of every attached wrapper holds the core's lock.
   */
  shareCore?(): number;
  /** Native only: writes LOCK_STAT_FIELDS counters (zeros until shared). */
  lockStats?(out: Float64Array): void;
}

export type CoreRouterConstructor = new (config: CoreConfig, buffers: CoreBuffers) => CoreRouter;

/**
 * Every layout constant above by name, as the addon exports its own (`layout`, from
 * native/bindings/js-layout.h): the loader (src/core/native.ts) refuses an addon whose layout
 * differs, so an offset changed on one side only fails at load, naming the field.
 */
export const CORE_LAYOUT = {
  REQUEST_INPUT_TOKENS,
  REQUEST_FLAGS,
  REQUEST_IDS_KIND,
  REQUEST_GROUP,
  REQUEST_BLOCK_TOKENS,
  REQUEST_FIELDS,
  FLAG_DRY_RUN,
  FLAG_TOKEN_KEYS,
  IDS_ARGUMENT,
  IDS_U64,
  IDS_F64,
  IDS_U32,
  DECISION_SLOT,
  DECISION_REASON,
  DECISION_OFFLOAD,
  DECISION_PREFILL_SLOT,
  DECISION_COLD_PAIR,
  DECISION_FIELDS,
  OFFLOAD_PREFILL_TICKET,
  OFFLOAD_INTERFERENCE_MS,
  OFFLOAD_TRANSFER_MS,
  OFFLOAD_EXTRA_PREFILL_MS,
  OFFLOAD_FIELDS,
  EVENT_FIRST_TOKEN,
  EVENT_COMPLETE,
  EVENT_ABORT,
  TERM_PENDING_PREFILL,
  TERM_REQUESTS,
  TERM_KV_USAGE,
  TERM_UNCACHED,
  TERM_RETURNING,
  TERM_SECONDS_PER_TOKEN,
  TERM_OVERHEAD,
  TERM_INTERFERENCE,
  TERM_COUNT,
  COST_SECONDS_PER_TOKEN,
  COST_OVERHEAD_SECONDS,
  COST_INTERFERENCE,
  COST_FIELDS,
  OBSERVED_FIELDS,
  PEER_LOAD_FIELDS,
  STAT_FIELDS,
  EVENT_STAT_FIELDS,
  COUNT_FIELDS,
  LOCK_STAT_FIELDS,
  MAX_GROUPS,
  MAX_REQUEST_IDS,
  PACKED_OP_STORED,
  PACKED_OP_REMOVED,
  PACKED_OP_CLEARED,
  PACKED_OP_WORDS,
  PACKED_FLAG_PARENT,
  PACKED_FLAG_OTHER_MEDIUM,
  PACKED_FLAG_LORA,
  PACKED_MAX_BLOCK_SIZE,
  Stat,
  EventStat,
} as const;

/**
 * How the addon's `layout` differs from CORE_LAYOUT: one `FIELD: addon X, TypeScript Y` per
 * difference (a missing field reads `none`; an addon with no layout at all says so), or null when
 * they agree.
 */
export function layoutMismatch(native: unknown): string | null {
  if (typeof native !== 'object' || native === null) return 'the addon exports no layout (built from older sources)';
  const theirs = native as Record<string, unknown>;
  const differences: string[] = [];
  const compare = (field: string, ours: unknown, addon: unknown): void => {
    if (ours !== addon)
      differences.push(`${field}: addon ${String(addon ?? 'none')}, TypeScript ${String(ours ?? 'none')}`);
  };
  const ours: Record<string, unknown> = CORE_LAYOUT;
  for (const field of new Set([...Object.keys(ours), ...Object.keys(theirs)])) {
    const mine = ours[field];
    const addon = theirs[field];
    if (typeof mine === 'object' || typeof addon === 'object') {
      const a = (typeof mine === 'object' && mine !== null ? mine : {}) as Record<string, unknown>;
      const b = (typeof addon === 'object' && addon !== null ? addon : {}) as Record<string, unknown>;
      for (const name of new Set([...Object.keys(a), ...Object.keys(b)])) compare(`${field}.${name}`, a[name], b[name]);
    } else {
      compare(field, mine, addon);
    }
  }
  return differences.length === 0 ? null : differences.join('; ');
}
