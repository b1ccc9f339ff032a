// TokenizerPool: tokenization on Piscina workers (the build in dist/), equal to the in-thread
// tokenizer; session reuse through the pool; the queue bound, the input bound, unknown models,
// load failures at open() naming the file, a worker dying (out of memory) without taking the
// process with it, and close().
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { bundledTokenizerDir, loadTokenizer, TokenizerPool, type LoadedTokenizer } from '../src/tokenize/index.js';
import { sessionRequests } from './helpers/chat-gen.js';
import { Rng } from './helpers/random.js';

const MODEL = 'Qwen/Qwen3-8B';
const dir = bundledTokenizerDir('qwen3');
let pool: TokenizerPool;
let local: LoadedTokenizer;

beforeAll(async () => {
  pool = await TokenizerPool.open({ tokenizers: { [MODEL]: dir }, threads: 1 });
  local = loadTokenizer(dir);
});
afterAll(async () => {
  await pool.close();
});

async function rejection(promise: Promise<unknown>): Promise<{ code?: string; message: string; file?: string }> {
  try {
    await promise;
  } catch (error) {
    return error as { code?: string; message: string };
  }
  throw new Error('expected a rejection');
}

describe('TokenizerPool', () => {
  it("gives the in-thread tokenizer's ids, and reuses a session's turns exactly", async () => {
    const rng = new Rng(5);
    for (let s = 0; s < 4; s += 1)
      for (const messages of sessionRequests(rng, 6)) {
        const ids = await pool.tokenizeChat(MODEL, messages, { tools: undefined }, `session-${s}`);
        expect(Array.from(ids)).toEqual(Array.from(local.tokenizeChat(messages, undefined).encoded.tokens));
      }
    const stats = pool.stats();
    expect(stats.sessions.entries).toBe(4);
    expect(stats.sessions.hits).toBe(20);
    expect(stats.reusedTokens).toBeGreaterThan(stats.encodedTokens / 4);
    expect(Array.from(await pool.tokenizeText(MODEL, 'Hello, world!'))).toEqual([9707, 11, 1879, 0]);
  });

  it("takes only the template's fields from a whole request body", async () => {
    const body = {
      model: MODEL,
      messages: [{ role: 'user', content: 'hi' }],
      chat_template_kwargs: { enable_thinking: false },
      max_tokens: 5,
    };
    const ids = await pool.tokenizeChat(MODEL, body.messages, body);
    expect(Array.from(ids)).toEqual(
      Array.from(
        local.tokenizeChat(body.messages, { chat_template_kwargs: { enable_thinking: false } }).encoded.tokens,
      ),
    );
  });

  it('rejects bad input with the field named, an unknown model, and text over the input bound', async () => {
    expect(await rejection(pool.tokenizeChat(MODEL, [{ role: 'user', content: 7 }]))).toMatchObject({
      code: 'ERR_KVROUTE_TOKENIZE_INPUT',
      message: expect.stringMatching(/^messages\[0\]\.content: /),
    });
    expect(await rejection(pool.tokenizeText('other', 'x'))).toMatchObject({
      code: 'ERR_KVROUTE_TOKENIZE_INPUT',
      message: 'model: no tokenizer is configured for model "other"',
    });
    const small = await TokenizerPool.open({ tokenizers: { [MODEL]: dir }, threads: 1, maxInputChars: 10 });
    try {
      expect(await rejection(small.tokenizeText(MODEL, 'x'.repeat(11)))).toMatchObject({
        code: 'ERR_KVROUTE_TOKENIZE_INPUT',
        message: "prompt: 11 characters exceed the tokenizer's limit of 10",
      });
      // Text anywhere counts, however deep: here in tool-call arguments nested 40 levels.
      let nested: unknown = 'y'.repeat(11);
      for (let d = 0; d < 40; d += 1) nested = { a: nested };
      const messages = [
        { role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: nested } }] },
      ];
      expect(await rejection(small.tokenizeChat(MODEL, messages))).toMatchObject({
        code: 'ERR_KVROUTE_TOKENIZE_INPUT',
        message: "messages: more than 10 characters of text (the tokenizer's limit)",
      });
    } finally {
      await small.close();
    }
  });

  it('refuses work past its queue bound at once, and serves again after', async () => {
    const tight = await TokenizerPool.open({ tokenizers: { [MODEL]: dir }, threads: 1, maxQueue: 1 });
    try {
      const calls = [0, 1, 2].map(() => tight.tokenizeText(MODEL, 'some text'));
      const results = await Promise.allSettled(calls);
      expect(results.map((r) => r.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
      expect((results[2] as PromiseRejectedResult).reason).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER_BUSY' });
      expect(tight.stats().rejectedBusy).toBe(1);
      expect(Array.from(await tight.tokenizeText(MODEL, 'Hello'))).toEqual([9707]);
    } finally {
      await tight.close();
    }
  });

  it('fails open() with the file named when a tokenizer directory does not load', async () => {
    const scratch = mkdtempSync(join(tmpdir(), 'kvroute-tokpool-'));
    try {
      const bad = join(scratch, 'bad');
      mkdirSync(bad);
      writeFileSync(join(bad, 'tokenizer.json'), '{ not json');
      const error = await rejection(TokenizerPool.open({ tokenizers: { good: dir, bad }, threads: 1 }));
      expect(error).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER', file: join(bad, 'tokenizer.json') });
      expect(error.message).toMatch(/tokenizer\.json: not valid JSON/);
    } finally {
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('survives a worker that runs out of memory: the task rejects, the process lives on', async () => {
    const error = await rejection(
      TokenizerPool.open({ tokenizers: { [MODEL]: dir }, threads: 1, maxWorkerHeapMb: 16 }),
    );
    expect(error).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER_WORKER' });
    expect(error.message).toMatch(/tokenizer worker failed: .*memory/i);
    // this process (and the other pool) carry on
    expect(Array.from(await pool.tokenizeText(MODEL, 'Hello'))).toEqual([9707]);
  });

  it('rejects calls after close()', async () => {
    const closing = await TokenizerPool.open({ tokenizers: { [MODEL]: dir }, threads: 1 });
    await closing.close();
    await closing.close();
    expect(await rejection(closing.tokenizeText(MODEL, 'x'))).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZER_WORKER' });
  });
});
