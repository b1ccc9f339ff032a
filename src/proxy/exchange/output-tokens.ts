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
const COMPLETION_TOKENS = Buffer.from('"completion_tokens"');
const DELTA = Buffer.from('"delta"');
const COLON = 0x3a;
const ZERO = 0x30;
/** Bytes after the key the integer is looked for in. */
const WINDOW = 32;

/** `usage.completion_tokens` in `buf` (its last), or undefined. */
export function completionTokensIn(buf: Buffer): number | undefined {
  const key = buf.lastIndexOf(COMPLETION_TOKENS);
  if (key < 0) return undefined;
  let i = key + COMPLETION_TOKENS.length;
  const end = Math.min(buf.length, i + WINDOW);
  while (i < end && isSpace(buf[i]!)) i++;
  if (i >= end || buf[i] !== COLON) return undefined;
  i++;
  while (i < end && isSpace(buf[i]!)) i++;
  let value = -1;
  for (; i < end; i++) {
    const d = buf[i]! - ZERO;
    if (d < 0 || d > 9) break;
    value = (value < 0 ? 0 : value * 10) + d;
  }
  return value < 0 ? undefined : value;
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** Follows a streamed answer chunk by chunk. */
export class StreamedTokenCounter {
  private chunks = 0;
  private reported: number | undefined;

  feed(chunk: Buffer): void {
    for (let at = chunk.indexOf(DELTA); at >= 0; at = chunk.indexOf(DELTA, at + DELTA.length)) this.chunks++;
    this.reported = completionTokensIn(chunk) ?? this.reported;
  }

  /** The engine's count when it sent one, else the chunks seen. */
  get tokens(): number {
    return this.reported ?? this.chunks;
  }
}
