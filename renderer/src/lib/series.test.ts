import { describe, expect, it } from 'vitest';
import { perSecondSeries, recentRate } from './series.ts';

describe('per-second series', () => {
  it('fills missing seconds with zero and ends at the last complete second', () => {
    const agg = (second: number, n: number) => ({
      second,
      tensors: { inline: n, shm: 2 * n, remote: 0 },
      bytes: { inline: 10 * n, shm: 0, remote: 0 },
      shmWriteFailures: 0,
    });
    const s = perSecondSeries([agg(97, 1), agg(99, 3), agg(100, 9)], 4, 100);
    expect(s.seconds).toEqual([96, 97, 98, 99]);
    expect(s.tensors.inline).toEqual([0, 1, 0, 3]);
    expect(s.tensors.shm).toEqual([0, 2, 0, 6]);
    expect(s.bytes.inline).toEqual([0, 10, 0, 30]);
  });
});

describe('the rate next to a trend line', () => {
  it("is the average of the series' last five complete seconds, so the number and the line agree", () => {
    const agg = (second: number, n: number) => ({
      second,
      tensors: { inline: n, shm: 0, remote: 0 },
      bytes: { inline: n, shm: 0, remote: 0 },
      shmWriteFailures: 0,
    });
    const s = perSecondSeries([agg(90, 100), agg(96, 5), agg(97, 5), agg(99, 10)], 60, 100);
    expect(recentRate(s.tensors.inline)).toBe(4);
    // Traffic stopped long ago: the window moves on with the clock and the rate is 0.
    expect(recentRate(perSecondSeries([agg(10, 50)], 60, 100).tensors.inline)).toBe(0);
  });
});
