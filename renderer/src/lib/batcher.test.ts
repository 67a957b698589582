import { describe, expect, it } from 'vitest';
import { createFrameBatcher, prependCapped } from './batcher.ts';

describe('frame batcher', () => {
  it('delivers everything pushed between two frames in one call', () => {
    const frames: Array<() => void> = [];
    const delivered: number[][] = [];
    const b = createFrameBatcher<number>(
      (items) => delivered.push(items),
      (cb) => frames.push(cb),
    );
    b.push([1, 2]);
    b.push([3]);
    b.push([]);
    expect(frames).toHaveLength(1);
    expect(b.pending()).toBe(3);
    frames.shift()!();
    expect(delivered).toEqual([[1, 2, 3]]);
    b.push([4]);
    expect(frames).toHaveLength(1);
    expect(b.clear()).toBe(1);
    frames.shift()!();
    expect(delivered).toHaveLength(1);
  });
  it('keeps the newest rows first and at most the cap', () => {
    expect(prependCapped([3, 2, 1], [4, 5], 10)).toEqual([5, 4, 3, 2, 1]);
    expect(prependCapped([3, 2, 1], [4, 5], 4)).toEqual([5, 4, 3, 2]);
    expect(prependCapped([1], [2, 3, 4, 5, 6], 3)).toEqual([6, 5, 4]);
    const big = Array.from({ length: 10_000 }, (_, i) => i);
    expect(prependCapped(big, [10_000], 10_000)[0]).toBe(10_000);
    expect(prependCapped(big, [10_000], 10_000)).toHaveLength(10_000);
  });
});
