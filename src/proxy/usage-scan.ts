/**
 * Picks `usage.prompt_tokens` and `usage.prompt_tokens_details.cached_tokens` out of engine
 * responses without parsing them: the non-streaming JSON body at its end, and the SSE usage
 * chunk (`stream_options.include_usage`) as it passes.
 *
 * Algorithm: a native substring search for `"prompt_tokens"` per chunk (the other chunks carry
 * `"usage":null`, so they never match), then two small regexes over at most SCAN_WINDOW bytes
 * from the last `"usage"` key. Only runs when an observer listens.
 *
 * Hazard: an SSE usage event split across two upstream chunks is carried over (copied) until
 * its line ends; a `"prompt_tokens"` key itself split across chunks is missed (usage unknown,
 * never wrong). Engines write each event in one write, so this is rare.
 */
import type { UsageCounts } from './proxy-observer.js';

const KEY = Buffer.from('"prompt_tokens"');
const USAGE = Buffer.from('"usage"');
const SCAN_WINDOW = 2048;
const PROMPT_RE = /"prompt_tokens"\s*:\s*(\d+)/;
const CACHED_RE = /"cached_tokens"\s*:\s*(\d+)/;
/** An incomplete usage event longer than this is dropped, not carried. */
const MAX_CARRY = 64 * 1024;

/** Usage in buf[from, to), or undefined. */
export function usageIn(buf: Buffer, from = 0, to = buf.length): UsageCounts | undefined {
  const key = buf.lastIndexOf(KEY, to - 1);
  if (key < from) return undefined;
  const usageAt = buf.lastIndexOf(USAGE, key);
  const start = usageAt >= from ? usageAt : key;
  const text = buf.toString('latin1', start, Math.min(to, start + SCAN_WINDOW));
  const prompt = PROMPT_RE.exec(text);
  if (prompt === null) return undefined;
  const cached = CACHED_RE.exec(text);
  return { prompt_tokens: Number(prompt[1]), cached_tokens: cached === null ? 0 : Number(cached[1]) };
}

/** Follows an SSE stream chunk by chunk; `usage` holds the last usage event seen. */
export class SseUsageScanner {
  usage: UsageCounts | undefined;
  private carry: Buffer | undefined;

  feed(chunk: Buffer): void {
    let buf = chunk;
    if (this.carry !== undefined) {
      buf = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    const key = buf.lastIndexOf(KEY);
    if (key < 0) return;
    const end = buf.indexOf(10, key); // the event's line ends at '\n'
    if (end < 0) {
      const start = Math.max(0, buf.lastIndexOf('data:', key));
      if (buf.length - start <= MAX_CARRY) this.carry = Buffer.from(buf.subarray(start));
      return;
    }
    this.usage = usageIn(buf, Math.max(0, buf.lastIndexOf('data:', key)), end) ?? this.usage;
  }
}
