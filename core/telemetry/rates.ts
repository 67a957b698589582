// Request rates and latency per worker and leg, over the last minute, 15 minutes and hour
// (docs/console.md, "Rates and latency"). Each finished request (RequestLog.subscribe) adds its
// legs here: O(1) per leg, in memory fixed per series. A series (one worker's one leg) keeps,
// per window, a ring of buckets (1 s × 60, 10 s × 90, 1 min × 60); a bucket holds its request
// and error counts and a histogram of leg durations in log-spaced bins (ratio 1.25 from 0.5 ms to
// 10 min), from which p50/p99 are read to within 12% (the bin's geometric middle is reported).
// At most MAX_SERIES series: the least recently seen goes first, and one unseen for an hour
// (every window empty) is forgotten.
import type { LegName } from '../transport/event-schema.ts';
import { RATE_WINDOWS, type RatePoint, type Rates, type RateSeries, type RateWindow } from './rates-schema.ts';
import { requestFailed, type RequestLeg, type RequestSummary } from './requests.ts';

const BIN_LOW_MS = 0.5;
const BIN_RATIO = 1.25;
/** Bins [low·r^i, low·r^(i+1)) up to 10 min, plus one below (< 0.5 ms) and one above (≥ the top). */
const INNER_BINS = Math.ceil(Math.log(600_000 / BIN_LOW_MS) / Math.log(BIN_RATIO));
const BINS = INNER_BINS + 2;
/** Slot layout: [requests, errors, bin 0 .. bin BINS-1]. */
const SLOT = 2 + BINS;
const LOG_RATIO = Math.log(BIN_RATIO);
/** A reported percentile is the bin's geometric middle: within this factor of the true value. */
export const PERCENTILE_ERROR = Math.sqrt(BIN_RATIO) - 1;
export const MAX_SERIES = 32;

const WINDOWS = Object.keys(RATE_WINDOWS) as RateWindow[];
const LONGEST_MS = Math.max(...WINDOWS.map((w) => RATE_WINDOWS[w].windowMs));

function binOf(ms: number): number {
  if (!(ms >= BIN_LOW_MS)) return 0;
  const i = Math.floor(Math.log(ms / BIN_LOW_MS) / LOG_RATIO);
  return i >= INNER_BINS ? BINS - 1 : 1 + i;
}

/** What a bin's samples are reported as: its geometric middle (the ends: their one bound). */
function binValue(bin: number): number {
  if (bin === 0) return BIN_LOW_MS;
  if (bin === BINS - 1) return BIN_LOW_MS * BIN_RATIO ** INNER_BINS;
  return BIN_LOW_MS * BIN_RATIO ** (bin - 1 + 0.5);
}

/** The q-quantile of a histogram (bins at `offset` in `data`), by rank; null when it holds nothing. */
function quantile(data: Uint32Array, offset: number, q: number): number | null {
  let total = 0;
  for (let b = 0; b < BINS; b++) total += data[offset + b]!;
  if (total === 0) return null;
  const rank = Math.max(1, Math.ceil(q * total));
  let seen = 0;
  for (let b = 0; b < BINS; b++) {
    seen += data[offset + b]!;
    if (seen >= rank) return binValue(b);
  }
  return binValue(BINS - 1);
}

/** One window's ring of buckets. */
class Ring {
  private readonly size: number;
  /** Each slot's bucket index (time / bucketMs); -1: never used. */
  private readonly index: Float64Array;
  private readonly data: Uint32Array;

  constructor(
    private readonly bucketMs: number,
    windowMs: number,
  ) {
    this.size = windowMs / bucketMs;
    this.index = new Float64Array(this.size).fill(-1);
    this.data = new Uint32Array(this.size * SLOT);
  }

  /** One leg ending at `time`; `bin`: its duration's bin (binOf), -1 without one. */
  add(time: number, failed: boolean, bin: number): void {
    const bucket = Math.floor(time / this.bucketMs);
    const slot = bucket % this.size;
    const at = slot * SLOT;
    if (this.index[slot] !== bucket) {
      // Older than what the slot holds now: past the window, not counted.
      if (this.index[slot]! > bucket) return;
      this.index[slot] = bucket;
      this.data.fill(0, at, at + SLOT);
    }
    this.data[at]!++;
    if (failed) this.data[at + 1]!++;
    if (bin >= 0) this.data[at + 2 + bin]!++;
  }

