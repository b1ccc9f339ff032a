/**
 * Slightly-off trace input gives the right answer or a refusal, never a wrong number (issue 14):
 * block sizes nobody stated, timestamps in the other unit, lines out of arrival order, session
 * inference on a session trace, empty input, gzip, byte-order marks and blank lines.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';

import { afterAll, describe, expect, it } from 'vitest';

import { characterizeTrace } from '../src/analysis/characterize.js';
import { ArrivalSort } from '../src/trace/arrival-sort.js';
import { fittingBlockSizes } from '../src/trace/block-size-inference.js';
import { readLines } from '../src/trace/line-reader.js';
import { READ_AHEAD_LINES, readTrace, type ReadTraceOptions } from '../src/trace/read-trace.js';
import type { TraceRequest } from '../src/trace/types.js';
import { readAll } from './helpers/read-all.js';
import { Rng } from './helpers/random.js';

const MOONCAKE = fileURLToPath(new URL('../data/mooncake_synthetic_trace.jsonl', import.meta.url));
const MOONCAKE_LINES: Record<string, unknown>[] = readFileSync(MOONCAKE, 'utf8')
  .trim()
  .split('\n')
  .map((line) => JSON.parse(line));
const dir = mkdtempSync(join(tmpdir(), 'kvroute-rules-'));
let files = 0;
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function file(content: string | Buffer | readonly object[]): string {
  const path = join(dir, `t${files++}.jsonl`);
  writeFileSync(
    path,
    typeof content === 'string' || Buffer.isBuffer(content)
      ? content
      : content.map((line) => JSON.stringify(line)).join('\n') + '\n',
  );
  return path;
}

const refusal = (path: string, options?: ReadTraceOptions) =>
  readAll(path, options).then(
    () => undefined,
    (error: unknown) => error as Error & { code: string },
  );

/** The public trace as a session trace whose lines carry no block_size (512-token blocks). */
const sessionLines512: Record<string, unknown>[] = MOONCAKE_LINES.map((line, i) => ({
  session_id: `s${i % 300}`,
  ...line,
}));

