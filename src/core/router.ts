/**
 * Router — the public routing core: validates, then drives one CoreRouter
 * (the native addon, or the TypeScript reference with { native: false }).
 *
 * Hot path: route() checks the request's shape, writes its numbers into a
 * preallocated slab and makes one synchronous call into the core; the core
 * writes the decision into preallocated typed arrays, read in place through
 * `router.decision`. Nothing is allocated per request for typed-array ids.
 */
import { OffloadOutcomeCode } from './codes.js';
import {
  COUNT_FIELDS,
  DECISION_FIELDS,
  DECISION_OFFLOAD,
  DECISION_PREFILL_SLOT,
  OFFLOAD_FIELDS,
  OFFLOAD_PREFILL_TICKET,
  EVENT_ABORT,
  EVENT_COMPLETE,
  EVENT_FIRST_TOKEN,
  EVENT_STAT_FIELDS,
  EventStat,
  FLAG_DRY_RUN,
  FLAG_TOKEN_KEYS,
  IDS_ARGUMENT,
  LOCK_STAT_FIELDS,
  IDS_F64,
  IDS_U32,
  IDS_U64,
  REQUEST_BLOCK_TOKENS,
  REQUEST_FIELDS,
  REQUEST_GROUP,
  REQUEST_IDS_KIND,
  OBSERVED_FIELDS,
  REQUEST_FLAGS,
  REQUEST_INPUT_TOKENS,
  STAT_FIELDS,
  Stat,
  TERM_COUNT,
  type CoreBuffers,
  type CoreIds,
  type CoreRouter,
} from './core-router.js';
import { DecisionView } from './decision-view.js';
import { describe, invalidType, rangeError, stateError } from './errors.js';
import { FEED_STATUSES, feedPath, feedWarning, type FeedStatus } from './feed.js';
import { hashTokenBlocks } from './hashing.js';
import { SlotKvEventSink, type KvEventSink, type KvEventSinkOwner } from './kv-event-sink.js';
import { GROUP_NONE, ModelGroups } from './model-groups.js';
import { loadNative, nativeDisabledByEnv } from './native.js';
import { resolvePolicy, toCorePolicy } from './policy-spec.js';
import { promptText } from './prompt-text.js';
import { ReferenceRouter } from './reference/reference-router.js';
import { buildExplanation, buildRouterStats } from './router-report.js';
import type {
  Decision,
  Explanation,
  InstanceOptions,
  InstanceSpec,
  ObservedState,
  PolicyName,
  PolicySpec,
  ResolvedPolicy,
  RouteRequest,
  RouterOptions,
  RouterStats,
} from './types.js';
import { checkInteger, checkNumber, checkObject, checkString, toCoreIds } from './validate.js';

const DEFAULT_CAPACITY_BLOCKS = 65_536;
const DEFAULT_BLOCK_SIZE = 16;
const MAX_BLOCK_TOKENS = 1 << 24;
const DEFAULT_CHUNK_BYTES = 128;
const DEFAULT_STALENESS_MS = 2_000;
const DEFAULT_MAX_SESSIONS = 1 << 20;
/** Routes between two looks at the feed's status (a warning may come this late). */
const FEED_CHECK_EVERY = 256;
/** Ticket events queued before the core applies them (see CoreBuffers.events). */
const EVENT_QUEUE = 256;
/** A ticket is generation * 2^32 + slab index (native/ticket-table.h). */
const TICKET_INDEX_RANGE = 2 ** 32;
const PHASE_CLOSED = 0;
/** The slab index of a ticket; floor arithmetic, as `%` on a double above the Smi range is slow. */
const indexOfTicket = (ticket: number): number => ticket - Math.floor(ticket / TICKET_INDEX_RANGE) * TICKET_INDEX_RANGE;
const PHASE_WAITING = 1;
/** Released tickets remembered for their callers' late complete(); the oldest are forgotten past this. */
const MAX_RELEASED = 65_536;
const PHASE_DECODING = 2;

/** What a router attached to a shared core takes from the sharing router (mirror(), adoptMirror()). */
export interface RouterMirror {
  instances: Array<{ id: string; slot: number; models: readonly string[] | null }>;
  groups: Array<[string, number]>;
  policy: ResolvedPolicy;
}

/** Explain-buffer slots an attached router keeps at least (see adoptMirror). */
const MIN_ATTACHED_SLOTS = 256;

