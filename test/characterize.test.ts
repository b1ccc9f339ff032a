/**
 * Trace characterization: worked examples, a randomized differential test against a naive
 * reference, and the threaded (Piscina) result equal to the single-thread one.
 */
import { describe, expect, it } from 'vitest';

import { characterizeTrace } from '../src/analysis/characterize.js';
import { synthesizeTrace } from '../src/trace/synth.js';
import type { TraceRequest } from '../src/trace/types.js';
import { Rng } from './helpers/random.js';
import { referenceCharacterize } from './helpers/trace-reference.js';

function request(session: string, turn: number, ids: number[], inputLength: number, blockSize = 4): TraceRequest {
  return { session, turn, arrival: turn, inputLength, outputLength: 1, hashIds: ids, blockSize };
}

// Block size 4. Sessions A and B share the prefix [1,2]; C later re-uses A's [1,2,3,4].
const WORKED: TraceRequest[] = [
  request('A', 1, [1, 2, 3], 12),
  request('B', 1, [1, 2, 9], 10),
  request('A', 2, [1, 2, 3, 4, 5], 18),
  request('B', 2, [1, 2, 9, 7], 16),
  request('C', 1, [5, 6], 8),
  request('C', 2, [1, 2, 3, 4, 8], 20),
];

describe('characterizeTrace', () => {
  it('computes the ceilings, reuse and counts of a worked example', async () => {
    const s = await characterizeTrace(WORKED, { workers: 0, sharedMinSessions: 3 });
    expect(s.requests).toBe(6);
    expect(s.sessions).toBe(3);
    expect(s.input_tokens).toBe(84);
    expect(s.blocks).toBe(22);
    expect(s.distinct_blocks).toBe(10);
    // any: r1 2 blocks (8 tokens of 10), r2 3 (12), r3 3 (12), r5 4 (16) → 48/84 tokens, 12/22 blocks.
    expect(s.apc_ceiling.any_session).toEqual({ token_ratio: 48 / 84, block_ratio: 12 / 22, hit_requests: 4 });
    // intra: only r2 and r3 continue their own session's prefix, 3 blocks each.
    expect(s.apc_ceiling.intra_session).toEqual({ token_ratio: 24 / 84, block_ratio: 6 / 22, hit_requests: 2 });
    // [1] and [1,2] are visited by A, B and C (≥3 sessions); nothing deeper is.
    expect(s.apc_ceiling.shared_prefix).toEqual({ token_ratio: 32 / 84, block_ratio: 8 / 22, hit_requests: 4 });
    expect(s.reuse_blocks).toEqual({ shared_prefix: 8, intra_session: 2, cross_session: 2, unclassified: 0 });
    expect(s.reuse.shared_prefix).toBeCloseTo(8 / 12, 12);
    expect(s.turns_per_session).toMatchObject({ p50: 2, max: 2, mean: 2 });
    expect(s.input_length.max).toBe(20);
  });

  it('caps a fully matched request at its input length, and keeps sessionless reuse unclassified', async () => {
    const trace: TraceRequest[] = [
      { ...request('x', 1, [1, 2, 9], 10), sessionless: true },
      { ...request('y', 1, [1, 2, 9], 10), sessionless: true },
    ];
    const s = await characterizeTrace(trace, { workers: 0 });
    expect(s.sessions).toBe(2);
    // The repeat matches all 3 blocks: 12 tokens of blocks, but only 10 prompt tokens.
    expect(s.apc_ceiling.any_session.token_ratio).toBe(10 / 20);
    expect(s.reuse_blocks).toEqual({ shared_prefix: 0, intra_session: 0, cross_session: 0, unclassified: 3 });
  });

  it('reports the KV footprint from the model preset', async () => {
    const s = await characterizeTrace([request('A', 1, [1], 3)], { workers: 0, model: 'llama-3.1-8b' });
    expect(s.model.kv_bytes_per_token).toBe(2 * 32 * 8 * 128 * 2);
    expect(s.kv_footprint_bytes.max).toBe(4 * 131072); // (3 input + 1 output) tokens
    await expect(characterizeTrace([], { workers: 0, model: 'gpt-9' })).rejects.toThrow(/model must be one of/);
  });

  it('matches the naive reference on random traces, inline with any number of shards', async () => {
    for (let seed = 1; seed <= 6; seed++) {
      const trace = randomTrace(new Rng(seed), 400);
      const expected = referenceCharacterize(trace, 3);
      for (const shards of [1, 3]) {
        const s = await characterizeTrace(trace, { workers: 0, shards, sharedMinSessions: 3 });
        const total = (counts: number[]): number => counts.reduce((a, b) => a + b, 0);
        expect(s.apc_ceiling.any_session.block_ratio).toBeCloseTo(total(expected.any) / s.blocks, 12);
        expect(s.apc_ceiling.intra_session.block_ratio).toBeCloseTo(total(expected.intra) / s.blocks, 12);
        expect(s.apc_ceiling.shared_prefix.block_ratio).toBeCloseTo(total(expected.shared) / s.blocks, 12);
        expect(s.apc_ceiling.any_session.hit_requests).toBe(expected.any.filter((m) => m > 0).length);
        expect(s.apc_ceiling.intra_session.hit_requests).toBe(expected.intra.filter((m) => m > 0).length);
        expect(s.apc_ceiling.shared_prefix.hit_requests).toBe(expected.shared.filter((m) => m > 0).length);
        expect(s.reuse_blocks).toEqual(expected.reuse);
      }
    }
  });
});

