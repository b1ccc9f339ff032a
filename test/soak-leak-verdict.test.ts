/**
 * The soak's leak trend (scripts/soak/report.mjs lastHalfRiseMiB): RSS less the router's native
 * index, lowest of the last third against lowest of the first third. Growth the index explains is
 * not a leak; growth it does not explain is, whatever V8's sawtooth does on top.
 */
import { describe, expect, it } from 'vitest';

import { lastHalfRiseMiB } from '../scripts/soak/report.mjs';

/** `n` samples, RSS and index given as functions of the sample's number. */
function samples(n: number, rss: (i: number) => number, index: (i: number) => number) {
  return Array.from({ length: n }, (_, i) => ({ rssMiB: rss(i), indexMiB: index(i) }));
}

/** V8's sawtooth: up 30 MiB over 10 samples, then back down. */
const sawtooth = (i: number) => 3 * (i % 10);

describe('the soak leak trend', () => {
  it('counts growth the router index does not explain', () => {
    const leaking = samples(
      60,
      (i) => 200 + 0.8 * i + sawtooth(i),
      () => 5,
    );
    // The lowest of samples 40..59 (232 at 40) against the lowest of 0..19 (200 at 0).
    expect(lastHalfRiseMiB(leaking)).toBeCloseTo(32, 5);
  });

  it('takes the router index growth off', () => {
    const indexGrowing = samples(
      60,
      (i) => 200 + 0.8 * i + sawtooth(i),
      (i) => 1 + 0.8 * i,
    );
    expect(lastHalfRiseMiB(indexGrowing)).toBeCloseTo(0, 5);
  });

  it('reads the sawtooth of a flat process as no rise', () => {
    expect(
      lastHalfRiseMiB(
        samples(
          60,
          (i) => 250 + sawtooth(i),
          () => 11,
        ),
      ),
    ).toBe(0);
  });

  it('carries the last index read over samples whose index was not read', () => {
    const gaps = samples(
      9,
      (i) => 200 + i,
      (i) => (i < 6 ? i : NaN),
    );
    // Net RSS: 200 for samples 0..5, then 206 − 5, 207 − 5, 208 − 5: a rise of 1 (not 6, as an unread index taken for 0 would make it).
    expect(lastHalfRiseMiB(gaps)).toBe(1);
  });

  it('is 0 with fewer than three samples', () => {
    expect(
      lastHalfRiseMiB(
        samples(
          2,
          (i) => 100 * i,
          () => 0,
        ),
      ),
    ).toBe(0);
  });
});
