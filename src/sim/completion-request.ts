/**
 * A `/v1/chat/completions` or `/v1/completions` body, checked and turned into what the engine
 * model needs: block ids, a prompt length in tokens, and an output length (docs/sim-serve.md).
 *
 * Blocks, in order of precedence:
 * 1. Token ids: a completion's `prompt` given as token ids, or the prompt the engine's tokenizer
 *    produced (`tokenized`). The engine caches by token blocks as vLLM does: one id per full
 *    block of blockSize tokens, its own chained hash of the tokens (the 8-hex-digit text of each
 *    token id, hashed in chunks of 8 × blockSize bytes: XXH64 chained from seed 0, so unlike
 *    kvroute's token block key, which hashes the tokens' bytes from seed blockSize). A partial
 *    last block gets no id. The request carries the tokens, for its KV cache events.
 * 2. The extension field `hash_ids` (safe integers, as in a trace): one id per blockSize tokens.
 * 3. The prompt text hashed the way the router hashes it (docs/hashing.md): chat `messages`
 *    through `promptText`, a completion's `prompt` as is, in chunks of 4 × blockSize bytes, so one
 *    chunk stands for one engine block at the router's 4 bytes per token.
 * Ids are cut to 52 bits (the block pool keeps them in a Float64Array); a collision among 2^52
 * values is negligible.
 *
 * Prompt tokens: with token ids, their number (`input_tokens` is ignored, as vLLM ignores it);
 * else `input_tokens` when given; else `hash_ids.length × blockSize` (the router's default for
 * ids); else ceil(UTF-8 bytes ÷ 4) of the text.
 *
 * Output tokens: `max_completion_tokens` or `max_tokens` (chat), `max_tokens` (completions).
 * Absent, completions default to 16 (vLLM's and OpenAI's default) and chat to
 * DEFAULT_CHAT_MAX_TOKENS (vLLM would run to EOS or the context end; the simulated engine has no
 * EOS), capped at the context left. Every request generates exactly that many tokens.
 *
 * Disaggregated prefill: `kv_transfer_params` is read by kv-transfer-params.ts; the prefill phase
 * (`do_remote_decode`) must not stream, since it answers once, with the transfer parameters.
 *
 * Errors are thrown as kvroute's TypeError/RangeError (a 400 naming the field) or ApiError.
 */
import { invalidType, invalidValue } from '../core/errors.js';
import { hashPrompt } from '../core/hashing.js';
import { promptText } from '../core/prompt-text.js';
import type { ChatMessage } from '../core/types.js';
import { checkInteger, checkObject, checkString } from '../core/validate.js';
import { ApiError } from './api-error.js';
import { apiChatBody } from './api-request-body.js';

export { ApiError };
import { parseKvTransferParams, type KvTransferRequest } from './kv-transfer-params.js';

/** The route's request shape: chat, completions, or an API served as chat (api-request-body.ts). */
export type Endpoint = 'chat' | 'completion' | 'messages' | 'responses';

/** Output length of a chat request that names none. */
export const DEFAULT_CHAT_MAX_TOKENS = 256;
/** Output length of a completions request that names none (vLLM's CompletionRequest default). */
export const DEFAULT_COMPLETION_MAX_TOKENS = 16;

const ID_MASK = (1n << 52n) - 1n;

export interface RequestLimits {
  /** The served model name. */
  model: string;
  /** The engine's tokens per block. */
  blockSize: number;
  /** Prompt plus output tokens at most. */
  maxModelLen: number;
}

export interface CompletionRequest {
  /** `chat` for the APIs served as chat; `api` says which one the client called. */
  endpoint: 'chat' | 'completion';
  api: Endpoint;
  model: string;
  stream: boolean;
  includeUsage: boolean;
  hashIds: number[];
  /** The prompt's token ids, when it has them (block ids are then token blocks). */
  tokens: Uint32Array | undefined;
  inputTokens: number;
  maxTokens: number;
  /** What `kv_transfer_params` asks (kind `none` without them). */
  kvTransfer: KvTransferRequest;
}

/** What an engine's tokenizer is asked to turn into token ids. */
export type TokenizerInput =
  /** Chat messages, to render with the model's chat template (the whole body: tools, kwargs). */
  | {
      kind: 'chat';
      messages: ChatMessage[];
      body: Record<string, unknown>;
      /** The request's x-session-id: lets the tokenizer reuse the session's previous turn (exact either way). */
      session?: string;
    }
  /** A completion's prompt string. */
  | { kind: 'text'; text: string };

/**
 * An engine's tokenizer (`kvroute sim serve --tokenizer`): the prompt's token ids, as vLLM would
 * compute them. A rejection is answered 400 with its message.
 */
export type PromptTokenizer = (input: TokenizerInput) => Promise<Uint32Array>;

/**
 * What a tokenizer would have to tokenize for this body, after checking the prompt fields;
 * undefined when the prompt already is token ids.
 */
