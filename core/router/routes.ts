// The router's HTTP front: one request in, its answer, its metrics and its log line out.
// POST /v1/chat/completions reads a bounded body (max_body_bytes, body_timeout_secs) and hands
// it to the request path (chat.ts); GET /v1/models, /health and /metrics answer from the
// context. Every chat request gets one JSON log line (id, status, latency, worker, tensors by
// path, config revision, error); successful /health, /metrics and /v1/models polls do not.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { RouterConfig } from '../config/schema.ts';
import { ContextLengthError } from '../multimodal/prompt.ts';
import { routerLabels } from '../telemetry/metrics.ts';
import { parseBody } from './body-json.ts';
import { handleChatCompletion } from './chat.ts';
import { criticalStates, healthStatus } from './critical.ts';
import { keepRequest, newRequestRecord, REVISION_HEADER, type RequestRecord, type RouterContext } from './context.ts';
import { contextLengthApiError, toApiError } from './errors.ts';
import { answerThenClose, requestTarget } from './http-request.ts';
import { ApiError } from './openai.ts';
import { sendError } from './responder.ts';
import { RequestTiming } from './timing.ts';
import { formatBytes } from '../util/bytes.ts';

/** A body the router will not read further: answered, then the connection is closed. */
class BodyRefused extends ApiError {}

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
      return reject(new BodyRefused(413, `request body is ${formatBytes(declared)}, above the ${formatBytes(limit)} limit (max_body_bytes)`));
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
        reject(new BodyRefused(413, `request body is above the ${formatBytes(limit)} limit (max_body_bytes)`));
        return;
      }
      if (whole && size <= whole.byteLength) c.copy(whole, size - c.length);
      else chunks.push(c);
    };
    req.on('data', onData);
    req.on('end', () => {
      clearTimeout(timer);
      resolve(
        whole && chunks.length === 0
          ? whole.subarray(0, size)
          : Buffer.concat(whole ? [whole.subarray(0, Math.min(size, whole.byteLength)), ...chunks] : chunks),
      );
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(body));
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
    ...(record.legFailed ? { leg_failed: record.legFailed } : {}),
    ...(record.sampling ? { sampling: record.sampling } : {}),
    ...(record.kvHandoff ? { kv_handoff: record.kvHandoff } : {}),
    ...(error ? { error } : {}),
  });
}

const QUIET_POLLS = new Set(['/health', '/metrics', '/v1/models']);
/** Paths metrics are labelled with; anything else is `other`, so a scanner cannot blow up the label set. */
const ROUTES = new Set(['/v1/chat/completions', ...QUIET_POLLS]);

export async function route(ctx: RouterContext, req: IncomingMessage, res: ServerResponse, log: (line: string) => void): Promise<void> {
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
      const workers = ctx.registry.list().map((w) => ({
        url: w.spec.url,
        runtime: w.runtime ?? null,
        healthy: w.healthy,
        in_flight: w.inFlight,
        // Drained by the operator: healthy or not, it takes no new request, so it is no serving capacity.
        ...(w.drainedAt !== undefined ? { drained: true } : {}),
        ...(w.lastError ? { error: w.lastError } : {}),
      }));
      const critical = criticalStates(ctx);
      const { status, httpStatus } = healthStatus(critical);
      sendJson(res, httpStatus, { status, revision: ctx.store.current().revision, critical, workers });
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
    const apiError = toApiError(err);
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
  if (pathLabel === '/v1/chat/completions') keepRequest(ctx, record, status, error, timing);
  if (record.worker) {
    const labels = routerLabels(record.model ?? ctx.modelName);
    m.routerRequests.inc(labels);
    m.routerDuration.observe(labels, timing.elapsedMs() / 1000);
    if (status >= 400) m.routerErrors.inc({ ...labels, error_type: record.errorCode ?? (status === 499 ? 'client_disconnected' : String(status)) });
  }
  if (status >= 400 || !QUIET_POLLS.has(url.pathname)) log(requestLogLine(req, url.pathname, status, timing.elapsedMs(), record, error));
}
