/**
 * Workload (issue #18): what an offloaded request's two body edits cost the proxy's event loop.
 * The prefill request is the client's body with max_tokens 1, stream false, no stream_options and
 * kv_transfer_params; the decode request is the client's body plus the prefill's params. The proxy
 * splices top-level members (src/proxy/offload/json-members.ts: one walk of the body, slices copied);
 * the obvious alternative parses the body once and serialises it twice. Both are timed here on
 * agentic chat bodies (prompt text, escaped newlines) and on bodies whose bulk is a `hash_ids`
 * array (digits and commas, which the walk visits byte by byte), both outputs built per sample.
 *
 *   node --import tsx bench/offload-bodies.ts [--quick]
 *
 * Not part of `npm run bench`: it answers one design question (docs/proxy.md "Prefill offload"
 * quotes the figures) and runs in seconds.
 */
import { parseArgs } from 'node:util';

import { agenticChatBody } from './lib/agentic-body.mjs';
import { machineInfo, printMachine } from './lib/machine.mjs';
import { OffloadBodies } from '../src/proxy/offload/offload-bodies.js';

const { values } = parseArgs({ options: { quick: { type: 'boolean' } } });
const SAMPLES = values.quick === true ? 15 : 61;

const PARAMS =
  '{"do_remote_prefill":true,"do_remote_decode":false,"remote_engine_id":"e0","remote_block_ids":[1,2,3],' +
  '"remote_host":"10.0.0.2","remote_port":5600,"tp_size":1}';
const PREFILL_PARAMS = {
  do_remote_decode: true,
  do_remote_prefill: false,
  remote_engine_id: null,
  remote_block_ids: null,
  remote_host: null,
  remote_port: null,
};

/** The splice: one walk, two rebuilt bodies. */
function splice(body: Buffer): number {
  const bodies = OffloadBodies.of(body)!;
  return bodies.prefill().length + bodies.decode(PARAMS).length;
}

/** The alternative: one parse, two serialisations. */
function reserialise(body: Buffer): number {
  const parsed = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
  const { stream_options: _o, min_tokens: _m, min_completion_tokens: _c, ...rest } = parsed;
  const prefill = Buffer.from(
    JSON.stringify({ ...rest, max_tokens: 1, stream: false, kv_transfer_params: PREFILL_PARAMS }),
  );
  const decode = Buffer.from(JSON.stringify({ ...parsed, kv_transfer_params: JSON.parse(PARAMS) as unknown }));
  return prefill.length + decode.length;
}

function medianUs(fn: (b: Buffer) => number, body: Buffer): number {
  const times: number[] = [];
  let sink = 0;
  for (let i = 0; i < SAMPLES; i++) {
    const t0 = performance.now();
    sink += fn(body);
    times.push((performance.now() - t0) * 1000);
  }
  if (sink < 0) console.log(sink);
  times.sort((a, b) => a - b);
  return times[Math.floor(times.length / 2)]!;
}

function hashIdsBody(bytes: number): Buffer {
  const ids: number[] = [];
  let n = 0;
  for (let size = 0; size < bytes; size += 12) ids.push(1e10 + n++);
  return Buffer.from(JSON.stringify({ model: 'm', prompt: 'x', hash_ids: ids, max_tokens: 64, stream: true }));
}

printMachine(machineInfo());
console.log(`samples: ${SAMPLES} per figure (median shown), both outputs built per sample\n`);
console.log('body                 size      splice µs   parse+stringify µs   ratio');
for (const [kind, make] of [
  ['agentic chat', (bytes: number) => agenticChatBody(bytes, { max_tokens: 512, stream: true })],
  ['hash_ids array', hashIdsBody],
] as const) {
  for (const kib of [16, 128, 512, 2048]) {
    const body = make(kib * 1024);
    // Warm both paths (JIT) before timing.
    for (let i = 0; i < 5; i++) {
      splice(body);
      reserialise(body);
    }
    const a = medianUs(splice, body);
    const b = medianUs(reserialise, body);
    console.log(
      `${kind.padEnd(16)} ${`${(body.length / 1024).toFixed(0)} KiB`.padStart(9)} ${a.toFixed(1).padStart(12)} ` +
        `${b.toFixed(1).padStart(20)} ${`${(b / a).toFixed(1)}x`.padStart(7)}`,
    );
  }
}
