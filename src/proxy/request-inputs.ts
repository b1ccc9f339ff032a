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
 */
import type { ChatMessage, RouteRequest } from '../core/types.js';
import { ClientError } from './error-body.js';

export type Endpoint = 'chat' | 'completions';

/** kvroute's own body fields, removed by --strip-extensions. */
export const EXTENSION_FIELDS = ['hash_ids'] as const;

export interface ParsedRequest {
  /** The body's `model`. */
  model: string;
  route: RouteRequest;
  /** Bytes to send upstream. */
  body: Buffer;
  stream: boolean;
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
  let body: unknown;
  try {
    body = JSON.parse(bytes.toString('utf8'));
  } catch (error) {
    throw new ClientError(400, `the request body is not valid JSON: ${(error as Error).message}`, 'invalid_json');
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new ClientError(400, 'the request body must be a JSON object', 'invalid_json');
  const b = body as Record<string, unknown>;
  if (typeof b.model !== 'string' || b.model === '')
    throw b.model === undefined
      ? missing('model', 'the model to use, as /v1/models lists it')
      : new ClientError(400, 'model must be a non-empty string', 'invalid_field', 'model');

  const route: RouteRequest = {};
  const session = sessionHeader !== '' ? sessionHeader : typeof b.user === 'string' && b.user !== '' ? b.user : '';
  if (session !== '') route.session = session;

  if (endpoint === 'chat') {
    if (b.messages === undefined) throw missing('messages', 'a list of chat messages');
    if (!Array.isArray(b.messages))
      throw new ClientError(400, 'messages must be an array of chat messages', 'invalid_field', 'messages');
  } else {
    if (b.prompt === undefined || b.prompt === null) throw missing('prompt', 'the text (or token ids) to complete');
    if (typeof b.prompt !== 'string' && !Array.isArray(b.prompt))
      throw new ClientError(400, 'prompt must be a string or an array', 'invalid_field', 'prompt');
  }

  if (b.hash_ids !== undefined) route.hashIds = hashIds(b.hash_ids);
  else if (endpoint === 'chat') route.messages = b.messages as ChatMessage[];
  else route.prompt = typeof b.prompt === 'string' ? b.prompt : String(b.prompt);

  let forward = bytes;
  if (stripExtensions && EXTENSION_FIELDS.some((f) => b[f] !== undefined)) {
    for (const f of EXTENSION_FIELDS) delete b[f];
    forward = Buffer.from(JSON.stringify(b));
  }
  return { model: b.model, route, body: forward, stream: b.stream === true };
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
    ids[i] = id;
  }
  return ids;
}
