// The router process: the HTTP API (POST /v1/chat/completions, GET /v1/models, GET /health,
// GET /metrics) over the request pipeline, the live config store every request reads once,
// the worker registry (reconciled on every applied revision) with its health loop, the
// preprocessing pool, the /dev/shm writer (probe, then the orphan sweep at start and every
// minute) and, when no worker is configured, an embedded reference worker (refworker/embedded.ts) on
// the bundled model, entered in the store as an ordinary worker whose origin is
// `embedded default`, so a fresh install serves a working multimodal API at once.
// The HTTP routes themselves are routes.ts.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { TransportEnvironment } from '../config/env-schema.ts';
import type { ConfigOrigins } from '../config/origins.ts';
import type { RouterConfig } from '../config/schema.ts';
import { ConfigStore, type ConfigSnapshot } from '../config/store.ts';
import { memTrim } from '../multimodal/memory-release.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { PreprocessPool } from '../multimodal/pool.ts';
import { TensorEventBus } from '../telemetry/events.ts';
import { RequestLog } from '../telemetry/requests.ts';
import { RequestRates } from '../telemetry/rates.ts';
import { RecentOutcomes } from './critical.ts';
import { TransportMetrics } from '../telemetry/metrics.ts';
import { readNamespaceToken, SHM_DIR, type NamespaceTokenReading } from '../transport/namespace.ts';
import { resolveWorkerTransport, transportForWorker } from '../transport/resolve.ts';
import { PixelCache } from '../transport/pixel-cache.ts';
import { shmFreeBytes, ShmWriter, type ShmProbeResult } from '../transport/shm-writer.ts';
import { pixelCacheBudget } from '../config/pixel-cache-setting.ts';
import { orphanSweepIntervalMs } from '../config/sweep-interval-setting.ts';
import { DECISION_REASONS } from '../transport/vocabulary.ts';
import { embeddedWorkerSpec, startEmbeddedWorker, type EmbeddedWorker } from '../refworker/embedded.ts';
import { inRotation, outOfRotationReason, WorkerRegistry } from '../workers/registry.ts';
import { capabilitiesOf, laneFacts } from '../engines/table.ts';
import type { RouterContext } from './context.ts';
import { ApiError } from './openai.ts';
import { route, sendJson } from './routes.ts';

export interface RunningRouter {
  url: string;
  context: RouterContext;
  store: ConfigStore;
  /** The router's /dev/shm namespace token as read at start, with why it is missing. */
  namespace: NamespaceTokenReading;
  /** The start-up writability probe of the SHM directory. */
  shmProbe: ShmProbeResult;
  embeddedWorker?: { url: string; pid: number | undefined };
  /** Settles when the workers added by the latest applied revision have been discovered. */
  reconciled(): Promise<void>;
  close(): Promise<void>;
}

export type StartRouterOptions = ({ store: ConfigStore } | { config: RouterConfig; env: TransportEnvironment; origins?: ConfigOrigins; file?: string }) & {
  processEnv?: Readonly<Record<string, string | undefined>>;
  /** Where to write start-up lines and events (requests, workers taken out of rotation and back); defaults to stdout. */
  log?: (line: string) => void;
  /** Directory for SHM files (tests use a private one); defaults to /dev/shm. */
  shmDir?: string;
};

