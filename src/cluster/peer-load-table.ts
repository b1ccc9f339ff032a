/**
 * What a replica knows of its peers' load (docs/scale-out.md, "One load plane over NATS"): per
 * peer, its last stated totals per instance and when it was last heard. The load a replica's
 * router sees on an instance from its peers is the sum over the live peers.
 *
 * Invariants: a full message replaces the peer's whole table; a delta overwrites the instances it
 * names (all-zero totals remove the entry). A peer not heard for `ttlMs` is forgotten with all
 * its entries (a replica that died, or one cut off by a partition; it comes back whole with its
 * next full message). Each method returns the instances whose sum changed, so the caller pushes
 * only those into the router.
 */
import type { LoadMessage, LoadTotals } from './load-message.js';

interface Peer {
  lastHeardMs: number;
  seq: number;
  load: Map<string, LoadTotals>;
}

const isZero = (t: LoadTotals): boolean => t[0] === 0 && t[1] === 0 && t[2] === 0 && t[3] === 0;

export class PeerLoadTable {
  private readonly peers = new Map<string, Peer>();
  /** Messages whose seq was not the peer's last + 1 (lost, or a restarted peer). */
  gaps = 0;

  get size(): number {
    return this.peers.size;
  }

  peerIds(): string[] {
    return [...this.peers.keys()];
  }

  /** Applies a peer's message heard at `nowMs`; returns the instances whose sum changed. */
  apply(message: LoadMessage, nowMs: number): Set<string> {
    const changed = new Set<string>();
    let peer = this.peers.get(message.replica);
    if (peer === undefined) {
      peer = { lastHeardMs: nowMs, seq: message.seq, load: new Map() };
      this.peers.set(message.replica, peer);
    } else if (message.seq !== peer.seq + 1) {
      this.gaps += 1;
    }
    peer.lastHeardMs = nowMs;
    peer.seq = message.seq;
    // A full message states every instance: what it leaves out is zero.
    const previous = message.full ? peer.load : undefined;
    if (previous !== undefined) peer.load = new Map();
    for (const [instance, totals] of message.load) {
      const before = (previous ?? peer.load).get(instance);
      if (isZero(totals)) peer.load.delete(instance);
      else peer.load.set(instance, totals);
      const now = peer.load.get(instance);
      if (!sameTotals(before, now)) changed.add(instance);
    }
    if (previous !== undefined)
      for (const instance of previous.keys()) if (!peer.load.has(instance)) changed.add(instance);
    return changed;
  }

  /** Forgets the peers not heard for more than `ttlMs`; returns them and the instances whose sum changed. */
  expire(nowMs: number, ttlMs: number): { expired: string[]; changed: Set<string> } {
    const expired: string[] = [];
    const changed = new Set<string>();
    for (const [id, peer] of this.peers) {
      if (nowMs - peer.lastHeardMs <= ttlMs) continue;
      expired.push(id);
      for (const instance of peer.load.keys()) changed.add(instance);
      this.peers.delete(id);
    }
    return { expired, changed };
  }

  /** The live peers' summed totals on `instance`. */
  sum(instance: string): LoadTotals {
    let running = 0;
    let waiting = 0;
    let prefill = 0;
    let blocks = 0;
    for (const peer of this.peers.values()) {
      const t = peer.load.get(instance);
      if (t === undefined) continue;
      running += t[0];
      waiting += t[1];
      prefill += t[2];
      blocks += t[3];
    }
    return [running, waiting, prefill, blocks];
  }
}

function sameTotals(a: LoadTotals | undefined, b: LoadTotals | undefined): boolean {
  if (a === undefined || b === undefined) return a === b;
  return a[0] === b[0] && a[1] === b[1] && a[2] === b[2] && a[3] === b[3];
}
