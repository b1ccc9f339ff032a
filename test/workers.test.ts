/**
 * The addon is context-aware: it loads and routes in several Piscina workers
 * at once, survives their termination mid-task, and survives process exit
 * with routers and prefix tries alive in the main thread and in workers
 * (characterize.test.ts walks the trie on Piscina workers).
 */
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

import { Piscina } from 'piscina';
import { afterEach, describe, expect, it } from 'vitest';

import { Router } from '../src/index.js';
import { generateTrace } from './helpers/trace-gen.js';
import { waitFor } from './helpers/wait-for.js';

const worker = new URL('./fixtures/route-worker.mjs', import.meta.url).href;
const trace = generateTrace({
  seed: 3,
  requests: 1500,
  concurrentSessions: 20,
  firstTurnBlocks: [10, 80],
  appendBlocks: [1, 20],
  turnsPerSession: [2, 20],
}).map((r) => ({ ids: r.ids as Float64Array, session: r.session }));

function mainThreadDecisions(policy: string): Int32Array {
  const router = new Router({ instances: 6, policy: policy as 'unified', capacityBlocks: 400, clock: 'manual' });
  const decisions = new Int32Array(trace.length);
  const open: number[] = [];
  trace.forEach((request, k) => {
    open.push(router.route({ hashIds: request.ids, session: request.session }));
    decisions[k] = router.decision.index;
    if (open.length > 16) router.complete(open.shift()!);
  });
  return decisions;
}

describe('the addon in worker threads', () => {
  const pools: Piscina[] = [];
  const pool = (maxThreads: number) => {
    const p = new Piscina({ filename: worker, minThreads: maxThreads, maxThreads });
    pools.push(p);
    return p;
  };
  afterEach(async () => {
    await Promise.all(pools.splice(0).map((p) => p.destroy()));
  });

  it('routes in several workers at once, deciding exactly as the main thread does', async () => {
    const p = pool(3);
    const policies = ['unified', 'sticky', 'lmetric', 'unified', 'session_hash', 'load_only'];
    const results = await Promise.all(policies.map((policy) => p.run({ trace, policy })));
    results.forEach((decisions, k) => expect(decisions).toEqual(mainThreadDecisions(policies[k]!)));
    expect(p.threads.length).toBe(3);
  });

  it('survives workers terminated mid-task, and loads again in fresh ones', async () => {
    const before = mainThreadDecisions('unified');
    const p = pool(2);
    // Two tasks run (one per thread) and a third waits; each bumps `started` after its first pass.
    const started = new Int32Array(new SharedArrayBuffer(4));
    const running = [0, 1, 2].map(() => p.run({ trace, policy: 'unified', loopMs: 30_000, started }));
    const settled = Promise.allSettled(running);
    await waitFor('both workers to load the addon and route a first pass', () => Atomics.load(started, 0) === 2, {
      timeoutMs: 20_000,
      detail: () => ({ started: Atomics.load(started, 0) }),
    });
    await p.destroy();
    const outcomes = await settled;
    expect(outcomes.map((o) => o.status)).toEqual(['rejected', 'rejected', 'rejected']);
    // The main thread's addon is unaffected: it decides as it did before the workers...
    expect(mainThreadDecisions('unified')).toEqual(before);
    // ...and new workers load it again.
    const again = pool(2);
    expect(await again.run({ trace, policy: 'unified' })).toEqual(before);
  });
});

describe('process exit', () => {
  it('exits cleanly with routers alive in the main thread and in a worker', () => {
    const index = fileURLToPath(new URL('../dist/index.js', import.meta.url));
    const script = `
      import { Worker } from 'node:worker_threads';
      import { Router } from ${JSON.stringify(index)};
      const keep = [new Router({ instances: 4 }), new Router({ instances: 2, native: false })];
      for (let k = 0; k < 1000; k += 1) keep[0].route({ hashIds: [k % 7, k], session: 's' + (k % 9) });
      const w = new Worker(\`
        Promise.all([import('node:worker_threads'), import(${JSON.stringify(index)})]).then(([{ parentPort }, { Router }]) => {
          const r = new Router({ instances: 3 });
          r.route({ hashIds: [1, 2, 3] });
          parentPort.postMessage('ready');
          setInterval(() => r.route({ hashIds: [1, 2, 3] }), 1);
        });
      \`, { eval: true });
      w.on('message', () => process.exit(0));
      setTimeout(() => process.exit(3), 10000);
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
  });

  it('exits cleanly with prefix tries alive in the main thread and walking in workers', () => {
    const native = fileURLToPath(new URL('../dist/core/native.js', import.meta.url));
    const script = `
      import { Worker } from 'node:worker_threads';
      import { loadNative } from ${JSON.stringify(native)};
      const trie = new (loadNative().PrefixTrie)();
      const ids = Float64Array.from({ length: 300000 }, (_, k) => k);
      trie.walk(ids, new Uint32Array(ids.length));
      let ready = 0;
      for (let n = 0; n < 2; n++) {
        const w = new Worker(\`
          Promise.all([import('node:worker_threads'), import(${JSON.stringify(native)})]).then(([{ parentPort }, { loadNative }]) => {
            const trie = new (loadNative().PrefixTrie)();
            const batch = Float64Array.from({ length: 1002 }, (_, k) => (k === 1 ? 1000 : k));
            const seen = new Uint32Array(501), paths = new Uint32Array(1002);
            let round = 0;
            trie.walkBatch(batch, seen, paths);
            parentPort.postMessage('ready');
            setInterval(() => { batch[2] = ++round; trie.walkBatch(batch, seen, paths); }, 1);
          });
        \`, { eval: true });
        w.on('message', () => { if (++ready === 2) setTimeout(() => process.exit(0), 20); });
      }
      setTimeout(() => process.exit(3), 10000);
    `;
    const child = spawnSync(process.execPath, ['--input-type=module', '-e', script], {
      encoding: 'utf8',
      timeout: 20_000,
    });
    expect(child.stderr).toBe('');
    expect(child.status).toBe(0);
  });
});
