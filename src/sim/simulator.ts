/**
 * Long file: about 580 lines, the event loop and its hooks, which read best together; what runs
 * beside the routers is in router-companions.ts, the fleet's make-up in fleet-spec.ts, flow
 * control's records in sim-flow.ts.
 *
 * The discrete-event simulator: replays a trace in virtual time through the routing core (the
 * same `Router` the proxy uses, on a manual clock) and one EngineModel per instance.
 *
 * Dispatch is session-sequential by default (as in B3): a session's first request is sent
 * at its trace time, and turn N+1 at the later of its trace time and turn N's completion.
 * `poisson` sends every request open-loop at exponential inter-arrival times instead.
 *
 * Engine state: `shadow` leaves the router with its own counters; `shm` publishes every engine's
 * true state to the router every `publishMs` (the ES ablation's es1 fed it through /dev/shm at ~50 ms).
 *
 * Replicas (docs/scale-out.md): `replicas` R > 1 runs R independent Routers over the one fleet,
 * as R `kvroute serve` replicas behind a balancer. ReplicaAssigner picks the replica of each
 * request as it is dispatched; that replica alone routes it and hears its first token and
 * completion (the ticket is its own), so each belief index, set of shadow counters and pin table
 * sees only its own dispatches. Every replica's clock follows the one virtual clock, and with
 * `shm` every replica reads each published snapshot before its next route. R = 1 is the
 * single-router simulator unchanged (records carry `replica` only when R > 1).
 *
 * Cache state: `own` (the default) leaves each replica's cache belief to its own dispatches;
 * `events` feeds every replica every engine's KV events before each route and routes requests
 * by tokens, so each replica matches what the engines really hold (event-fed-cache.ts).
 *
 * Prefill offload (docs/offload.md): when the router's decision says `offload`, the request runs
 * in two phases. Its prefill goes to the prefill instance P as a prefill-only request (one
 * output token, blocks held at its finish, the prompt's full blocks cached on P); the step that
 * ends it reports the prefill ticket's first token and completion to the router. Then the KV
 * moves to the decode instance T (the decision's own instance) over the KvTransferLink, in
 * transferMs of the tokens T lacks at that moment, cold on the pair's first use; P's blocks are
 * released when it ends. T then admits the request holding its prompt as transferred KV and
 * decodes it there (EngineModel `transferred`), reporting the decode ticket as usual. Its TTFT
 * is dispatch → T's first token: P's queue and prefill + the transfer + T's admitting step.
 *
 * The trace is read lazily: a request is taken from the source only when virtual time reaches
 * its arrival, and dropped once its record is written, so memory follows the requests in flight
 * (and each session's queued turns), never the trace. Events at the same instant run in the
 * order they were scheduled, and a request is read before any event at or after its arrival, so
 * a run is a pure function of (trace, options).
 *
 * Flow control (options.flow, sim-flow.ts): a request's dispatch event is its arrival at the
 * router; flow control routes it at once, queues it (a `route` event when a completion frees its
 * slot) or refuses it (a failed record). One `flow-deadline` event, at the earliest waiter's
 * deadline, refuses the waiters past theirs.
 */
import { invalidValue } from '../core/errors.js';
import type { OffloadCostModel } from '../core/offload-cost.js';
import { Router } from '../core/router.js';
import type { ObservedState, ResolvedPolicy } from '../core/types.js';
import type { RequestRecord } from '../trace/records.js';
import { SynthRandom } from '../trace/synth-random.js';
import type { TraceRequest } from '../trace/types.js';
import { EngineModel, type Sequence, type StepOutcome } from './engine-model.js';
import {
  DEFAULT_ENGINE_PRESET,
  ENGINE_PRESETS,
  capacityBlocks,
  isUnscaled,
  scalePreset,
  type EnginePreset,
} from './engine-preset.js';
import { CACHE_STATES, EventFedCache } from './event-fed-cache.js';
import { EventQueue } from './event-queue.js';
import { checkFleetOf, fleetPresets, uniformFleet } from './fleet-spec.js';
import { KvTransferLink } from './kv-transfer.js';
import { ReplicaAssigner } from './replica-assign.js';
import { RouterCompanions, checkCostMode } from './router-companions.js';
import type { Dispatch, SimulationOptions, SimulationResult } from './simulation-options.js';
import { SimFlow } from './sim-flow.js';

