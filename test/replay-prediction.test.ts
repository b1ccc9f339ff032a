/**
 * `kvroute replay` records the proxy's x-kvroute-predicted-cached-tokens as
 * `predicted_cached_tokens`: equal to the engines' cached tokens on a trace of whole blocks
 * behind the proxy, and null from a target that sends no such header or a malformed one.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { predictionAccuracy } from '../src/analysis/prediction-accuracy.js';
import { replay } from '../src/replay/replay.js';
import { readRecordFile } from '../src/trace/record-file.js';
import type { TraceRequest } from '../src/trace/types.js';
import { scopedRigs, startFleetProxy } from './helpers/proxy-harness.js';
import { BLOCK, maxTokens, scratch, sseBody, writeTraceFile } from './helpers/replay-rig.js';

const files = scratch();
const rigs = scopedRigs();
afterEach(() => rigs.closeAll());

/** `sessions` sessions of `turns` turns, each turn 4 more whole blocks than the last. */
function wholeBlockTrace(sessions: number, turns: number): TraceRequest[] {
  const requests: TraceRequest[] = [];
  for (let t = 1; t <= turns; t++)
    for (let s = 0; s < sessions; s++)
      requests.push({
        session: `s${s}`,
        turn: t,
        arrival: s * 0.01,
        inputLength: 4 * t * BLOCK,
        outputLength: 3,
        hashIds: Array.from({ length: 4 * t }, (_, i) => s * 10_000 + i),
        blockSize: BLOCK,
      });
  return requests.sort((a, b) => a.arrival - b.arrival || a.turn - b.turn);
}

describe('replay: predicted_cached_tokens', () => {
  it("records the proxy's prediction, equal to the engines' cached tokens on whole blocks", async () => {
    const rig = await startFleetProxy(2, { policy: 'unified+A+B' }, 200);
    rigs.add(rig.close);
    const trace = writeTraceFile(files.path('whole.jsonl'), wholeBlockTrace(4, 3));
    const out = files.path('whole.rec');
    const result = await replay({ trace, target: rig.base, records: out });
    expect(result).toMatchObject({ sent: 12, done: 12, errors: 0 });
    const { records } = readRecordFile(out);
    for (const r of records) {
      expect(r.predicted_cached_tokens).toBeTypeOf('number');
      if (r.turn === 1) expect(r.predicted_cached_tokens).toBe(0);
    }
    const p = predictionAccuracy(records)!;
    expect(p.requests).toBe(12);
    expect(p.actual_apc).toBeGreaterThan(0);
    expect(p.exact_fraction).toBe(1);
  });

  it('records null without the header, or with one that is not a decimal count', async () => {
    const values = [undefined, 'lots', '-16', '12.5', '64'];
    let served = 0;
    const stub = await rigs.stub((_req, res, body) => {
      const value = values[served++ % values.length];
      res.writeHead(200, {
        'content-type': 'text/event-stream',
        ...(value === undefined ? {} : { 'x-kvroute-predicted-cached-tokens': value }),
      });
      res.end(sseBody(maxTokens(body), 10));
    });
    const trace = writeTraceFile(files.path('stub.jsonl'), wholeBlockTrace(values.length, 1));
    const out = files.path('stub.rec');
    const result = await replay({ trace, target: stub.url, records: out });
    expect(result).toMatchObject({ done: values.length, errors: 0 });
    const predictions = readRecordFile(out).records.map((r) => r.predicted_cached_tokens);
    expect(predictions.filter((p) => p === null)).toHaveLength(4);
    expect(predictions.filter((p) => p !== null)).toEqual([64]);
  });
});
