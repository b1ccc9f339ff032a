/**
 * The engine model: timings within ±15% of every calibration point of the B2 microbenchmark
 * (one H20, Qwen3-Coder-30B-A3B), prefix caching with LRU eviction, recompute preemption, and
 * live state.
 */
import { describe, expect, it } from 'vitest';

import { Rng } from './helpers/random.js';
import { BlockPool } from '../src/sim/block-pool.js';
import {
  DEFAULT_ENGINE_PRESET,
  ENGINE_PRESETS,
  capacityBlocks,
  decodeStepsMsAtLeast,
  stepMs,
} from '../src/sim/engine-preset.js';
import { EngineModel, type EngineRequest, type Sequence } from '../src/sim/engine-model.js';
import { interferenceTable } from '../src/sim/interference-bench.js';
import { runUntil } from './helpers/engine-steps.js';

const preset = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET]!;
const BLOCK = 16;
let nextId = 1;

/** A request whose prompt blocks have fresh ids (or the given ones). */
function request(inputLength: number, outputLength: number, ids?: number[]): EngineRequest {
  const hashIds = ids ?? Array.from({ length: Math.ceil(inputLength / BLOCK) }, () => nextId++);
  return { id: nextId++, hashIds, inputLength, outputLength };
}

function within(actual: number, target: number, tolerance = 0.15): void {
  expect(actual, `${actual} vs ${target}`).toBeGreaterThanOrEqual(target * (1 - tolerance));
  expect(actual, `${actual} vs ${target}`).toBeLessThanOrEqual(target * (1 + tolerance));
}

describe('engine timing (seeds microbench, ±15%)', () => {
  it.each([
    [2048, 139],
    [8192, 589],
    [16384, 1544],
    [32768, 4575],
  ])('an isolated %i-token prefill takes %i ms to its first token', (tokens, ms) => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const sequence = engine.submit(request(tokens, 1), 0);
    runUntil(engine, () => sequence.firstTokenAt !== undefined);
    within(sequence.firstTokenAt! * 1000, ms);
    expect(sequence.cachedTokens).toBe(0);
  });

  it.each([
    [1, 6.0],
    [8, 9.3],
  ])('decode TPOT at batch %i is %f ms', (batch, ms) => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const sequences = Array.from({ length: batch }, () => engine.submit(request(64, 50), 0));
    const steps = runUntil(engine, () => sequences.every((s) => s.generated >= 10));
    const decodeOnly = steps.filter((s) => s.prefillTokens === 0);
    expect(decodeOnly.length).toBeGreaterThan(5);
    for (const step of decodeOnly) {
      expect(step.decodes).toBe(batch);
      within((step.end - step.start) * 1000, ms);
    }
  });

  it('a step with an 8,192-token chunk takes ~580 ms, and co-located decodes emit one token in it', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const decoding = Array.from({ length: 4 }, () => engine.submit(request(64, 1000), 0));
    const now = runUntil(engine, () => decoding.every((s) => s.generated >= 3)).at(-1)!.end;
    const before = decoding.map((s) => s.generated);
    const big = engine.submit(request(32768, 1), now);
    const steps = runUntil(engine, () => big.firstTokenAt !== undefined, now);
    // The decodes' tokens count against the 8,192-token budget, as in vLLM: chunks of 8,188, and a
    // fifth step for the remainder.
    const chunkSteps = steps.filter((s) => s.prefillTokens === 8192 - 4);
    expect(chunkSteps).toHaveLength(4);
    expect(steps).toHaveLength(5);
    within((chunkSteps[0]!.end - chunkSteps[0]!.start) * 1000, 580);
    decoding.forEach((s, k) => expect(s.generated - before[k]!).toBe(steps.length));
    expect(decoding.every((s) => s.decodeOverlappedPrefill)).toBe(true);
    // Prefill compute does not depend on the decodes beside it (the reference experiments' observation 3).
    within((big.firstTokenAt! - big.submittedAt) * 1000, 4575);
  });
});

