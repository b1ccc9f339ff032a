// @ts-check
// Workload (issue #17): ingesting vLLM KV cache events into the event-fed index.
// The stream (bench/lib/kv-event-workload.mjs): one engine's messages, 16-token blocks, stored
// runs of 1-64 blocks, ~30% of block events removals. Messages are coalesced TICK at a time into
// one applyKvEvents call, as the proxy does per event-loop tick. Legs, in block events per second
// (stored + removed blocks):
// (a) applyKvEvents alone, native, on pre-packed ticks; and the TypeScript reference on the first
//     REFERENCE_SHARE of the same ticks (it hashes in BigInt); the ratio is of the two cores' rates
//     on that same prefix (the native rate over the whole stream is lower: its index grows).
//     Target: native >= 1M block events/s.
// (b) from the payload bytes, native, two ways: decode (msgpackr, src/events/kv-event-batch.ts)
//     into event objects, pack them (KvEventPacker.addBatch) and apply; and the direct decoder
//     (KvEventPacker.addPayload: msgpackr, then straight into the packed arrays) and apply.
// Each leg runs REPS times on a fresh router; the median rate is reported.
import { loadavg } from 'node:os';
import { performance } from 'node:perf_hooks';

import { loadNative } from '../dist/core/native.js';
import { resolvePolicy, toCorePolicy } from '../dist/core/policy-spec.js';
import { ReferenceRouter } from '../dist/core/reference/reference-router.js';
import { decodeKvEventBatch } from '../dist/events/kv-event-batch.js';
import { KvEventPacker } from '../dist/events/packed-kv-events.js';
import { workloadMain } from './lib/cli.mjs';
import { BLOCK_TOKENS, generateKvEventStream } from './lib/kv-event-workload.mjs';

/**
 * @typedef {{
 *   workload: 'kv-events', kind: 'kv-events', leg: 'apply' | 'decode+pack+apply' | 'direct decode+apply', tick_messages: number,
 *   messages: number, block_events: number, native_events_per_s: number,
 *   reference_events_per_s: number | null, prefix_native_events_per_s: number | null, ratio: number | null,
 *   held_keys: number, orphaned: number, load_avg: number,
 * }} KvEventsResult
 */

const TICK = 16; // messages per applyKvEvents call
const REFERENCE_SHARE = 0.02;

/** @param {boolean} native */
function makeCore(native) {
  const config = {
    policy: toCorePolicy(resolvePolicy('min_ttft')),
    blockTokens: BLOCK_TOKENS,
    chunkBytes: 128,
    stalenessMs: 2000,
    maxSessions: 1024,
    manualClock: true,
    feedPath: null,
  };
  const buffers = {
    request: new Float64Array(5),
    decision: new Int32Array(5),
    offload: new Float64Array(4),
    events: new Float64Array(3),
  };
  const core = native ? new (loadNative().NativeRouter)(config, buffers) : new ReferenceRouter(config, buffers);
  core.addInstance('engine-0', 1 << 20);
  core.setEventFed(0, true);
  return core;
}

/** A snapshot of a packer's filled part (own arrays), so every rep applies the same ticks. */
function snapshot(/** @type {KvEventPacker} */ p) {
  return {
    ops: p.ops.slice(0, p.opsLength),
    opsLength: p.opsLength,
    hashes: p.hashes.slice(0, p.hashesLength),
    hashesLength: p.hashesLength,
    tokens: p.tokens.slice(0, p.tokensLength),
    tokensLength: p.tokensLength,
    blocks: p.blocks,
  };
}

/** @param {number[]} xs */
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN;

