// The router process: the HTTP API (POST /v1/chat/completions, GET /v1/models, GET /health,
// GET /metrics) over the request pipeline, the live config store every request reads once,
// the worker registry (reconciled on every applied revision) with its health loop, the
// preprocessing pool, the /dev/shm writer (probe, then the orphan sweep at start and every
// minute) and, when no worker is configured, an embedded reference worker (refworker/embedded.ts) on
// the bundled model, entered in the store as an ordinary worker whose origin is
// `embedded default`, so a fresh install serves a working multimodal API at once.
//
// Every chat request gets one JSON log line (id, status, latency, worker, tensors by path,
// config revision, error); successful /health, /metrics and /v1/models polls do not.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import v8 from 'node:v8';
import vm from 'node:vm';
import type { TransportEnvironment } from '../config/env-schema.ts';
import type { ConfigOrigins } from '../config/load.ts';
import type { RouterConfig } from '../config/schema.ts';
import { ConfigStore, EMBEDDED_DEFAULT_ORIGIN, embeddedDefaultWorker } from '../config/store.ts';
import { memTrim } from '../multimodal/memory-release.ts';
import { loadModelDirectory } from '../multimodal/model-dir.ts';
import { PreprocessPool } from '../multimodal/pool.ts';
import { TensorEventBus } from '../telemetry/events.ts';
import { routerLabels, TransportMetrics } from '../telemetry/metrics.ts';
import { readNamespaceToken, SHM_DIR, type NamespaceTokenReading } from '../transport/namespace.ts';
import { transportForWorker } from '../transport/resolve.ts';
import { shmFreeBytes, ShmWriter, type ShmProbeResult } from '../transport/shm-writer.ts';
import { DECISION_REASONS } from '../transport/vocabulary.ts';
import { startEmbeddedWorker, type EmbeddedWorker } from '../refworker/embedded.ts';
import { WorkerRegistry } from '../workers/registry.ts';
import { ContextLengthError } from '../multimodal/prompt.ts';
import { parseBody } from './body-json.ts';
import { answerThenClose, requestTarget } from './http-request.ts';
import { ApiError } from './openai.ts';
import { contextLengthApiError, handleChatCompletion, newRequestRecord, REVISION_HEADER, RequestTiming, type RequestRecord, type RouterContext } from './pipeline.ts';
import { sendError } from './responder.ts';

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

export type StartRouterOptions = (
  | { store: ConfigStore }
  | { config: RouterConfig; env: TransportEnvironment; origins?: ConfigOrigins; file?: string }
) & {
  processEnv?: Readonly<Record<string, string | undefined>>;
  /** Where to write start-up lines; defaults to stdout. */
  log?: (line: string) => void;
  /** Directory for SHM files (tests use a private one); defaults to /dev/shm. */
  shmDir?: string;
}

/** A body the router will not read further: answered, then the connection is closed. */
class BodyRefused extends ApiError {}

