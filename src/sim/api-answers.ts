/**
 * The simulated engine's answers on the Anthropic Messages and OpenAI Responses routes, shaped as
 * vLLM writes them (vllm/entrypoints/anthropic/serving.py; its Responses serving), streamed (SSE
 * with `event:` names) or whole. The generated text is the same `" tok"` per token as chat's.
 *
 * Usage: the Messages API counts cached prompt tokens apart from `input_tokens` (Anthropic's
 * definition: input_tokens + cache_read_input_tokens + cache_creation_input_tokens is the prompt);
 * the Responses API counts them inside it (`input_tokens_details.cached_tokens`, OpenAI's).
 *
 * Stream order, Messages: message_start (usage so far), content_block_start, one
 * content_block_delta per token, content_block_stop, message_delta (stop reason, usage),
 * message_stop, then vLLM's closing `data: [DONE]` (an unnamed event the SDKs skip).
 * Responses: response.created, response.in_progress, response.output_item.added,
 * response.content_part.added, one response.output_text.delta per token, response.output_text.done,
 * response.content_part.done, response.output_item.done, response.completed; every event has
 * its `sequence_number`.
 */
import { TOKEN_TEXT } from './completion-response.js';

/** What every answer of one request shares. */
export interface ApiAnswerHead {
  /** `msg_…` / `resp_…`. */
  id: string;
  created: number;
  model: string;
  maxTokens: number;
}

export interface PromptUsage {
  prompt: number;
  cached: number;
  output: number;
}

/** The SSE text of one stream, written as its tokens come. */
export interface ApiStream {
  /** Before the first token's event. */
  begin(usage: PromptUsage): string;
  token(): string;
  end(usage: PromptUsage): string;
}

const event = (name: string, data: object): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`;

// ---- Anthropic Messages -------------------------------------------------------------------------

function anthropicUsage(u: PromptUsage): object {
  return {
    input_tokens: u.prompt - u.cached,
    output_tokens: u.output,
    cache_creation_input_tokens: 0,
    cache_read_input_tokens: u.cached,
  };
}

export function messagesBody(head: ApiAnswerHead, u: PromptUsage): object {
  return {
    id: head.id,
    type: 'message',
    role: 'assistant',
    content: [{ type: 'text', text: TOKEN_TEXT.repeat(u.output) }],
    model: head.model,
    stop_reason: 'max_tokens',
    stop_sequence: null,
    usage: anthropicUsage(u),
  };
}

export function messagesStream(head: ApiAnswerHead): ApiStream {
  return {
    begin: (u) =>
      event('message_start', {
        type: 'message_start',
        message: {
          id: head.id,
          type: 'message',
          role: 'assistant',
          content: [],
          model: head.model,
          stop_reason: null,
          stop_sequence: null,
          usage: anthropicUsage({ ...u, output: 0 }),
        },
      }) +
      event('content_block_start', {
        type: 'content_block_start',
        index: 0,
        content_block: { type: 'text', text: '' },
      }),
    token: () =>
      event('content_block_delta', {
        type: 'content_block_delta',
        index: 0,
        delta: { type: 'text_delta', text: TOKEN_TEXT },
      }),
    end: (u) =>
      event('content_block_stop', { type: 'content_block_stop', index: 0 }) +
      event('message_delta', {
        type: 'message_delta',
        delta: { stop_reason: 'max_tokens', stop_sequence: null },
        usage: anthropicUsage(u),
      }) +
      event('message_stop', { type: 'message_stop' }) +
      'data: [DONE]\n\n',
  };
}

// ---- OpenAI Responses ---------------------------------------------------------------------------

function responsesUsage(u: PromptUsage): object {
  return {
    input_tokens: u.prompt,
    input_tokens_details: { cached_tokens: u.cached },
    output_tokens: u.output,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: u.prompt + u.output,
  };
}

const messageId = (head: ApiAnswerHead): string => `msg_${head.id.slice('resp_'.length)}`;

function outputText(text: string): object {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

function outputMessage(head: ApiAnswerHead, text: string | undefined): object {
  return {
    type: 'message',
    id: messageId(head),
    status: text === undefined ? 'in_progress' : 'completed',
    role: 'assistant',
    content: text === undefined ? [] : [outputText(text)],
  };
}

function response(head: ApiAnswerHead, u: PromptUsage | undefined): object {
  return {
    id: head.id,
    object: 'response',
    created_at: head.created,
    status: u === undefined ? 'in_progress' : 'completed',
    error: null,
    incomplete_details: null,
    instructions: null,
    max_output_tokens: head.maxTokens,
    model: head.model,
    output: u === undefined ? [] : [outputMessage(head, TOKEN_TEXT.repeat(u.output))],
    parallel_tool_calls: true,
    previous_response_id: null,
    reasoning: null,
    store: false,
    temperature: 1,
    text: { format: { type: 'text' } },
    tool_choice: 'auto',
    tools: [],
    top_p: 1,
    truncation: 'disabled',
    usage: u === undefined ? null : responsesUsage(u),
    user: null,
    metadata: {},
  };
}

export function responsesBody(head: ApiAnswerHead, u: PromptUsage): object {
  return response(head, u);
}

export function responsesStream(head: ApiAnswerHead): ApiStream {
  let sequence = 0;
  const next = (type: string, fields: object): string => event(type, { type, ...fields, sequence_number: sequence++ });
  const itemId = messageId(head);
  const at = { item_id: itemId, output_index: 0, content_index: 0 };
  return {
    begin: () =>
      next('response.created', { response: response(head, undefined) }) +
      next('response.in_progress', { response: response(head, undefined) }) +
      next('response.output_item.added', { output_index: 0, item: outputMessage(head, undefined) }) +
      next('response.content_part.added', { ...at, part: outputText('') }),
    token: () => next('response.output_text.delta', { ...at, delta: TOKEN_TEXT, logprobs: [] }),
    end: (u) => {
      const text = TOKEN_TEXT.repeat(u.output);
      return (
        next('response.output_text.done', { ...at, text, logprobs: [] }) +
        next('response.content_part.done', { ...at, part: outputText(text) }) +
        next('response.output_item.done', { output_index: 0, item: outputMessage(head, text) }) +
        next('response.completed', { response: response(head, u) })
      );
    },
  };
}
