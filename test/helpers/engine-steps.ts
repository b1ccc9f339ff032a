/** Drives an EngineModel step by step in tests. */
import type { EngineModel, StepOutcome } from '../../src/sim/engine-model.js';

/** Steps the engine until `done` (or it can run nothing), returning every step; time starts at `start`. */
export function runUntil(engine: EngineModel, done: () => boolean, start = 0): StepOutcome[] {
  const steps: StepOutcome[] = [];
  let now = start;
  for (let guard = 0; !done() && guard < 100_000; guard++) {
    const step = engine.step(now);
    if (step === undefined) break;
    steps.push(step);
    now = step.end;
  }
  return steps;
}
