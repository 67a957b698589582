// Prometheus metrics of the tensor transport and of the HTTP API, named as SMG names them (docs/transport.md, "Metrics") so existing
// dashboards keep working, plus our SHM write/read latency histograms. Each router owns its
// own Registry (tests and embedded routers never share counters).
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { PixelCacheStats } from '../transport/pixel-cache.ts';
import type { TensorPath } from '../transport/vocabulary.ts';
import { type WireRuntime } from '../config/schema.ts';
import { UNCAUGHT_KINDS, uncaughtErrorCounts } from './process-guard.ts';
import { legFailed, legsOf } from './rates.ts';
import type { RequestSummary } from './requests.ts';

/** 5 ms .. 10 min: a chat request with images takes tens of ms to minutes. */
const REQUEST_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];
const ROUTER_LABELS = ['router_type', 'backend_type', 'connection_mode', 'model', 'endpoint'] as const;

/** The router labels of this router's requests (gRPC workers, one regular worker per request). */
export function routerLabels(model: string): Record<(typeof ROUTER_LABELS)[number], string> {
  return { router_type: 'grpc', backend_type: 'regular', connection_mode: 'grpc', model, endpoint: 'chat' };
}

/** 50 µs .. 250 ms: from a small tensor's write to a large one's (measured: docs/performance.md, "What a tensor write takes"). */
const LATENCY_BUCKETS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25];