export class Router {
  /** The last route() decision, valid until the next route() or explain(request). */
  readonly decision: Decision;
  private readonly core: CoreRouter;
  private readonly isNative: boolean;
  private readonly manualClock: boolean;
  private readonly defaultCapacity: number;
  /** Tokens per block of hashIds without their own blockTokens, and of prompt text (chunkBytes / 4). */
  private readonly idTokens: number;
  private readonly textTokens: number;
  private resolvedPolicy: ResolvedPolicy;
  private readonly names: Array<string | undefined> = [];
  private readonly slots = new Map<string, number>();
  private readonly groups = new ModelGroups();
  /** The request slab holds a model group or blockTokens (not the defaults). */
  private slabOptioned = false;
  private readonly request = new Float64Array(REQUEST_FIELDS);
  private readonly decisionBuf = new Int32Array(DECISION_FIELDS);
  private readonly offloadBuf = new Float64Array(OFFLOAD_FIELDS);
  private readonly events = new Float64Array(1 + 2 * EVENT_QUEUE);
  /** Mirror of the core's open tickets, by slab index, so complete() and
   * friends validate and queue without a call into the core. */
  private ticketAt: Float64Array = new Float64Array(64).fill(-1);
  private phaseAt: Uint8Array = new Uint8Array(64);
  /** The instance slot and the route count at which each open ticket was dispatched (for reconcile()). */
  private slotAt: Int32Array = new Int32Array(64);
  private routedAt: Float64Array = new Float64Array(64);
  private routeCount = 0;
  /** Per slot: the route count and the unexplained excess at its last reconcile(). */
  private readonly lastReconcile = new Map<number, { routeCount: number; excess: number }>();
  /** Tickets reconcile() released, so the caller's later complete()/abort() are no-ops (insertion order = age). */
  private readonly released = new Set<number>();
  private readonly view: DecisionView;
  private matched: Int32Array = new Int32Array(8);
  private scores: Float64Array = new Float64Array(8);
  private terms: Float64Array = new Float64Array(8 * TERM_COUNT);
  private readonly statsBuf = new Float64Array(STAT_FIELDS);
  private readonly observedBuf = new Float64Array(OBSERVED_FIELDS);
  private readonly countsBuf = new Float64Array(COUNT_FIELDS);
  private readonly lockStatsBuf = new Float64Array(LOCK_STAT_FIELDS);
  private lastRouted = false;
  private manualNowMs = 0;
  private readonly warn: (message: string) => void;
  private readonly feedPath: string | undefined;
  private feedReported: FeedStatus = 'ok';
  private routesSinceFeedCheck = 0;
  /** What the last route()/explain() request was keyed by (explain() reports it). */
  private keys: Explanation['keys'] = null;
  /** REQUEST_FLAGS bits of the request being routed besides dry run: FLAG_TOKEN_KEYS or 0. */
  private keyFlags = 0;
  private readonly blockSizeTokens: number;
  /** Each instance's way in for KV events, by slot: made by kvEventSink(), closed on removal. */
  private readonly sinks = new Map<number, SlotKvEventSink>();
  private readonly eventStatsBuf = new Float64Array(EVENT_STAT_FIELDS);

