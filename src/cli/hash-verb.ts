/** `kvroute hash`: the chained block ids the router computes for a prompt. */
import { hashPrompt } from '../core/hashing.js';
import { promptText } from '../core/prompt-text.js';
import type { ChatMessage } from '../core/types.js';
import { integerFlag, readInput, UsageError, type OptionValues } from './common.js';
import { HASH_DEFAULTS } from './defaults/hash-defaults.js';

/** The text a request hashes: a chat body's messages, a completion's prompt, or the input itself. */
function promptOf(input: string): string {
  const trimmed = input.trimStart();
  if (!trimmed.startsWith('{')) return input;
  let body: { messages?: ChatMessage[]; prompt?: unknown };
  try {
    body = JSON.parse(input);
  } catch {
    return input; // text that happens to start with a brace
  }
  if (body.messages !== undefined) return promptText(body.messages, 'messages');
  if (typeof body.prompt === 'string') return body.prompt;
  throw new UsageError('a JSON input needs "messages" (chat) or a string "prompt" (completions)');
}

export function hashVerb(values: OptionValues, [file]: string[]): void {
  const chunkBytes = integerFlag(values, 'chunk-bytes', 1) ?? HASH_DEFAULTS.chunkBytes;
  const text = promptOf(
    readInput(file, {
      verb: 'hash',
      what: 'a prompt (plain text or an OpenAI request body)',
      example: 'echo "hello world" | kvroute hash',
    }),
  );
  const ids = hashPrompt(text, { chunkBytes });
  if (values.json) {
    const bytes = Buffer.byteLength(text, 'utf8');
    process.stdout.write(`${JSON.stringify({ bytes, chunkBytes, ids: Array.from(ids, String) })}\n`);
  } else {
    process.stdout.write(ids.length === 0 ? '' : `${Array.from(ids).join('\n')}\n`);
  }
}
