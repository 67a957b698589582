// The shape of the request rates and latency the router keeps per worker and leg (rates.ts), as
// the console's contract serves them. zod only, so the contract and the renderer share it.
import { z } from 'zod';
import { LEGS } from '../transport/event-schema.ts';

/** The windows the rates are kept over, and each one's bucket (docs/console.md, "Rates and latency"). */
export const RATE_WINDOWS = {
  '1m': { windowMs: 60_000, bucketMs: 1_000 },
  '15m': { windowMs: 15 * 60_000, bucketMs: 10_000 },
  '1h': { windowMs: 60 * 60_000, bucketMs: 60_000 },
} as const;
export type RateWindow = keyof typeof RATE_WINDOWS;
export const RateWindowSchema = z.enum(Object.keys(RATE_WINDOWS) as [RateWindow, ...RateWindow[]]);

/** One bucket of a series: what ended in [t, t + bucketMs). */
export const RatePointSchema = z.object({
  /** Unix milliseconds, the bucket's start. */
  t: z.number(),
  requests: z.int().nonnegative(),
  errors: z.int().nonnegative(),
  /** Latency percentiles in milliseconds; null when no request of this bucket had a duration. */
  p50Ms: z.number().nullable(),
  p99Ms: z.number().nullable(),
});
export type RatePoint = z.infer<typeof RatePointSchema>;

/** One worker's one leg over the window. */
export const RateSeriesSchema = z.object({
  worker: z.string(),
  leg: z.enum(LEGS),
  requests: z.int().nonnegative(),
  errors: z.int().nonnegative(),
  /** Requests over the time from the window's first bucket (or the series' own first, when it is younger) to `now`, per second. */
  perSecond: z.number().nonnegative(),
  /** errors / requests; 0 with no request. */
  errorRate: z.number().min(0).max(1),
  p50Ms: z.number().nullable(),
  p99Ms: z.number().nullable(),
  /** Every bucket of the window, oldest first (empty ones included, so a chart's x axis is time). */
  points: z.array(RatePointSchema),
});
export type RateSeries = z.infer<typeof RateSeriesSchema>;

export const RatesSchema = z.object({
  window: RateWindowSchema,
  bucketMs: z.int().positive(),
  /** Unix milliseconds the rates were read at. */
  now: z.number(),
  /** The percentiles' relative error bound (0.12: a reported 100 ms is a true one within 88..112 ms). */
  percentileError: z.number(),
  /** By worker, then leg. */
  series: z.array(RateSeriesSchema),
});
export type Rates = z.infer<typeof RatesSchema>;
