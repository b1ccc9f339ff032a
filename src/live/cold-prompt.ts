/**
 * Prompts that no prefix cache can hit: a unique nonce first, then `tokens` common three-letter
 * English words, each with its leading space. Every word is 4 bytes, one token in the BPE
 * vocabularies of the models the reference experiments ran (Qwen, Llama) and exactly one in kvroute's simulated
 * engines (4 bytes per token), so `tokens` is the prompt's length to within the nonce's few.
 */
import { randomBytes } from 'node:crypto';

const WORDS = [
  ' the',
  ' and',
  ' for',
  ' you',
  ' not',
  ' are',
  ' but',
  ' all',
  ' any',
  ' can',
  ' had',
  ' her',
  ' was',
  ' one',
  ' our',
  ' out',
  ' day',
  ' get',
  ' has',
  ' him',
  ' his',
  ' how',
  ' man',
  ' new',
  ' now',
  ' old',
  ' see',
  ' two',
  ' way',
  ' who',
  ' did',
  ' its',
  ' let',
  ' put',
  ' say',
  ' she',
  ' too',
  ' use',
] as const;

/** A random prompt of about `tokens` tokens that shares no first block with any other. */
export function coldPrompt(tokens: number): string {
  const random = randomBytes(tokens);
  const parts = new Array<string>(tokens + 1);
  parts[0] = randomBytes(6).toString('hex');
  for (let i = 0; i < tokens; i++) parts[i + 1] = WORDS[random[i]! % WORDS.length]!;
  return parts.join('');
}