export async function startRouter(options: StartRouterOptions): Promise<RunningRouter> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const processEnv = options.processEnv ?? process.env;
  const store =
    'store' in options
      ? options.store
      : new ConfigStore({
          config: options.config,
          env: options.env,
          ...(options.origins ? { origins: options.origins } : {}),
          ...(options.file !== undefined ? { file: options.file } : {}),
        });
  // A malformed SMG_MM_PIXEL_CACHE_MB stops the start here, naming it, before anything runs.
  pixelCacheBudget(store.current().config, processEnv);
  const sweepIntervalMs = orphanSweepIntervalMs(processEnv);
  const model = await loadModelDirectory(store.current().config.model_path);
  let embedded: EmbeddedWorker | undefined;
  if (store.current().config.workers.length === 0) {
    embedded = await startEmbeddedWorker(model.path, processEnv);
    store.startEmbeddedWorker(embeddedWorkerSpec(embedded.url));
  }
  const config = store.current().config;
  // A live router keeps a tensor file at most for its request timeout: older ones of routers
  // it cannot see are what the sweep may prove to be orphans (docs/transport.md, "Orphan sweep").
  const shmDir = options.shmDir ?? SHM_DIR;
  // Unless the config says otherwise, our files may take half of what /dev/shm had free at start
  // (Docker's default /dev/shm is 64 MB): beyond that tensors go inline (shm_budget_exceeded).
  const shmSpace = await shmFreeBytes(shmDir);
  const defaultOutstanding = shmSpace ? Math.floor(shmSpace.free / 2) : undefined;
  const writer = new ShmWriter({
    dir: shmDir,
    maxFileAgeMs: () => store.current().config.request_timeout_secs * 1000,
    maxOutstandingBytes: () => store.current().config.multimodal_shm_max_outstanding_bytes ?? defaultOutstanding,
    sweepIntervalMs,
    log,
  });
  const probe = writer.probe();
  if (probe.writable) writer.start();
  // The pixel cache keeps its entries in /dev/shm: none without a writable one.
  const cacheBudget = () => (probe.writable ? pixelCacheBudget(store.current().config, processEnv).bytes : 0);
  const pixelCache = new PixelCache({ dir: shmDir, writer, budgetBytes: cacheBudget() });
  // A process that exits without stopping the router (process.exit: its parent died, a fatal
  // error) removes the entries still: they are of no use to anyone after it.
  const dropCacheAtExit = () => pixelCache.close();
  process.once('exit', dropCacheAtExit);
  const metrics = new TransportMetrics();
  metrics.watchPixelCache(() => pixelCache.stats());
  const events = new TensorEventBus();
  const registry = new WorkerRegistry(config.workers, { healthIntervalMs: config.health_check_interval_secs * 1000 });
  await registry.discoverAll();
  registry.start();
  let reconciling: Promise<void> = Promise.resolve();
  const unsubscribe = store.subscribe((next, previous) => {
    reconciling = registry.reconcile(next.config.workers);
    // A broken lane was judged under the worker's mode: a revision that changes that mode (the
    // advice "use mode auto") judges it afresh, as the new mode decides (auto checks the token first).
    for (const w of registry.list()) if (w.shmLane && modeOf(previous, w.spec.url) !== modeOf(next, w.spec.url)) registry.resetShmLane(w);
    context.pool.setMemoryBudget(next.config.preprocess_memory_bytes);
    pixelCache.setBudget(cacheBudget());
    registry.setHealthInterval(next.config.health_check_interval_secs * 1000);
  });
  /** The transport mode a revision resolves for the worker at `url` (its override, the router's setting, the environment, the default). */
  function modeOf(snapshot: ConfigSnapshot, url: string): string {
    const worker = snapshot.config.workers.find((w) => w.url === url);
    return resolveWorkerTransport({ ...(worker ? { worker } : {}), workers: snapshot.config.workers, router: snapshot.config, env: snapshot.env })
      .multimodal_tensor_transport.value;
  }
  metrics.watchWorkers(() => registry.list().map((w) => ({ url: w.spec.url, ready: inRotation(w), inFlight: w.inFlight })));
  // One subscription feeds the rates and the per-worker metrics, so the two never disagree.
  const requests = new RequestLog();
  const rates = new RequestRates();
  requests.subscribe((summary) => {
    rates.add(summary);
    metrics.observeRequest(summary, context.modelName, (url) => registry.get(url)?.runtime);
  });
  const ns = readNamespaceToken();
  const context: RouterContext = {
    store,
    processEnv,
    model,
    modelName: path.basename(model.path),
    pool: new PreprocessPool(undefined, { memoryBytes: config.preprocess_memory_bytes, onIdle: collectGarbageWhenIdle }),
    writer,
    pixelCache,
    host: { shmWritable: probe.writable, routerToken: ns.token },
    metrics,
    events,
    registry,
    requests,
    rates,
    outcomes: new RecentOutcomes(requests),
  };

  const server: Server = createServer((req, res) => {
    route(context, req, res, log).catch((err: unknown) => {
      // route() answers every error it meets; this is for a bug in its own bookkeeping.
      log(JSON.stringify({ time: new Date().toISOString(), event: 'request_failed', error: String((err as Error)?.stack ?? err) }));
      if (!res.headersSent) sendJson(res, 500, new ApiError(500, 'internal error').body());
      else res.destroy();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(config.port, config.host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  const url = `http://${host}:${address.port}`;

  log(`mmtc router listening on ${url} (OpenAI API: ${url}/v1/chat/completions)`);
  log(`model ${model.path} (${model.modelType})`);
  if (!probe.writable) log(`/dev/shm: ${probe.error}; shm and auto stay inline`);
  const snapshot = store.current();
  for (const w of registry.list()) {
    const { decision, resolved } = transportForWorker({
      spec: w.spec,
      config: snapshot.config,
      env: snapshot.env,
      labels: w.labels,
      reachable: w.healthy,
      host: context.host,
      runtime: laneFacts(w.runtime),
    });
    const mode = resolved.multimodal_tensor_transport;
    const who = `${w.spec.worker_type !== 'regular' ? `, ${w.spec.worker_type} worker` : ''}${embedded && w.spec.url === embedded.url ? ', embedded reference worker' : ''}`;
    log(`worker ${w.spec.url} (${w.runtime ?? 'runtime unknown'}${who}): ${w.healthy ? 'healthy' : `DOWN: ${w.lastError}`}`);
    log(`  transport ${mode.value} (from ${mode.source}), shm_min_bytes ${resolved.multimodal_shm_min_bytes.value}: ${DECISION_REASONS[decision.reason]}`);
    const dtype = w.runtime === undefined ? undefined : capabilitiesOf(w.runtime).encoderDtype('image', processEnv, w.labels);
    if (dtype?.warning) log(`  warning: ${dtype.warning}`);
  }

  // From here on each change of a worker's rotation is an event of the log, beside the
  // requests': when a worker was taken out and why (a HealthCheck unanswered, a request that
  // could not reach it, the operator's drain), and when it came back (docs/router.md, "Workers").
  const rotation = new Map(registry.list().map((w) => [w.spec.url, inRotation(w)]));
  const unwatchRotation = registry.watch((w) => {
    const now = inRotation(w);
    if (rotation.get(w.spec.url) === now) return;
    rotation.set(w.spec.url, now);
    const reason = outOfRotationReason(w);
    log(
      JSON.stringify({
        time: new Date().toISOString(),
        event: now ? 'worker_in_rotation' : 'worker_out_of_rotation',
        worker: w.spec.url,
        worker_type: w.spec.worker_type,
        ...(reason === undefined ? {} : { reason }),
      }),
    );
  });

  let closed = false;
  return {
    url,
    context,
    store,
    namespace: ns,
    shmProbe: probe,
    ...(embedded ? { embeddedWorker: { url: embedded.url, pid: embedded.pid } } : {}),
    reconciled: () => reconciling,
    close: async () => {
      if (closed) return;
      closed = true;
      unsubscribe();
      unwatchRotation();
      writer.close();
      registry.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await context.pool.close();
      pixelCache.close();
      process.off('exit', dropCacheAtExit);
      await embedded?.stop();
    },
  };
}

/**
 * After a burst, once preprocessing has been idle a while: the collection a low-memory
 * notification runs (full collections until nothing more is freed), so what the burst left
 * (request bodies, image bytes, serialized messages) goes back to the system rather than
 * waiting for allocation pressure that an idle router never creates, then the heap malloc
 * kept is trimmed. It holds the event loop a while, so it only runs when no chat request has
 * been prepared for IDLE_TRIM_MS (a pixel-cache hit counts: PreprocessPool.stillBusy). An
 * ordinary full collection is not enough: after a burst it leaves gigabytes of dead buffers
 * resident (both measured: docs/performance.md, "Memory after a burst"); without the native helper (or where it does
 * not find V8's symbols) that one is what runs, and without the helper the heap is not trimmed.
 * (gc comes from a fresh context, as in the pool threads: Node starts without --expose-gc.)
 */
let fullCollection: ((options: { type: 'major' }) => void) | undefined;
function collectGarbageWhenIdle(): void {
  const trim = memTrim();
  if (!trim?.collectAllGarbage?.()) {
    fullCollection ??= (v8.setFlagsFromString('--expose-gc'), vm.runInNewContext('gc') as (options: { type: 'major' }) => void);
    fullCollection({ type: 'major' });
  }
  if (!trim) return;
  // What the collection freed stays in malloc's heap (mmtc's malloc settings keep it for reuse
  // while busy): idle now, it goes back to the kernel. V8 frees the memory of dead ArrayBuffers
  // on a background thread after the collection, so the heap is trimmed again once that has
  // happened.
  trim.trimHeap();
  setTimeout(() => trim.trimHeap(), 2000).unref();
}
