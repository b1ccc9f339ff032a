/**
 * The Messages and Responses requests as the chat request vLLM renders (src/tokenize/api-requests.ts),
 * the usage and token keys the proxy reads of their answers (api-dialect.ts), and their error shapes.
 */
import { describe, expect, it } from 'vitest';

import { apiDialect } from '../src/proxy/exchange/api-dialect.js';
import { StreamedTokenCounter, completionTokensIn } from '../src/proxy/exchange/output-tokens.js';
import { SseUsageScanner, usageIn } from '../src/proxy/exchange/usage-scan.js';
import { ClientError } from '../src/proxy/server/error-body.js';
import {
  ApiRequestError,
  chatPromptMessages,
  messagesToChat,
  pythonJson,
  pythonStr,
  responsesToChat,
} from '../src/tokenize/api-requests.js';

describe('Messages → chat (vLLM’s conversion)', () => {
  it('system first, blocks to parts, tool use and results, thinking, tools', () => {
    const shape = messagesToChat({
      system: [
        { type: 'text', text: 'You are ' },
        { type: 'text', text: 'an agent.' },
      ],
      messages: [
        { role: 'user', content: 'read it' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 'I should read.' },
            { type: 'text', text: 'Reading.' },
            { type: 'tool_use', id: 'tu_1', name: 'read', input: { path: 'a.ts', lines: [1, 2], deep: true } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'text', text: "it's here" }] },
            { type: 'text', text: 'now edit' },
          ],
        },
        { role: 'assistant', content: [] },
      ],
      tools: [{ name: 'read', description: 'reads a file', input_schema: { properties: {} } }],
    });
    expect(shape.messages).toEqual([
      { role: 'system', content: 'You are an agent.' },
      { role: 'user', content: 'read it' },
      {
        role: 'assistant',
        reasoning: 'I should read.',
        content: 'Reading.',
        tool_calls: [
          {
            id: 'tu_1',
            type: 'function',
            function: { name: 'read', arguments: '{"path": "a.ts", "lines": [1, 2], "deep": true}' },
          },
        ],
      },
      // str() of a list is its Python repr: double quotes around a text with a single quote.
      { role: 'tool', tool_call_id: '', content: `[{'type': 'text', 'text': "it's here"}]` },
      { role: 'user', content: 'now edit' },
    ]);
    expect(shape.tools).toEqual([
      {
        type: 'function',
        function: { name: 'read', description: 'reads a file', parameters: { properties: {}, type: 'object' } },
      },
    ]);
    expect(chatPromptMessages(shape)[0]).toEqual({ role: 'system', content: `tools ${JSON.stringify(shape.tools)}` });
  });

  it('names the field a malformed body gets wrong', () => {
    const bad = (body: Record<string, unknown>, field: string) => {
      const error = (() => {
        try {
          messagesToChat(body);
        } catch (e) {
          return e;
        }
      })();
      expect(error).toBeInstanceOf(ApiRequestError);
      expect((error as ApiRequestError).field).toBe(field);
    };
    bad({}, 'messages');
    bad({ messages: 'hi' }, 'messages');
    bad({ messages: [{ role: 'user', content: 3 }] }, 'messages[0].content');
    bad({ messages: [{ content: 'x' }] }, 'messages[0].role');
    bad({ messages: [], tools: [{ name: 'x' }] }, 'tools[0].input_schema');
  });

  it("writes Python's json.dumps and str()", () => {
    expect(pythonJson({ a: 'é', b: [1, 2.5, null, false], c: {} })).toBe(
      '{"a": "\\u00e9", "b": [1, 2.5, null, false], "c": {}}',
    );
    expect(pythonStr('as is')).toBe('as is');
    expect(pythonStr([{ a: null, b: true, c: 'x\ny', d: `"'` }])).toBe(
      `[{'a': None, 'b': True, 'c': 'x\\ny', 'd': '"\\''}]`,
    );
  });
});

