/**
 * What differs between the APIs the proxy serves, in the bytes it reads of an answer and writes
 * itself (docs/api-formats.md):
 *
 * | endpoint              | usage: prompt / cached                                        | output tokens / a streamed token | errors    | stream error event                               |
 * | --------------------- | ------------------------------------------------------------- | -------------------------------- | --------- | ------------------------------------------------ |
 * | chat, completions     | `prompt_tokens` / `cached_tokens`                             | `completion_tokens` / `"delta"`  | OpenAI    | `data: {"error":…}` then `data: [DONE]`           |
 * | responses             | `input_tokens` / `input_tokens_details.cached_tokens`         | `output_tokens` / `"response.output_text.delta"` | OpenAI | `event: error` `{"type":"error","code","message","param"}` |
 * | messages (Anthropic)  | `input_tokens` + `cache_read_input_tokens` + `cache_creation_input_tokens` / `cache_read_input_tokens` | `output_tokens` / `"content_block_delta"` | Anthropic | `event: error` `{"type":"error","error":…}` then `data: [DONE]` (vLLM's) |
 *
 * Anthropic counts a prompt's cached tokens outside `input_tokens`, so its prompt is the sum.
 * Invariant: every key is a JSON key with its quotes, so `"input_tokens"` never matches inside
 * `"cache_read_input_tokens"`.
 */
import type { ClientError, ErrorFormat } from '../server/error-body.js';
import type { Endpoint } from './request-inputs.js';

export interface UsageKeys {
  /** The key whose integer is (part of) the prompt's tokens; the scan anchors on its last occurrence. */
  prompt: Buffer;
  /** More keys whose integers add to the prompt (Anthropic's cache reads and writes). */
  promptAlso: readonly Buffer[];
  cached: Buffer;
}

export interface ApiDialect {
  usage: UsageKeys;
  /** The answer's output token count. */
  completion: Buffer;
  /** Occurs once per streamed token event. */
  streamedToken: Buffer;
  errorFormat: ErrorFormat;
  /** The SSE bytes that end a stream with `error` (the relay's in-band failure). */
  streamError(error: ClientError): string;
}

const key = (name: string): Buffer => Buffer.from(`"${name}"`);

export const OPENAI_USAGE: UsageKeys = { prompt: key('prompt_tokens'), promptAlso: [], cached: key('cached_tokens') };

const CHAT: ApiDialect = {
  usage: OPENAI_USAGE,
  completion: key('completion_tokens'),
  streamedToken: key('delta'),
  errorFormat: 'openai',
  streamError: (error) => `data: ${error.body()}\n\ndata: [DONE]\n\n`,
};

const RESPONSES: ApiDialect = {
  usage: { prompt: key('input_tokens'), promptAlso: [], cached: key('cached_tokens') },
  completion: key('output_tokens'),
  streamedToken: key('response.output_text.delta'),
  errorFormat: 'openai',
  streamError: (error) =>
    `event: error\ndata: ${JSON.stringify({ type: 'error', code: error.code, message: error.message, param: error.param })}\n\n`,
};

const MESSAGES: ApiDialect = {
  usage: {
    prompt: key('input_tokens'),
    promptAlso: [key('cache_read_input_tokens'), key('cache_creation_input_tokens')],
    cached: key('cache_read_input_tokens'),
  },
  completion: key('output_tokens'),
  streamedToken: key('content_block_delta'),
  errorFormat: 'anthropic',
  streamError: (error) => `event: error\ndata: ${error.body('anthropic')}\n\ndata: [DONE]\n\n`,
};

export function apiDialect(endpoint: Endpoint): ApiDialect {
  return endpoint === 'messages' ? MESSAGES : endpoint === 'responses' ? RESPONSES : CHAT;
}
