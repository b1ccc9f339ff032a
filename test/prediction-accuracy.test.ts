/**
 * Predicted cached tokens: vLLM's rule (predictCachedTokens), the router's decision on both cores
 * (randomized, against the rule applied to explain()'s matched blocks), and the prediction
 * statistics of analyze run on hand-built records (exact, MAE, over/under, lost APC).
 */
import { describe, expect, it } from 'vitest';

import { predictionAccuracy } from '../src/analysis/prediction-accuracy.js';
import { predictCachedTokens } from '../src/core/predicted-cached.js';
import { Router } from '../src/index.js';
import type { RequestRecord } from '../src/trace/records.js';
import { Rng } from './helpers/random.js';
import { IMPLEMENTATIONS, twins } from './helpers/routers.js';

describe('predictCachedTokens: vLLM rule', () => {
  it('counts matched blocks in full, but never the whole prompt', () => {
    expect(predictCachedTokens(4, 16, 100)).toBe(64); // 4 blocks of a 100-token prompt: all count
    expect(predictCachedTokens(7, 16, 100)).toBe(96); // at most floor(99 / 16) = 6 blocks
    expect(predictCachedTokens(4, 16, 64)).toBe(48); // a whole 4-block prompt: the last block recomputed
    expect(predictCachedTokens(4, 16, 65)).toBe(64);
    expect(predictCachedTokens(1, 16, 16)).toBe(0);
    expect(predictCachedTokens(3, 16, 0)).toBe(0);
  });

  it('caps at matched × blockTokens when the prompt length is unknown (NaN)', () => {
    expect(predictCachedTokens(4, 16, NaN)).toBe(64);
    expect(predictCachedTokens(3, 512, NaN)).toBe(1536);
  });

  it('is 0 without a match (none, or -1 for a removed slot), and floors fractional block sizes', () => {
    expect(predictCachedTokens(0, 16, 1000)).toBe(0);
    expect(predictCachedTokens(-1, 16, 1000)).toBe(0);
    expect(predictCachedTokens(3, 32.5, NaN)).toBe(97);
    expect(predictCachedTokens(3, 32.5, 80)).toBe(65); // floor(79 / 32.5) = 2 blocks
  });
});

const chain = (from: number, count: number): number[] => Array.from({ length: count }, (_, i) => from + i);

describe.each(IMPLEMENTATIONS)('router.decision.predictedCachedTokens ($impl)', ({ native }) => {
  it("is the chosen instance's matched blocks by the rule, with the request's block tokens", () => {
    const r = new Router({ instances: 2, policy: 'sticky', blockSize: 16, native });
    r.route({ hashIds: chain(1, 8), session: 'a', inputTokens: 125 });
    expect(r.decision.predictedCachedTokens).toBe(0);
    const chosen = r.decision.instance;
    r.route({ hashIds: chain(1, 12), session: 'a', inputTokens: 190 });
    expect(r.decision.instance).toBe(chosen);
    expect(r.decision.predictedCachedTokens).toBe(8 * 16);
    // The same prompt again: all 12 blocks match, but vLLM recomputes the last block.
    r.route({ hashIds: chain(1, 12), session: 'a', inputTokens: 192 });
    expect(r.decision.predictedCachedTokens).toBe(11 * 16);
    // No inputTokens: the count is unknown, so the cap is matched × blockSize.
    r.route({ hashIds: chain(1, 12), session: 'a' });
    expect(r.decision.predictedCachedTokens).toBe(12 * 16);
    // blockTokens overrides blockSize for one request.
    r.route({ hashIds: chain(1, 12), session: 'a', blockTokens: 512, inputTokens: 100_000 });
    expect(r.decision.predictedCachedTokens).toBe(12 * 512);
    // A dry run is a decision too; match() leaves the last one alone.
    r.explain({ hashIds: chain(1, 4), session: 'a', inputTokens: 1000 });
    expect(r.decision.predictedCachedTokens).toBe(4 * 16);
    r.match({ hashIds: chain(1, 12) });
    expect(r.decision.predictedCachedTokens).toBe(4 * 16);
  });

  it('uses chunkBytes / 4 tokens per block for prompt text', () => {
    const r = new Router({ instances: 1, hashChunkBytes: 128, native });
    const text = 'x'.repeat(128 * 5 + 17);
    r.route({ prompt: text });
    expect(r.decision.predictedCachedTokens).toBe(0);
    r.route({ prompt: text });
    expect(r.decision.predictedCachedTokens).toBe(6 * 32); // 6 chunks (the last partial), count unknown
    r.route({ prompt: text, inputTokens: Math.ceil(text.length / 4) });
    expect(r.decision.predictedCachedTokens).toBe(5 * 32); // floor((165 - 1) / 32) = 5
  });

  it('survives an addInstance that grows the explain buffers', () => {
    const r = new Router({ instances: 1, native });
    r.route({ hashIds: chain(1, 4), inputTokens: 100 });
    r.route({ hashIds: chain(1, 4), inputTokens: 100 });
    expect(r.decision.predictedCachedTokens).toBe(64);
    for (let k = 0; k < 20; k++) r.addInstance(`extra-${k}`);
    expect(r.decision.predictedCachedTokens).toBe(64);
  });
});

