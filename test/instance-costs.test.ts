/**
 * min_ttft's per-instance prices on the public Router (docs/policies.md "Learned costs"):
 * setDefaultCosts / setInstanceCosts / instanceCosts / setReturningTokens, on both cores. The
 * randomized agreement of the two cores under pushed costs is in differential.test.ts.
 */
import { describe, expect, it } from 'vitest';

import { Router, type RoutingCosts } from '../src/index.js';
import { IMPLEMENTATIONS, thrown } from './helpers/routers.js';

const chain = (from: number, n: number) => Array.from({ length: n }, (_, k) => from + k);
const PRESET: RoutingCosts = { prefillSecondsPerToken: 4.5e-5, prefillOverheadSeconds: 0.035, interference: 0.2 };
const TWICE_AS_FAST: RoutingCosts = { ...PRESET, prefillSecondsPerToken: PRESET.prefillSecondsPerToken / 2 };

describe.each(IMPLEMENTATIONS)('instance costs ($impl)', ({ native }) => {
  const make = (instances: string[] = ['slow', 'fast']) =>
    new Router({ instances, policy: 'min_ttft', native, clock: 'manual', blockSize: 16, capacityBlocks: 10_000 });

  it('without costs, every instance is priced in token-equivalents with the policy batchWeight', () => {
    const r = make();
    expect(r.instanceCosts('slow')).toEqual({ costs: null, source: 'none' });
    r.explain({ hashIds: chain(1, 10), inputTokens: 160 });
    const e = r.explain({ hashIds: chain(1, 10), inputTokens: 160 });
    for (const c of e.candidates)
      expect(c.terms).toMatchObject({ prefillSecondsPerToken: 1, prefillOverheadSeconds: 0, interference: 0.2 });
  });

  it('scores in predicted seconds, so a busy fast instance beats an idle slow one it should beat', () => {
    const r = make();
    // Load the fast instance with one 1,000-token prefill first (pinned there by costs alone).
    r.setDefaultCosts(PRESET);
    r.setInstanceCosts('fast', TWICE_AS_FAST);
    r.route({ hashIds: chain(1, 62), inputTokens: 1000 });
    expect(r.decision.instance).toBe('fast');
    // A 4,000-token request: on `slow`, 0.035 + 4.5e-5 × 4,000 × 1 ≈ 0.215 s; on `fast`, with
    // 1,000 queued and one request there, 0.035 + 2.25e-5 × 5,000 × 1.2 ≈ 0.17 s.
    const e = r.explain({ hashIds: chain(1000, 250), inputTokens: 4000 });
    expect(e.instance).toBe('fast');
    const score = (name: string) => e.candidates.find((c) => c.instance === name)!.score!;
    expect(score('fast')).toBeLessThan(score('slow'));
    expect(score('slow')).toBeCloseTo(0.035 + 4.5e-5 * 4000 * (1 + 1.213e-4 * 2000), 6);
    // Without costs, the same state goes to the idle instance.
    r.setDefaultCosts(null);
    r.setInstanceCosts('fast', null);
    expect(r.explain({ hashIds: chain(1000, 250), inputTokens: 4000 }).instance).toBe('slow');
  });

  it('an instance without costs of its own follows the fleet default, new instances included', () => {
    const r = make();
    r.setInstanceCosts('fast', TWICE_AS_FAST);
    r.setDefaultCosts(PRESET);
    expect(r.instanceCosts('slow')).toEqual({ costs: PRESET, source: 'default' });
    expect(r.instanceCosts('fast')).toEqual({ costs: TWICE_AS_FAST, source: 'instance' });
    r.addInstance('late');
    expect(r.instanceCosts('late')).toEqual({ costs: PRESET, source: 'default' });
    const late = r.explain({ hashIds: chain(1, 4) }).candidates.find((c) => c.instance === 'late')!;
    expect(late.terms!.prefillSecondsPerToken).toBe(PRESET.prefillSecondsPerToken);
    r.setInstanceCosts('fast', null);
    expect(r.instanceCosts('fast')).toEqual({ costs: PRESET, source: 'default' });
    // A removed instance's costs go with it: the same id added again starts from the default.
    r.setInstanceCosts('late', TWICE_AS_FAST);
    r.removeInstance('late');
    r.addInstance('late');
    expect(r.instanceCosts('late').source).toBe('default');
  });

  it("costs without an interference use the policy's batchWeight, following setPolicy", () => {
    const r = make();
    r.setDefaultCosts({ prefillSecondsPerToken: 4.5e-5, prefillOverheadSeconds: 0.035 });
    expect(r.instanceCosts('slow').costs).toEqual({ prefillSecondsPerToken: 4.5e-5, prefillOverheadSeconds: 0.035 });
    const interference = () => r.explain({ hashIds: chain(1, 4) }).candidates[0]!.terms!.interference;
    expect(interference()).toBe(0.2);
    r.setPolicy({ name: 'min_ttft', batchWeight: 0.5 });
    expect(interference()).toBe(0.5);
  });

  it('returning tokens count as queued prefill on their instance', () => {
    const r = make(['a', 'b']);
    const request = { hashIds: chain(1, 10), inputTokens: 160 };
    const before = r.explain(request);
    const slot = before.instance!;
    r.setReturningTokens(slot, 50_000);
    const after = r.explain(request);
    expect(after.instance).not.toBe(slot);
    const held = after.candidates.find((c) => c.instance === slot)!;
    expect(held.terms!.returningTokens).toBe(50_000);
    expect(held.score!).toBeGreaterThan(50_000);
    r.setReturningTokens(slot, 0);
    expect(r.explain(request).instance).toBe(slot);
  });

  it('refuses bad costs and returning tokens, naming the field, and changes nothing', () => {
    const r = make();
    r.setInstanceCosts('fast', TWICE_AS_FAST);
    const bad: Array<[unknown, string]> = [
      [{ ...PRESET, prefillSecondsPerToken: 0 }, 'costs.prefillSecondsPerToken'],
      [{ ...PRESET, prefillSecondsPerToken: Infinity }, 'costs.prefillSecondsPerToken'],
      [{ ...PRESET, prefillOverheadSeconds: -1 }, 'costs.prefillOverheadSeconds'],
      [{ ...PRESET, interference: NaN }, 'costs.interference'],
      [{ ...PRESET, interference: '0.2' }, 'costs.interference'],
      ['fast', 'costs'],
    ];
    for (const [costs, field] of bad) {
      expect(thrown(() => r.setInstanceCosts('fast', costs as RoutingCosts)).message).toContain(field);
      expect(thrown(() => r.setDefaultCosts(costs as RoutingCosts)).message).toContain(field);
    }
    expect(r.instanceCosts('fast')).toEqual({ costs: TWICE_AS_FAST, source: 'instance' });
    expect(r.instanceCosts('slow')).toEqual({ costs: null, source: 'none' });
    expect(thrown(() => r.setInstanceCosts('nobody', PRESET)).code).toBe('ERR_KVROUTE_UNKNOWN_INSTANCE');
    for (const tokens of [-1, NaN, Infinity, '5'])
      expect(thrown(() => r.setReturningTokens('fast', tokens as number)).message).toMatch(/^tokens /);
  });
});
