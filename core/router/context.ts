// What every phase of a chat request shares: the router's long-lived parts (config store,
// model, preprocessing pool, /dev/shm writer, registry, telemetry), the options the console
// runs a request with, and the record of what the request did, for its log line.
import type { ConfigStore } from '../config/store.ts';
import type { TransportMode } from '../config/schema.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { PreprocessPool } from '../multimodal/pool.ts';
import type { LegName, TensorEvent, TrafficSource } from '../transport/event-schema.ts';
import type { TensorEventBus } from '../telemetry/events.ts';
import type { RequestLeg, RequestLog } from '../telemetry/requests.ts';
import type { RequestRates } from '../telemetry/rates.ts';
import type { RecentOutcomes } from './critical.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import type { ShmHostFacts } from '../transport/resolve.ts';
import type { PixelCache } from '../transport/pixel-cache.ts';
import type { ShmWriter } from '../transport/shm-writer.ts';
import type { TensorPath } from '../transport/vocabulary.ts';
import type { WorkerRegistry } from '../workers/registry.ts';
import type { RequestTiming } from './timing.ts';

export interface RouterContext {
  store: ConfigStore;
  processEnv: Readonly<Record<string, string | undefined>>;
  model: ModelDirectory;
  modelName: string;
  pool: PreprocessPool;
  writer: ShmWriter;
  /** Computed images kept for the next request that brings them (absent in contexts built without one). */
  pixelCache?: PixelCache;
  host: ShmHostFacts;
  metrics: TransportMetrics;
  events: TensorEventBus;
  registry: WorkerRegistry;
  /** The recent requests' summaries, for the console (absent in contexts built without one). */
  requests?: RequestLog;
  /** Requests/s, error rate and latency per worker and leg, fed by `requests` (absent in contexts built without one). */
  rates?: RequestRates;
  /** The last requests' outcomes, for "every recent request fails" (critical.ts; absent in contexts built without one). */
  outcomes?: RecentOutcomes;
  /**
   * Internal (bench:console's baseline, never a user setting): false keeps no request record
   * (no legs, no tensors, no summary in `requests`).
   */
  recordRequests?: boolean;
}

/** The header every chat response carries: which config revision the request used. */
export const REVISION_HEADER = 'x-mmtc-config-revision';

/**
 * How the console runs a request through this same pipeline: its events are marked as the
 * console's own, it may pin one worker of the snapshot, and calibration may force the mode
 * and threshold (never reachable from the HTTP API).
 */
export interface ChatOptions {
  source?: TrafficSource;
  worker?: string;
  transport?: { mode: TransportMode; minBytes: number };
  /** Calibration's own pixel bounds, so its tensors can span sizes the model's bounds would not give. */
  pixelBounds?: { min_pixels: number; max_pixels: number };
  /** The doctor's probe: use /dev/shm even on a lane marked broken, and report a read failure instead of retrying inline. */
  probe?: boolean;
  /** Compute every image and write every tensor, cache or not (calibration measures the write, not a hard link). */
  bypassPixelCache?: boolean;
}

/** What one request did, for its log line (filled in as the request goes). */
export interface RequestRecord {
  id?: string;
  revision?: number;
  worker?: string;
  model?: string;
  /** The OpenAI error code or type the request ended with. */
  errorCode?: string;
  /** The worker could not read this request's /dev/shm files (what it said); it was sent again inline. */
  shmFallback?: string;
  /** Under disaggregation: a leg that failed while the decode still answered (its error). */
  legFailed?: string;
  /** A tensor file the preprocessing thread could not write (why); the tensor was placed the usual way. */
  prewriteFailed?: string;
  /** The sampling the worker that samples was sent, by the gateway's names (engines/sampling.ts samplingSummary). */
  sampling?: Record<string, unknown>;
  /** Sequential PD: how the KV went from the prefill to the decode worker (its connector's mode), and why the decode recomputed, when it did. */
  kvHandoff?: string;
  paths: Record<TensorPath, number>;
  source?: TrafficSource;
  /** An error after the answer had begun (a stream cut short): the client saw it in the stream. */
  streamError?: string;
  /** Every worker call, in the order they began (absent when records are off). */
  legs?: RequestLeg[];
  /** Every tensor placed, as the traffic stream reported it (absent when records are off). */
  tensors?: TensorEvent[];
}

