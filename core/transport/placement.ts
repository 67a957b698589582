// Where one tensor goes: inline bytes or a file in /dev/shm (docs/transport.md, "Modes and
// the per-tensor rule").
//
// SHM only when the request's decision enabled it AND nbytes >= the threshold (a tensor
// strictly smaller stays inline; threshold 0 sends every tensor, even empty ones) AND our
// files in /dev/shm stay under multimodal_shm_max_outstanding_bytes with it. A failed
// SHM write falls back to inline for that tensor and counts a failure; it never fails the
// request. Every placement emits one TensorEvent and feeds the Prometheus counters.
import type { LegName, TensorEvent, TrafficSource } from './event-schema.ts';
import type { TransportDecision } from './decision.ts';
import type { ShmHandleData, ShmRequestScope, ShmWriter } from './shm-writer.ts';
import type { TensorPath, TensorReason } from './vocabulary.ts';
import { type WireRuntime } from '../config/schema.ts';

/** Where placement reports each tensor: the traffic event bus (telemetry/events.ts). */
export interface PlacementEvents {
  publish(event: TensorEvent): void;
}

/** The counters placement feeds (telemetry/metrics.ts's TransportMetrics). */
export interface PlacementMetrics {
  shmWriteSeconds: { observe(labels: { runtime: WireRuntime }, seconds: number): void };
  shmWriteFailures: { inc(labels: { runtime: WireRuntime }): void };
  countTensor(runtime: WireRuntime, path: TensorPath, nbytes: number): void;
}

/** A placed tensor, engine-neutral: the engines turn it into their own TensorData. */
export interface PlacedTensor {
  shape: number[];
  dtype: string;
  payload: { kind: 'inline'; bytes: Uint8Array } | { kind: 'shm'; handle: ShmHandleData };
}

export interface PlacementContext {
  requestId: string;
  /** The config revision the request uses (carried by every traffic event). */
  revision: number;
  /** A client's request, or the console's own test traffic. */
  source: TrafficSource;
  worker: string;
  runtime: WireRuntime;
  decision: TransportDecision;
  minBytes: number;
  writer: ShmWriter;
  scope: ShmRequestScope;
  metrics?: PlacementMetrics;
  events?: PlacementEvents;
  /** Counts of tensors by path, for the request's log line. */
  tally?: Record<TensorPath, number>;
  /** The request's record of its tensors: each event published is also added here. */
  kept?: TensorEvent[];
  /** Which sending of the request this is: 2 when the worker could not read the first's /dev/shm files and it goes again inline. */
  attempt?: number;
  /** Tensors already in their /dev/shm files; placeTensor takes the one whose bytes it is given. */
  prewritten?: PrewrittenTensor[];
  /** The request's leg this worker serves (default regular), and the bootstrap room the leg meets on (an image's for an encode call, the KV room for prefill and decode). */
  leg?: LegName;
  room?: bigint;
  /** The request's images the pixel cache answered or will keep (core/router/cached-images.ts), by their tensors' bytes. */
  cached?: CachedTensors;
}

/** A tensor the pixel cache gave (hit) or will keep (miss). */
export interface CachedTensor {
  status: 'hit' | 'miss';
  /** The tensor's size (a hit sent as a link stands behind an empty placeholder). */
  nbytes: number;
  /**
   * A hit over SHM: the cached file under a fresh tensor name for `worker`, tracked by the
   * scope: a hard link, or a copy of the request's own when `readWrite` (the worker attaches
   * the file read-write) or the cache is set to copy; undefined when it cannot be made.
   */
  place?(scope: ShmRequestScope, worker: string, readWrite: boolean): Promise<{ handle: ShmHandleData; micros: number; copied: boolean } | undefined>;
  /** A hit placed any other way: its bytes, read from the cache into pooled memory (once; at once when read already). */
  fill?(): Promise<Uint8Array>;
}

export interface CachedTensors {
  find(bytes: Uint8Array): CachedTensor | undefined;
}

function takePrewritten(ctx: PlacementContext, bytes: Uint8Array): PrewrittenTensor | undefined {
  const list = ctx.prewritten;
  const i = list
    ? list.findIndex((p) => p.bytes.buffer === bytes.buffer && p.bytes.byteOffset === bytes.byteOffset && p.bytes.byteLength === bytes.byteLength)
    : -1;
  return i >= 0 ? list!.splice(i, 1)[0] : undefined;
}

/** A tensor whose /dev/shm file was written while it was computed (a name reserved with ShmWriter.reserve). */
export interface PrewrittenTensor {
  /** The tensor's bytes as the engine will hand them to placeTensor (same memory, offset and length). */
  bytes: Uint8Array;
  name: string;
  /** Time spent writing it (for the event and smg_mm_shm_write_seconds). */
  micros: number;
}

