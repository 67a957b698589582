// One chat completion, end to end:
//   validate -> fetch images -> pick a worker -> preprocess (worker threads, in the worker's
//   wire dtype) -> chat template + tokenize + expand placeholders -> resolve the worker's
//   transport -> place every tensor inline or in /dev/shm -> gRPC Generate stream ->
//   detokenize -> JSON or SSE.
// Failure rules: bad input is 400/413 naming the field; no healthy worker 503; a worker
// that fails or disconnects 502; a timeout 504. Any failure after a /dev/shm write, and a
// client that goes away, unlinks every file of the request; a client that goes away also
// cancels the call and sends Abort.
import { randomUUID } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import * as grpc from '@grpc/grpc-js';
import type { TransportEnvironment } from '../config/env.ts';
import type { RouterConfig } from '../config/schema.ts';
import { buildTokenSpeedRequest, engineEvent } from '../engines/tokenspeed.ts';
import type { EngineEvent, EngineRequest, PreparedImage } from '../engines/types.ts';
import { buildVllmRequest } from '../engines/vllm.ts';
import type * as ts from '../gen/tokenspeed/grpc/scheduler.ts';
import type * as vllm from '../gen/vllm/grpc/engine.ts';
import { ImageDecodeError } from '../multimodal/decode.ts';
import { ImageInputError, loadImageBytes } from '../multimodal/fetch.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { PreprocessPool } from '../multimodal/pool.ts';
import { buildPrompt, PromptError, type BuiltPrompt, type ChatMessage } from '../multimodal/prompt.ts';
import { ImageSizeError } from '../multimodal/qwen-vl.ts';
import type { TensorEventBus } from '../telemetry/events.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import { decideTransport, type TransportDecision } from '../transport/decision.ts';
import { resolveEncoderDtype } from '../transport/dtype.ts';
import { resolveWorkerTransport, type ResolvedWorkerTransport } from '../transport/resolve.ts';
import { ShmRequestScope, type ShmWriter } from '../transport/shm-writer.ts';
import type { WorkerRegistry, WorkerState } from '../workers/registry.ts';
import { ApiError, chunkBody, completionBody, openAiFinishReason, parseChatRequest, type ChatCompletionRequest } from './openai.ts';

export interface RouterContext {
  config: () => RouterConfig;
  env: TransportEnvironment;
  processEnv: Readonly<Record<string, string | undefined>>;
  model: ModelDirectory;
  modelName: string;
  pool: PreprocessPool;
  writer: ShmWriter;
  shmWritable: boolean;
  routerToken: string | undefined;
  metrics: TransportMetrics;
  events: TensorEventBus;
  registry: WorkerRegistry;
  maxImageBytes: number;
}

interface ImageRef {
  url: string;
  param: string;
}

function imagesOf(req: ChatCompletionRequest): ImageRef[] {
  const out: ImageRef[] = [];
  req.messages.forEach((m, i) => {
    if (Array.isArray(m.content)) {
      m.content.forEach((p, j) => {
        if (p.type === 'image_url') out.push({ url: p.image_url.url, param: `messages[${i}].content[${j}].image_url.url` });
      });
    }
  });
  return out;
}

function asApiError(err: unknown, images: ImageRef[]): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ImageInputError) return new ApiError(err.status, err.message, 'invalid_request_error', images[err.index]?.param ?? null);
  if (err instanceof PromptError) return new ApiError(400, err.message);
  return new ApiError(500, `internal error: ${(err as Error).message}`);
}

/** Which transport this request uses for this worker, and why. */
export function transportFor(ctx: RouterContext, worker: WorkerState): { decision: TransportDecision; minBytes: number; resolved: ResolvedWorkerTransport } {
  const config = ctx.config();
  const resolved = resolveWorkerTransport({ worker: worker.spec, workers: config.workers, router: config, env: ctx.env });
  const mode = resolved.multimodal_tensor_transport.value;
  const decision = decideTransport({
    mode,
    shmWritable: ctx.shmWritable,
    routerToken: ctx.routerToken,
    workers: [{ url: worker.spec.url, worker_type: worker.spec.worker_type, shm_namespace_id: worker.labels.shm_namespace_id, reachable: worker.healthy }],
  });
  return { decision, minBytes: resolved.multimodal_shm_min_bytes.value, resolved };
}

