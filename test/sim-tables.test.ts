/** The human tables of sim run and sim interference: each row or column names its unit. */
import { describe, expect, it } from 'vitest';

import type { RunMetrics } from '../src/analysis/run-metrics.js';
import { renderInterference, renderMetrics } from '../src/cli/sim-tables.js';

const metrics: RunMetrics = {
  requests: 125_500,
  failed: 0,
  ttft_s: { p50: 0.88, p90: 7.72, p99: 15.75 },
  tpot_ms: { p50: 7.8, p90: 11.8, p99: 46.9 },
  e2e_s: { p50: 0.04, p90: 0.09, p99: 0.5 },
  apc: 0.786,
  interference_index: 2.82,
  hotspot_index: null,
  instances_per_session: 1,
  preempted_requests: 0,
  per_instance: [],
};

describe('renderMetrics', () => {
  it('gives each latency row the unit that fits it, and scales the counts', () => {
    const lines = renderMetrics({ policy: 'sticky', instances: 8, engineState: 'shadow' }, metrics, 1752).split('\n');
    expect(lines[0]).toBe('sticky · 8 instances · engine state shadow · 125,500 requests · 29.2 min simulated');
    expect(lines[2]).toMatch(/^ {2}TTFT \(s\)\s+0\.88\s+7\.72\s+15\.75$/);
    expect(lines[3]).toMatch(/^ {2}TPOT \(ms\)\s+7\.8\s+11\.8\s+46\.9$/);
    expect(lines[4]).toMatch(/^ {2}E2E \(ms\)\s+40\.0\s+90\.0\s+500\.0$/);
    expect(lines[5]).toContain('interference 2.82 · hotspot - ·');
  });

  it('names a perturbed engine model in the first line', () => {
    const options = {
      policy: 'sticky',
      instances: 8,
      engineState: 'shadow',
      scaling: { prefillCost: 1.3, kvCapacity: 0.5 },
    } as const;
    expect(renderMetrics(options, metrics, 1752).split('\n')[0]).toBe(
      'sticky · 8 instances · engine state shadow · prefill cost ×1.3 · KV capacity ×0.5 · 125,500 requests · 29.2 min simulated',
    );
  });
});

describe('renderInterference', () => {
  it('has a row of units under the header', () => {
    const text = renderInterference([
      { variant: 'same', prefill_tokens: 65_536, n_overlap: 125, n_clean: 115, tpot_index: 1.48, ttft_index: null },
    ]);
    const [head, units, row] = text.split('\n');
    expect(head).toMatch(/^variant\s+prefill\s+overlap\s+clean\s+TPOT idx\s+TTFT idx$/);
    expect(units).toMatch(/^\s+tokens\s+requests\s+requests\s+ratio\s+ratio$/);
    expect(row).toMatch(/^same\s+65536\s+125\s+115\s+1\.48\s+-$/);
  });
});
