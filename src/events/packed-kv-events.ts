/**
 * Packs decoded KV events (kv-event-batch.ts) into the typed-array layout CoreRouter.applyKvEvents
 * takes (PackedKvEvents in src/core/core-router.ts; docs/kv-events.md, "The packed layout"), so a
 * tick's worth of messages from one engine crosses into the addon in one call.
 *
 * The buffers are reused: reset() empties the packer without freeing, and each array doubles when
 * a batch needs more room, so a steady stream stops allocating once the largest tick has been
 * seen. A packer is itself a PackedKvEvents: pass it to applyKvEvents() as is.
 *
 * medium and lora_id are not interpreted here, only flagged: the core decides what to ignore (and
 * counts it), so its counters see every event.
 *
 * Two ways in: addBatch()/addEvents() pack decoded events (kv-event-batch.ts), and addPayload()
 * decodes a msgpack payload straight into the packed form, skipping the event objects: the same
 * msgpackr unpacking, the same checks in the same order with the same messages (a differential
 * test holds it to decode-then-pack), one pass over the tokens instead of three.
 */
import {
  PACKED_FLAG_LORA,
  PACKED_FLAG_OTHER_MEDIUM,
  PACKED_FLAG_PARENT,
  PACKED_MAX_BLOCK_SIZE,
  PACKED_OP_CLEARED,
  PACKED_OP_REMOVED,
  PACKED_OP_STORED,
  PACKED_OP_WORDS,
  type PackedKvEvents,
} from '../core/core-router.js';
import {
  KvEventFormatError,
  eventFields,
  fail,
  hash,
  optionalInteger,
  optionalString,
  unpackKvEventBatch,
  type KvEvent,
  type KvEventBatch,
} from './kv-event-batch.js';

/** What addPayload() tells of a message beside its packed events. */
export interface PackedBatchInfo {
  ts: number;
  dataParallelRank: number | null;
  /** Event types the decoder does not know (skipped). */
  unknownEvents: number;
}

const MAX_TOKEN = 0xffff_ffff;

/** The medium of an event whose blocks are the engine's GPU prefix cache. */
export const isGpuMedium = (medium: string | null): boolean => medium === null || medium === 'GPU';

export class KvEventPacker implements PackedKvEvents {
  ops: Uint32Array;
  opsLength = 0;
  hashes: BigUint64Array;
  hashesLength = 0;
  tokens: Uint32Array;
  tokensLength = 0;
  /** Events packed since reset(). */
  events = 0;
  /** Blocks named by the packed stored and removed events since reset(). */
  blocks = 0;

  constructor(initialEvents = 64, initialTokens = 16_384) {
    this.ops = new Uint32Array(initialEvents * PACKED_OP_WORDS);
    this.hashes = new BigUint64Array(initialEvents * 8);
    this.tokens = new Uint32Array(initialTokens);
  }

  /** Empties the packer; its buffers are kept for the next tick. */
  reset(): void {
    this.opsLength = this.hashesLength = this.tokensLength = 0;
    this.events = this.blocks = 0;
  }

  /** Appends a decoded message's events (see addEvents). */
  addBatch(batch: KvEventBatch): void {
    this.addEvents(batch.events);
  }

  /**
   * Appends events in order. A token id that is not a u32, or a block size the core refuses,
   * throws KvEventFormatError naming the event and leaves the packer as it was before the call,
   * so the caller can count the message and skip it.
   */
  addEvents(events: readonly KvEvent[]): void {
    const [ops, hashes, tokens, count, blocks] = [
      this.opsLength,
      this.hashesLength,
      this.tokensLength,
      this.events,
      this.blocks,
    ];
    try {
      events.forEach((event, i) => this.add(event, i));
    } catch (error) {
      [this.opsLength, this.hashesLength, this.tokensLength, this.events, this.blocks] = [
        ops,
        hashes,
        tokens,
        count,
        blocks,
      ];
      throw error;
    }
  }

  /**
   * Decodes one msgpack KVEventBatch payload (either encoding) straight into the packed form. A
   * malformed payload throws KvEventFormatError (as decodeKvEventBatch words it) and leaves the
   * packer as it was before the call.
   */
  addPayload(payload: Uint8Array): PackedBatchInfo {
    const batch = unpackKvEventBatch(payload);
    const unknownEvents = this.addRawList(batch.events, 'batch.events');
    return { ts: batch.ts, dataParallelRank: batch.dataParallelRank, unknownEvents };
  }

