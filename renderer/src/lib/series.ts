// Per-second aggregates as evenly spaced series: one point per second over a window ending
// at the last complete second, missing seconds as zero (no traffic), so charts and
// sparklines never draw a line across a gap as if traffic had continued.
import type { SecondAggregate } from '../../../core/console/contract.ts';

export interface Series {
  seconds: number[];
  tensors: { inline: number[]; shm: number[]; remote: number[] };
  bytes: { inline: number[]; shm: number[]; remote: number[] };
}

export function perSecondSeries(aggregates: readonly SecondAggregate[], windowSeconds: number, nowSecond = Math.floor(Date.now() / 1000)): Series {
  const end = nowSecond - 1;
  const start = end - windowSeconds + 1;
  const by = new Map(aggregates.map((a) => [a.second, a]));
  const s: Series = { seconds: [], tensors: { inline: [], shm: [], remote: [] }, bytes: { inline: [], shm: [], remote: [] } };
  for (let t = start; t <= end; t++) {
    const a = by.get(t);
    s.seconds.push(t);
    for (const p of ['inline', 'shm', 'remote'] as const) {
      s.tensors[p].push(a ? a.tensors[p] : 0);
      s.bytes[p].push(a ? a.bytes[p] : 0);
    }
  }
  return s;
}

/** The average per second over the last `seconds` points of a series: the rate a screen shows next to that series' trend line. */
export function recentRate(values: readonly number[], seconds = 5): number {
  const tail = values.slice(-seconds);
  return tail.length ? tail.reduce((n, v) => n + v, 0) / seconds : 0;
}
