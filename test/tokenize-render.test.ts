// Chat rendering as vLLM renders it (Qwen3's template through @huggingface/jinja), the ids of
// fixed prompts, and every bad message shape the renderer refuses, each naming its field.
import { beforeAll, describe, expect, it } from 'vitest';

import { bundledTokenizerDir, loadTokenizer, type LoadedTokenizer } from '../src/tokenize/index.js';

let tok: LoadedTokenizer;
beforeAll(() => {
  tok = loadTokenizer(bundledTokenizerDir('qwen3'));
});

describe('Qwen3 chat rendering', () => {
  it('renders a multi-turn conversation with the generation prompt, past <think> stripped', () => {
    const text = tok.renderChat([
      { role: 'system', content: 'You are a coder.' },
      { role: 'user', content: 'Fix the bug.' },
      { role: 'assistant', content: '<think>\nLook at main.c\n</think>\n\nDone: see the patch.' },
      { role: 'user', content: 'Thanks! Now tests.' },
    ]);
    expect(text).toBe(
      '<|im_start|>system\nYou are a coder.<|im_end|>\n' +
        '<|im_start|>user\nFix the bug.<|im_end|>\n' +
        '<|im_start|>assistant\nDone: see the patch.<|im_end|>\n' +
        '<|im_start|>user\nThanks! Now tests.<|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('keeps the reasoning of assistant turns after the last user query (a tool-calling chain)', () => {
    const text = tok.renderChat([
      { role: 'user', content: 'ls' },
      {
        role: 'assistant',
        content: '',
        reasoning: 'need a tool',
        tool_calls: [{ id: 'a', type: 'function', function: { name: 'sh', arguments: '{"cmd": "ls"}' } }],
      },
      { role: 'tool', content: 'a.txt' },
    ]);
    expect(text).toBe(
      '<|im_start|>user\nls<|im_end|>\n' +
        '<|im_start|>assistant\n<think>\nneed a tool\n</think>\n\n' +
        '<tool_call>\n{"name": "sh", "arguments": {"cmd": "ls"}}\n</tool_call><|im_end|>\n' +
        '<|im_start|>user\n<tool_response>\na.txt\n</tool_response><|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('passes tools as vLLM dumps them, and chat_template_kwargs (enable_thinking: false)', () => {
    const text = tok.renderChat([{ role: 'user', content: 'hi' }], {
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      chat_template_kwargs: { enable_thinking: false },
    });
    expect(text).toContain(
      '<tools>\n{"type": "function", "function": {"name": "f", "description": null, "parameters": {"type": "object"}}}\n</tools>',
    );
    expect(text.endsWith('<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n')).toBe(true);
  });

  it('joins text parts with a newline and treats null content as empty', () => {
    const text = tok.renderChat([
      {
        role: 'user',
        content: [
          { type: 'text', text: 'a' },
          { type: 'text', text: 'b' },
        ],
      },
      { role: 'assistant', content: null },
      { role: 'user', content: 'c' },
    ]);
    expect(text).toContain('<|im_start|>user\na\nb<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n');
  });

  // The final assistant turn follows the last query, so Qwen3 gives it an (empty) think block.
  it('cuts after the final message with continue_final_message, and omits the prompt without add_generation_prompt', () => {
    const messages = [
      { role: 'user', content: 'q' },
      { role: 'assistant', content: 'partial ans' },
    ];
    expect(tok.renderChat(messages, { add_generation_prompt: false, continue_final_message: true })).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\npartial ans',
    );
    expect(tok.renderChat(messages, { add_generation_prompt: false })).toBe(
      '<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\npartial ans<|im_end|>\n',
    );
  });
});

describe('token ids', () => {
  it('encodes a short chat prompt with the special tokens as single ids', () => {
    const { encoded } = tok.tokenizeChat([{ role: 'user', content: 'Hello, world!' }], undefined);
    // <|im_start|> user \n Hello , ␣world ! <|im_end|> \n <|im_start|> assistant \n
    expect(Array.from(encoded.tokens)).toEqual([151644, 872, 198, 9707, 11, 1879, 0, 151645, 198, 151644, 77091, 198]);
  });

  it('encodes a completions prompt with no BOS (Qwen adds none)', () => {
    expect(Array.from(tok.tokenizeText('Hello, world!'))).toEqual([9707, 11, 1879, 0]);
    expect(Array.from(tok.tokenizeText('<|im_start|>'))).toEqual([151644]);
  });
});

describe('bad messages', () => {
  const cases: [string, unknown, Record<string, unknown> | undefined, RegExp][] = [
    ['not a list', { role: 'user' }, undefined, /^messages: must be a list/],
    ['empty', [], undefined, /^messages: must not be empty/],
    ['a message not an object', ['hi'], undefined, /^messages\[0\]: must be an object/],
    ['no role', [{ content: 'x' }], undefined, /^messages\[0\]\.role: must be a non-empty string/],
    [
      'content a number',
      [{ role: 'user', content: 5 }],
      undefined,
      /^messages\[0\]\.content: must be a string, null or a list/,
    ],
    [
      'an image part',
      [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'x' } }] }],
      undefined,
      /^messages\[0\]\.content\[0\]\.type: "image_url" parts cannot be tokenized/,
    ],
    [
      'a part with no type',
      [{ role: 'user', content: [{ text: 'x' }] }],
      undefined,
      /^messages\[0\]\.content\[0\]\.type: must be a string/,
    ],
    [
      'tool arguments not JSON',
      [{ role: 'assistant', content: '', tool_calls: [{ function: { name: 'f', arguments: '{oops' } }] }],
      undefined,
      /^messages\[0\]\.tool_calls\[0\]\.function\.arguments: not valid JSON/,
    ],
    [
      'tool_calls not a list',
      [{ role: 'assistant', content: '', tool_calls: {} }],
      undefined,
      /^messages\[0\]\.tool_calls: must be a list/,
    ],
    ['tools not a list', [{ role: 'user', content: 'x' }], { tools: 'f' }, /^tools: must be a list/],
    [
      'a tool with no name',
      [{ role: 'user', content: 'x' }],
      { tools: [{ type: 'function', function: {} }] },
      /^tools\[0\]\.function\.name: must be a string/,
    ],
    [
      'chat_template_kwargs not an object',
      [{ role: 'user', content: 'x' }],
      { chat_template_kwargs: [1] },
      /^chat_template_kwargs: must be an object/,
    ],
    [
      'continue_final_message with add_generation_prompt',
      [{ role: 'user', content: 'x' }],
      { continue_final_message: true },
      /^continue_final_message: cannot be true with add_generation_prompt true/,
    ],
  ];
  for (const [name, messages, extras, message] of cases)
    it(`refuses ${name} with ERR_KVROUTE_TOKENIZE_INPUT naming the field`, () => {
      let caught: unknown;
      try {
        tok.renderChat(messages, extras);
      } catch (error) {
        caught = error;
      }
      expect(caught).toMatchObject({ code: 'ERR_KVROUTE_TOKENIZE_INPUT' });
      expect((caught as Error).message).toMatch(message);
    });

  it('refuses a completions prompt that is not a string', () => {
    expect(() => tok.tokenizeText([1, 2])).toThrow(/^prompt: must be a string/);
  });
});
