/**
 * hot-metrics.ts against prom-client itself: the same random observations into a real
 * `Histogram`/`Counter` and into the hot versions must scrape identically (JSON and text).
 */
import { Counter, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';

import { hotCounter, hotHistogram } from '../src/proxy/observe/hot-metrics.js';

import { Rng } from './helpers/random.js';

/** The text exposition as a sorted list of `name{sorted labels} value` lines (label order is free). */
function samples(text: string): string[] {
  return text
    .split('\n')
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => {
      const m = /^([^{ ]+)(?:\{(.*)\})? (.+)$/.exec(line)!;
      const labels = (m[2] ?? '').split(',').filter(Boolean).sort().join(',');
      return `${m[1]}{${labels}} ${Number(m[3])}`;
    })
    .sort();
}

const BUCKETS = [0.001, 0.01, 0.1, 1, 10];

describe('hot metrics', () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    it(`scrapes like prom-client for random observations (seed ${seed})`, async () => {
      const rng = new Rng(seed);
      const random = () => rng.next();
      const real = new Registry();
      const hot = new Registry();
      const config = { name: 'h', help: 'a histogram', labelNames: ['instance', 'policy'] as const };
      const realHistogram = new Histogram({ ...config, buckets: BUCKETS, registers: [real] });
      const hotH = hotHistogram({ ...config, buckets: BUCKETS, registry: hot });
      const counterConfig = { name: 'c_total', help: 'a counter', labelNames: ['instance'] as const };
      const realCounter = new Counter({ ...counterConfig, registers: [real] });
      const hotC = hotCounter({ ...counterConfig, registry: hot });
      for (let i = 0; i < 500; i++) {
        const instance = `http://127.0.0.1:${8000 + Math.floor(random() * 3)}`;
        const policy = random() < 0.5 ? 'unified' : 'lmetric';
        // Values on, between and beyond the bounds, and 0.
        const value = random() < 0.2 ? BUCKETS[Math.floor(random() * BUCKETS.length)]! : random() ** 4 * 20;
        realHistogram.observe({ instance, policy }, value);
        hotH.cell(instance, policy).observe(value);
        const n = Math.floor(random() * 100);
        realCounter.inc({ instance }, n);
        hotC.cell(instance).value += n;
      }
      expect(samples(await hot.metrics())).toEqual(samples(await real.metrics()));
      const byName = (ms: Awaited<ReturnType<Registry['getMetricsAsJSON']>>) =>
        Object.fromEntries(ms.map((m) => [m.name, { type: m.type, help: m.help, n: m.values.length }]));
      expect(byName(await hot.getMetricsAsJSON())).toEqual(byName(await real.getMetricsAsJSON()));
      expect(await hot.metrics()).toContain('# TYPE h histogram');
    });
  }

  it('keeps counting across scrapes and never resets a counter', async () => {
    const registry = new Registry();
    const c = hotCounter({ name: 'n_total', help: 'n', labelNames: ['k'], registry });
    c.cell('a').value += 2;
    expect(samples(await registry.metrics())).toEqual(['n_total{k="a"} 2']);
    c.cell('a').value += 3;
    c.cell('b').value += 1;
    expect(samples(await registry.metrics())).toEqual(['n_total{k="a"} 5', 'n_total{k="b"} 1']);
  });

  it('refuses a wrong label count and the reserved le label', () => {
    const registry = new Registry();
    const h = hotHistogram({ name: 'x', help: 'x', labelNames: ['a', 'b'], buckets: [1], registry });
    expect(() => h.cell('only-one')).toThrow(/expected 2 label values \(a, b\)/);
    expect(() => hotHistogram({ name: 'y', help: 'y', labelNames: ['le'], buckets: [1], registry })).toThrow(/le/);
  });
});
