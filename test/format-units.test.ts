/** The human units: SI counts, IEC bytes, durations, table scales, and their boundaries. */
import { describe, expect, it } from 'vitest';

import {
  bytesScale,
  durationScale,
  formatBytes,
  formatCount,
  formatDuration,
  formatIn,
  formatTotal,
} from '../src/analysis/format-units.js';

describe('formatCount', () => {
  it('scales by 1000 with one decimal, and names the unit', () => {
    expect(formatCount(41_643_100_000, 'tokens')).toBe('41.6 G tokens');
    expect(formatCount(1_234_567, 'requests')).toBe('1.2 M requests');
    expect(formatCount(61_194_628)).toBe('61.2 M');
    expect(formatCount(1000)).toBe('1.0 k');
    expect(formatCount(3.2e12)).toBe('3.2 T');
    expect(formatCount(4.5e15)).toBe('4500.0 T'); // T is the last prefix
  });

  it('moves up a prefix when rounding reaches the next one', () => {
    expect(formatCount(999_900)).toBe('999.9 k');
    expect(formatCount(999_949)).toBe('999.9 k');
    expect(formatCount(999_950)).toBe('1.0 M');
    expect(formatCount(999.96)).toBe('1.0 k');
    expect(formatCount(999_999_999)).toBe('1.0 G');
  });

  it('prints whole numbers below 1000 as they are, fractions with one decimal', () => {
    expect(formatCount(0)).toBe('0');
    expect(formatCount(0, 'requests')).toBe('0 requests');
    expect(formatCount(999)).toBe('999');
    expect(formatCount(4.56)).toBe('4.6');
  });

  it('keeps the sign of negative values (but not of a value that rounds to zero)', () => {
    expect(formatCount(-1500)).toBe('-1.5 k');
    expect(formatCount(-7)).toBe('-7');
    expect(formatCount(-0.01)).toBe('0.0');
  });

  it('prints "-" for what is not a number, with or without a unit', () => {
    for (const value of [Number.NaN, undefined, null, Infinity, -Infinity]) {
      expect(formatCount(value)).toBe('-');
      expect(formatCount(value, 'tokens')).toBe('-');
    }
  });
});

describe('formatTotal', () => {
  it('prints counts people quote exactly below a million, with separators, and scales above', () => {
    expect(formatTotal(3993, 'requests')).toBe('3,993 requests');
    expect(formatTotal(0)).toBe('0');
    expect(formatTotal(999_999)).toBe('999,999');
    expect(formatTotal(1_000_000, 'requests')).toBe('1.0 M requests');
    expect(formatTotal(-1234)).toBe('-1,234');
    expect(formatTotal(1234.5)).toBe('1.2 k'); // not a whole count: scaled like any number
    expect(formatTotal(undefined, 'requests')).toBe('-');
  });
});

describe('formatBytes', () => {
  it('uses IEC units, moving up after rounding', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.0 KiB');
    expect(formatBytes(1024 * 1024 - 1)).toBe('1.0 MiB');
    expect(formatBytes(2.04e9)).toBe('1.9 GiB');
    expect(formatBytes(17.52 * 1024 ** 3)).toBe('17.5 GiB');
    expect(formatBytes(3 * 1024 ** 4)).toBe('3.0 TiB');
    expect(formatBytes(-2048)).toBe('-2.0 KiB');
    expect(formatBytes(Number.NaN)).toBe('-');
    expect(formatBytes(undefined)).toBe('-');
  });
});

describe('formatDuration', () => {
  it('picks µs, ms, s, min or h, moving up after rounding', () => {
    expect(formatDuration(0)).toBe('0 s');
    expect(formatDuration(0.000_25)).toBe('250.0 µs');
    expect(formatDuration(0.000_999_96)).toBe('1.0 ms');
    expect(formatDuration(0.85)).toBe('850.0 ms');
    expect(formatDuration(0.999_96)).toBe('1.0 s');
    expect(formatDuration(12.34)).toBe('12.3 s');
    expect(formatDuration(59.96)).toBe('1.0 min');
    expect(formatDuration(150)).toBe('2.5 min');
    expect(formatDuration(3599.9)).toBe('1.0 h');
    expect(formatDuration(1022)).toBe('17.0 min');
    expect(formatDuration(90_000)).toBe('25.0 h');
    expect(formatDuration(-1.5)).toBe('-1.5 s');
    expect(formatDuration(undefined)).toBe('-');
    expect(formatDuration(Number.NaN)).toBe('-');
  });
});

describe('table scales', () => {
  it('picks the unit of the largest value, and renders cells in it', () => {
    const gib = bytesScale([1.07 * 1024 ** 3, 17.52 * 1024 ** 3]);
    expect(gib.unit).toBe('GiB');
    expect(formatIn(1.07 * 1024 ** 3, gib, 2)).toBe('1.07');
    expect(bytesScale([100, 900]).unit).toBe('B');
    expect(bytesScale([]).unit).toBe('B');
    expect(durationScale([0.05, 0.2]).unit).toBe('ms');
    expect(durationScale([0.88, 15.75]).unit).toBe('s');
    expect(durationScale([0, 0]).unit).toBe('s');
    expect(durationScale([7.8, 139.8]).unit).toBe('s'); // seconds up to 999 s
    expect(durationScale([Number.NaN, 1200]).unit).toBe('min');
    expect(durationScale([60_000]).unit).toBe('h');
    expect(durationScale([-0.5]).unit).toBe('ms');
    const ms = durationScale([0.0078, 0.0469]);
    expect([ms.unit, formatIn(0.0078, ms, 1)]).toEqual(['ms', '7.8']);
    expect(formatIn(Number.NaN, ms, 1)).toBe('-');
    expect(formatIn(undefined, ms, 1)).toBe('-');
  });
});
