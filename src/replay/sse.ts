/**
 * A minimal, robust reader of an OpenAI-compatible completion stream (Server-Sent Events): it
 * takes the body's bytes as they come and keeps what a replay record needs: when the first
 * token arrived, how many content chunks came, the final `usage`, an in-stream error, and
 * whether `data: [DONE]` ended the stream.
 *
 * Rules (the SSE spec, cut to what engines send):
 * - Events end at a blank line; lines end in LF or CRLF. Bytes are split into lines only at LF,
 *   so a multi-byte UTF-8 character split across chunks is never decoded half.
 * - Only `data:` fields are read (one optional space after the colon); several `data:` lines of
 *   one event are joined with LF. Comments (`:`), `event:`, `id:` and `retry:` are ignored.
 * - A `data` that is not JSON, or JSON without `choices`/`usage`/`error`, is skipped, not fatal.
 * - A token is a chunk whose first choice carries non-empty `text` (completions) or
 *   `delta.content` / `delta.reasoning_content` (chat); the usage-only chunk is not one.
 *
 * Cost: O(bytes); one JSON.parse per event.
 */

export interface StreamUsage {
  prompt_tokens?: number;
  completion_tokens?: number;
  prompt_tokens_details?: { cached_tokens?: number } | null;
}

export class SseReader {
  /** performance.now() of the first token chunk; undefined until one came. */
  firstTokenAt: number | undefined;
  /** Chunks that carried a token. */
  tokenChunks = 0;
  usage: StreamUsage | undefined;
  /** The message of an `{"error": …}` event. */
  error: string | undefined;
  /** `data: [DONE]` was seen. */
  done = false;
  private pending: Buffer | undefined;
  private data: string[] = [];

  constructor(private readonly now: () => number = () => performance.now()) {}

  /** Feeds the next chunk of the body. */
  push(chunk: Buffer): void {
    let bytes = this.pending === undefined ? chunk : Buffer.concat([this.pending, chunk]);
    let start = 0;
    for (let lf = bytes.indexOf(10, start); lf !== -1; lf = bytes.indexOf(10, start)) {
      const end = lf > start && bytes[lf - 1] === 13 ? lf - 1 : lf;
      this.line(bytes.toString('utf8', start, end));
      start = lf + 1;
    }
    if (start < bytes.length) {
      bytes = bytes.subarray(start);
      this.pending = Buffer.from(bytes); // a copy: the caller's chunk may be reused
    } else this.pending = undefined;
  }

  /** The body ended: a last event without its blank line still counts. */
  end(): void {
    if (this.pending !== undefined) this.line(this.pending.toString('utf8'));
    this.pending = undefined;
    this.dispatch();
  }

  private line(text: string): void {
    if (text === '') return this.dispatch();
    if (!text.startsWith('data:')) return; // comment or another field
    this.data.push(text.charCodeAt(5) === 32 ? text.slice(6) : text.slice(5));
  }

  private dispatch(): void {
    if (this.data.length === 0) return;
    const data = this.data.length === 1 ? this.data[0]! : this.data.join('\n');
    this.data = [];
    if (data.trim() === '[DONE]') {
      this.done = true;
      return;
    }
    let event: unknown;
    try {
      event = JSON.parse(data);
    } catch {
      return;
    }
    if (typeof event !== 'object' || event === null) return;
    const e = event as {
      choices?: Array<{ text?: unknown; delta?: { content?: unknown; reasoning_content?: unknown } }>;
      usage?: StreamUsage | null;
      error?: { message?: unknown } | string;
    };
    if (e.error !== undefined && e.error !== null) {
      this.error =
        typeof e.error === 'string' ? e.error : typeof e.error.message === 'string' ? e.error.message : 'stream error';
    }
    if (e.usage !== undefined && e.usage !== null && typeof e.usage === 'object') this.usage = e.usage;
    const choice = Array.isArray(e.choices) ? e.choices[0] : undefined;
    if (choice === undefined || choice === null) return;
    const text = choice.text ?? choice.delta?.content ?? choice.delta?.reasoning_content;
    if (typeof text === 'string' && text !== '') {
      this.tokenChunks++;
      this.firstTokenAt ??= this.now();
    }
  }
}
