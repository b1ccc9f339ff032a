/**
 * Trace formats: the real Mooncake file, round trips of both formats, every bad input the
 * reader names, session inference, Bailian parent chains, atomic writes, and streaming.
 */
import { createWriteStream, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { readTrace } from '../src/trace/read-trace.js';
import { writeTrace } from '../src/trace/write-trace.js';
import type { TraceFormat, TraceRequest } from '../src/trace/types.js';
import { readAll } from './helpers/read-all.js';
import { Rng } from './helpers/random.js';

const MOONCAKE = fileURLToPath(new URL('../data/mooncake_synthetic_trace.jsonl', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-trace-'));
let files = 0;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(lines: readonly (string | object)[]): string {
  const path = join(dir, `t${files++}.jsonl`);
  writeFileSync(path, lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n') + '\n');
  return path;
}

function randomRequests(rng: Rng, count: number, blockSize: number, sessions: boolean): TraceRequest[] {
  const turns = new Map<string, number>();
  let arrival = 0;
  let ticks = 0;
  return Array.from({ length: count }, (_, i) => {
    // Session traces keep any double; Mooncake keeps milliseconds, so its arrivals sit on a grid
    // of whole and half milliseconds (as written by a tool that records ms).
    if (sessions) arrival += rng.chance(0.3) ? 0 : rng.int(0, 5000) / (rng.chance(0.5) ? 1000 : 7);
    else if (!rng.chance(0.3)) ticks += rng.int(1, 9000);
    if (!sessions) arrival = ticks / 2000;
    const inputLength = rng.int(0, 40 * blockSize);
    const hashIds = Array.from({ length: Math.ceil(inputLength / blockSize) }, () => rng.int(0, 2 ** 40));
    const base = { arrival, inputLength, outputLength: rng.int(0, 900), hashIds, blockSize };
    if (!sessions) return { ...base, session: `r${i}`, turn: 1, sessionless: true };
    const session = rng.chance(0.5) ? `s${rng.int(0, 9)}` : `sess "${rng.int(0, 3)}" ✓`;
    const turn = (turns.get(session) ?? rng.int(-1, 2)) + rng.int(1, 3);
    turns.set(session, turn);
    const request: TraceRequest = { ...base, session, turn };
    if (rng.chance(0.3)) Object.assign(request, { chatId: i, parentChatId: rng.chance(0.5) ? -1 : i - 1 });
    return request;
  });
}

async function roundTrip(requests: TraceRequest[], format: TraceFormat): Promise<TraceRequest[]> {
  const path = join(dir, `rt${files++}.jsonl`);
  expect((await writeTrace(requests, path, format)).requests).toBe(requests.length);
  return (await readAll(path, { format })).requests;
}

describe('reading traces', () => {
  it('loads the public Mooncake trace: 3,993 sessionless requests in 512-token blocks, no warnings', async () => {
    const { requests, stats } = await readAll(MOONCAKE);
    expect(stats).toMatchObject({ format: 'mooncake', blockSize: 512, requests: 3993, sessions: 3993 });
    expect(stats.warnings).toEqual({ hash_ids_length: 0, arrival_order: 0, orphan_parent: 0, time_unit: 0 });
    expect(stats.notes).toEqual([]);
    expect(requests[0]).toMatchObject({ arrival: 0, inputLength: 40160, outputLength: 6, sessionless: true });
    expect(requests[0]!.hashIds).toEqual(Array.from({ length: 79 }, (_, i) => i));
    expect(requests.at(-1)!.arrival).toBeCloseTo(1022.025, 6);
  });

  it('round-trips session traces exactly, chat ids included', async () => {
    for (const blockSize of [16, 512]) {
      const requests = randomRequests(new Rng(blockSize), 300, blockSize, true);
      expect(await roundTrip(requests, 'session')).toEqual(requests);
    }
  });

  it('round-trips Mooncake traces exactly (ms timestamps, and a non-512 block size as an extension)', async () => {
    for (const blockSize of [512, 64]) {
      const requests = randomRequests(new Rng(7 + blockSize), 300, blockSize, false);
      expect(await roundTrip(requests, 'mooncake')).toEqual(requests);
    }
  });

  it('takes sessions from the Bailian parent chain when session_id is absent', async () => {
    const row = (chat: number, parent: number, t: number, extra = {}) => ({
      chat_id: chat,
      parent_chat_id: parent,
      timestamp: t,
      input_length: 16,
      output_length: 2,
      hash_ids: [chat],
      ...extra,
    });
    const { requests, stats } = await readAll(
      file([
        row(10, -1, 0),
        row(20, -1, 1),
        row(11, 10, 2),
        row(21, 20, 3),
        row(12, 11, 4, { turn: 7 }),
        row(30, 99, 5),
      ]),
    );
    expect(requests.map((r) => [r.session, r.turn])).toEqual([
      ['10', 1],
      ['20', 1],
      ['10', 2],
      ['20', 2],
      ['10', 7],
      ['30', 1],
    ]);
    expect(stats.warnings.orphan_parent).toBe(1);
    expect(stats.firstWarning.orphan_parent).toMatch(/line 6: parent_chat_id 99 names no earlier chat_id/);
    await expect(readAll(file([row(30, 99, 5)]), { strict: true })).rejects.toThrow(/line 1: .*parent_chat_id 99/);
  });

  it('--infer-sessions joins a request to the earlier request whose full hash_ids it extends', async () => {
    const line = (ids: number[], t: number) => ({
      timestamp: t,
      input_length: ids.length * 512,
      output_length: 1,
      hash_ids: ids,
    });
    const { requests, stats } = await readAll(
      file([
        line([1, 2], 0), //        A: new session m0
        line([1, 2, 3], 1), //     extends A → m0
        line([7], 2), //           new → m1
        line([1, 2, 4], 3), //     extends A (not the longer [1,2,3]) → m0
        line([1, 2, 3, 5], 4), //  extends [1,2,3] → m0
        line([7, 8], 5), //        extends [7] → m1
        line([1, 9], 6), //        shares only [1], which no request ended at → m2
        line([7], 7), //           repeats [7] exactly → m1
      ]),
      { inferSessions: true },
    );
    expect(requests.map((r) => `${r.session}/${r.turn}`)).toEqual([
      'm0/1',
      'm0/2',
      'm1/1',
      'm0/3',
      'm0/4',
      'm1/2',
      'm2/1',
      'm1/3',
    ]);
    expect(requests.every((r) => r.sessionless === undefined)).toBe(true);
    expect(stats.sessions).toBe(3);
  });
});

describe('bad trace input', () => {
  const good = { timestamp: 0, input_length: 1024, output_length: 5, hash_ids: [1, 2] };
  const session = { ...good, session_id: 's', turn: 1, hash_ids: Array.from({ length: 64 }, (_, i) => i) };
  const cases: Array<[string, (string | object)[], RegExp]> = [
    ['malformed JSON', [good, '{"timestamp": 1,'], /line 2: malformed JSON/],
    ['a JSON array', [good, good, '[1, 2]'], /line 3: expected a JSON object/],
    ['a missing field', [good, { ...good, input_length: undefined }], /line 2: input_length: missing field/],
    ['a negative input length', [{ ...good, input_length: -4 }], /line 1: input_length: must not be negative, got -4/],
    ['a negative output length', [{ ...good, output_length: -1 }], /line 1: output_length: must not be negative/],
    ['a fractional length', [{ ...good, output_length: 1.5 }], /line 1: output_length: must be an integer, got 1.5/],
    ['a string timestamp', [{ ...good, timestamp: '5' }], /line 1: timestamp: must be a number, got "5"/],
    ['a negative timestamp', [{ ...good, timestamp: -1 }], /line 1: timestamp: must not be negative/],
    ['hash_ids not an array', [{ ...good, hash_ids: 'abc' }], /line 1: hash_ids: must be an array of integers/],
    ['a non-integer id', [{ ...good, hash_ids: [1, 'x'] }], /line 1: hash_ids\[1\]: must be an integer/],
    ['an id beyond 2^53', [{ ...good, hash_ids: [1, 2 ** 60] }], /line 1: hash_ids\[1\]: .*lose precision/],
    ['a zero block size', [{ ...good, block_size: 0 }], /line 1: block_size: must be at least 1, got 0/],
    [
      'a block size that changes',
      [good, { ...good, block_size: 256, hash_ids: [1, 2, 3, 4] }],
      /line 2: block_size: 256 differs from the trace's 512 \(line 1\)/,
    ],
    [
      'a turn that does not increase',
      [session, { ...session, session_id: 't' }, { ...session, turn: 2 }, { ...session, turn: 2 }],
      /line 4: turn: 2 does not follow turn 2 \(line 3\) of session "s"/,
    ],
  ];
  it.each(cases)('%s is an error naming the line and the field', async (_, lines, message) => {
    const error = await readAll(file(lines)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_FORMAT' });
    expect((error as Error).message).toMatch(message);
  });

  it('a session trace line with neither session_id nor chat_id is an error naming session_id', async () => {
    const { session_id: _, ...orphan } = session;
    await expect(readAll(file([orphan]), { format: 'session' })).rejects.toThrow(
      /line 1: session_id: missing field \(a session trace needs session_id, or chat_id and parent_chat_id\)/,
    );
  });

  it('counts hash_ids that contradict a stated block size, and refuses them under --strict', async () => {
    const path = file([good, { ...good, input_length: 1025 }, { ...good, input_length: 100, hash_ids: [1, 2, 3] }]);
    await expect(readAll(path)).rejects.toThrow(/line 3: hash_ids: the lines disagree on the block size.*--block-size/);
    const { requests, stats } = await readAll(path, { blockSize: 512 });
    expect(requests).toHaveLength(3);
    expect(stats.warnings.hash_ids_length).toBe(2);
    expect(stats.firstWarning.hash_ids_length).toMatch(
      /line 2: hash_ids: has 2 ids, but input_length 1025 at block size 512 needs 3/,
    );
    await expect(readAll(path, { strict: true, blockSize: 512 })).rejects.toThrow(
      /line 2: hash_ids: has 2 ids.*\(strict\)/,
    );
  });

  it('sorts timestamps that go backwards, counting them, and refuses them under --strict', async () => {
    const path = file([{ ...good, timestamp: 5000 }, good]);
    const { requests, stats } = await readAll(path);
    expect(stats.warnings.arrival_order).toBe(1);
    expect(requests.map((r) => r.arrival)).toEqual([0, 5]);
    await expect(readAll(path, { strict: true })).rejects.toThrow(/line 2: timestamp: goes back in time/);
  });

  it('names a missing file and refuses bad options', async () => {
    await expect(readAll(join(dir, 'absent.jsonl'))).rejects.toMatchObject({ code: 'ERR_KVROUTE_TRACE_IO' });
    expect(() => readTrace(MOONCAKE, { format: 'csv' as TraceFormat })).toThrow(/format must be one of/);
    expect(() => readTrace(MOONCAKE, { blockSize: 0 })).toThrow(/blockSize must be a positive integer/);
    expect(() => readTrace(MOONCAKE, { format: 'session', inferSessions: true })).toThrow(/inferSessions/);
  });
});

describe('writing traces', () => {
  it('never leaves a half-written file: a failing source keeps the old file and no temporary', async () => {
    const path = join(dir, 'atomic.jsonl');
    writeFileSync(path, 'old contents\n');
    function* failing(): Generator<TraceRequest> {
      yield* randomRequests(new Rng(3), 5000, 16, true);
      throw new Error('source failed');
    }
    await expect(writeTrace(failing(), path, 'session')).rejects.toThrow('source failed');
    expect(readFileSync(path, 'utf8')).toBe('old contents\n');
    expect(readdirSync(dir).filter((name) => name.includes('atomic') && name !== 'atomic.jsonl')).toEqual([]);
  });
});

describe('streaming', () => {
  it('reads 1.2M lines without holding the file in memory', async () => {
    const path = join(dir, 'big.jsonl');
    const out = createWriteStream(path);
    const line = (i: number) =>
      `{"timestamp": ${i}, "input_length": 10240, "output_length": 1, "hash_ids": [${Array.from({ length: 20 }, (_, k) => i * 20 + k).join(', ')}]}\n`;
    for (let i = 0; i < 1_200_000; i += 1000) {
      let chunk = '';
      for (let k = i; k < i + 1000; k++) chunk += line(k);
      if (!out.write(chunk)) await once(out, 'drain');
    }
    out.end();
    await once(out, 'finish');
    const reader = readTrace(path);
    let count = 0;
    let peakHeap = 0;
    let ids = 0;
    for await (const request of reader) {
      if (++count % 100_000 === 0) peakHeap = Math.max(peakHeap, process.memoryUsage().heapUsed);
      ids += request.hashIds.length;
    }
    expect(count).toBe(1_200_000);
    expect(ids).toBe(24_000_000);
    expect(reader.stats.lines).toBe(1_200_000);
    // The file is ~200 MB; one request at a time needs a few MB of heap beyond the test's own.
    expect(peakHeap).toBeLessThan(150 * 2 ** 20);
  });
});
