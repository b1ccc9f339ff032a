/**
 * The pure-TypeScript routing core: the same CoreRouter surface as the addon,
 * built from the per-block reference model, with the offload layer of ./offload.ts. It is the oracle of the
 * differential tests and the baseline of `npm run bench`, and the fallback
 * where the addon cannot be built ({ native: false } or KVROUTE_NATIVE=0).
 *
 * Long file: about 710 lines, the whole CoreRouter surface (some 30 methods, each the oracle of its
 * native twin) over the reference parts in this folder; the request slab's checks live in
 * ./request-slab.ts, the policies in ./policy.ts, the offload layer in ./offload.ts.
 */
import {
  DECISION_COLD_PAIR,
  DECISION_OFFLOAD,
  DECISION_PREFILL_SLOT,
  OFFLOAD_EXTRA_PREFILL_MS,
  OFFLOAD_INTERFERENCE_MS,
  OFFLOAD_PREFILL_TICKET,
  OFFLOAD_TRANSFER_MS,
  COST_FIELDS,
  COST_INTERFERENCE,
  COST_OVERHEAD_SECONDS,
  COST_SECONDS_PER_TOKEN,
  TERM_COUNT,
  TERM_INTERFERENCE,
  TERM_OVERHEAD,
  TERM_RETURNING,
  TERM_SECONDS_PER_TOKEN,
  TERM_KV_USAGE,
  TERM_PENDING_PREFILL,
  TERM_REQUESTS,
  TERM_UNCACHED,
  type CoreBuffers,
  type CoreConfig,
  type CoreIds,
  type CorePolicy,
  type CoreRouter,
  type PackedKvEvents,
} from '../core-router.js';
import {
  EVENT_ABORT,
  EVENT_FIRST_TOKEN,
  MAX_GROUPS,
  OBSERVED_FIELDS,
  PEER_LOAD_FIELDS,
  STAT_FIELDS,
} from '../core-router.js';
import { OffloadOutcomeCode, REASONS } from '../codes.js';
import { invalidType, invalidValue, rangeError } from '../errors.js';
import { loadNative, type NativeFeedReader } from '../native.js';
import { ReferenceBlockIndex } from './block-index.js';
import { ReferenceEventIndex } from './event-index.js';
import {
  effectiveState,
  emptyShadow,
  isFresh,
  type CostTerms,
  type EffectiveState,
  type Observed,
  type ShadowCounters,
} from './engine-state.js';
import { ReferenceHashRing } from './hash-ring.js';
import { decide, pinKey } from './policy.js';
import { decideOffload, ReferenceWarmPairs, type OffloadResult } from './offload.js';
import { checkIdsKind, idsToBigints, resolveRequest, type ResolvedRequest } from './request-slab.js';
import { ReferenceSessionTable } from './session-table.js';
import { ReferenceTicketTable } from './ticket-table.js';
import { xxhash64String } from './xxhash64.js';

interface Instance {
  live: boolean;
  drained: boolean;
  /** The model groups it serves; null: any (a wildcard). */
  groups: Set<number> | null;
  generation: number;
  name: string;
  index: ReferenceBlockIndex;
  shadow: ShadowCounters;
  /** Other replicas' load (setPeerLoad); not checked against tickets. */
  peer: ShadowCounters;
  observed: Observed | null;
  routed: number;
  completed: number;
  aborted: number;
  /** min_ttft's price of it; null: token-equivalents; interference NaN: the policy's (native/core/instance-costs.h). */
  costs: { secondsPerToken: number; overheadSeconds: number; interference: number } | null;
  returningTokens: number;
}

/**
 * How far ahead of the wall clock a feed snapshot's timestamp may be and still count as fresh
 * (shm::kMaxFutureNs in native/feed/shm-feed.h, the same figure): further ahead it is corrupt or
 * hostile, and the snapshot is stale.
 */
export const FEED_MAX_FUTURE_MS = 100;

