/**
 * One request waiting in flow control's queue (fair-queue.ts), as the queue sees it: who sent it,
 * in which class, what it costs, and when it must have left. The payload is the caller's (the
 * proxy's exchange, the simulator's request); the queue never looks inside it.
 */
export interface QueuedRequest<T> {
  readonly payload: T;
  readonly tenant: string;
  /** Index of its class in the queue's class list: 0 is served first. */
  readonly classRank: number;
  /** Token-equivalents (uncached prefill + expected output): what fair queueing charges the tenant. */
  readonly cost: number;
  /** A session's next turn after its previous one ended (after a tool call): it keeps its place. */
  readonly continuation: boolean;
  /** Its prompt tokens: what its slot counts toward its tenant's share (slot-shares.ts). */
  readonly inputTokens: number;
  /** ms on the queue's clock. */
  readonly enqueuedAt: number;
  /** ms on the queue's clock; past it the request leaves the queue refused. */
  readonly deadline: number;
  /** Arrival order, unique: every tie breaks on it. */
  readonly seq: number;
  /** False once it left the queue (dispatched, removed or expired); the queue skips it lazily. */
  waiting: boolean;
}

/** What a caller says about a request it queues. */
export interface QueueRequestSpec {
  tenant: string;
  classRank: number;
  cost: number;
  continuation?: boolean;
  /** Its prompt tokens (default 0). */
  inputTokens?: number;
  /** ms on the queue's clock. */
  deadline: number;
}
