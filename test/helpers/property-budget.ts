/**
 * The budget of the property-based fuzz tests (*-fuzz.test.ts, fast-check): a fixed seed and
 * run count so `npm test` replays the same inputs every time, bounded in time too. A campaign
 * widens them from the environment (docs/fuzzing.md): FUZZ_SEED (a number, or `random`),
 * FUZZ_RUNS (a multiplier of each property's runs), FUZZ_SECONDS (each property's time cap).
 * fast-check prints the seed and the shrunk counterexample of a failure.
 */
import type { Parameters } from 'fast-check';

const DEFAULT_SEED = 20261202;

export function budget(runs: number): Parameters<unknown> {
  const seedText = process.env.FUZZ_SEED;
  const seed = seedText === 'random' ? Math.floor(Math.random() * 2 ** 31) : seedText ? Number(seedText) : DEFAULT_SEED;
  const scale = Number(process.env.FUZZ_RUNS ?? 1);
  const seconds = Number(process.env.FUZZ_SECONDS ?? 10);
  return {
    seed,
    numRuns: Math.max(1, Math.round(runs * scale)),
    // A run that reaches the cap stops early and passes on what it checked (markInterruptAsFailure is off).
    interruptAfterTimeLimit: seconds * 1000,
  };
}