function mib(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

/**
 * The request body as JSON: at most max_body_bytes (413 before reading a body whose length
 * says so, or as soon as it passes the limit), within body_timeout_secs (400 naming the
 * timeout: a client that trickles its body cannot hold the router's memory and a socket).
 */
function readBody(req: IncomingMessage, config: RouterConfig): Promise<Buffer> {
  const limit = config.max_body_bytes;
  return new Promise((resolve, reject) => {
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (Number.isFinite(declared) && declared > limit) {
      req.pause();
      return reject(new BodyRefused(413, `request body is ${mib(declared)}, above the ${mib(limit)} limit (max_body_bytes)`));
    }
    // Copied once into a buffer of the declared size when there is one (no concat at the end).
    const whole = Number.isFinite(declared) && declared > 0 ? Buffer.allocUnsafe(declared) : undefined;
    const chunks: Buffer[] = [];
    let size = 0;
    const timer = setTimeout(() => {
      stop();
      reject(new BodyRefused(400, `the request body did not arrive within ${config.body_timeout_secs} s (body_timeout_secs)`));
    }, config.body_timeout_secs * 1000);
    const stop = () => {
      clearTimeout(timer);
      req.off('data', onData);
      req.pause();
    };
    const onData = (c: Buffer) => {
      size += c.length;
      if (size > limit) {
        stop();
        reject(new BodyRefused(413, `request body is above the ${mib(limit)} limit (max_body_bytes)`));
        return;
      }
      if (whole && size <= whole.byteLength) c.copy(whole, size - c.length);
      else chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => {
      clearTimeout(timer);
      resolve(whole && chunks.length === 0 ? whole.subarray(0, size) : Buffer.concat(whole ? [whole.subarray(0, Math.min(size, whole.byteLength)), ...chunks] : chunks));
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
}

export async function startRouter(options: StartRouterOptions): Promise<RunningRouter> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const processEnv = options.processEnv ?? process.env;
  const store =
    'store' in options
      ? options.store
      : new ConfigStore({ config: options.config, env: options.env, ...(options.origins ? { origins: options.origins } : {}), ...(options.file !== undefined ? { file: options.file } : {}) });
  const model = await loadModelDirectory(store.current().config.model_path);
  let embedded: EmbeddedWorker | undefined;
  if (store.current().config.workers.length === 0) {
    embedded = await startEmbeddedWorker(model.path, processEnv);
    const current = store.current();
    store.apply({ ...current.config, workers: [embeddedDefaultWorker(embedded.url)] }, current.revision, { origin: EMBEDDED_DEFAULT_ORIGIN, client: 'router' });
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
    log,
  });
  const probe = writer.probe();
  if (probe.writable) writer.start();
  const metrics = new TransportMetrics();
  const events = new TensorEventBus();
  const registry = new WorkerRegistry(config.workers, { healthIntervalMs: config.health_check_interval_secs * 1000 });
  await registry.discoverAll();
  registry.start();
  let reconciling: Promise<void> = Promise.resolve();
  const unsubscribe = store.subscribe((next) => {
    reconciling = registry.reconcile(next.config.workers);
    context.pool.setMemoryBudget(next.config.preprocess_memory_bytes);
    registry.setHealthInterval(next.config.health_check_interval_secs * 1000);
  });
  const ns = readNamespaceToken();
  const context: RouterContext = {
    store,
    processEnv,
    model,
    modelName: path.basename(model.path),
    pool: new PreprocessPool(undefined, { memoryBytes: config.preprocess_memory_bytes, onIdle: collectGarbageWhenIdle }),
    writer,
    host: { shmWritable: probe.writable, routerToken: ns.token },
    metrics,
    events,
    registry,
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
    const { decision, resolved } = transportForWorker({ spec: w.spec, config: snapshot.config, env: snapshot.env, labels: w.labels, reachable: w.healthy, host: context.host });
    const mode = resolved.multimodal_tensor_transport;
    const who = embedded && w.spec.url === embedded.url ? ', embedded reference worker' : '';
    log(`worker ${w.spec.url} (${w.runtime ?? 'runtime unknown'}${who}): ${w.healthy ? 'healthy' : `DOWN: ${w.lastError}`}`);
    log(`  transport ${mode.value} (from ${mode.source}), shm_min_bytes ${resolved.multimodal_shm_min_bytes.value}: ${DECISION_REASONS[decision.reason]}`);
  }

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
      writer.close();
      registry.close();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await context.pool.close();
      await embedded?.stop();
    },
  };
}

/**
 * After a burst, once preprocessing has been idle a while: one full collection, so what the
 * burst left (request bodies, image bytes, dropped pooled memories) goes back to the system
 * rather than waiting for allocation pressure that an idle router never creates, then the
 * heap malloc kept is trimmed. It costs tens of milliseconds, and only runs when nothing has
 * been preprocessed for IDLE_TRIM_MS.
 * (The function comes from a fresh context, as in the pool threads: Node starts without
 * --expose-gc.)
 */
let fullCollection: ((options: { type: 'major' }) => void) | undefined;
function collectGarbageWhenIdle(): void {
  if (!fullCollection) {
    v8.setFlagsFromString('--expose-gc');
    fullCollection = vm.runInNewContext('gc') as (options: { type: 'major' }) => void;
  }
  fullCollection({ type: 'major' });
  // What the collection freed stays in malloc's heap (mmtc's malloc settings keep it for
  // reuse while busy): idle now, it goes back to the kernel. V8 frees the memory of dead
  // ArrayBuffers on a background thread after the collection, so the heap is trimmed again
  // once that has happened.
  const trim = memTrim();
  if (!trim) return;
  trim.trimHeap();
  setTimeout(() => trim.trimHeap(), 2000).unref();
}

/** The value of a parsed body, leaving the holder without it, so the request alone decides how long it lives. */
function takeValue(parsed: { ok: true; value: unknown }): unknown {
  const { value } = parsed;
  (parsed as { value: unknown }).value = undefined;
  return value;
}

/** One JSON line per request, for log shippers: what happened, how long, where, on which revision. */
function requestLogLine(req: IncomingMessage, pathname: string, status: number, latencyMs: number, record: RequestRecord, error?: string): string {
  return JSON.stringify({
    time: new Date().toISOString(),
    event: 'request',
    ...(record.id ? { id: record.id } : {}),
    method: req.method,
    path: pathname,
    status,
    latency_ms: Math.round(latencyMs * 100) / 100,
    ...(record.worker ? { worker: record.worker } : {}),
    tensors: record.paths,
    ...(record.revision !== undefined ? { revision: record.revision } : {}),
    ...(record.shmFallback ? { shm_read_failed: record.shmFallback } : {}),
    ...(record.prewriteFailed ? { shm_prewrite_failed: record.prewriteFailed } : {}),
    ...(error ? { error } : {}),
  });
}

const QUIET_POLLS = new Set(['/health', '/metrics', '/v1/models']);
/** Paths metrics are labelled with; anything else is `other`, so a scanner cannot blow up the label set. */
const ROUTES = new Set(['/v1/chat/completions', ...QUIET_POLLS]);

async function route(ctx: RouterContext, req: IncomingMessage, res: ServerResponse, log: (line: string) => void): Promise<void> {
  const target = requestTarget(req.url);
  const url = { pathname: target.ok ? target.pathname : '(not a path)' };
  const timing = new RequestTiming();
  const record = newRequestRecord();
  let error: string | undefined;
  try {
    if (!target.ok) {
      // Answered without reading what follows: the connection is not kept for another request.
      throw new BodyRefused(400, target.error);
    } else if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
      const context = ctx.model.maxContextLength;
      const parsed = await parseBody(await readBody(req, ctx.store.current().config), context * ctx.model.maxTokenBytes);
      if (!parsed.ok) {
        if ('textChars' in parsed) throw contextLengthApiError(new ContextLengthError(Math.ceil(parsed.textChars / ctx.model.maxTokenBytes), context, true));
        throw new ApiError(400, `request body is not valid JSON: ${parsed.error}`);
      }
      timing.mark('body');
      // The parsed body is handed over: nothing here keeps it (its image URLs are megabytes).
      await handleChatCompletion(ctx, takeValue(parsed), res, timing, record);
    } else if (req.method === 'GET' && url.pathname === '/v1/models') {
      sendJson(res, 200, { object: 'list', data: [{ id: ctx.modelName, object: 'model', created: 0, owned_by: 'mmtc' }] });
    } else if (req.method === 'GET' && url.pathname === '/health') {
      const workers = ctx.registry.list().map((w) => ({ url: w.spec.url, runtime: w.runtime ?? null, healthy: w.healthy, in_flight: w.inFlight, ...(w.lastError ? { error: w.lastError } : {}) }));
      const healthy = workers.some((w) => w.healthy);
      sendJson(res, healthy ? 200 : 503, { status: healthy ? 'ok' : 'no healthy worker', revision: ctx.store.current().revision, workers });
    } else if (req.method === 'GET' && url.pathname === '/metrics') {
      ctx.metrics.preprocessMemoryBytes.set(ctx.pool.memory().resident);
      ctx.metrics.shmOutstandingBytes.set(ctx.writer.outstanding);
      const text = await ctx.metrics.text();
      res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType });
      res.end(text);
    } else {
      throw new ApiError(404, `no route for ${req.method} ${url.pathname}`);
    }
  } catch (err) {
    const apiError = err instanceof ApiError ? err : new ApiError(500, `internal error: ${(err as Error).message}`);
    error = apiError.message;
    record.errorCode = apiError.code ?? apiError.type;
    const headers: Record<string, string> = record.revision !== undefined ? { [REVISION_HEADER]: String(record.revision) } : {};
    // The rest of a refused body is not read: answer, then close the connection.
    if (err instanceof BodyRefused) answerThenClose(req, res, apiError.status, apiError.body(), headers);
    else sendError(res, apiError, headers);
  }
  // 499 (nginx's word for it): the client went away before its response was complete.
  const status = !res.writableFinished && res.destroyed ? 499 : res.statusCode;
  const pathLabel = ROUTES.has(url.pathname) ? url.pathname : 'other';
  const m = ctx.metrics;
  m.httpRequests.inc({ method: req.method ?? 'GET', path: pathLabel });
  m.httpResponses.inc({ status_code: String(status), error_code: record.errorCode ?? '' });
  m.httpDuration.observe({ method: req.method ?? 'GET', path: pathLabel }, timing.elapsedMs() / 1000);
  if (record.worker) {
    const labels = routerLabels(record.model ?? ctx.modelName);
    m.routerRequests.inc(labels);
    if (status >= 400) m.routerErrors.inc({ ...labels, error_type: record.errorCode ?? (status === 499 ? 'client_disconnected' : String(status)) });
  }
  if (status >= 400 || !QUIET_POLLS.has(url.pathname)) log(requestLogLine(req, url.pathname, status, timing.elapsedMs(), record, error));
}
