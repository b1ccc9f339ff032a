/**
 * Min-heap of active synthetic sessions keyed by (pending arrival time, plan index).
 *
 * Why: the generator must emit requests in global arrival order while only the active
 * sessions are in memory; each pop gives the session whose next turn arrives first. The plan
 * index breaks ties between equal times, so the order (and the trace) is deterministic.
 *
 * Complexity: O(log n) push and pop over n active sessions.
 */
import type { SynthSession } from './synth-session.js';

function before(a: SynthSession, b: SynthSession): boolean {
  return a.time < b.time || (a.time === b.time && a.planIndex < b.planIndex);
}

export class SessionHeap {
  private readonly items: SynthSession[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): SynthSession | undefined {
    return this.items[0];
  }

  push(session: SynthSession): void {
    const items = this.items;
    let at = items.length;
    items.push(session);
    while (at > 0) {
      const up = (at - 1) >> 1;
      const parent = items[up]!;
      if (!before(session, parent)) break;
      items[at] = parent;
      at = up;
    }
    items[at] = session;
  }

  pop(): SynthSession | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let at = 0;
    for (;;) {
      const left = 2 * at + 1;
      if (left >= items.length) break;
      const right = left + 1;
      const child = right < items.length && before(items[right]!, items[left]!) ? right : left;
      if (!before(items[child]!, last)) break;
      items[at] = items[child]!;
      at = child;
    }
    items[at] = last;
    return top;
  }
}