export type { Dispatch, SimulationOptions, SimulationResult } from './simulation-options.js';

/** Replays `trace` (in arrival order) and returns every request's record. */
export function simulate(trace: Iterable<TraceRequest>, options: SimulationOptions): SimulationResult {
  const simulation = new Simulation(options);
  const source = trace[Symbol.iterator]();
  for (let next = source.next(); !next.done; next = source.next()) {
    const at = simulation.admissionTime(next.value);
    simulation.runBefore(at);
    simulation.admit(next.value, at);
  }
  simulation.runBefore(Infinity);
  return simulation.result();
}

/** `simulate` over an asynchronous source, such as `readTrace`. */
export async function simulateStream(
  trace: AsyncIterable<TraceRequest>,
  options: SimulationOptions,
): Promise<SimulationResult> {
  const simulation = new Simulation(options);
  for await (const request of trace) {
    const at = simulation.admissionTime(request);
    simulation.runBefore(at);
    simulation.admit(request, at);
  }
  simulation.runBefore(Infinity);
  return simulation.result();
}

type SimEvent =
  | { kind: 'dispatch'; request: TraceRequest }
  /** Flow control let a waiting request through: route it (it reached the router at `arrivedAt`). */
  | { kind: 'route'; request: TraceRequest; arrivedAt: number }
  /** The earliest deadline among flow control's waiters. */
  | { kind: 'flow-deadline' }
  | { kind: 'step'; instance: number; outcome: StepOutcome }
  | { kind: 'transfer'; flight: InFlight; prefill: Sequence }
  | { kind: 'publish' };

interface InFlight {
  request: TraceRequest;
  /** The router replica that routed it; its tickets are that replica's. */
  replica: number;
  ticket: number;
  instance: number;
  dispatch: number;
  /** The router's predictedCachedTokens for the instance it chose. */
  predicted: number;
  /** An offloaded request: its prefill phase and transfer. */
  offload?: OffloadFlight;
  /** With flow control: when it reached the router (`dispatch` is when it was routed). */
  arrivedAt?: number;
}

/** The prefill phase of an offloaded request (on `instance`) and its KV transfer. */
interface OffloadFlight {
  instance: number;
  /** The prefill ticket the router opened on `instance`. */
  ticket: number;
  /** Prompt tokens the prefill instance served from its prefix cache. */
  cachedTokens: number;
  /** Tokens of KV moved: the prompt tokens the decode instance lacked. */
  transferredTokens: number;
  transferS: number;
}

/** A session with a turn in flight, and the turns read while it runs, in order. */
interface SessionQueue {
  waiting: TraceRequest[];
}

/** A step that gives the router nothing to hear: no first token, finish or preemption. */
function isSilent(outcome: StepOutcome): boolean {
  return outcome.firstTokens.length + outcome.finished.length + outcome.preempted.length === 0;
}

/** Dispatches and publishes can reach any engine; steps are bounded per engine instead. */
function isExternal(event: SimEvent): boolean {
  return event.kind !== 'step';
}

