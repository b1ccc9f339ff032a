/**
 * The engine model's side of a P→D KV transfer (docs/offload.md): a prefill for a remote decode
 * holds its blocks until released; a transferred request is admitted holding its prompt as
 * cached, decodes its first token in the admitting step (priced as a decode, no prefill chunk),
 * and leaves its full blocks cached on the decode instance; and the link's timing (warm, cold,
 * layer-wise) is the shared cost model's.
 */
import { describe, expect, it } from 'vitest';

import { DEFAULT_OFFLOAD_COST, transferMs, wireMs } from '../src/core/offload-cost.js';
import { EngineModel, type EngineRequest } from '../src/sim/engine-model.js';
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, stepMs } from '../src/sim/engine-preset.js';
import { KvTransferLink } from '../src/sim/kv-transfer.js';
import { runUntil } from './helpers/engine-steps.js';

const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
const BLOCK = 16;
let nextId = 1;

function ids(blocks: number): number[] {
  return Array.from({ length: blocks }, () => nextId++);
}

function request(inputLength: number, outputLength: number, hashIds?: number[], extra: Partial<EngineRequest> = {}) {
  return {
    id: nextId++,
    hashIds: hashIds ?? ids(Math.ceil(inputLength / BLOCK)),
    inputLength,
    outputLength,
    ...extra,
  } satisfies EngineRequest;
}

describe('a prefill for a remote decode (holdBlocks)', () => {
  it('keeps its blocks referenced after its one token, until releaseHeld caches its full blocks', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const prompt = ids(128); // 2,048 tokens, 128 full blocks
    const prefill = engine.submit(request(2048, 1, prompt, { holdBlocks: true }), 0);
    const steps = runUntil(engine, () => prefill.finishedAt !== undefined);
    expect(steps.at(-1)!.finished).toEqual([prefill]);
    expect(prefill.firstTokenAt).toBe(prefill.finishedAt);
    expect(engine.idle).toBe(true); // out of the running and waiting queues
    expect(engine.heldRequests).toBe(1);
    expect(engine.state()).toMatchObject({ running: 0, waiting: 0, kvBlocksUsed: 128 });
    expect(engine.pool.cached).toBe(0);

    expect(engine.releaseHeld(prefill)).toBe(true);
    expect(engine.releaseHeld(prefill)).toBe(false);
    expect(engine.heldRequests).toBe(0);
    expect(engine.pool.referenced).toBe(0);
    expect(engine.pool.cached).toBe(128);
    // A request for the same prompt now hits all but its last token's block.
    const again = engine.submit(request(2048, 1, prompt), steps.at(-1)!.end);
    runUntil(engine, () => again.finishedAt !== undefined, steps.at(-1)!.end);
    expect(again.cachedTokens).toBe(2032);
  });

  it('abort releases held blocks too', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const prefill = engine.submit(request(100, 1, undefined, { holdBlocks: true }), 0);
    runUntil(engine, () => prefill.finishedAt !== undefined);
    expect(engine.pool.referenced).toBe(7);
    expect(engine.abort(prefill)).toBe(true);
    expect(engine.pool.referenced).toBe(0);
    expect(engine.heldRequests).toBe(0);
  });

  it('a request short of blocks that only held ones could free makes step() return nothing until releaseHeld', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK, capacityBlocks: 10 });
    const prefill = engine.submit(request(128, 1, undefined, { holdBlocks: true }), 0); // 8 blocks, held
    const steps = runUntil(engine, () => prefill.finishedAt !== undefined);
    const now = steps.at(-1)!.end;
    const waiting = engine.submit(request(100, 1), now); // 7 blocks: more than the 2 not held
    expect(engine.step(now)).toBeUndefined(); // not a zero-length step a caller would spin on
    expect(engine.step(now)).toBeUndefined();
    expect(engine.state()).toMatchObject({ running: 0, waiting: 1 });
    engine.releaseHeld(prefill);
    runUntil(engine, () => waiting.finishedAt !== undefined, now);
    expect(waiting.firstTokenAt).toBeGreaterThan(now);
  });

  it('a request without holdBlocks frees its blocks at the finish, as before', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const plain = engine.submit(request(100, 1), 0);
    runUntil(engine, () => plain.finishedAt !== undefined);
    expect(engine.pool.referenced).toBe(0);
    expect(engine.releaseHeld(plain)).toBe(false);
  });
});

