import { describe, expect, it } from 'vitest';
import { bytesParts, formatBytes, formatMiB } from './bytes.ts';

// The one byte formatter: the router's 413s, doctor, the orphan sweep and the console's screens all read sizes through it.
describe('sizes in words', () => {
  it('sizes in binary units with three significant digits', () => {
    expect(formatBytes(0)).toBe('0 B');
    expect(formatBytes(24)).toBe('24 B');
    expect(formatBytes(1023)).toBe('1023 B');
    expect(formatBytes(1024)).toBe('1.00 KiB');
    expect(formatBytes(75_264)).toBe('73.5 KiB');
    expect(formatBytes(2_408_448)).toBe('2.30 MiB');
    expect(formatBytes(32 * 1024 * 1024)).toBe('32.0 MiB');
    expect(bytesParts(65536)).toEqual({ value: '64.0', unit: 'KiB' });
  });
  it('MiB for a figure set in MiB, whatever its size', () => {
    expect(formatMiB(0)).toBe('0 MiB');
    expect(formatMiB(5)).toBe('<0.01 MiB');
    expect(formatMiB(1_226_833)).toBe('1.17 MiB');
    expect(formatMiB(512 * 1024 * 1024)).toBe('512 MiB');
  });
  it('a size that is not a number reads as a dash, not NaN', () => {
    expect(formatBytes(Number.NaN)).toBe('–');
    expect(formatMiB(Number.POSITIVE_INFINITY)).toBe('–');
  });
});
