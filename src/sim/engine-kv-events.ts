/**
 * Turns one engine's block pool changes into vLLM KV cache events (docs/kv-events.md): listens to
 * the pool (BlockPoolListener) and hands the events of each event-loop turn to `flush` as one
 * batch, so a batch holds the events of the engine step(s) the real-time engine ran in that turn
 * (usually one; a late timer runs several at once).
 *
 * - A block named by a request becomes BlockStored; consecutive blocks of the same request named
 *   in one go share one event (as vLLM sends a request's new full blocks of a step), with
 *   `parent_block_hash` the id of the block before the first (null at the root: position 0).
 *   `token_ids` are the request's prompt tokens of those blocks when it has tokens, else each
 *   block's derived tokens (derived-tokens.ts).
 * - An evicted block becomes BlockRemoved; consecutive evictions share one event.
 * - A prefix-cache reset becomes AllBlocksCleared.
 * Order is kept: events leave in the order the pool reported them.
 *
 * `flushOn`: `turn` (the real-time engine) flushes at the end of each event-loop turn; `demand`
 * (the virtual-time simulator, whose whole run is one turn) flushes only when flushNow() is
 * called, and never schedules a timer.
 */
import type { BlockPoolListener } from './block-pool.js';
import { derivedBlockTokens } from './derived-tokens.js';
import type { Sequence } from './engine-model.js';
import type { PublishedKvEvent } from './kv-event-encoding.js';

/** The stored event being extended, with where its next block must come from to join it. */
interface OpenStored {
  event: Extract<PublishedKvEvent, { type: 'BlockStored' }>;
  sequence: Sequence;
  nextPosition: number;
}

export class EngineKvEvents implements BlockPoolListener<Sequence> {
  private pending: PublishedKvEvent[] = [];
  private open: OpenStored | undefined;
  private openRemoved: Extract<PublishedKvEvent, { type: 'BlockRemoved' }> | undefined;
  private timer: NodeJS.Immediate | undefined;
  private closed = false;

  constructor(
    private readonly blockSize: number,
    private readonly flush: (events: PublishedKvEvent[]) => void,
    private readonly flushOn: 'turn' | 'demand' = 'turn',
  ) {}

  named(id: number, sequence: Sequence | undefined, position: number): void {
    const tokens = this.blockTokens(id, sequence, position);
    const open = this.open;
    if (open !== undefined && open.sequence === sequence && open.nextPosition === position) {
      open.event.blockHashes.push(id);
      for (const token of tokens) open.event.tokenIds.push(token);
      open.nextPosition++;
      return;
    }
    const hashIds = sequence?.request.hashIds;
    const event: OpenStored['event'] = {
      type: 'BlockStored',
      blockHashes: [id],
      parentBlockHash: position > 0 && hashIds !== undefined ? hashIds[position - 1]! : null,
      tokenIds: tokens,
      blockSize: this.blockSize,
    };
    this.push(event);
    if (sequence !== undefined) this.open = { event, sequence, nextPosition: position + 1 };
  }

  evicted(id: number): void {
    if (this.openRemoved !== undefined) {
      this.openRemoved.blockHashes.push(id);
      return;
    }
    const event: PublishedKvEvent = { type: 'BlockRemoved', blockHashes: [id] };
    this.push(event);
    this.openRemoved = event;
  }

  cleared(): void {
    this.push({ type: 'AllBlocksCleared' });
  }

  /** Stops: what is pending is dropped and nothing more is flushed. */
  close(): void {
    this.closed = true;
    if (this.timer !== undefined) clearImmediate(this.timer);
    this.timer = undefined;
    this.pending = [];
  }

  /** Hands the pending events to `flush` now (also what the end of a turn does). */
  flushNow(): void {
    if (this.timer !== undefined) clearImmediate(this.timer);
    this.timer = undefined;
    this.open = undefined;
    this.openRemoved = undefined;
    if (this.pending.length === 0) return;
    const events = this.pending;
    this.pending = [];
    this.flush(events);
  }

  private push(event: PublishedKvEvent): void {
    if (this.closed) return;
    // A new event ends the runs that could be extended: order across kinds is kept.
    this.open = undefined;
    this.openRemoved = undefined;
    this.pending.push(event);
    if (this.flushOn === 'demand') return;
    this.timer ??= setImmediate(() => {
      this.timer = undefined;
      this.flushNow();
    });
  }

  private blockTokens(id: number, sequence: Sequence | undefined, position: number): number[] {
    const tokens = sequence?.request.tokens;
    const start = position * this.blockSize;
    if (tokens === undefined || start + this.blockSize > tokens.length) return derivedBlockTokens(id, this.blockSize);
    return Array.from(tokens.subarray(start, start + this.blockSize));
  }
}
