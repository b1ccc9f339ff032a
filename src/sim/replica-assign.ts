/**
 * Which of R router replicas dispatches a request in `sim run --replicas R` (docs/scale-out.md):
 * the balancer in front of several `kvroute serve` replicas, simulated.
 *
 * Algorithm:
 * - `random`: an L4 balancer spreading connections. One seeded mulberry32 stream (SynthRandom,
 *   its seed mixed with a tag of its own so it never mirrors `--rate`'s arrival stream); each
 *   request takes the next draw, replica = floor(draw × R).
 * - `session`: a session-affine balancer. replica = floor(sessionDraw(session, seed) × R): FNV-1a
 *   of the session id and the seed with a murmur finish, so every turn of a session reaches the
 *   same replica and sessions spread evenly.
 *
 * Invariants: R = 1 always answers 0 and draws nothing; a run is a pure function of (trace,
 * options), since requests are dispatched in a deterministic order. O(1) per request (O(length of
 * the session id) for `session`).
 */
import { invalidValue } from '../core/errors.js';
import { mixSeed, SynthRandom } from '../trace/synth-random.js';
import { sessionDraw } from '../trace/transforms.js';

export const REPLICA_ASSIGNS = ['random', 'session'] as const;
export type ReplicaAssign = (typeof REPLICA_ASSIGNS)[number];

/** The most replicas `sim run` simulates. */
export const MAX_REPLICAS = 64;

/** The stream tag of the random assignment's draws (mixSeed's `stream`). */
const RANDOM_STREAM = 0x7265706c; // "repl"

export class ReplicaAssigner {
  private readonly random: SynthRandom | undefined;

  constructor(
    readonly replicas: number,
    readonly assign: ReplicaAssign,
    private readonly seed: number,
  ) {
    if (!(Number.isSafeInteger(replicas) && replicas >= 1 && replicas <= MAX_REPLICAS))
      throw invalidValue('replicas', `an integer from 1 to ${MAX_REPLICAS}`, replicas);
    if (!REPLICA_ASSIGNS.includes(assign)) throw invalidValue('replicaAssign', REPLICA_ASSIGNS.join(' or '), assign);
    if (!(Number.isSafeInteger(seed) && seed >= 0)) throw invalidValue('replicaSeed', 'a non-negative integer', seed);
    this.random = assign === 'random' && replicas > 1 ? new SynthRandom(mixSeed(seed, RANDOM_STREAM, 0)) : undefined;
  }

  /** The replica that dispatches a request of `session`. */
  replicaFor(session: string): number {
    if (this.replicas === 1) return 0;
    const draw = this.random === undefined ? sessionDraw(session, this.seed) : this.random.next();
    return Math.min(this.replicas - 1, Math.floor(draw * this.replicas));
  }
}
