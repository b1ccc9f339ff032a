/**
 * Generated vLLM-like KV event streams for tests, with an independent model of what each engine
 * holds. Engines cache blocks of a fixed set of conversations (some sharing a system prompt);
 * an engine's block hash is a function of the block's content and the engine (as vLLM's is), and
 * sometimes an alias (vLLM hashes extra keys kvroute does not), so two hashes can share a key.
 * The model keys blocks by the request side's hashTokenBlocks over the conversation, not by
 * chaining events, so a test comparing the cores to it checks that the two sides meet.
 */
import type { KvEvent } from '../../src/events/kv-event-batch.js';
import { hashTokenBlocks } from '../../src/core/reference/token-keys.js';
import { Rng } from './random.js';

export interface Conversation {
  tokens: Uint32Array;
  keys: bigint[];
}

export function conversations(rng: Rng, blockSize: number, count = 12, maxBlocks = 24): Conversation[] {
  const prompts = [0, 1, 2].map(() => Array.from({ length: 3 * blockSize }, () => rng.int(0, 150_000)));
  return Array.from({ length: count }, () => {
    const shared = rng.chance(0.7) ? rng.pick(prompts) : [];
    const blocks = rng.int(4, maxBlocks);
    const tokens = Uint32Array.from([
      ...shared,
      ...Array.from({ length: blocks * blockSize - shared.length }, () => rng.int(0, 150_000)),
    ]);
    return { tokens, keys: hashTokenBlocks(tokens, blockSize) };
  });
}

const MASK = (1n << 64n) - 1n;
/** SplitMix64's finalizer: the engine's block hash of a key. */
function mix(x: bigint): bigint {
  x = ((x ^ (x >> 30n)) * 0xbf58476d1ce4e5b9n) & MASK;
  x = ((x ^ (x >> 27n)) * 0x94d049bb133111ebn) & MASK;
  return x ^ (x >> 31n);
}

export interface ModelCounters {
  stored: number;
  removed: number;
  cleared: number;
  ignored: number;
  orphaned: number;
  unknownRemoved: number;
}

/** One engine: its event stream and, independently, what it holds. */
export class EngineModel {
  readonly held = new Map<bigint, bigint>(); // engine hash -> key
  readonly refs = new Map<bigint, number>(); // key -> hashes
  /** key -> in-flight requests routed here holding it (the router's holds, event-index.h). */
  readonly inFlight = new Map<bigint, number>();
  /** Bumped by every clear: holds from before are gone. */
  epoch = 0;
  counters: ModelCounters = { stored: 0, removed: 0, cleared: 0, ignored: 0, orphaned: 0, unknownRemoved: 0 };
  private readonly salt: bigint;

  constructor(
    slot: number,
    private readonly convs: Conversation[],
    private readonly blockSize: number,
  ) {
    this.salt = mix(BigInt(slot + 1) * 0x9e3779b97f4a7c15n);
  }

  hashOf(key: bigint, alias: boolean): bigint {
    return mix(key ^ this.salt ^ (alias ? 0x5555n : 0n));
  }

  reset(): void {
    this.clear();
    this.counters = { stored: 0, removed: 0, cleared: 0, ignored: 0, orphaned: 0, unknownRemoved: 0 };
  }

  clear(): void {
    this.held.clear();
    this.refs.clear();
    this.inFlight.clear();
    this.epoch += 1;
  }

  /** An in-flight request routed here holds `keys` (by` +1`) or finished (`-1`). */
  holdInFlight(keys: readonly bigint[], by: 1 | -1): void {
    for (const key of keys) {
      const n = (this.inFlight.get(key) ?? 0) + by;
      if (n === 0) this.inFlight.delete(key);
      else this.inFlight.set(key, n);
    }
  }

  /** Random events (1 to `max`), applied to the model as they are made. */
  events(rng: Rng, max: number): KvEvent[] {
    return Array.from({ length: rng.int(1, max) }, () => this.event(rng));
  }

