/**
 * From a completion request's bytes to what routing and forwarding need: the parsed body is
 * checked just enough to route (OpenAI's required fields), the routing inputs are picked out,
 * and the bytes to forward are the original ones unless `--strip-extensions` has a field to
 * remove (only then is the body re-serialised).
 *
 * Routing inputs, in order of preference:
 * - block ids: the body's `hash_ids` (kvroute's extension: one non-negative integer per prompt
 *   block, chained), else the prompt (`messages` for chat, `prompt` for completions) which the
 *   router hashes in the addon. A completions prompt that is not a string (token ids, a batch)
 *   is routed by its comma-joined text, which keeps the prefix property the hashing needs.
 * - session: the configured header, else the body's `user`.
 * - flow control's inputs (docs/flow-control.md): the body's `priority` (vLLM's integer, lower is
 *   handled earlier; absent or null: none; anything but an integer is a 400 naming it), and the
 *   output cap vLLM applies (chat: `max_completion_tokens` unless absent or null, else
 *   `max_tokens`; completions: `max_tokens`), used when a non-negative integer and otherwise
 *   ignored: the engine judges it. Both stay in the forwarded body, which vLLM reads itself.
 *
 * Rules shared with the native scanner (request-scan.ts, docs/hashing.md), so both paths refuse
 * the same bodies: bytes that are not UTF-8 are refused (not decoded with U+FFFD); a body nesting
 * deeper than MAX_JSON_DEPTH levels (a value inside an array or object is a level below
 * it) is refused as invalid JSON (JSON.parse would take it, and
 * JSON.stringify of a deep content part would later throw); a `hash_ids` value -0 is the id 0; a
 * completions prompt array holding an object with a `toString` member (which String() cannot
 * convert) is an invalid field.
 *
 * hashParsedRequest() turns parseRequest()'s prompt into the router's block ids up front: the
 * JavaScript twin of the native scanner, and the scanner's fallback.
 */
import { isUtf8 } from 'node:buffer';

import { describe, isKvrouteError } from '../../core/errors.js';
import { hashPrompt } from '../../core/hashing.js';
import { promptText } from '../../core/prompt-text.js';
import type { ChatMessage, RouteRequest } from '../../core/types.js';
import { ApiRequestError, apiRequestToChat, chatPromptMessages } from '../../tokenize/api-requests.js';
import { ClientError } from '../server/error-body.js';

export type Endpoint = 'chat' | 'completions' | 'messages' | 'responses';

/** The endpoints the native scanner reads; the other two are parsed here (parseApiRequest). */
export const scannedNatively = (endpoint: Endpoint): endpoint is 'chat' | 'completions' =>
  endpoint === 'chat' || endpoint === 'completions';

/** kvroute's own body fields, removed by --strip-extensions. */
export const EXTENSION_FIELDS = ['hash_ids'] as const;

/**
 * The deepest level a value may sit at: the body is level 1, each value inside an array or object
 * (scalars too) one level below it. simdjson's maximum depth.
 */
export const MAX_JSON_DEPTH = 1024;
/** A request's ids become depths in a 24-bit field of the block index. */
const MAX_PROMPT_IDS = 16_777_215;

/** What the router takes: prompt-derived ids come with their `blockTokens` (chunkBytes / 4). */
export type ParsedRoute = RouteRequest;

export interface ParsedRequest {
  /** The body's `model`: a non-empty string. */
  model: string;
  /**
   * parseRequest(): `hashIds` (the body's hash_ids, a Float64Array), else `messages` or `prompt`
   * for the router to hash. hashParsedRequest() and the scanner: `hashIds` always, from the body
   * (Float64Array) or from the prompt (BigUint64Array, with `inputTokens` and `blockTokens`).
   * `session` in all three.
   */
  route: ParsedRoute;
  /** Bytes to send upstream. */
  body: Buffer;
  stream: boolean;
  /** The body's integer `priority` (-0 as 0); undefined when absent or null. */
  priority: number | undefined;
  /** The output cap the engine applies (readMaxTokens), a non-negative integer; undefined: none usable. */
  maxTokens: number | undefined;
}

function missing(field: string, what: string): ClientError {
  return new ClientError(400, `${field} is required: ${what}`, 'missing_field', field);
}

