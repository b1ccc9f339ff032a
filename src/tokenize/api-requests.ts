/**
 * The Anthropic Messages (`POST /v1/messages`) and OpenAI Responses (`POST /v1/responses`)
 * requests as the chat request an engine renders them into, so that kvroute keys them as it keys
 * chat (text chunks of the chat prompt, or the chat template's tokens) and the key is the prompt
 * the engine caches. The rules are vLLM's (docs/api-formats.md "What the cache key is made of"):
 *
 * Messages (vLLM's anthropic/serving.py, `_convert_anthropic_to_openai_request`):
 * - `system` (a string, or text blocks concatenated) → a first `system` message;
 * - each message keeps its role; string content as is; blocks: `text` → text parts (one text part
 *   alone becomes the content string), `image` → an `image_url` part of its `source.data`,
 *   `thinking` → the message's `reasoning`, `tool_use` → `tool_calls` (`arguments` = its `input` as
 *   Python's json.dumps writes it), `tool_result` in a user message → a `tool` message of
 *   str(content) (Python's str of a list is its repr), in another role a text part
 *   `Tool result: …`; a message left with no content, tool call or reasoning is dropped;
 * - `tools` → chat tools `{type: function, function: {name, description, parameters:
 *   input_schema}}` (input_schema without a `type` gets `object`).
 *
 * Responses (vLLM's responses serving, `construct_input_messages`):
 * - `instructions` → a first `system` message; a string `input` → one `user` message;
 * - input items: a message (`type: message`, or a bare `{role, content}`) keeps its role, its
 *   `input_text`/`output_text` parts become text parts (one alone: the content string);
 *   `function_call` → an assistant message with one tool call (`call_id`, `name`, `arguments`);
 *   `function_call_output` → a `tool` message (`call_id`, `output`); `reasoning` items are
 *   skipped (the engine does not render them back);
 * - `tools` of `type: function` → chat tools (`{type, function: {name, description, parameters}}`).
 *
 * A body that does not have the shape these rules read throws ApiRequestError naming the field; the
 * proxy answers it with a 400 in the API's own error format.
 */
import type { ChatMessage } from '../core/types.js';

/** The endpoints whose requests render as chat (see the header). */
export type ChatLikeApi = 'messages' | 'responses';

/** The chat request of a Messages or Responses body; throws ApiRequestError naming the field. */
export function apiRequestToChat(api: ChatLikeApi, body: Record<string, unknown>): ChatShape {
  return api === 'messages' ? messagesToChat(body) : responsesToChat(body);
}

/**
 * The messages a router hashes for the request's text keys: the chat messages, after a system
 * message of the tools' JSON when there are tools (what a chat template renders first, and the
 * same every turn, so a conversation's keys keep their prefix).
 */
export function chatPromptMessages(shape: ChatShape): ChatMessage[] {
  return shape.tools === undefined
    ? shape.messages
    : [{ role: 'system', content: `tools ${JSON.stringify(shape.tools)}` }, ...shape.messages];
}

/** The Anthropic API's error type for an HTTP status (its documented pairs; 503 is overload). */
export function anthropicErrorType(status: number): string {
  switch (status) {
    case 401:
      return 'authentication_error';
    case 403:
      return 'permission_error';
    case 404:
      return 'not_found_error';
    case 413:
      return 'request_too_large';
    case 429:
      return 'rate_limit_error';
    case 503:
    case 529:
      return 'overloaded_error';
    default:
      return status >= 500 ? 'api_error' : 'invalid_request_error';
  }
}

/** Anthropic's error body: `{"type": "error", "error": {type by status, message}}`. */
export function anthropicErrorBody(status: number, message: string): object {
  return { type: 'error', error: { type: anthropicErrorType(status), message } };
}

export class ApiRequestError extends Error {
  constructor(
    readonly field: string,
    message: string,
  ) {
    super(`${field}: ${message}`);
  }
}

/** The chat request a Messages or Responses request renders as. */
export interface ChatShape {
  messages: ChatMessage[];
  /** Chat tools, when the request has any. */
  tools?: unknown[];
}

type Json = Record<string, unknown>;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

function list(value: unknown, field: string, what: string): unknown[] {
  if (!Array.isArray(value)) throw new ApiRequestError(field, `must be ${what}`);
  return value;
}

function object(value: unknown, field: string): Json {
  if (!isObject(value)) throw new ApiRequestError(field, 'must be an object');
  return value;
}

