/**
 * The CostLearner against the simulator's engines (src/sim/engine-model.ts): a synthesized trace
 * routed by a real Router over four EngineModels, one of them at 0.5× prefill cost
 * (scalePreset, as `sim run --prefill-cost 0.5` scales every engine). The router is never told;
 * the learner must find that instance about 2× faster from first tokens alone.
 *
 * The loop is the simulator's in miniature: session-sequential dispatch (turn N+1 at the later of
 * its arrival and turn N's finish), one step event per busy engine, the router's manual clock
 * following virtual time, and the learner told what the router is told, at the same instants.
 */
import { describe, expect, it } from 'vitest';

import { CostLearner, DEFAULT_COST_PRIOR } from '../src/core/cost-learning/index.js';
import { Router } from '../src/index.js';
import { EngineModel, type Sequence } from '../src/sim/engine-model.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, scalePreset } from '../src/sim/engine-preset.js';
import { EventQueue } from '../src/sim/event-queue.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import type { TraceRequest } from '../src/trace/types.js';

type SimEvent = { kind: 'dispatch'; request: TraceRequest } | { kind: 'step'; instance: number };

interface Flight {
  ticket: number;
  request: TraceRequest;
}

/**
 * Runs `trace` through a fleet with the given prefill multipliers; returns the learner and each
 * instance's learned prefill cost at its 200th observation.
 */
function run(
  trace: TraceRequest[],
  prefillCosts: number[],
  native: boolean,
): { learner: CostLearner; at200: Map<string, number> } {
  const base = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
  const blockSize = trace[0]!.blockSize;
  const engines = prefillCosts.map(
    (prefillCost) => new EngineModel({ preset: scalePreset(base, { prefillCost }), blockSize }),
  );
  const ids = engines.map((_, i) => `engine-${i}`);
  const router = new Router({
    instances: ids,
    native,
    clock: 'manual',
    policy: 'min_ttft',
    blockSize,
    capacityBlocks: engines[0]!.pool.capacity,
  });
  let nowS = 0;
  const learner = new CostLearner(router, { now: () => nowS * 1000 });
  const queue = new EventQueue<SimEvent>();
  const stepping = engines.map(() => false);
  const flights = new Map<Sequence, Flight>();
  const nextTurn = new Map<string, TraceRequest[]>();
  const busy = new Set<string>();
  const at200 = new Map<string, number>();

  const kick = (instance: number): void => {
    if (stepping[instance]) return;
    const outcome = engines[instance]!.step(nowS);
    if (outcome === undefined) return;
    stepping[instance] = true;
    pending[instance] = outcome;
    queue.push(outcome.end, { kind: 'step', instance });
  };
  const pending: Array<ReturnType<EngineModel['step']>> = engines.map(() => undefined);

  const dispatch = (request: TraceRequest): void => {
    if (busy.has(request.session)) {
      nextTurn.get(request.session)!.push(request);
      return;
    }
    busy.add(request.session);
    if (!nextTurn.has(request.session)) nextTurn.set(request.session, []);
    const ticket = router.route({
      hashIds: request.hashIds,
      session: request.session,
      inputTokens: request.inputLength,
    });
    learner.routed(ticket);
    const instance = router.decision.index;
    const { hashIds, inputLength, outputLength } = request;
    const sequence = engines[instance]!.submit({ id: ticket, hashIds, inputLength, outputLength }, nowS);
    flights.set(sequence, { ticket, request });
    kick(instance);
  };

  for (const request of trace) queue.push(request.arrival, { kind: 'dispatch', request });
  for (let next = queue.pop(); next !== undefined; next = queue.pop()) {
    nowS = next.time;
    router.setTime(nowS * 1000);
    const event = next.event;
    if (event.kind === 'dispatch') {
      dispatch(event.request);
      continue;
    }
    const outcome = pending[event.instance]!;
    stepping[event.instance] = false;
    for (const sequence of outcome.firstTokens) {
      const flight = flights.get(sequence)!;
      router.onFirstToken(flight.ticket);
      learner.firstToken(flight.ticket);
    }
    for (const sequence of outcome.finished) {
      const flight = flights.get(sequence)!;
      flights.delete(sequence);
      router.complete(flight.ticket);
      learner.completed(flight.ticket, { outputTokens: flight.request.outputLength });
      const estimate = learner.estimate(ids[event.instance]!);
      if (estimate.ttftObservations === 200) at200.set(ids[event.instance]!, estimate.prefillSecondsPerToken);
      busy.delete(flight.request.session);
      const waiting = nextTurn.get(flight.request.session)!;
      if (waiting.length > 0) queue.push(nowS, { kind: 'dispatch', request: waiting.shift()! });
    }
    kick(event.instance);
  }
  return { learner, at200 };
}

describe.each([
  { impl: 'native', native: true },
  { impl: 'reference', native: false },
])('CostLearner over the simulated engines ($impl)', ({ native }) => {
  it('finds the instance at 0.5× prefill cost about 2× faster, each within 10% after 200 requests', () => {
    const trace = [...synthesizeTrace({ sessions: 300, seed: 3, duration: 600 })];
    const costs = [1, 0.5, 0.7, 1];
    const { learner, at200 } = run(trace, costs, native);
    const estimates = learner.estimates();
    const perToken = (id: string) => estimates[id]!.prefillSecondsPerToken;
    const prior = DEFAULT_COST_PRIOR.prefillSecondsPerToken;
    costs.forEach((cost, i) => {
      const id = `engine-${i}`;
      expect(estimates[id]!.ttftObservations).toBeGreaterThanOrEqual(200);
      expect(Math.abs(at200.get(id)! / (cost * prior) - 1)).toBeLessThan(0.1);
      expect(Math.abs(perToken(id) / (cost * prior) - 1)).toBeLessThan(0.1);
    });
    const speedup = (perToken('engine-0') + perToken('engine-3')) / 2 / perToken('engine-1');
    expect(speedup).toBeGreaterThan(1.8);
    expect(speedup).toBeLessThan(2.2);
  });
});