  /**
   * Appends events as vLLM encodes them, already unpacked (each an array or a map with `type`),
   * with addPayload's checks, fields named `events[i]…`. Unknown types are skipped; returns how
   * many. A malformed event throws KvEventFormatError and leaves the packer as it was.
   */
  addRawEvents(events: readonly unknown[]): number {
    return this.addRawList(events, 'events');
  }

  /** Raw events in order, fields named `${field}[i]…`; all or nothing (see addRawEvents). */
  private addRawList(events: readonly unknown[], field: string): number {
    const saved = [this.opsLength, this.hashesLength, this.tokensLength, this.events, this.blocks] as const;
    let unknownEvents = 0;
    try {
      events.forEach((raw, i) => {
        if (!this.addRaw(raw, `${field}[${i}]`)) unknownEvents += 1;
      });
    } catch (error) {
      [this.opsLength, this.hashesLength, this.tokensLength, this.events, this.blocks] = saved;
      throw error;
    }
    return unknownEvents;
  }

  /** One raw event, checked in decodeKvEventBatch's order; false for an unknown type. */
  private addRaw(raw: unknown, field: string): boolean {
    const { type, get } = eventFields(raw, field);
    const at = (name: string) => `${field}.${name}`;
    if (type === 'AllBlocksCleared') {
      this.events += 1;
      this.record(PACKED_OP_CLEARED, 0, 0, 0);
      return true;
    }
    if (type === 'BlockRemoved') {
      const list = get('block_hashes', 1);
      if (!Array.isArray(list)) fail(at('block_hashes'), 'an array of block hashes', list);
      const start = this.reserveHashes(list.length);
      list.forEach((h, i) => (this.hashes[start + i] = hash(h, `${at('block_hashes')}[${i}]`)));
      const medium = optionalString(get('medium', 2), at('medium'));
      this.record(PACKED_OP_REMOVED, isGpuMedium(medium) ? 0 : PACKED_FLAG_OTHER_MEDIUM, list.length, 0);
      this.events += 1;
      this.blocks += list.length;
      return true;
    }
    if (type !== 'BlockStored') return false;
    const blockSize = get('block_size', 4);
    if (typeof blockSize !== 'number' || !Number.isInteger(blockSize) || blockSize < 1)
      fail(at('block_size'), 'an integer ≥ 1', blockSize);
    const list = get('block_hashes', 1);
    if (!Array.isArray(list)) fail(at('block_hashes'), 'an array of block hashes', list);
    const parentRaw = get('parent_block_hash', 2);
    const hasParent = parentRaw !== null && parentRaw !== undefined;
    const start = this.reserveHashes(list.length + (hasParent ? 1 : 0));
    list.forEach((h, i) => (this.hashes[start + (hasParent ? 1 : 0) + i] = hash(h, `${at('block_hashes')}[${i}]`)));
    if (hasParent) this.hashes[start] = hash(parentRaw, at('parent_block_hash'));
    const tokenList = get('token_ids', 3);
    if (!Array.isArray(tokenList)) fail(at('token_ids'), 'an array of token ids', tokenList);
    this.addRawTokens(tokenList, at('token_ids'));
    const loraId = optionalInteger(get('lora_id', 5), at('lora_id'));
    const medium = optionalString(get('medium', 6), at('medium'));
    if (tokenList.length !== list.length * blockSize)
      fail(
        at('token_ids'),
        `block_size × the number of block_hashes tokens (${blockSize} × ${list.length})`,
        `${tokenList.length} tokens`,
      );
    if (blockSize > PACKED_MAX_BLOCK_SIZE)
      throw new KvEventFormatError(`${at('block_size')}: must be an integer in [1, 2^24], got ${blockSize}`);
    const flags =
      (hasParent ? PACKED_FLAG_PARENT : 0) |
      (isGpuMedium(medium) ? 0 : PACKED_FLAG_OTHER_MEDIUM) |
      (loraId === null ? 0 : PACKED_FLAG_LORA);
    this.record(PACKED_OP_STORED, flags, list.length, blockSize);
    this.events += 1;
    this.blocks += list.length;
    return true;
  }

