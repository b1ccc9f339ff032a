/**
 * An answer's output tokens for the learned decode cost (src/proxy/exchange/output-tokens.ts):
 * the engine's usage.completion_tokens when present, else the streamed chunks counted.
 */
import { describe, expect, it } from 'vitest';

import { completionTokensIn, StreamedTokenCounter } from '../src/proxy/exchange/output-tokens.js';

const chunk = (text: string) =>
  Buffer.from(`data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: text } }] })}\n\n`);

describe('output tokens', () => {
  it('reads usage.completion_tokens from a held body, with JSON whitespace', () => {
    expect(completionTokensIn(Buffer.from('{"usage":{"prompt_tokens":5,"completion_tokens":17}}'))).toBe(17);
    expect(completionTokensIn(Buffer.from('{"usage": {"completion_tokens" :\n 3}}'))).toBe(3);
    expect(completionTokensIn(Buffer.from('{"usage":null}'))).toBeUndefined();
    expect(completionTokensIn(Buffer.from('{"completion_tokens": "x"}'))).toBeUndefined();
  });

  it('counts streamed chunks, and prefers the usage chunk when the stream has one', () => {
    const counted = new StreamedTokenCounter();
    for (const text of ['a', 'b', 'c']) counted.feed(chunk(text));
    counted.feed(Buffer.from('data: [DONE]\n\n'));
    expect(counted.tokens).toBe(3);

    const reported = new StreamedTokenCounter();
    // Two events in one read, then the usage-only chunk (no delta).
    reported.feed(Buffer.concat([chunk('a'), chunk('b')]));
    reported.feed(
      Buffer.from(
        `data: ${JSON.stringify({ choices: [], usage: { prompt_tokens: 9, completion_tokens: 40 } })}\n\ndata: [DONE]\n\n`,
      ),
    );
    expect(reported.tokens).toBe(40);
  });
});
