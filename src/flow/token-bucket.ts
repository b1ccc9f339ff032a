/**
 * A token bucket on a caller's clock (ms): it holds at most `capacity` (the burst) and refills
 * at `perMinute`. `take` spends only what is there; `charge` may overdraw it (output tokens are
 * counted as they stream, after the request was let in), and an overdrawn bucket lets nothing
 * through until it refills.
 */
export class TokenBucket {
  private level: number;
  private updatedAt: number;

  constructor(
    private capacity: number,
    private perMinute: number,
    now: number,
  ) {
    this.level = capacity;
    this.updatedAt = now;
  }

  /** New limits (a live config change): the level is kept, within the new capacity. */
  reconfigure(capacity: number, perMinute: number, now: number): void {
    this.refill(now);
    this.capacity = capacity;
    this.perMinute = perMinute;
    this.level = Math.min(this.level, capacity);
  }

  /** What the bucket holds at `now` (negative when overdrawn). */
  available(now: number): number {
    this.refill(now);
    return this.level;
  }

  /** Holds its whole capacity: the same as a new bucket. */
  isFull(now: number): boolean {
    return this.available(now) >= this.capacity;
  }

  /**
   * ms until `amount` can be taken (0: now). An amount above the capacity waits for a full
   * bucket instead, so a request larger than the burst is slowed, never refused forever.
   */
  waitMs(amount: number, now: number): number {
    const needed = Math.min(amount, this.capacity);
    const short = needed - this.available(now);
    if (short <= 0) return 0;
    return this.perMinute > 0 ? Math.ceil((short * 60_000) / this.perMinute) : Infinity;
  }

  /** Spends `amount`: call only when waitMs(amount) is 0 (it may leave the level below zero by the excess over capacity). */
  take(amount: number, now: number): void {
    this.refill(now);
    this.level -= amount;
  }

  /** Spends `amount` whatever the level: an overdraft is paid back by the refill. */
  charge(amount: number, now: number): void {
    this.take(amount, now);
  }

  private refill(now: number): void {
    const elapsed = now - this.updatedAt;
    if (elapsed > 0) {
      this.level = Math.min(this.capacity, this.level + (elapsed * this.perMinute) / 60_000);
      this.updatedAt = now;
    }
  }
}
