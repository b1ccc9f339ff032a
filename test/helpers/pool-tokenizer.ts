/** A simulated engine's tokenizer from a TokenizerPool (what `sim serve --tokenizer` gives its engines). */
import type { PromptTokenizer } from '../../src/sim/completion-request.js';
import type { TokenizerPool } from '../../src/tokenize/tokenizer-pool.js';

export function poolTokenizer(pool: TokenizerPool, model = '*'): PromptTokenizer {
  return (input) =>
    input.kind === 'chat'
      ? pool.tokenizeChat(model, input.messages, input.body, input.session)
      : pool.tokenizeText(model, input.text);
}
