/**
 * An Anthropic Messages or OpenAI Responses body as the chat body the simulated engine serves,
 * as vLLM serves both by converting them to a chat request (src/tokenize/api-requests.ts has the
 * conversion, shared with the proxy so both key the same prompt):
 *
 * - `messages`: the chat messages, tools first (chatPromptMessages) for the text prompt;
 * - the output cap: Messages' `max_tokens` (required, as Anthropic's API and vLLM require it),
 *   Responses' `max_output_tokens`;
 * - a stream always carries its usage (`stream_options.include_usage`), which both APIs report;
 * - kvroute's own fields (`hash_ids`, `input_tokens`) pass through.
 * The tokenizer renders the chat messages and tools themselves (`tokenizer`), as vLLM's template does.
 */
import {
  ApiRequestError,
  apiRequestToChat,
  chatPromptMessages,
  type ChatLikeApi,
  type ChatShape,
} from '../tokenize/api-requests.js';
import { ApiError } from './api-error.js';

export interface ApiChatBody {
  /** The chat body parseCompletionRequest reads. */
  chat: Record<string, unknown>;
  /** The chat request the tokenizer renders. */
  shape: ChatShape;
}

export function apiChatBody(api: ChatLikeApi, body: Record<string, unknown>): ApiChatBody {
  if (api === 'messages' && (body.max_tokens === undefined || body.max_tokens === null))
    throw new ApiError(400, 'BadRequestError', 'max_tokens: Field required');
  let shape: ChatShape;
  try {
    shape = apiRequestToChat(api, body);
  } catch (error) {
    if (error instanceof ApiRequestError) throw new ApiError(400, 'BadRequestError', error.message);
    throw error;
  }
  const stream = body.stream === true;
  const chat: Record<string, unknown> = {
    model: body.model,
    messages: chatPromptMessages(shape),
    stream,
    max_tokens: api === 'messages' ? body.max_tokens : body.max_output_tokens,
  };
  if (stream) chat.stream_options = { include_usage: true };
  for (const own of ['hash_ids', 'input_tokens'] as const) if (body[own] !== undefined) chat[own] = body[own];
  return { chat, shape };
}
