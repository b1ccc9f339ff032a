/**
 * An answer's output tokens, for the learned decode cost (proxy-costs.ts): the engine's own
 * `usage.completion_tokens` when the answer carries it (a held JSON body; a stream with
 * `stream_options.include_usage`), else the streamed chunks counted, one per `"delta"` (vLLM
 * sends one chunk per decode step; the usage-only chunk and `[DONE]` carry none).
 *
 * Without the parse: a native substring search per chunk, as usage-scan.ts does. A key cut
 * between two upstream reads is missed (engines write an event per write, so this is rare); the
 * count then reads one low, never high, and a missed completion_tokens falls back to the count.
 */
import { integerAfter } from './usage-scan.js';

const COMPLETION_TOKENS = Buffer.from('"completion_tokens"');
const DELTA = Buffer.from('"delta"');
/** Bytes after the key the integer is looked for in. */
const WINDOW = 32;

/** `usage.completion_tokens` (or the API's `key`) in `buf` (its last), or undefined. */
export function completionTokensIn(buf: Buffer, key: Buffer = COMPLETION_TOKENS): number | undefined {
  const at = buf.lastIndexOf(key);
  if (at < 0) return undefined;
  const start = at + key.length;
  const value = integerAfter(buf, start, Math.min(buf.length, start + WINDOW));
  return value < 0 ? undefined : value;
}

/** Follows a streamed answer chunk by chunk. */
export class StreamedTokenCounter {
  private chunks = 0;
  private reported: number | undefined;

  /** `token`: occurs once per token event; `completion`: the usage key of the output's count (api-dialect.ts). */
  constructor(
    private readonly token: Buffer = DELTA,
    private readonly completion: Buffer = COMPLETION_TOKENS,
  ) {}

  feed(chunk: Buffer): void {
    const token = this.token;
    for (let at = chunk.indexOf(token); at >= 0; at = chunk.indexOf(token, at + token.length)) this.chunks++;
    this.reported = completionTokensIn(chunk, this.completion) ?? this.reported;
  }

  /** The engine's count when it sent one, else the chunks seen. */
  get tokens(): number {
    return this.reported ?? this.chunks;
  }
}