export class ReferenceRouter implements CoreRouter {
  private readonly instances: Instance[] = [];
  private readonly sessions: ReferenceSessionTable;
  private readonly ring = new ReferenceHashRing();
  private readonly tickets = new ReferenceTicketTable();
  private readonly reasonTotals = new Array<number>(REASONS.length).fill(0);
  private policy: CorePolicy;
  private matched: Int32Array = new Int32Array(0);
  private scores: Float64Array = new Float64Array(0);
  private terms: Float64Array | undefined;
  /** round_robin's cursor per candidate set: by group, -1 for requests without one. */
  private readonly cursors = new Map<number, number>();
  /** Group ids a request may name: [0, groupCount). */
  private groupCount = 1;
  private manualNowMs = 0;
  private readonly events = new ReferenceEventIndex();
  private readonly warmPairs = new ReferenceWarmPairs();

  /**
   * The feed, read through the addon's reader: mapping shared memory is not something plain
   * TypeScript can do. Everything after the copy (freshness, max with shadow) is the reference's.
   */
  private readonly feed: NativeFeedReader | undefined;
  private readonly feedValues = new Float64Array(11);

  constructor(
    private readonly config: CoreConfig,
    private readonly buffers: CoreBuffers,
  ) {
    this.policy = { ...config.policy };
    this.sessions = new ReferenceSessionTable(config.maxSessions);
    if (config.feedPath !== null) this.feed = new (loadNative().FeedReader)(config.feedPath, 100);
  }

  feedStatus(): number {
    return this.feed === undefined ? -1 : this.feed.info()[0];
  }

  /**
   * Slot `s` of the feed as an observed snapshot, when fresh on the wall clock at `nowMs`: at most
   * stalenessMs old and at most FEED_MAX_FUTURE_MS ahead (shm::snapshotFresh in the native core).
   */
  private fromFeed(s: number, nowMs: number): Observed | null {
    const v = this.feedValues;
    if (this.feed!.read(s, v) === null || (v[8]! & 1) !== 0) return null; // flags bit 0: unreachable
    const age = nowMs - v[0]!;
    if (!(age <= this.config.stalenessMs && age >= -FEED_MAX_FUTURE_MS)) return null;
    return {
      timestampMs: v[0]!,
      running: v[1]!,
      waiting: v[2]!,
      kvBlocksUsed: v[3]!,
      kvBlocksTotal: v[4]!,
      pendingPrefillTokens: v[5]!,
      maxPrefillRemaining: v[6]!,
      decodeBatch: v[7]!,
    };
  }

  addInstance(id: string, capacityBlocks: number): number {
    this.drainEvents();
    let slot = this.instances.findIndex((inst) => !inst.live);
    if (slot < 0) slot = this.instances.length;
    const generation = this.instances[slot]?.generation ?? 0;
    this.instances[slot] = {
      live: true,
      drained: false,
      groups: null,
      generation,
      name: id,
      index: new ReferenceBlockIndex(capacityBlocks),
      shadow: emptyShadow(),
      peer: emptyShadow(),
      observed: null,
      routed: 0,
      completed: 0,
      aborted: 0,
      costs: null,
      returningTokens: 0,
    };
    this.events.reset(slot);
    this.rebuildRing();
    return slot;
  }

  drainInstance(slot: number, drained = true): void {
    this.drainEvents();
    this.live(slot).drained = drained;
  }

  removeInstance(slot: number): void {
    this.drainEvents();
    const inst = this.live(slot);
    inst.live = false;
    inst.drained = false;
    inst.groups = null;
    inst.generation += 1;
    inst.name = '';
    inst.index = new ReferenceBlockIndex(1);
    inst.costs = null;
    inst.returningTokens = 0;
    this.events.reset(slot);
    this.warmPairs.forget(slot);
    this.rebuildRing();
  }

