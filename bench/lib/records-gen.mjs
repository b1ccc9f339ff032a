// @ts-check
// `node records-gen.mjs TRACE OUT`: a record per trace request, as a run on 8 instances might
// have written it: instance by session, dispatch at arrival, cached = most of the prompt after a
// session's first turn, TTFT = 0.1 s + 1 s per 10k uncached tokens + a random queue, decode
// 10 ms/token with an occasional slow one. Deterministic; the header carries the fingerprint.
import { writeRecords } from '../../dist/trace/record-file.js';
import { readTrace } from '../../dist/trace/read-trace.js';
import { fingerprinted, TraceFingerprint } from '../../dist/trace/trace-fingerprint.js';

const [trace, out] = process.argv.slice(2);
if (trace === undefined || out === undefined) throw new Error('usage: records-gen.mjs TRACE OUT');
let seed = 42;
const random = () => (seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32;
const fingerprint = new TraceFingerprint();
/** @type {import('../../dist/trace/records.js').RequestRecord[]} */
const records = [];
const sessions = new Map();
for await (const r of fingerprinted(readTrace(trace), fingerprint)) {
  let instance = sessions.get(r.session);
  if (instance === undefined) sessions.set(r.session, (instance = sessions.size % 8));
  const cached = r.turn === 0 ? 0 : Math.floor(r.inputLength * (0.5 + 0.5 * random()));
  const ttft = 0.1 + (r.inputLength - cached) / 10_000 + (random() < 0.1 ? 5 * random() : 0);
  const output = Math.max(1, r.outputLength);
  const dispatch = r.arrival;
  records.push({
    session: r.session,
    turn: r.turn,
    instance,
    dispatch,
    first_token: dispatch + ttft,
    finish: dispatch + ttft + (output - 1) * (random() < 0.02 ? 0.15 : 0.01),
    input_tokens: r.inputLength,
    cached_tokens: cached,
    output_tokens: output,
    overlapped: false,
    preemptions: 0,
  });
}
writeRecords(out, records, {
  format: 'kvroute-records',
  version: 2,
  source: 'replay',
  trace: { path: trace, fingerprint: fingerprint.digest() },
  instances: 8,
  kvroute_version: '0.1.0',
  command: ['bench', 'records-gen'],
  started_at: new Date().toISOString(),
});
