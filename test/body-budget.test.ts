/**
 * The body budget's accounting, and the memory of released bodies given back: once enough body
 * bytes were released, a full collection runs in the background, so a dropped body's memory is
 * freed without waiting for the next allocation-driven collection (observed through a
 * FinalizationRegistry, never a sleep). Without the collection V8 gets to it after ~8 s idle.
 */
import v8 from 'node:v8';
import vm from 'node:vm';

import { describe, expect, it } from 'vitest';

import { loadNative } from '../src/core/native.js';

import { BodyBudget } from '../src/proxy/exchange/body-budget.js';
import { collectGarbageSoon } from '../src/proxy/exchange/reclaim-memory.js';

describe('BodyBudget', () => {
  it('reserves up to its limit, refuses past it, and counts refusals', () => {
    const budget = new BodyBudget(100);
    expect(budget.reserve(60)).toBe(true);
    expect(budget.reserve(41)).toBe(false);
    expect(budget.held).toBe(60);
    expect(budget.reserve(40)).toBe(true);
    expect(budget.held).toBe(100);
    budget.release(100);
    expect(budget.held).toBe(0);
    expect(budget.refused).toBe(1);
    const refusal = budget.refusal();
    expect(refusal.status).toBe(503);
    expect(refusal.code).toBe('body_budget_exceeded');
    expect(refusal.message).toMatch(/--max-body-memory \(100 bytes\)/);
  });

  it('after releasing a burst of bodies, their memory is collected in the background', async () => {
    let collected!: () => void;
    const finalized = new Promise<void>((resolve) => (collected = resolve));
    const registry = new FinalizationRegistry<string>(() => collected());
    const budget = new BodyBudget(2 ** 30);
    const size = 80 * 2 ** 20;
    (() => {
      const body = Buffer.alloc(size, 1); // a body only the request held
      expect(budget.reserve(size)).toBe(true);
      registry.register(body, 'body');
    })();
    budget.release(size); // past the reclaim threshold: a collection is asked for
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      finalized,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('the released body was not collected within 3 s')), 3_000);
      }),
    ]).finally(() => clearTimeout(timer));
    expect(collectGarbageSoon()).toBe(true); // the runtime can collect on request
  });

  it("the addon's trimHeap gives the C heap's freed pages back (glibc)", async () => {
    const glibc = (process.report.getReport() as { header: { glibcVersionRuntime?: string } }).header
      .glibcVersionRuntime;
    if (glibc === undefined) {
      console.log('skipped: not glibc, trimHeap resolves false there');
      return;
    }
    // Bodies-sized ArrayBuffers under the mmap threshold land inside malloc's heap.
    (() => {
      const held = Array.from({ length: 512 }, () => Buffer.allocUnsafeSlow(64 * 1024).fill(7));
      expect(held.length).toBe(512);
    })();
    v8.setFlagsFromString('--expose-gc');
    (vm.runInNewContext('gc') as () => void)();
    expect(await loadNative().trimHeap()).toBe(true);
  });
});
