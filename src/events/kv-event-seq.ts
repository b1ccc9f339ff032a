/**
 * The per-publisher `seq` of vLLM's KV event stream, checked (docs/kv-events.md). A publisher
 * numbers its messages 0, 1, 2, …; a subscriber that sees a jump lost messages (ZMQ drops at its
 * high-water mark), and one that sees 0 again is talking to a restarted engine. What the index
 * must do about each is the caller's: ask the replay socket for a gap, or clear and rebuild; reset
 * on a restart; skip a stale message (one at or below what it already applied).
 */

export type SeqVerdict =
  /** The next message in order: apply it. */
  | { kind: 'next' }
  /**
   * Messages [from, to) never arrived (`to` is this message's seq). On the first message
   * `from` is 0: whatever the engine cached before the subscription is unknown.
   */
  | { kind: 'gap'; from: bigint; to: bigint }
  /** seq 0 after later ones: a new publisher (an engine restart); reset the index, then apply. */
  | { kind: 'restart' }
  /** At or below the last applied seq (a duplicate, or a replayed one already seen): skip it. */
  | { kind: 'stale' };

export interface SeqCounts {
  messages: number;
  gaps: number;
  /** Messages the gaps skipped. */
  missing: bigint;
  restarts: number;
  stale: number;
}

export class KvEventSeq {
  /** The last applied seq; -1 before the first message. */
  private last = -1n;
  readonly counts: SeqCounts = { messages: 0, gaps: 0, missing: 0n, restarts: 0, stale: 0 };

  /** Classifies `seq` and advances: after anything but `stale`, `seq` is the last applied. */
  observe(seq: bigint): SeqVerdict {
    this.counts.messages += 1;
    const expected = this.last + 1n;
    let verdict: SeqVerdict;
    if (seq === expected) verdict = { kind: 'next' };
    else if (seq === 0n) verdict = { kind: 'restart' };
    else if (seq > expected) verdict = { kind: 'gap', from: expected, to: seq };
    else verdict = { kind: 'stale' };
    if (verdict.kind === 'gap') {
      this.counts.gaps += 1;
      this.counts.missing += seq - expected;
    } else if (verdict.kind === 'restart') this.counts.restarts += 1;
    else if (verdict.kind === 'stale') {
      this.counts.stale += 1;
      return verdict;
    }
    this.last = seq;
    return verdict;
  }

  /**
   * Forgets the last applied seq, keeping the counts: after a reconnection the publisher may be a
   * restarted engine numbering from 0 again, whose messages must not be dropped as stale. The
   * next message then reads as a gap from 0 (or `next` if it is 0).
   */
  forget(): void {
    this.last = -1n;
  }

  /**
   * Continues from `last` as the last applied seq (a relay resuming from what its stream holds,
   * or one re-checking a message after a replay), keeping the counts.
   */
  resume(last: bigint): void {
    this.last = last;
  }

  /** The last applied seq (-1 before any). */
  get lastApplied(): bigint {
    return this.last;
  }
}