  constructor(options: RouterOptions) {
    const o = checkObject('options', options);
    this.resolvedPolicy = resolvePolicy(o.policy as PolicyName | PolicySpec | undefined, 'options.policy');
    const blockSize =
      o.blockSize === undefined ? DEFAULT_BLOCK_SIZE : checkInteger('options.blockSize', o.blockSize, 1, 1 << 24);
    const chunkBytes =
      o.hashChunkBytes === undefined
        ? DEFAULT_CHUNK_BYTES
        : checkInteger('options.hashChunkBytes', o.hashChunkBytes, 1, 1 << 24);
    const stalenessMs =
      o.stalenessMs === undefined ? DEFAULT_STALENESS_MS : checkNumber('options.stalenessMs', o.stalenessMs, 0, 1e12);
    const maxSessions =
      o.maxSessions === undefined
        ? DEFAULT_MAX_SESSIONS
        : checkInteger('options.maxSessions', o.maxSessions, 1, 2 ** 32 - 1);
    this.defaultCapacity =
      o.capacityBlocks === undefined
        ? DEFAULT_CAPACITY_BLOCKS
        : checkInteger('options.capacityBlocks', o.capacityBlocks, 1);
    if (o.clock !== undefined && o.clock !== 'real' && o.clock !== 'manual') {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `options.clock must be "real" or "manual", got ${JSON.stringify(o.clock)}`,
      );
    }
    this.manualClock = o.clock === 'manual';
    if (o.native !== undefined && typeof o.native !== 'boolean')
      throw invalidType('options.native', 'a boolean', o.native);
    this.isNative = o.native ?? !nativeDisabledByEnv();
    const attach = o.attach === undefined ? undefined : checkInteger('options.attach', o.attach, 1, 2 ** 32 - 1);
    if (attach !== undefined && !this.isNative)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'options.attach needs the native router: a TypeScript reference core cannot be shared across threads',
      );
    this.idTokens = blockSize;
    this.blockSizeTokens = blockSize;
    this.textTokens = chunkBytes / 4;
    const instances = this.instanceSpecs(o.instances);
    if (attach !== undefined && instances.length > 0)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'options.instances must be empty with options.attach: the shared core names its instances (adoptMirror)',
      );

    const feed = this.feedOption(o.engineState);
    if (o.onWarning !== undefined && typeof o.onWarning !== 'function')
      throw invalidType('options.onWarning', 'a function', o.onWarning);
    this.warn =
      (o.onWarning as ((message: string) => void) | undefined) ??
      ((message) => process.emitWarning(message, { code: 'KVROUTE_STATE_FEED' }));
    const config = {
      policy: toCorePolicy(this.resolvedPolicy),
      blockTokens: blockSize,
      chunkBytes,
      stalenessMs,
      maxSessions,
      manualClock: this.manualClock,
      feedPath: feed ?? null,
      ...(attach === undefined ? {} : { attach }),
    };
    this.request[REQUEST_GROUP] = GROUP_NONE;
    this.request[REQUEST_BLOCK_TOKENS] = NaN;
    const buffers: CoreBuffers = {
      request: this.request,
      decision: this.decisionBuf,
      offload: this.offloadBuf,
      events: this.events,
    };
    this.core = this.isNative ? new (loadNative().NativeRouter)(config, buffers) : new ReferenceRouter(config, buffers);
    this.core.setExplainBuffers(this.matched, this.scores, this.terms);
    this.view = new DecisionView(this.decisionBuf, this.offloadBuf, this.names, this.matched);
    this.decision = this.view;
    this.decisionBuf[0] = -1;
    instances.forEach((spec, k) => {
      movedKvEventOption(`options.instances[${k}]`, spec);
      this.addInstance(spec.id, { capacityBlocks: spec.capacityBlocks, models: spec.models });
    });
    this.feedPath = feed;
    if (feed !== undefined) this.checkFeed();
  }

  /** The feed path of `options.engineState`, or undefined for shadow state. */
  private feedOption(engineState: unknown): string | undefined {
    if (engineState === undefined || engineState === 'shadow') return undefined;
    const spec = checkObject('options.engineState', engineState);
    if (typeof spec.shm !== 'string')
      throw invalidType('options.engineState.shm', 'a feed name or path (or engineState "shadow")', spec.shm);
    return feedPath(spec.shm);
  }

  /**
   * Warns once when the feed becomes unreadable (and again if it recovers and breaks anew). The
   * core keeps routing on shadow state meanwhile; this only looks every FEED_CHECK_EVERY routes.
   */
  private checkFeed(): void {
    const status = FEED_STATUSES[this.core.feedStatus()] ?? 'missing';
    if (status !== 'ok' && status !== this.feedReported) this.warn(feedWarning(this.feedPath!, status));
    this.feedReported = status;
  }

  /** True when the native addon routes; false for the TypeScript reference. */
  get native(): boolean {
    return this.isNative;
  }

  get policy(): ResolvedPolicy {
    const p = this.resolvedPolicy;
    return { ...p, offload: p.offload === null ? null : { ...p.offload } };
  }

  /**
   * Publishes this router's native core to the other threads of the process and returns the
   * handle their routers take as `options.attach` (docs/scale-out.md). From then on every call
   * into the core, from any thread, holds its lock.
   */
  share(): number {
    if (this.core.shareCore === undefined)
      throw stateError('ERR_KVROUTE_NATIVE_UNAVAILABLE', 'only the native router core can be shared across threads');
    return this.core.shareCore();
  }

  /**
   * The shared core's lock counters (zeros until shared): `ops` calls held it, `contended` of them
   * had to wait. Applies this router's queued ticket events first, as call number `thisOp`;
   * `previousOp` is the number of this router's call before it (a route(), say), so a test can
   * replay N threads' calls in exactly the order the core took them.
   */
  lockStats(): { previousOp: number; thisOp: number; ops: number; contended: number } {
    const out = this.lockStatsBuf;
    out.fill(0);
    this.core.lockStats?.(out);
    return { previousOp: out[0]!, thisOp: out[1]!, ops: out[2]!, contended: out[3]! };
  }

  /** What a router attached to this one's core adopts to name slots and model groups the same way. */
  mirror(): RouterMirror {
    const instances: RouterMirror['instances'] = [];
    this.names.forEach((id, slot) => {
      if (id !== undefined) instances.push({ id, slot, models: this.groups.slots[slot] ?? null });
    });
    return { instances, groups: this.groups.entries(), policy: this.policy };
  }

  /**
   * Names the shared core's slots and groups as the sharing router does (its mirror()); touches
   * nothing in the core. Open tickets stay valid. For a router made with `options.attach` only.
   */
  adoptMirror(mirror: RouterMirror): void {
    this.names.length = 0;
    this.slots.clear();
    const bySlot: Array<readonly string[] | undefined> = [];
    for (const { id, slot, models } of mirror.instances) {
      this.names[slot] = id;
      this.slots.set(id, slot);
      bySlot[slot] = models ?? undefined;
    }
    this.groups.adopt(mirror.groups, bySlot);
    // The sharer may add instances before this router adopts them, and the core refuses a route
    // whose explain buffers cannot hold every slot: keep room for twice the core's slots.
    this.core.counts(this.countsBuf);
    const room = Math.max(MIN_ATTACHED_SLOTS, 2 * this.countsBuf[2]!);
    if (room > this.matched.length) this.growExplainBuffers(room);
    this.resolvedPolicy = mirror.policy;
  }

  /** Instance ids in index order. */
  instances(): string[] {
    return this.names.filter((name): name is string => name !== undefined);
  }

  /**
   * Places a request: picks an instance, records the dispatch (cache blocks,
   * shadow counters) and returns its ticket for onFirstToken/complete/abort.
   * Read where it went from `router.decision`. When the policy's offload layer
   * offloads the prefill, the returned ticket is the decode's (on
   * `decision.instance`) and `decision.offload.prefillTicket` is the prefill
   * phase's, on `decision.offload.prefillInstance`: report its
   * onFirstToken()/complete() when the prefill instance answers, abort() when
   * it fails. Throws ERR_KVROUTE_NO_INSTANCE
   * when no instance is a candidate: every instance is drained or removed, or
   * none of the rest serves the request's model.
   */
  route(request: RouteRequest): number {
    const ids = this.requestIds(request);
    this.request[REQUEST_INPUT_TOKENS] = this.inputTokens(request);
    this.request[REQUEST_FLAGS] = this.keyFlags;
    this.requestOptions(request);
    const ticket = this.core.route(ids, this.session(request));
    this.notePrediction();
    if (this.feedPath !== undefined && ++this.routesSinceFeedCheck >= FEED_CHECK_EVERY) {
      this.routesSinceFeedCheck = 0;
      this.checkFeed();
    }
    this.lastRouted = true;
    this.view.ticket = ticket;
    if (ticket < 0) throw noInstance(request.model);
    this.track(ticket, this.decisionBuf[0]!);
    // An offload opened the prefill phase's ticket too; one test when the layer is off.
    if (this.decisionBuf[DECISION_OFFLOAD] === OffloadOutcomeCode.Offload)
      this.track(this.offloadBuf[OFFLOAD_PREFILL_TICKET]!, this.decisionBuf[DECISION_PREFILL_SLOT]!);
    return ticket;
  }

  /**
   * Explains a decision. With a request: where it would go and why, changing
   * nothing (a dry run). Without: the last route().
   */
  explain(request?: RouteRequest): Explanation {
    if (request !== undefined) {
      const ids = this.requestIds(request);
      this.request[REQUEST_INPUT_TOKENS] = this.inputTokens(request);
      this.requestOptions(request);
      this.request[REQUEST_FLAGS] = FLAG_DRY_RUN | this.keyFlags;
      try {
        this.core.route(ids, this.session(request));
        this.notePrediction();
      } finally {
        this.request[REQUEST_FLAGS] = 0;
      }
      this.lastRouted = false;
      this.view.ticket = -1;
      return buildExplanation(this.snapshot(), true, this.keys, (slot) => this.eventFed(slot));
    }
    if (!this.lastRouted)
      throw stateError('ERR_KVROUTE_NO_INSTANCE', 'explain() without a request needs a prior route()');
    return buildExplanation(this.snapshot(), false, this.keys, (slot) => this.eventFed(slot));
  }

  /** Leading blocks of the request each instance holds, by instance id. */
  match(request: RouteRequest): Record<string, number> {
    const lastKeys = this.keys; // explain() of the last route must still report its keys
    const ids = this.requestIds(request);
    this.keys = lastKeys;
    this.request[REQUEST_INPUT_TOKENS] = this.inputTokens(request);
    this.request[REQUEST_FLAGS] = this.keyFlags;
    const matched = new Int32Array(this.matched.length);
    // Own buffers, so the last decision's explanation stays intact.
    this.core.setExplainBuffers(matched, new Float64Array(this.matched.length));
    try {
      this.core.match(ids);
    } finally {
      this.core.setExplainBuffers(this.matched, this.scores, this.terms);
    }
    const out: Record<string, number> = {};
    this.names.forEach((name, slot) => {
      if (name !== undefined) out[name] = matched[slot]!;
    });
    return out;
  }

  /** The request produced its first token: it moves from waiting to decoding. Repeats are no-ops. */
  onFirstToken(ticket: number): void {
    const index = this.openIndex(ticket);
    if (index < 0 || this.phaseAt[index] !== PHASE_WAITING) return;
    this.phaseAt[index] = PHASE_DECODING;
    this.enqueue(ticket, EVENT_FIRST_TOKEN);
  }

  /** The request finished: its load leaves the instance. */
  complete(ticket: number): void {
    this.closeTicket(ticket, EVENT_COMPLETE);
  }

  /** The request was cancelled: like complete(), counted as aborted. */
  abort(ticket: number): void {
    this.closeTicket(ticket, EVENT_ABORT);
  }

  /**
   * Reconciles the shadow counters with the engine's own count of its requests (running + waiting,
   * from its /metrics): releases open tickets the engine no longer has, as if aborted, and returns
   * how many. The shadow counters only ever count this router's open tickets, so the one way they
   * drift is a ticket whose complete()/abort() never comes; load from elsewhere is not drift (the
   * feed and setObservedState() carry it).
   *
   * A request in transit (dispatched but not yet at the engine, or finished at the engine but not
   * yet relayed) makes the engine's count briefly differ, so a ticket is released only when an
   * excess of open tickets over the engine's count persists from this instance's previous
   * reconcile() and the ticket was already open then; the oldest go first. A released ticket's
   * later onFirstToken()/complete()/abort() are no-ops.
   */
  reconcile(instance: string, engineRequests: number): number {
    const slot = this.slotOf(instance);
    const count = checkInteger('engineRequests', engineRequests, 0);
    const previous = this.lastReconcile.get(slot);
    const open: number[] = [];
    for (let index = 0; index < this.ticketAt.length; index++)
      if (this.phaseAt[index] !== PHASE_CLOSED && this.slotAt[index] === slot) open.push(index);
    const excess = open.length - count;
    let release = 0;
    if (previous !== undefined && excess > 0 && previous.excess > 0) {
      const eligible = open.filter((index) => this.routedAt[index]! <= previous.routeCount);
      eligible.sort((a, b) => this.routedAt[a]! - this.routedAt[b]!);
      release = Math.min(excess, previous.excess, eligible.length);
      for (const index of eligible.slice(0, release)) {
        const ticket = this.ticketAt[index]!;
        this.closeTicket(ticket, EVENT_ABORT);
        this.released.add(ticket);
      }
      for (const ticket of this.released) {
        if (this.released.size <= MAX_RELEASED) break;
        this.released.delete(ticket);
      }
    }
    this.lastReconcile.set(slot, { routeCount: this.routeCount, excess: excess - release });
    return release;
  }

  /** Feeds an engine's real state (null clears it); used while fresh, as max(shadow, observed). */
  setObservedState(instance: string, state: ObservedState | null): void {
    const slot = this.slotOf(instance);
    if (state === null) {
      this.core.setObserved(slot, null);
      return;
    }
    const s = checkObject('state', state);
    const field = (key: keyof ObservedState): number =>
      s[key] === undefined ? NaN : checkNumber(`state.${key}`, s[key], 0, Number.MAX_SAFE_INTEGER);
    const b = this.observedBuf;
    b[0] = s.timestampMs === undefined ? this.now() : checkNumber('state.timestampMs', s.timestampMs, -1e15, 1e15);
    b[1] = field('running');
    b[2] = field('waiting');
    b[3] = field('kvBlocksUsed');
    b[4] = field('kvBlocksTotal');
    b[5] = field('pendingPrefillTokens');
    b[6] = field('maxPrefillRemaining');
    b[7] = field('decodeBatch');
    this.core.setObserved(slot, b);
  }

  /** Sets the manual clock (options.clock = 'manual'), in ms. */
  setTime(nowMs: number): void {
    if (!this.manualClock)
      throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', "setTime() needs options.clock = 'manual'");
    this.core.setTime(checkNumber('nowMs', nowMs, -1e15, 1e15));
    this.manualNowMs = nowMs;
  }

  /** Switches policy live; caches, counters and sticky pins carry over. */
  setPolicy(policy: PolicyName | PolicySpec): void {
    const resolved = resolvePolicy(policy);
    this.core.setPolicy(toCorePolicy(resolved));
    this.resolvedPolicy = resolved;
  }

  /**
   * Adds an instance. `models` lists the models it serves; omitted, it serves any model (a
   * wildcard); an empty array, none (it takes only requests that name no model).
   */
  addInstance(id: string, options: InstanceOptions = {}): void {
    checkString('instance id', id);
    if (id.length === 0) throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', 'instance id must not be empty');
    if (this.slots.has(id))
      throw rangeError('ERR_KVROUTE_DUPLICATE_INSTANCE', `instance ${JSON.stringify(id)} already exists`);
    const opts = checkObject('options', options);
    movedKvEventOption(`options of ${describe(id)}`, opts);
    const capacity =
      opts.capacityBlocks === undefined
        ? this.defaultCapacity
        : checkInteger(`capacityBlocks of ${JSON.stringify(id)}`, opts.capacityBlocks, 1);
    const models = this.groups.check(id, opts.models);
    this.core.counts(this.countsBuf);
    if (this.countsBuf[2]! + 1 > this.matched.length) this.growExplainBuffers(this.matched.length * 2);
    const slot = this.core.addInstance(id, capacity);
    this.names[slot] = id;
    this.slots.set(id, slot);
    const groups = this.groups.declare(slot, models);
    if (groups !== null) this.core.setInstanceGroups(slot, groups);
  }

  /**
   * Stops every KV event subscription (instances keep routing on their belief indexes). The
   * router stays usable; call it before dropping a router whose instances have event
   * subscriptions, or their sockets keep the process alive.
   */
  async close(): Promise<void> {
    const closing: Array<Promise<void>> = [];
    for (const sink of this.sinks.values()) {
      const owner = sink.owner;
      sink.owner = undefined;
      if (owner !== undefined) closing.push(owner.close());
    }
    await Promise.all(closing);
  }

  /**
   * Changes the models an instance serves, live (undefined: any model; [] none). Its cache,
   * counters, open tickets and the sticky pins to it stay; a pin is only ever honoured for a
   * model the instance serves at the time.
   */
  setInstanceModels(id: string, models: readonly string[] | undefined): void {
    const slot = this.slotOf(id);
    const checked = this.groups.check(id, models);
    this.core.setInstanceGroups(slot, this.groups.declare(slot, checked));
  }

  /** The models the instance declares, sorted; undefined when it serves any model. */
  instanceModels(id: string): string[] | undefined {
    const models = this.groups.slots[this.slotOf(id)];
    return models === undefined ? undefined : [...models];
  }

  /** Every model some instance declares, sorted (wildcard instances add none). */
  models(): string[] {
    return this.groups.declared();
  }

  /** Stops sending new requests to the instance; in-flight ones finish and its cache is kept. */
  drainInstance(id: string): void {
    this.core.drainInstance(this.slotOf(id));
  }

  /** Puts a drained instance back into routing, its cache model, counters and pins as they were. */
  resumeInstance(id: string): void {
    this.core.drainInstance(this.slotOf(id), false);
  }

  /** Forgets the instance, its cache and its counters; open tickets on it stay valid. */
  removeInstance(id: string): void {
    const slot = this.slotOf(id);
    // Before the core frees the slot: a closed sink (and its feed) never touches it again.
    void this.sinks.get(slot)?.close();
    this.sinks.delete(slot);
    this.core.removeInstance(slot);
    this.lastReconcile.delete(slot);
    // Open tickets on it stay valid but belong to no slot: a new instance may reuse the slot.
    for (let index = 0; index < this.slotAt.length; index++) if (this.slotAt[index] === slot) this.slotAt[index] = -1;
    this.names[slot] = undefined;
    this.slots.delete(id);
    this.groups.forget(slot);
  }

  /** Forgets blocks (and everything below them) on one instance, e.g. on an engine eviction event. */
  removeBlocks(instance: string, hashIds: RouteRequest['hashIds']): number {
    return this.core.removeBlocks(this.slotOf(instance), toCoreIds('hashIds', hashIds));
  }

  /**
   * The way in for an instance's KV events (src/core/kv-event-sink.ts): whoever receives its
   * engine's events applies them here, packed. subscribeKvEvents() (a ZeroMQ subscription) and
   * applyKvEvents() (events received elsewhere) from 'kvroute' are the two ready-made feeders;
   * docs/kv-events.md. With `owner`, the caller becomes the instance's only writer: the router
   * reports its stats() and closes it with the instance or on close(). Throws
   * ERR_KVROUTE_KV_EVENT when the instance already has an owner.
   */
  kvEventSink(instance: string, owner?: KvEventSinkOwner): KvEventSink {
    const slot = this.slotOf(instance);
    let sink = this.sinks.get(slot);
    if (sink?.owner !== undefined)
      throw stateError(
        'ERR_KVROUTE_KV_EVENT',
        `instance ${describe(instance)} is fed by its own kvEvents subscription; a second writer would interleave a second stream`,
      );
    if (sink === undefined) {
      sink = new SlotKvEventSink(this.core, slot, instance, this.warn);
      this.sinks.set(slot, sink);
    }
    if (owner !== undefined) sink.owner = owner;
    return sink;
  }

  /** Empties one instance's cache model, or every instance's. */
  clearBlocks(instance?: string): void {
    if (instance !== undefined) this.core.clearBlocks(this.slotOf(instance));
    else for (const slot of this.slots.values()) this.core.clearBlocks(slot);
  }

  /** Changes an instance's capacity; shrinking evicts at once. Returns blocks evicted. */
  setCapacity(instance: string, capacityBlocks: number): number {
    return this.core.setCapacity(this.slotOf(instance), checkInteger('capacityBlocks', capacityBlocks, 1));
  }

  stats(): RouterStats {
    return buildRouterStats({
      core: this.core,
      native: this.isNative,
      policy: this.policy,
      names: this.names,
      models: this.groups.slots,
      statsBuf: this.statsBuf,
      countsBuf: this.countsBuf,
      kvEvents: (slot) => this.sinks.get(slot)?.owner?.stats() ?? null,
    });
  }

  /** Whether route() answers `slot`'s token-keyed matches from its KV events now (the core's flag, whoever feeds it). */
  private eventFed(slot: number): boolean {
    this.core.eventStats(slot, this.eventStatsBuf);
    return this.eventStatsBuf[EventStat.EventFed] === 1;
  }

  /** "" when the core's internal invariants hold; else the first violation. For tests. */
  checkInvariants(): string {
    return this.core.checkInvariants();
  }

  private snapshot() {
    return {
      policy: this.resolvedPolicy.name,
      decision: this.decisionBuf,
      offload: this.offloadBuf,
      offloadThreshold: this.resolvedPolicy.offload?.thresholdTokens ?? null,
      ticket: this.view.ticket,
      names: this.names,
      matched: this.matched,
      scores: this.scores,
      terms: this.terms,
      drained: (slot: number) => {
        this.core.stats(slot, this.statsBuf);
        return this.statsBuf[Stat.Drained] === 1;
      },
    };
  }

  /**
   * Keeps what the decision's predictedCachedTokens needs besides the matched blocks (read later,
   * on demand): the request's tokens per block and its prompt tokens, as the slab holds them now.
   */
  private notePrediction(): void {
    const r = this.request;
    const blockTokens = r[REQUEST_BLOCK_TOKENS]!;
    this.view.blockTokens = !Number.isNaN(blockTokens)
      ? blockTokens
      : r[REQUEST_IDS_KIND] === IDS_ARGUMENT
        ? this.textTokens
        : this.idTokens;
    this.view.promptTokens = r[REQUEST_INPUT_TOKENS]!;
  }

  private now(): number {
    return this.manualClock ? this.manualNowMs : Date.now();
  }

  private growExplainBuffers(length: number): void {
    const matched = new Int32Array(length);
    matched.set(this.matched); // the last decision's prediction reads it
    this.matched = matched;
    this.view.matched = matched;
    this.scores = new Float64Array(length);
    this.terms = new Float64Array(length * TERM_COUNT);
    this.core.setExplainBuffers(this.matched, this.scores, this.terms);
  }

  private slotOf(id: string): number {
    const slot = typeof id === 'string' ? this.slots.get(id) : undefined;
    if (slot === undefined)
      throw rangeError('ERR_KVROUTE_UNKNOWN_INSTANCE', `instance ${JSON.stringify(id)} is not known`);
    return slot;
  }

  private track(ticket: number, slot: number): void {
    const index = indexOfTicket(ticket);
    if (index >= this.ticketAt.length) this.growTracking(index);
    this.ticketAt[index] = ticket;
    this.phaseAt[index] = PHASE_WAITING;
    this.slotAt[index] = slot;
    this.routedAt[index] = ++this.routeCount;
  }

  /** Makes room for ticket slab index `index` (rare: apart from track(), so route() inlines it). */
  private growTracking(index: number): void {
    const ticketAt = new Float64Array(Math.max(index + 1, this.ticketAt.length * 2)).fill(-1);
    ticketAt.set(this.ticketAt);
    const phaseAt = new Uint8Array(ticketAt.length);
    phaseAt.set(this.phaseAt);
    const slotAt = new Int32Array(ticketAt.length);
    slotAt.set(this.slotAt);
    const routedAt = new Float64Array(ticketAt.length);
    routedAt.set(this.routedAt);
    this.ticketAt = ticketAt;
    this.phaseAt = phaseAt;
    this.slotAt = slotAt;
    this.routedAt = routedAt;
  }

  /**
   * The slab index of an open ticket, or -1 for one reconcile() released; throws
   * ERR_KVROUTE_UNKNOWN_TICKET otherwise.
   */
  private openIndex(ticket: number): number {
    if (typeof ticket !== 'number') throw invalidType('ticket', 'a number', ticket);
    const index = Number.isSafeInteger(ticket) && ticket >= 0 ? indexOfTicket(ticket) : -1;
    if (index < 0 || this.ticketAt[index] !== ticket || this.phaseAt[index] === PHASE_CLOSED) {
      if (this.released.size > 0 && this.released.has(ticket)) return -1;
      throw unknownTicket(ticket);
    }
    return index;
  }

  private closeTicket(ticket: number, kind: number): void {
    const index = this.openIndex(ticket);
    if (index < 0) {
      this.released.delete(ticket); // the caller's own close of a released ticket: done with it
      return;
    }
    this.phaseAt[index] = PHASE_CLOSED;
    this.ticketAt[index] = -1;
    this.enqueue(ticket, kind);
  }

  private enqueue(ticket: number, kind: number): void {
    let n = this.events[0]!;
    if (n === EVENT_QUEUE) {
      this.core.drainEvents();
      n = 0;
    }
    this.events[1 + 2 * n] = ticket;
    this.events[2 + 2 * n] = kind;
    this.events[0] = n + 1;
  }

  private requestIds(request: RouteRequest): CoreIds | string | undefined {
    if (typeof request !== 'object' || request === null) throw invalidType('request', 'an object', request);
    const { hashIds, prompt, messages, tokens } = request;
    const given =
      (hashIds !== undefined ? 1 : 0) +
      (prompt !== undefined ? 1 : 0) +
      (messages !== undefined ? 1 : 0) +
      (tokens !== undefined ? 1 : 0);
    if (given > 1) {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'give at most one of request.hashIds, request.prompt, request.messages and request.tokens',
      );
    }
    this.keyFlags = 0;
    if (hashIds !== undefined) {
      this.keys = request.idsFrom === 'text' ? 'text' : 'hash_ids';
      return this.typedIds(hashIds);
    }
    if (tokens !== undefined) {
      this.keys = 'tokens';
      this.keyFlags = FLAG_TOKEN_KEYS;
      this.request[REQUEST_IDS_KIND] = IDS_U64;
      return hashTokenBlocks(tokenArray(tokens), this.blockSizeTokens);
    }
    this.request[REQUEST_IDS_KIND] = IDS_ARGUMENT;
    this.keys = prompt !== undefined || messages !== undefined ? 'text' : null;
    if (prompt !== undefined) return checkString('request.prompt', prompt);
    if (messages !== undefined) return promptText(messages, 'request.messages');
    return undefined;
  }

  /** Ids as a typed array, their kind named in the request slab for the core (see IDS_*). */
  private typedIds(hashIds: RouteRequest['hashIds']): CoreIds {
    const r = this.request;
    if (hashIds instanceof BigUint64Array) r[REQUEST_IDS_KIND] = IDS_U64;
    else if (hashIds instanceof Float64Array) r[REQUEST_IDS_KIND] = IDS_F64;
    else if (hashIds instanceof Uint32Array) r[REQUEST_IDS_KIND] = IDS_U32;
    else {
      const ids = toCoreIds('request.hashIds', hashIds); // a plain array, copied
      r[REQUEST_IDS_KIND] = ids instanceof BigUint64Array ? IDS_U64 : IDS_F64;
      return ids;
    }
    return hashIds;
  }

  /**
   * Writes the request's model group and blockTokens into the slab, or leaves the defaults there.
   * A request with neither costs two property loads: route() and the checks it calls stay small
   * enough for V8 to inline them all into it.
   */
  private requestOptions(request: RouteRequest): void {
    if (request.model === undefined && request.blockTokens === undefined && !this.slabOptioned) return;
    this.setRequestOptions(request);
  }

  private setRequestOptions(request: RouteRequest): void {
    const { model, blockTokens } = request;
    this.slabOptioned = true; // until both are written: a throw between them leaves no default behind
    this.request[REQUEST_GROUP] = model === undefined ? GROUP_NONE : this.groups.groupOf(model);
    this.request[REQUEST_BLOCK_TOKENS] = blockTokens === undefined ? NaN : this.blockTokens(request);
    this.slabOptioned = model !== undefined || blockTokens !== undefined;
  }

  private blockTokens(request: RouteRequest): number {
    if (request.tokens !== undefined)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        "request.blockTokens applies to request.hashIds only: request.tokens are keyed at the router's blockSize",
      );
    if (request.prompt !== undefined || request.messages !== undefined) {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'request.blockTokens applies to request.hashIds only: the router hashes request.prompt and ' +
          'request.messages itself, at hashChunkBytes / 4 tokens per block',
      );
    }
    return checkInteger('request.blockTokens', request.blockTokens, 1, MAX_BLOCK_TOKENS);
  }

  private inputTokens(request: RouteRequest): number {
    if (request.inputTokens !== undefined) return checkInteger('request.inputTokens', request.inputTokens, 0);
    return request.tokens === undefined ? NaN : request.tokens.length;
  }

  private session(request: RouteRequest): string | undefined {
    const s = request.session;
    if (s === undefined || typeof s === 'string') return s;
    if (typeof s === 'number' && Number.isFinite(s)) return String(s);
    throw invalidType('request.session', 'a string or a finite number', s);
  }

  private instanceSpecs(instances: unknown): Array<InstanceSpec & { kvEvents?: unknown; kvReplay?: unknown }> {
    if (typeof instances === 'number') {
      checkInteger('options.instances', instances, 0, 65_536);
      return Array.from({ length: instances }, (_, k) => ({ id: `engine-${k}` }));
    }
    if (!Array.isArray(instances))
      throw invalidType('options.instances', 'a count or an array of instance ids', instances);
    return instances.map((spec: unknown, k) => {
      if (typeof spec === 'string') return { id: spec };
      const s = checkObject(`options.instances[${k}]`, spec) as Partial<InstanceSpec> & {
        kvEvents?: unknown;
        kvReplay?: unknown;
      };
      return {
        id: checkString(`options.instances[${k}].id`, s.id),
        capacityBlocks: s.capacityBlocks,
        models: s.models,
        ...(s.kvEvents === undefined ? {} : { kvEvents: s.kvEvents }),
        ...(s.kvReplay === undefined ? {} : { kvReplay: s.kvReplay }),
      };
    });
  }
}

