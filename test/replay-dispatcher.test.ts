/**
 * The replay's poisson dispatcher on a virtual clock: each request goes at its drawn time, in
 * trace order, at the asked rate — exactly, whatever the machine's load (the end-to-end replay
 * test can only bound the rate a loaded machine achieves).
 */
import { afterEach, describe, expect, it, vi } from 'vitest';

import { dispatch } from '../src/replay/dispatcher.js';
import { SynthRandom } from '../src/trace/synth-random.js';
import { sessionTrace } from './helpers/replay-rig.js';

afterEach(() => {
  vi.useRealTimers();
});

describe('poisson dispatch on a virtual clock', () => {
  it('sends every request at its exponential draw, in trace order, at the asked rate', async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = (): number => Date.now() / 1000;
    const requests = sessionTrace(300, 1, 1, 2);
    const sent: { session: string; at: number }[] = [];
    const done = dispatch(
      requests,
      { dispatch: { mode: 'poisson', rate: 200, seed: 3 }, speed: 1, clock, stop: new AbortController().signal },
      (request) => {
        sent.push({ session: request.session!, at: clock() });
        return Promise.resolve();
      },
    );
    await vi.runAllTimersAsync();
    await done;

    // The schedule the dispatcher must follow, drawn independently from the same seed.
    const random = new SynthRandom(3);
    let due = 0;
    const schedule = requests.map(() => (due += -Math.log(1 - random.next()) / 200));
    expect(sent.map((s) => s.session)).toEqual(requests.map((r) => r.session));
    // Timers fire on whole milliseconds: each send is within 1 ms of its draw.
    sent.forEach((s, i) => expect(Math.abs(s.at - schedule[i]!)).toBeLessThanOrEqual(0.0011));
    const rate = (sent.length - 1) / (sent[sent.length - 1]!.at - sent[0]!.at);
    expect(rate).toBeGreaterThan(200 * 0.85);
    expect(rate).toBeLessThan(200 * 1.15);
  });

  it('sends nothing more once stopped', async () => {
    vi.useFakeTimers({ now: 0 });
    const clock = (): number => Date.now() / 1000;
    const stop = new AbortController();
    let count = 0;
    const done = dispatch(
      sessionTrace(100, 1, 1, 2),
      { dispatch: { mode: 'poisson', rate: 10, seed: 1 }, speed: 1, clock, stop: stop.signal },
      () => {
        if (++count === 5) stop.abort();
        return Promise.resolve();
      },
    );
    await vi.runAllTimersAsync();
    await done;
    expect(count).toBe(5);
  });
});
