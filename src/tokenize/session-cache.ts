/**
 * The last rendered text and tokens of each agentic session, for prefix reuse
 * (prefix-reuse.ts). A least-recently-used map bounded by entry count and by bytes (2 per UTF-16
 * unit of text, 4 per token, 4 per anchor number): inserting past either bound forgets the least
 * recently used sessions first; an entry larger than the byte bound alone is not kept.
 *
 * Invariant: `bytes` is the sum of the kept entries' sizes, and never exceeds `maxBytes`.
 */
import type { EncodedText } from './prefix-reuse.js';

export function encodedBytes(entry: EncodedText): number {
  return entry.text.length * 2 + entry.tokens.byteLength + (entry.anchors?.byteLength ?? 0);
}

export class SessionCache {
  private readonly entries = new Map<string, { entry: EncodedText; bytes: number }>();
  private total = 0;
  hits = 0;
  misses = 0;
  evictions = 0;

  constructor(
    readonly maxEntries: number,
    readonly maxBytes: number,
  ) {}

  get size(): number {
    return this.entries.size;
  }

  get bytes(): number {
    return this.total;
  }

  /** The session's entry, now the most recently used; undefined when unknown. */
  get(key: string): EncodedText | undefined {
    const slot = this.entries.get(key);
    if (!slot) {
      this.misses += 1;
      return undefined;
    }
    this.entries.delete(key);
    this.entries.set(key, slot);
    this.hits += 1;
    return slot.entry;
  }

  set(key: string, entry: EncodedText): void {
    this.delete(key);
    const bytes = encodedBytes(entry);
    if (bytes > this.maxBytes || this.maxEntries === 0) return;
    this.entries.set(key, { entry, bytes });
    this.total += bytes;
    for (const [oldest, slot] of this.entries) {
      if (this.entries.size <= this.maxEntries && this.total <= this.maxBytes) break;
      this.entries.delete(oldest);
      this.total -= slot.bytes;
      this.evictions += 1;
    }
  }

  delete(key: string): void {
    const slot = this.entries.get(key);
    if (!slot) return;
    this.entries.delete(key);
    this.total -= slot.bytes;
  }

  clear(): void {
    this.entries.clear();
    this.total = 0;
  }
}
