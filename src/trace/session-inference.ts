/**
 * Rebuilds sessions for traces that carry none (Mooncake). A request whose `hash_ids` start
 * with an earlier request's complete `hash_ids` continues that request's session: the later
 * prompt is the earlier one plus more. When several earlier requests qualify, the longest
 * (most recent on a tie) wins, as it is the nearest previous turn.
 */
import { PrefixTrie } from './prefix-trie.js';

export class SessionInference {
  private readonly trie = new PrefixTrie();
  /** Trie node of each earlier request's last block → that request's session number. */
  private readonly sessionEndingAt = new Map<number, number>();
  private path = new Uint32Array(256);
  private sessions = 0;

  /** The session number (0-based, in order of first appearance) `ids` belongs to. */
  assign(ids: readonly number[]): number {
    if (ids.length > this.path.length) this.path = new Uint32Array(Math.max(ids.length, this.path.length * 2));
    const seen = this.trie.walk(ids, this.path);
    let session = -1;
    for (let depth = seen - 1; depth >= 0 && session < 0; depth--) {
      session = this.sessionEndingAt.get(this.path[depth]!) ?? -1;
    }
    if (session < 0) session = this.sessions++;
    if (ids.length > 0) this.sessionEndingAt.set(this.path[ids.length - 1]!, session);
    return session;
  }
}
