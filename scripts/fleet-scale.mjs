#!/usr/bin/env node
// @ts-check
/**
 * The fleet-scale figures of docs/scale-out.md ("A thousand engines"): what one router replica
 * takes in and holds per engine, measured, and projected linearly to `--engines` engines.
 *
 * 1. Event rate: `sim run` of the default synthetic trace (8 H20-preset engines, min_ttft) in
 *    virtual time; every block an engine computes is one stored block in its KV events, every
 *    block it evicts one removed block, and every engine step that changed its cache one message
 *    (vLLM publishes one batch per scheduler step).
 * 2. Memory: a Router whose `--sample-engines` instances are each fed `--blocks` distinct blocks
 *    of 16 tokens through applyKvEvents, as a replica's event plane feeds it; the process's
 *    resident memory before and after, divided by the blocks held (the event-fed index and the
 *    belief index's own share are both in it).
 *
 *   node scripts/fleet-scale.mjs [--engines 1000] [--sample-engines 50] [--blocks 20199]
 *
 * Needs `npm run build`; run with `node --expose-gc` for steadier memory figures. Prints a JSON
 * object; deterministic except the memory figures.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const cli = join(root, 'dist', 'cli.js');
const { values } = parseArgs({
  options: {
    engines: { type: 'string', default: '1000' },
    'sample-engines': { type: 'string', default: '50' },
    blocks: { type: 'string', default: '20199' },
  },
});
const engines = Number(values.engines);
const sampleEngines = Number(values['sample-engines']);
const blocksPerEngine = Number(values.blocks);
for (const [flag, v] of /** @type {Array<[string, number]>} */ ([
  ['--engines', engines],
  ['--sample-engines', sampleEngines],
  ['--blocks', blocksPerEngine],
]))
  if (!(Number.isInteger(v) && v >= 1)) {
    process.stderr.write(`fleet-scale: ${flag} must be an integer >= 1\n`);
    process.exit(2);
  }

const BLOCK = 16;

// 1. Event rate per engine, from one simulated run's records.
const work = mkdtempSync(join(tmpdir(), 'kvroute-fleet-scale-'));
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const trace = join(work, 'trace.jsonl');
const records = join(work, 'run.msgpack');
const run = (/** @type {string[]} */ args) => {
  const out = spawnSync(process.execPath, [cli, ...args], { encoding: 'utf8', maxBuffer: 1 << 28 });
  if (out.status !== 0) throw new Error(`kvroute ${args.join(' ')} failed:\n${out.stderr}`);
  return out.stdout;
};
run(['trace', 'synth', '--seed', '1', '-o', trace]);
const metrics = JSON.parse(
  run(['sim', 'run', '--trace', trace, '--instances', '8', '--policy', 'min_ttft', '--records', records, '--json']),
);
const { readRecordFile } = await import(join(root, 'dist', 'trace', 'record-file.js'));
const { records: rows } = await readRecordFile(records);
let computedBlocks = 0;
for (const r of rows) computedBlocks += Math.floor(Math.max(0, r.input_tokens - r.cached_tokens) / BLOCK);
const seconds = metrics.makespan_s;
const perEngine = {
  stored_blocks_per_s: computedBlocks / seconds / 8,
  removed_blocks_per_s: metrics.evictions / seconds / 8,
};
const blockEventsPerEngine = perEngine.stored_blocks_per_s + perEngine.removed_blocks_per_s;

// 2. Memory per held block, event-fed.
const { Router } = await import(join(root, 'dist', 'index.js'));
const { applyKvEvents } = await import(join(root, 'dist', 'events', 'direct-kv-events.js'));
const ids = Array.from({ length: sampleEngines }, (_, k) => `engine-${k}`);
const router = new Router({ instances: ids, capacityBlocks: blocksPerEngine, blockSize: BLOCK });
globalThis.gc?.();
const before = process.memoryUsage().rss;
let token = 1;
let hash = 1;
const PER_EVENT = 64; // blocks per BlockStored event: a long prompt's prefill step
for (const id of ids) {
  for (let stored = 0; stored < blocksPerEngine;) {
    const n = Math.min(PER_EVENT, blocksPerEngine - stored);
    const tokenIds = Array.from({ length: n * BLOCK }, () => (token = (token * 48271) % 2147483647) % 150000);
    const blockHashes = Array.from({ length: n }, () => hash++);
    applyKvEvents(router, id, [
      {
        type: 'BlockStored',
        block_hashes: blockHashes,
        parent_block_hash: null,
        token_ids: tokenIds,
        block_size: BLOCK,
        lora_id: null,
        medium: 'GPU',
        lora_name: null,
      },
    ]);
    stored += n;
  }
}
globalThis.gc?.();
const after = process.memoryUsage().rss;
// Every block stored is distinct and none is removed, so the index holds them all.
const held = sampleEngines * blocksPerEngine;
if (router.instances().length !== sampleEngines) throw new Error('the router lost an instance');
const bytesPerBlock = (after - before) / held;

const gib = (/** @type {number} */ bytes) => bytes / 2 ** 30;
process.stdout.write(
  `${JSON.stringify(
    {
      measured: {
        trace: 'trace synth --seed 1, 8 engines, min_ttft, H20 preset',
        virtual_seconds: seconds,
        per_engine: { ...perEngine, block_events_per_s: blockEventsPerEngine },
        sample_engines: sampleEngines,
        blocks_per_engine: blocksPerEngine,
        blocks_held: held,
        rss_bytes_per_held_block: bytesPerBlock,
      },
      projected: {
        engines,
        block_events_per_s: blockEventsPerEngine * engines,
        index_memory_gib: gib(bytesPerBlock * blocksPerEngine * engines),
      },
    },
    null,
    2,
  )}\n`,
);
