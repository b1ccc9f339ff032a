/**
 * Picks `usage.prompt_tokens` and `usage.prompt_tokens_details.cached_tokens` out of engine
 * responses without parsing them: the non-streaming JSON body at its end, and the SSE usage
 * chunk (`stream_options.include_usage`) as it passes. The keys are the API's (api-dialect.ts:
 * the Responses API's `input_tokens`, Anthropic's `input_tokens` plus its cache reads and writes).
 *
 * Algorithm: a native substring search for `"prompt_tokens"` per chunk (the other chunks carry
 * `"usage":null`, so they never match), then the two integers read in place within SCAN_WINDOW
 * bytes of the last `"usage"` key (JSON's whitespace around the colon allowed). Only runs when an
 * observer listens.
 *
 * SSE: only whole lines are scanned; a line cut at a chunk's end (an event split across two
 * upstream reads) is carried over, copied, and scanned with the next chunk, so a usage event is
 * read whatever its field order and wherever the cut. Engines write each event in one write, so
 * the carry is rare; a line longer than MAX_CARRY is not carried (its usage unknown, never wrong).
 */
import type { UsageCounts } from '../observe/proxy-observer.js';
import { OPENAI_USAGE, type UsageKeys } from './api-dialect.js';

const USAGE = Buffer.from('"usage"');
const DATA = Buffer.from('data:');
const SCAN_WINDOW = 2048;
const COLON = 0x3a;
const ZERO = 0x30;
/** An incomplete usage event longer than this is dropped, not carried. */
const MAX_CARRY = 64 * 1024;

/** Usage in buf[from, to), or undefined. */
export function usageIn(
  buf: Buffer,
  from = 0,
  to = buf.length,
  keys: UsageKeys = OPENAI_USAGE,
): UsageCounts | undefined {
  const key = buf.lastIndexOf(keys.prompt, to - 1);
  if (key < from) return undefined;
  const usageAt = buf.lastIndexOf(USAGE, key);
  const start = usageAt >= from ? usageAt : key;
  const end = Math.min(to, start + SCAN_WINDOW);
  let prompt = integerAfter(buf, key + keys.prompt.length, end);
  if (prompt < 0) return undefined;
  for (const also of keys.promptAlso) prompt += Math.max(0, integerIn(buf, also, start, end));
  const cached = integerIn(buf, keys.cached, start, end);
  return { prompt_tokens: prompt, cached_tokens: cached < 0 ? 0 : cached };
}

/** The integer after the first `key` in buf[start, end); -1 when absent. */
function integerIn(buf: Buffer, key: Buffer, start: number, end: number): number {
  const at = buf.indexOf(key, start);
  return at >= 0 && at < end ? integerAfter(buf, at + key.length, end) : -1;
}

/** The non-negative integer after `"key"` at buf[i]: optional space, ':', optional space, digits; -1 if not there. */
export function integerAfter(buf: Buffer, i: number, end: number): number {
  while (i < end && isSpace(buf[i]!)) i++;
  if (i >= end || buf[i] !== COLON) return -1;
  i++;
  while (i < end && isSpace(buf[i]!)) i++;
  let value = -1;
  for (; i < end; i++) {
    const d = buf[i]! - ZERO;
    if (d < 0 || d > 9) break;
    value = (value < 0 ? 0 : value * 10) + d;
  }
  return value;
}

const isSpace = (c: number): boolean => c === 0x20 || c === 0x09 || c === 0x0a || c === 0x0d;

/** Follows an SSE stream chunk by chunk; `usage` holds the last usage event seen. */
export class SseUsageScanner {
  usage: UsageCounts | undefined;
  private carry: Buffer | undefined;

  constructor(private readonly keys: UsageKeys = OPENAI_USAGE) {}

  feed(chunk: Buffer): void {
    let buf = chunk;
    if (this.carry !== undefined) {
      buf = Buffer.concat([this.carry, chunk]);
      this.carry = undefined;
    }
    // Whole lines only: a line cut at the chunk's end is carried (copied) into the next feed.
    const complete = buf.lastIndexOf(10) + 1;
    if (complete < buf.length && buf.length - complete <= MAX_CARRY) this.carry = Buffer.from(buf.subarray(complete));
    if (complete === 0) return;
    const key = buf.lastIndexOf(this.keys.prompt, complete - 1);
    if (key < 0) return;
    const start = buf.lastIndexOf(DATA, key);
    const end = buf.indexOf(10, key);
    this.usage = usageIn(buf, Math.max(0, start), end, this.keys) ?? this.usage;
  }
}
