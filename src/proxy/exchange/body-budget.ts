/**
 * The memory budget for request bodies in flight (`--max-body-memory`): the sum of the bytes
 * every open completion request holds for its body, from its first byte to its end (a body is
 * kept until the request finishes, because a retry sends it again).
 *
 * A request reserves its declared Content-Length when its head arrives (one check, before any
 * byte is buffered), or chunk by chunk when it has none (chunked uploads). A reservation that
 * would pass the limit is refused: the exchange answers 503 with Retry-After and closes the
 * connection (the unread body is not drained), so a burst of huge prompts cannot grow the
 * process without bound. Each reservation is released exactly once, when its request ends.
 *
 * Giving memory back: a finished body is garbage, but V8 frees a Buffer's memory only at its next
 * full collection, which nothing triggers on a proxy that went quiet after a burst (the memory of
 * the last burst's bodies stayed resident). So once RECLAIM_BYTES of bodies were released since
 * the last collection, the budget asks V8 for a full collection in the background, at most once
 * per RECLAIM_EVERY_MS (reclaim-memory.ts).
 *
 * Invariant: 0 ≤ held ≤ limit.
 */
import { ClientError } from '../server/error-body.js';
import { collectGarbageSoon } from './reclaim-memory.js';

/** Released body bytes that make a background collection worth it. */
const RECLAIM_BYTES = 64 * 2 ** 20;

export class BodyBudget {
  /** Bytes reserved now. */
  held = 0;
  /** Reservations refused since start. */
  refused = 0;
  /** Bytes released since the last collection was asked for. */
  private released = 0;

  constructor(readonly limit: number) {}

  /** Reserves `bytes` more; false (and nothing reserved) when that would pass the limit. */
  reserve(bytes: number): boolean {
    if (this.held + bytes > this.limit) {
      this.refused++;
      return false;
    }
    this.held += bytes;
    return true;
  }

  release(bytes: number): void {
    this.held -= bytes;
    this.released += bytes;
    if (this.released >= RECLAIM_BYTES && collectGarbageSoon()) this.released = 0;
  }

  /** The 503 a request gets when its body does not fit. */
  refusal(): ClientError {
    return new ClientError(
      503,
      `the proxy holds ${this.held} bytes of request bodies, and this one would pass --max-body-memory (${this.limit} bytes); retry shortly`,
      'body_budget_exceeded',
    );
  }
}