function text(value: unknown, field: string): string {
  if (typeof value !== 'string') throw new ApiRequestError(field, 'must be a string');
  return value;
}

/** One text part alone is the content string (vLLM's rule for both APIs). */
function contentOf(parts: Json[]): string | Json[] {
  return parts.length === 1 && parts[0]!.type === 'text' ? (parts[0]!.text as string) : parts;
}

// ---- Anthropic Messages ---------------------------------------------------------------------------

/** The chat request of a Messages body (see the header). */
export function messagesToChat(body: Json): ChatShape {
  const messages: ChatMessage[] = [];
  if (body.system !== undefined && body.system !== null && body.system !== '') {
    if (typeof body.system === 'string') messages.push({ role: 'system', content: body.system });
    else {
      const blocks = list(body.system, 'system', 'a string or an array of text blocks');
      let system = '';
      blocks.forEach((raw, i) => {
        const block = object(raw, `system[${i}]`);
        if (block.type === 'text' && typeof block.text === 'string') system += block.text;
      });
      messages.push({ role: 'system', content: system });
    }
  }
  if (body.messages === undefined) throw new ApiRequestError('messages', 'is required: a list of messages');
  list(body.messages, 'messages', 'an array of messages').forEach((raw, i) => {
    const field = `messages[${i}]`;
    const message = object(raw, field);
    const role = text(message.role, `${field}.role`);
    if (typeof message.content === 'string') {
      messages.push({ role, content: message.content });
      return;
    }
    const parts: Json[] = [];
    const toolCalls: Json[] = [];
    let reasoning = '';
    let hasReasoning = false;
    list(message.content, `${field}.content`, 'a string or an array of content blocks').forEach((rawBlock, j) => {
      const block = object(rawBlock, `${field}.content[${j}]`);
      if (block.type === 'text') {
        if (typeof block.text === 'string' && block.text !== '') parts.push({ type: 'text', text: block.text });
      } else if (block.type === 'image') {
        if (isObject(block.source)) parts.push({ type: 'image_url', image_url: { url: block.source.data ?? '' } });
      } else if (block.type === 'thinking') {
        if (typeof block.thinking === 'string') {
          reasoning += block.thinking;
          hasReasoning = true;
        }
      } else if (block.type === 'tool_use') {
        toolCalls.push({
          id: typeof block.id === 'string' && block.id !== '' ? block.id : 'call',
          type: 'function',
          function: {
            name: typeof block.name === 'string' ? block.name : '',
            arguments: pythonJson(block.input ?? {}),
          },
        });
      } else if (block.type === 'tool_result') {
        const result = block.content === undefined || block.content === null ? '' : pythonStr(block.content);
        if (role === 'user')
          messages.push({ role: 'tool', tool_call_id: typeof block.id === 'string' ? block.id : '', content: result });
        else parts.push({ type: 'text', text: `Tool result: ${result}` });
      }
    });
    const chat: ChatMessage & { reasoning?: string } = { role };
    if (hasReasoning) chat.reasoning = reasoning;
    if (toolCalls.length > 0) chat.tool_calls = toolCalls;
    if (parts.length > 0) chat.content = contentOf(parts);
    else if (toolCalls.length === 0 && !hasReasoning) return;
    messages.push(chat);
  });
  const shape: ChatShape = { messages };
  if (body.tools !== undefined && body.tools !== null)
    shape.tools = list(body.tools, 'tools', 'an array of tools').map((raw, i) => {
      const tool = object(raw, `tools[${i}]`);
      const schema = object(tool.input_schema, `tools[${i}].input_schema`);
      return {
        type: 'function',
        function: {
          name: text(tool.name, `tools[${i}].name`),
          description: tool.description ?? null,
          parameters: 'type' in schema ? schema : { ...schema, type: 'object' },
        },
      };
    });
  return shape;
}

// ---- OpenAI Responses -----------------------------------------------------------------------------

