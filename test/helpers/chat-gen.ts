/**
 * Random agentic chat sessions for the tokenization tests: varied text (ASCII, CJK, emoji, code,
 * whitespace runs, literal special tokens, combining marks), assistant turns with <think> blocks
 * and tool calls, tool results; and the edits that break the prefix property (an earlier turn
 * rewritten, a message dropped).
 */
import type { Rng } from './random.js';

const PIECES = [
  'The quick brown fox jumps over the lazy dog. ',
  "it's we're they'll I'd ",
  '你好，世界！这是一个测试句子。',
  '日本語のテキスト、カタカナ。',
  '🚀🔥 👨‍👩‍👧‍👦 🇯🇵 ',
  'function add(a, b) {\n  return a + b; // sum\n}\n',
  'def f(x):\n    return [i**2 for i in range(x)]\n\n',
  '    \t\t   \n\n\n     ',
  '<|im_start|>',
  '<|im_end|>',
  '<think>',
  '</think>',
  '<tool_call>',
  '<|endoftext|>',
  '1234567890 3.14159 -42 ',
  'e\u0301 a\u0308 \u0338> ',
  'Ünïcödé naïve café Straße ',
  '\r\n\r\n',
  ' ',
  '\n',
  '<|im_',
];

export function randomText(rng: Rng, maxPieces = 12): string {
  let s = '';
  const n = rng.int(0, maxPieces);
  for (let k = 0; k < n; k += 1) {
    const piece = rng.pick(PIECES);
    s += rng.chance(0.75) ? piece : piece.slice(0, rng.int(0, piece.length));
  }
  return s;
}

export type Message = Record<string, unknown>;

function assistantTurn(rng: Rng): Message {
  const think = rng.chance(0.5) ? `<think>\n${randomText(rng, 4)}\n</think>\n\n` : '';
  const message: Message = { role: 'assistant', content: think + randomText(rng) };
  if (rng.chance(0.3))
    message.tool_calls = [
      {
        id: 'c1',
        type: 'function',
        function: { name: 'read_file', arguments: JSON.stringify({ path: randomText(rng, 2) }) },
      },
    ];
  if (rng.chance(0.15)) message.reasoning_content = randomText(rng, 3);
  return message;
}

/** The next message of a session given its history. */
export function nextMessage(rng: Rng, history: readonly Message[]): Message {
  const last = history.at(-1);
  if (last?.role === 'user' || last?.role === 'tool') return assistantTurn(rng);
  if (last?.role === 'assistant' && last.tool_calls) return { role: 'tool', content: randomText(rng) };
  return {
    role: 'user',
    content: rng.chance(0.1)
      ? [
          { type: 'text', text: randomText(rng) },
          { type: 'text', text: randomText(rng) },
        ]
      : randomText(rng),
  };
}

/** A session's successive requests: mostly growth by one or two messages, sometimes an edit of an earlier message. */
export function sessionRequests(rng: Rng, turns: number): Message[][] {
  const history: Message[] = [];
  if (rng.chance(0.6)) history.push({ role: 'system', content: randomText(rng) });
  history.push({ role: 'user', content: randomText(rng) });
  const requests: Message[][] = [history.slice()];
  for (let t = 1; t < turns; t += 1) {
    const r = rng.next();
    if (r < 0.12 && history.length > 1) {
      const at = rng.int(0, history.length - 1);
      const target = history[at]!;
      history[at] = {
        ...target,
        content: typeof target.content === 'string' ? target.content + randomText(rng, 2) : randomText(rng),
      };
    } else if (r < 0.17 && history.length > 2) history.splice(rng.int(1, history.length - 2), 1);
    for (let k = rng.int(1, 2); k > 0; k -= 1) history.push(nextMessage(rng, history));
    if (history.at(-1)?.role === 'assistant' && !history.at(-1)?.tool_calls) history.push(nextMessage(rng, history));
    requests.push(history.slice());
  }
  return requests;
}
