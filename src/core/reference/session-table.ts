/** Bounded LRU session pins, the twin of native/core/session-table.h. */

export interface SessionPin {
  slot: number;
  generation: number;
}

export class ReferenceSessionTable {
  private readonly pins = new Map<bigint, SessionPin>(); // least → most recently used

  constructor(private max: number) {}

  get size(): number {
    return this.pins.size;
  }

  lookup(key: bigint): SessionPin | undefined {
    const pin = this.pins.get(key);
    if (pin !== undefined) {
      this.pins.delete(key);
      this.pins.set(key, pin);
    }
    return pin;
  }

  peek(key: bigint): SessionPin | undefined {
    return this.pins.get(key);
  }

  pin(key: bigint, where: SessionPin): void {
    this.pins.delete(key);
    this.pins.set(key, where);
    for (const oldest of this.pins.keys()) {
      if (this.pins.size <= this.max) break;
      this.pins.delete(oldest);
    }
  }
}