/** The simulation's state; the drivers above feed it requests in arrival order. */
class Simulation {
  private readonly preset: EnginePreset;
  private readonly dispatch: Dispatch;
  private readonly random: SynthRandom | undefined;
  private poissonTime = 0;
  private readonly replicas: ReplicaAssigner;
  private fleet: { routers: Router[]; engines: EngineModel[]; instanceIds: string[] } | undefined;
  private readonly queue = new EventQueue<SimEvent>();
  /**
   * Barriers: an engine may run its own silent steps (no first token, finish or preemption)
   * ahead of the queue up to the first time anything could reach it. That is the first queued
   * dispatch or publish (`external`, popped in step with `queue`: both order by time, then
   * insertion), or the first time another engine could report something (`quietUntil`), since
   * only a report can lead to a dispatch.
   */
  private readonly external = new EventQueue<null>();
  private readonly quietUntil: Float64Array;
  private readonly stepping: boolean[];
  private readonly inFlight = new Map<Sequence, InFlight>();
  /** Offloaded requests in their prefill phase, by their sequence on the prefill instance. */
  private readonly prefilling = new Map<Sequence, InFlight>();
  private transfersInFlight = 0;
  private link: KvTransferLink | undefined;
  private companions: RouterCompanions | undefined;
  /** With `cacheState: 'events'`: the engines' KV events, fed to every replica. */
  private eventFed: EventFedCache | undefined;
  /** Sessions with a turn in flight; a session absent here is idle. */
  private readonly busySessions = new Map<string, SessionQueue>();
  private readonly records: RequestRecord[] = [];
  private preemptions = 0;
  private first = Infinity;
  private last = 0;
  private publishing = false;
  /** The latest feed snapshots, and the replicas not yet handed them. */
  private published: ObservedState[] | undefined;
  private readonly unread: boolean[];
  private routerTime = Number.NaN;
  /** Events at or after this time wait for requests not read yet (see runBefore). */
  private horizon = Infinity;
  /** The largest request the smallest engine's KV cache can hold. */
  private maxRequestTokens = Infinity;
  /** Flow control between arrival and route (options.flow); undefined: every request routes on arrival. */
  private readonly flow: SimFlow | undefined;
  /** When the scheduled flow-deadline event fires (Infinity: none scheduled). */
  private deadlineAt = Infinity;

  constructor(private readonly options: SimulationOptions) {
    const presetName = options.preset ?? DEFAULT_ENGINE_PRESET;
    const preset = ENGINE_PRESETS[presetName];
    if (!preset) throw invalidValue('preset', `one of ${Object.keys(ENGINE_PRESETS).join(', ')}`, presetName);
    if (options.capacityBlocks !== undefined && !isUnscaled({ kvCapacity: options.scaling?.kvCapacity }))
      throw invalidValue('capacityBlocks', 'absent when scaling.kvCapacity is given', options.capacityBlocks);
    if (options.cacheState !== undefined && !CACHE_STATES.includes(options.cacheState))
      throw invalidValue('cacheState', `one of ${CACHE_STATES.join(', ')}`, options.cacheState);
    if (options.syncDelayMs !== undefined && !(Number.isFinite(options.syncDelayMs) && options.syncDelayMs >= 0))
      throw invalidValue('syncDelayMs', 'a finite number of milliseconds >= 0', options.syncDelayMs);
    checkCostMode(options);
    this.preset = scalePreset(preset, options.scaling);
    if (options.fleet !== undefined) checkFleetOf(options.fleet, options.instances, options.capacityBlocks);
    this.dispatch = options.dispatch ?? { mode: 'session' };
    this.random = this.dispatch.mode === 'poisson' ? new SynthRandom(this.dispatch.seed) : undefined;
    this.stepping = new Array<boolean>(options.instances).fill(false);
    this.quietUntil = new Float64Array(options.instances).fill(Infinity);
    const { replicas = 1, replicaAssign = 'random', replicaSeed = 1 } = options;
    this.replicas = new ReplicaAssigner(replicas, replicaAssign, replicaSeed);
    this.unread = new Array<boolean>(this.replicas.replicas).fill(false);
    if (options.flow !== undefined) this.flow = new SimFlow(options.flow, () => this.fleet!.routers[0]!);
  }

  /** When `request` enters the system: its trace time, or the next Poisson arrival. */
  admissionTime(request: TraceRequest): number {
    if (this.dispatch.mode === 'session') return request.arrival;
    this.poissonTime += -Math.log(1 - this.random!.next()) / this.dispatch.rate;
    return this.poissonTime;
  }

  /** Takes `request` into the system at `time` (not earlier than any event already run). */
  admit(request: TraceRequest, time: number): void {
    this.fleetFor(request.blockSize);
    if (this.dispatch.mode === 'poisson' || request.sessionless) {
      this.schedule(time, { kind: 'dispatch', request });
      return;
    }
    const busy = this.busySessions.get(request.session);
    if (busy !== undefined) busy.waiting.push(request);
    else {
      this.busySessions.set(request.session, { waiting: [] });
      this.schedule(time, { kind: 'dispatch', request });
    }
  }