/**
 * Refuses the kvEvents/kvReplay instance options of kvroute 0.1: the router core no longer owns
 * transports, so the caller subscribes the instance itself.
 */
function movedKvEventOption(field: string, options: { kvEvents?: unknown; kvReplay?: unknown }): void {
  const key = options.kvEvents !== undefined ? 'kvEvents' : options.kvReplay !== undefined ? 'kvReplay' : undefined;
  if (key === undefined) return;
  throw rangeError(
    'ERR_KVROUTE_INVALID_ARG_VALUE',
    `${field}.${key} is no longer a Router option: add the instance, then subscribe it with ` +
      "subscribeKvEvents(router, id, { endpoint, replay }) from 'kvroute' (docs/kv-events.md)",
  );
}

/** request.tokens as a Uint32Array, each id checked (an integer in [0, 2^32)). */
function tokenArray(tokens: unknown): Uint32Array {
  if (tokens instanceof Uint32Array) return tokens;
  if (!Array.isArray(tokens)) throw invalidType('request.tokens', 'a Uint32Array or an array of token ids', tokens);
  const out = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffffffff)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `request.tokens[${i}] must be a token id in [0, 2^32), got ${describe(t)}`,
      );
    out[i] = t;
  }
  return out;
}

function noInstance(model: string | undefined) {
  return model === undefined
    ? stateError('ERR_KVROUTE_NO_INSTANCE', 'no routable instance: every instance is drained or removed')
    : stateError(
        'ERR_KVROUTE_NO_INSTANCE',
        `no routable instance serves model ${describe(model)}: every instance declaring it, and every ` +
          'instance serving any model, is drained or removed (or there is none)',
      );
}

function unknownTicket(ticket: number) {
  return rangeError('ERR_KVROUTE_UNKNOWN_TICKET', `ticket ${ticket} is not open (unknown, completed or aborted)`);
}