/**
 * Sessions that grow their prompt turn by turn, fork from each other's prefixes, share a few
 * system prefixes, and some sessionless requests, with ids that are deliberately not chained
 * (the same id under different parents) so the trie, not the ids, defines a prefix.
 */
export function randomTrace(rng: Rng, count: number): TraceRequest[] {
  const prompts = new Map<string, number[]>();
  const systems = [[900], [900, 901], [902, 903, 904]];
  const trace: TraceRequest[] = [];
  for (let i = 0; i < count; i++) {
    const sessionless = rng.chance(0.1);
    const session = sessionless ? `r${i}` : `s${rng.int(0, 25)}`;
    let ids = prompts.get(session);
    if (ids === undefined || sessionless) {
      const others = [...prompts.values()];
      ids =
        others.length > 0 && rng.chance(0.3)
          ? rng.pick(others).slice(0, rng.int(1, 8))
          : [...rng.pick(systems)].slice(0, rng.int(0, 3));
    } else {
      ids = ids.slice(0, Math.max(0, ids.length - rng.int(0, 1)));
    }
    const append = rng.int(0, 6);
    for (let k = 0; k < append; k++) ids.push(rng.int(0, 12));
    if (!sessionless) prompts.set(session, ids);
    const blockSize = 4;
    const inputLength = ids.length === 0 ? 0 : (ids.length - 1) * blockSize + rng.int(1, blockSize);
    trace.push({
      session,
      turn: i,
      arrival: i,
      inputLength,
      outputLength: rng.int(0, 9),
      hashIds: [...ids],
      blockSize,
      sessionless,
    });
  }
  return trace;
}

describe('characterizeTrace on Piscina workers', () => {
  it('gives exactly the single-thread result with 1 and 2 worker threads', async () => {
    // Worker threads load the compiled shard (dist/, built by pretest).
    const trace = randomTrace(new Rng(42), 5000);
    const single = await characterizeTrace(trace, { workers: 0 });
    const oneThread = await characterizeTrace(trace, { workers: 1 });
    const twoThreads = await characterizeTrace(trace, { workers: 2 });
    expect(oneThread).toEqual(single);
    expect(twoThreads).toEqual(single);
    expect(single.apc_ceiling.any_session.hit_requests).toBeGreaterThan(1000);
  });

  it("gives exactly the TypeScript trie's result with the addon's, inline and threaded", async () => {
    // A generated agentic trace (system prefix, sub-agent forks, compaction) and the random one.
    const traces = [[...synthesizeTrace({ sessions: 60, seed: 9, blockSize: 64 })], randomTrace(new Rng(43), 3000)];
    for (const trace of traces) {
      const reference = await characterizeTrace(trace, { workers: 0, native: false });
      expect(reference.distinct_blocks).toBeGreaterThan(1000);
      for (const options of [{ workers: 0 }, { workers: 0, shards: 3 }, { workers: 1 }, { workers: 2 }]) {
        expect(await characterizeTrace(trace, { ...options, native: true })).toEqual(reference);
      }
      expect(await characterizeTrace(trace, { workers: 1, native: false })).toEqual(reference);
    }
  });

  it('stops its workers and rethrows when the source fails mid-stream', async () => {
    async function* failing(): AsyncGenerator<TraceRequest> {
      yield* randomTrace(new Rng(7), 100);
      throw new Error('line 101: malformed');
    }
    await expect(characterizeTrace(failing(), { workers: 2 })).rejects.toThrow('line 101: malformed');
  });
});
