/**
 * The prefix-cache model, through the public Router, for both cores:
 * matching, LRU eviction without prefix holes, removal, capacity changes and
 * per-instance stats.
 */
import { describe, expect, it } from 'vitest';

import { Router } from '../src/index.js';
import { IMPLEMENTATIONS } from './helpers/routers.js';

/** Ids [from, from + n) as a chain (fresh integers stand for fresh prefixes). */
const chain = (from: number, n: number, prefix: readonly number[] = []) => [
  ...prefix,
  ...Array.from({ length: n }, (_, k) => from + k),
];

describe.each(IMPLEMENTATIONS)('block index ($impl)', ({ native }) => {
  // round_robin places requests deterministically, so tests choose the instance.
  const router = (capacityBlocks = 1000, instances = 2) =>
    new Router({ instances, policy: 'round_robin', capacityBlocks, native, clock: 'manual' });

  it('match reports, for every instance in one call, its leading blocks held', () => {
    const r = router(1000, 3);
    const a = chain(1, 40);
    r.route({ hashIds: a }); // engine-0
    r.route({ hashIds: chain(100, 10) }); // engine-1
    r.route({ hashIds: a.slice(0, 17) }); // engine-2 holds only the first 17
    expect(r.match({ hashIds: [...a, 999] })).toEqual({ 'engine-0': 40, 'engine-1': 0, 'engine-2': 17 });
    expect(r.match({ hashIds: a.slice(0, 5) })).toEqual({ 'engine-0': 5, 'engine-1': 0, 'engine-2': 5 });
  });

  it('an empty request matches nothing and routes like any other', () => {
    const r = router();
    expect(r.match({ hashIds: [] })).toEqual({ 'engine-0': 0, 'engine-1': 0 });
    const t = r.route({ hashIds: [] });
    expect(r.decision.instance).toBe('engine-0');
    r.complete(t);
    expect(r.route({})).toBeGreaterThanOrEqual(0);
  });

  it('a branch keeps the shared prefix and adds only its own blocks', () => {
    const r = router(1000, 1);
    const trunk = chain(1, 33);
    r.route({ hashIds: trunk });
    r.route({ hashIds: chain(500, 9, trunk.slice(0, 20)) });
    expect(r.stats().instances[0]!.blocks).toBe(33 + 9);
    expect(r.match({ hashIds: chain(500, 9, trunk.slice(0, 20)) })).toEqual({ 'engine-0': 29 });
    expect(r.match({ hashIds: trunk })).toEqual({ 'engine-0': 33 });
  });

  it('evicts the least recently used blocks, deepest first, never leaving a prefix hole', () => {
    const r = router(50, 1);
    const a = chain(1, 30);
    const b = chain(1000, 30);
    r.route({ hashIds: a });
    r.route({ hashIds: b }); // 60 > 50: a loses its 10 deepest blocks
    expect(r.match({ hashIds: a })).toEqual({ 'engine-0': 20 });
    expect(r.match({ hashIds: b })).toEqual({ 'engine-0': 30 });
    r.route({ hashIds: a.slice(0, 20) }); // a's prefix is now the most recent
    r.route({ hashIds: chain(2000, 15) }); // evicts from b, the least recent
    expect(r.match({ hashIds: a })).toEqual({ 'engine-0': 20 });
    expect(r.match({ hashIds: b })).toEqual({ 'engine-0': 15 });
    expect(r.stats().instances[0]!.blocks).toBe(50);
  });

  it('touching a prefix protects it and not the rest of its chain', () => {
    const r = router(40, 1);
    const a = chain(1, 40);
    r.route({ hashIds: a });
    r.route({ hashIds: a.slice(0, 10) }); // re-use only the first 10
    r.route({ hashIds: chain(900, 20) }); // needs 20 blocks: a's untouched tail goes
    expect(r.match({ hashIds: a })).toEqual({ 'engine-0': 20 });
  });

  it('a request longer than the capacity keeps its first `capacity` blocks', () => {
    const r = router(25, 1);
    const long = chain(1, 100);
    r.route({ hashIds: long });
    expect(r.match({ hashIds: long })).toEqual({ 'engine-0': 25 });
    expect(r.stats().instances[0]!.blocks).toBe(25);
  });

  it('removeBlocks forgets a block and everything below it, on one instance only', () => {
    const r = router(1000, 2);
    const trunk = chain(1, 40);
    const branch = chain(700, 12, trunk.slice(0, 30));
    r.route({ hashIds: trunk }); // engine-0
    r.route({ hashIds: trunk }); // engine-1
    r.route({ hashIds: branch }); // engine-0
    // Block 25 (depth 24) is above the trunk's last 16 blocks and the branch's own 12.
    expect(r.removeBlocks('engine-0', [25])).toBe(16 + 12);
    expect(r.match({ hashIds: trunk })).toEqual({ 'engine-0': 24, 'engine-1': 40 });
    expect(r.match({ hashIds: branch })).toEqual({ 'engine-0': 24, 'engine-1': 30 });
    expect(r.removeBlocks('engine-0', [25, 31, 999_999])).toBe(0); // not held: nothing to do
    expect(r.removeBlocks('engine-1', [1])).toBe(40);
    expect(r.stats().instances.map((s) => s.blocks)).toEqual([24, 0]);
    expect(r.checkInvariants()).toBe('');
  });

  it('removeBlocks finds blocks at any depth, in one call', () => {
    const r = router(1000, 1);
    const a = chain(1, 50);
    const b = chain(100, 50);
    r.route({ hashIds: a });
    r.route({ hashIds: b });
    // Depths 7 and 34: neither is a multiple of the native index's stride.
    expect(r.removeBlocks('engine-0', [8, 134])).toBe(43 + 16);
    expect(r.match({ hashIds: a })).toEqual({ 'engine-0': 7 });
    expect(r.match({ hashIds: b })).toEqual({ 'engine-0': 34 });
    expect(r.checkInvariants()).toBe('');
  });

  it('setCapacity shrinks at once, LRU first, and grows without evicting', () => {
    const r = router(100, 1);
    const a = chain(1, 30);
    const b = chain(200, 30);
    r.route({ hashIds: a });
    r.route({ hashIds: b });
    expect(r.setCapacity('engine-0', 45)).toBe(15);
    expect(r.match({ hashIds: a })).toEqual({ 'engine-0': 15 });
    expect(r.setCapacity('engine-0', 500)).toBe(0);
    expect(r.stats().instances[0]).toMatchObject({ capacityBlocks: 500, blocks: 45 });
  });

  it('clearBlocks empties one instance or all', () => {
    const r = router(100, 2);
    r.route({ hashIds: chain(1, 10) });
    r.route({ hashIds: chain(1, 10) });
    r.clearBlocks('engine-1');
    expect(r.stats().instances.map((s) => s.blocks)).toEqual([10, 0]);
    r.clearBlocks();
    expect(r.stats().instances.map((s) => s.blocks)).toEqual([0, 0]);
    expect(r.match({ hashIds: chain(1, 10) })).toEqual({ 'engine-0': 0, 'engine-1': 0 });
  });

  it('accepts every id representation alike', () => {
    const r = router(100, 1);
    r.route({ hashIds: [1, 2, 3, 4] });
    const forms = [
      [1, 2, 3, 4],
      Float64Array.of(1, 2, 3, 4),
      Uint32Array.of(1, 2, 3, 4),
      BigUint64Array.of(1n, 2n, 3n, 4n),
      [1n, 2n, 3n, 4n],
    ];
    for (const hashIds of forms) expect(r.match({ hashIds })).toEqual({ 'engine-0': 4 });
  });

  it('ids that are not chained never crash or corrupt the index', () => {
    // The smallest sequence the sanitizer stress test found: the same id at
    // two depths once made a split leave a segment head unindexed, and a
    // later split dereferenced a missing entry.
    const r = router(100, 1);
    const c = chain(1, 16);
    r.route({ hashIds: [...c, 7, 7] });
    r.route({ hashIds: [...c, 7, 99] });
    r.setCapacity('engine-0', 18);
    r.route({ hashIds: [...c.slice(0, 5), 55] });
    r.route({ hashIds: [7, 7, 7, 1, 2, 3] });
    r.removeBlocks('engine-0', [7, 1]);
    expect(r.checkInvariants()).toBe('');
    for (const hashIds of [[...c, 7, 7], [7], [1, 7, 1, 7]]) {
      const m = r.match({ hashIds })['engine-0']!;
      expect(m).toBeGreaterThanOrEqual(0);
      expect(m).toBeLessThanOrEqual(hashIds.length);
    }
  });

  it('full 64-bit ids are distinct from their low bits', () => {
    const r = router(100, 1);
    const high = [(1n << 63n) | 5n, (1n << 63n) | 6n];
    r.route({ hashIds: high });
    expect(r.match({ hashIds: [5, 6] })).toEqual({ 'engine-0': 0 });
    expect(r.match({ hashIds: high })).toEqual({ 'engine-0': 2 });
  });
});

describe('native index stats', () => {
  it('reports blocks, segments and heap bytes, and bytes per block stay small', () => {
    const r = new Router({ instances: 1, policy: 'round_robin', capacityBlocks: 200_000, native: true });
    let next = 1;
    for (let session = 0; session < 40; session += 1) {
      let prompt = chain(next, 2000);
      next += 2000;
      for (let turn = 0; turn < 10; turn += 1) {
        r.route({ hashIds: Float64Array.from(prompt) });
        prompt = [...prompt.slice(0, -1), ...chain(next, 60)];
        next += 60;
      }
    }
    const s = r.stats();
    const [inst] = s.instances;
    expect(inst!.blocks).toBeGreaterThan(100_000);
    expect(inst!.segments).toBeGreaterThan(40);
    expect((inst!.bytes! + s.fleetBytes!) / inst!.blocks).toBeLessThan(64);
    expect(r.checkInvariants()).toBe('');
  });
});
