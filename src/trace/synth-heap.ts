/**
 * Min-heap of active synthetic sessions keyed by (pending arrival time, plan index).
 *
 * Why: the generator must emit requests in global arrival order while only the active
 * sessions are in memory; each pop gives the session whose next turn arrives first. The plan
 * index breaks ties between equal times, so the order (and the trace) is deterministic.
 */
import { MinHeap } from '../core/min-heap.js';
import type { SynthSession } from './synth-session.js';

function before(a: SynthSession, b: SynthSession): boolean {
  return a.time < b.time || (a.time === b.time && a.planIndex < b.planIndex);
}

export class SessionHeap extends MinHeap<SynthSession> {
  constructor() {
    super(before);
  }
}
