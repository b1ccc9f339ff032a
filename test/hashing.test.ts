/**
 * Prompt hashing: XXH64 in C++ and in the TypeScript twin agree with an
 * independent implementation (xxhash-wasm); chained prompt ids agree between
 * the two, count ceil(bytes / chunk), and keep a conversation's earlier turns
 * as a stable prefix.
 */
import xxhash from 'xxhash-wasm';
import { beforeAll, describe, expect, it } from 'vitest';

import { loadNative } from '../src/core/native.js';
import { hashPrompt as referenceHashPrompt } from '../src/core/reference/prompt-hash.js';
import { xxhash64 as referenceXxhash64 } from '../src/core/reference/xxhash64.js';
import { Router, hashPrompt, promptText, type ChatMessage } from '../src/index.js';
import { Rng } from './helpers/random.js';

const encoder = new TextEncoder();

/** Random text mixing ASCII, accents, CJK, emoji and (sometimes) lone surrogates. */
function randomText(rng: Rng, length: number, loneSurrogates = false): string {
  const pieces = ['a', 'Z', ' ', '\n', '{', 'é', 'ß', '中', '文', '😀', '🚀', '\u0000', '\u001e'];
  if (loneSurrogates) pieces.push('\ud800', '\udfff');
  let text = '';
  for (let k = 0; k < length; k += 1) text += rng.pick(pieces);
  return text;
}

describe('XXH64', () => {
  let wasm: Awaited<ReturnType<typeof xxhash>>;
  beforeAll(async () => {
    wasm = await xxhash();
  });

  it('matches the published test vectors', () => {
    const native = loadNative();
    expect(native.xxhash64(new Uint8Array(0), 0n)).toBe(0xef46db3751d8e999n);
    expect(referenceXxhash64(new Uint8Array(0), 0n)).toBe(0xef46db3751d8e999n);
    expect(native.xxhash64(encoder.encode('a'), 0n)).toBe(0xd24ec4f1a98c6e5bn);
  });

  it('agrees with xxhash-wasm on 2,000 random inputs of every length class and seed', () => {
    const native = loadNative();
    const rng = new Rng(2024);
    for (let k = 0; k < 2000; k += 1) {
      const bytes = new Uint8Array(rng.int(0, k % 10 === 0 ? 600 : 70)).map(() => rng.int(0, 255));
      const seed = rng.chance(0.2) ? 0n : rng.u64();
      const expected = wasm.h64Raw(bytes, seed);
      expect(native.xxhash64(bytes, seed)).toBe(expected);
      expect(referenceXxhash64(bytes, seed)).toBe(expected);
    }
  });
});

describe('prompt hashing', () => {
  it('native and reference produce identical chained ids', () => {
    const rng = new Rng(7);
    for (let k = 0; k < 300; k += 1) {
      const text = randomText(rng, rng.int(0, 400), k % 3 === 0);
      const chunkBytes = rng.pick([1, 7, 16, 128, 1000]);
      expect(hashPrompt(text, { chunkBytes, native: true })).toEqual(hashPrompt(text, { chunkBytes, native: false }));
    }
  });

  it('yields ceil(bytes / chunkBytes) ids, each chained on its parent', () => {
    const text = 'x'.repeat(300);
    const ids = hashPrompt(text, { chunkBytes: 128 });
    expect(ids.length).toBe(3);
    expect(ids[0]).toBe(referenceXxhash64(encoder.encode('x'.repeat(128)), 0n));
    expect(ids[1]).toBe(referenceXxhash64(encoder.encode('x'.repeat(128)), ids[0]!));
    expect(ids[2]).toBe(referenceXxhash64(encoder.encode('x'.repeat(44)), ids[1]!));
    expect(ids[1]).not.toBe(ids[0]); // same bytes, different parent
    expect(hashPrompt('')).toEqual(new BigUint64Array(0));
    // UTF-8 bytes, not UTF-16 units: 100 'é' are 200 bytes.
    expect(hashPrompt('é'.repeat(100), { chunkBytes: 128 }).length).toBe(2);
  });

  it('lone surrogates hash as U+FFFD in both, as TextEncoder encodes them', () => {
    expect(hashPrompt('a\ud800b', { native: true })).toEqual(hashPrompt('a\ufffdb', { native: true }));
    expect(referenceHashPrompt('a\ud800b', 128)).toEqual(referenceHashPrompt('a\ufffdb', 128));
  });

  it("keeps a conversation's earlier turns as a stable prefix", () => {
    const turns: ChatMessage[] = [
      { role: 'system', content: 'You are a coding agent. '.repeat(20) },
      { role: 'user', content: 'Fix the failing test in src/parser.ts' },
    ];
    const first = hashPrompt(promptText(turns));
    turns.push(
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'read', arguments: '{"path":"src/parser.ts"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'export function parse() {}\n'.repeat(30) },
    );
    const second = hashPrompt(promptText(turns));
    const full = Math.floor(encoder.encode(promptText(turns.slice(0, 2))).length / 128);
    expect(second.length).toBeGreaterThan(first.length);
    expect(second.subarray(0, full)).toEqual(first.subarray(0, full));
    // The partial last chunk of the first prompt changes as the text grows.
    expect(second[first.length - 1]).not.toBe(first[first.length - 1]);
  });

  it('serialises roles, content parts, names and tool calls, so they change the ids', () => {
    const base: ChatMessage[] = [{ role: 'user', content: 'hello' }];
    const text = promptText(base);
    expect(promptText([{ role: 'system', content: 'hello' }])).not.toBe(text);
    expect(promptText([{ role: 'user', content: [{ type: 'text', text: 'hello' }] }])).toBe(text);
    expect(promptText([{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }])).toContain(
      'image_url',
    );
    expect(promptText([{ role: 'user', content: 'hello', name: 'ann' }])).not.toBe(text);
    expect(promptText([{ role: 'tool', content: 'ok', tool_call_id: 'c1' }])).toContain('tool_call_id=c1');
  });

  it('a chat request routes to the instance holding its conversation', () => {
    for (const native of [true, false]) {
      const r = new Router({ instances: 4, policy: 'unified', native, hashChunkBytes: 64 });
      const convo: ChatMessage[] = [{ role: 'user', content: 'Refactor the router. '.repeat(40) }];
      r.complete(r.route({ messages: convo }));
      const home = r.decision.instance;
      convo.push({ role: 'assistant', content: 'Done. '.repeat(10) }, { role: 'user', content: 'Now add tests.' });
      r.route({ messages: convo });
      expect(r.decision).toMatchObject({ instance: home, reason: 'affinity' });
    }
  });
});
