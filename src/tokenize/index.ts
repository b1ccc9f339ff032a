/**
 * Request tokenization (docs/tokenize.md): a model's tokenizer and chat template, rendered and
 * encoded as vLLM does, on worker threads, with reuse across an agentic session's turns.
 *
 *   const pool = await TokenizerPool.open({ tokenizers: { 'Qwen/Qwen3-8B': bundledTokenizerDir('qwen3') } });
 *   const ids = await pool.tokenizeChat('Qwen/Qwen3-8B', body.messages, body, sessionId);
 */
export { TokenizerPool, type TokenizerPoolOptions, type TokenizerPoolStats } from './tokenizer-pool.js';
export { loadTokenizer, LoadedTokenizer, type LoadTokenizerOptions } from './load-tokenizer.js';
export {
  bundledTokenizerDir,
  readTokenizerFiles,
  resolveTokenizerDir,
  type BundledTokenizer,
  type TokenizerFiles,
} from './tokenizer-files.js';
export { type ChatExtras } from './chat-render.js';
export { TokenizerError, type TokenizerErrorCode } from './tokenizer-errors.js';
export { encodeWithReuse, commonPrefixLength, type EncodedText, type ReuseResult } from './prefix-reuse.js';
