/**
 * OpenAI chat messages and tools into what vLLM hands the chat template (vLLM's
 * `parse_chat_messages` and `_postprocess_messages` in entrypoints/chat_utils.py), so the
 * rendered text is the engine's:
 * - `content`: a string stays; `null`/absent becomes `""`; a list of parts becomes, for a
 *   template of the "string" content format, its text parts (`text`, `input_text`,
 *   `output_text`, `refusal`, `thinking`) joined with "\n"; for the "openai" format, a list of
 *   `{ type: 'text', text }`. Image, audio and video parts are refused (no tokens can be
 *   predicted for them here);
 * - assistant `tool_calls`: an empty list is dropped; each call's `function.arguments` JSON
 *   string is parsed into an object (`{}` when empty), as vLLM does for templates that `tojson`
 *   them; `reasoning` (or `reasoning_content`) is passed as both `reasoning` and
 *   `reasoning_content`;
 * - `name` on any message and `tool_call_id` on tool messages are kept; other keys are dropped.
 * Tools become what pydantic's `model_dump()` gives: `{ type, function: { name, description,
 * parameters, …extra } }` with absent fields as `null`.
 */
import { inputError } from './tokenizer-errors.js';

export type ContentFormat = 'string' | 'openai';
export type ConversationMessage = Record<string, unknown>;

const TEXT_PARTS = new Set(['text', 'input_text', 'output_text', 'refusal', 'thinking']);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function partText(part: unknown, field: string): string | undefined {
  if (typeof part === 'string') return part;
  if (!isObject(part)) throw inputError(field, 'must be a string or an object with "type"');
  const type = part.type;
  if (typeof type !== 'string') throw inputError(`${field}.type`, 'must be a string');
  if (!TEXT_PARTS.has(type)) throw inputError(`${field}.type`, `"${type}" parts cannot be tokenized here (text only)`);
  const text = type === 'refusal' ? (part.refusal ?? part.text) : (part.text ?? part[type]);
  // vLLM skips a text part whose content is missing (with a warning).
  if (text === undefined || text === null) return undefined;
  if (typeof text !== 'string') throw inputError(`${field}.text`, 'must be a string');
  return text;
}

function contentOf(content: unknown, field: string, format: ContentFormat): unknown {
  const parts: unknown[] =
    content === undefined || content === null ? [] : typeof content === 'string' ? [content] : (content as unknown[]);
  if (!Array.isArray(parts)) throw inputError(field, 'must be a string, null or a list of parts');
  const texts: string[] = [];
  parts.forEach((part, k) => {
    const text = partText(part, `${field}[${k}]`);
    if (text !== undefined) texts.push(text);
  });
  return format === 'openai' ? texts.map((text) => ({ type: 'text', text })) : texts.join('\n');
}

function toolCallsOf(calls: unknown, field: string): unknown[] | undefined {
  if (calls === undefined || calls === null) return undefined;
  if (!Array.isArray(calls)) throw inputError(field, 'must be a list');
  if (calls.length === 0) return undefined;
  return calls.map((call, k) => {
    const at = `${field}[${k}]`;
    if (!isObject(call)) throw inputError(at, 'must be an object');
    const fn = call.function;
    if (!isObject(fn)) throw inputError(`${at}.function`, 'must be an object');
    const args = fn.arguments;
    let parsed: unknown = {};
    if (typeof args === 'string' && args.length > 0) {
      try {
        parsed = JSON.parse(args);
      } catch (error) {
        throw inputError(`${at}.function.arguments`, `not valid JSON (${(error as Error).message})`);
      }
    } else if (isObject(args) || Array.isArray(args)) parsed = args;
    else if (args !== undefined && args !== null && args !== '')
      throw inputError(`${at}.function.arguments`, 'must be a JSON string or an object');
    return { ...call, function: { ...fn, arguments: parsed } };
  });
}

/** The request's `messages` as vLLM passes them to the template. Throws ERR_KVROUTE_TOKENIZE_INPUT naming the field. */
export function conversationOf(messages: unknown, format: ContentFormat = 'string'): ConversationMessage[] {
  if (!Array.isArray(messages)) throw inputError('messages', 'must be a list');
  if (messages.length === 0) throw inputError('messages', 'must not be empty');
  return messages.map((message, i) => {
    const at = `messages[${i}]`;
    if (!isObject(message)) throw inputError(at, 'must be an object');
    const role = message.role;
    if (typeof role !== 'string' || role.length === 0) throw inputError(`${at}.role`, 'must be a non-empty string');
    const out: ConversationMessage = { role, content: contentOf(message.content, `${at}.content`, format) };
    if (role === 'assistant') {
      const calls = toolCallsOf(message.tool_calls, `${at}.tool_calls`);
      if (calls !== undefined) out.tool_calls = calls;
      const reasoning = message.reasoning ?? message.reasoning_content;
      if (reasoning !== undefined && reasoning !== null) {
        if (typeof reasoning !== 'string') throw inputError(`${at}.reasoning`, 'must be a string');
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    } else if (role === 'tool' && message.tool_call_id !== undefined) out.tool_call_id = message.tool_call_id;
    if (typeof message.name === 'string') out.name = message.name;
    return out;
  });
}

/** The request's `tools` as vLLM's `tool.model_dump()` gives them to the template. */
export function toolsOf(tools: unknown): Record<string, unknown>[] | undefined {
  if (tools === undefined || tools === null) return undefined;
  if (!Array.isArray(tools)) throw inputError('tools', 'must be a list');
  return tools.map((tool, k) => {
    const at = `tools[${k}]`;
    if (!isObject(tool)) throw inputError(at, 'must be an object');
    if (tool.type !== undefined && tool.type !== 'function') throw inputError(`${at}.type`, 'must be "function"');
    const fn = tool.function;
    if (!isObject(fn)) throw inputError(`${at}.function`, 'must be an object');
    if (typeof fn.name !== 'string') throw inputError(`${at}.function.name`, 'must be a string');
    const { name, description, parameters, ...extraFn } = fn;
    const { type: _type, function: _fn, ...extraTool } = tool;
    return {
      type: 'function',
      function: { name, description: description ?? null, parameters: parameters ?? null, ...extraFn },
      ...extraTool,
    };
  });
}
