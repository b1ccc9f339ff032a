// @ts-check
// A long agentic chat request body, as the body-size workloads send it: a system prompt and one
// user message of code-like lines (escaped newlines, as agents send), no `hash_ids`, so the proxy
// parses the body and hashes the prompt.

const LINE = 'def handler(request):\n    return compute(request.body)  # agentic context line\n';

/**
 * A chat body whose user message is about `bytes` long.
 * @param {number} bytes
 * @param {Record<string, unknown>} [extra] more body fields (`model` defaults to 'm')
 */
export function agenticChatBody(bytes, extra = {}) {
  const text = LINE.repeat(Math.ceil(bytes / LINE.length));
  return Buffer.from(
    JSON.stringify({
      model: 'm',
      messages: [
        { role: 'system', content: 'You are a coding agent.' },
        { role: 'user', content: text },
      ],
      ...extra,
    }),
  );
}
