/**
 * Field checks for one parsed trace line. Each throws a TraceFormatError naming the line, the
 * field and the reason; none coerces (a string "12" is not a length).
 */
import { describe } from '../core/errors.js';
import { TraceFormatError } from './trace-errors.js';

export type JsonObject = Record<string, unknown>;

export class LineFields {
  constructor(
    readonly object: JsonObject,
    readonly line: number,
    readonly source: string,
  ) {}

  fail(field: string | undefined, reason: string): never {
    throw new TraceFormatError(this.line, field, reason, this.source);
  }

  has(field: string): boolean {
    return this.object[field] !== undefined && this.object[field] !== null;
  }

  private required(field: string): unknown {
    const value = this.object[field];
    if (value === undefined || value === null) this.fail(field, 'missing field');
    return value;
  }

  /** A finite number ≥ 0. */
  time(field: string): number {
    const value = this.required(field);
    if (typeof value !== 'number' || !Number.isFinite(value))
      this.fail(field, `must be a number, got ${describe(value)}`);
    if (value < 0) this.fail(field, `must not be negative, got ${value}`);
    return value;
  }

  /** An integer ≥ `min`. */
  count(field: string, min = 0): number {
    return this.integerAtLeast(field, this.required(field), min);
  }

  optionalCount(field: string, min: number): number | undefined {
    return this.has(field) ? this.integerAtLeast(field, this.object[field], min) : undefined;
  }

  /** Any safe integer (Bailian uses -1 for "no parent"). */
  optionalId(field: string): number | undefined {
    if (!this.has(field)) return undefined;
    const value = this.object[field];
    if (!Number.isSafeInteger(value)) this.fail(field, `must be an integer, got ${describe(value)}`);
    return value as number;
  }

  /** A non-empty string, or an integer written as its decimal string. */
  optionalName(field: string): string | undefined {
    if (!this.has(field)) return undefined;
    const value = this.object[field];
    if (typeof value === 'string' && value !== '') return value;
    if (Number.isSafeInteger(value)) return String(value);
    return this.fail(field, `must be a non-empty string or an integer, got ${describe(value)}`);
  }

  /** An array of safe integers, returned as parsed (not copied). */
  hashIds(field: string): number[] {
    const value = this.required(field);
    if (!Array.isArray(value)) this.fail(field, `must be an array of integers, got ${describe(value)}`);
    for (let i = 0; i < value.length; i++) {
      if (!Number.isSafeInteger(value[i]))
        this.fail(
          `${field}[${i}]`,
          `must be an integer within ±(2^53 − 1) (larger ids lose precision in JSON), got ${describe(value[i])}`,
        );
    }
    return value as number[];
  }

  private integerAtLeast(field: string, value: unknown, min: number): number {
    if (!Number.isSafeInteger(value)) this.fail(field, `must be an integer, got ${describe(value)}`);
    if ((value as number) < min)
      this.fail(field, min === 0 ? `must not be negative, got ${value}` : `must be at least ${min}, got ${value}`);
    return value as number;
  }
}
