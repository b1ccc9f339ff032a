// Session reuse is exact: a randomized differential test of encodeWithReuse against encoding
// each turn from scratch, over random agentic sessions (growth, <think> blocks that Qwen3 strips
// from past turns, tool calls, literal special tokens in user text, edits of earlier turns,
// dropped messages), and over random text pairs sharing a prefix. Plus the session cache bounds.
import { beforeAll, describe, expect, it } from 'vitest';

import {
  bundledTokenizerDir,
  commonPrefixLength,
  loadTokenizer,
  readTokenizerFiles,
  type LoadedTokenizer,
} from '../src/tokenize/index.js';
import { AddedTokenScanner } from '../src/tokenize/added-token-anchors.js';
import { encodeWithReuse, type EncodedText } from '../src/tokenize/prefix-reuse.js';
import { SessionCache } from '../src/tokenize/session-cache.js';
import { randomText, sessionRequests } from './helpers/chat-gen.js';
import { Rng } from './helpers/random.js';

let tok: LoadedTokenizer;
beforeAll(() => {
  tok = loadTokenizer(bundledTokenizerDir('qwen3'));
});

const same = (a: Uint32Array, b: Uint32Array) => a.length === b.length && a.every((v, i) => v === b[i]);

describe('session reuse equals a full encode', () => {
  it('over 120 random sessions of up to 12 turns', () => {
    const rng = new Rng(17);
    let turns = 0;
    let reused = 0;
    let total = 0;
    let partial = 0;
    for (let s = 0; s < 120; s += 1) {
      let previous: EncodedText | undefined;
      for (const messages of sessionRequests(rng, rng.int(2, 12))) {
        const withReuse = tok.tokenizeChat(messages, undefined, previous);
        const scratch = tok.tokenizeChat(messages, undefined);
        if (!same(withReuse.encoded.tokens, scratch.encoded.tokens))
          throw new Error(
            `session ${s} turn ${turns}: reuse differs from a full encode for ${JSON.stringify(messages)}`,
          );
        expect(withReuse.encoded.anchors).toEqual(scratch.encoded.anchors);
        if (previous && withReuse.reusedTokens < previous.tokens.length) partial += 1;
        reused += withReuse.reusedTokens;
        total += withReuse.encoded.tokens.length;
        previous = withReuse.encoded;
        turns += 1;
      }
    }
    // The test must exercise reuse, and cut-backs (rewrites, edits) as well as plain growth.
    expect(reused / total).toBeGreaterThan(0.5);
    expect(partial).toBeGreaterThan(20);
    expect(turns).toBeGreaterThan(500);
  });

  it('over random text pairs sharing a prefix, split anywhere (raw encode)', () => {
    const rng = new Rng(99);
    // The scanner over every added token of the tokenizer, as LoadedTokenizer builds it.
    const added = readTokenizerFiles(bundledTokenizerDir('qwen3')).tokenizerJson.added_tokens as {
      content: string;
      id: number;
    }[];
    const scanner = new AddedTokenScanner(added);
    const encode = (t: string) => tok.encode(t, false);
    for (let k = 0; k < 300; k += 1) {
      const prefix = randomText(rng, 20);
      const a = prefix + randomText(rng, 6);
      const b = prefix.slice(0, rng.int(0, prefix.length)) + randomText(rng, 6);
      const first = encodeWithReuse(undefined, a, encode, scanner);
      const second = encodeWithReuse(first.encoded, b, encode, scanner);
      expect(same(second.encoded.tokens, encode(b)), JSON.stringify({ a, b })).toBe(true);
    }
  });
});

describe('commonPrefixLength', () => {
  it('agrees with a per-unit loop on random pairs', () => {
    const rng = new Rng(3);
    for (let k = 0; k < 500; k += 1) {
      const base = 'x'.repeat(rng.int(0, 9000));
      const a = base + randomText(rng, 3);
      const b = base.slice(0, rng.int(0, base.length)) + randomText(rng, 3);
      let n = 0;
      while (n < a.length && n < b.length && a[n] === b[n]) n += 1;
      expect(commonPrefixLength(a, b)).toBe(n);
    }
  });
});

describe('SessionCache', () => {
  const entry = (chars: number, tokens: number): EncodedText => ({
    text: 'x'.repeat(chars),
    tokens: new Uint32Array(tokens),
    anchors: new Uint32Array(2),
  });

  it('evicts the least recently used past the entry bound, and counts hits and misses', () => {
    const cache = new SessionCache(2, 1 << 20);
    cache.set('a', entry(1, 1));
    cache.set('b', entry(1, 1));
    expect(cache.get('a')).toBeDefined(); // a is now the most recent
    cache.set('c', entry(1, 1));
    expect(cache.get('b')).toBeUndefined();
    expect(cache.get('a')).toBeDefined();
    expect(cache.get('c')).toBeDefined();
    expect({ size: cache.size, hits: cache.hits, misses: cache.misses, evictions: cache.evictions }).toEqual({
      size: 2,
      hits: 3,
      misses: 1,
      evictions: 1,
    });
  });

  it('keeps its bytes within the byte bound and refuses an entry larger than it', () => {
    const cache = new SessionCache(100, 1000);
    // 2·100 + 4·50 + 8 = 408 bytes each: two fit, a third evicts the oldest
    for (const key of ['a', 'b', 'c']) cache.set(key, entry(100, 50));
    expect(cache.size).toBe(2);
    expect(cache.bytes).toBe(816);
    expect(cache.get('a')).toBeUndefined();
    cache.set('huge', entry(1000, 1));
    expect(cache.get('huge')).toBeUndefined();
    expect(cache.bytes).toBeLessThanOrEqual(1000);
    cache.set('b', entry(1, 1)); // replacing an entry releases its bytes
    expect(cache.bytes).toBe(408 + 2 + 4 + 8);
  });
});
