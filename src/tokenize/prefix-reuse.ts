/**
 * Reuse of the previous turn's tokens in an agentic session. The turn after a turn renders to a
 * text that usually starts with the previous text (the conversation only grows), so most of its
 * tokens are already known.
 *
 * Rule: let L be the length of the longest common prefix of the previous text and the new one,
 * and c the last anchor of the previous text (added-token-anchors.ts) at or before L, with k
 * tokens before it. Then the new tokens are the previous tokens [0, k) followed by the encoding
 * of the new text from c. Exact by the anchor property: the new text's added-token split agrees
 * with the previous text's up to c, and pieces are encoded independently. A BPE merge across the
 * point of divergence cannot leak back past c, because c ends an added token.
 *
 * Templates that rewrite earlier turns (Qwen3 strips `<think>` from past assistant turns once a
 * new user query arrives) simply make L smaller, and the rule re-encodes from the last anchor
 * before the rewrite; when there is none, it is a full encode. No template is special-cased.
 *
 * Cost: O(L) to compare the texts, a binary search over the anchors, and the encoding of the
 * new text from c; the anchors of that part are scanned and checked too (O(its length)).
 */
import type { AddedTokenScanner } from './added-token-anchors.js';

/** A rendered text with its tokens, and its anchors (flattened [charEnd, tokenEnd] pairs; undefined: never reuse). */
export interface EncodedText {
  text: string;
  tokens: Uint32Array;
  anchors: Uint32Array | undefined;
}

export interface ReuseResult {
  encoded: EncodedText;
  /** Tokens taken from the previous encoding (0: encoded from scratch). */
  reusedTokens: number;
}

/** Length of the longest common prefix of two strings, in UTF-16 units. */
export function commonPrefixLength(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  // Compare in chunks first: string slices compare natively, much faster than per-unit loops.
  let i = 0;
  for (let step = 4096; step >= 1; step = step >> 3 || (step > 1 ? 1 : 0)) {
    while (i + step <= n && a.slice(i, i + step) === b.slice(i, i + step)) i += step;
    if (step === 1) break;
  }
  return i;
}

/** The last anchor pair index whose charEnd ≤ limit, or -1. Anchors ascend. */
function lastAnchorAtOrBefore(anchors: Uint32Array, limit: number): number {
  let lo = 0;
  let hi = anchors.length / 2 - 1;
  let found = -1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if ((anchors[2 * mid] as number) <= limit) {
      found = mid;
      lo = mid + 1;
    } else hi = mid - 1;
  }
  return found;
}

/**
 * Encodes `text`, reusing `previous` where the rule allows. `encode` is the tokenizer's
 * encoding without special tokens (as chat prompts are encoded); `scanner` finds the anchors.
 */
export function encodeWithReuse(
  previous: EncodedText | undefined,
  text: string,
  encode: (text: string) => Uint32Array,
  scanner: AddedTokenScanner,
): ReuseResult {
  let charStart = 0;
  let tokenStart = 0;
  let anchorPairs = 0;
  if (previous?.anchors !== undefined && previous.anchors.length > 0) {
    const limit = commonPrefixLength(previous.text, text);
    const at = lastAnchorAtOrBefore(previous.anchors, limit);
    if (at >= 0) {
      charStart = previous.anchors[2 * at] as number;
      tokenStart = previous.anchors[2 * at + 1] as number;
      anchorPairs = at + 1;
    }
  }
  const tail = encode(charStart === 0 ? text : text.slice(charStart));
  const tokens = new Uint32Array(tokenStart + tail.length);
  if (tokenStart > 0 && previous) tokens.set(previous.tokens.subarray(0, tokenStart));
  tokens.set(tail, tokenStart);
  const tailAnchors = scanner.anchorsOf(charStart === 0 ? text : text.slice(charStart), tail, charStart, tokenStart);
  let anchors: Uint32Array | undefined;
  if (tailAnchors !== undefined) {
    anchors = new Uint32Array(anchorPairs * 2 + tailAnchors.length);
    if (anchorPairs > 0 && previous?.anchors) anchors.set(previous.anchors.subarray(0, anchorPairs * 2));
    anchors.set(tailAnchors, anchorPairs * 2);
  }
  return { encoded: { text, tokens, anchors }, reusedTokens: tokenStart };
}
