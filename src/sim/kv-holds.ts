/**
 * The KV a simulated engine holds for decode engines (the prefill side of vLLM's disaggregated
 * prefill, docs/sim-serve.md "Disaggregated prefill"): a finished `do_remote_decode` request
 * keeps its blocks referenced (EngineModel `holdBlocks`) until a decode engine has pulled them,
 * as vLLM's NixlConnector delays freeing them.
 *
 * A hold is named by its request id (vLLM's `remote_request_id`) and by its block ids: the pool's
 * slot of each named block, and for a block without a hash (the partial last one) an id at or
 * above the pool's capacity, unique to the hold, so the list identifies its hold.
 *
 * Lifecycle: `hold` → (`claim` by one decode request → `release` when its transfer ends or it is
 * aborted) or expiry after `timeoutS` of engine time unclaimed (vLLM's
 * VLLM_NIXL_ABORT_REQUEST_TIMEOUT, 480 s), which frees the blocks too. A claimed hold no longer
 * expires and cannot be claimed again. `close` cancels every expiry. O(1) per operation but
 * `find` by block ids, which is O(holds × blocks) and used only without a request id.
 */
import type { Sequence } from './engine-model.js';
import type { RealtimeEngine } from './realtime-engine.js';

/** vLLM's VLLM_NIXL_ABORT_REQUEST_TIMEOUT default, seconds. */
export const DEFAULT_KV_HOLD_TIMEOUT_S = 480;

export interface KvHold {
  readonly requestId: string;
  readonly sequence: Sequence;
  readonly blockIds: readonly number[];
  claimed: boolean;
}

export class KvHolds {
  private readonly holds = new Map<string, KvHold>();
  private readonly expiries = new Map<KvHold, () => void>();
  private nextUnhashed: number;
  /** Holds that expired unclaimed. */
  expired = 0;

  constructor(
    private readonly realtime: RealtimeEngine,
    private readonly timeoutS = DEFAULT_KV_HOLD_TIMEOUT_S,
  ) {
    this.nextUnhashed = realtime.engine.pool.capacity;
  }

  /** Holds `sequence`'s blocks (it finished with holdBlocks) for a decode engine, under `requestId`. */
  hold(requestId: string, sequence: Sequence): KvHold {
    const blockIds = sequence.blocks.map((slot) => (slot >= 0 ? slot : this.nextUnhashed++));
    const hold: KvHold = { requestId, sequence, blockIds, claimed: false };
    this.holds.set(requestId, hold);
    this.expiries.set(
      hold,
      this.realtime.after(this.timeoutS, () => {
        this.expired++;
        this.release(hold);
      }),
    );
    return hold;
  }

  /** The unclaimed hold of `requestId`, or without one the unclaimed hold of exactly `blockIds`. */
  find(requestId: string | undefined, blockIds: readonly number[]): KvHold | undefined {
    if (requestId !== undefined) {
      const hold = this.holds.get(requestId);
      return hold === undefined || hold.claimed ? undefined : hold;
    }
    for (const hold of this.holds.values()) if (!hold.claimed && sameIds(hold.blockIds, blockIds)) return hold;
    return undefined;
  }

  /** Takes `hold` for one transfer: it no longer expires. */
  claim(hold: KvHold): void {
    hold.claimed = true;
    this.expiries.get(hold)?.();
    this.expiries.delete(hold);
  }

  /** Ends `hold`, freeing its blocks (they stay cached). Harmless when already released. */
  release(hold: KvHold): void {
    if (this.holds.get(hold.requestId) !== hold) return;
    this.holds.delete(hold.requestId);
    this.expiries.get(hold)?.();
    this.expiries.delete(hold);
    this.realtime.releaseHeld(hold.sequence);
  }

  /** Holds not released yet, claimed or not. */
  get size(): number {
    return this.holds.size;
  }

  /** Cancels every expiry (the engine is closing; its pool goes with it). */
  close(): void {
    for (const cancel of this.expiries.values()) cancel();
    this.expiries.clear();
  }
}

/** Two block id lists are equal, element by element. */
export function sameIds(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