  setInstanceGroups(slot: number, groups: Uint32Array | null): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (groups === null || groups === undefined) {
      inst.groups = null;
      return;
    }
    if (!(groups instanceof Uint32Array)) throw invalidType('groups', 'a Uint32Array or null', groups);
    groups.forEach((g, k) => {
      if (g >= MAX_GROUPS) throw invalidValue(`groups[${k}]`, `below ${MAX_GROUPS}`, g);
    });
    inst.groups = new Set(groups);
    for (const g of groups) this.groupCount = Math.max(this.groupCount, g + 1);
  }

  setInstanceCosts(slot: number, costs: Float64Array | null): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (costs === null || costs === undefined) {
      inst.costs = null;
      return;
    }
    if (!(costs instanceof Float64Array)) throw invalidType('costs', 'a Float64Array or null', costs);
    if (costs.length < COST_FIELDS) throw invalidValue('costs', `${COST_FIELDS} values`, costs.length);
    const secondsPerToken = costs[COST_SECONDS_PER_TOKEN]!;
    const overheadSeconds = costs[COST_OVERHEAD_SECONDS]!;
    const interference = costs[COST_INTERFERENCE]!;
    checkCost('secondsPerToken', secondsPerToken, true);
    checkCost('overheadSeconds', overheadSeconds, false);
    if (!Number.isNaN(interference)) checkCost('interference', interference, false);
    inst.costs = { secondsPerToken, overheadSeconds, interference };
  }

  setReturningTokens(slot: number, tokens: number): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (typeof tokens !== 'number') throw invalidType('returningTokens', 'a number', tokens);
    if (!(tokens >= 0 && tokens <= Number.MAX_VALUE))
      throw invalidValue('returningTokens', 'a finite number >= 0', tokens);
    inst.returningTokens = tokens;
  }

  setExplainBuffers(matched: Int32Array, scores: Float64Array, terms?: Float64Array): void {
    this.matched = matched;
    this.scores = scores;
    this.terms = terms;
  }

  route(ids: CoreIds | string | undefined, session: string | undefined): number {
    this.drainEvents();
    const req = resolveRequest(
      this.buffers.request,
      checkIdsKind(this.buffers.request, ids),
      this.config,
      this.groupCount,
    );
    if (session !== undefined && typeof session !== 'string') throw invalidType('session', 'a string', session);
    const nowMs = this.now();
    this.feed?.refresh(false);
    const feedNowMs = Date.now();
    this.matchRequest(req);
    const sessionKey = session !== undefined ? xxhash64String(session, 0n) : 0n;
    const eff: EffectiveState[] = [];
    const costs: CostTerms[] = [];
    const uncached: number[] = [];
    const candidate = (s: number) => this.candidate(s, req.group);
    for (let s = 0; s < this.instances.length; s += 1) {
      this.scores[s] = NaN;
      if (!candidate(s)) continue;
      const inst = this.instances[s]!;
      // A fresh feed snapshot stands in for the instance's own observed one.
      const fed = this.feed === undefined ? null : this.fromFeed(s, feedNowMs);
      eff[s] =
        fed !== null
          ? effectiveState(inst.shadow, inst.peer, fed, true, inst.index.capacity)
          : effectiveState(
              inst.shadow,
              inst.peer,
              inst.observed,
              isFresh(inst.observed, nowMs, this.config.stalenessMs),
              inst.index.capacity,
            );
      const cachedTokens = this.matched[s]! * req.blockTokens;
      uncached[s] = req.inputTokens > cachedTokens ? req.inputTokens - cachedTokens : 0;
      const c: CostTerms = {
        secondsPerToken: inst.costs?.secondsPerToken ?? 1,
        overheadSeconds: inst.costs?.overheadSeconds ?? 0,
        interference:
          inst.costs === null || Number.isNaN(inst.costs.interference)
            ? this.policy.batchWeight
            : inst.costs.interference,
        returningTokens: inst.returningTokens,
      };
      costs[s] = c;
      if (this.terms !== undefined) {
        const at = TERM_COUNT * s;
        this.terms[at + TERM_PENDING_PREFILL] = eff[s]!.pendingPrefill;
        this.terms[at + TERM_REQUESTS] = eff[s]!.numRequests;
        this.terms[at + TERM_KV_USAGE] = eff[s]!.kvUsage;
        this.terms[at + TERM_UNCACHED] = uncached[s]!;
        this.terms[at + TERM_RETURNING] = c.returningTokens;
        this.terms[at + TERM_SECONDS_PER_TOKEN] = c.secondsPerToken;
        this.terms[at + TERM_OVERHEAD] = c.overheadSeconds;
        this.terms[at + TERM_INTERFERENCE] = c.interference;
      }
    }
    const { slot, reason } = decide({
      policy: this.policy,
      slotCount: this.instances.length,
      candidate,
      generation: (s) => this.instances[s]!.generation,
      capacity: (s) => this.instances[s]!.index.capacity,
      eff,
      costs,
      matched: this.matched,
      uncached,
      inputTokens: req.inputTokens,
      scores: this.scores,
      ids: req.ids,
      hasSession: session !== undefined,
      sessionKey,
      pinKey: pinKey(sessionKey, req.group),
      dryRun: req.dryRun,
      sessions: this.sessions,
      ring: this.ring,
      roundRobin: (dryRun) => this.roundRobin(req.group, candidate, dryRun),
    });
    this.buffers.decision[0] = slot;
    this.buffers.decision[1] = reason;
    const offload =
      this.policy.offload === null || slot < 0
        ? null
        : decideOffload({
            model: this.policy.offload,
            target: slot,
            candidates: this.instances.map((_, s) => s).filter(candidate),
            eff,
            uncached,
            inputTokens: req.inputTokens,
            pairs: this.warmPairs,
          });
    this.writeOffload(offload);
    if (slot < 0 || req.dryRun) return -1;

    this.reasonTotals[reason]! += 1;
    if (offload?.outcome !== OffloadOutcomeCode.Offload) return this.dispatch(req, slot, uncached[slot]!);
    // Offload: the target decodes (its KV arrives by transfer); the prefill instance prefills.
    const prefill = offload.prefillSlot;
    const ticket = this.dispatch(req, slot, 0);
    this.buffers.offload[OFFLOAD_PREFILL_TICKET] = this.dispatch(req, prefill, uncached[prefill]!);
    this.warmPairs.mark(prefill, slot);
    return ticket;
  }

  /** The offload layer's result into the decision buffers (past the outcome only when not off). */
  private writeOffload(r: OffloadResult | null): void {
    const d = this.buffers.decision;
    d[DECISION_OFFLOAD] = r === null ? OffloadOutcomeCode.Off : r.outcome;
    if (r === null) return;
    d[DECISION_PREFILL_SLOT] = r.prefillSlot;
    d[DECISION_COLD_PAIR] = r.coldPair ? 1 : 0;
    const o = this.buffers.offload;
    o[OFFLOAD_PREFILL_TICKET] = -1;
    o[OFFLOAD_INTERFERENCE_MS] = r.interferenceMs;
    o[OFFLOAD_TRANSFER_MS] = r.transferMs;
    o[OFFLOAD_EXTRA_PREFILL_MS] = r.extraPrefillMs;
  }

  /** Commits the request's blocks on `slot` and opens its ticket there, with `uncachedTokens` of prefill. */
  private dispatch(req: ResolvedRequest, slot: number, uncachedTokens: number): number {
    const inst = this.instances[slot]!;
    // An event-fed slot's matched[] is the engine's truth; commit needs the belief index's own.
    const believed = req.tokenKeys && this.events.fed(slot) ? inst.index.match(req.ids) : this.matched[slot]!;
    inst.index.commit(req.ids, believed);
    inst.shadow.waiting += 1;
    inst.shadow.prefillTokens += uncachedTokens;
    inst.shadow.activeBlocks += req.ids.length;
    inst.routed += 1;
    const ticket = this.tickets.openTicket({
      slot,
      slotGeneration: inst.generation,
      uncachedTokens,
      blocks: req.ids.length,
      decoding: false,
    });
    // Until it finishes, the request's keys count as held on the engine it went to (event-index.h).
    if (req.tokenKeys && this.events.fed(slot)) this.events.holdInFlight(slot, ticket, req.ids);
    return ticket;
  }

  match(ids: CoreIds | string | undefined): void {
    this.drainEvents();
    this.matchRequest(
      resolveRequest(this.buffers.request, checkIdsKind(this.buffers.request, ids), this.config, this.groupCount),
    );
  }

  setEventFed(slot: number, on: boolean): void {
    this.drainEvents();
    this.live(slot);
    this.events.setFed(slot, on);
  }

  applyKvEvents(slot: number, packed: PackedKvEvents): void {
    this.drainEvents();
    this.live(slot);
    this.events.apply(slot, packed);
  }

  clearKvEvents(slot: number): void {
    this.drainEvents();
    this.live(slot);
    this.events.clear(slot);
  }

  eventStats(slot: number, out: Float64Array): void {
    this.drainEvents();
    this.live(slot);
    this.events.stats(slot, out);
  }

  /** matchInto, then, for a FLAG_TOKEN_KEYS request, event-fed slots from the event index. */
  private matchRequest(req: ResolvedRequest): void {
    this.matchInto(req.ids);
    if (!req.tokenKeys) return;
    // vLLM never reports the whole prompt cached (native Router::eventMatchLimit).
    const cap = req.inputTokens >= 1 ? Math.floor((req.inputTokens - 1) / req.blockTokens) : 0;
    this.events.match(req.ids, Math.min(cap, req.ids.length), this.matched);
  }

  firstToken(ticket: number): boolean {
    this.drainEvents();
    const r = this.findTicket(ticket);
    if (r === undefined) return false;
    if (!r.decoding) {
      r.decoding = true;
      const inst = this.instanceOf(r.slot, r.slotGeneration);
      if (inst !== undefined) {
        inst.shadow.waiting -= 1;
        inst.shadow.prefillTokens -= r.uncachedTokens;
        inst.shadow.running += 1;
      }
    }
    return true;
  }

  complete(ticket: number): boolean {
    this.drainEvents();
    return this.finish(ticket, false);
  }

  abort(ticket: number): boolean {
    this.drainEvents();
    return this.finish(ticket, true);
  }

  setObserved(slot: number, observed: Float64Array | null): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (observed === null) {
      inst.observed = null;
      return;
    }
    if (!(observed instanceof Float64Array) || observed.length < OBSERVED_FIELDS) {
      throw invalidType('observed', `a Float64Array of ${OBSERVED_FIELDS}`, observed);
    }
    if (!Number.isFinite(observed[0])) throw invalidValue('observed.timestampMs', 'finite', observed[0]);
    const f = observed;
    inst.observed = {
      timestampMs: f[0]!,
      running: f[1]!,
      waiting: f[2]!,
      kvBlocksUsed: f[3]!,
      kvBlocksTotal: f[4]!,
      pendingPrefillTokens: f[5]!,
      maxPrefillRemaining: f[6]!,
      decodeBatch: f[7]!,
    };
  }

  setPeerLoad(slot: number, load: Float64Array | null): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (load === null || load === undefined) {
      inst.peer = emptyShadow();
      return;
    }
    if (!(load instanceof Float64Array) || load.length < PEER_LOAD_FIELDS)
      throw invalidType('peerLoad', `a Float64Array of ${PEER_LOAD_FIELDS}`, load);
    const count = (k: number, field: string): number => {
      const v = load[k]!;
      if (!(Number.isSafeInteger(v) && v >= 0)) throw invalidValue(`peerLoad.${field}`, 'an integer >= 0', v);
      return v;
    };
    inst.peer = {
      running: count(0, 'running'),
      waiting: count(1, 'waiting'),
      prefillTokens: count(2, 'prefillTokens'),
      activeBlocks: count(3, 'activeBlocks'),
    };
  }

  pinSession(session: string, group: number, slot: number): void {
    this.drainEvents();
    if (typeof session !== 'string') throw invalidType('session', 'a string', session);
    if (!(group === -1 || (Number.isInteger(group) && group >= 0 && group < this.groupCount)))
      throw invalidValue('group', `-1 or a known group id below ${this.groupCount}`, group);
    const inst = this.live(slot);
    this.sessions.pin(pinKey(xxhash64String(session, 0n), group), { slot, generation: inst.generation });
  }

  setTime(nowMs: number): void {
    this.drainEvents();
    this.manualNowMs = nowMs;
  }

  setPolicy(policy: CorePolicy): void {
    this.drainEvents();
    const ringChanged = policy.ringVnodes !== this.policy.ringVnodes;
    this.policy = { ...policy };
    if (ringChanged) this.rebuildRing();
  }

  stats(slot: number, out: Float64Array): void {
    this.drainEvents();
    const inst = this.live(slot);
    if (out.length < STAT_FIELDS) throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', 'stats is too short');
    const nowMs = this.now();
    const fresh = isFresh(inst.observed, nowMs, this.config.stalenessMs);
    const e = effectiveState(inst.shadow, inst.peer, inst.observed, fresh, inst.index.capacity);
    out.set([
      inst.index.capacity,
      inst.index.size,
      NaN, // segments: the reference has none
      NaN, // bytes: not measurable per Map from inside V8
      inst.shadow.running,
      inst.shadow.waiting,
      inst.shadow.prefillTokens,
      inst.shadow.activeBlocks,
      e.running,
      e.waiting,
      e.pendingPrefill,
      e.decodeBatch,
      e.kvUsage,
      fresh ? 1 : 0,
      inst.routed,
      inst.completed,
      inst.aborted,
      inst.drained ? 1 : 0,
      e.numRequests,
    ]);
  }

  removeBlocks(slot: number, ids: CoreIds | undefined): number {
    this.drainEvents();
    const inst = this.live(slot);
    return inst.index.remove(idsToBigints(ids));
  }

  clearBlocks(slot: number): void {
    this.drainEvents();
    this.live(slot).index.clear();
  }

  setCapacity(slot: number, capacityBlocks: number): number {
    this.drainEvents();
    return this.live(slot).index.setCapacity(capacityBlocks);
  }

  reasonCounts(out: Float64Array): void {
    this.drainEvents();
    out.set(this.reasonTotals);
  }

  counts(out: Float64Array): void {
    this.drainEvents();
    out[0] = this.tickets.openCount;
    out[1] = this.sessions.size;
    out[2] = this.instances.length;
    out[3] = NaN; // the reference keeps no fleet index
  }

  checkInvariants(): string {
    this.drainEvents();
    const expected = this.instances.map(emptyShadow);
    for (const r of this.tickets.openRequests()) {
      if (this.instanceOf(r.slot, r.slotGeneration) === undefined) continue;
      const e = expected[r.slot]!;
      if (r.decoding) e.running += 1;
      else {
        e.waiting += 1;
        e.prefillTokens += r.uncachedTokens;
      }
      e.activeBlocks += r.blocks;
    }
    for (let s = 0; s < this.instances.length; s += 1) {
      const inst = this.instances[s]!;
      if (!inst.live) continue;
      const a = inst.shadow;
      const e = expected[s]!;
      if (
        a.running !== e.running ||
        a.waiting !== e.waiting ||
        a.prefillTokens !== e.prefillTokens ||
        a.activeBlocks !== e.activeBlocks
      ) {
        return `slot ${s}: shadow counters disagree with open tickets`;
      }
      if (inst.index.size > inst.index.capacity) return `slot ${s}: over capacity`;
    }
    return '';
  }

  drainEvents(): void {
    const events = this.buffers.events;
    const queued = events[0]!;
    if (queued === 0) return;
    const capacity = (events.length - 1) >> 1;
    const n = queued > 0 && queued <= capacity && Number.isInteger(queued) ? queued : 0;
    events[0] = 0; // cleared first: the handlers below re-enter drainEvents()
    for (let k = 0; k < n; k += 1) {
      const ticket = events[1 + 2 * k]!;
      const kind = events[2 + 2 * k]!;
      if (kind === EVENT_FIRST_TOKEN) this.firstToken(ticket);
      else this.finish(ticket, kind === EVENT_ABORT);
    }
  }

  private now(): number {
    return this.config.manualClock ? this.manualNowMs : Date.now();
  }

  private routable(slot: number): boolean {
    const inst = this.instances[slot];
    return inst !== undefined && inst.live && !inst.drained;
  }

  /** Whether a request of `group` (-1: none) may go to `slot`: routable, and serving the group. */
  private candidate(slot: number, group: number): boolean {
    if (!this.routable(slot)) return false;
    const groups = this.instances[slot]!.groups;
    return group < 0 || groups === null || groups.has(group);
  }

  private live(slot: number): Instance {
    const inst = Number.isInteger(slot) ? this.instances[slot] : undefined;
    if (inst === undefined || !inst.live) {
      throw rangeError('ERR_KVROUTE_UNKNOWN_INSTANCE', `instance slot ${slot} is not live`);
    }
    return inst;
  }

  private instanceOf(slot: number, generation: number): Instance | undefined {
    const inst = this.instances[slot];
    return inst !== undefined && inst.live && inst.generation === generation ? inst : undefined;
  }

  private findTicket(ticket: number) {
    if (typeof ticket !== 'number') throw invalidType('ticket', 'a number', ticket);
    return this.tickets.find(ticket);
  }

  private finish(ticket: number, aborted: boolean): boolean {
    const r = this.findTicket(ticket);
    if (r === undefined) return false;
    const inst = this.instanceOf(r.slot, r.slotGeneration);
    if (inst !== undefined) {
      if (r.decoding) inst.shadow.running -= 1;
      else {
        inst.shadow.waiting -= 1;
        inst.shadow.prefillTokens -= r.uncachedTokens;
      }
      inst.shadow.activeBlocks -= r.blocks;
      if (aborted) inst.aborted += 1;
      else inst.completed += 1;
    }
    this.events.releaseInFlight(ticket);
    this.tickets.close(ticket);
    return true;
  }

  /** The next candidate from the group's own cursor, so groups never move each other's turn. */
  private roundRobin(group: number, candidate: (slot: number) => boolean, dryRun: boolean): number {
    const count = this.instances.length;
    const cursor = this.cursors.get(group) ?? 0;
    for (let step = 0; step < count; step += 1) {
      const s = (cursor + step) % count;
      if (!candidate(s)) continue;
      if (!dryRun) this.cursors.set(group, (s + 1) % count);
      return s;
    }
    return -1;
  }

  private rebuildRing(): void {
    this.ring.rebuild(
      this.instances.map((inst) => (inst.live ? inst.name : null)),
      this.policy.ringVnodes,
    );
  }

  private matchInto(ids: readonly bigint[]): void {
    if (this.matched.length < this.instances.length) {
      throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', 'explain buffers are too small');
    }
    for (let s = 0; s < this.instances.length; s += 1) {
      const inst = this.instances[s]!;
      this.matched[s] = inst.live ? inst.index.match(ids) : -1;
    }
  }
}

/** A cost the core would refuse: RangeError naming the field (the bindings' requireCost). */
function checkCost(field: string, value: number, positive: boolean): void {
  if (Number.isFinite(value) && (positive ? value > 0 : value >= 0)) return;
  throw invalidValue(`costs.${field}`, `a finite number ${positive ? '>' : '>='} 0`, value);
}