describe('a transferred admission on the decode instance', () => {
  it('counts as decoding while waiting, then decodes its first token in the admitting step at decode cost', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const prompt = ids(512); // 8,192 tokens
    const arriving = engine.submit(request(8192, 4, prompt, { transferred: true }), 1.5);
    expect(engine.state()).toMatchObject({ waiting: 1, decodeBatch: 1, pendingPrefillTokens: 0 });
    const first = engine.step(1.5)!;
    expect(first.prefillTokens).toBe(0);
    expect(first.decodes).toBe(1);
    expect(first.firstTokens).toEqual([arriving]);
    // One decode step reading the 8,191 tokens of KV it holds: no prefill chunk, no prefill overhead.
    expect((first.end - first.start) * 1000).toBeCloseTo(stepMs(preset, [], 1, 8191), 9);
    expect(arriving.firstTokenAt).toBe(first.end);
    expect(arriving.cachedTokens).toBe(0);
    expect(arriving.transferredTokens).toBe(8191);
    runUntil(engine, () => arriving.finishedAt !== undefined, first.end);
    expect(arriving.generated).toBe(4);
    // Its full prompt blocks stay cached here: the next turn hits them.
    expect(engine.pool.cached).toBe(512);
    const next = engine.submit(request(8192 + 100, 1, [...prompt, ...ids(7)]), 10);
    runUntil(engine, () => next.finishedAt !== undefined, 10);
    expect(next.cachedTokens).toBe(8192);
  });

  it('takes its own cached prefix first: only the rest counts as transferred', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const prompt = ids(200); // 3,200 tokens
    const earlier = engine.submit(request(1600, 1, prompt.slice(0, 100)), 0);
    const steps = runUntil(engine, () => earlier.finishedAt !== undefined);
    const now = steps.at(-1)!.end;
    expect(engine.lackedTokens({ hashIds: prompt, inputLength: 3200 })).toBe(1600);
    const arriving = engine.submit(request(3200, 2, prompt, { transferred: true }), now);
    runUntil(engine, () => arriving.finishedAt !== undefined, now);
    expect(arriving.cachedTokens).toBe(1600);
    expect(arriving.transferredTokens).toBe(3200 - 1 - 1600);
    expect(engine.counters.prefixHits).toBe(1600);
  });

  it('joins running decodes without charging them a prefill step', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const decoding = [engine.submit(request(64, 100), 0), engine.submit(request(64, 100), 0)];
    const now = runUntil(engine, () => decoding.every((s) => s.generated >= 3)).at(-1)!.end;
    const context = decoding.reduce((sum, s) => sum + s.computed, 0);
    const arriving = engine.submit(request(2048, 5, undefined, { transferred: true }), now);
    const step = engine.step(now)!;
    expect(step.prefillTokens).toBe(0);
    expect(step.decodes).toBe(3);
    expect(step.firstTokens).toEqual([arriving]);
    expect((step.end - step.start) * 1000).toBeCloseTo(stepMs(preset, [], 3, context + 2047), 9);
    expect(decoding.every((s) => !s.decodeOverlappedPrefill)).toBe(true);
  });

  it('waits for blocks when the pool is full, and is admitted once they free', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK, capacityBlocks: 20 });
    const big = engine.submit(request(200, 60), 0); // 13 blocks, growing to 17
    runUntil(engine, () => big.generated >= 1);
    const arriving = engine.submit(request(160, 2, undefined, { transferred: true }), 1); // needs 10 blocks
    const steps = runUntil(engine, () => arriving.firstTokenAt !== undefined, 1);
    expect(arriving.firstTokenAt!).toBeGreaterThanOrEqual(big.finishedAt!);
    expect(steps.some((s) => s.decodes === 1 && s.firstTokens.length === 0)).toBe(true);
    expect(arriving.transferredTokens).toBe(159);
  });

  it('recomputes locally after a preemption, like any request', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK, capacityBlocks: 24 });
    const other = engine.submit(request(150, 200), 0); // 10 blocks, growing
    const arriving = engine.submit(request(160, 120, undefined, { transferred: true }), 0); // 10 → 18 blocks, the newest
    const steps = runUntil(engine, () => arriving.finishedAt !== undefined && other.finishedAt !== undefined);
    expect(arriving.preemptions).toBeGreaterThan(0);
    expect(other.preemptions).toBe(0);
    // Re-admitted as an ordinary request: a prefill chunk recomputes it (its full blocks hit the cache).
    const back = steps.findIndex((s) => s.preempted.includes(arriving));
    expect(steps.slice(back + 1).some((s) => s.prefillTokens > 0)).toBe(true);
    expect(arriving.generated).toBe(120);
    expect(arriving.transferredTokens).toBe(159);
    expect(arriving.cachedTokens).toBe(0);
  });
});

describe('KvTransferLink: the shared cost model, cold on a pair’s first use', () => {
  it('charges transferMs: cold first, warm after, per ordered pair', () => {
    const link = new KvTransferLink();
    const cold = link.transfer(1, 0, 8192);
    expect(cold).toEqual({ ms: transferMs(DEFAULT_OFFLOAD_COST, 8192, true), cold: true });
    expect(cold.ms).toBeCloseTo((8192 * 98_304 * 8) / 25e6 + 35 + 140, 9);
    expect(link.transfer(1, 0, 8192)).toEqual({ ms: transferMs(DEFAULT_OFFLOAD_COST, 8192, false), cold: false });
    expect(link.isCold(0, 1)).toBe(true);
    expect(link.transfer(0, 1, 0).cold).toBe(true);
    expect(link.pairs).toBe(2);
  });

  it('layer-wise exposes one layer of the wire time; a bad model names its field', () => {
    const link = new KvTransferLink({ layerwise: true, linkGbps: 100 });
    const model = { ...DEFAULT_OFFLOAD_COST, layerwise: true, linkGbps: 100 };
    expect(link.transfer('a', 'b', 32768).ms).toBeCloseTo(wireMs(model, 32768) + 35 + 140, 9);
    expect(wireMs(model, 32768)).toBeCloseTo((32768 * 98_304 * 8) / 100e6 / 48, 9);
    expect(() => new KvTransferLink({ linkGbps: 0 })).toThrow(/transferCost\.linkGbps/);
  });
});
