/**
 * kvroute/tokenize: request tokenization (src/tokenize/): a tokenizer and chat template as vLLM
 * renders them, on worker threads (piscina).
 */
export {
  TokenizerPool,
  loadTokenizer,
  bundledTokenizerDir,
  TokenizerError,
  type TokenizerPoolOptions,
  type TokenizerPoolStats,
  type ChatExtras,
  type TokenizerErrorCode,
} from '../tokenize/index.js';
