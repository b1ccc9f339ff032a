/**
 * Router — the public routing core: validates, then drives one CoreRouter
 * (the native addon, or the TypeScript reference with { native: false }).
 *
 * Hot path: route() checks the request's shape, writes its numbers into a
 * preallocated slab and makes one synchronous call into the core; the core
 * writes the decision into preallocated typed arrays, read in place through
 * `router.decision`. Nothing is allocated per request for typed-array ids.
 *
 * The Router composes; each concern lives in its own file:
 * - router-options.ts: the constructor's options, checked, with their defaults;
 * - request-keys.ts: a request's keys (hashIds, tokens, text), model group and blockTokens;
 * - ticket-mirror.ts: the open tickets, mirrored for complete()/abort() and reconcile();
 * - thread-sharing.ts: mirror()/adoptMirror() for routers sharing one native core;
 * - kv-event-sink.ts: the way in for KV events (the core owns no transport; src/events feeds it);
 * - instance-costs.ts: min_ttft's per-instance prices (learned costs), kept and pushed into the core;
 * - router-report.ts: stats() and explain().
 * Long file: about 670 lines, past the ~500 of the house style; what is left is the public API itself (each
 * method a few lines of checks and one call into the core) and its JSDoc, which the exported .d.ts
 * carries; splitting the class further would split its documentation from it.
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
  EVENT_STAT_FIELDS,
  EventStat,
  FLAG_DRY_RUN,
  IDS_ARGUMENT,
  LOCK_STAT_FIELDS,
  REQUEST_BLOCK_TOKENS,
  REQUEST_FIELDS,
  REQUEST_IDS_KIND,
  OBSERVED_FIELDS,
  PEER_LOAD_FIELDS,
  REQUEST_FLAGS,
  REQUEST_INPUT_TOKENS,
  STAT_FIELDS,
  Stat,
  TERM_COUNT,
  type CoreBuffers,
  type CoreRouter,
} from './core-router.js';
import { DecisionView } from './decision-view.js';
import { describe, invalidType, invalidValue, rangeError, stateError } from './errors.js';
import { FEED_STATUSES, feedWarning, type FeedStatus } from './feed.js';
import { InstanceCostTable, type CostSource, type RoutingCosts } from './instance-costs.js';
import { SlotKvEventSink, type KvEventSink, type KvEventSinkOwner } from './kv-event-sink.js';
import { GROUP_NONE, ModelGroups } from './model-groups.js';
import { loadNative } from './native.js';
import { resolvePolicy, toCorePolicy } from './policy-spec.js';
import { ReferenceRouter } from './reference/reference-router.js';
import { RequestKeys } from './request-keys.js';
import { buildExplanation, buildRouterStats } from './router-report.js';
import { refuseMovedKvEventOption, resolveRouterOptions } from './router-options.js';
import { adoptNames, lockStatsOf, mirrorOf, type InstanceNames, type RouterMirror } from './thread-sharing.js';
import { TicketMirror } from './ticket-mirror.js';
import type {
  Decision,
  Explanation,
  InstanceOptions,
  ObservedState,
  PeerLoad,
  PolicyName,
  PolicySpec,
  ResolvedPolicy,
  RouteRequest,
  RouterOptions,
  RouterStats,
} from './types.js';
import { checkInteger, checkNumber, checkObject, checkString, toCoreIds } from './validate.js';

export type { RouterMirror } from './thread-sharing.js';

/** Routes between two looks at the feed's status (a warning may come this late). */
const FEED_CHECK_EVERY = 256;

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
  private readonly request = new Float64Array(REQUEST_FIELDS);
  private readonly decisionBuf = new Int32Array(DECISION_FIELDS);
  private readonly offloadBuf = new Float64Array(OFFLOAD_FIELDS);
  /** The core's open tickets, mirrored so complete() and friends need no call into the core. */
  private readonly tickets = new TicketMirror();
  private readonly keys: RequestKeys;
  private readonly view: DecisionView;
  private matched: Int32Array = new Int32Array(8);
  private scores: Float64Array = new Float64Array(8);
  private terms: Float64Array = new Float64Array(8 * TERM_COUNT);
  private readonly statsBuf = new Float64Array(STAT_FIELDS);
  private readonly observedBuf = new Float64Array(OBSERVED_FIELDS);
  private readonly peerLoadBuf = new Float64Array(PEER_LOAD_FIELDS);
  private readonly countsBuf = new Float64Array(COUNT_FIELDS);
  private readonly lockStatsBuf = new Float64Array(LOCK_STAT_FIELDS);
  private lastRouted = false;
  private manualNowMs = 0;
  private readonly warn: (message: string) => void;
  private readonly feedPath: string | undefined;
  private feedReported: FeedStatus = 'ok';
  private routesSinceFeedCheck = 0;
  /** Each instance's way in for KV events, by slot: made by kvEventSink(), closed on removal. */
  private readonly sinks = new Map<number, SlotKvEventSink>();
  private readonly eventStatsBuf = new Float64Array(EVENT_STAT_FIELDS);
  private readonly costs: InstanceCostTable;

  constructor(options: RouterOptions) {
    const o = resolveRouterOptions(options);
    this.resolvedPolicy = o.policy;
    this.defaultCapacity = o.capacityBlocks;
    this.manualClock = o.manualClock;
    this.isNative = o.native;
    this.idTokens = o.blockSize;
    this.textTokens = o.chunkBytes / 4;
    this.warn = o.warn;
    this.keys = new RequestKeys(this.request, this.groups, o.blockSize);
    const config = {
      policy: toCorePolicy(this.resolvedPolicy),
      blockTokens: o.blockSize,
      chunkBytes: o.chunkBytes,
      stalenessMs: o.stalenessMs,
      maxSessions: o.maxSessions,
      manualClock: this.manualClock,
      feedPath: o.feedPath ?? null,
      ...(o.attach === undefined ? {} : { attach: o.attach }),
    };
    const buffers: CoreBuffers = {
      request: this.request,
      decision: this.decisionBuf,
      offload: this.offloadBuf,
      events: this.tickets.events,
    };
    this.core = this.isNative ? new (loadNative().NativeRouter)(config, buffers) : new ReferenceRouter(config, buffers);
    this.costs = new InstanceCostTable(this.core);
    this.tickets.core = this.core;
    this.core.setExplainBuffers(this.matched, this.scores, this.terms);
    this.view = new DecisionView(this.decisionBuf, this.offloadBuf, this.names, this.matched, this.terms);
    this.decision = this.view;
    this.decisionBuf[0] = -1;
    for (const spec of o.instances)
      this.addInstance(spec.id, { capacityBlocks: spec.capacityBlocks, models: spec.models });
    this.feedPath = o.feedPath;
    if (o.feedPath !== undefined) this.checkFeed();
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
    return lockStatsOf(out);
  }

  /** What a router attached to this one's core adopts to name slots and model groups the same way. */
  mirror(): RouterMirror {
    return mirrorOf(this.instanceNames(), this.policy);
  }

  /**
   * Names the shared core's slots and groups as the sharing router does (its mirror()); touches
   * nothing in the core. Open tickets stay valid. For a router made with `options.attach` only.
   */
  adoptMirror(mirror: RouterMirror): void {
    this.core.counts(this.countsBuf);
    const room = adoptNames(this.instanceNames(), mirror, this.countsBuf[2]!);
    if (room > this.matched.length) this.growExplainBuffers(room);
    this.resolvedPolicy = mirror.policy;
  }

  /** Instance ids in index order. */
  instances(): string[] {
    return this.names.filter((name): name is string => name !== undefined);
  }

  /** Whether an instance of this id is in the fleet (drained ones included). */
  hasInstance(id: string): boolean {
    return this.slots.has(id);
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
    const keys = this.keys;
    const ids = keys.ids(request);
    this.request[REQUEST_INPUT_TOKENS] = keys.inputTokens(request);
    this.request[REQUEST_FLAGS] = keys.keyFlags;
    keys.options(request);
    const ticket = this.core.route(ids, keys.session(request));
    this.notePrediction();
    if (this.feedPath !== undefined && ++this.routesSinceFeedCheck >= FEED_CHECK_EVERY) {
      this.routesSinceFeedCheck = 0;
      this.checkFeed();
    }
    this.lastRouted = true;
    this.view.ticket = ticket;
    if (ticket < 0) throw noInstance(request.model);
    this.tickets.track(ticket, this.decisionBuf[0]!);
    // An offload opened the prefill phase's ticket too; one test when the layer is off.
    if (this.decisionBuf[DECISION_OFFLOAD] === OffloadOutcomeCode.Offload)
      this.tickets.track(this.offloadBuf[OFFLOAD_PREFILL_TICKET]!, this.decisionBuf[DECISION_PREFILL_SLOT]!);
    return ticket;
  }

  /**
   * Explains a decision. With a request: where it would go and why, changing
   * nothing (a dry run). Without: the last route().
   */
  explain(request?: RouteRequest): Explanation {
    const keys = this.keys;
    if (request !== undefined) {
      const ids = keys.ids(request);
      this.request[REQUEST_INPUT_TOKENS] = keys.inputTokens(request);
      keys.options(request);
      this.request[REQUEST_FLAGS] = FLAG_DRY_RUN | keys.keyFlags;
      try {
        this.core.route(ids, keys.session(request));
        this.notePrediction();
      } finally {
        this.request[REQUEST_FLAGS] = 0;
      }
      this.lastRouted = false;
      this.view.ticket = -1;
      return buildExplanation(this.snapshot(), true, keys.keys, (slot) => this.eventFed(slot));
    }
    if (!this.lastRouted)
      throw stateError('ERR_KVROUTE_NO_INSTANCE', 'explain() without a request needs a prior route()');
    return buildExplanation(this.snapshot(), false, keys.keys, (slot) => this.eventFed(slot));
  }

  /** Leading blocks of the request each instance holds, by instance id. */
  match(request: RouteRequest): Record<string, number> {
    const keys = this.keys;
    const lastKeys = keys.keys; // explain() of the last route must still report its keys
    const ids = keys.ids(request);
    keys.keys = lastKeys;
    this.request[REQUEST_INPUT_TOKENS] = keys.inputTokens(request);
    this.request[REQUEST_FLAGS] = keys.keyFlags;
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
    this.tickets.firstToken(ticket);
  }

  /** The request finished: its load leaves the instance. */
  complete(ticket: number): void {
    this.tickets.close(ticket, EVENT_COMPLETE);
  }

  /** The request was cancelled: like complete(), counted as aborted. */
  abort(ticket: number): void {
    this.tickets.close(ticket, EVENT_ABORT);
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
    return this.tickets.reconcile(slot, checkInteger('engineRequests', engineRequests, 0));
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

  /**
   * Other replicas' in-flight load on the instance (null clears it), replacing the last. Every
   * policy then reads this router's own counters plus it, before the max with observed state. For a
   * router that is one of several replicas ([docs/scale-out.md](../../docs/scale-out.md)).
   */
  setPeerLoad(instance: string, load: PeerLoad | null): void {
    const slot = this.slotOf(instance);
    if (load === null) {
      this.core.setPeerLoad(slot, null);
      return;
    }
    const l = checkObject('load', load);
    const field = (key: keyof PeerLoad): number =>
      l[key] === undefined ? 0 : checkInteger(`load.${key}`, l[key], 0, Number.MAX_SAFE_INTEGER);
    const b = this.peerLoadBuf;
    b[0] = field('running');
    b[1] = field('waiting');
    b[2] = field('prefillTokens');
    b[3] = field('activeBlocks');
    this.core.setPeerLoad(slot, b);
  }

  /**
   * Records that another replica placed `session`'s request of `model` (omitted: no model) on
   * `instance`, as if this router had: the session's later turns here follow it (sticky honours
   * the pin; ringFirstTurn treats the session as known and lets the policy decide).
   */
  pinSession(session: string | number, instance: string, model?: string): void {
    const key = this.keys.session({ session } as RouteRequest);
    if (key === undefined) throw invalidType('session', 'a string or a finite number', session);
    const group = model === undefined ? GROUP_NONE : this.groups.groupOf(model);
    this.core.pinSession(key, group, this.slotOf(instance));
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
    refuseMovedKvEventOption(`options of ${describe(id)}`, opts);
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
    this.costs.added(slot);
  }

  /**
   * min_ttft's price of the instance (docs/policies.md "Learned costs"): its score there becomes
   * the predicted TTFT in seconds, overhead + prefillSecondsPerToken × work × (1 + interference ×
   * requests). null falls back to the fleet default (setDefaultCosts). A CostLearner calls this;
   * a bad field is a RangeError naming it, and nothing changes.
   */
  setInstanceCosts(instance: string, costs: RoutingCosts | null): void {
    this.costs.set(this.slotOf(instance), costs);
  }

  /**
   * The price of every instance without costs of its own, instances added later included; null
   * (the start): token-equivalents with the policy's batchWeight. Set it before any instance's own
   * costs, so one fleet never mixes seconds with tokens.
   */
  setDefaultCosts(costs: RoutingCosts | null): void {
    this.costs.setDefault(costs, this.slots.values());
  }

  /** The costs in force on the instance (null: token-equivalents) and where they come from. */
  instanceCosts(instance: string): { costs: RoutingCosts | null; source: CostSource } {
    return this.costs.inForce(this.slotOf(instance));
  }

  /**
   * The expected prefill tokens of sessions idle on the instance between turns, which min_ttft
   * counts as queued there (docs/policies.md "Sessions between turns"; a SessionReturns keeps it).
   */
  setReturningTokens(instance: string, tokens: number): void {
    const slot = this.slotOf(instance);
    if (typeof tokens !== 'number') throw invalidType('tokens', 'a number', tokens);
    if (!(Number.isFinite(tokens) && tokens >= 0)) throw invalidValue('tokens', 'a finite number >= 0', tokens);
    this.core.setReturningTokens(slot, tokens);
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
    // Open tickets on it stay valid but belong to no slot: a new instance may reuse the slot.
    this.tickets.forgetSlot(slot);
    this.names[slot] = undefined;
    this.slots.delete(id);
    this.groups.forget(slot);
    this.costs.removed(slot);
  }

  /** Forgets blocks (and everything below them) on one instance, e.g. on an engine eviction event. */
  removeBlocks(instance: string, hashIds: RouteRequest['hashIds']): number {
    return this.core.removeBlocks(this.slotOf(instance), toCoreIds('hashIds', hashIds));
  }

  /**
   * The way in for an instance's KV events (src/core/kv-event-sink.ts): whoever receives its
   * engine's events applies them here, packed. subscribeKvEvents() (a ZeroMQ subscription) and
   * applyKvEvents() (events received elsewhere) from 'kvroute/events' are the two ready-made feeders;
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
      sink = new SlotKvEventSink(this.core, slot, instance, this.warn, this.idTokens);
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

  private instanceNames(): InstanceNames {
    return { names: this.names, slots: this.slots, groups: this.groups };
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
    const terms = new Float64Array(length * TERM_COUNT);
    terms.set(this.terms); // the last decision's dispatch terms read it
    this.terms = terms;
    this.view.terms = terms;
    this.core.setExplainBuffers(this.matched, this.scores, this.terms);
  }

  private slotOf(id: string): number {
    const slot = typeof id === 'string' ? this.slots.get(id) : undefined;
    if (slot === undefined)
      throw rangeError('ERR_KVROUTE_UNKNOWN_INSTANCE', `instance ${JSON.stringify(id)} is not known`);
    return slot;
  }
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