  /** Runs every event strictly before `time`. */
  runBefore(time: number): void {
    this.horizon = time;
    for (let at = this.queue.peekTime(); at !== undefined && at < time; at = this.queue.peekTime()) {
      const { event } = this.queue.pop()!;
      if (isExternal(event)) this.external.pop();
      this.handle(event, at);
    }
  }

  result(): SimulationResult {
    const engines = this.fleet?.engines ?? [];
    return {
      records: this.records,
      makespan: this.records.length === 0 ? 0 : this.last - this.first,
      preemptions: this.preemptions,
      evictions: engines.reduce((sum, engine) => sum + engine.pool.evictions, 0),
      steps: engines.reduce((sum, engine) => sum + engine.counters.steps, 0),
      capacityBlocks: engines[0]?.pool.capacity ?? 0,
      engineCapacityBlocks: engines.map((engine) => engine.pool.capacity),
      replicaRoutes:
        this.fleet?.routers.map((router) => Object.values(router.stats().decisions).reduce((sum, n) => sum + n, 0)) ??
        new Array<number>(this.replicas.replicas).fill(0),
      learnedCosts: this.companions?.costs() ?? [],
    };
  }

  /** The router and engines, built on the first request (whose block size they take). */
  private fleetFor(blockSize: number): NonNullable<Simulation['fleet']> {
    if (this.fleet !== undefined) {
      if (blockSize !== this.fleet.engines[0]!.blockSize)
        throw invalidValue('blockSize', `${this.fleet.engines[0]!.blockSize} throughout the trace`, blockSize);
      return this.fleet;
    }
    const { instances } = this.options;
    const capacity = this.options.capacityBlocks ?? capacityBlocks(this.preset, blockSize);
    if (this.options.capacityBlocks === undefined && capacity < 1)
      throw invalidValue(
        'scaling.kvCapacity',
        `large enough for one ${blockSize}-token KV block per engine`,
        this.options.scaling?.kvCapacity,
      );
    const routers = Array.from(
      { length: this.replicas.replicas },
      () =>
        new Router({
          instances,
          policy: this.options.policy,
          blockSize,
          capacityBlocks: capacity,
          clock: 'manual',
          ...(this.options.native === undefined ? {} : { native: this.options.native }),
        }),
    );
    const router = routers[0]!;
    // Each engine its group's preset (fleet-spec.ts); the router keeps the fleet-wide capacity.
    const presets = fleetPresets(this.preset, this.options.fleet ?? uniformFleet(instances));
    const engines = presets.map((preset) => {
      const blocks = preset === this.preset ? capacity : capacityBlocks(preset, blockSize);
      if (blocks < 1) throw invalidValue('fleet kv', `large enough for one ${blockSize}-token block`, blocks);
      return new EngineModel({ preset, blockSize, capacityBlocks: blocks });
    });
    this.fleet = { routers, engines, instanceIds: router.instances() };
    this.companions = new RouterCompanions(this.options, routers, presets, this.fleet.instanceIds);
    this.maxRequestTokens = Math.min(...engines.map((engine) => engine.maxRequestTokens));
    if (this.options.cacheState === 'events')
      this.eventFed = new EventFedCache(
        engines,
        routers,
        this.fleet.instanceIds,
        blockSize,
        (this.options.syncDelayMs ?? 0) / 1000,
      );
    const policyCost = (router.policy as ResolvedPolicy & { offload?: OffloadCostModel | null }).offload;
    this.link = new KvTransferLink(this.options.transferCost ?? policyCost ?? {});
    if (this.options.engineState === 'shm') this.schedulePublish(0);
    return this.fleet;
  }

  private handle(event: SimEvent, now: number): void {
    // The router's clock moves only when the router is about to be told something.
    const touchesRouter =
      event.kind === 'step'
        ? event.outcome.firstTokens.length > 0 || event.outcome.finished.length > 0
        : event.kind !== 'transfer';
    if (touchesRouter && now !== this.routerTime) {
      for (const router of this.fleet!.routers) router.setTime(now * 1000);
      this.routerTime = now;
    }
    if (event.kind === 'dispatch') this.arrive(event.request, now);
    else if (event.kind === 'route') this.dispatchRequest(event.request, now, event.arrivedAt);
    else if (event.kind === 'flow-deadline') this.expireWaiters(now);
    else if (event.kind === 'step') this.completeStep(event.instance, event.outcome, now);
    else if (event.kind === 'transfer') this.completeTransfer(event.flight, event.prefill, now);
    else this.publish(now);
    // With a sync delay, the KV events this event made the engines emit are stamped with its time.
    this.eventFed?.capture(now);
  }