describe('prefix cache', () => {
  it('serves a repeated prompt from cache, leaving the last token to compute', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const ids = Array.from({ length: 63 }, (_, i) => 10_000 + i); // 1,000 tokens: 62 full blocks
    const first = engine.submit(request(1000, 2, ids), 0);
    runUntil(engine, () => first.finishedAt !== undefined);
    const again = engine.submit(request(1000, 2, ids), 10);
    runUntil(engine, () => again.finishedAt !== undefined, 10);
    expect(first.cachedTokens).toBe(0);
    expect(again.cachedTokens).toBe(62 * BLOCK);
    expect(again.firstTokenAt! - again.submittedAt).toBeLessThan(first.firstTokenAt! - first.submittedAt);
    // An exact repeat of whole blocks still computes its last block.
    const whole = engine.submit(request(992, 1, ids.slice(0, 62)), 20);
    runUntil(engine, () => whole.finishedAt !== undefined, 20);
    expect(whole.cachedTokens).toBe(61 * BLOCK);
    expect(engine.counters.prefixHits).toBe(62 * BLOCK + 61 * BLOCK);
    expect(engine.pool.referenced).toBe(0);
  });

  it('evicts the least recently freed blocks first, never a running request’s', () => {
    const pool = new BlockPool(10);
    const hold = (ids: number[]) => {
      expect(pool.allocate(ids.length)).toBe(true);
      return ids.map((id) => pool.register(id)!);
    };
    const a = hold([1, 2, 3]);
    const b = hold([4, 5, 6]);
    for (const block of a) pool.release(block); // A cached first (oldest)
    for (const block of b) pool.release(block);
    expect(pool.cached).toBe(6);
    const c = hold([7, 8, 9, 10, 11, 12]); // 4 free + 2 evicted: A's 1 and 2
    expect(pool.evictions).toBe(2);
    expect(pool.matchPrefix([1, 2, 3])).toBe(0);
    expect(pool.matchPrefix([4, 5, 6])).toBe(3);
    // Referenced blocks are not available: 6 held by C, 4 cached.
    expect(pool.available).toBe(4);
    expect(pool.allocate(5)).toBe(false);
    expect(pool.referenced).toBe(6);
    for (const block of c) pool.release(block);
    // Re-using a cached block makes it unevictable until released again.
    pool.acquire(4);
    expect(pool.allocate(9)).toBe(true);
    expect(pool.matchPrefix([4])).toBe(1);
  });
});

/** The pool's contract as plain Maps: id → refs, and cached ids in eviction order. */
class ReferencePool {
  readonly refs = new Map<number, number>();
  readonly lru = new Map<number, true>();
  referenced = 0;
  evictions = 0;
  constructor(readonly capacity: number) {}
  allocate(count: number): boolean {
    if (count > this.capacity - this.referenced) return false;
    let free = this.capacity - this.referenced - this.lru.size;
    for (const [id] of this.lru) {
      if (free >= count) break;
      this.lru.delete(id);
      this.refs.delete(id);
      this.evictions++;
      free++;
    }
    this.referenced += count;
    return true;
  }
  register(id: number): boolean {
    if (this.refs.has(id)) return false;
    this.refs.set(id, 1);
    return true;
  }
  acquire(id: number): void {
    const refs = this.refs.get(id)!;
    if (refs === 0) {
      this.lru.delete(id);
      this.referenced++;
    }
    this.refs.set(id, refs + 1);
  }
  release(id: number): void {
    const refs = this.refs.get(id)! - 1;
    this.refs.set(id, refs);
    if (refs === 0) {
      this.referenced--;
      this.lru.set(id, true);
    }
  }
}

describe('block pool against a Map model', () => {
  it('agrees on every count and lookup over random allocate/name/acquire/release sequences', () => {
    for (let seed = 1; seed <= 5; seed++) {
      const rng = new Rng(seed);
      const capacity = rng.int(8, 64);
      const pool = new BlockPool(capacity);
      const model = new ReferencePool(capacity);
      // Held blocks: [id or undefined (anonymous), handle].
      const held: Array<[number | undefined, number]> = [];
      for (let op = 0; op < 4000; op++) {
        const roll = rng.next();
        if (roll < 0.35) {
          const count = rng.int(1, 4);
          const ok = pool.allocate(count);
          expect(ok).toBe(model.allocate(count));
          if (!ok) continue;
          for (let k = 0; k < count; k++) {
            const id = rng.int(0, 80);
            const handle = pool.register(id);
            expect(handle >= 0).toBe(model.register(id));
            held.push(handle >= 0 ? [id, handle] : [undefined, -1]);
          }
        } else if (roll < 0.55) {
          const id = rng.int(0, 80);
          if (pool.matchPrefix([id]) === 1) {
            held.push([id, pool.acquire(id)]);
            model.acquire(id);
          }
        } else if (held.length > 0) {
          const [id, handle] = held.splice(rng.int(0, held.length - 1), 1)[0]!;
          if (id === undefined) {
            pool.releaseAnonymous(1);
            model.referenced--;
          } else {
            pool.release(handle);
            model.release(id);
          }
        }
        expect(pool.referenced).toBe(model.referenced);
        expect(pool.cached).toBe(model.lru.size);
        expect(pool.evictions).toBe(model.evictions);
        const probe = rng.int(0, 80);
        expect(pool.matchPrefix([probe])).toBe(model.refs.has(probe) ? 1 : 0);
      }
    }
  });
});

