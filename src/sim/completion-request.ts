/**
 * A `/v1/chat/completions` or `/v1/completions` body, checked and turned into what the engine
 * model needs: block ids, a prompt length in tokens, and an output length (docs/sim-serve.md).
 *
 * Blocks. With the extension field `hash_ids` (safe integers, as in a trace), those are the
 * request's block ids, one per `blockSize` tokens. Otherwise the prompt text is hashed the way
 * the router hashes it (docs/hashing.md): chat `messages` through `promptText`, a completion's
 * `prompt` as is, in chunks of 4 × blockSize bytes, so one chunk stands for one engine block at
 * the router's 4 bytes per token. A prompt of token ids is written as 8 hex digits per token
 * and hashed in chunks of 8 × blockSize bytes: again one id per block. Ids are cut to 52 bits
 * (the block pool keeps them in a Float64Array); a collision among 2^52 values is negligible.
 *
 * Prompt tokens: `input_tokens` when given; else `hash_ids.length × blockSize` (the router's
 * default for ids); else ceil(UTF-8 bytes ÷ 4) of the text, or the number of token ids.
 *
 * Output tokens: `max_completion_tokens` or `max_tokens` (chat), `max_tokens` (completions).
 * Absent, completions default to 16 (vLLM's and OpenAI's default) and chat to
 * DEFAULT_CHAT_MAX_TOKENS (vLLM would run to EOS or the context end; the simulated engine has no
 * EOS), capped at the context left. Every request generates exactly that many tokens.
 *
 * Errors are thrown as kvroute's TypeError/RangeError (a 400 naming the field) or ApiError.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { hashPrompt } from '../core/hashing.js';
import { promptText } from '../core/prompt-text.js';
import type { ChatMessage } from '../core/types.js';
import { checkInteger, checkObject, checkString } from '../core/validate.js';

export type Endpoint = 'chat' | 'completion';

/** Output length of a chat request that names none. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;
/** Output length of a completions request that names none (vLLM's CompletionRequest default). */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

const ID_MASK = (1n << 52n) - 1n;

/** An error with its HTTP status and vLLM's error `type`. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

export interface RequestLimits {
  /** The served model name. */
  model: string;
  /** The engine's tokens per block. */
  blockSize: number;
  /** Prompt plus output tokens at most. */
  maxModelLen: number;
}

export interface CompletionRequest {
  endpoint: Endpoint;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  hashIds: number[];
  inputTokens: number;
  maxTokens: number;
}

export function parseCompletionRequest(endpoint: Endpoint, raw: unknown, limits: RequestLimits): CompletionRequest {
  const body = checkObject('the request body', raw);
  const model = present(body.model) ? checkString('model', body.model) : limits.model;
  if (model !== limits.model) throw new ApiError(404, 'NotFoundError', `The model \`${model}\` does not exist.`);
  const stream = optionalBoolean('stream', body.stream) ?? false;
  let includeUsage = false;
  if (present(body.stream_options)) {
    if (!stream) throw new ApiError(400, 'BadRequestError', 'stream_options can only be given when stream is true');
    const options = checkObject('stream_options', body.stream_options);
    includeUsage = optionalBoolean('stream_options.include_usage', options.include_usage) ?? false;
  }
  if (present(body.n) && body.n !== 1) throw invalidValue('n', '1 (the simulated engine returns one choice)', body.n);

  const prompt = endpoint === 'chat' ? chatPrompt(body.messages) : completionPrompt(body.prompt);
  const { hashIds, inputTokens } = promptBlocks(endpoint, body, prompt, limits.blockSize);
  const maxTokens = outputTokens(endpoint, body, inputTokens, limits.maxModelLen);
  return { endpoint, model, stream, includeUsage, hashIds, inputTokens, maxTokens };
}

/** The request's block ids and prompt length in tokens (see the header). */
function promptBlocks(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  prompt: Prompt,
  blockSize: number,
): { hashIds: number[]; inputTokens: number } {
  let hashIds: number[];
  let inputTokens: number;
  if (present(body.hash_ids)) {
    hashIds = checkHashIds(body.hash_ids);
    inputTokens = hashIds.length * blockSize;
  } else {
    const bytesPerToken = prompt.kind === 'text' ? 4 : 8;
    const ids = hashPrompt(prompt.text, { chunkBytes: bytesPerToken * blockSize });
    hashIds = Array.from(ids, (id) => Number(id & ID_MASK));
    inputTokens = prompt.tokens;
  }
  if (present(body.input_tokens)) inputTokens = checkInteger('input_tokens', body.input_tokens, 1);
  if (inputTokens === 0) {
    const field = present(body.hash_ids) ? 'hash_ids' : endpoint === 'chat' ? 'messages' : 'prompt';
    throw new ApiError(400, 'BadRequestError', `${field} must not be empty: the prompt has no tokens`);
  }
  return { hashIds, inputTokens };
}