  private event(rng: Rng): KvEvent {
    const r = rng.next();
    if (r < 0.02) {
      this.clear();
      this.counters.cleared += 1;
      return { type: 'cleared' };
    }
    if (r < 0.35 && this.held.size > 0) return this.removal(rng);
    return this.store(rng);
  }

  private removal(rng: Rng): KvEvent {
    const known = [...this.held.keys()];
    const hashes = Array.from({ length: rng.int(1, 5) }, () => (rng.chance(0.1) ? rng.u64() : rng.pick(known)));
    const medium = rng.chance(0.05) ? 'CPU' : rng.pick(['GPU', null]);
    if (medium === 'CPU') this.counters.ignored += hashes.length;
    else
      for (const h of hashes) {
        const key = this.held.get(h);
        if (key === undefined) {
          this.counters.unknownRemoved += 1;
          continue;
        }
        this.held.delete(h);
        const refs = this.refs.get(key)! - 1;
        if (refs === 0) this.refs.delete(key);
        else this.refs.set(key, refs);
        this.counters.removed += 1;
      }
    return { type: 'removed', blockHashes: hashes, medium };
  }

  private store(rng: Rng): KvEvent {
    const conv = rng.pick(this.convs);
    // From the root, extending what the engine holds of the conversation, or anywhere (often an
    // orphan: its parent is not held).
    const depth = this.match(conv.keys, Infinity);
    const r = rng.next();
    const start = r < 0.3 || depth === conv.keys.length ? 0 : r < 0.75 ? depth : rng.int(0, conv.keys.length - 1);
    const count = Math.min(rng.int(1, 6), conv.keys.length - start);
    const bs = this.blockSize;
    const hashes = Array.from({ length: count }, (_, j) => this.hashOf(conv.keys[start + j]!, rng.chance(0.1)));
    let parent: bigint | null = null;
    if (start > 0) {
      const key = conv.keys[start - 1]!;
      const held = [false, true].map((alias) => this.hashOf(key, alias)).filter((h) => this.held.has(h));
      parent = held.length > 0 ? rng.pick(held) : this.hashOf(key, false);
    }
    const ignored = rng.chance(0.05) ? 'medium' : rng.chance(0.04) ? 'lora' : null;
    const event: KvEvent = {
      type: 'stored',
      blockHashes: hashes,
      parentBlockHash: parent,
      tokenIds: Array.from(conv.tokens.subarray(start * bs, (start + count) * bs)),
      blockSize: bs,
      loraId: ignored === 'lora' ? 1 : null,
      medium: ignored === 'medium' ? 'CPU_TIER' : rng.pick(['GPU', null]),
    };
    if (ignored !== null) this.counters.ignored += count;
    else if (parent !== null && !this.held.has(parent)) this.counters.orphaned += count;
    else
      hashes.forEach((h, j) => {
        this.counters.stored += 1;
        if (this.held.has(h)) return;
        const key = conv.keys[start + j]!;
        this.held.set(h, key);
        this.refs.set(key, (this.refs.get(key) ?? 0) + 1);
      });
    return event;
  }

  /** vLLM's prediction for a request of keys[0..n) and `inputTokens` prompt tokens. */
  match(keys: readonly bigint[], inputTokens: number): number {
    const cap = Math.min(keys.length, inputTokens >= 1 ? Math.floor((inputTokens - 1) / this.blockSize) : 0);
    let k = 0;
    while (k < cap && this.refs.has(keys[k]!)) k += 1;
    return k;
  }

  /** The router's prediction: match() over what the engine holds or an in-flight request will. */
  predict(keys: readonly bigint[], inputTokens: number): number {
    const cap = Math.min(keys.length, inputTokens >= 1 ? Math.floor((inputTokens - 1) / this.blockSize) : 0);
    let k = 0;
    while (k < cap && (this.refs.has(keys[k]!) || this.inFlight.has(keys[k]!))) k += 1;
    return k;
  }
}
