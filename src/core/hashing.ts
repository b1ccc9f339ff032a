/**
 * Prompt hashing for callers outside route(): the same chained ids the router
 * computes for a `prompt` or `messages` request (docs/hashing.md).
 */
import { loadNative, nativeDisabledByEnv } from './native.js';
import { hashPrompt as referenceHashPrompt } from './reference/prompt-hash.js';
import { checkInteger, checkString } from './validate.js';

export interface HashPromptOptions {
  /** Bytes per chunk (default 128). */
  chunkBytes?: number;
  /** false uses the TypeScript reference. Default: the addon unless KVROUTE_NATIVE=0. */
  native?: boolean;
}

/** Chained 64-bit block ids of `text`'s UTF-8 bytes: ceil(bytes / chunkBytes) of them. */
export function hashPrompt(text: string, options: HashPromptOptions = {}): BigUint64Array {
  checkString('text', text);
  const chunkBytes =
    options.chunkBytes === undefined ? 128 : checkInteger('chunkBytes', options.chunkBytes, 1, 1 << 24);
  const native = options.native ?? !nativeDisabledByEnv();
  return native
    ? loadNative().hashPrompt(text, chunkBytes)
    : BigUint64Array.from(referenceHashPrompt(text, chunkBytes));
}
