/**
 * The engines of one simulated fleet, as each other's KV transfer peers (docs/sim-serve.md,
 * "Disaggregated prefill"). They share a process, so a decode engine finds the prefill engine
 * named by `remote_engine_id` here and reads its holds directly; the transfer itself is a wait of
 * the shared link's transfer time (KvTransferLink: the offload cost model, cold on a pair's first
 * use), which this registry owns for the whole fleet.
 *
 * Engine ids are `kvroute-sim-<8 hex digits>-<index>`: the hex is drawn per registry, so an id
 * from another fleet (another process behind the same proxy) is unknown here, never a
 * different engine with the same index.
 */
import { randomBytes } from 'node:crypto';

import type { OffloadCostModel } from '../core/offload-cost.js';
import type { EngineModel } from './engine-model.js';
import type { KvHolds } from './kv-holds.js';
import { KvTransferLink } from './kv-transfer.js';

export interface KvPeer {
  readonly engineId: string;
  /** Where it listens: what its kv_transfer_params say as remote_host and remote_port. */
  readonly host: string;
  readonly port: number;
  readonly engine: EngineModel;
  readonly holds: KvHolds;
}

export class KvTransferPeers {
  readonly link: KvTransferLink;
  private readonly tag = randomBytes(4).toString('hex');
  private readonly peers = new Map<string, KvPeer>();

  /** `transferCost` is checked (errors name `transferCost.<field>`) and filled from the defaults. */
  constructor(transferCost: Partial<OffloadCostModel> = {}) {
    this.link = new KvTransferLink(transferCost, 'transferCost');
  }

  /** The id of the fleet's engine `index`. */
  engineId(index: number): string {
    return `kvroute-sim-${this.tag}-${index}`;
  }

  add(peer: KvPeer): void {
    this.peers.set(peer.engineId, peer);
  }

  remove(engineId: string): void {
    this.peers.delete(engineId);
  }

  get(engineId: string): KvPeer | undefined {
    return this.peers.get(engineId);
  }
}
