// @ts-check
// Deterministic text and sessions for the tokenize workload: a varied corpus (ASCII prose,
// CJK, emoji with joiners and flags, code, whitespace runs, CRLF, combining marks, literal
// special tokens) and an agentic session of a given size in tokens.

const PIECES = [
  'The quick brown fox jumps over the lazy dog. ',
  "it's we're they'll I'd ",
  '你好，世界！这是一个测试句子，包含中文字符。',
  '日本語のテキストも含まれています。カタカナとひらがな。',
  '🚀🔥 emoji 👨‍👩‍👧‍👦 family and flags 🇯🇵🇺🇸 ',
  'function add(a, b) {\n  return a + b; // sum\n}\n',
  'def f(x):\n    if x > 0:\n        return [i**2 for i in range(x)]\n\n',
  '    \t\t   \n\n\n     ',
  '<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n',
  '<think>\nreasoning here\n</think>\n\n',
  'Numbers: 1234567890 3.14159 -42 1e10 0xdeadbeef ',
  'Ünïcödé àccents naïve café résumé Straße e\u0301 ',
  '<tool_call>\n{"name": "read_file", "arguments": {"path": "/etc/hosts"}}\n</tool_call>',
  '\u00a0\u2003\u200b zero-width and nbsp ',
  'mixed   spaces    and\ttabs\r\nCRLF lines\r\n',
  '<|endoftext|>',
  'Ελληνικά και Русский текст и العربية עברית ',
];

/** mulberry32 @param {number} seed */
export function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** @param {() => number} next @param {number} chars */
export function variedText(next, chars) {
  let s = '';
  while (s.length < chars) {
    const p = /** @type {string} */ (PIECES[Math.floor(next() * PIECES.length)]);
    s += next() < 0.7 ? p : p.slice(0, Math.floor(next() * p.length));
  }
  return s;
}

/** 300 texts of 1 to 3,000 characters: the corpus both libraries must agree on. */
export function corpus() {
  const next = rng(11);
  return Array.from({ length: 300 }, () => variedText(next, 1 + Math.floor(next() * 3000)));
}

/**
 * An agentic coding session of about `tokens` tokens (~3.2 characters per token in this text):
 * a system prompt, then user / assistant (with <think> and a tool call) / tool turns.
 * @param {number} tokens
 */
export function session(tokens) {
  const next = rng(23);
  /** @type {Record<string, unknown>[]} */
  const messages = [{ role: 'system', content: 'You are a coding agent. ' + variedText(next, 2000) }];
  let chars = 2000;
  while (chars < tokens * 3.2) {
    const user = variedText(next, 1500);
    const answer = variedText(next, 1500);
    const tool = variedText(next, 3000);
    messages.push({ role: 'user', content: user });
    messages.push({
      role: 'assistant',
      content: `<think>\n${variedText(next, 300)}\n</think>\n\n${answer}`,
      tool_calls: [
        { id: 'c', type: 'function', function: { name: 'read_file', arguments: '{"path": "src/main.ts"}' } },
      ],
    });
    messages.push({ role: 'tool', content: tool });
    chars += user.length + answer.length + tool.length + 300;
  }
  messages.push({ role: 'user', content: 'Now run the tests.' });
  return messages;
}
