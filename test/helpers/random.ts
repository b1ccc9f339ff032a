/**
 * Seeded randomness for reproducible generated fixtures: mulberry32, the generator the
 * synthetic traces use (SynthRandom), with the helpers tests want.
 */
import { SynthRandom } from '../../src/trace/synth-random.js';

export class Rng {
  private readonly source: SynthRandom;

  constructor(seed: number) {
    this.source = new SynthRandom(seed);
  }

  /** Uniform in [0, 1). */
  next(): number {
    return this.source.next();
  }

  /** Integer in [min, max]. */
  int(min: number, max: number): number {
    return min + Math.floor(this.next() * (max - min + 1));
  }

  chance(p: number): boolean {
    return this.next() < p;
  }

  pick<T>(items: readonly T[]): T {
    return items[Math.floor(this.next() * items.length)]!;
  }

  /** A uniformly random 64-bit unsigned integer. */
  u64(): bigint {
    return (BigInt(this.int(0, 0xffffffff)) << 32n) | BigInt(this.int(0, 0xffffffff));
  }
}
