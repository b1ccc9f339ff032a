/**
 * Synthetic agentic coding trace, calibrated to the window-1 w600 workload (docs/synth.md).
 *
 * Why: the real trace cannot ship; benchmarks and tests need a workload with the same
 * reuse structure (per-session prefix growth, a heavy tail of long sessions, a little
 * cross-session sharing) at any size, reproducibly.
 *
 * Model: root sessions start uniformly over `duration`, in two classes (quick tasks and a few
 * long-running loops); each turn's prompt is the previous prompt + its output + a tool result,
 * minus a re-rendered tail, with compaction before the context limit; some sessions share a
 * system prefix; some are sub-agents forked from a parent's context. Plan: synth-plan.ts;
 * per-session prompts, ids and timing: synth-session.ts; constants: synth-model.ts.
 *
 * Streaming: the plan (per-session start, class, turns, forks; ~26 bytes per session) is built
 * up front; requests are produced lazily by merging the root start times with a heap of
 * active sessions, so memory is O(sessions + active sessions' id runs), never O(hash ids).
 * Yields in non-decreasing `arrival`; the same options give the same requests.
 *
 * Progress: a SynthProgress counter, if given, learns the trace's request count when the plan is
 * built (each session emits exactly its planned turns) and is bumped once per request; it draws
 * no random numbers, so a counted trace is the same as an uncounted one.
 */
import type { TraceRequest } from './types.js';
import { SYNTH_MODEL, type SynthModel } from './synth-model.js';
import { validateSynthOptions, type SynthOptions } from './synth-options.js';
import { buildPlan, type SynthPlan } from './synth-plan.js';
import { SessionHeap } from './synth-heap.js';
import { IdCounter, SynthSession, type SessionContext, type SessionTraits } from './synth-session.js';

export { SYNTH_DEFAULTS, validateSynthOptions, type SynthOptions } from './synth-options.js';
export { SYNTH_MODEL, type SynthModel } from './synth-model.js';

/** `s` + the session's emission rank, zero-padded to 6 digits (wider past 999,999). */
function sessionName(rank: number): string {
  return `s${String(rank).padStart(6, '0')}`;
}

function traitsOf(plan: SynthPlan, planIndex: number): SessionTraits {
  return { planIndex, turns: plan.turns[planIndex]!, long: plan.long[planIndex] === 1 };
}

/** How far a synthetic trace has got; a plain counter, cheap to poll from a timer. */
export interface SynthProgress {
  /** Requests yielded so far. */
  requests: number;
  /** The trace's request count (Σ planned turns); set when the plan is built, at the first request. */
  totalRequests: number | undefined;
}

function* generate(
  options: Required<SynthOptions>,
  model: SynthModel,
  progress?: SynthProgress,
): Generator<TraceRequest> {
  const plan = buildPlan(options, model);
  if (progress !== undefined) progress.totalRequests = plan.turns.reduce((sum, turns) => sum + turns, 0);
  const ctx: SessionContext = {
    options,
    model,
    ids: new IdCounter(Math.floor(options.systemPrefixTokens / options.blockSize)),
  };
  const heap = new SessionHeap();
  let nextRoot = 0;
  let named = 0;
  for (;;) {
    const top = heap.peek();
    // Roots join the heap at their start time; ties go through the heap's plan-index order.
    if (nextRoot < plan.roots && (top === undefined || plan.start[nextRoot]! <= top.time)) {
      const r = nextRoot++;
      heap.push(SynthSession.root(ctx, traitsOf(plan, r), plan.systemPrefix[r] === 1, plan.start[r]!));
      continue;
    }
    const session = heap.pop();
    if (session === undefined) return;
    if (session.turn === 0) session.name = sessionName(named++);
    const request = session.emit();
    if (session.planIndex < plan.roots) {
      // Forks of this root at this turn: they start after the turn ends, so never before `request`.
      const end = plan.forkOffsets[session.planIndex + 1]!;
      for (let i = plan.forkOffsets[session.planIndex]!; i < end; i += 1) {
        const f = plan.forkOrder[i]!;
        if (plan.forkTurn[f] !== session.turn) continue;
        heap.push(SynthSession.fork(ctx, traitsOf(plan, plan.roots + f), session.forkSeed()));
      }
    }
    if (session.advance()) heap.push(session);
    if (progress !== undefined) progress.requests++;
    yield request;
  }
}

/** Internal entry with an explicit model (calibration experiments); prefer `synthesizeTrace`. */
export function synthesizeWithModel(options: SynthOptions, model: SynthModel): Generator<TraceRequest> {
  return generate(validateSynthOptions(options), model);
}

/**
 * A synthetic agentic trace, lazily, in arrival order. Options are validated now (throwing a
 * kvroute error naming the field), requests are produced as the generator is iterated.
 * `progress`, if given, counts them (see SynthProgress) without changing them.
 */
export function synthesizeTrace(options: SynthOptions = {}, progress?: SynthProgress): Generator<TraceRequest> {
  return generate(validateSynthOptions(options), SYNTH_MODEL, progress);
}