/** Parses and checks a body; throws ClientError (400) naming the field. */
export function parseRequest(
  endpoint: Endpoint,
  bytes: Buffer,
  sessionHeader: string,
  stripExtensions: boolean,
): ParsedRequest {
  if (!isUtf8(bytes)) throw new ClientError(400, 'the request body is not valid UTF-8', 'invalid_json');
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ClientError(400, `the request body is not valid JSON: ${(error as Error).message}`, 'invalid_json');
  }
  if (nestsDeeperThan(body, MAX_JSON_DEPTH)) {
    throw new ClientError(
      400,
      `the request body is not valid JSON: it nests deeper than ${MAX_JSON_DEPTH} levels`,
      'invalid_json',
    );
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ClientError(400, 'the request body must be a JSON object', 'invalid_json');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '')
    throw b.model === undefined
      ? missing('model', 'the model to use, as /v1/models lists it')
      : new ClientError(400, 'model must be a non-empty string', 'invalid_field', 'model');

  const route: ParsedRoute = {};
  const session = sessionHeader !== '' ? sessionHeader : bodySession(endpoint, b);
  if (session !== '') route.session = session;
  if (endpoint === 'messages' || endpoint === 'responses')
    return parseApiRequest(endpoint, b, bytes, route, stripExtensions);

  if (endpoint === 'chat') {
    if (b.messages === undefined) throw missing('messages', 'a list of chat messages');
    if (!Array.isArray(b.messages))
      throw new ClientError(400, 'messages must be an array of chat messages', 'invalid_field', 'messages');
  } else {
    if (b.prompt === undefined || b.prompt === null) throw missing('prompt', 'the text (or token ids) to complete');
    if (typeof b.prompt !== 'string' && !Array.isArray(b.prompt))
      throw new ClientError(400, 'prompt must be a string or an array', 'invalid_field', 'prompt');
  }

  // Before hash_ids and the prompt's own checks: the scanner's order.
  const priority = readPriority(b.priority);
  const maxTokens = readMaxTokens(endpoint === 'chat' ? b.max_completion_tokens : undefined, b.max_tokens);
  if (b.hash_ids !== undefined) route.hashIds = hashIds(b.hash_ids);
  else if (endpoint === 'chat') route.messages = b.messages as ChatMessage[];
  else route.prompt = typeof b.prompt === 'string' ? b.prompt : promptString(b.prompt as unknown[]);

  const forward = forwardedBody(b, bytes, stripExtensions);
  return { model: b.model as string, route, body: forward, stream: b.stream === true, priority, maxTokens };
}

/** The bytes to forward: the client's, unless --strip-extensions has a field of ours to remove. */
function forwardedBody(b: Record<string, unknown>, bytes: Buffer, stripExtensions: boolean): Buffer {
  if (!stripExtensions || !EXTENSION_FIELDS.some((f) => b[f] !== undefined)) return bytes;
  for (const f of EXTENSION_FIELDS) delete b[f];
  return Buffer.from(JSON.stringify(b));
}

/**
 * The session a body names when no session header does: chat and completions' `user`; the
 * Messages API's `metadata.user_id`; the Responses API's `prompt_cache_key` (OpenAI's key for
 * requests that share a prefix; Codex sends its conversation id there), else its `user`.
 */
function bodySession(endpoint: Endpoint, b: Record<string, unknown>): string {
  const nonEmpty = (v: unknown): string => (typeof v === 'string' ? v : '');
  if (endpoint === 'messages') {
    const metadata = b.metadata;
    return typeof metadata === 'object' && metadata !== null
      ? nonEmpty((metadata as Record<string, unknown>).user_id)
      : '';
  }
  if (endpoint === 'responses') return nonEmpty(b.prompt_cache_key) || nonEmpty(b.user);
  return nonEmpty(b.user);
}

/**
 * A Messages or Responses body: the chat request the engine renders it into (api-requests.ts) is
 * the prompt, with its tools first (a system message of their JSON, so that the text keys of a
 * conversation keep their prefix); `max_tokens` (Messages, required as the API requires it) or
 * `max_output_tokens` (Responses) is the output cap.
 */