workloadMain('kv-events', ({ quick, native }) => {
  if (!native) throw new Error('the kv-events workload needs the native addon');
  const stream = generateKvEventStream(quick ? 200_000 : 2_000_000);
  const { payloads } = stream;
  console.log(
    `  stream: ${payloads.length.toLocaleString('en-US')} messages, ${stream.blockEvents.toLocaleString('en-US')} block events ` +
      `(${((100 * stream.removedBlocks) / stream.blockEvents).toFixed(0)}% removed), ${TICK} messages per call`,
  );
  const reps = quick ? 3 : 7;

  // Pre-packed ticks for leg (a).
  const packer = new KvEventPacker();
  /** @type {ReturnType<typeof snapshot>[]} */
  const ticks = [];
  for (let i = 0; i < payloads.length; i += TICK) {
    packer.reset();
    for (const payload of payloads.slice(i, i + TICK)) packer.addBatch(decodeKvEventBatch(payload));
    ticks.push(snapshot(packer));
  }
  const totalBlocks = ticks.reduce((sum, t) => sum + t.blocks, 0);
  const stats = new Float64Array(9);

  /** Block events/s of applying `list` to a fresh core. @param {boolean} isNative @param {typeof ticks} list */
  const applyRate = (isNative, list) => {
    const core = makeCore(isNative);
    const blocks = list.reduce((sum, t) => sum + t.blocks, 0);
    globalThis.gc?.();
    const started = performance.now();
    for (const t of list) core.applyKvEvents(0, t);
    const seconds = (performance.now() - started) / 1000;
    core.eventStats(0, stats);
    return blocks / seconds;
  };
  const nativeApply = median(Array.from({ length: reps }, () => applyRate(true, ticks)));
  const held = stats[6] ?? NaN;
  const orphaned = stats[4] ?? NaN;
  const refTicks = ticks.slice(0, Math.max(1, Math.floor(ticks.length * REFERENCE_SHARE)));
  const referenceApply = median(Array.from({ length: quick ? 1 : 3 }, () => applyRate(false, refTicks)));
  const prefixApply = median(Array.from({ length: reps }, () => applyRate(true, refTicks)));

  /** Leg (b): from payload bytes. @param {boolean} direct */
  const endToEnd = (direct) => {
    const core = makeCore(true);
    const p = new KvEventPacker();
    globalThis.gc?.();
    const started = performance.now();
    for (let i = 0; i < payloads.length; i += TICK) {
      p.reset();
      const end = Math.min(i + TICK, payloads.length);
      for (let k = i; k < end; k++) {
        const payload = /** @type {Uint8Array} */ (payloads[k]);
        if (direct) p.addPayload(payload);
        else p.addBatch(decodeKvEventBatch(payload));
      }
      core.applyKvEvents(0, p);
    }
    return totalBlocks / ((performance.now() - started) / 1000);
  };
  /** @type {number[]} */
  const viaObjects = [];
  /** @type {number[]} */
  const viaDirect = [];
  for (let rep = 0; rep < reps; rep++) {
    // Alternating, so drift on the shared machine hits both alike.
    viaObjects.push(endToEnd(false));
    viaDirect.push(endToEnd(true));
  }
  const nativeEndToEnd = median(viaObjects);
  const nativeDirect = median(viaDirect);

  const load = Math.round((loadavg()[0] ?? NaN) * 10) / 10;
  /** @type {KvEventsResult[]} */
  const results = [
    {
      workload: 'kv-events',
      kind: 'kv-events',
      leg: 'apply',
      tick_messages: TICK,
      messages: payloads.length,
      block_events: totalBlocks,
      native_events_per_s: Math.round(nativeApply),
      reference_events_per_s: Math.round(referenceApply),
      prefix_native_events_per_s: Math.round(prefixApply),
      ratio: Math.round((prefixApply / referenceApply) * 10) / 10,
      held_keys: held,
      orphaned,
      load_avg: load,
    },
    {
      workload: 'kv-events',
      kind: 'kv-events',
      leg: 'decode+pack+apply',
      tick_messages: TICK,
      messages: payloads.length,
      block_events: totalBlocks,
      native_events_per_s: Math.round(nativeEndToEnd),
      reference_events_per_s: null,
      prefix_native_events_per_s: null,
      ratio: null,
      held_keys: held,
      orphaned,
      load_avg: load,
    },
    {
      workload: 'kv-events',
      kind: 'kv-events',
      leg: 'direct decode+apply',
      tick_messages: TICK,
      messages: payloads.length,
      block_events: totalBlocks,
      native_events_per_s: Math.round(nativeDirect),
      reference_events_per_s: null,
      prefix_native_events_per_s: null,
      ratio: null,
      held_keys: held,
      orphaned,
      load_avg: load,
    },
  ];
  for (const r of results)
    console.log(
      `  ${r.leg.padEnd(20)} native ${(r.native_events_per_s / 1e6).toFixed(2)} M block events/s` +
        (r.reference_events_per_s === null
          ? ''
          : `; first ${REFERENCE_SHARE * 100}%: native ${((r.prefix_native_events_per_s ?? 0) / 1e6).toFixed(2)} M/s, ` +
            `reference ${(r.reference_events_per_s / 1e3).toFixed(1)} k/s (${r.ratio}x)`),
    );
  console.log(`  index after the stream: ${held.toLocaleString('en-US')} keys held, ${orphaned} blocks orphaned`);
  return results;
});
