/**
 * The request as the TypeScript reference core reads it: the ids argument and the request slab
 * (core-router.ts's REQUEST_* fields), checked with the same errors the addon throws
 * (native/bindings, readRequest), and resolved to bigint block keys. Pure functions of their
 * arguments, so the reference router keeps only routing state.
 */
import {
  FLAG_DRY_RUN,
  FLAG_TOKEN_KEYS,
  IDS_ARGUMENT,
  IDS_F64,
  IDS_U32,
  IDS_U64,
  MAX_REQUEST_IDS,
  REQUEST_BLOCK_TOKENS,
  REQUEST_FLAGS,
  REQUEST_GROUP,
  REQUEST_IDS_KIND,
  REQUEST_INPUT_TOKENS,
  type CoreIds,
} from '../core-router.js';
import { invalidType, invalidValue, rangeError } from '../errors.js';
import { hashPromptBytes } from './prompt-hash.js';

const BYTES_PER_TOKEN = 4;
const MAX_BLOCK_TOKENS = 2 ** 24;
const MAX_SAFE = Number.MAX_SAFE_INTEGER;
const encoder = new TextEncoder();

/** A request after its slab and ids are checked. */
export interface ResolvedRequest {
  ids: bigint[];
  inputTokens: number;
  blockTokens: number;
  /** -1: no model. */
  group: number;
  dryRun: boolean;
  /** FLAG_TOKEN_KEYS: event-fed slots match from the event index. */
  tokenKeys: boolean;
}

/** What resolving a text prompt or block ids needs of the core's configuration. */
export interface SlabConfig {
  chunkBytes: number;
  blockTokens: number;
}

/** The ids argument, checked against the kind the slab names (see IDS_* in core-router.ts). */
export function checkIdsKind(slab: Float64Array, ids: CoreIds | string | undefined): CoreIds | string | undefined {
  const kind = slab[REQUEST_IDS_KIND];
  const expected =
    kind === IDS_U64 ? BigUint64Array : kind === IDS_F64 ? Float64Array : kind === IDS_U32 ? Uint32Array : undefined;
  if (kind !== IDS_ARGUMENT && kind !== undefined && !(expected !== undefined && ids instanceof expected)) {
    throw invalidType('hashIds', `the typed array kind ${kind} the request names`, ids);
  }
  return ids;
}

/** The slab's fields and the ids, checked and resolved; `groupCount` bounds the group field. */
export function resolveRequest(
  slab: Float64Array,
  ids: CoreIds | string | undefined,
  config: SlabConfig,
  groupCount: number,
): ResolvedRequest {
  const requestBlockTokens = slab[REQUEST_BLOCK_TOKENS]!;
  if (
    !Number.isNaN(requestBlockTokens) &&
    !(Number.isInteger(requestBlockTokens) && requestBlockTokens >= 1 && requestBlockTokens <= MAX_BLOCK_TOKENS)
  ) {
    throw invalidValue('blockTokens', `an integer in [1, ${MAX_BLOCK_TOKENS}]`, requestBlockTokens);
  }
  const group = slab[REQUEST_GROUP]!;
  if (group !== -1 && !(Number.isInteger(group) && group >= 0 && group < groupCount)) {
    throw invalidValue('group', `-1 or a known group id below ${groupCount}`, group);
  }
  let bigints: bigint[];
  let blockTokens: number;
  let defaultTokens: number;
  if (typeof ids === 'string') {
    const bytes = encoder.encode(ids);
    if (Math.ceil(bytes.length / config.chunkBytes) > MAX_REQUEST_IDS) {
      throw invalidValue('prompt', `at most ${MAX_REQUEST_IDS} blocks long`, `${bytes.length} bytes`);
    }
    bigints = hashPromptBytes(bytes, config.chunkBytes);
    blockTokens = Number.isNaN(requestBlockTokens) ? config.chunkBytes / BYTES_PER_TOKEN : requestBlockTokens;
    defaultTokens = Math.ceil(bytes.length / BYTES_PER_TOKEN);
  } else {
    bigints = idsToBigints(ids);
    blockTokens = Number.isNaN(requestBlockTokens) ? config.blockTokens : requestBlockTokens;
    defaultTokens = bigints.length * blockTokens;
  }
  const requested = slab[REQUEST_INPUT_TOKENS]!;
  let inputTokens = defaultTokens;
  if (!Number.isNaN(requested)) {
    if (!(requested >= 0 && requested <= MAX_SAFE && Number.isInteger(requested))) {
      throw invalidValue('inputTokens', 'a non-negative integer', requested);
    }
    inputTokens = requested;
  }
  const flags = slab[REQUEST_FLAGS]!;
  if (flags !== 0 && !(Number.isInteger(flags) && flags >= 0 && flags <= (FLAG_DRY_RUN | FLAG_TOKEN_KEYS))) {
    throw rangeError('ERR_KVROUTE_INVALID_ARG_VALUE', `flags must be an integer in [0, 3], got ${flags}`);
  }
  return {
    ids: bigints,
    inputTokens,
    blockTokens,
    group,
    dryRun: (flags & FLAG_DRY_RUN) !== 0,
    tokenKeys: (flags & FLAG_TOKEN_KEYS) !== 0,
  };
}

/** Block ids of any accepted kind as bigints, each checked. */
export function idsToBigints(ids: CoreIds | undefined | null): bigint[] {
  if (ids === undefined || ids === null) return [];
  if (ArrayBuffer.isView(ids) && (ids as CoreIds).length > MAX_REQUEST_IDS) {
    throw invalidValue('hashIds', `at most ${MAX_REQUEST_IDS} ids`, `${(ids as CoreIds).length} ids`);
  }
  if (ids instanceof BigUint64Array) return Array.from(ids);
  if (ids instanceof Uint32Array) return Array.from(ids, (x) => BigInt(x));
  if (ids instanceof Float64Array) {
    const out = new Array<bigint>(ids.length);
    for (let i = 0; i < ids.length; i += 1) {
      const x = ids[i]!;
      if (!(x >= 0 && x <= MAX_SAFE && Number.isInteger(x))) {
        throw invalidValue(`hashIds[${i}]`, 'an integer in [0, 2^53)', x);
      }
      out[i] = BigInt(x);
    }
    return out;
  }
  throw invalidType('hashIds', 'a BigUint64Array, Float64Array, Uint32Array or an array of integers', ids);
}
