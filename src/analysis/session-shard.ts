/**
 * The per-session half of trace characterization, for one shard of the sessions. It receives
 * each request as its session number and its path of global-trie nodes (in arrival order
 * within the shard) and computes:
 * - the intra-session match: the longest prefix of the path this session visited before;
 * - per node, how many distinct sessions of this shard visit it (saturating at 255). Shards
 *   hold disjoint sessions, so the whole-trace count is the (saturating) sum over shards.
 * Everything it needs arrives in the batch; shards share nothing, so any number of them, in
 * any threads, give the same merged result.
 *
 * "Has session s visited node n" is answered by `firstVisitor[n]` (the first session of this
 * shard to visit n, plus one) and, only for the nodes a second session visits, by the `others`
 * pair set. Most nodes belong to one session, and a request's new nodes are consecutive
 * numbers, so the common check is a sequential read of one array rather than a hash probe.
 */
import { Growable } from './growable.js';
import { PairSet } from './pair-set.js';

/** A batch: repeated [session, length, node_0 … node_{length-1}]. */
export type ShardBatch = Uint32Array;

export interface ShardResult {
  /** Intra-session matched blocks, one per request, in the order the requests arrived. */
  intraMatches: Uint32Array;
  /** Distinct sessions of this shard per trie node, saturating at 255. */
  nodeSessions: Uint8Array;
}

export class SessionShard {
  private readonly firstVisitor = new Growable(Uint32Array, 1 << 16);
  private readonly others = new PairSet();
  private readonly intra = new Growable(Uint32Array, 1 << 12);
  private readonly sessionsPerNode = new Growable(Uint8Array, 1 << 16);

  add(batch: ShardBatch): void {
    const nodeSessions = this.sessionsPerNode;
    for (let at = 0; at < batch.length;) {
      const session = batch[at]!;
      const length = batch[at + 1]!;
      const end = at + 2 + length;
      let match = 0;
      let matching = true;
      for (let i = at + 2; i < end; i++) {
        const node = batch[i]!;
        if (this.visit(session, node)) {
          matching = false;
          const sessions = nodeSessions.raw;
          if (sessions[node]! < 255) sessions[node] = sessions[node]! + 1;
        } else if (matching) {
          match++;
        }
      }
      this.intra.push(match);
      at = end;
    }
  }

  /** Records that `session` visited `node`; true when it had not before. */
  private visit(session: number, node: number): boolean {
    if (node >= this.firstVisitor.length) {
      for (const array of [this.firstVisitor, this.sessionsPerNode]) {
        array.reserve(node + 1);
        array.length = node + 1;
      }
    }
    const first = this.firstVisitor.raw;
    if (first[node] === 0) {
      first[node] = session + 1;
      return true;
    }
    return first[node] !== session + 1 && this.others.add(session, node);
  }

  result(): ShardResult {
    return { intraMatches: this.intra.view().slice(), nodeSessions: this.sessionsPerNode.view().slice() };
  }
}
