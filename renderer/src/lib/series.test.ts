import { describe, expect, it } from 'vitest';
import { perSecondSeries } from './series.ts';

describe('per-second series', () => {
  it('fills missing seconds with zero and ends at the last complete second', () => {
    const agg = (second: number, n: number) => ({ second, tensors: { inline: n, shm: 2 * n, remote: 0 }, bytes: { inline: 10 * n, shm: 0, remote: 0 }, shmWriteFailures: 0 });
    const s = perSecondSeries([agg(97, 1), agg(99, 3), agg(100, 9)], 4, 100);
    expect(s.seconds).toEqual([96, 97, 98, 99]);
    expect(s.tensors.inline).toEqual([0, 1, 0, 3]);
    expect(s.tensors.shm).toEqual([0, 2, 0, 6]);
    expect(s.bytes.inline).toEqual([0, 10, 0, 30]);
  });
});
