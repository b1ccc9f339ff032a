/**
 * A completion request's token ids, from its raw body, on a tokenizer worker: what the proxy
 * routes by when it keys requests over tokens (docs/tokenize.md, docs/kv-events.md).
 *
 * In order of preference (issue 17's "Request tokens"):
 * 1. `/v1/completions` whose `prompt` is an array of token ids: those ids, no tokenizer needed;
 * 2. with the model's tokenizer: `/v1/chat/completions` messages rendered and encoded as vLLM
 *    does, or a `/v1/completions` string prompt encoded; `/v1/messages` and `/v1/responses` as the
 *    chat request vLLM converts them to (api-requests.ts), rendered the same way;
 * 3. otherwise none, with the reason (the caller routes on text-chunk keys and says so).
 * A batch prompt (an array of strings or of id arrays) is several requests to vLLM: none.
 *
 * The body was already parsed and checked on the event loop (request-inputs.ts, the native
 * scanner); it is parsed again here, off the loop, because the proxy's scanner keeps no JS
 * objects. A body that no longer parses cannot happen, but is reported as none, not thrown.
 */
import { apiRequestToChat } from './api-requests.js';
import type { ChatExtras } from './chat-render.js';
import type { LoadedTokenizer } from './load-tokenizer.js';
import type { EncodedText, ReuseResult } from './prefix-reuse.js';

/** The routes whose bodies are tokenized: chat and completions, and the APIs rendered as chat (api-requests.ts). */
export type BodyEndpoint = 'chat' | 'completions' | 'messages' | 'responses';

export type BodyTokens =
  | { tokens: Uint32Array; reused: ReuseResult | undefined }
  | {
      none: 'no tokenizer for the model' | 'a batch prompt' | 'token ids out of range' | 'not JSON' | 'not renderable';
    };

const MAX_TOKEN_ID = 0xffffffff;

/** The ids of a prompt that is one flat array of token ids, else undefined. */
function promptIds(prompt: unknown[]): Uint32Array | 'out of range' | undefined {
  const ids = new Uint32Array(prompt.length);
  for (let i = 0; i < prompt.length; i++) {
    const t = prompt[i];
    if (typeof t !== 'number') return undefined;
    if (!Number.isInteger(t) || t < 0 || t > MAX_TOKEN_ID) return 'out of range';
    ids[i] = t;
  }
  return ids;
}

export function bodyTokens(
  endpoint: BodyEndpoint,
  body: Uint8Array,
  tokenizer: LoadedTokenizer | undefined,
  previous: EncodedText | undefined,
): BodyTokens {
  let b: Record<string, unknown>;
  try {
    b = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')) as Record<
      string,
      unknown
    >;
  } catch {
    return { none: 'not JSON' };
  }
  if (endpoint === 'completions') {
    if (Array.isArray(b.prompt)) {
      if (b.prompt.length === 0) return { tokens: new Uint32Array(0), reused: undefined };
      const ids = promptIds(b.prompt);
      if (ids === 'out of range') return { none: 'token ids out of range' };
      return ids === undefined ? { none: 'a batch prompt' } : { tokens: ids, reused: undefined };
    }
    if (tokenizer === undefined) return { none: 'no tokenizer for the model' };
    return { tokens: tokenizer.tokenizeText(b.prompt), reused: undefined };
  }
  if (tokenizer === undefined) return { none: 'no tokenizer for the model' };
  if (endpoint === 'messages' || endpoint === 'responses') {
    let shape;
    try {
      shape = apiRequestToChat(endpoint, b);
    } catch {
      return { none: 'not renderable' };
    }
    const extras: ChatExtras = shape.tools === undefined ? {} : { tools: shape.tools };
    const reused = tokenizer.tokenizeChat(shape.messages, extras, previous);
    return { tokens: reused.encoded.tokens, reused };
  }
  const reused = tokenizer.tokenizeChat(b.messages, b as ChatExtras, previous);
  return { tokens: reused.encoded.tokens, reused };
}
