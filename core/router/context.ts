// What every phase of a chat request shares: the router's long-lived parts (config store,
// model, preprocessing pool, /dev/shm writer, registry, telemetry), the options the console
// runs a request with, and the record of what the request did, for its log line.
import type { ConfigStore } from '../config/store.ts';
import type { TransportMode } from '../config/schema.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { PreprocessPool } from '../multimodal/pool.ts';
import type { TrafficSource } from '../transport/event-schema.ts';
import type { TensorEventBus } from '../telemetry/events.ts';
import type { RequestLog } from '../telemetry/requests.ts';
import type { RequestRates } from '../telemetry/rates.ts';
import type { RecentOutcomes } from './critical.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import type { ShmHostFacts } from '../transport/resolve.ts';
import type { PixelCache } from '../transport/pixel-cache.ts';
import type { ShmWriter } from '../transport/shm-writer.ts';
import type { TensorPath } from '../transport/vocabulary.ts';
import type { WorkerRegistry } from '../workers/registry.ts';

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
}

export function newRequestRecord(): RequestRecord {
  return { paths: { inline: 0, shm: 0, remote: 0 } };
}

/** A finished request, kept for the console: what its log line says of it. */
export function keepRequest(ctx: RouterContext, record: RequestRecord, status: number, error: string | undefined): void {
  if (!record.id || !ctx.requests) return;
  ctx.requests.add({
    id: record.id,
    time: Date.now(),
    status,
    ...(record.worker ? { worker: record.worker } : {}),
    ...(record.sampling ? { sampling: record.sampling } : {}),
    ...(record.kvHandoff ? { kvHandoff: record.kvHandoff } : {}),
    ...(error ? { error } : {}),
  });
}
