// The shape of one traffic event (one placed tensor, as placement.ts reports it) and of the
// per-second aggregates, as the event bus (telemetry/) keeps them and the console streams
// them. zod only, so the console contract and the renderer share it.
import { z } from 'zod';
import { TENSOR_PATHS, TENSOR_REASON_NAMES } from './vocabulary.ts';
import { WIRE_RUNTIMES } from '../config/schema.ts';

export const TensorPathSchema = z.enum(TENSOR_PATHS);

/** Who caused a request: a client of the router's API, or the console's own test traffic. */
export const TRAFFIC_SOURCES = ['api', 'console'] as const;
export const TrafficSourceSchema = z.enum(TRAFFIC_SOURCES);
export type TrafficSource = z.infer<typeof TrafficSourceSchema>;

/** Which leg of a request a tensor went to: a regular worker's whole request, or under disaggregation an encode, prefill or decode worker's part. */
export const LEGS = ['regular', 'encode', 'prefill', 'decode'] as const;
export type LegName = (typeof LEGS)[number];

export const TensorEventSchema = z.object({
  /** Unix milliseconds. */
  time: z.number(),
  /** The config revision the request used. */
  revision: z.int(),
  requestId: z.string(),
  source: TrafficSourceSchema,
  worker: z.string(),
  runtime: z.enum(WIRE_RUNTIMES),
  tensor: z.string(),
  shape: z.array(z.int()),
  dtype: z.string(),
  nbytes: z.int(),
  path: TensorPathSchema,
  /** Why this path: the request's decision reason, or why this one tensor differs from it. */
  reason: z.enum(TENSOR_REASON_NAMES),
  /** Error text when an SHM write failed and the tensor fell back to inline. */
  detail: z.string().optional(),
  /** Time spent writing the SHM file (0 inline). */
  writeMicros: z.number(),
  /**
   * The sending of the request this tensor belongs to, when not the first: 2 is the inline
   * retry after the worker could not read attempt 1's /dev/shm files (`detail` says why).
   */
  attempt: z.int().min(2).optional(),
  /** The leg of the request the worker serves: every event names it (absent only in events of earlier versions, which were all regular). */
  leg: z.enum(LEGS).optional(),
  /** The bootstrap room of the leg (an image's under EPD for an encode tensor, the request's KV room for prefill and decode), a decimal int64. */
  room: z.string().optional(),
  /** The pixel cache's answer for the image this tensor is (absent when the cache is off or the tensor is not one image's own). */
  cache: z.enum(['hit', 'miss']).optional(),
  /** A hit over SHM: a hard link to the cached file, or a copy of the request's own (a worker that attaches its file read-write, or multimodal_pixel_cache_shm: copy). */
  cachePlaced: z.enum(['link', 'copy']).optional(),
});
export type TensorEvent = z.infer<typeof TensorEventSchema>;

const perPath = z.object({ inline: z.number(), shm: z.number(), remote: z.number() });
export const SecondAggregateSchema = z.object({
  /** Unix seconds. */
  second: z.int(),
  tensors: perPath,
  bytes: perPath,
  shmWriteFailures: z.int(),
});
export type SecondAggregate = z.infer<typeof SecondAggregateSchema>;
