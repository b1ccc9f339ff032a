/**
 * Prompt text from a trace's block ids, so a real engine's prefix cache hits exactly where the
 * trace says it would.
 *
 * Algorithm: block id → a word sequence drawn by a PRNG seeded with the id (mulberry32 over the
 * id's low and high 32 bits) from a vocabulary of common lower-case English words, each written
 * with a leading space. A prompt is the concatenation of its blocks' texts in order.
 *
 * Invariants:
 * - The text of a block depends only on its id and its token count: two requests sharing blocks
 *   0..i (trace ids are chained) send byte-identical prompt prefixes through block i, whatever
 *   follows. A partial last block (the prompt's remainder) is the full block's text cut to fewer
 *   words, so it is a prefix of the full block's text.
 * - One word per token, intended: the words are among the most common in English, which large
 *   BPE vocabularies (Llama 3, Qwen) hold as single tokens with their leading space, so a block
 *   of `blockSize` words should be about `blockSize` tokens and no token straddles two blocks.
 *   Not checked against a tokenizer here (none ships with kvroute): a real engine's
 *   `prompt_tokens` in the records is the measure.
 *
 * Hazard: the byte-identical-prefix property is exact; the token alignment of block boundaries
 * with the engine's own blocks is not (a tokenizer merging across a word boundary, or a chat
 * template, shifts it), so an engine's cached tokens can differ from the trace's by up to a block
 * per request.
 *
 * Tunables: WORDS (the vocabulary; 256 words, so a draw is 8 bits of the PRNG) and the cache of
 * full-block texts (CACHE_BLOCKS entries, cleared when full: memory stays bounded whatever the
 * trace, and a session's hot blocks are rebuilt at most once per clear).
 *
 * Cost: O(tokens) per prompt; a cached block is one string concatenation.
 */
/** 256 distinct words (a test checks the count). */
export const WORDS = (
  'the of and to in is it you that he was for on are with as his they be at one have this from ' +
  'or had by hot word but what some we can out other were all there when up use your how said an ' +
  'each she which do their time if will way about many then them write would like so these her ' +
  'long make thing see him two has look more day could go come did number sound no most people my ' +
  'over know water than call first who may down side been now find any new work part take get ' +
  'place made live where after back little only round man year came show every good me give our ' +
  'under name very through just form sentence great think say help low line differ turn cause much ' +
  'mean before move right boy old too same tell does set three want air well also play small end ' +
  'put home read hand port large spell add even land here must big high such follow act why ask ' +
  'men change went light kind off need house picture try us again animal point mother world near ' +
  'build self earth father head stand own page should country found answer school grow study still ' +
  'learn plant cover food sun four between state keep eye never last let thought city tree cross ' +
  'farm hard start might story saw far sea draw left late run while press close night real life few north open seem together next white children begin got walk'
)
  .split(' ')
  .map((word) => ` ${word}`);

/** Full-block texts kept before the cache is cleared. */
const CACHE_BLOCKS = 8192;

/** mulberry32: a fast 32-bit PRNG; the stream is a pure function of the seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
}

/** The words of block `id`, `tokens` of them (a prefix of the block's full text). */
export function blockWords(id: number, tokens: number): string {
  const random = mulberry32((id >>> 0) ^ Math.imul(Math.floor(id / 2 ** 32) | 0, 0x9e3779b1));
  const parts = new Array<string>(tokens);
  let bits = 0;
  let left = 0;
  for (let i = 0; i < tokens; i++) {
    if (left === 0) {
      bits = random();
      left = 4;
    }
    parts[i] = WORDS[bits & 0xff]!;
    bits >>>= 8;
    left--;
  }
  return parts.join('');
}

/** Builds prompts from block ids; caches full blocks (see the header). */
export class BlockText {
  private readonly cache = new Map<number, string>();

  constructor(readonly blockSize: number) {}

  /** The text of one block of `tokens` tokens (`blockSize` for every block but maybe the last). */
  block(id: number, tokens = this.blockSize): string {
    if (tokens !== this.blockSize) return blockWords(id, tokens);
    let text = this.cache.get(id);
    if (text === undefined) {
      if (this.cache.size >= CACHE_BLOCKS) this.cache.clear();
      text = blockWords(id, tokens);
      this.cache.set(id, text);
    }
    return text;
  }

  /**
   * The prompt of a request: its blocks in order, the last one cut to the tokens left of
   * `inputTokens` (a trace request's `inputLength`; at most ids.length × blockSize).
   */
  prompt(ids: readonly number[], inputTokens: number): string {
    let text = '';
    for (let i = 0; i < ids.length; i++) {
      const left = inputTokens - i * this.blockSize;
      text += this.block(ids[i]!, Math.max(1, Math.min(this.blockSize, left)));
    }
    return text;
  }
}