describe('Responses → chat', () => {
  it('instructions, items, function calls and outputs, function tools', () => {
    const shape = responsesToChat({
      instructions: 'Be terse.',
      input: [
        { role: 'user', content: [{ type: 'input_text', text: 'fix it' }] },
        { type: 'reasoning', id: 'r1', summary: [] },
        { type: 'function_call', call_id: 'c1', name: 'shell', arguments: '{"cmd":"ls"}' },
        { type: 'function_call_output', call_id: 'c1', output: 'a.ts' },
        { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'done' }] },
      ],
      tools: [{ type: 'function', name: 'shell', parameters: { type: 'object' } }, { type: 'web_search' }],
    });
    expect(shape.messages).toEqual([
      { role: 'system', content: 'Be terse.' },
      { role: 'user', content: 'fix it' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'shell', arguments: '{"cmd":"ls"}' } }],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'a.ts' },
      { role: 'assistant', content: 'done' },
    ]);
    expect(shape.tools).toEqual([
      { type: 'function', function: { name: 'shell', description: null, parameters: { type: 'object' } } },
    ]);
    expect(responsesToChat({ input: 'hello' }).messages).toEqual([{ role: 'user', content: 'hello' }]);
    expect(() => responsesToChat({})).toThrow(/^input: is required/);
  });
});

describe("each API's usage, tokens and errors", () => {
  it('Anthropic: the prompt is input + cache reads + cache writes; cached are the reads', () => {
    const d = apiDialect('messages');
    const body = Buffer.from(
      '{"usage":{"input_tokens":12,"output_tokens":7,"cache_creation_input_tokens":3,"cache_read_input_tokens":400}}',
    );
    expect(usageIn(body, 0, body.length, d.usage)).toEqual({ prompt_tokens: 415, cached_tokens: 400 });
    expect(completionTokensIn(body, d.completion)).toBe(7);
    const sse = new SseUsageScanner(d.usage);
    const tokens = new StreamedTokenCounter(d.streamedToken, d.completion);
    const events = [
      'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":5,"output_tokens":0,"cache_read_input_tokens":32}}}\n\n',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"a"}}\n\n',
      'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"b"}}\n\n',
      'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":32}}\n\n',
    ];
    // Cut at every byte of the stream: the usage and the count come out the same.
    const all = Buffer.from(events.join(''));
    for (let cut = 1; cut < all.length; cut += 17) {
      const s = new SseUsageScanner(d.usage);
      s.feed(all.subarray(0, cut));
      s.feed(all.subarray(cut));
      expect(s.usage).toEqual({ prompt_tokens: 37, cached_tokens: 32 });
    }
    for (const e of events) {
      sse.feed(Buffer.from(e));
      tokens.feed(Buffer.from(e));
    }
    expect(sse.usage).toEqual({ prompt_tokens: 37, cached_tokens: 32 });
    expect(tokens.tokens).toBe(2);
    expect(d.streamError(new ClientError(504, 'too slow', 'request_timeout'))).toBe(
      'event: error\ndata: {"type":"error","error":{"type":"api_error","message":"request_timeout: too slow"}}\n\ndata: [DONE]\n\n',
    );
  });

  it('Responses: input_tokens holds the cached ones; one delta event per token', () => {
    const d = apiDialect('responses');
    const done = Buffer.from(
      'event: response.completed\ndata: {"type":"response.completed","response":{"usage":{"input_tokens":90,"input_tokens_details":{"cached_tokens":64},"output_tokens":3}}}\n\n',
    );
    const sse = new SseUsageScanner(d.usage);
    const tokens = new StreamedTokenCounter(d.streamedToken, d.completion);
    const delta = Buffer.from(
      'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":" tok"}\n\n',
    );
    for (const chunk of [delta, delta, delta, done]) {
      sse.feed(chunk);
      tokens.feed(chunk);
    }
    expect(sse.usage).toEqual({ prompt_tokens: 90, cached_tokens: 64 });
    expect(tokens.tokens).toBe(3);
    expect(d.streamError(new ClientError(502, 'gone', 'upstream_interrupted'))).toBe(
      'event: error\ndata: {"type":"error","code":"upstream_interrupted","message":"gone","param":null}\n\n',
    );
  });

  it("an Anthropic error body carries Anthropic's type for the status", () => {
    const body = (status: number) =>
      JSON.parse(new ClientError(status, 'm', 'bad_request').body('anthropic')) as { error: { type: string } };
    expect([400, 404, 413, 429, 500, 503].map((s) => body(s).error.type)).toEqual([
      'invalid_request_error',
      'not_found_error',
      'request_too_large',
      'rate_limit_error',
      'api_error',
      'overloaded_error',
    ]);
  });
});