  /** The window ending at `now`: its buckets oldest first, and their sums. */
  read(now: number): { points: RatePoint[]; requests: number; errors: number; p50Ms: number | null; p99Ms: number | null } {
    const last = Math.floor(now / this.bucketMs);
    const sum = new Uint32Array(BINS);
    const points: RatePoint[] = [];
    let requests = 0;
    let errors = 0;
    for (let bucket = last - this.size + 1; bucket <= last; bucket++) {
      const slot = ((bucket % this.size) + this.size) % this.size;
      const at = slot * SLOT;
      const t = bucket * this.bucketMs;
      if (this.index[slot] !== bucket) {
        points.push({ t, requests: 0, errors: 0, p50Ms: null, p99Ms: null });
        continue;
      }
      requests += this.data[at]!;
      errors += this.data[at + 1]!;
      for (let b = 0; b < BINS; b++) sum[b]! += this.data[at + 2 + b]!;
      points.push({
        t,
        requests: this.data[at]!,
        errors: this.data[at + 1]!,
        p50Ms: quantile(this.data, at + 2, 0.5),
        p99Ms: quantile(this.data, at + 2, 0.99),
      });
    }
    return { points, requests, errors, p50Ms: quantile(sum, 0, 0.5), p99Ms: quantile(sum, 0, 0.99) };
  }
}

class Series {
  /** One ring per window, in WINDOWS' order. */
  readonly rings = WINDOWS.map((w) => new Ring(RATE_WINDOWS[w].bucketMs, RATE_WINDOWS[w].windowMs));
  lastSeen: number;

  constructor(
    readonly worker: string,
    readonly leg: LegName,
    /** When it was first counted: a window younger than the series is divided by its age. */
    readonly since: number,
  ) {
    this.lastSeen = since;
  }
}

/**
 * The worker calls a request made: its `legs`, or, for a summary that has none (a router that
 * does not record them), one regular leg on its `worker` lasting its `durationMs`. A request that
 * never reached a worker has none.
 */
export function legsOf(summary: RequestSummary): RequestLeg[] {
  if (summary.legs) return summary.legs;
  if (!summary.worker) return [];
  return [
    {
      leg: 'regular',
      worker: summary.worker,
      startMs: 0,
      durationMs: summary.durationMs ?? Number.NaN,
      ...(requestFailed(summary) ? { error: summary.error ?? `status ${summary.status}` } : {}),
    },
  ];
}

/**
 * Whether a leg failed: its own error, or the request failed and this is its last leg (the one
 * that answered, or was answering, the client).
 */
export function legFailed(summary: RequestSummary, legs: readonly RequestLeg[], i: number): boolean {
  return legs[i]!.error !== undefined || (i === legs.length - 1 && requestFailed(summary));
}

export class RequestRates {
  private readonly series = new Map<string, Series>();

  constructor(private readonly maxSeries = MAX_SERIES) {}

  /** Count one finished request's legs, at its end time. */
  add(summary: RequestSummary): void {
    const legs = legsOf(summary);
    for (let i = 0; i < legs.length; i++) {
      const leg = legs[i]!;
      const bin = Number.isFinite(leg.durationMs) && leg.durationMs >= 0 ? binOf(leg.durationMs) : -1;
      const failed = legFailed(summary, legs, i);
      for (const ring of this.seriesFor(leg.worker, leg.leg, summary.time).rings) ring.add(summary.time, failed, bin);
    }
  }

  private seriesFor(worker: string, leg: LegName, time: number): Series {
    const key = `${leg} ${worker}`;
    let s = this.series.get(key);
    if (!s) {
      if (this.series.size >= this.maxSeries) this.forgetOldest();
      s = new Series(worker, leg, time);
      this.series.set(key, s);
    }
    if (time > s.lastSeen) s.lastSeen = time;
    return s;
  }

  private forgetOldest(): void {
    let oldest: [string, Series] | undefined;
    for (const entry of this.series) if (!oldest || entry[1].lastSeen < oldest[1].lastSeen) oldest = entry;
    if (oldest) this.series.delete(oldest[0]);
  }

  /** How many series are kept (each a fixed size). */
  get size(): number {
    return this.series.size;
  }

  /** Every series over `window` at `now`, by worker then leg; a series unseen for the longest window is forgotten here. */
  read(window: RateWindow, now = Date.now()): Rates {
    const { windowMs, bucketMs } = RATE_WINDOWS[window];
    const out: RateSeries[] = [];
    for (const [key, s] of this.series) {
      if (now - s.lastSeen >= LONGEST_MS) {
        this.series.delete(key);
        continue;
      }
      const r = s.rings[WINDOWS.indexOf(window)]!.read(now);
      if (r.requests === 0) continue;
      // The time its buckets cover: from the first (the window's, or the series' own when it is younger) to now.
      const firstMs = Math.max(Math.floor(s.since / bucketMs), Math.floor(now / bucketMs) - windowMs / bucketMs + 1) * bucketMs;
      const spanMs = now - firstMs;
      out.push({
        worker: s.worker,
        leg: s.leg,
        requests: r.requests,
        errors: r.errors,
        perSecond: r.requests / (Math.max(spanMs, bucketMs) / 1000),
        errorRate: r.errors / r.requests,
        p50Ms: r.p50Ms,
        p99Ms: r.p99Ms,
        points: r.points,
      });
    }
    out.sort((a, b) => a.worker.localeCompare(b.worker) || a.leg.localeCompare(b.leg));
    return { window, bucketMs, now, percentileError: PERCENTILE_ERROR, series: out };
  }
}