export function tokenizerInput(endpoint: Endpoint, raw: unknown): TokenizerInput | undefined {
  const body = checkObject('the request body', raw);
  if (endpoint === 'messages' || endpoint === 'responses') {
    const { shape } = apiChatBody(endpoint, body);
    return {
      kind: 'chat',
      messages: shape.messages,
      body: shape.tools === undefined ? {} : { tools: shape.tools },
    };
  }
  if (endpoint === 'chat') {
    chatPrompt(body.messages);
    return { kind: 'chat', messages: body.messages as ChatMessage[], body };
  }
  const prompt = completionPrompt(body.prompt);
  return prompt.ids === undefined ? { kind: 'text', text: prompt.text } : undefined;
}

/** Checks a body; `tokenized` is its prompt's token ids from the engine's tokenizer, if it has one. */
export function parseCompletionRequest(
  endpoint: Endpoint,
  raw: unknown,
  limits: RequestLimits,
  tokenized?: Uint32Array,
): CompletionRequest {
  const api = endpoint;
  let body = checkObject('the request body', raw);
  if (endpoint === 'messages' || endpoint === 'responses') {
    body = apiChatBody(endpoint, body).chat;
    endpoint = 'chat';
  }
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
  const kvTransfer = parseKvTransferParams(body.kv_transfer_params);
  if (kvTransfer.kind === 'remote-decode' && stream)
    throw invalidValue(
      'stream',
      'false with kv_transfer_params.do_remote_decode (the prefill phase answers once)',
      true,
    );

  const prompt = endpoint === 'chat' ? chatPrompt(body.messages) : completionPrompt(body.prompt);
  if (tokenized !== undefined && prompt.ids === undefined) prompt.ids = tokenized;
  const { hashIds, inputTokens } = promptBlocks(endpoint, body, prompt, limits.blockSize);
  const maxTokens = outputTokens(endpoint, body, inputTokens, limits.maxModelLen);
  return {
    endpoint,
    api,
    model,
    stream,
    includeUsage,
    hashIds,
    tokens: prompt.ids,
    inputTokens,
    maxTokens,
    kvTransfer,
  };
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
  // Checked even when token ids win, so a malformed field is refused whatever the prompt.
  const traceIds = present(body.hash_ids) ? checkHashIds(body.hash_ids) : undefined;
  const givenTokens = present(body.input_tokens) ? checkInteger('input_tokens', body.input_tokens, 1) : undefined;
  if (prompt.ids !== undefined) {
    hashIds = tokenBlockIds(prompt.ids, blockSize);
    inputTokens = prompt.ids.length;
  } else if (traceIds !== undefined) {
    hashIds = traceIds;
    inputTokens = givenTokens ?? hashIds.length * blockSize;
  } else {
    hashIds = chunkIds(prompt.text, 4 * blockSize, Infinity);
    inputTokens = givenTokens ?? prompt.tokens;
  }
  if (inputTokens === 0) {
    const field =
      prompt.ids === undefined && traceIds !== undefined ? 'hash_ids' : endpoint === 'chat' ? 'messages' : 'prompt';
    throw new ApiError(400, 'BadRequestError', `${field} must not be empty: the prompt has no tokens`);
  }
  return { hashIds, inputTokens };
}

/**
 * The engine's block ids of a token prompt: one per full block (see the header). The hex text is
 * each token id as 8 lowercase hex digits, which is a big-endian u32's bytes in hex.
 */
export function tokenBlockIds(tokens: Uint32Array, blockSize: number): number[] {
  const full = Math.floor(tokens.length / blockSize);
  const bytes = Buffer.alloc(full * blockSize * 4);
  for (let i = 0; i < full * blockSize; i++) bytes.writeUInt32BE(tokens[i]!, i * 4);
  return chunkIds(bytes.toString('hex'), 8 * blockSize, full);
}

/** The first `limit` chained ids of `text` in chunks of `chunkBytes`, cut to 52 bits. */
function chunkIds(text: string, chunkBytes: number, limit: number): number[] {
  const ids = hashPrompt(text, { chunkBytes });
  const count = Math.min(ids.length, limit);
  const out = new Array<number>(count);
  for (let i = 0; i < count; i++) out[i] = Number(ids[i]! & ID_MASK);
  return out;
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
  text: string;
  /** Prompt tokens of the text (4 bytes per token); with `ids`, their number. */
  tokens: number;
  /** The prompt's token ids, when it has them. */
  ids?: Uint32Array;
}

function textPrompt(text: string): Prompt {
  return { text, tokens: Math.ceil(Buffer.byteLength(text, 'utf8') / 4) };
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
  const tokens = new Uint32Array(ids.length);
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i];
    if (!(typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < 2 ** 32))
      throw invalidValue(`${field}[${i}]`, 'a token id: an integer in [0, 2^32)', id);
    tokens[i] = id;
  }
  return { text: '', tokens: ids.length, ids: tokens };
}

function checkHashIds(value: unknown): number[] {
  if (!Array.isArray(value)) throw invalidType('hash_ids', 'an array of integers', value);
  for (let i = 0; i < value.length; i++) {
    if (!Number.isSafeInteger(value[i]))
      throw invalidValue(`hash_ids[${i}]`, 'an integer within ±(2^53 − 1)', value[i]);
  }
  return value as number[];
}
