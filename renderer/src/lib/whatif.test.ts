import { describe, expect, it } from 'vitest';
import { bucketOf, bytesToSlider, histogram, sliderToBytes, whatIf } from './whatif.ts';

const ev = (nbytes: number, path: 'inline' | 'shm', reason: string) => ({ nbytes, path, reason }) as Parameters<typeof whatIf>[0][number];

describe('what-if threshold', () => {
  const events = [
    ev(2_408_448, 'shm', 'auto_tokens_equal'),
    ev(75_264, 'shm', 'auto_tokens_equal'),
    ev(24, 'inline', 'below_threshold'),
    ev(8, 'inline', 'below_threshold'),
    ev(40_000, 'inline', 'below_threshold'),
    ev(9_633_792, 'inline', 'auto_different_shm'),
    ev(1_000_000, 'inline', 'mode_inline'),
  ];
  it('moves only tensors whose request could use /dev/shm', () => {
    expect(whatIf(events, 65_536)).toEqual({ toShm: { tensors: 0, bytes: 0 }, toInline: { tensors: 0, bytes: 0 }, unaffected: 2 });
    expect(whatIf(events, 1 << 20)).toEqual({ toShm: { tensors: 0, bytes: 0 }, toInline: { tensors: 1, bytes: 75_264 }, unaffected: 2 });
    expect(whatIf(events, 16)).toEqual({ toShm: { tensors: 2, bytes: 40_024 }, toInline: { tensors: 0, bytes: 0 }, unaffected: 2 });
    expect(whatIf(events, 0).toShm.tensors).toBe(3);
  });
  it('equal to the threshold goes through SHM', () => {
    expect(whatIf([ev(1024, 'inline', 'below_threshold')], 1024).toShm.tensors).toBe(1);
    expect(whatIf([ev(1024, 'shm', 'shm_writable')], 1024).toInline.tensors).toBe(0);
  });
  it('buckets sizes by powers of two', () => {
    expect(bucketOf(0)).toBe(0);
    expect(bucketOf(1024)).toBe(10);
    expect(bucketOf(2047)).toBe(10);
    expect(bucketOf(1 << 30)).toBe(26);
    const h = histogram(events.map((e) => ({ nbytes: e.nbytes, path: e.path })));
    expect(h.shm[bucketOf(75_264)]).toBe(1);
    expect(h.inline.reduce((a, b) => a + b, 0)).toBe(5);
  });
  it('slider maps to a log scale and back', () => {
    expect(sliderToBytes(0)).toBe(0);
    expect(sliderToBytes(1000)).toBe(64 * 1024 * 1024);
    expect(Math.abs(sliderToBytes(bytesToSlider(65_536)) - 65_536) / 65_536).toBeLessThan(0.02);
  });
});
