/**
 * Admission control (`--max-in-flight`): at most N completion requests are routed and forwarded
 * at once; the next ones wait in a FIFO queue of at most `queueSize`, each for at most
 * `queueTimeoutMs`. A request that finds the queue full, or waits too long, is refused with 429
 * and Retry-After (the openai SDK backs off and retries on that). With no limit (the default) a
 * request costs one comparison.
 *
 * Why queue at the router rather than leave it to the engines: every engine queues on its own,
 * so an overloaded fleet piles requests behind whichever engine the policy picked when they
 * arrived. Held here, a request is routed when a slot frees, against the fleet's state then.
 *
 * Contract with the exchange (the Admittable):
 * - enter() once, after the body is read and valid: 'go' (it holds a slot now), 'queued' (its
 *   admit() runs later, or expire() when its wait runs out) or 'full' (refuse it).
 * - Whoever holds a slot calls leave() exactly once, when it finishes however it finishes; that
 *   admits the head of the queue (admit() runs synchronously inside leave()).
 * - A queued request whose client goes away calls cancel(); it never held a slot.
 * Invariant: active ≤ maxInFlight, and the queue is empty whenever active < maxInFlight.
 */
import { ClientError } from '../server/error-body.js';

export interface Admittable {
  /** A slot is free: route and forward now. */
  admit(): void;
  /** Waited queueTimeoutMs without a slot: refuse with this error. */
  expire(error: ClientError): void;
}

export interface AdmissionLimits {
  /** Requests routed and forwarded at once; 0: no limit. */
  maxInFlight: number;
  /** Requests that may wait for a slot; past it, 429 at once. */
  queueSize: number;
  /** Longest wait for a slot, ms. */
  queueTimeoutMs: number;
}

export class Admission {
  /** Requests holding a slot. */
  active = 0;
  /** Refused since start, by reason. */
  readonly refused = { queue_full: 0, queue_timeout: 0 };
  private readonly waiting = new Map<Admittable, NodeJS.Timeout>();
  /** Slots given back and not yet passed on (leave() inside admit()). */
  private leaving = 0;
  private releasing = false;

  constructor(private readonly limits: AdmissionLimits) {}

  /** Requests waiting for a slot now. */
  get queued(): number {
    return this.waiting.size;
  }

  get limited(): boolean {
    return this.limits.maxInFlight > 0;
  }

  enter(who: Admittable): 'go' | 'queued' | 'full' {
    const max = this.limits.maxInFlight;
    if (max === 0) return 'go';
    if (this.active < max) {
      this.active++;
      return 'go';
    }
    if (this.waiting.size >= this.limits.queueSize) {
      this.refused.queue_full++;
      return 'full';
    }
    const timer = setTimeout(() => {
      if (!this.waiting.delete(who)) return;
      this.refused.queue_timeout++;
      who.expire(queueTimeout(this.limits.queueTimeoutMs));
    }, this.limits.queueTimeoutMs);
    this.waiting.set(who, timer);
    return 'queued';
  }

  /**
   * A slot holder finished: the slot goes to the longest waiter, if any. An admitted waiter may
   * finish at once (no healthy backend) and leave() again from inside admit(); that is counted
   * and handled by the outer loop, so a long queue never recurses.
   */
  leave(): void {
    if (this.limits.maxInFlight === 0) return;
    this.leaving++;
    if (this.releasing) return;
    this.releasing = true;
    try {
      while (this.leaving > 0) {
        this.leaving--;
        const next = this.waiting.entries().next();
        if (next.done === true) {
          this.active--;
          continue;
        }
        // The slot passes straight to the waiter: `active` stays as it is.
        const [who, timer] = next.value;
        clearTimeout(timer);
        this.waiting.delete(who);
        who.admit();
      }
    } finally {
      this.releasing = false;
    }
  }

  /** A waiter's client went away. */
  cancel(who: Admittable): void {
    const timer = this.waiting.get(who);
    if (timer === undefined) return;
    clearTimeout(timer);
    this.waiting.delete(who);
  }

  /** Refuses every waiter (the proxy is closing). */
  close(error: ClientError): void {
    for (const [who, timer] of [...this.waiting]) {
      clearTimeout(timer);
      this.waiting.delete(who);
      who.expire(error);
    }
  }
}

/** The 429 for a full queue. */
export function queueFull(limits: AdmissionLimits): ClientError {
  return new ClientError(
    429,
    `the proxy is at --max-in-flight (${limits.maxInFlight}) with ${limits.queueSize} requests waiting; retry shortly`,
    'queue_full',
  );
}

function queueTimeout(ms: number): ClientError {
  return new ClientError(429, `no slot came free within --queue-timeout (${ms} ms); retry shortly`, 'queue_timeout');
}