function callGenerate(worker: WorkerState, request: ts.GenerateRequest | vllm.GenerateRequest, deadline: number): grpc.ClientReadableStream<ts.GenerateResponse | vllm.GenerateResponse> {
  const c = worker.client!;
  const options = { deadline };
  return c.runtime === 'tokenspeed'
    ? c.client.generate(request as ts.GenerateRequest, new grpc.Metadata(), options)
    : c.client.generate(request as vllm.GenerateRequest, new grpc.Metadata(), options);
}

function sendAbort(worker: WorkerState, requestId: string): void {
  const c = worker.client;
  if (!c) return;
  const done = () => {};
  const options = { deadline: Date.now() + 2000 };
  if (c.runtime === 'tokenspeed') c.client.abort({ requestId, reason: 'client disconnected' }, new grpc.Metadata(), options, done);
  else c.client.abort({ requestIds: [requestId] }, new grpc.Metadata(), options, done);
}

function grpcFailure(err: grpc.ServiceError, worker: WorkerState, timeoutSecs: number): ApiError {
  if (err.code === grpc.status.DEADLINE_EXCEEDED) return new ApiError(504, `worker ${worker.spec.url} did not finish within ${timeoutSecs} s`, 'timeout');
  const broken = [grpc.status.UNAVAILABLE, grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.CANCELLED, grpc.status.ABORTED];
  if (broken.includes(err.code)) {
    return new ApiError(502, `worker ${worker.spec.url} failed: ${grpc.status[err.code]}: ${err.details || err.message}`, 'server_error');
  }
  return new ApiError(502, `worker ${worker.spec.url} rejected the request: ${grpc.status[err.code] ?? err.code}: ${err.details || err.message}`, 'server_error');
}

/**
 * Where a request's time went, sent as a Server-Timing header on JSON responses: body
 * (reading and parsing the HTTP body), fetch (image bytes), preprocess (decode + resize +
 * patchify, in the pool), prompt (template + tokenize, when not already built from the image
 * headers meanwhile), place (engine request + inline copies / SHM writes), worker (gRPC call
 * to its last message), total. Router overhead = total - body - preprocess - place - worker.
 */
export class RequestTiming {
  private readonly start = performance.now();
  private last = this.start;
  private readonly spans: Array<[string, number]> = [];

  mark(name: string): void {
    const now = performance.now();
    this.spans.push([name, now - this.last]);
    this.last = now;
  }

  header(): string {
    const total = performance.now() - this.start;
    return [...this.spans, ['total', total] as [string, number]].map(([n, d]) => `${n};dur=${d.toFixed(2)}`).join(', ');
  }
}

/** Text decoded so far; holds back a trailing partial UTF-8 sequence until it completes. */
class IncrementalDetokenizer {
  private ids: number[] = [];
  private emitted = '';
  constructor(private readonly model: ModelDirectory) {}

  collect(tokenIds: readonly number[]): void {
    this.ids.push(...tokenIds);
  }

  push(tokenIds: readonly number[]): string {
    this.ids.push(...tokenIds);
    const text = this.text();
    const safe = text.endsWith('\uFFFD') ? text.slice(0, -1) : text;
    if (!safe.startsWith(this.emitted)) return '';
    const delta = safe.slice(this.emitted.length);
    this.emitted = safe;
    return delta;
  }

  flush(): string {
    const text = this.text();
    const delta = text.startsWith(this.emitted) ? text.slice(this.emitted.length) : '';
    this.emitted = text;
    return delta;
  }

