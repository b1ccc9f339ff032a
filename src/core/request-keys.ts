/**
 * RequestKeys: turns a RouteRequest into what the core reads, checking its shape on the way. The
 * request is keyed by exactly one of hashIds (typed ids, passed through without a copy), tokens
 * (token block keys at the router's blockSize, docs/hashing.md), prompt or messages (text the
 * core hashes itself); its model group, blockTokens and input tokens go into the request slab.
 *
 * Hot path: a request with neither model nor blockTokens costs two property loads here, and each
 * check is a small method, so V8 can inline them all into route().
 *
 * Invariants:
 * - the slab's REQUEST_GROUP and REQUEST_BLOCK_TOKENS hold the defaults (GROUP_NONE, NaN) unless
 *   `slabOptioned`; a throw between writing them leaves it set, so the next request rewrites both;
 * - `keys` and `keyFlags` describe the last request keyed (explain() reports `keys`).
 */
import {
  FLAG_TOKEN_KEYS,
  IDS_ARGUMENT,
  IDS_F64,
  IDS_U32,
  IDS_U64,
  REQUEST_BLOCK_TOKENS,
  REQUEST_GROUP,
  REQUEST_IDS_KIND,
  type CoreIds,
} from './core-router.js';
import { describe, invalidType, rangeError } from './errors.js';
import { hashTokenBlocks } from './hashing.js';
import { GROUP_NONE, type ModelGroups } from './model-groups.js';
import { promptText } from './prompt-text.js';
import type { Explanation, RouteRequest } from './types.js';
import { checkInteger, checkString, toCoreIds } from './validate.js';

const MAX_BLOCK_TOKENS = 1 << 24;

export class RequestKeys {
  /** What the last request was keyed by (explain() reports it). */
  keys: Explanation['keys'] = null;
  /** REQUEST_FLAGS bits of the request besides dry run: FLAG_TOKEN_KEYS or 0. */
  keyFlags = 0;
  /** The request slab holds a model group or blockTokens (not the defaults). */
  private slabOptioned = false;

  constructor(
    private readonly request: Float64Array,
    private readonly groups: ModelGroups,
    private readonly blockSizeTokens: number,
  ) {
    request[REQUEST_GROUP] = GROUP_NONE;
    request[REQUEST_BLOCK_TOKENS] = NaN;
  }

  /** The request's ids for the core (typed ids, or text), their kind written into the slab. */
  ids(request: RouteRequest): CoreIds | string | undefined {
    if (typeof request !== 'object' || request === null) throw invalidType('request', 'an object', request);
    const { hashIds, prompt, messages, tokens } = request;
    const given =
      (hashIds !== undefined ? 1 : 0) +
      (prompt !== undefined ? 1 : 0) +
      (messages !== undefined ? 1 : 0) +
      (tokens !== undefined ? 1 : 0);
    if (given > 1) {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'give at most one of request.hashIds, request.prompt, request.messages and request.tokens',
      );
    }
    this.keyFlags = 0;
    if (hashIds !== undefined) {
      this.keys = request.idsFrom === 'text' ? 'text' : 'hash_ids';
      return this.typedIds(hashIds);
    }
    if (tokens !== undefined) {
      this.keys = 'tokens';
      this.keyFlags = FLAG_TOKEN_KEYS;
      this.request[REQUEST_IDS_KIND] = IDS_U64;
      return hashTokenBlocks(tokenArray(tokens), this.blockSizeTokens);
    }
    this.request[REQUEST_IDS_KIND] = IDS_ARGUMENT;
    this.keys = prompt !== undefined || messages !== undefined ? 'text' : null;
    if (prompt !== undefined) return checkString('request.prompt', prompt);
    if (messages !== undefined) return promptText(messages, 'request.messages');
    return undefined;
  }

  /**
   * Writes the request's model group and blockTokens into the slab, or leaves the defaults there.
   * A request with neither costs two property loads: route() and the checks it calls stay small
   * enough for V8 to inline them all into it.
   */
  options(request: RouteRequest): void {
    if (request.model === undefined && request.blockTokens === undefined && !this.slabOptioned) return;
    this.setOptions(request);
  }

  inputTokens(request: RouteRequest): number {
    if (request.inputTokens !== undefined) return checkInteger('request.inputTokens', request.inputTokens, 0);
    return request.tokens === undefined ? NaN : request.tokens.length;
  }

  session(request: RouteRequest): string | undefined {
    const s = request.session;
    if (s === undefined || typeof s === 'string') return s;
    if (typeof s === 'number' && Number.isFinite(s)) return String(s);
    throw invalidType('request.session', 'a string or a finite number', s);
  }

  /** Ids as a typed array, their kind named in the request slab for the core (see IDS_*). */
  private typedIds(hashIds: RouteRequest['hashIds']): CoreIds {
    const r = this.request;
    if (hashIds instanceof BigUint64Array) r[REQUEST_IDS_KIND] = IDS_U64;
    else if (hashIds instanceof Float64Array) r[REQUEST_IDS_KIND] = IDS_F64;
    else if (hashIds instanceof Uint32Array) r[REQUEST_IDS_KIND] = IDS_U32;
    else {
      const ids = toCoreIds('request.hashIds', hashIds); // a plain array, copied
      r[REQUEST_IDS_KIND] = ids instanceof BigUint64Array ? IDS_U64 : IDS_F64;
      return ids;
    }
    return hashIds;
  }

  private setOptions(request: RouteRequest): void {
    const { model, blockTokens } = request;
    this.slabOptioned = true; // until both are written: a throw between them leaves no default behind
    this.request[REQUEST_GROUP] = model === undefined ? GROUP_NONE : this.groups.groupOf(model);
    this.request[REQUEST_BLOCK_TOKENS] = blockTokens === undefined ? NaN : this.blockTokens(request);
    this.slabOptioned = model !== undefined || blockTokens !== undefined;
  }

  private blockTokens(request: RouteRequest): number {
    if (request.tokens !== undefined)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        "request.blockTokens applies to request.hashIds only: request.tokens are keyed at the router's blockSize",
      );
    if (request.prompt !== undefined || request.messages !== undefined) {
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        'request.blockTokens applies to request.hashIds only: the router hashes request.prompt and ' +
          'request.messages itself, at hashChunkBytes / 4 tokens per block',
      );
    }
    return checkInteger('request.blockTokens', request.blockTokens, 1, MAX_BLOCK_TOKENS);
  }
}

/** request.tokens as a Uint32Array, each id checked (an integer in [0, 2^32)). */
function tokenArray(tokens: unknown): Uint32Array {
  if (tokens instanceof Uint32Array) return tokens;
  if (!Array.isArray(tokens)) throw invalidType('request.tokens', 'a Uint32Array or an array of token ids', tokens);
  const out = new Uint32Array(tokens.length);
  for (let i = 0; i < tokens.length; i++) {
    const t: unknown = tokens[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t > 0xffffffff)
      throw rangeError(
        'ERR_KVROUTE_INVALID_ARG_VALUE',
        `request.tokens[${i}] must be a token id in [0, 2^32), got ${describe(t)}`,
      );
    out[i] = t;
  }
  return out;
}
