/**
 * Naming the offload layer: `<base>+offload`, `v3`, a PolicySpec's `offload` field, and the
 * one-word CLI form, with the errors each mistake gets (naming the field).
 */
import { describe, expect, it } from 'vitest';

import { DEFAULT_OFFLOAD_COST } from '../src/core/offload-cost.js';
import { formatPolicyArg, parsePolicyArg } from '../src/core/policy-arg.js';
import { ALL_POLICY_NAMES, POLICY_NAMES, resolvePolicy, toCorePolicy } from '../src/core/policy-spec.js';
import { Router, type PolicySpec } from '../src/index.js';
import { thrown } from './helpers/routers.js';

describe('policy names with the offload layer', () => {
  it('every base policy has a +offload twin of the same kind and tunables, and v3 is unified+A+B+offload', () => {
    expect(ALL_POLICY_NAMES).toHaveLength(POLICY_NAMES.length * 2 + 1);
    for (const base of POLICY_NAMES) {
      const plain = resolvePolicy(base);
      const layered = resolvePolicy(`${base}+offload`);
      expect(plain.offload).toBeNull();
      expect(layered).toEqual({ ...plain, name: `${base}+offload`, offload: DEFAULT_OFFLOAD_COST });
    }
    expect(resolvePolicy('v3')).toEqual({ ...resolvePolicy('unified+A+B+offload'), name: 'v3' });
    expect(resolvePolicy('v3')).toMatchObject({ kind: 'unified', overloadFactor: 1.3, decodeWeight: 0.01 });
  });

  it('a spec turns the layer on with true or a partial cost model, naming the policy +offload', () => {
    expect(resolvePolicy({ name: 'min_ttft', offload: true })).toMatchObject({
      name: 'min_ttft+offload',
      offload: DEFAULT_OFFLOAD_COST,
    });
    const custom = resolvePolicy({ name: 'v3', offload: { linkGbps: 100, layerwise: true }, overloadFactor: 1.5 });
    expect(custom).toMatchObject({ name: 'v3', overloadFactor: 1.5 });
    expect(custom.offload).toEqual({ ...DEFAULT_OFFLOAD_COST, linkGbps: 100, layerwise: true });
    // The cores take a copy of the model, never the frozen default itself.
    const core = toCorePolicy(resolvePolicy('lmetric+offload'));
    expect(core.offload).toEqual(DEFAULT_OFFLOAD_COST);
    expect(core.offload).not.toBe(DEFAULT_OFFLOAD_COST);
    expect(toCorePolicy(resolvePolicy('lmetric')).offload).toBeNull();
  });

  it.each([
    [
      { name: 'unified+offload+offload' },
      'ERR_KVROUTE_UNKNOWN_POLICY',
      /options\.policy\.name "unified\+offload\+offload" is unknown; known: .*each with \+offload.*v3/,
    ],
    [{ name: 'v4' }, 'ERR_KVROUTE_UNKNOWN_POLICY', /options\.policy\.name "v4" is unknown/],
    [
      { name: 'v3', offload: false },
      'ERR_KVROUTE_INVALID_ARG_TYPE',
      /options\.policy\.offload must be true or an object of offload cost fields/,
    ],
    [{ name: 'unified', offload: 'yes' }, 'ERR_KVROUTE_INVALID_ARG_TYPE', /options\.policy\.offload must be true/],
    [{ name: 'unified', offload: [] }, 'ERR_KVROUTE_INVALID_ARG_TYPE', /options\.policy\.offload must be true/],
    [
      { name: 'unified', offload: { linkGbps: 0 } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.linkGbps must be > 0, got 0/,
    ],
    [
      { name: 'v3', offload: { thresholdTokens: -1 } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.thresholdTokens must be a finite number ≥ 0, got -1/,
    ],
    [
      { name: 'v3', offload: { warmOverheadMs: Infinity } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.warmOverheadMs must be a finite number/,
    ],
    [
      { name: 'v3', offload: { layerwise: 1 } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.layerwise must be true or false, got 1/,
    ],
    [
      { name: 'v3', offload: { chargePrefill: 'yes' } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.chargePrefill must be true or false, got "yes"/,
    ],
    [
      { name: 'v3', offload: { linkGpbs: 10 } },
      'ERR_KVROUTE_INVALID_ARG_VALUE',
      /options\.policy\.offload\.linkGpbs must be absent \(not an offload cost field\)/,
    ],
  ])('refuses %j with %s', (policy, code, message) => {
    const error = thrown(() => new Router({ instances: 2, policy: policy as PolicySpec }));
    expect(error.code).toBe(code);
    expect(error.message).toMatch(message);
  });

  it('setPolicy switches the layer on and off live, and stats() reports it', () => {
    const router = new Router({ instances: 2, policy: 'unified' });
    router.setPolicy('unified+offload');
    expect(router.stats().policy).toMatchObject({ name: 'unified+offload', offload: DEFAULT_OFFLOAD_COST });
    router.route({ inputTokens: 5000 });
    expect(router.decision.offload.outcome).toBe('not_decoding');
    router.setPolicy('unified');
    router.route({ inputTokens: 5000 });
    expect(router.decision.offload.outcome).toBe('off');
    expect(thrown(() => router.setPolicy({ name: 'unified', offload: { chunkTokens: 0 } })).message).toMatch(
      /policy\.offload\.chunkTokens must be > 0/,
    );
    expect(router.policy.name).toBe('unified');
  });
});

describe('the one-word form', () => {
  it('takes the layered names, their base tunables and the offload cost fields, and formats back', () => {
    expect(parsePolicyArg('v3', '--policy')).toBe('v3');
    expect(parsePolicyArg('min_ttft+offload', '--policy')).toBe('min_ttft+offload');
    const spec = parsePolicyArg('v3:overloadFactor=1.5:linkGbps=100:layerwise=true:coldPenaltyMs=0', '--policy');
    expect(spec).toEqual({
      name: 'v3',
      overloadFactor: 1.5,
      offload: { linkGbps: 100, layerwise: true, coldPenaltyMs: 0 },
    });
    expect(parsePolicyArg(formatPolicyArg(spec), '--policy')).toEqual(spec);
    const charged = parsePolicyArg('unified+A+B+offload:chargePrefill=true', '--policy');
    expect(charged).toEqual({ name: 'unified+A+B+offload', offload: { chargePrefill: true } });
    expect(formatPolicyArg(charged)).toBe('unified+A+B+offload:chargePrefill=true');
    expect(resolvePolicy({ name: 'min_ttft', offload: { chargePrefill: true } }).offload).toEqual({
      ...DEFAULT_OFFLOAD_COST,
      chargePrefill: true,
    });
    expect(formatPolicyArg({ name: 'lmetric', offload: true })).toBe('lmetric+offload');
    expect(formatPolicyArg({ name: 'lmetric', offload: { thresholdTokens: 500 } })).toBe(
      'lmetric+offload:thresholdTokens=500',
    );
  });

  it.each([
    ['nope+offload', /--policy must be one of .*each with \+offload/],
    ['unified:linkGbps=10', /--policy must be a tunable unified reads .*got "linkGbps"/],
    ['unified+offload:linkgbps=10', /did you mean linkGbps\?/],
    ['v3:layerwise=yes', /--policy layerwise must be true or false, got "yes"/],
    ['min_ttft+offload:chargePrefill=1', /--policy chargePrefill must be true or false, got "1"/],
    ['min_ttft:chargePrefill=true', /--policy must be a tunable min_ttft reads .*got "chargePrefill"/],
    ['v3:linkGbps=0', /--policy\.offload\.linkGbps must be > 0, got 0/],
    ['v3:linkGbps=1:linkGbps=2', /--policy must be each tunable once/],
  ])('refuses %s, naming the field', (text, message) => {
    expect(() => parsePolicyArg(text, '--policy')).toThrow(message);
  });
});