  get count(): number {
    return this.ids.length;
  }

  /** The whole text of every token so far. */
  text(): string {
    // The tokenizer refuses an empty list; an empty completion is an empty string.
    return this.ids.length ? this.model.tokenizer.decode(this.ids, { skip_special_tokens: true }) : '';
  }
}

/** `timing` starts when the request arrives, and has its body span marked. */
export async function handleChatCompletion(ctx: RouterContext, body: unknown, res: ServerResponse, timing = new RequestTiming()): Promise<void> {
  const req = parseChatRequest(body);
  const images = imagesOf(req);
  const requestId = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  const created = Math.floor(Date.now() / 1000);
  const modelName = req.model ?? ctx.modelName;
  const config = ctx.config();
  let clientGone = false;
  res.on('close', () => {
    if (!res.writableFinished) clientGone = true;
  });

  const bytes = await Promise.all(images.map((im, i) => loadImageBytes(im.url, i, { maxBytes: ctx.maxImageBytes }))).catch((err: unknown) => {
    throw asApiError(err, images);
  });

  timing.mark('fetch');
  const worker = ctx.registry.select(config.policy);
  if (!worker) {
    const reasons = ctx.registry.list().map((w) => `${w.spec.url}: ${w.lastError ?? 'not yet discovered'}`);
    throw new ApiError(503, `no healthy worker (${reasons.join('; ') || 'none configured'})`, 'service_unavailable');
  }
  const runtime = worker.runtime!;
  const dtype = resolveEncoderDtype(runtime, 'image', ctx.processEnv, worker.labels).dtype;

  // Pooled output memory goes back when the request is over, whatever its outcome.
  const releases: Array<() => void> = [];
  const releaseImages = () => releases.splice(0).forEach((release) => release());
  // Bytes are handed over (transferred) to the pool thread, which also hashes them. Only what
  // travels: bfloat16 alone for a bfloat16 wire dtype, float32 otherwise.
  const jobs = bytes.map((b) => ctx.pool.start({ bytes: b, config: ctx.model.imageConfig, bf16: dtype === 'bfloat16', float32: dtype !== 'bfloat16' }));
  const asImageError = (err: unknown, i: number) =>
    err instanceof ImageDecodeError || err instanceof ImageSizeError ? new ApiError(400, `image ${i}: ${err.message}`, 'invalid_request_error', images[i]!.param) : err;
  // The prompt needs each image's token count, which its header gives: build it while the
  // pool works on the pixels (rebuilt below in the rare case the decoded image disagrees).
  const headers = await Promise.all(jobs.map((j) => j.header.catch(() => undefined)));
  let early: ReturnType<typeof promptFor> | undefined;
  if (headers.every((h) => h !== undefined)) early = promptFor(ctx, req, images, headers.map((h) => h.tokens));
  const settled = await Promise.allSettled(
    jobs.map(async (job, i) => {
      try {
        const r = await job.result;
        releases.push(r.release);
        const contentHash = Buffer.from(r.contentHash.buffer, r.contentHash.byteOffset, r.contentHash.byteLength);
        const image: PreparedImage = { ...(r.pixelValues ? { pixelValues: r.pixelValues } : {}), ...(r.bf16 ? { bf16: r.bf16 } : {}), patches: r.patches, features: r.features, gridThw: r.gridThw, placeholder: { offset: 0, length: r.tokens }, contentHash };
        return image;
      } catch (err) {
        throw asImageError(err, i);
      }
    }),
  );
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) {
    releaseImages();
    throw failed.reason;
  }
  const prepared = settled.map((s) => (s as PromiseFulfilledResult<PreparedImage>).value);
  try {
    timing.mark('preprocess');
    const tokens = prepared.map((p) => p.placeholder.length);
    const built = early && early.tokens.every((n, i) => n === tokens[i]) ? early : promptFor(ctx, req, images, tokens);
    if ('error' in built) throw built.error;
    built.prompt.placeholders.forEach((range, i) => (prepared[i]!.placeholder = range));
    timing.mark('prompt');
    await generateWithImages(ctx, req, res, { prompt: built.prompt, prepared, worker, runtime, dtype, requestId, created, modelName, config, timing, isGone: () => clientGone });
  } finally {
    releaseImages();
  }
}