  /** A request reaches the router: routed at once, or through flow control (queued, refused). */
  private arrive(request: TraceRequest, now: number): void {
    const flow = this.flow;
    if (flow === undefined) return this.dispatchRequest(request, now);
    const decision = flow.enter(request, this.fleet!.routers[0]!, now);
    if (decision.kind === 'go') this.dispatchRequest(request, now, now);
    else if (decision.kind === 'queued') {
      const evicted = decision.evicted;
      if (evicted !== undefined) this.refused(evicted.payload, evicted.enqueuedAt / 1000, now, 'queue_full');
      this.armDeadline();
    } else this.refused(request, now, now, decision.refusal.cause);
  }

  /** Schedules the flow-deadline event at the earliest waiter's deadline, if earlier than the one scheduled. */
  private armDeadline(): void {
    const at = this.flow!.nextDeadline();
    if (at === undefined || at >= this.deadlineAt) return;
    this.deadlineAt = at;
    this.schedule(at, { kind: 'flow-deadline' });
  }

  private expireWaiters(now: number): void {
    this.deadlineAt = Infinity;
    for (const waiter of this.flow!.expired(now))
      this.refused(waiter.payload, waiter.enqueuedAt / 1000, now, 'queue_timeout');
    this.routeWaiters(now);
    this.armDeadline();
  }

  /** Every waiter flow control lets take a free slot now is routed (a `route` event at `now`). */
  private routeWaiters(now: number): void {
    for (let next = this.flow!.next(now); next !== undefined; next = this.flow!.next(now))
      this.schedule(now, { kind: 'route', request: next.payload, arrivedAt: next.enqueuedAt / 1000 });
  }

  /** Flow control refused the request at `now`: a failed record (status 429), and its session goes on. */
  private refused(request: TraceRequest, arrivedAt: number, now: number, cause: string): void {
    this.records.push(this.flow!.refusalRecord(request, arrivedAt, now, cause));
    this.first = Math.min(this.first, arrivedAt);
    this.last = Math.max(this.last, now);
    this.releaseNextTurn(request, now);
  }

  private dispatchRequest(request: TraceRequest, now: number, arrivedAt?: number): void {
    const { routers, engines } = this.fleet!;
    const tokens = request.inputLength + Math.max(1, request.outputLength);
    if (tokens > this.maxRequestTokens)
      throw invalidValue(
        `input_length + output_length of session ${request.session} turn ${request.turn}`,
        `at most ${this.maxRequestTokens} tokens, the KV cache of one engine`,
        tokens,
      );
    const replica = this.replicas.replicaFor(request.session);
    const router = routers[replica]!;
    this.deliverPublished(replica);
    const eventFed = this.eventFed;
    eventFed?.sync(now);
    this.companions!.arriving(replica, request.session, now);
    const ticket = router.route(
      eventFed === undefined
        ? { hashIds: request.hashIds, session: request.session, inputTokens: request.inputLength }
        : { tokens: eventFed.tokensOf(request), session: request.session, inputTokens: request.inputLength },
    );
    const { index: instance, predictedCachedTokens: predicted, offload } = router.decision;
    this.companions!.routed(replica, ticket, request.session, now, {
      instance,
      uncached: Math.max(0, request.inputLength - predicted),
      blocks: request.hashIds.length,
    });
    const flight: InFlight = { request, replica, ticket, instance, dispatch: now, predicted };
    if (arrivedAt !== undefined) flight.arrivedAt = arrivedAt;
    const { hashIds, inputLength, outputLength } = request;
    if (offload.outcome === 'offload') {
      // The prefill phase: a one-token request on the prefill instance, its blocks held for the transfer.
      const prefill = offload.prefillIndex;
      flight.offload = {
        instance: prefill,
        ticket: offload.prefillTicket,
        cachedTokens: 0,
        transferredTokens: 0,
        transferS: 0,
      };
      const sequence = engines[prefill]!.submit(
        { id: offload.prefillTicket, hashIds, inputLength, outputLength: 1, holdBlocks: true },
        now,
      );
      this.prefilling.set(sequence, flight);
      this.kick(prefill, now);
    } else {
      const sequence = engines[instance]!.submit({ id: ticket, hashIds, inputLength, outputLength }, now);
      this.inFlight.set(sequence, flight);
      this.kick(instance, now);
    }
    this.first = Math.min(this.first, arrivedAt ?? now);
    if (!this.publishing && this.options.engineState === 'shm') this.schedulePublish(now);
  }

