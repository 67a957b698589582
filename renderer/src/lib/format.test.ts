import { describe, expect, it } from 'vitest';
import { formatClock, formatCountRate, formatHitRate, formatMs, formatRate, naturalUnit, parseByteInput } from './format.ts';

describe('format', () => {
  it('rates in decimal units, counts and durations', () => {
    expect(formatRate(0)).toBe('0 B/s');
    expect(formatRate(1_200_000_000)).toBe('1.20 GB/s');
    expect(formatRate(950)).toBe('950 B/s');
    expect(formatCountRate(4)).toBe('4.0/s');
    expect(formatCountRate(5321)).toBe('5.32k/s');
    expect(formatMs(0.4)).toBe('0.40 ms');
    expect(formatMs(12.345)).toBe('12.3 ms');
    expect(formatMs(1234)).toBe('1.23 s');
  });
  it('a hit rate in whole percent that never rounds to all or nothing', () => {
    expect(formatHitRate(0, 0)).toBeNull();
    expect(formatHitRate(1, 1)).toBe('50 %');
    expect(formatHitRate(0, 3)).toBe('0 %');
    expect(formatHitRate(3, 0)).toBe('100 %');
    expect(formatHitRate(999, 1)).toBe('>99 %');
    expect(formatHitRate(1, 999)).toBe('<1 %');
    expect(formatHitRate(2, 1)).toBe('67 %');
  });
  it('clock time with milliseconds', () => {
    const t = new Date(2026, 0, 2, 3, 4, 5, 67).getTime();
    expect(formatClock(t)).toBe('03:04:05.067');
  });
  it('threshold input: whole bytes in the chosen unit, or why not', () => {
    expect(parseByteInput('64', 'KiB')).toEqual({ ok: true, bytes: 65536 });
    expect(parseByteInput('1.5', 'KiB')).toEqual({ ok: true, bytes: 1536 });
    expect(parseByteInput('0', 'B')).toEqual({ ok: true, bytes: 0 });
    expect(parseByteInput('0.3', 'KiB')).toMatchObject({ ok: false });
    expect(parseByteInput('64k', 'B')).toEqual({ ok: false, message: 'expected a number (e.g. 64) with its unit picked beside it' });
    // A negative size is a number: the schema says it is out of range, in its words.
    expect(parseByteInput('-1', 'B')).toEqual({ ok: true, bytes: -1 });
    expect(parseByteInput('', 'B')).toMatchObject({ ok: false });
    expect(naturalUnit(65536)).toBe('KiB');
    expect(naturalUnit(1000)).toBe('B');
    expect(naturalUnit(4 * 1024 * 1024)).toBe('MiB');
  });
});