/** The output length, after vLLM's two context-length checks (with vLLM's messages). */
function outputTokens(
  endpoint: Endpoint,
  body: Record<string, unknown>,
  inputTokens: number,
  maxModelLen: number,
): number {
  if (inputTokens >= maxModelLen)
    throw new ApiError(
      400,
      'BadRequestError',
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${inputTokens} input tokens. Please reduce the length of the input messages.`,
    );
  const field = endpoint === 'chat' && present(body.max_completion_tokens) ? 'max_completion_tokens' : 'max_tokens';
  if (!present(body[field])) {
    const fallback = endpoint === 'chat' ? DEFAULT_CHAT_MAX_TOKENS : DEFAULT_COMPLETION_MAX_TOKENS;
    return Math.min(fallback, maxModelLen - inputTokens);
  }
  const maxTokens = checkInteger(field, body[field], 1);
  if (inputTokens + maxTokens > maxModelLen)
    throw new ApiError(
      400,
      'BadRequestError',
      `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length is ${maxModelLen} tokens and your request has ${inputTokens} input tokens (${maxTokens} > ${maxModelLen} - ${inputTokens}).`,
    );
  return maxTokens;
}

/** JSON null counts as absent, as the OpenAI API treats it. */
function present(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function optionalBoolean(field: string, value: unknown): boolean | undefined {
  if (!present(value)) return undefined;
  if (typeof value !== 'boolean') throw invalidType(field, 'a boolean', value);
  return value;
}

interface Prompt {
  /** `text`: 4 bytes per token; `token ids`: 8 hex digits per token. */
  kind: 'text' | 'token ids';
  text: string;
  tokens: number;
}

function textPrompt(text: string): Prompt {
  return { kind: 'text', text, tokens: Math.ceil(Buffer.byteLength(text, 'utf8') / 4) };
}

function missing(field: string, what: string): ApiError {
  return new ApiError(400, 'BadRequestError', `${field} is required: ${what}`);
}

function chatPrompt(messages: unknown): Prompt {
  if (!present(messages)) throw missing('messages', 'a chat completion needs a non-empty array of messages');
  if (!Array.isArray(messages)) throw invalidType('messages', 'an array of messages', messages);
  if (messages.length === 0) throw invalidValue('messages', 'a non-empty array of messages', messages);
  return textPrompt(promptText(messages as ChatMessage[]));
}

/** A string, token ids, or a batch of exactly one of either (vLLM would answer a batch with one choice per prompt). */
function completionPrompt(prompt: unknown): Prompt {
  if (!present(prompt)) throw missing('prompt', 'a completion needs a prompt string or an array of token ids');
  if (typeof prompt === 'string') return textPrompt(prompt);
  if (!Array.isArray(prompt))
    throw invalidType('prompt', 'a string, an array of token ids, or a batch of one of either', prompt);
  if (prompt.length > 0 && typeof prompt[0] === 'number') return tokenPrompt('prompt', prompt);
  if (prompt.length !== 1)
    throw invalidValue(
      'prompt',
      `a single prompt (the simulated engine serves no batches of ${prompt.length})`,
      prompt,
    );
  const only: unknown = prompt[0];
  if (typeof only === 'string') return textPrompt(only);
  if (Array.isArray(only)) return tokenPrompt('prompt[0]', only);
  throw invalidType('prompt[0]', 'a string or an array of token ids', only);
}

function tokenPrompt(field: string, ids: readonly unknown[]): Prompt {
  let text = '';
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!(typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < 2 ** 32))
      throw invalidValue(`${field}[${i}]`, 'a token id: an integer in [0, 2^32)', id);
    text += id.toString(16).padStart(8, '0');
  }
  return { kind: 'token ids', text, tokens: ids.length };
}

function checkHashIds(value: unknown): number[] {
  if (!Array.isArray(value)) throw invalidType('hash_ids', 'an array of integers', value);
  for (let i = 0; i < value.length; i++) {
    if (!Number.isSafeInteger(value[i]))
      throw invalidValue(`hash_ids[${i}]`, 'an integer within ±(2^53 − 1)', value[i]);
  }
  return value as number[];
}
