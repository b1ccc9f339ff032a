/**
 * When each replayed request is sent, in real time.
 *
 * - `session` (the reference experiments' agentic dispatch, as the simulator's): a session's turn N+1 is sent at
 *   the later of its trace arrival (÷ speed) and the completion of turn N; a sessionless request
 *   is sent at its arrival. Sessions run concurrently, one chain each.
 * - `poisson`: open loop, every request in trace order at exponential inter-arrival times of
 *   mean 1/rate, drawn from SynthRandom(seed) exactly as `sim run --rate` draws them.
 *
 * Invariants:
 * - Within a session (session mode), turn N+1 is never sent before turn N's send resolved.
 * - After `stop` aborts, nothing more is sent; dispatch() resolves once every send it started
 *   has resolved (session chains end after their current request).
 * - Times are relative to the first request's arrival: the trace's start is the replay's start.
 *
 * Cost: one timer per waiting session chain (session), one per wake-up (poisson: every request
 * already due is sent in the same wake-up, yielding to I/O every POISSON_BURST sends).
 */
import { setImmediate as yieldToIo } from 'node:timers/promises';

import { SynthRandom } from '../trace/synth-random.js';
import type { TraceRequest } from '../trace/types.js';

export type DispatchMode = { mode: 'session' } | { mode: 'poisson'; rate: number; seed: number };

export interface DispatchOptions {
  dispatch: DispatchMode;
  /** Trace seconds per replay second (session mode). */
  speed: number;
  /** Seconds since the replay's start. */
  clock: () => number;
  stop: AbortSignal;
}

/** Sends in a poisson wake-up before yielding to I/O. */
const POISSON_BURST = 64;

/** Resolves after `seconds`, or at once when `stop` aborts. */
function sleep(seconds: number, stop: AbortSignal): Promise<void> {
  if (seconds <= 0 || stop.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      stop.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, seconds * 1000);
    stop.addEventListener('abort', done);
  });
}

/** Sends every request per the mode (see the header). */
export async function dispatch(
  requests: readonly TraceRequest[],
  options: DispatchOptions,
  send: (request: TraceRequest) => Promise<void>,
): Promise<void> {
  if (requests.length === 0) return;
  if (options.dispatch.mode === 'poisson') return poisson(requests, options, options.dispatch, send);
  return sessions(requests, options, send);
}

async function sessions(
  requests: readonly TraceRequest[],
  options: DispatchOptions,
  send: (request: TraceRequest) => Promise<void>,
): Promise<void> {
  const origin = requests[0]!.arrival;
  const chains = new Map<string, TraceRequest[]>();
  const alone: TraceRequest[][] = [];
  for (const request of requests) {
    if (request.sessionless === true) {
      alone.push([request]);
      continue;
    }
    let chain = chains.get(request.session);
    if (chain === undefined) chains.set(request.session, (chain = []));
    chain.push(request);
  }
  const run = async (chain: readonly TraceRequest[]): Promise<void> => {
    for (const request of chain) {
      await sleep((request.arrival - origin) / options.speed - options.clock(), options.stop);
      if (options.stop.aborted) return;
      await send(request);
    }
  };
  await Promise.all([...chains.values(), ...alone].map(run));
}

async function poisson(
  requests: readonly TraceRequest[],
  options: DispatchOptions,
  mode: { rate: number; seed: number },
  send: (request: TraceRequest) => Promise<void>,
): Promise<void> {
  const random = new SynthRandom(mode.seed);
  const started = options.clock();
  const pending = new Set<Promise<void>>();
  let due = 0;
  let burst = 0;
  for (const request of requests) {
    due += -Math.log(1 - random.next()) / mode.rate;
    const wait = started + due - options.clock();
    if (wait > 0) {
      await sleep(wait, options.stop);
      burst = 0;
    } else if (++burst >= POISSON_BURST) {
      await yieldToIo();
      burst = 0;
    }
    if (options.stop.aborted) break;
    const sent = send(request).finally(() => pending.delete(sent));
    pending.add(sent);
  }
  await Promise.all(pending);
}