  /** The first token of a sequence, told to the replica that routed it (the prefill ticket for an offloaded request's prefill phase). */
  private reportFirstToken(sequence: Sequence, now: number): void {
    const { routers } = this.fleet!;
    const prefill = this.prefilling.get(sequence);
    if (prefill !== undefined) return routers[prefill.replica]!.onFirstToken(prefill.offload!.ticket);
    const flight = this.inFlight.get(sequence)!;
    routers[flight.replica]!.onFirstToken(flight.ticket);
    this.companions!.firstToken(flight.replica, flight.ticket, now);
  }

  private completeStep(instance: number, outcome: StepOutcome, now: number): void {
    const { routers } = this.fleet!;
    this.stepping[instance] = false;
    this.quietUntil[instance] = now; // until kick below says otherwise
    this.preemptions += outcome.preempted.length;
    for (const sequence of outcome.firstTokens) this.reportFirstToken(sequence, now);
    for (const sequence of outcome.finished) {
      const prefill = this.prefilling.get(sequence);
      if (prefill !== undefined) {
        this.prefilling.delete(sequence);
        routers[prefill.replica]!.complete(prefill.offload!.ticket);
        this.startTransfer(prefill, sequence, now);
        continue;
      }
      const flight = this.inFlight.get(sequence)!;
      this.inFlight.delete(sequence);
      routers[flight.replica]!.complete(flight.ticket);
      this.companions!.completed(flight.replica, flight.ticket, Math.max(1, flight.request.outputLength), now);
      this.record(flight, sequence, now);
      this.releaseNextTurn(flight.request, now);
      if (this.flow !== undefined) {
        this.flow.completed(flight.request, now);
        this.routeWaiters(now);
      }
    }
    this.kick(instance, now);
  }

  /** The prefill phase ended at `now`: the KV of what the decode instance lacks starts moving. */
  private startTransfer(flight: InFlight, prefill: Sequence, now: number): void {
    const offload = flight.offload!;
    const tokens = this.fleet!.engines[flight.instance]!.lackedTokens(flight.request);
    const { ms } = this.link!.transfer(offload.instance, flight.instance, tokens);
    offload.cachedTokens = prefill.cachedTokens ?? 0;
    offload.transferredTokens = tokens;
    offload.transferS = ms / 1000;
    this.transfersInFlight++;
    this.schedule(now + offload.transferS, { kind: 'transfer', flight, prefill });
  }

  /** The transfer ended: the prefill instance frees its blocks, the decode instance admits the request. */
  private completeTransfer(flight: InFlight, prefill: Sequence, now: number): void {
    const { engines } = this.fleet!;
    const offload = flight.offload!;
    this.transfersInFlight--;
    engines[offload.instance]!.releaseHeld(prefill);
    this.kick(offload.instance, now); // the freed blocks may admit a waiting request
    const { hashIds, inputLength, outputLength } = flight.request;
    const sequence = engines[flight.instance]!.submit(
      { id: flight.ticket, hashIds, inputLength, outputLength, transferred: true },
      now,
    );
    this.inFlight.set(sequence, flight);
    this.kick(flight.instance, now);
  }

