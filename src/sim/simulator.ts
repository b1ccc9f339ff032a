/**
 * The discrete-event simulator: replays a trace in virtual time through the routing core (the
 * same `Router` the proxy uses, on a manual clock) and one EngineModel per instance.
 *
 * Dispatch is session-sequential by default (the seeds' B3): a session's first request is sent
 * at its trace time, and turn N+1 at the later of its trace time and turn N's completion.
 * `poisson` sends every request open-loop at exponential inter-arrival times instead.
 *
 * Engine state: `shadow` leaves the router with its own counters; `shm` publishes every engine's
 * true state to the router every `publishMs` (the seeds' es1 fed it through /dev/shm at ~50 ms).
 *
 * Events at the same instant run in the order they were scheduled, so a run is a pure function
 * of (trace, options).
 */
import { invalidValue } from '../core/errors.js';
import { Router } from '../core/router.js';
import type { PolicyName, PolicySpec } from '../core/types.js';
import type { RequestRecord } from '../trace/records.js';
import { SynthRandom } from '../trace/synth-random.js';
import type { TraceRequest } from '../trace/types.js';
import { EngineModel, type Sequence, type StepOutcome } from './engine-model.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, capacityBlocks } from './engine-preset.js';
import { EventQueue } from './event-queue.js';

export type Dispatch = { mode: 'session' } | { mode: 'poisson'; rate: number; seed: number };

export interface SimulationOptions {
  policy: PolicyName | PolicySpec;
  instances: number;
  engineState?: 'shadow' | 'shm';
  /** Publish period of the shm feed, ms (default 50). */
  publishMs?: number;
  /** ENGINE_PRESETS key. */
  preset?: string;
  dispatch?: Dispatch;
  /** false runs the TypeScript reference router. */
  native?: boolean;
}

export interface SimulationResult {
  records: RequestRecord[];
  /** Virtual seconds from the first dispatch to the last completion. */
  makespan: number;
  preemptions: number;
  /** Cached blocks evicted to make room, over all engines. */
  evictions: number;
  steps: number;
}

type SimEvent =
  | { kind: 'dispatch'; request: number }
  | { kind: 'step'; instance: number; outcome: StepOutcome }
  | { kind: 'publish' };

interface InFlight {
  request: number;
  ticket: number;
  instance: number;
  dispatch: number;
}

export function simulate(trace: readonly TraceRequest[], options: SimulationOptions): SimulationResult {
  const presetName = options.preset ?? DEFAULT_ENGINE_PRESET;
  const preset = ENGINE_PRESETS[presetName];
  if (preset === undefined)
    throw invalidValue('preset', `one of ${Object.keys(ENGINE_PRESETS).join(', ')}`, presetName);
  const blockSize = trace[0]?.blockSize ?? 16;
  const capacity = capacityBlocks(preset, blockSize);
  const engines = Array.from({ length: options.instances }, () => new EngineModel({ preset, blockSize }));
  const routerOptions = { instances: options.instances, policy: options.policy, blockSize, capacityBlocks: capacity };
  const router = new Router({
    ...routerOptions,
    clock: 'manual',
    ...(options.native === undefined ? {} : { native: options.native }),
  });
  const instanceIds = router.instances();
  const queue = new EventQueue<SimEvent>();
  const stepping = new Array<boolean>(options.instances).fill(false);
  const inFlight = new Map<Sequence, InFlight>();
  const records: RequestRecord[] = [];
  let preemptions = 0;

  // Session-sequential: each session's requests in order; the next is released by completion.
  const nextInSession = new Map<number, number>();
  const dispatch = options.dispatch ?? { mode: 'session' };
  if (dispatch.mode === 'session') {
    const lastOf = new Map<string, number>();
    trace.forEach((request, index) => {
      const previous = lastOf.get(request.session);
      if (previous === undefined || request.sessionless)
        queue.push(request.arrival, { kind: 'dispatch', request: index });
      else nextInSession.set(previous, index);
      lastOf.set(request.session, index);
    });
  } else {
    const random = new SynthRandom(dispatch.seed);
    let time = 0;
    trace.forEach((_, index) => {
      time += -Math.log(1 - random.next()) / dispatch.rate;
      queue.push(time, { kind: 'dispatch', request: index });
    });
  }
  if (options.engineState === 'shm') queue.push(0, { kind: 'publish' });

  const kick = (instance: number, now: number): void => {
    if (stepping[instance]) return;
    const outcome = engines[instance]!.step(now);
    if (outcome === undefined) return;
    stepping[instance] = true;
    queue.push(outcome.end, { kind: 'step', instance, outcome });
  };

  let first = Infinity;
  let last = 0;
  let open = trace.length;
  for (let event = queue.pop(); event !== undefined; event = queue.pop()) {
    const now = event.time;
    router.setTime(now * 1000);
    const e = event.event;
    if (e.kind === 'dispatch') {
      const request = trace[e.request]!;
      const ticket = router.route({
        hashIds: request.hashIds,
        session: request.session,
        inputTokens: request.inputLength,
      });
      const instance = router.decision.index;
      const sequence = engines[instance]!.submit(
        {
          id: e.request,
          hashIds: request.hashIds,
          inputLength: request.inputLength,
          outputLength: request.outputLength,
        },
        now,
      );
      inFlight.set(sequence, { request: e.request, ticket, instance, dispatch: now });
      first = Math.min(first, now);
      kick(instance, now);
    } else if (e.kind === 'step') {
      stepping[e.instance] = false;
      preemptions += e.outcome.preempted.length;
      for (const sequence of e.outcome.firstTokens) router.onFirstToken(inFlight.get(sequence)!.ticket);
      for (const sequence of e.outcome.finished) {
        const flight = inFlight.get(sequence)!;
        inFlight.delete(sequence);
        router.complete(flight.ticket);
        const request = trace[flight.request]!;
        records.push({
          session: request.session,
          turn: request.turn,
          instance: flight.instance,
          dispatch: flight.dispatch,
          first_token: sequence.firstTokenAt!,
          finish: now,
          input_tokens: request.inputLength,
          cached_tokens: sequence.cachedTokens ?? 0,
          output_tokens: Math.max(1, request.outputLength),
          overlapped: sequence.decodeOverlappedPrefill,
          preemptions: sequence.preemptions,
        });
        open--;
        last = now;
        const next = nextInSession.get(flight.request);
        if (next !== undefined) queue.push(Math.max(now, trace[next]!.arrival), { kind: 'dispatch', request: next });
      }
      kick(e.instance, now);
    } else {
      engines.forEach((engine, instance) =>
        router.setObservedState(instanceIds[instance]!, { timestampMs: now * 1000, ...engine.state() }),
      );
      if (open > 0) queue.push(now + (options.publishMs ?? 50) / 1000, { kind: 'publish' });
    }
  }
  return {
    records,
    makespan: records.length === 0 ? 0 : last - first,
    preemptions,
    evictions: engines.reduce((sum, engine) => sum + engine.pool.evictions, 0),
    steps: engines.reduce((sum, engine) => sum + engine.counters.steps, 0),
  };
}
