/**
 * Argument checks for the public API. Each throws a TypeError (wrong type) or
 * RangeError (right type, bad value) with a stable `code` and a message that
 * names the field as the caller wrote it.
 */
import type { CoreIds } from './core-router.js';
import { invalidType, invalidValue } from './errors.js';

const U64_LIMIT = 1n << 64n;

export function checkInteger(field: string, value: unknown, min: number, max = Number.MAX_SAFE_INTEGER): number {
  if (typeof value !== 'number') throw invalidType(field, 'a number', value);
  if (!Number.isInteger(value) || value < min || value > max) {
    throw invalidValue(
      field,
      max === Number.MAX_SAFE_INTEGER ? `an integer >= ${min}` : `an integer in [${min}, ${max}]`,
      value,
    );
  }
  return value;
}

export function checkNumber(field: string, value: unknown, min: number, max: number): number {
  if (typeof value !== 'number') throw invalidType(field, 'a number', value);
  if (!(value >= min && value <= max)) throw invalidValue(field, `a number in [${min}, ${max}]`, value);
  return value;
}

export function checkObject(field: string, value: unknown): Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw invalidType(field, 'an object', value);
  return value as Record<string, unknown>;
}

export function checkString(field: string, value: unknown): string {
  if (typeof value !== 'string') throw invalidType(field, 'a string', value);
  return value;
}

/**
 * Block ids as a core takes them. Typed arrays pass through untouched (their
 * elements are checked in the core, before anything changes); plain arrays
 * are checked here and copied into a Float64Array (numbers) or a
 * BigUint64Array (bigints).
 */
export function toCoreIds(field: string, ids: unknown): CoreIds {
  if (ids instanceof BigUint64Array || ids instanceof Float64Array || ids instanceof Uint32Array) return ids;
  if (!Array.isArray(ids)) {
    throw invalidType(field, 'a BigUint64Array, Float64Array, Uint32Array or an array of integers', ids);
  }
  if (ids.length > 0 && typeof ids[0] === 'bigint') {
    const out = new BigUint64Array(ids.length);
    for (let i = 0; i < ids.length; i += 1) {
      const id: unknown = ids[i];
      if (typeof id !== 'bigint') throw invalidType(`${field}[${i}]`, 'a bigint like the ids before it', id);
      if (id < 0n || id >= U64_LIMIT) throw invalidValue(`${field}[${i}]`, 'in [0, 2^64)', id);
      out[i] = id;
    }
    return out;
  }
  const out = new Float64Array(ids.length);
  for (let i = 0; i < ids.length; i += 1) {
    const id: unknown = ids[i];
    if (typeof id !== 'number') throw invalidType(`${field}[${i}]`, 'a number', id);
    if (!(id >= 0 && id <= Number.MAX_SAFE_INTEGER && Number.isInteger(id))) {
      throw invalidValue(`${field}[${i}]`, 'an integer in [0, 2^53)', id);
    }
    out[i] = id;
  }
  return out;
}
