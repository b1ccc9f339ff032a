#!/usr/bin/env node
// @ts-check
// A lower bound on any router's TTFT percentiles for a trace in the simulator's engine model
// (docs/policy-evaluation.md): every request's first token no earlier than its own prefill on an
// idle engine, of only the tokens no earlier request's prefix covers (a perfect, unbounded,
// fleet-wide cache), in chunks of the preset's max_num_batched_tokens. No queueing, no eviction.
//
//   node scripts/ttft-floor.mjs TRACE [TRACE…]      (run `npm run build` first)
import { DEFAULT_ENGINE_PRESET, ENGINE_PRESETS, stepMs } from '../dist/sim/engine-preset.js';
import { readTrace } from '../dist/trace/read-trace.js';

const found = ENGINE_PRESETS[DEFAULT_ENGINE_PRESET];
if (found === undefined) throw new Error('no default engine preset');
const preset = found;

/**
 * Seconds to prefill `tokens` after `context` cached ones, chunk by chunk, on an idle engine.
 * @param {number} tokens
 * @param {number} context
 */
function prefillSeconds(tokens, context) {
  let ms = 0;
  for (let done = 0; done < tokens; done += preset.maxBatchedTokens) {
    const chunk = Math.min(preset.maxBatchedTokens, tokens - done);
    ms += stepMs(preset, [{ tokens: chunk, context: context + done }], 0);
  }
  return ms / 1000;
}

const quantile = (/** @type {number[]} */ sorted, /** @type {number} */ q) =>
  sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

for (const path of process.argv.slice(2)) {
  // Ids are chained (docs/block-index.md), so a set of every id seen is the global prefix cache.
  const seen = new Set();
  /** @type {number[]} */
  const floors = [];
  for await (const request of readTrace(path)) {
    let held = 0;
    while (held < request.hashIds.length && seen.has(request.hashIds[held])) held += 1;
    for (const id of request.hashIds) seen.add(id);
    // An engine always computes at least one token.
    const cached = Math.min(held * request.blockSize, request.inputLength - 1);
    floors.push(prefillSeconds(request.inputLength - cached, cached));
  }
  floors.sort((a, b) => a - b);
  const at = (/** @type {number} */ q) => (quantile(floors, q) ?? NaN).toFixed(2);
  console.log(`${path}: TTFT floor p50 ${at(0.5)} s, p90 ${at(0.9)} s, p99 ${at(0.99)} s (${floors.length} requests)`);
}