export class TransportMetrics {
  readonly registry = new Registry();
  readonly tensors = new Counter({
    name: 'smg_mm_tensors_total',
    help: 'Multimodal tensors sent to workers, by runtime and path',
    labelNames: ['runtime', 'path'] as const,
    registers: [this.registry],
  });
  readonly tensorBytes = new Counter({
    name: 'smg_mm_tensor_bytes_total',
    help: 'Bytes of multimodal tensors sent to workers, by runtime and path',
    labelNames: ['runtime', 'path'] as const,
    registers: [this.registry],
  });
  readonly shmWriteFailures = new Counter({
    name: 'smg_mm_shm_write_failures_total',
    help: 'SHM tensor writes that failed and fell back to inline',
    labelNames: ['runtime'] as const,
    registers: [this.registry],
  });
  readonly shmWriteSeconds = new Histogram({
    name: 'smg_mm_shm_write_seconds',
    help: 'Time to create, write and close one SHM tensor file',
    labelNames: ['runtime'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly shmReadSeconds = new Histogram({
    name: 'smg_mm_shm_read_seconds',
    help: 'Time for a worker to open, read and unlink one SHM tensor file',
    labelNames: ['runtime'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  /** A worker that could not read a request's /dev/shm files; the request was sent again inline. */
  readonly shmReadFallbacks = new Counter({
    name: 'smg_mm_shm_read_fallbacks_total',
    help: 'Requests whose worker could not read their /dev/shm files and that were sent again inline',
    labelNames: ['runtime'] as const,
    registers: [this.registry],
  });
  readonly preprocessMemoryBytes = new Gauge({
    name: 'mmtc_preprocess_memory_bytes',
    help: 'Memory preprocessing keeps resident (its arena of shared memories plus the decoders of running images), against preprocess_memory_bytes',
    registers: [this.registry],
  });
  readonly shmOutstandingBytes = new Gauge({
    name: 'smg_mm_shm_outstanding_bytes',
    help: "Bytes of this router's tensor files in /dev/shm not yet read by a worker",
    registers: [this.registry],
  });

  // The gateway's own HTTP and router metrics, same names and labels, so its dashboards work here.
  readonly httpRequests = new Counter({
    name: 'smg_http_requests_total',
    help: 'HTTP requests by method and path',
    labelNames: ['method', 'path'] as const,
    registers: [this.registry],
  });
  readonly httpResponses = new Counter({
    name: 'smg_http_responses_total',
    help: 'HTTP responses by status code and error code',
    labelNames: ['status_code', 'error_code'] as const,
    registers: [this.registry],
  });
  readonly httpDuration = new Histogram({
    name: 'smg_http_request_duration_seconds',
    help: 'HTTP request duration, from arrival to the end of the response',
    labelNames: ['method', 'path'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly routerRequests = new Counter({
    name: 'smg_router_requests_total',
    help: 'Requests routed to a worker',
    labelNames: ROUTER_LABELS,
    registers: [this.registry],
  });
  readonly routerErrors = new Counter({
    name: 'smg_router_request_errors_total',
    help: 'Routed requests that failed, by error type',
    labelNames: [...ROUTER_LABELS, 'error_type'] as const,
    registers: [this.registry],
  });
  readonly routerTtft = new Histogram({
    name: 'smg_router_ttft_seconds',
    help: 'Time from the request arriving to the first generated token',
    labelNames: ROUTER_LABELS,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  /** Counted with routerRequests (routes.ts): requests of the HTTP API. */
  readonly routerDuration = new Histogram({
    name: 'smg_router_request_duration_seconds',
    help: 'Routed request duration, from arrival to the end of the response',
    labelNames: ROUTER_LABELS,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });

  // Per worker call (and leg), from the request log's one subscription (server.ts), as the
  // rates are (docs/router.md, "Metrics"): the API's requests and the console's own.
  readonly workerOutcomes = new Counter({
    name: 'smg_worker_cb_outcomes_total',
    help: 'Worker calls by worker and outcome (success/failure)',
    labelNames: ['worker', 'outcome'] as const,
    registers: [this.registry],
  });
  readonly pdPrefillDuration = new Histogram({
    name: 'smg_pd_prefill_duration_seconds',
    help: 'Prefill-leg RPC duration by backend_type, model, runtime',
    labelNames: ['backend_type', 'model', 'runtime'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly pdTtft = new Histogram({
    name: 'smg_pd_ttft_seconds',
    help: 'End-to-end TTFT under disaggregation (prefill start to first decode token) by backend_type, model, runtime',
    labelNames: ['backend_type', 'model', 'runtime'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly legDuration = new Histogram({
    name: 'mmtc_worker_leg_duration_seconds',
    help: "A worker call's duration (a regular request's one call; an encode, prefill or decode leg), by worker and leg",
    labelNames: ['worker', 'leg'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly legTtft = new Histogram({
    name: 'mmtc_worker_leg_ttft_seconds',
    help: "Time from a worker call's start to the worker's first token, by worker and leg",
    labelNames: ['worker', 'leg'] as const,
    buckets: REQUEST_BUCKETS,
    registers: [this.registry],
  });
  readonly legRequests = new Counter({
    name: 'mmtc_worker_leg_requests_total',
    help: 'Worker calls by worker, leg and outcome (success/failure)',
    labelNames: ['worker', 'leg', 'outcome'] as const,
    registers: [this.registry],
  });

  // Each worker's state, read from the registry at each scrape.
  private workerStates: (() => readonly { url: string; ready: boolean; inFlight: number }[]) | undefined;
  private readonly workerGauge = (name: string, help: string, value: (w: { ready: boolean; inFlight: number }) => number) => {
    const states = () => this.workerStates?.() ?? [];
    return new Gauge({
      name,
      help,
      labelNames: ['worker'] as const,
      registers: [this.registry],
      collect() {
        this.reset();
        for (const w of states()) this.set({ worker: w.url }, value(w));
      },
    });
  };
  readonly workerRequestsActive = this.workerGauge('smg_worker_requests_active', 'Currently running requests per worker', (w) => w.inFlight);
  readonly workerHealth = this.workerGauge('smg_worker_health', 'Worker health status (1=healthy, 0=unhealthy)', (w) => (w.ready ? 1 : 0));

  /** Export these workers' in-flight counts and health at every scrape (`ready`: in rotation, as the gateway's Ready status: a drained worker is 0). */
  watchWorkers(states: () => readonly { url: string; ready: boolean; inFlight: number }[]): void {
    this.workerStates = states;
  }

  /**
   * Count one finished request: its duration, and each worker call's outcome, duration and first
   * token; `runtimeOf` names a worker's runtime for the gateway's PD metrics.
   */
  observeRequest(summary: RequestSummary, defaultModel: string, runtimeOf: (worker: string) => string | undefined): void {
    const model = summary.model ?? defaultModel;
    const legs = legsOf(summary);
    for (let i = 0; i < legs.length; i++) {
      const leg = legs[i]!;
      const failed = legFailed(summary, legs, i);
      const labels = { worker: leg.worker, leg: leg.leg };
      const outcome = failed ? 'failure' : 'success';
      this.workerOutcomes.inc({ worker: leg.worker, outcome });
      this.legRequests.inc({ ...labels, outcome });
      if (Number.isFinite(leg.durationMs)) this.legDuration.observe(labels, leg.durationMs / 1000);
      if (leg.firstTokenMs !== undefined) this.legTtft.observe(labels, leg.firstTokenMs / 1000);
    }
    const prefill = legs.find((l) => l.leg === 'prefill');
    const decode = legs.find((l) => l.leg === 'decode');
    // As the gateway: the PD metrics are success-only, recorded once the decode has gone well.
    if (prefill && !prefill.error && decode && !decode.error) {
      this.pdPrefillDuration.observe({ backend_type: 'pd', model, runtime: runtimeOf(prefill.worker) ?? 'unknown' }, prefill.durationMs / 1000);
      if (decode?.firstTokenMs !== undefined) {
        const ttftMs = decode.startMs + decode.firstTokenMs - prefill.startMs;
        this.pdTtft.observe({ backend_type: 'pd', model, runtime: runtimeOf(decode.worker) ?? 'unknown' }, ttftMs / 1000);
      }
    }
  }

  /** The process guard's count (process-guard.ts): read at each scrape, as the guard is per process. */
  readonly uncaughtErrors = new Counter({
    name: 'mmtc_uncaught_errors_total',
    help: 'Exceptions and promise rejections nothing handled, caught by the process guard and logged (each one a bug; 0 expected)',
    labelNames: ['kind'] as const,
    registers: [this.registry],
    collect() {
      const counts = uncaughtErrorCounts();
      this.reset();
      for (const kind of UNCAUGHT_KINDS) this.inc({ kind }, counts[kind]);
    },
  });

  // The pixel cache (docs/performance.md, "The pixel cache"), read from it at each scrape.
  private pixelCacheStats: (() => PixelCacheStats) | undefined;
  private readonly pixelCacheMetric = <T extends 'counter' | 'gauge'>(kind: T, name: string, help: string, value: (s: PixelCacheStats) => number) => {
    const stats = () => this.pixelCacheStats?.();
    const Kind = kind === 'counter' ? Counter : Gauge;
    return new Kind({
      name,
      help,
      registers: [this.registry],
      collect() {
        const s = stats();
        this.reset();
        if (s) this.inc(value(s));
      },
    });
  };
  readonly pixelCacheHits = this.pixelCacheMetric(
    'counter',
    'smg_mm_pixel_cache_hits_total',
    'Images the pixel cache answered (no preprocessing, no /dev/shm write)',
    (s) => s.hits,
  );
  readonly pixelCacheMisses = this.pixelCacheMetric(
    'counter',
    'smg_mm_pixel_cache_misses_total',
    'Images looked up in the pixel cache and computed',
    (s) => s.misses,
  );
  readonly pixelCacheEvictions = this.pixelCacheMetric(
    'counter',
    'smg_mm_pixel_cache_evictions_total',
    'Pixel cache entries evicted for room (its budget, or the /dev/shm budget a request needed)',
    (s) => s.evictions,
  );
  readonly pixelCacheTampered = this.pixelCacheMetric(
    'counter',
    'smg_mm_pixel_cache_tampered_total',
    'Pixel cache entries dropped because their file changed (a worker wrote into it) or went away',
    (s) => s.tampered,
  );
  readonly pixelCacheBytes = this.pixelCacheMetric(
    'gauge',
    'smg_mm_pixel_cache_bytes',
    "Bytes of the pixel cache's entries (each counted once, however many requests hold a link)",
    (s) => s.heldBytes,
  );
  readonly pixelCacheEntries = this.pixelCacheMetric('gauge', 'smg_mm_pixel_cache_entries', 'Entries in the pixel cache', (s) => s.entries);
  readonly pixelCacheBudget = this.pixelCacheMetric(
    'gauge',
    'smg_mm_pixel_cache_budget_bytes',
    'The pixel cache budget (multimodal_pixel_cache_mb; 0: off)',
    (s) => s.budgetBytes,
  );

  /** Export this cache's numbers at every scrape. */
  watchPixelCache(stats: () => PixelCacheStats): void {
    this.pixelCacheStats = stats;
  }

  countTensor(runtime: WireRuntime, path: TensorPath, nbytes: number): void {
    this.tensors.inc({ runtime, path });
    this.tensorBytes.inc({ runtime, path }, nbytes);
  }

  text(): Promise<string> {
    return this.registry.metrics();
  }
}
