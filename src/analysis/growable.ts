/** Append-only typed arrays that double when full; `view()` is the filled prefix (no copy). */
type TypedArray = Uint8Array | Uint32Array | Float64Array;
type Constructor<A extends TypedArray> = new (length: number) => A;

export class Growable<A extends TypedArray> {
  private data: A;
  length = 0;

  constructor(
    private readonly make: Constructor<A>,
    capacity = 1024,
  ) {
    this.data = new make(capacity);
  }

  push(value: number): void {
    if (this.length === this.data.length) this.reserve(this.length + 1);
    this.data[this.length++] = value;
  }

  /** Ensures room for `capacity` entries in total, zero-filled past `length`. */
  reserve(capacity: number): void {
    if (capacity <= this.data.length) return;
    const data = new this.make(Math.max(capacity, this.data.length * 2));
    data.set(this.data);
    this.data = data;
  }

  view(): A {
    return this.data.subarray(0, this.length) as A;
  }

  /** The backing array (entries past `length` are zero). */
  get raw(): A {
    return this.data;
  }
}