function parseApiRequest(
  endpoint: 'messages' | 'responses',
  b: Record<string, unknown>,
  bytes: Buffer,
  route: ParsedRoute,
  stripExtensions: boolean,
): ParsedRequest {
  if (endpoint === 'messages' && b.max_tokens === undefined)
    throw missing('max_tokens', 'the most tokens to generate (the Messages API requires it)');
  const priority = readPriority(b.priority);
  const maxTokens = readMaxTokens(undefined, endpoint === 'messages' ? b.max_tokens : b.max_output_tokens);
  if (b.hash_ids !== undefined) route.hashIds = hashIds(b.hash_ids);
  else {
    let shape;
    try {
      shape = apiRequestToChat(endpoint, b);
    } catch (error) {
      if (!(error instanceof ApiRequestError)) throw error;
      const code = error.message.includes(' is required') ? 'missing_field' : 'invalid_field';
      throw new ClientError(400, error.message, code, error.field.replace(/[[.].*$/, ''));
    }
    route.messages = chatPromptMessages(shape);
  }
  const forward = forwardedBody(b, bytes, stripExtensions);
  return { model: b.model as string, route, body: forward, stream: b.stream === true, priority, maxTokens };
}

/**
 * parseRequest()'s result with the prompt (`route.messages` or `route.prompt`) replaced by its
 * block ids, exactly as the router would hash it (docs/hashing.md): `hashIds` (BigUint64Array),
 * `inputTokens` = ceil(UTF-8 bytes / 4) and `blockTokens` = chunkBytes / 4. A message promptText()
 * refuses is a 400 invalid_field naming `messages`, here rather than from route(). The result is
 * what the native scanner returns for the same body.
 */
export function hashParsedRequest(parsed: ParsedRequest, chunkBytes: number): ParsedRequest {
  const { messages, prompt } = parsed.route;
  if (messages === undefined && prompt === undefined) return parsed;
  const param = messages !== undefined ? 'messages' : 'prompt';
  let text: string;
  try {
    text = messages !== undefined ? promptText(messages) : prompt!;
  } catch (error) {
    if (isKvrouteError(error)) throw new ClientError(400, error.message, 'invalid_field', param);
    throw error;
  }
  const bytes = Buffer.byteLength(text, 'utf8');
  if (Math.ceil(bytes / chunkBytes) > MAX_PROMPT_IDS) {
    throw new ClientError(400, `prompt is too long: more than ${MAX_PROMPT_IDS} blocks`, 'invalid_field', param);
  }
  const route: ParsedRoute = {
    hashIds: hashPrompt(text, { chunkBytes }),
    inputTokens: Math.ceil(bytes / 4),
    blockTokens: chunkBytes / 4,
    idsFrom: 'text',
  };
  if (parsed.route.session !== undefined) route.session = parsed.route.session;
  return { ...parsed, route };
}

/** The body's `priority`: an integer (vLLM's, lower is handled earlier), or undefined when absent or null. */
function readPriority(value: unknown): number | undefined {
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value))
    throw new ClientError(
      400,
      `priority must be an integer (lower is handled earlier), got ${describe(value)}`,
      'invalid_field',
      'priority',
    );
  return value === 0 ? 0 : value; // -0 is 0
}

/**
 * The output cap the engine applies: `max_completion_tokens` unless absent or null, else
 * `max_tokens` (vLLM's ChatCompletionRequest.build_tok_params; a completions request has only
 * `max_tokens`, its caller passes undefined), when it is a non-negative integer. Anything else is
 * not ours to refuse: undefined, and the engine judges the value it receives.
 */
function readMaxTokens(maxCompletionTokens: unknown, maxTokens: unknown): number | undefined {
  const cap = maxCompletionTokens !== undefined && maxCompletionTokens !== null ? maxCompletionTokens : maxTokens;
  if (typeof cap !== 'number' || !Number.isInteger(cap) || cap < 0) return undefined;
  return cap === 0 ? 0 : cap; // -0 is 0
}

/** String(prompt) of an array, whose only failure (an object with a toString member) is the client's. */
function promptString(prompt: unknown[]): string {
  try {
    return String(prompt);
  } catch {
    throw new ClientError(
      400,
      'prompt cannot be converted to text: an object in it has a toString member',
      'invalid_field',
      'prompt',
    );
  }
}

/**
 * Whether some value sits deeper than `limit` levels: the body is level 1 and each value inside an
 * array or object one level below it, scalars included (simdjson's depth rule). Iterative.
 */
function nestsDeeperThan(root: unknown, limit: number): boolean {
  if (typeof root !== 'object' || root === null) return false;
  const stack: object[] = [root];
  const depths: number[] = [1];
  while (stack.length > 0) {
    const value = stack.pop()!;
    const depth = depths.pop()!;
    const children: unknown[] = Array.isArray(value) ? value : Object.values(value);
    if (children.length > 0 && depth >= limit) return true;
    for (const child of children) {
      if (typeof child === 'object' && child !== null) {
        stack.push(child);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/** Checks and converts in one pass: a Float64Array is the router's zero-copy id kind. */
function hashIds(value: unknown): Float64Array {
  const bad = () =>
    new ClientError(400, 'hash_ids must be an array of integers in [0, 2^53)', 'invalid_field', 'hash_ids');
  if (!Array.isArray(value)) throw bad();
  const ids = new Float64Array(value.length);
  for (let i = 0; i < value.length; i++) {
    const id: unknown = value[i];
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) throw bad();
    ids[i] = id === 0 ? 0 : id; // -0 is the id 0
  }
  return ids;
}
