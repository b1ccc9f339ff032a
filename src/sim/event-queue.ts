/**
 * A min-heap of timed events. Ties break by insertion order, so a simulation is a pure
 * function of its inputs: the same trace and options give the same run.
 */
export class EventQueue<E> {
  private readonly times: number[] = [];
  private readonly orders: number[] = [];
  private readonly events: E[] = [];
  private inserted = 0;

  get size(): number {
    return this.events.length;
  }

  push(time: number, event: E): void {
    this.times.push(time);
    this.orders.push(this.inserted++);
    this.events.push(event);
    let i = this.events.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.before(i, parent)) break;
      this.swap(i, parent);
      i = parent;
    }
  }

  /** The time of the earliest event; undefined when empty. */
  peekTime(): number | undefined {
    return this.times[0];
  }

  /** The earliest event and its time, removed; undefined when empty. */
  pop(): { time: number; event: E } | undefined {
    if (this.events.length === 0) return undefined;
    const top = { time: this.times[0]!, event: this.events[0]! };
    const last = this.events.length - 1;
    this.swap(0, last);
    this.times.pop();
    this.orders.pop();
    this.events.pop();
    for (let i = 0; ;) {
      const left = 2 * i + 1;
      const right = left + 1;
      let least = i;
      if (left < this.events.length && this.before(left, least)) least = left;
      if (right < this.events.length && this.before(right, least)) least = right;
      if (least === i) break;
      this.swap(i, least);
      i = least;
    }
    return top;
  }

  private before(a: number, b: number): boolean {
    return this.times[a]! < this.times[b]! || (this.times[a] === this.times[b] && this.orders[a]! < this.orders[b]!);
  }

  private swap(a: number, b: number): void {
    const { times, orders, events } = this;
    const time = times[a]!;
    times[a] = times[b]!;
    times[b] = time;
    const order = orders[a]!;
    orders[a] = orders[b]!;
    orders[b] = order;
    const event = events[a]!;
    events[a] = events[b]!;
    events[b] = event;
  }
}