describe('preemption and state', () => {
  it('preempts the newest running request when KV runs out, and still finishes everything', () => {
    // 40 blocks: two requests of 10 prompt blocks each decoding 300 tokens (~19 blocks more each).
    const engine = new EngineModel({ preset, blockSize: BLOCK, capacityBlocks: 40 });
    const older = engine.submit(request(160, 300), 0);
    const newer = engine.submit(request(160, 300), 0);
    const preempted: Sequence[] = [];
    runUntil(engine, () => older.finishedAt !== undefined && newer.finishedAt !== undefined).forEach((s) =>
      preempted.push(...s.preempted),
    );
    expect(engine.counters.preemptions).toBeGreaterThan(0);
    expect(preempted.every((s) => s === newer)).toBe(true);
    expect(older.preemptions).toBe(0);
    expect(newer.generated).toBe(300);
    expect(older.finishedAt!).toBeLessThan(newer.finishedAt!);
    expect(engine.pool.referenced).toBe(0);
    expect(engine.idle).toBe(true);
  });

  it('reports live state, and an abort releases the request’s blocks', () => {
    const engine = new EngineModel({ preset, blockSize: BLOCK });
    const big = engine.submit(request(20_000, 5), 0);
    const small = engine.submit(request(3_000, 5), 0);
    expect(engine.state()).toMatchObject({
      running: 0,
      waiting: 2,
      pendingPrefillTokens: 23_000,
      maxPrefillRemaining: 20_000,
    });
    engine.step(0);
    expect(engine.state()).toMatchObject({
      running: 1,
      waiting: 1,
      pendingPrefillTokens: 23_000 - 8192,
      maxPrefillRemaining: 20_000 - 8192,
      kvBlocksUsed: 8192 / BLOCK,
      kvBlocksTotal: capacityBlocks(preset, BLOCK),
    });
    expect(engine.abort(big)).toBe(true);
    expect(engine.abort(big)).toBe(false);
    expect(engine.pool.referenced).toBe(0);
    runUntil(engine, () => small.finishedAt !== undefined);
    expect(engine.state()).toMatchObject({ running: 0, waiting: 0, decodeBatch: 0, kvBlocksUsed: 0 });
  });

  it('derives the KV capacity from the preset: ~323k tokens on an H20 for Qwen3-Coder-30B-A3B', () => {
    expect(capacityBlocks(preset, 512)).toBe(631);
    within(capacityBlocks(preset, BLOCK) * BLOCK, 323_000, 0.01);
  });
});

describe('decode runs in closed form', () => {
  it('never exceeds, and stays within 1e-6 of, the step-by-step sum (randomized)', () => {
    const random = new Rng(5);
    for (let round = 0; round < 500; round++) {
      const batch = random.int(1, 64);
      const context = random.int(0, 3_000_000);
      const steps = random.int(1, 2_000);
      let sum = 0;
      for (let m = 0; m < steps; m++) sum += stepMs(preset, [], batch, context + m * batch);
      const bound = decodeStepsMsAtLeast(preset, batch, context, steps);
      expect(bound).toBeLessThanOrEqual(sum);
      expect(bound).toBeGreaterThan(sum * (1 - 1e-6));
    }
  });
});

describe('the B2 interference microbench in the model', () => {
  const cells = interferenceTable(preset);
  const ttft = (variant: string, size: number) =>
    cells.find((c) => c.variant === variant && c.prefill_tokens === size)!.ttft_index!;

  it('leaves a decode load on another engine untouched at every prefill size', () => {
    for (const size of [2048, 8192, 16384, 32768, 65536]) {
      within(ttft('different', size), 1, 0.05);
      within(cells.find((c) => c.variant === 'different' && c.prefill_tokens === size)!.tpot_index!, 1, 0.05);
    }
  });

  it('raises a same-engine decode load’s TTFT index monotonically with prefill size, 2k to 65k', () => {
    const sizes = [2048, 8192, 16384, 32768, 65536];
    for (let k = 1; k < sizes.length; k++) expect(ttft('same', sizes[k]!)).toBeGreaterThan(ttft('same', sizes[k - 1]!));
    expect(ttft('same', 2048)).toBeGreaterThan(1.5);
  });
});