export function newRequestRecord(): RequestRecord {
  return { paths: { inline: 0, shm: 0, remote: 0 } };
}

/** A chat request's record also keeps its legs and tensors, for the console, unless records are off. */
export function recordChat(ctx: RouterContext, record: RequestRecord, source: TrafficSource): void {
  record.source = source;
  if (!ctx.requests || ctx.recordRequests === false || record.legs) return;
  record.legs = [];
  record.tensors = [];
}

/** A leg not yet ended has this duration until it ends (or the request is kept). */
const OPEN = -1;

/**
 * One worker call of a request, timed from the request's arrival for its record: begun,
 * sent (its tensors placed), first token, ended (with its error in words, or why it was
 * stopped). Its methods do nothing once it has ended, and nothing when records are off.
 */
export class LegClock {
  private constructor(
    private readonly entry: RequestLeg | undefined,
    private readonly timing: RequestTiming,
  ) {}

  static begin(record: RequestRecord, timing: RequestTiming, leg: LegName, worker: string, more: { image?: number; attempt?: number } = {}): LegClock {
    if (!record.legs) return new LegClock(undefined, timing);
    const entry: RequestLeg = { leg, worker, startMs: timing.elapsedMs(), durationMs: OPEN, ...more };
    record.legs.push(entry);
    return new LegClock(entry, timing);
  }

  private get open(): RequestLeg | undefined {
    return this.entry && this.entry.durationMs === OPEN ? this.entry : undefined;
  }

  sent(): void {
    const e = this.open;
    if (e && e.placeMs === undefined) e.placeMs = this.timing.elapsedMs() - e.startMs;
  }

  firstToken(): void {
    const e = this.open;
    if (e && e.firstTokenMs === undefined) e.firstTokenMs = this.timing.elapsedMs() - e.startMs;
  }

  /** The leg is over: succeeded, or failed with `error` (its words). */
  end(error?: string): void {
    const e = this.open;
    if (!e) return;
    e.durationMs = this.timing.elapsedMs() - e.startMs;
    if (error !== undefined) e.error = error;
  }

  /** The leg was ended for another's reason (`why`): not its own failure. */
  stop(why: string): void {
    const e = this.open;
    if (!e) return;
    e.durationMs = this.timing.elapsedMs() - e.startMs;
    e.stopped = why;
  }
}

/** Why a leg is stopped when another leg of its request failed. */
export const STOPPED_BY_OTHER_LEG = 'another leg of the request failed';
/** Why a leg is stopped when the client left. */
export const STOPPED_CLIENT_GONE = 'the client went away';

/** A finished request, kept for the console: what its log line says of it, its legs, phases and tensors. */
export function keepRequest(ctx: RouterContext, record: RequestRecord, status: number, error: string | undefined, timing: RequestTiming): void {
  if (!record.id || !ctx.requests || !record.legs) return;
  const durationMs = timing.elapsedMs();
  for (const leg of record.legs) if (leg.durationMs === OPEN) leg.durationMs = durationMs - leg.startMs;
  let cacheHits = 0;
  for (const t of record.tensors!) if (t.cache === 'hit') cacheHits += 1;
  const failure = error ?? record.streamError;
  ctx.requests.add({
    id: record.id,
    time: Date.now(),
    status,
    durationMs,
    ...(record.model ? { model: record.model } : {}),
    ...(record.worker ? { worker: record.worker } : {}),
    legs: record.legs,
    ...(record.source ? { source: record.source } : {}),
    phases: timing.phases(),
    paths: record.paths,
    tensors: record.tensors!,
    cacheHits,
    ...(record.sampling ? { sampling: record.sampling } : {}),
    ...(record.kvHandoff ? { kvHandoff: record.kvHandoff } : {}),
    ...(failure ? { error: failure } : {}),
    ...(record.errorCode ? { errorCode: record.errorCode } : {}),
  });
}
