import { describe, expect, it } from 'vitest';
import { MAX_SERIES, PERCENTILE_ERROR, RequestRates, legsOf } from './rates.ts';
import type { RequestLeg, RequestSummary } from './requests.ts';

const T0 = 472_222 * 3_600_000; // a whole hour: every window's buckets start here
const W = 'grpc://127.0.0.1:50051';

let n = 0;
const regular = (time: number, durationMs: number, status = 200, worker = W): RequestSummary => ({ id: `r${n++}`, time, status, durationMs, worker });
const disaggregated = (time: number, legs: RequestLeg[], status = 200): RequestSummary => ({ id: `r${n++}`, time, status, worker: legs.at(-1)!.worker, legs });

describe('RequestRates', () => {
  it('gives requests/s, error rate and percentiles of one worker over the last minute', () => {
    const rates = new RequestRates();
    // 60 s of traffic, 10 requests a second: 1..100 ms, the 5th of each second a 500.
    for (let s = 0; s < 60; s++) for (let i = 0; i < 10; i++) rates.add(regular(T0 + s * 1000 + i * 100, ((s * 10 + i) % 100) + 1, i === 4 ? 500 : 200));
    const r = rates.read('1m', T0 + 59_999);
    expect(r.series).toHaveLength(1);
    const s = r.series[0]!;
    expect(s).toMatchObject({ worker: W, leg: 'regular', requests: 600, errors: 60 });
    expect(s.perSecond).toBeCloseTo(10, 3);
    expect(s.errorRate).toBeCloseTo(0.1, 5);
    // Durations 1..100 ms, uniform: p50 = 50 ms, p99 = 99 ms, each within the stated error.
    expect(Math.abs(s.p50Ms! - 50) / 50).toBeLessThanOrEqual(PERCENTILE_ERROR);
    expect(Math.abs(s.p99Ms! - 99) / 99).toBeLessThanOrEqual(PERCENTILE_ERROR);
    expect(r.percentileError).toBeLessThan(0.12);
    // One point per second, oldest first, each 10 requests and one error.
    expect(s.points).toHaveLength(60);
    expect(s.points[0]).toMatchObject({ t: T0, requests: 10, errors: 1 });
    expect(s.points.at(-1)).toMatchObject({ t: T0 + 59_000, requests: 10, errors: 1 });
  });

  it('keeps percentiles within the stated error across the whole range', () => {
    for (const ms of [0.7, 3, 42, 480, 7_300, 95_000, 580_000]) {
      const rates = new RequestRates();
      rates.add(regular(T0, ms));
      const s = rates.read('1m', T0).series[0]!;
      expect(Math.abs(s.p50Ms! - ms) / ms).toBeLessThanOrEqual(PERCENTILE_ERROR);
      expect(Math.abs(s.p99Ms! - ms) / ms).toBeLessThanOrEqual(PERCENTILE_ERROR);
    }
  });

  it('says p99 is the slow tail, not the middle', () => {
    const rates = new RequestRates();
    for (let i = 0; i < 98; i++) rates.add(regular(T0 + i, 10));
    rates.add(regular(T0 + 98, 2000));
    rates.add(regular(T0 + 99, 2000));
    const s = rates.read('1m', T0 + 100).series[0]!;
    expect(s.p50Ms).toBeCloseTo(10, -1);
    expect(s.p99Ms! / 2000).toBeGreaterThan(1 - PERCENTILE_ERROR);
  });

  it('downsamples: 10 s buckets over 15 minutes, 1 min buckets over the hour, and the minute forgets what is older', () => {
    const rates = new RequestRates();
    // One request every 2 s for 20 minutes.
    for (let t = 0; t < 20 * 60_000; t += 2000) rates.add(regular(T0 + t, 5));
    const now = T0 + 20 * 60_000 - 1;
    const minute = rates.read('1m', now).series[0]!;
    expect(minute.points).toHaveLength(60);
    expect(minute.requests).toBe(30);
    expect(minute.perSecond).toBeCloseTo(0.5, 2);
    const quarter = rates.read('15m', now);
    expect(quarter.bucketMs).toBe(10_000);
    expect(quarter.series[0]!.points).toHaveLength(90);
    expect(quarter.series[0]!.points.every((p) => p.requests === 5)).toBe(true);
    expect(quarter.series[0]!.requests).toBe(450);
    const hour = rates.read('1h', now);
    expect(hour.bucketMs).toBe(60_000);
    expect(hour.series[0]!.points).toHaveLength(60);
    // 20 minutes of 30 a minute, the 40 before the first request empty.
    expect(hour.series[0]!.points.filter((p) => p.requests === 30)).toHaveLength(20);
    expect(hour.series[0]!.points.slice(0, 40).every((p) => p.requests === 0 && p.p50Ms === null)).toBe(true);
    expect(hour.series[0]!.requests).toBe(600);
    // Requests/s over the hour: over the 20 minutes counted, not the whole hour.
    expect(hour.series[0]!.perSecond).toBeCloseTo(0.5, 2);
    // Two minutes of silence: the minute window is empty (the series is not shown), the 15 minutes still has it.
    expect(rates.read('1m', now + 120_000).series).toEqual([]);
    expect(rates.read('15m', now + 120_000).series[0]!.requests).toBe(390);
  });

  it('does not count a request older than its window when a newer one took the slot', () => {
    const rates = new RequestRates();
    rates.add(regular(T0 + 61_000, 5));
    rates.add(regular(T0 + 1_000, 5)); // same slot of the minute ring, 60 s earlier
    const s = rates.read('1m', T0 + 61_500).series[0]!;
    expect(s.requests).toBe(1);
    expect(rates.read('15m', T0 + 61_500).series[0]!.requests).toBe(2);
  });

  it('keeps each leg of a disaggregated request apart, with the failure on its leg', () => {
    const rates = new RequestRates();
    const E = 'grpc://enc:1';
    const P = 'grpc://pre:2';
    const D = 'grpc://dec:3';
    rates.add(
      disaggregated(T0, [
        { leg: 'encode', worker: E, startMs: 1, durationMs: 30 },
        { leg: 'prefill', worker: P, startMs: 31, durationMs: 80 },
        { leg: 'decode', worker: D, startMs: 31, durationMs: 400, firstTokenMs: 90 },
      ]),
    );
    // The encode failed, the decode still answered: the encode's error, not the decode's.
    rates.add(
      disaggregated(T0 + 10, [
        { leg: 'encode', worker: E, startMs: 1, durationMs: 3, error: 'encode worker unavailable' },
        { leg: 'prefill', worker: P, startMs: 4, durationMs: 80 },
        { leg: 'decode', worker: D, startMs: 4, durationMs: 400 },
      ]),
    );
    // The decode failed: the request failed, on its last leg.
    rates.add(
      disaggregated(
        T0 + 20,
        [
          { leg: 'prefill', worker: P, startMs: 1, durationMs: 80 },
          { leg: 'decode', worker: D, startMs: 1, durationMs: 5 },
        ],
        502,
      ),
    );
    const got = rates.read('1m', T0 + 30).series.map((s) => [s.worker, s.leg, s.requests, s.errors]);
    expect(got).toEqual([
      [D, 'decode', 3, 1],
      [E, 'encode', 2, 1],
      [P, 'prefill', 3, 0],
    ]);
  });

  it('without legs, counts a regular leg on the worker; a request that reached no worker is not counted', () => {
    expect(legsOf({ id: 'a', time: T0, status: 200, worker: W, durationMs: 12 })).toEqual([{ leg: 'regular', worker: W, startMs: 0, durationMs: 12 }]);
    const rates = new RequestRates();
    rates.add({ id: 'b', time: T0, status: 400, error: 'bad image' });
    rates.add({ id: 'c', time: T0, status: 200, worker: W }); // no duration: a request, no latency
    rates.add({ id: 'd', time: T0, status: 200, worker: W, error: 'stream cut' });
    const s = rates.read('1m', T0).series;
    expect(s).toHaveLength(1);
    expect(s[0]).toMatchObject({ requests: 2, errors: 1, p50Ms: null, p99Ms: null });
  });

  it('is bounded: at most MAX_SERIES series, the least recently seen forgotten first, and one unseen for an hour dropped', () => {
    const rates = new RequestRates();
    for (let i = 0; i < MAX_SERIES + 5; i++) rates.add(regular(T0 + i, 5, 200, `grpc://w:${i}`));
    expect(rates.size).toBe(MAX_SERIES);
    const workers = rates.read('1m', T0 + 100).series.map((s) => s.worker);
    expect(workers).not.toContain('grpc://w:0');
    expect(workers).toContain(`grpc://w:${MAX_SERIES + 4}`);
    // Worker 5 seen again later, then an hour passes for the rest.
    rates.add(regular(T0 + 30 * 60_000, 5, 200, 'grpc://w:5'));
    expect(rates.read('1h', T0 + 60 * 60_000 + 1000).series.map((s) => s.worker)).toEqual(['grpc://w:5']);
    expect(rates.size).toBe(1);
  });
});
