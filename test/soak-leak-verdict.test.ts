/**
 * The soak's leak trend (scripts/soak/report.mjs lastHalfRise): over the load's last half, the
 * lowest of the last third against the lowest of the first third, of the memory outside V8's heap
 * (RSS less every thread's committed V8 heap, less the router's native index) and of the V8
 * heaps in use. Growth the index or V8's sizing of its heap explains is not a leak; growth neither
 * explains is, whatever V8's sawtooth does on top.
 */
import { describe, expect, it } from 'vitest';

import { lastHalfRise } from '../scripts/soak/report.mjs';

interface Gauges {
  rss: (i: number) => number;
  index?: (i: number) => number;
  heapTotal?: (i: number) => number;
  heapUsed?: (i: number) => number;
}

/** `n` samples, each gauge a function of the sample's number (index 5, heap 40 committed / 30 used unless given). */
function samples(n: number, g: Gauges) {
  return Array.from({ length: n }, (_, i) => ({
    rssMiB: g.rss(i),
    indexMiB: g.index?.(i) ?? 5,
    heapsTotalMiB: g.heapTotal?.(i) ?? 40,
    heapsUsedMiB: g.heapUsed?.(i) ?? 30,
  }));
}

/** V8's sawtooth: up 30 MiB over 10 samples, then back down. */
const sawtooth = (i: number) => 3 * (i % 10);

describe('the soak leak trend', () => {
  it('counts native growth that neither the index nor the V8 heap explains', () => {
    const leaking = samples(60, { rss: (i) => 200 + 0.8 * i + sawtooth(i) });
    // The lowest of samples 40..59 (232 at 40) against the lowest of 0..19 (200 at 0).
    expect(lastHalfRise(leaking).outsideHeapMiB).toBeCloseTo(32, 5);
    expect(lastHalfRise(leaking).heapMiB).toBe(0);
  });

  it('takes the router index growth off', () => {
    const indexGrowing = samples(60, { rss: (i) => 200 + 0.8 * i + sawtooth(i), index: (i) => 1 + 0.8 * i });
    expect(lastHalfRise(indexGrowing).outsideHeapMiB).toBeCloseTo(0, 5);
  });

  it("takes V8's committed heap off: V8 giving back 28 MiB early and growing it again is no rise", () => {
    // As a CI run read it: RSS falls with the committed heap at sample 3, then both climb back.
    const heapTotal = (i: number) => (i < 3 ? 72 : Math.min(73, 44 + 2 * (i - 3)));
    const resized = samples(30, { rss: (i) => 180 + heapTotal(i), heapTotal });
    expect(lastHalfRise(resized).outsideHeapMiB).toBe(0);
  });

  it('counts a JavaScript leak in the heap in use, though the committed heap grows with it', () => {
    const used = (i: number) => 25 + 0.6 * i + (i % 5);
    const jsLeak = samples(60, { rss: (i) => 150 + used(i) + 20, heapTotal: (i) => used(i) + 20, heapUsed: used });
    // Heap in use: the lowest of 40..59 (49 at 40) against the lowest of 0..19 (25 at 0).
    expect(lastHalfRise(jsLeak).heapMiB).toBeCloseTo(24, 5);
    expect(lastHalfRise(jsLeak).outsideHeapMiB).toBeCloseTo(0, 5);
  });

  it('reads the sawtooth of a flat process as no rise', () => {
    const flat = samples(60, { rss: (i) => 250 + sawtooth(i), heapUsed: (i) => 25 + sawtooth(i) / 2 });
    expect(lastHalfRise(flat)).toEqual({ outsideHeapMiB: 0, heapMiB: 0 });
  });

  it('carries the last gauge read over samples whose gauges were not read', () => {
    const gaps = samples(9, {
      rss: (i) => 200 + i,
      index: (i) => (i < 6 ? i : NaN),
      heapTotal: (i) => (i < 6 ? 40 : NaN),
    });
    // Outside the heap: 160 for samples 0..5, then 166 − 5, 167 − 5, 168 − 5: a rise of 1 (not 6
    // or 46, as an unread gauge taken for 0 would make it).
    expect(lastHalfRise(gaps).outsideHeapMiB).toBe(1);
  });

  it('takes the first gauge read for samples before any was read', () => {
    const late = samples(9, { rss: () => 200, heapTotal: (i) => (i < 3 ? NaN : 40) });
    expect(lastHalfRise(late).outsideHeapMiB).toBe(0);
  });

  it('is 0 with fewer than three samples', () => {
    expect(lastHalfRise(samples(2, { rss: (i) => 100 * i }))).toEqual({ outsideHeapMiB: 0, heapMiB: 0 });
  });
});
