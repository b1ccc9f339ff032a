/**
 * The simulated engine's KV cache events, encoded in vLLM's wire format (docs/kv-events.md): a
 * msgpack KVEventBatch in either encoding, and the three frames of a message.
 *
 * - `array` (vLLM before 2026, msgspec `array_like` structs): the batch is `[ts, events, rank]`
 *   and each event is `[type, ...fields in declaration order]`.
 * - `map` (vLLM since, tagged structs): the batch is `{ts, events, data_parallel_rank}` and each
 *   event is a map of its fields with `type` first, and `lora_name: null` as current vLLM sends.
 *
 * Block hashes are u64 on the wire: an id below 2^32 is a msgpack uint, a larger one a 64-bit
 * integer (msgpackr writes a plain number that large as a float64, which no vLLM consumer would
 * accept, so it goes out as a bigint). A negative id (a trace's `hash_ids` may hold one) is sent
 * as its unsigned 64-bit value. `lora_id` is null and `medium` is "GPU": the simulated engine
 * serves no adapters and has no offload tier.
 *
 * - `sglang` (SGLang's, python/sglang/srt/disaggregation/kv_events.py and its radix cache's event
 *   mixin): positional as `array`, the batch `[ts, events, attn_dp_rank]`, but one event per page:
 *   a BlockStored of n blocks goes out as n BlockStored of one hash each, each the next's parent,
 *   and a BlockRemoved as n. Its hashes are signed int64 (SGLang folds a SHA-256 into an int64), so
 *   the simulated ids are mixed into the whole signed range (sglangHash), negatives included.
 */
import { Packr } from 'msgpackr';

export type KvEventEncoding = 'array' | 'map' | 'sglang';
/** vLLM's two encodings (`sim serve --kv-events-encoding`); `sglang` comes with `--flavor sglang`. */
export const KV_EVENT_ENCODINGS: readonly KvEventEncoding[] = ['array', 'map'];

/** One event as the engine produces it; ids are the engine's block ids (safe integers). */
export type PublishedKvEvent =
  | {
      type: 'BlockStored';
      blockHashes: number[];
      /** The id of the block before the first one, or null at the root. */
      parentBlockHash: number | null;
      /** Exactly blockSize × blockHashes.length token ids. */
      tokenIds: number[];
      blockSize: number;
    }
  | { type: 'BlockRemoved'; blockHashes: number[] }
  | { type: 'AllBlocksCleared' };

export const MEDIUM_GPU = 'GPU';

const packr = new Packr({ useRecords: false });
const TWO_32 = 4294967296;

/** A block id as msgpack will carry it as a u64 (see the header). */
function wireHash(id: number): number | bigint {
  if (id >= 0 && id < TWO_32) return id;
  return BigInt.asUintN(64, BigInt(id));
}

/**
 * A block id as SGLang would carry it: a signed int64, spread over the whole range by an odd
 * multiplier (a bijection mod 2^64, so ids never collide).
 */
export function sglangHash(id: number): bigint {
  return BigInt.asIntN(64, BigInt(id) * 0x9e3779b97f4a7c15n);
}

/** One event as SGLang sends it: one per page (see the header). */
function sglangWireEvents(event: PublishedKvEvent): unknown[] {
  switch (event.type) {
    case 'BlockStored': {
      let parent = event.parentBlockHash === null ? null : sglangHash(event.parentBlockHash);
      return event.blockHashes.map((id, j) => {
        const hash = sglangHash(id);
        const tokens = event.tokenIds.slice(j * event.blockSize, (j + 1) * event.blockSize);
        const wire = ['BlockStored', [hash], parent, tokens, event.blockSize, null, MEDIUM_GPU];
        parent = hash;
        return wire;
      });
    }
    case 'BlockRemoved':
      return event.blockHashes.map((id) => ['BlockRemoved', [sglangHash(id)], MEDIUM_GPU]);
    case 'AllBlocksCleared':
      return [['AllBlocksCleared']];
  }
}

/** One event as vLLM encodes it, before msgpack: an array or a map (see the header). */
export function wireEvent(event: PublishedKvEvent, encoding: 'array' | 'map'): unknown {
  switch (event.type) {
    case 'BlockStored': {
      const hashes = event.blockHashes.map(wireHash);
      const parent = event.parentBlockHash === null ? null : wireHash(event.parentBlockHash);
      return encoding === 'array'
        ? ['BlockStored', hashes, parent, event.tokenIds, event.blockSize, null, MEDIUM_GPU]
        : {
            type: 'BlockStored',
            block_hashes: hashes,
            parent_block_hash: parent,
            token_ids: event.tokenIds,
            block_size: event.blockSize,
            lora_id: null,
            medium: MEDIUM_GPU,
            lora_name: null,
          };
    }
    case 'BlockRemoved': {
      const hashes = event.blockHashes.map(wireHash);
      return encoding === 'array'
        ? ['BlockRemoved', hashes, MEDIUM_GPU]
        : { type: 'BlockRemoved', block_hashes: hashes, medium: MEDIUM_GPU };
    }
    case 'AllBlocksCleared':
      return encoding === 'array' ? ['AllBlocksCleared'] : { type: 'AllBlocksCleared' };
  }
}

/** The msgpack KVEventBatch of `events`, stamped `ts` (seconds), for data-parallel rank `rank`. */
export function encodeKvEventBatch(
  events: readonly PublishedKvEvent[],
  ts: number,
  encoding: KvEventEncoding,
  rank = 0,
): Buffer {
  const wire =
    encoding === 'sglang' ? events.flatMap(sglangWireEvents) : events.map((event) => wireEvent(event, encoding));
  return packr.pack(encoding === 'map' ? { ts, events: wire, data_parallel_rank: rank } : [ts, wire, rank]);
}

/** `seq` as 8 bytes, big-endian, signed (the replay end marker is −1). */
export function seqFrame(seq: bigint | number): Buffer {
  const frame = Buffer.alloc(8);
  frame.writeBigInt64BE(BigInt(seq));
  return frame;
}
