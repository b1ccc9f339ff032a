/**
 * The prompt tokens an engine is predicted to serve from its prefix cache, from the blocks the
 * router believes it holds, by vLLM's rule: every matched block counts in full, but a prompt is
 * never served whole from cache (the engine recomputes at least its last token), so at most
 * floor((promptTokens − 1) / blockTokens) blocks count.
 *
 * `promptTokens` NaN means the prompt's token count is unknown: the cap is then matched ×
 * blockTokens, which overshoots by one block when the whole prompt is matched. A fractional
 * `blockTokens` (text chunks of chunkBytes / 4 tokens) gives a fractional product: it is floored.
 * Pure arithmetic on numbers, so the per-request read allocates nothing.
 */
export function predictCachedTokens(matchedBlocks: number, blockTokens: number, promptTokens: number): number {
  let blocks = matchedBlocks;
  if (!(blocks > 0) || !(blockTokens > 0)) return 0;
  // NaN (unknown) fails the comparison and leaves the cap at the matched blocks.
  if (promptTokens >= 0) blocks = Math.min(blocks, Math.floor((promptTokens - 1) / blockTokens));
  return blocks > 0 ? Math.floor(blocks * blockTokens) : 0;
}