  private record(flight: InFlight, sequence: Sequence, now: number): void {
    const { request, offload } = flight;
    this.records.push({
      session: request.session,
      turn: request.turn,
      instance: flight.instance,
      // With flow control: from the arrival at the router, so TTFT counts the wait for a slot.
      dispatch: flight.arrivedAt ?? flight.dispatch,
      first_token: sequence.firstTokenAt!,
      finish: now,
      input_tokens: request.inputLength,
      // Offloaded: the tokens no engine computed, the prefill instance's cache hit (docs/records.md).
      cached_tokens: offload === undefined ? (sequence.cachedTokens ?? 0) : offload.cachedTokens,
      output_tokens: Math.max(1, request.outputLength),
      overlapped: sequence.decodeOverlappedPrefill,
      preemptions: sequence.preemptions,
      predicted_cached_tokens: flight.predicted,
      ...(this.replicas.replicas > 1 ? { replica: flight.replica } : {}),
      ...this.flow?.recordFields(request, flight.dispatch - (flight.arrivedAt ?? flight.dispatch)),
      ...(offload === undefined
        ? {}
        : {
            prefill_instance: offload.instance,
            decode_cached_tokens: sequence.cachedTokens ?? 0,
            transferred_tokens: offload.transferredTokens,
            transfer_s: offload.transferS,
          }),
    });
    this.last = now;
  }

  /** Session-sequential dispatch: the finished turn releases the session's next one, if read. */
  private releaseNextTurn(finished: TraceRequest, now: number): void {
    if (this.dispatch.mode === 'poisson' || finished.sessionless) return;
    const busy = this.busySessions.get(finished.session)!;
    const next = busy.waiting.shift();
    if (next === undefined) this.busySessions.delete(finished.session);
    else this.schedule(Math.max(now, next.arrival), { kind: 'dispatch', request: next });
  }

  /**
   * Starts the engine's next step if it is idle. A step that tells the router nothing (no first
   * token, no finish, no preemption) and ends before the next barrier and before the next
   * request still to be read is run on the spot, as are runs of such decode-only steps
   * (fastForward): nothing can reach this engine before they end, so queueing them would change
   * nothing. (At an equal time the other event goes first, so the step is queued then.)
   */
  private kick(instance: number, now: number): void {
    if (this.stepping[instance]) return;
    const engine = this.fleet!.engines[instance]!;
    let limit =
      this.options.runAhead === false ? -Infinity : Math.min(this.external.peekTime() ?? Infinity, this.horizon);
    for (let other = 0; other < this.quietUntil.length; other++)
      if (other !== instance) limit = Math.min(limit, this.quietUntil[other]!);
    for (let outcome = engine.step(engine.fastForward(now, limit)); outcome !== undefined;) {
      if (!isSilent(outcome) || outcome.end >= limit) {
        this.stepping[instance] = true;
        this.quietUntil[instance] = isSilent(outcome) ? engine.quietUntil(outcome.end) : outcome.end;
        this.schedule(outcome.end, { kind: 'step', instance, outcome });
        return;
      }
      outcome = engine.step(engine.fastForward(outcome.end, limit));
    }
    this.quietUntil[instance] = Infinity; // idle: only a dispatch can wake it
  }

  /**
   * The shm feed publishes while requests are in flight, and pauses when the fleet is idle.
   * Takes every engine's state as the feed would publish it. A router reads observed state only
   * inside route(), so each replica is handed the snapshots just before its next dispatch
   * (deliverPublished): the same decisions as handing them over now, without a native call per
   * engine per tick while nothing is routed.
   */
  private publish(now: number): void {
    this.published = this.fleet!.engines.map((engine) => ({ timestampMs: now * 1000, ...engine.state() }));
    this.unread.fill(true);
    this.publishing = false;
    if (this.inFlight.size + this.prefilling.size + this.transfersInFlight > 0)
      this.schedulePublish(now + (this.options.publishMs ?? 50) / 1000);
  }

  private deliverPublished(replica: number): void {
    if (this.published === undefined || !this.unread[replica]) return;
    const router = this.fleet!.routers[replica]!;
    const { instanceIds } = this.fleet!;
    this.published.forEach((state, instance) => router.setObservedState(instanceIds[instance]!, state));
    this.unread[replica] = false;
  }

  private schedulePublish(time: number): void {
    this.publishing = true;
    this.schedule(time, { kind: 'publish' });
  }

  private schedule(time: number, event: SimEvent): void {
    this.queue.push(time, event);
    if (isExternal(event)) this.external.push(time, null);
  }
}