describe('router.decision.predictedCachedTokens, randomized', () => {
  it('equals the rule over explain() on both cores, and the cores agree', () => {
    const rng = new Rng(17);
    let hits = 0;
    let capped = 0;
    for (let round = 0; round < 6; round++) {
      const blockSize = rng.pick([16, 64, 512]);
      const { native, reference } = twins({
        instances: rng.int(1, 5),
        policy: rng.pick(['unified+A+B', 'min_ttft', 'round_robin', 'sticky'] as const),
        blockSize,
        capacityBlocks: rng.int(20, 400),
      });
      const history = new Map<number, number[]>();
      const open: Array<[number, number]> = [];
      for (let k = 0; k < 300; k++) {
        const session = rng.int(0, 11);
        const ids = [...(history.get(session) ?? [])];
        // Some turns resend the same prompt (a retry): a full match, which the prompt length caps.
        for (let add = ids.length > 0 && rng.chance(0.2) ? 0 : rng.int(1, 6); add > 0; add--)
          ids.push(session * 100_000 + ids.length);
        history.set(session, ids);
        const request = {
          hashIds: ids,
          session: `s${session}`,
          ...(rng.chance(0.8) ? { inputTokens: (ids.length - 1) * blockSize + rng.int(0, blockSize) } : {}),
          ...(rng.chance(0.1) ? { blockTokens: rng.int(1, 40) } : {}),
        };
        const tickets: [number, number] = [native.route(request), reference.route(request)];
        const predicted = native.decision.predictedCachedTokens;
        expect(reference.decision.predictedCachedTokens).toBe(predicted);
        const chosen = native.explain().candidates.find((c) => c.index === native.decision.index)!;
        const bt = request.blockTokens ?? blockSize;
        expect(predicted).toBe(predictCachedTokens(chosen.matchedBlocks, bt, request.inputTokens ?? NaN));
        expect(predicted).toBeLessThanOrEqual(chosen.matchedBlocks * bt);
        if (predicted > 0) hits++;
        if (predicted > 0 && predicted < chosen.matchedBlocks * bt) capped++;
        if (request.inputTokens !== undefined) expect(predicted).toBeLessThan(Math.max(1, request.inputTokens));
        open.push(tickets);
        if (open.length > 4) {
          const [a, b] = open.shift()!;
          native.complete(a);
          reference.complete(b);
        }
      }
    }
    // The generator exercises both: matches, and matches the prompt length caps.
    expect(hits).toBeGreaterThan(500);
    expect(capped).toBeGreaterThan(20);
  });
});

/** A successful record with the given prompt, engine-cached and predicted tokens. */
function record(input: number, cached: number, predicted: number | null | undefined, extra = {}): RequestRecord {
  const r: RequestRecord = {
    session: 's',
    turn: 1,
    instance: 0,
    dispatch: 0,
    first_token: 1,
    finish: 2,
    input_tokens: input,
    cached_tokens: cached,
    output_tokens: 4,
    overlapped: false,
    preemptions: 0,
    ...extra,
  };
  if (predicted !== undefined) r.predicted_cached_tokens = predicted;
  return r;
}

describe('predictionAccuracy', () => {
  it('exact share, MAE, the over/under split and the APC lost, on hand-built records', () => {
    const p = predictionAccuracy([
      record(1000, 512, 512), // exact
      record(1000, 0, 0), // exact
      record(2000, 256, 768), // over by 512: expected, not there
      record(1000, 640, 384), // under by 256: there, not expected
      record(500, 0, null), // a target without the header
      record(4000, 0, 4000, { status: 503, error: 'HTTP 503: down' }), // failed: not counted
      record(800, 0, undefined), // an older file: absent reads as null
    ])!;
    expect(p).toEqual({
      requests: 4,
      without_prediction: 2,
      exact: 2,
      exact_fraction: 0.5,
      mae_tokens: (512 + 256) / 4,
      over: { requests: 1, tokens: 512 },
      under: { requests: 1, tokens: 256 },
      input_tokens: 5000,
      predicted_apc: (512 + 768 + 384) / 5000,
      actual_apc: (512 + 256 + 640) / 5000,
      lost_apc: 512 / 5000,
      unpredicted_apc: 256 / 5000,
    });
  });

  it('is null when no successful record carries a prediction', () => {
    expect(predictionAccuracy([])).toBeNull();
    expect(predictionAccuracy([record(100, 0, null), record(100, 0, undefined)])).toBeNull();
    expect(predictionAccuracy([record(100, 0, 16, { status: 500, error: 'HTTP 500: x' })])).toBeNull();
  });

  it('predicted − lost + unpredicted = actual APC, and MAE = (over + under tokens) ÷ requests (randomized)', () => {
    const rng = new Rng(3);
    for (let round = 0; round < 20; round++) {
      const records = Array.from({ length: rng.int(1, 200) }, () => {
        const input = rng.int(0, 50_000);
        const cached = rng.int(0, input);
        const predicted = rng.chance(0.5) ? cached : rng.int(0, input);
        return record(input, cached, rng.chance(0.1) ? null : predicted);
      });
      const p = predictionAccuracy(records);
      if (p === null) continue;
      expect(p.exact + p.over.requests + p.under.requests).toBe(p.requests);
      expect(p.requests + p.without_prediction).toBe(records.length);
      expect(p.mae_tokens).toBeCloseTo((p.over.tokens + p.under.tokens) / p.requests, 9);
      expect(p.predicted_apc - p.lost_apc + p.unpredicted_apc).toBeCloseTo(p.actual_apc, 12);
    }
  });
});
