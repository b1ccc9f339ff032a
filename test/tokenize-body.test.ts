// TokenizerPool.tokenizeBody: a raw request body's token ids, as the proxy asks for them —
// a completions prompt of token ids as is (no tokenizer needed), a chat body rendered and encoded
// exactly as tokenizeChat does (with session reuse), a string prompt encoded, the `*` tokenizer
// for other models, and `none` with its reason where a body has no token ids to give.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { bundledTokenizerDir, loadTokenizer, TokenizerPool, type LoadedTokenizer } from '../src/tokenize/index.js';
import { sessionRequests } from './helpers/chat-gen.js';
import { Rng } from './helpers/random.js';

const MODEL = 'Qwen/Qwen3-8B';
let pool: TokenizerPool;
let bare: TokenizerPool;
let local: LoadedTokenizer;
const body = (b: unknown) => Buffer.from(JSON.stringify(b));

beforeAll(async () => {
  pool = await TokenizerPool.open({ tokenizers: { [MODEL]: 'qwen3', '*': 'qwen3' }, threads: 1 });
  bare = await TokenizerPool.open({ tokenizers: { [MODEL]: 'qwen3' }, threads: 1 });
  local = loadTokenizer(bundledTokenizerDir('qwen3'));
});
afterAll(async () => {
  await pool.close();
  await bare.close();
});

describe('TokenizerPool.tokenizeBody', () => {
  it('takes a prompt of token ids as is, even for a model without a tokenizer', async () => {
    expect(
      await bare.tokenizeBody('other', 'completions', body({ model: 'other', prompt: [5, 0, 4294967295] })),
    ).toEqual({
      tokens: Uint32Array.from([5, 0, 4294967295]),
    });
    expect(await bare.tokenizeBody('other', 'completions', body({ model: 'other', prompt: [[1, 2], [3]] }))).toEqual({
      none: 'a batch prompt',
    });
    expect(await bare.tokenizeBody('other', 'completions', body({ model: 'other', prompt: [1, 4294967296] }))).toEqual({
      none: 'token ids out of range',
    });
    expect(await bare.tokenizeBody('other', 'completions', body({ model: 'other', prompt: 'hi' }))).toEqual({
      none: 'no tokenizer for the model',
    });
    expect(await bare.tokenizeBody('other', 'chat', body({ model: 'other', messages: [] }))).toEqual({
      none: 'no tokenizer for the model',
    });
  });

  it("encodes chat bodies exactly as tokenizeChat, reusing a session's turns, and string prompts", async () => {
    const rng = new Rng(17);
    for (const messages of sessionRequests(rng, 5)) {
      const got = await pool.tokenizeBody(MODEL, 'chat', body({ model: MODEL, messages, stream: true }), 'session-a');
      expect('tokens' in got && Array.from(got.tokens)).toEqual(
        Array.from(local.tokenizeChat(messages, undefined).encoded.tokens),
      );
    }
    expect(pool.stats().sessions.hits).toBe(4);
    expect(pool.stats().reusedTokens).toBeGreaterThan(0);
    // Another model takes the `*` tokenizer.
    const text = await pool.tokenizeBody(
      'some/other-model',
      'completions',
      body({ model: 'x', prompt: 'Hello, world!' }),
    );
    expect(text).toEqual({ tokens: Uint32Array.from([9707, 11, 1879, 0]) });
    expect(pool.covers('some/other-model')).toBe(true);
    expect(bare.covers('some/other-model')).toBe(false);
  });

  it('rejects malformed messages naming the field', async () => {
    await expect(
      pool.tokenizeBody(
        MODEL,
        'chat',
        body({ model: MODEL, messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }),
      ),
    ).rejects.toMatchObject({
      code: 'ERR_KVROUTE_TOKENIZE_INPUT',
      message: expect.stringMatching(/messages\[0\]\.content\[0\]/),
    });
  });
});