  /** Room for n more hashes; returns where they start (hashesLength moves past them). */
  private reserveHashes(n: number): number {
    const start = this.hashesLength;
    if (start + n > this.hashes.length) this.hashes = grow(this.hashes, start + n);
    this.hashesLength = start + n;
    return start;
  }

  /** Token ids from the wire, checked as decodeKvEventBatch checks them, then as u32. */
  private addRawTokens(list: unknown[], field: string): void {
    const need = this.tokensLength + list.length;
    if (need > this.tokens.length) this.tokens = grow(this.tokens, need);
    const out = this.tokens;
    let at = this.tokensLength;
    for (let i = 0; i < list.length; i += 1) {
      const t = list[i];
      if (typeof t !== 'number' || !Number.isInteger(t) || t < 0)
        fail(`${field}[${i}]`, 'a token id (an integer ≥ 0)', t);
      if (t > MAX_TOKEN) throw new KvEventFormatError(`${field}[${i}]: must be a u32 token id, got ${t}`);
      out[at++] = t;
    }
    this.tokensLength = at;
  }

  private add(event: KvEvent, index: number): void {
    this.events += 1;
    if (event.type === 'cleared') {
      this.record(PACKED_OP_CLEARED, 0, 0, 0);
      return;
    }
    const flagOther = isGpuMedium(event.medium) ? 0 : PACKED_FLAG_OTHER_MEDIUM;
    const n = event.blockHashes.length;
    this.blocks += n;
    if (event.type === 'removed') {
      this.record(PACKED_OP_REMOVED, flagOther, n, 0);
      this.addHashes(event.blockHashes, null);
      return;
    }
    const field = `events[${index}]`;
    if (event.blockSize < 1 || event.blockSize > PACKED_MAX_BLOCK_SIZE || !Number.isInteger(event.blockSize))
      throw new KvEventFormatError(`${field}.block_size: must be an integer in [1, 2^24], got ${event.blockSize}`);
    if (event.tokenIds.length !== n * event.blockSize)
      throw new KvEventFormatError(
        `${field}.token_ids: must hold block_size × ${n} tokens, got ${event.tokenIds.length}`,
      );
    const flags =
      (event.parentBlockHash === null ? 0 : PACKED_FLAG_PARENT) |
      flagOther |
      (event.loraId === null ? 0 : PACKED_FLAG_LORA);
    this.record(PACKED_OP_STORED, flags, n, event.blockSize);
    this.addHashes(event.blockHashes, event.parentBlockHash);
    this.addTokens(event.tokenIds, field);
  }

  private record(op: number, flags: number, count: number, blockSize: number): void {
    if (this.opsLength + PACKED_OP_WORDS > this.ops.length) this.ops = grow(this.ops, this.opsLength + PACKED_OP_WORDS);
    const at = this.opsLength;
    this.ops[at] = op;
    this.ops[at + 1] = flags;
    this.ops[at + 2] = count;
    this.ops[at + 3] = blockSize;
    this.opsLength = at + PACKED_OP_WORDS;
  }

  private addHashes(list: readonly bigint[], parent: bigint | null): void {
    const need = this.hashesLength + list.length + (parent === null ? 0 : 1);
    if (need > this.hashes.length) this.hashes = grow(this.hashes, need);
    let at = this.hashesLength;
    if (parent !== null) this.hashes[at++] = parent;
    for (const h of list) this.hashes[at++] = h;
    this.hashesLength = at;
  }

  private addTokens(list: readonly number[], field: string): void {
    const need = this.tokensLength + list.length;
    if (need > this.tokens.length) this.tokens = grow(this.tokens, need);
    const out = this.tokens;
    let at = this.tokensLength;
    for (let i = 0; i < list.length; i += 1) {
      const t = list[i]!;
      // The decoder checked for integers >= 0; a Uint32Array would wrap anything larger.
      if (t > MAX_TOKEN) throw new KvEventFormatError(`${field}.token_ids[${i}]: must be a u32 token id, got ${t}`);
      out[at++] = t;
    }
    this.tokensLength = at;
  }
}

/** A copy of `array` with room for at least `need` elements (doubling). */
function grow<T extends Uint32Array | BigUint64Array>(array: T, need: number): T {
  let size = Math.max(array.length * 2, 16);
  while (size < need) size *= 2;
  const bigger = new (array.constructor as new (n: number) => T)(size);
  bigger.set(array as never);
  return bigger;
}