describe('block size nobody stated', () => {
  it('fittingBlockSizes is exactly the set of B with ceil(L / B) = k (randomized)', () => {
    const rng = new Rng(14);
    for (let trial = 0; trial < 20_000; trial++) {
      const inputLength = rng.int(0, 200_000);
      const size = rng.int(1, 2048);
      const ids = Math.ceil(inputLength / size);
      const [lo, hi] = fittingBlockSizes(inputLength, ids);
      expect(lo).toBeLessThanOrEqual(size);
      expect(hi).toBeGreaterThanOrEqual(size);
      for (const b of [lo, hi]) if (Number.isFinite(b)) expect(Math.ceil(inputLength / b)).toBe(ids);
      if (lo > 1) expect(Math.ceil(inputLength / (lo - 1))).not.toBe(ids);
      if (Number.isFinite(hi)) expect(Math.ceil(inputLength / (hi + 1))).not.toBe(ids);
    }
  });

  it('reads a session trace of 512-token blocks at 512, says so, and gets the stated ceilings', async () => {
    const unstated = file(sessionLines512);
    const stated = file(sessionLines512.map((line) => ({ ...line, block_size: 512 })));
    const { requests, stats } = await readAll(unstated);
    expect(stats.blockSize).toBe(512);
    expect(requests.every((r) => r.blockSize === 512)).toBe(true);
    expect(stats.notes).toEqual([expect.stringMatching(/^block size 512 inferred: .*--block-size 512$/)]);
    expect(stats.warnings.hash_ids_length).toBe(0);
    const summary = await characterizeTrace(readTrace(unstated), { workers: 0 });
    const truth = await characterizeTrace(readTrace(stated), { workers: 0 });
    expect(summary).toEqual(truth);
    expect(summary.block_size).toBe(512);
  });

  it('reads a Mooncake trace of 16-token blocks at 16', async () => {
    const rng = new Rng(7);
    const lines = Array.from({ length: 200 }, (_, i) => {
      const inputLength = rng.int(1, 5000);
      return { timestamp: i * 100, input_length: inputLength, output_length: 1, hash_ids: ids(inputLength, 16) };
    });
    const { stats } = await readAll(file(lines));
    expect(stats.blockSize).toBe(16);
    expect(stats.notes[0]).toMatch(/block size 16 inferred: no line states block_size, the Mooncake default 512/);
  });

  it('refuses lines that disagree, naming both and suggesting --block-size', async () => {
    const lines = [
      { timestamp: 0, input_length: 1024, output_length: 1, hash_ids: [1, 2] },
      { timestamp: 1, input_length: 1024, output_length: 1, hash_ids: ids(1024, 16) },
    ];
    const error = await refusal(file(lines));
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_FORMAT' });
    expect(error!.message).toMatch(
      /line 2: hash_ids: the lines disagree on the block size: line 1 \(input_length 1024, 2 ids\) needs at least 512 .* line 2 \(input_length 1024, 64 ids\) at most 16.*Give --block-size B/,
    );
    // Stated, the same lines read, with the disagreeing one counted.
    const { stats } = await readAll(file(lines), { blockSize: 512 });
    expect(stats.warnings.hash_ids_length).toBe(1);
  });

  it('refuses a disagreeing line past the read-ahead', async () => {
    const lines = Array.from({ length: READ_AHEAD_LINES + 10 }, (_, i) => ({
      session_id: `s${i}`,
      timestamp: i,
      input_length: 100 + (i % 50),
      output_length: 1,
      hash_ids: ids(100 + (i % 50), 16),
    }));
    lines[READ_AHEAD_LINES + 5]!.hash_ids = [1];
    const error = await refusal(file(lines));
    expect(error!.message).toMatch(
      new RegExp(
        `line ${READ_AHEAD_LINES + 6}: hash_ids: has 1 ids.*was inferred from lines 1–${READ_AHEAD_LINES}.*--block-size`,
      ),
    );
  });

  it('refuses a block size the lines cannot tell, listing what fits', async () => {
    // One block each and 40 tokens: 64, 128, 256, … all fit, the session default 16 does not.
    const lines = Array.from({ length: 5 }, (_, i) => ({
      session_id: 's',
      turn: i + 1,
      timestamp: i,
      input_length: 40,
      output_length: 1,
      hash_ids: [i],
    }));
    const error = await refusal(file(lines));
    expect(error!.message).toMatch(
      /not stated .* default 16 does not fit, .* fit any of 40 or more \(powers of two: 64, 128/,
    );
    expect((await readAll(file(lines), { blockSize: 64 })).stats.blockSize).toBe(64);
  });
});

describe('timestamp units', () => {
  const inSeconds = MOONCAKE_LINES.map((line) => ({ ...line, timestamp: (line.timestamp as number) / 1000 }));

  it('warns with both readings when a Mooncake trace is in seconds; --time-unit s reads it right', async () => {
    const path = file(inSeconds);
    const { stats } = await readAll(path);
    expect(stats.warnings.time_unit).toBe(1);
    expect(stats.firstWarning.time_unit).toMatch(
      /timestamps look like seconds, not milliseconds: read as milliseconds .* 3\.\d k requests\/s .*read as seconds, 3\.\d+ requests\/s .*--time-unit s/,
    );
    await expect(readAll(path, { strict: true })).rejects.toThrow(/timestamps look like seconds.*\(strict\)/);
    const stated = await readAll(path, { timeUnit: 's' });
    const truth = await readAll(MOONCAKE);
    expect(stated.stats.warnings.time_unit).toBe(0);
    stated.requests.forEach((r, i) => expect(r.arrival).toBeCloseTo(truth.requests[i]!.arrival, 9));
  });

  it('warns when a session trace is in milliseconds; --time-unit ms reads it right', async () => {
    const seconds: Record<string, unknown>[] = sessionLines512
      .slice(0, 500)
      .map((line) => ({ ...line, block_size: 512 }));
    const millis = seconds.map((line) => ({ ...line, timestamp: (line.timestamp as number) * 1000 }));
    const { stats } = await readAll(file(millis));
    expect(stats.firstWarning.time_unit).toMatch(/timestamps look like milliseconds, not seconds: .*--time-unit ms/);
    const stated = await readAll(file(millis), { timeUnit: 'ms' });
    const truth = await readAll(file(seconds));
    expect(stated.stats.warnings.time_unit).toBe(0);
    expect(stated.requests.map((r) => r.arrival)).toEqual(truth.requests.map((r) => r.arrival));
  });

  it('stays quiet on plausible traces and on too few lines to judge', async () => {
    expect((await readAll(MOONCAKE)).stats.warnings.time_unit).toBe(0);
    expect((await readAll(file(inSeconds.slice(0, 20)))).stats.warnings.time_unit).toBe(0);
  });
});

describe('arrival order', () => {
  it('ArrivalSort releases a stable sort, and refuses exactly the items earlier than one released (randomized)', () => {
    const rng = new Rng(11);
    for (let trial = 0; trial < 500; trial++) {
      const window = rng.int(1, 20);
      const items = Array.from({ length: rng.int(0, 200) }, (_, line) => ({
        arrival: rng.chance(0.7) ? line : rng.int(0, 200),
        line,
      }));
      const sort = new ArrivalSort<{ arrival: number; line: number }>(window);
      const out: typeof items = [];
      const refused: typeof items = [];
      for (const item of items) {
        const last = sort.released;
        const earlier =
          last !== undefined &&
          (item.arrival < last.arrival || (item.arrival === last.arrival && item.line < last.line));
        const accepted = sort.push(item);
        expect(accepted).toBe(!earlier);
        if (!accepted) refused.push(item);
        for (let next = sort.pop(); next !== undefined; next = sort.pop()) out.push(next);
        expect(sort.size).toBeLessThanOrEqual(window);
      }
      for (let next = sort.pop(true); next !== undefined; next = sort.pop(true)) out.push(next);
      const kept = items.filter((item) => !refused.includes(item));
      expect(out).toEqual([...kept].sort((a, b) => a.arrival - b.arrival || a.line - b.line));
    }
  });

  it('hands lines on in arrival order, whatever their local disorder (randomized)', async () => {
    const rng = new Rng(3);
    for (let trial = 0; trial < 8; trial++) {
      const sorted = MOONCAKE_LINES.slice(0, 600).map((line, i) => ({ ...line, timestamp: i * 7 + rng.int(0, 3) * 5 }));
      sorted.sort((a, b) => (a.timestamp as number) - (b.timestamp as number));
      // Displace lines by up to 40 places: every line stays within a 64-line window.
      const shuffled = sorted.map((line, i) => ({ line, key: i + rng.int(0, 40) }));
      shuffled.sort((a, b) => a.key - b.key);
      const options = { reorderWindow: 64, inferSessions: true };
      const got = await readAll(file(shuffled.map((s) => s.line)), options);
      const want = await readAll(file(sorted), options);
      const key = (r: TraceRequest) => [r.arrival, r.hashIds.length, r.hashIds[0]];
      // Ties in arrival may leave in either file order; compare as arrival-sorted multisets and
      // check the order itself.
      const arrivals = got.requests.map((r) => r.arrival);
      expect(arrivals).toEqual([...arrivals].sort((a, b) => a - b));
      expect(got.requests.map(key).sort()).toEqual(want.requests.map(key).sort());
      expect(new Set(got.requests.map((r) => r.session)).size).toBe(new Set(want.requests.map((r) => r.session)).size);
      expect(got.stats.warnings.arrival_order).toBeGreaterThan(0);
    }
  });

  it('resolves a Bailian parent that follows its child in the file', async () => {
    const base = { input_length: 16, output_length: 1, hash_ids: [1], block_size: 16 };
    const lines = [
      { ...base, chat_id: 2, parent_chat_id: 1, timestamp: 5 },
      { ...base, chat_id: 1, parent_chat_id: -1, timestamp: 1 },
    ];
    const { requests, stats } = await readAll(file(lines));
    expect(requests.map((r) => [r.session, r.turn])).toEqual([
      ['1', 1],
      ['1', 2],
    ]);
    expect(stats.warnings.orphan_parent).toBe(0);
  });

  it('refuses a line out of place by more than the window, and any disorder under --strict', async () => {
    const lines = MOONCAKE_LINES.slice(0, 20).map((line, i) => ({ ...line, timestamp: i * 1000 }));
    lines.push({ ...lines[0]!, timestamp: 500 });
    const error = await refusal(file(lines), { reorderWindow: 8 });
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_FORMAT' });
    expect(error!.message).toMatch(
      /line 21: timestamp: 0.5 s is earlier than line \d+ .*more than 8 lines out of arrival order.*--reorder-window/,
    );
    expect((await readAll(file(lines))).requests[1]!.arrival).toBe(0.5);
    await expect(readAll(file(lines), { strict: true })).rejects.toThrow(
      /line 21: timestamp: goes back in time.*\(strict\)/,
    );
  });
});

describe('what the file is', () => {
  it('refuses --infer-sessions and --format mooncake on a session trace', async () => {
    const path = file(sessionLines512.slice(0, 10));
    const infer = await refusal(path, { inferSessions: true });
    expect(infer).toMatchObject({ code: 'ERR_KVROUTE_INVALID_ARG_VALUE' });
    expect(infer!.message).toMatch(
      /--infer-sessions.*is a session trace \(line 1 has session_id\).*Mooncake traces only/,
    );
    const forced = await refusal(path, { format: 'mooncake' });
    expect(forced!.message).toMatch(/format mooncake: .* is a session trace .*--format session/);
  });

  it('refuses an input with no requests', async () => {
    for (const [content, reason] of [
      ['', 'the input is empty'],
      ['\n  \n\t\r\n', 'only blank lines'],
    ] as const) {
      const error = await refusal(file(content));
      expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_EMPTY' });
      expect(error!.message).toMatch(new RegExp(`holds no requests \\(${reason}\\)`));
    }
  });

  it('reads gzip transparently, and names a truncated one', async () => {
    const plain = readFileSync(MOONCAKE);
    const zipped = gzipSync(plain);
    const got = await readAll(file(zipped));
    const want = await readAll(MOONCAKE);
    expect(got.requests).toEqual(want.requests);
    const error = await refusal(file(zipped.subarray(0, zipped.length >> 1)));
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_IO' });
    expect(error!.message).toMatch(/gzip: unexpected end of file \(is the file truncated or corrupt\?\)/);
  });

  it('refuses other compressions and UTF-16 naming the command that converts them', async () => {
    const cases: Array<[number[], RegExp]> = [
      [[0x28, 0xb5, 0x2f, 0xfd, 0, 0], /zstd-compressed.*zstd -dc .*\| kvroute … -/],
      [[0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00, 1], /xz-compressed.*xz -dc/],
      [[0x42, 0x5a, 0x68, 0x39], /bzip2-compressed/],
      [[0xff, 0xfe, 0x7b, 0x00], /UTF-16 text.*iconv/],
    ];
    for (const [bytes, message] of cases) {
      const error = await refusal(file(Buffer.from(bytes)));
      expect(error).toMatchObject({ code: 'ERR_KVROUTE_TRACE_FORMAT' });
      expect(error!.message).toMatch(message);
    }
  });

  it('accepts a UTF-8 BOM, CRLF and whitespace-only lines, keeping line numbers', async () => {
    const lines = MOONCAKE_LINES.slice(0, 5).map((line) => JSON.stringify(line));
    const messy = `\uFEFF${lines[0]}\r\n  \r\n${lines.slice(1, 3).join('\r\n')}\n\t\n${lines.slice(3).join('\n')}\n \n`;
    const got = await readAll(file(messy));
    const want = await readAll(file(lines.join('\n')));
    expect(got.requests).toEqual(want.requests);
    const bad = await refusal(file(`\uFEFF${lines[0]}\n \n{"timestamp": 1,\n`));
    expect(bad!.message).toMatch(/line 3: malformed JSON/);
  });

  it('splits lines the same however the bytes are chunked (randomized)', async () => {
    const rng = new Rng(5);
    const text = Buffer.from(`\uFEFF{"a": 1}\r\n \n{"b": "ü"}\n\t\r\n{"c": 3}`);
    const collect = async (chunks: Buffer[]) => {
      const out = [];
      for await (const line of readLines(
        (async function* () {
          yield* chunks;
        })(),
      ))
        out.push(line);
      return out;
    };
    const whole = await collect([text]);
    expect(whole).toEqual([
      { line: 1, text: '{"a": 1}' },
      { line: 3, text: '{"b": "ü"}' },
      { line: 5, text: '{"c": 3}' },
    ]);
    for (let trial = 0; trial < 300; trial++) {
      const chunks: Buffer[] = [];
      for (let at = 0; at < text.length;) {
        const size = rng.int(1, 6);
        chunks.push(text.subarray(at, at + size));
        at += size;
      }
      expect(await collect(chunks)).toEqual(whole);
    }
  });
});

function ids(inputLength: number, blockSize: number): number[] {
  return Array.from({ length: Math.ceil(inputLength / blockSize) }, (_, i) => i);
}