export interface TensorToPlace {
  name: string;
  shape: number[];
  dtype: string;
  bytes: Uint8Array;
  /** The worker attaches this tensor's /dev/shm file read-write (EngineCapabilities.attachesShmReadWrite): a pixel-cache hit reaches it as a copy, never the cached inode. */
  readWrite?: boolean;
}

export async function placeTensor(ctx: PlacementContext, tensor: TensorToPlace): Promise<PlacedTensor> {
  // A cache hit that goes as a hard link has no bytes in memory (an empty placeholder stands
  // for them): its size is the entry's.
  const cached = ctx.cached?.find(tensor.bytes);
  const nbytes = cached?.nbytes ?? tensor.bytes.byteLength;
  let placed: PlacedTensor = { shape: tensor.shape, dtype: tensor.dtype, payload: { kind: 'inline', bytes: tensor.bytes } };
  let reason: TensorReason = ctx.decision.reason;
  let detail: string | undefined = ctx.decision.detail;
  let writeMicros = 0;

  // Written already (docs/transport.md, "Writing a tensor"): the file's bytes are counted in the
  // budget since its name was reserved, so only the threshold is checked again.
  const ready = ctx.decision.shmEnabled && nbytes >= ctx.minBytes ? takePrewritten(ctx, tensor.bytes) : undefined;
  // A cache hit over SHM is a hard link to the cached file: no write, no bytes counted again; or,
  // for a worker that attaches the file read-write, a copy of the request's own (a write it
  // could make through its map must never reach the cached bytes).
  // (Only within the /dev/shm budget: lowered under what is there, a hit goes inline like any tensor.)
  const link =
    !ready && cached?.place && ctx.decision.shmEnabled && nbytes >= ctx.minBytes && ctx.writer.hasRoom(0)
      ? await cached.place(ctx.scope, ctx.worker, tensor.readWrite === true)
      : undefined;
  // Any other way, a hit's bytes are read from the cache first.
  const bytes = !ready && !link && cached?.fill ? await cached.fill() : tensor.bytes;
  placed = { ...placed, payload: { kind: 'inline', bytes } };
  if (link) {
    placed = { ...placed, payload: { kind: 'shm', handle: link.handle } };
    writeMicros = link.micros;
    if (link.copied) ctx.metrics?.shmWriteSeconds.observe({ runtime: ctx.runtime }, link.micros / 1e6);
  } else if (ready) {
    placed = { ...placed, payload: { kind: 'shm', handle: ctx.writer.handleFor(ready.name, nbytes) } };
    writeMicros = ready.micros;
    ctx.metrics?.shmWriteSeconds.observe({ runtime: ctx.runtime }, ready.micros / 1e6);
  } else if (ctx.decision.shmEnabled) {
    if (nbytes < ctx.minBytes) {
      reason = 'below_threshold';
    } else if (!ctx.writer.hasRoom(nbytes)) {
      reason = 'shm_budget_exceeded';
    } else {
      const written = await ctx.writer.write(bytes, ctx.scope);
      if (written.ok) {
        placed = { ...placed, payload: { kind: 'shm', handle: written.handle } };
        writeMicros = written.micros;
        ctx.metrics?.shmWriteSeconds.observe({ runtime: ctx.runtime }, written.micros / 1e6);
      } else {
        reason = 'shm_write_failed';
        detail = written.error;
        ctx.metrics?.shmWriteFailures.inc({ runtime: ctx.runtime });
      }
    }
  }

  const path = placed.payload.kind;
  ctx.metrics?.countTensor(ctx.runtime, path, nbytes);
  if (ctx.tally) ctx.tally[path] += 1;
  const event: TensorEvent = {
    time: Date.now(),
    revision: ctx.revision,
    requestId: ctx.requestId,
    source: ctx.source,
    worker: ctx.worker,
    runtime: ctx.runtime,
    tensor: tensor.name,
    shape: tensor.shape,
    dtype: tensor.dtype,
    nbytes,
    path,
    reason,
    ...(detail !== undefined ? { detail } : {}),
    writeMicros,
    ...(ctx.attempt !== undefined && ctx.attempt > 1 ? { attempt: ctx.attempt } : {}),
    leg: ctx.leg ?? 'regular',
    ...(ctx.room !== undefined ? { room: ctx.room.toString() } : {}),
    ...(cached ? { cache: cached.status } : {}),
    ...(link ? { cachePlaced: link.copied ? ('copy' as const) : ('link' as const) } : {}),
  };
  ctx.events?.publish(event);
  ctx.kept?.push(event);
  return placed;
}
