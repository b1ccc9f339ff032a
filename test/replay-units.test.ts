/**
 * The replay's pure parts: prompt text from block ids (shared blocks give byte-identical
 * prefixes), the SSE reader (split chunks, CRLF, comments, usage, errors), and --slo parsing.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { REPLAY_CLI_DEFAULTS } from '../src/cli/defaults/replay-defaults.js';
import { parseSlo, saltBlocks } from '../src/replay/find-srr.js';
import { BlockText, blockWords, WORDS } from '../src/replay/block-text.js';
import { REPLAY_DEFAULTS } from '../src/replay/replay.js';
import { ReplayTally } from '../src/replay/replay-tally.js';
import { SseReader } from '../src/replay/sse.js';
import { replayProgress } from '../src/cli/replay-progress.js';
import type { RequestRecord } from '../src/trace/records.js';

const record: RequestRecord = {
  session: 's',
  turn: 1,
  instance: 0,
  dispatch: 0,
  first_token: 0.1,
  finish: 0.2,
  input_tokens: 10,
  cached_tokens: 0,
  output_tokens: 2,
  overlapped: false,
  preemptions: 0,
};

describe('prompt text from block ids', () => {
  const text = new BlockText(16);

  it('draws from 256 distinct words', () => expect(new Set(WORDS).size).toBe(256));

  it('is a pure function of the ids: one word per token, a leading space each', () => {
    const a = new BlockText(16).prompt([1, 2, 3], 48);
    expect(text.prompt([1, 2, 3], 48)).toBe(a);
    expect(a.split(' ').length - 1).toBe(48);
    expect(blockWords(7, 16)).not.toBe(blockWords(8, 16));
  });

  it('shared leading blocks give byte-identical prefixes, exactly through the shared blocks', () => {
    const earlier = text.prompt([10, 11, 12], 45);
    const later = text.prompt([10, 11, 12, 13, 14], 70);
    const shared = text.prompt([10, 11], 32);
    expect(later.startsWith(shared)).toBe(true);
    expect(earlier.startsWith(shared)).toBe(true);
    // The partial last block (13 of 16 tokens) is a prefix of the full block's text.
    expect(later.startsWith(earlier)).toBe(true);
    // A different id at block 2 diverges right after the shared prefix.
    const other = text.prompt([10, 11, 99], 48);
    expect(other.startsWith(shared)).toBe(true);
    expect(other.slice(shared.length, shared.length + 40)).not.toBe(later.slice(shared.length, shared.length + 40));
  });

  it('ids beyond 32 bits are distinct', () => {
    expect(blockWords(2 ** 40 + 1, 16)).not.toBe(blockWords(1, 16));
  });
});

describe('SSE reader', () => {
  const stream =
    ': ping\n\ndata: {"choices":[{"text":""}]}\n\ndata: {"choices":[{"text":" a"}]}\r\n\r\n' +
    'event: x\ndata:{"choices":[{"delta":{"content":"é"}}]}\n\n' +
    'data: {"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":8}}}\n\n' +
    'data: not json\n\ndata: [DONE]\n\n';

  it.each([1, 2, 3, 7, 1000])('reads a stream split every %i bytes', (step) => {
    let t = 0;
    const sse = new SseReader(() => ++t);
    const bytes = Buffer.from(stream);
    for (let at = 0; at < bytes.length; at += step) sse.push(bytes.subarray(at, at + step));
    sse.end();
    expect(sse.tokenChunks).toBe(2);
    expect(sse.firstTokenAt).toBe(1);
    expect(sse.usage).toMatchObject({ prompt_tokens: 12, prompt_tokens_details: { cached_tokens: 8 } });
    expect(sse.done).toBe(true);
    expect(sse.error).toBeUndefined();
  });

  it('an error event and a stream without [DONE] are told apart', () => {
    const sse = new SseReader();
    sse.push(Buffer.from('data: {"error":{"message":"boom"}}\n\ndata: {"choices":[{"text":"x"}]}'));
    sse.end();
    expect(sse.error).toBe('boom');
    expect(sse.tokenChunks).toBe(1);
    expect(sse.done).toBe(false);
  });
});

describe('--slo', () => {
  it('parses terms and refuses bad ones', () => {
    expect(parseSlo('ttft_p90=10,tpot_p99=0.1')).toEqual([
      { metric: 'ttft', percentile: 90, limit: 10 },
      { metric: 'tpot', percentile: 99, limit: 0.1 },
    ]);
    expect(() => parseSlo('e2e_p90=1')).toThrow(/e2e_p90=1/);
    expect(() => parseSlo('ttft_p90=0')).toThrow(RangeError);
  });

  it('find-srr trials: each its own block ids, the sharing within a trial kept', () => {
    const base = [
      { ...record, hashIds: [1, 2, 3], blockSize: 16, arrival: 0, inputLength: 48, outputLength: 2 },
      { ...record, turn: 2, hashIds: [1, 2, 3, 4], blockSize: 16, arrival: 0, inputLength: 64, outputLength: 2 },
    ];
    expect(saltBlocks(base, 0)).toEqual(base);
    const [a, b] = saltBlocks(base, 1);
    const [c] = saltBlocks(base, 2);
    expect(b!.hashIds.slice(0, 3)).toEqual(a!.hashIds);
    expect(new Set([...a!.hashIds, ...c!.hashIds, ...base[0]!.hashIds]).size).toBe(9);
    expect(saltBlocks([{ ...base[0]!, hashIds: [2 ** 53 - 1] }], 1)[0]!.hashIds[0]).toBeLessThan(2 ** 53);
    expect(base[0]!.hashIds).toEqual([1, 2, 3]);
  });

  it("the CLI's defaults are the library's", () => {
    expect(REPLAY_CLI_DEFAULTS).toMatchObject({
      speed: REPLAY_DEFAULTS.speed,
      grace: REPLAY_DEFAULTS.grace,
      connections: REPLAY_DEFAULTS.connections,
      maxConnectionFailures: REPLAY_DEFAULTS.maxConnectionFailures,
    });
  });
});

describe('progress', () => {
  // The progress timers run on vitest's fake clock: each test moves time itself, so what is
  // drawn does not depend on how busy the machine is.
  beforeEach(() => {
    vi.useFakeTimers();
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('on a TTY: one line with done of the total, sent, errors, the rate and the ETA', () => {
    const chunks: string[] = [];
    const stream = { isTTY: true, columns: 160, write: (text: string) => chunks.push(text) > 0 };
    const tally = new ReplayTally();
    tally.sent = 7;
    tally.finish({ ...record, error: 'HTTP 503: x' });
    tally.finish(record);
    const progress = replayProgress('replay', tally, 10, { stream });
    vi.advanceTimersByTime(350); // three polls: the rate is measured
    progress.stop();
    // eslint-disable-next-line no-control-regex
    const frames = chunks.map((c) => c.replace(/\u001b(\[[0-9;?]*[A-Za-z]|[78])/g, '')).filter((c) => c !== '');
    expect(frames.at(-1)).toMatch(/^replay .*20% · 2 \/ 10 requests · 7 sent · 1 errors · 0\/s · ETA -$/);
  });

  it('off a TTY: a plain line per interval with sent, done, errors and the rate; nothing after stop', () => {
    const lines: string[] = [];
    const stream = { isTTY: false, write: (text: string) => lines.push(text) > 0 };
    const tally = new ReplayTally();
    tally.sent = 5;
    tally.finish({ ...record, error: 'HTTP 503: x' });
    const progress = replayProgress('replay', tally, 10, { stream, everyMs: 20 });
    vi.advanceTimersByTime(19);
    expect(lines).toEqual([]);
    vi.advanceTimersByTime(21);
    expect(lines).toEqual([
      'kvroute replay: 5 sent, 1 done, 1 errors, 50 req/s, 20.0 ms elapsed\n',
      'kvroute replay: 5 sent, 1 done, 1 errors, 25 req/s, 40.0 ms elapsed\n',
    ]);
    progress.stop();
    vi.advanceTimersByTime(1_000);
    expect(lines).toHaveLength(2);
  });
});