/** The chat request of a Responses body (see the header). */
export function responsesToChat(body: Json): ChatShape {
  const messages: ChatMessage[] = [];
  if (typeof body.instructions === 'string' && body.instructions !== '')
    messages.push({ role: 'system', content: body.instructions });
  if (body.input === undefined) throw new ApiRequestError('input', 'is required: a string or a list of input items');
  if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
  else
    list(body.input, 'input', 'a string or an array of input items').forEach((raw, i) => {
      const field = `input[${i}]`;
      const item = object(raw, field);
      const type = item.type ?? 'message';
      if (type === 'message') messages.push(responsesMessage(item, field));
      else if (type === 'function_call')
        messages.push({
          role: 'assistant',
          content: null,
          tool_calls: [
            {
              id: text(item.call_id, `${field}.call_id`),
              type: 'function',
              function: {
                name: text(item.name, `${field}.name`),
                arguments: text(item.arguments, `${field}.arguments`),
              },
            },
          ],
        });
      else if (type === 'function_call_output')
        messages.push({
          role: 'tool',
          tool_call_id: text(item.call_id, `${field}.call_id`),
          content: typeof item.output === 'string' ? item.output : JSON.stringify(item.output ?? ''),
        });
      // Other items (reasoning, web search calls, …) are not rendered back into the prompt.
    });
  const shape: ChatShape = { messages };
  if (body.tools !== undefined && body.tools !== null) {
    const tools = list(body.tools, 'tools', 'an array of tools').flatMap((raw, i) => {
      const tool = object(raw, `tools[${i}]`);
      if (tool.type !== 'function') return [];
      return [
        {
          type: 'function',
          function: {
            name: text(tool.name, `tools[${i}].name`),
            description: tool.description ?? null,
            parameters: tool.parameters ?? null,
          },
        },
      ];
    });
    if (tools.length > 0) shape.tools = tools;
  }
  return shape;
}

function responsesMessage(item: Json, field: string): ChatMessage {
  const role = text(item.role, `${field}.role`);
  if (typeof item.content === 'string') return { role, content: item.content };
  const parts = list(item.content, `${field}.content`, 'a string or an array of content parts').map((raw, j) => {
    const part = object(raw, `${field}.content[${j}]`);
    if (part.type === 'input_text' || part.type === 'output_text' || part.type === 'text')
      return { type: 'text', text: text(part.text, `${field}.content[${j}].text`) };
    if (part.type === 'input_image') return { type: 'image_url', image_url: { url: part.image_url ?? '' } };
    return part;
  });
  return { role, content: parts.length === 0 ? '' : contentOf(parts) };
}

// ---- Python's spellings, which vLLM's conversion writes into the prompt ----------------------------

/** json.dumps(value) with Python's defaults: `", "` and `": "` separators, non-ASCII escaped. */
export function pythonJson(value: unknown): string {
  if (value === null || value === undefined) return 'null';
  if (typeof value === 'boolean') return value ? 'true' : 'false';
  if (typeof value === 'number') return pythonNumber(value);
  if (typeof value === 'string') return asciiJson(value);
  if (Array.isArray(value)) return `[${value.map(pythonJson).join(', ')}]`;
  const entries = Object.entries(value as Json).map(([k, v]) => `${asciiJson(k)}: ${pythonJson(v)}`);
  return `{${entries.join(', ')}}`;
}

/** str(value) as Python prints it: a string as is, a list or dict as its repr. */
export function pythonStr(value: unknown): string {
  return typeof value === 'string' ? value : pythonRepr(value);
}

function pythonRepr(value: unknown): string {
  if (value === null || value === undefined) return 'None';
  if (typeof value === 'boolean') return value ? 'True' : 'False';
  if (typeof value === 'number') return pythonNumber(value);
  if (typeof value === 'string') return stringRepr(value);
  if (Array.isArray(value)) return `[${value.map(pythonRepr).join(', ')}]`;
  return `{${Object.entries(value as Json)
    .map(([k, v]) => `${stringRepr(k)}: ${pythonRepr(v)}`)
    .join(', ')}}`;
}

/**
 * A JSON number as Python prints the parsed value: an integer bare, a float as its shortest
 * round-trip digits (JavaScript's and Python's agree between 1e-4 and 1e16, where arguments live).
 */
function pythonNumber(n: number): string {
  return String(n);
}

function asciiJson(s: string): string {
  return JSON.stringify(s).replace(/[\u007f-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** Python's repr of a str: single quotes unless the text has one and no double quote. */
function stringRepr(s: string): string {
  const quote = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = quote;
  for (const c of s) {
    if (c === quote || c === '\\') out += `\\${c}`;
    else if (c === '\n') out += '\\n';
    else if (c === '\r') out += '\\r';
    else if (c === '\t') out += '\\t';
    else if (c < ' ' || c === '\u007f') out += `\\x${c.charCodeAt(0).toString(16).padStart(2, '0')}`;
    else out += c;
  }
  return out + quote;
}