/** The prompt for these image token counts, or the API error building it gives. */
function promptFor(ctx: RouterContext, req: ChatCompletionRequest, images: ImageRef[], tokens: number[]): { tokens: number[] } & ({ prompt: BuiltPrompt } | { error: unknown }) {
  try {
    return { tokens, prompt: buildPrompt(ctx.model, req.messages as ChatMessage[], tokens) };
  } catch (err) {
    return { tokens, error: asApiError(err, images) };
  }
}

interface GenerateInput {
  prompt: BuiltPrompt;
  prepared: PreparedImage[];
  worker: WorkerState;
  runtime: 'tokenspeed' | 'vllm';
  dtype: 'float32' | 'bfloat16' | 'float16';
  requestId: string;
  created: number;
  modelName: string;
  config: RouterConfig;
  timing: RequestTiming;
  isGone: () => boolean;
}

async function generateWithImages(ctx: RouterContext, req: ChatCompletionRequest, res: ServerResponse, g: GenerateInput): Promise<void> {
  const { prompt, prepared, worker, runtime, dtype, requestId, created, modelName, config, timing } = g;
  const { decision, minBytes } = transportFor(ctx, worker);
  const scope = new ShmRequestScope(ctx.writer.dir);
  const placement = { requestId, worker: worker.spec.url, runtime, decision, minBytes, writer: ctx.writer, scope, metrics: ctx.metrics, events: ctx.events };
  const maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  const engineRequest: EngineRequest = {
    requestId,
    text: prompt.text,
    inputIds: prompt.inputIds,
    images: prepared,
    imageTokenId: ctx.model.imageTokenId,
    sampling: {
      ...(maxTokens !== undefined ? { maxTokens } : {}),
      ...(req.temperature != null ? { temperature: req.temperature } : {}),
      ...(req.top_p != null ? { topP: req.top_p } : {}),
      ...(req.stop != null ? { stop: typeof req.stop === 'string' ? [req.stop] : req.stop } : {}),
    },
    stream: req.stream === true,
    encoderDtype: dtype,
  };

  worker.inFlight += 1;
  try {
    const wire = runtime === 'tokenspeed' ? await buildTokenSpeedRequest(engineRequest, placement) : await buildVllmRequest(engineRequest, placement);
    timing.mark('place');
    if (g.isGone()) {
      scope.cleanup();
      return;
    }
    await streamFromWorker(ctx, worker, wire, { requestId, created, modelName, stream: req.stream === true, includeUsage: req.stream_options?.include_usage === true, scope, res, isGone: g.isGone, timeoutSecs: config.request_timeout_secs, timing });
  } catch (err) {
    scope.cleanup();
    throw err;
  } finally {
    worker.inFlight -= 1;
  }
}

interface StreamOptions {
  requestId: string;
  created: number;
  modelName: string;
  stream: boolean;
  includeUsage: boolean;
  scope: ShmRequestScope;
  res: ServerResponse;
  isGone: () => boolean;
  timeoutSecs: number;
  timing: RequestTiming;
}

