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
 * Invariant: 0 ≤ held ≤ limit.
 */
import { ClientError } from './error-body.js';

export class BodyBudget {
  /** Bytes reserved now. */
  held = 0;
  /** Reservations refused since start. */
  refused = 0;

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