function streamFromWorker(ctx: RouterContext, worker: WorkerState, wire: ts.GenerateRequest | vllm.GenerateRequest, o: StreamOptions): Promise<void> {
  const call = callGenerate(worker, wire, Date.now() + o.timeoutSecs * 1000);
  const detok = new IncrementalDetokenizer(ctx.model);
  let headersSent = false;
  let complete: Extract<EngineEvent, { kind: 'complete' }> | undefined;
  let promptTokens = 0;
  const sse = (payload: unknown) => o.res.write(`data: ${JSON.stringify(payload)}\n\n`);

  return new Promise<void>((resolve, reject) => {
    const onClose = () => {
      if (complete || o.res.writableFinished) return;
      call.cancel();
      sendAbort(worker, o.requestId);
      o.scope.cleanup();
      resolve();
    };
    o.res.on('close', onClose);
    if (o.isGone()) return onClose();

    const failFromWorker = (apiError: ApiError) => {
      o.res.off('close', onClose);
      call.removeAllListeners('end');
      call.removeAllListeners('error');
      call.on('error', () => {}); // the cancel below surfaces as a CANCELLED error
      call.cancel();
      o.scope.cleanup();
      if (!headersSent) return reject(apiError);
      sse(apiError.body());
      o.res.end('data: [DONE]\n\n');
      resolve();
    };
    call.on('data', (message: unknown) => {
      const ev = engineEvent(message as ts.GenerateResponse | vllm.GenerateResponse);
      if (!ev) return;
      const bad = ev.tokenIds.find((id) => !Number.isInteger(id) || id < 0 || id >= ctx.model.vocabSize);
      if (bad !== undefined) {
        failFromWorker(new ApiError(502, `worker ${worker.spec.url} sent token id ${bad}, outside the model's vocabulary of ${ctx.model.vocabSize}`));
        return;
      }
      promptTokens = ev.promptTokens || promptTokens;
      if (ev.kind === 'complete') complete = ev;
      if (!o.stream) {
        detok.collect(ev.tokenIds);
        return;
      }
      if (!headersSent) {
        o.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
        headersSent = true;
        sse(chunkBody(o.requestId, o.created, o.modelName, { role: 'assistant', content: '' }, null));
      }
      const delta = detok.push(ev.tokenIds);
      if (delta) sse(chunkBody(o.requestId, o.created, o.modelName, { content: delta }, null));
    });
    call.on('error', (err: grpc.ServiceError) => {
      o.res.off('close', onClose);
      if (err.code === grpc.status.CANCELLED && o.isGone()) return resolve();
      o.scope.cleanup();
      if (err.code === grpc.status.UNAVAILABLE) ctx.registry.markDown(worker, `${grpc.status[err.code]}: ${err.details}`);
      const apiError = grpcFailure(err, worker, o.timeoutSecs);
      if (!headersSent) return reject(apiError);
      sse(apiError.body());
      o.res.end('data: [DONE]\n\n');
      resolve();
    });
    call.on('end', () => {
      o.res.off('close', onClose);
      if (!complete) {
        o.scope.cleanup();
        const apiError = new ApiError(502, `worker ${worker.spec.url} ended the stream without a completion`);
        if (!headersSent) return reject(apiError);
        sse(apiError.body());
        o.res.end('data: [DONE]\n\n');
        return resolve();
      }
      o.scope.complete();
      const usage = { prompt_tokens: complete.promptTokens || promptTokens, completion_tokens: detok.count, total_tokens: (complete.promptTokens || promptTokens) + detok.count };
      const finish = openAiFinishReason(complete.finishReason);
      if (!o.stream) {
        o.timing.mark('worker');
        o.res.writeHead(200, { 'content-type': 'application/json', 'server-timing': o.timing.header() });
        o.res.end(JSON.stringify(completionBody(o.requestId, o.created, o.modelName, detok.text(), finish, usage)));
        return resolve();
      }
      if (!headersSent) {
        o.res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
        sse(chunkBody(o.requestId, o.created, o.modelName, { role: 'assistant', content: '' }, null));
      }
      const tail = detok.flush();
      if (tail) sse(chunkBody(o.requestId, o.created, o.modelName, { content: tail }, null));
      sse(chunkBody(o.requestId, o.created, o.modelName, {}, finish));
      if (o.includeUsage) sse(chunkBody(o.requestId, o.created, o.modelName, {}, null, usage));
      o.res.end('data: [DONE]\n\n');
      resolve();
    });
  });
}
