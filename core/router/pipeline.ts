// One chat completion, end to end, over one config snapshot:
//   read the config store once -> validate -> fetch images -> pick a regular worker of that
//   revision -> preprocess (worker threads, in the worker's wire dtype) -> chat template +
//   tokenize + expand placeholders -> resolve the worker's transport -> the worker's engine
//   builds its request, placing every tensor inline or in /dev/shm -> Generate stream ->
//   detokenize -> JSON or SSE (responder.ts).
// The pipeline knows no protocol: the engine of the worker's runtime does (core/engines/).
// Failure rules: bad input is 400/413 naming the field; no healthy worker 503 (and 503 when
// only disaggregated workers are configured: one request across prefill/decode/encode
// workers is not routed by this version); a worker that fails or disconnects 502; a timeout
// 504. Any failure after a /dev/shm write, and a client that goes away, unlinks every file
// of the request; a client that goes away also cancels the call and sends Abort.
import { randomUUID } from 'node:crypto';
import type { ConfigSnapshot, ConfigStore } from '../config/store.ts';
import type { RouterConfig, TransportMode, WorkerSpec } from '../config/schema.ts';
import { engineFor, type EngineEvent, type EngineFailure, type EngineRequest, type PreparedImage, type WireRequest } from '../engines/engine.ts';
import { ImageDecodeError } from '../multimodal/decode.ts';
import { ImageInputError, loadImageBytes, RequestImageBudget } from '../multimodal/fetch.ts';
import { createMediaPolicy, type MediaPolicy } from '../multimodal/media-policy.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import { ImageMemoryError, type PreprocessPool } from '../multimodal/pool.ts';
import { buildPromptWithin, ContextLengthError, PromptError, type BuiltPrompt, type ChatMessage } from '../multimodal/prompt.ts';
import { ImageSizeError } from '../multimodal/qwen-vl.ts';
import type { TrafficSource } from '../telemetry/event-schema.ts';
import type { TensorEventBus } from '../telemetry/events.ts';
import { routerLabels, type TransportMetrics } from '../telemetry/metrics.ts';
import { resolveEncoderDtype } from '../transport/dtype.ts';
import { PREWRITE_HEADER_MISMATCH, type ShmPrewriteTask } from '../multimodal/preprocess-task.ts';
import type { ImageHeader } from '../multimodal/pool.ts';
import type { PlacementContext, PrewrittenTensor } from '../transport/placement.ts';
import { transportForWorker, type ShmHostFacts } from '../transport/resolve.ts';
import type { ShmRequestScope, ShmWriter } from '../transport/shm-writer.ts';
import { readFailedReason, type EncoderDtype, type TensorPath } from '../transport/vocabulary.ts';
import type { WorkerRegistry, WorkerState } from '../workers/registry.ts';
import { ApiError, openAiFinishReason, parseChatRequest, type ChatCompletionRequest } from './openai.ts';
import { CapturedResponse, ChatResponder, sendError, type ResponseTarget } from './responder.ts';

export interface RouterContext {
  store: ConfigStore;
  processEnv: Readonly<Record<string, string | undefined>>;
  model: ModelDirectory;
  modelName: string;
  pool: PreprocessPool;
  writer: ShmWriter;
  host: ShmHostFacts;
  metrics: TransportMetrics;
  events: TensorEventBus;
  registry: WorkerRegistry;
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
  /** A tensor file the preprocessing thread could not write (why); the tensor was placed the usual way. */
  prewriteFailed?: string;
  paths: Record<TensorPath, number>;
}

export function newRequestRecord(): RequestRecord {
  return { paths: { inline: 0, shm: 0, remote: 0 } };
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

/** What an image part's URL becomes once its bytes are loaded (chat templates only test that it is there). */
const LOADED_IMAGE_URL = 'mmtc:loaded';

function forgetImageUrls(req: ChatCompletionRequest, images: ImageRef[]): void {
  for (const im of images) im.url = LOADED_IMAGE_URL;
  for (const m of req.messages) if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'image_url') p.image_url.url = LOADED_IMAGE_URL;
}

function asApiError(err: unknown, images: ImageRef[]): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof ImageInputError) return new ApiError(err.status, err.message, 'invalid_request_error', images[err.index]?.param ?? null);
  if (err instanceof PromptError) return new ApiError(400, err.message);
  return new ApiError(500, `internal error: ${(err as Error).message}`);
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

  elapsedMs(): number {
    return performance.now() - this.start;
  }

  /** Milliseconds of a marked span (0 when it was never marked). */
  span(name: string): number {
    return this.spans.find(([n]) => n === name)?.[1] ?? 0;
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

/** 503 for a config with workers but none that takes a whole chat request. */
function noRegularWorker(snapshot: ConfigSnapshot): ApiError {
  const types = new Map<string, number>();
  for (const w of snapshot.config.workers) types.set(w.worker_type, (types.get(w.worker_type) ?? 0) + 1);
  const present = [...types].map(([t, n]) => `${n} ${t}`).join(', ');
  return new ApiError(
    503,
    `no regular worker is configured (configured: ${present}); routing one request across prefill, decode and encode workers is not available in this version of mmtc`,
    'service_unavailable',
  );
}

function selectWorker(ctx: RouterContext, snapshot: ConfigSnapshot, pinned?: string): { state: WorkerState; spec: WorkerSpec } {
  if (pinned !== undefined && !snapshot.config.workers.some((w) => w.url === pinned)) throw new ApiError(404, `no worker ${pinned} in configuration revision ${snapshot.revision}`);
  const eligible = snapshot.config.workers.filter((w) => w.worker_type === 'regular' && (pinned === undefined || w.url === pinned));
  if (eligible.length === 0 && pinned !== undefined) throw new ApiError(400, `worker ${pinned} is not a regular worker: a whole chat request only goes to a regular worker`);
  if (eligible.length === 0 && snapshot.config.workers.length > 0) throw noRegularWorker(snapshot);
  const picked = ctx.registry.select(snapshot.config.policy, eligible);
  if (picked) return picked;
  const reasons = eligible.map((spec) => `${spec.url}: ${ctx.registry.get(spec.url)?.lastError ?? 'not yet discovered'}`);
  throw new ApiError(503, `no healthy worker (${reasons.join('; ') || 'none configured'})`, 'service_unavailable');
}

/** `timing` starts when the request arrives, and has its body span marked. */
/** The media policy of a config revision, built once per revision. */
const policies = new WeakMap<RouterConfig, MediaPolicy>();
function mediaPolicyOf(config: RouterConfig): MediaPolicy {
  let policy = policies.get(config);
  if (!policy) {
    policy = createMediaPolicy({ allowedMediaDomains: config.allowed_media_domains, allowPrivateHosts: config.allow_private_media_hosts });
    policies.set(config, policy);
  }
  return policy;
}

/** OpenAI's answer to a prompt longer than the context. */
export function contextLengthApiError(err: ContextLengthError): ApiError {
  return new ApiError(400, err.message, 'invalid_request_error', 'messages', 'context_length_exceeded');
}

/**
 * Characters of every text part: what the prompt's text is made of (the template adds
 * little). A UTF-8 text has at least as many bytes as characters, so this bounds its tokens
 * from below as bytes would, without a pass over a huge string.
 */
function textLength(req: ChatCompletionRequest): number {
  let n = 0;
  for (const m of req.messages) {
    if (typeof m.content === 'string') n += m.content.length;
    else if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'text') n += p.text.length;
  }
  return n;
}

/**
 * What a request is admitted against before any heavy work (docs/router.md, "Limits"): its
 * image count, a completion that could never fit, and text whose bytes alone prove it
 * longer than the context; the image bytes as they arrive; the images' pixels from their
 * headers before anything is decoded; preprocessing memory when each image starts.
 */
function admitRequest(ctx: RouterContext, config: RouterConfig, req: ChatCompletionRequest, images: ImageRef[]): void {
  const limit = config.limit_mm_per_prompt.image;
  if (images.length > limit) {
    throw new ApiError(400, `this request has ${images.length} images; at most ${limit} are accepted per request (limit_mm_per_prompt.image = ${limit})`, 'invalid_request_error', 'messages');
  }
  const context = ctx.model.maxContextLength;
  const maxTokens = req.max_completion_tokens ?? req.max_tokens;
  if (maxTokens != null && maxTokens >= context) {
    const param = req.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    throw new ApiError(400, `${param} is ${maxTokens}, but this model's maximum context length is ${context} tokens, prompt and completion together`, 'invalid_request_error', param, 'context_length_exceeded');
  }
  const atLeast = Math.ceil(textLength(req) / ctx.model.maxTokenBytes);
  if (atLeast > context) throw contextLengthApiError(new ContextLengthError(atLeast, context, true));
}

/** `timing` starts when the request arrives, and has its body span marked. */
export async function handleChatCompletion(ctx: RouterContext, body: unknown, res: ResponseTarget, timing: RequestTiming, record: RequestRecord, options: ChatOptions = {}): Promise<void> {
  const snapshot = ctx.store.current();
  const config = snapshot.config;
  record.revision = snapshot.revision;
  const req = parseChatRequest(body);
  body = undefined; // the parsed request holds what is needed
  const images = imagesOf(req);
  const requestId = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  record.id = requestId;
  admitRequest(ctx, config, req, images);
  let clientGone = false;
  res.on('close', () => {
    if (!res.writableFinished) clientGone = true;
  });

  const budget = new RequestImageBudget(config.max_request_image_bytes);
  const sourceOptions = { maxBytes: config.max_image_bytes, timeoutMs: config.media_fetch_timeout_secs * 1000, policy: mediaPolicyOf(config), requestBudget: budget };
  const bytes = await Promise.all(images.map((im, i) => loadImageBytes(im.url, i, sourceOptions))).catch((err: unknown) => {
    throw asApiError(err, images);
  });
  // The image URLs (a data: URL is the image, base64) are not needed once their bytes are here:
  // let them go now rather than when the request ends.
  forgetImageUrls(req, images);

  timing.mark('fetch');
  const { state: worker, spec } = selectWorker(ctx, snapshot, options.worker);
  // The request is the worker's from here on (its /dev/shm files may exist from now): a worker
  // removed meanwhile drains it before it closes.
  ctx.registry.acquire(worker);
  try {
    await routeToWorker(ctx, req, res, { snapshot, config, images, bytes, worker, spec, requestId, timing, record, options, isGone: () => clientGone });
  } finally {
    ctx.registry.release(worker);
  }
}

interface RouteInput {
  snapshot: ConfigSnapshot;
  config: RouterConfig;
  images: ImageRef[];
  bytes: Uint8Array[];
  worker: WorkerState;
  spec: WorkerSpec;
  requestId: string;
  timing: RequestTiming;
  record: RequestRecord;
  options: ChatOptions;
  isGone: () => boolean;
}

async function routeToWorker(ctx: RouterContext, req: ChatCompletionRequest, res: ResponseTarget, input: RouteInput): Promise<void> {
  const { snapshot, config, images, bytes, worker, spec, requestId, timing, record, options } = input;
  record.worker = spec.url;
  record.model = req.model ?? ctx.modelName;
  const runtime = worker.runtime!;
  const dtype = resolveEncoderDtype(runtime, 'image', ctx.processEnv, worker.labels).dtype;
  const asImageError = (err: unknown, i: number) => {
    if (err instanceof ImageDecodeError || err instanceof ImageSizeError) return new ApiError(400, `image ${i}: ${err.message}`, 'invalid_request_error', images[i]!.param);
    if (err instanceof ImageMemoryError) return new ApiError(413, `image ${i}: ${err.message}`, 'invalid_request_error', images[i]!.param);
    return err;
  };

  // Sizes from the headers, before anything is decoded: a decompression bomb stops here.
  const imageConfig = options.pixelBounds ? { ...ctx.model.imageConfig, ...options.pixelBounds } : ctx.model.imageConfig;
  const headers = await Promise.all(
    bytes.map((b, i) =>
      ctx.pool.readHeader(b, imageConfig).catch((err: unknown) => {
        throw asImageError(err, i);
      }),
    ),
  );
  const pixels = headers.reduce((n, h) => n + (h ? h.width * h.height : 0), 0);
  if (pixels > config.max_request_image_pixels) {
    const sizes = headers.map((h, i) => (h ? `image ${i} ${h.width}x${h.height}` : `image ${i} unknown`)).join(', ');
    throw new ApiError(413, `the request's images have ${pixels} pixels in all (${sizes}), above max_request_image_pixels = ${config.max_request_image_pixels}`, 'invalid_request_error', 'messages');
  }

  // Pooled output memory goes back when the request is over, whatever its outcome.
  const releases: Array<() => void> = [];
  const releaseImages = () => releases.splice(0).forEach((release) => release());
  // The request's /dev/shm files, from the first one reserved for an image to the end of the
  // request: when the worker's lane is SHM, each image's encoder input is written to its file
  // by the pool threads as its bands are done (docs/transport.md, "Writing a tensor").
  const scope = ctx.writer.newScope();
  const lane = transportFor(ctx, snapshot, spec, worker, options);
  const reserved = headers.map((h) => prewriteFor(ctx, lane, runtime, dtype, h, images.length, scope));
  const prewritten: PrewrittenTensor[] = [];
  // Bytes are handed over (transferred) to the pool thread, which also hashes them. Only what
  // travels: bfloat16 alone for a bfloat16 wire dtype, float32 otherwise.
  const jobs = bytes.map((b, i) =>
    ctx.pool.start(
      { bytes: b, config: imageConfig, bf16: dtype === 'bfloat16', float32: dtype !== 'bfloat16', maxPixels: config.max_request_image_pixels, ...(reserved[i] ? { shm: reserved[i]!.task } : {}) },
      Promise.resolve(headers[i]),
    ),
  );
  // The prompt needs each image's token count, which its header gives: build it while the
  // pool works on the pixels (rebuilt below in the rare case the decoded image disagrees).
  const context = ctx.model.maxContextLength;
  const headerTokens = headers.map((h) => h?.geometry.tokens);
  const early = headerTokens.every((t): t is number => t !== undefined) ? promptFor(ctx, req, images, headerTokens, context) : undefined;
  const settled = await Promise.allSettled(
    jobs.map(async (job, i) => {
      try {
        const r = await job.result;
        releases.push(r.release);
        const file = reserved[i];
        if (file) {
          const values = file.task.kind === 'float32' ? r.pixelValues : r.bf16;
          if (r.shm?.written && values) prewritten.push({ bytes: new Uint8Array(values.buffer, values.byteOffset, values.byteLength), name: file.name, micros: r.shm.micros });
          else {
            scope.discard(file.name); // ours (reserve created it), not written: placed the usual way
            if (r.shm && !r.shm.written && r.shm.error !== PREWRITE_HEADER_MISMATCH) record.prewriteFailed ??= r.shm.error;
          }
        }
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
    scope.cleanup();
    throw failed.reason;
  }
  const prepared = settled.map((s) => (s as PromiseFulfilledResult<PreparedImage>).value);
  try {
    timing.mark('preprocess');
    const tokens = prepared.map((p) => p.placeholder.length);
    const built = await (early && headerTokens.every((n, i) => n === tokens[i]) ? early : promptFor(ctx, req, images, tokens, context));
    if ('error' in built) throw built.error;
    built.prompt.placeholders.forEach((range, i) => (prepared[i]!.placeholder = range));
    const maxTokens = req.max_completion_tokens ?? req.max_tokens;
    const promptTokens = built.prompt.inputIds.length;
    if (maxTokens != null && promptTokens + maxTokens > context) {
      throw new ApiError(
        400,
        `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + maxTokens} tokens (${promptTokens} in the messages, ${maxTokens} in the completion). Please reduce the length of the messages or completion.`,
        'invalid_request_error',
        'messages',
        'context_length_exceeded',
      );
    }
    timing.mark('prompt');
    await generate(ctx, req, res, { snapshot, prompt: built.prompt, prepared, worker, spec, dtype, requestId, timing, record, options, isGone: input.isGone, scope, prewritten });
  } catch (err) {
    scope.cleanup();
    throw err;
  } finally {
    releaseImages();
  }
}

/** The worker's lane for this request: its resolved mode and threshold, or the mode calibration forces. */
function transportFor(ctx: RouterContext, snapshot: ConfigSnapshot, spec: WorkerSpec, worker: WorkerState, options: ChatOptions): ReturnType<typeof transportForWorker> {
  const forced = options.transport;
  // A forced mode (calibration) replaces the worker's resolved mode and threshold; the
  // decision still checks /dev/shm and the worker's token as for any request.
  const effectiveSpec = forced ? { ...spec, multimodal_tensor_transport: forced.mode, multimodal_shm_min_bytes: forced.minBytes } : spec;
  return transportForWorker({ spec: effectiveSpec, config: snapshot.config, env: snapshot.env, labels: worker.labels, reachable: worker.healthy, host: ctx.host, shmLaneBroken: options.probe ? undefined : worker.shmLane?.error });
}

/**
 * A /dev/shm file for an image's encoder input, named and counted now and written by the pool
 * as the image is computed, when the tensor will go by SHM as it is: the lane is SHM, the wire
 * dtype is one preprocessing produces (float16 is converted afterwards), the tensor is the
 * image's own (vLLM concatenates the rows of several images into one tensor), it reaches the
 * threshold and fits the budget.
 */
function prewriteFor(
  ctx: RouterContext,
  lane: ReturnType<typeof transportForWorker>,
  runtime: string,
  dtype: EncoderDtype,
  header: ImageHeader | undefined,
  imageCount: number,
  scope: ShmRequestScope,
): { name: string; task: ShmPrewriteTask } | undefined {
  if (!lane.decision.shmEnabled || !header || (dtype !== 'float32' && dtype !== 'bfloat16')) return undefined;
  if (runtime === 'vllm' && imageCount !== 1) return undefined;
  const nbytes = header.geometry.patches * header.geometry.features * (dtype === 'float32' ? 4 : 2);
  if (nbytes < lane.minBytes) return undefined;
  const file = ctx.writer.reserve(nbytes, scope);
  return file ? { name: file.name, task: { path: file.path, nbytes, kind: dtype === 'float32' ? 'float32' : 'bf16' } } : undefined;
}

/** The prompt for these image token counts, admitted against the context, or the API error building it gives. */
async function promptFor(ctx: RouterContext, req: ChatCompletionRequest, images: ImageRef[], tokens: number[], context: number): Promise<{ prompt: BuiltPrompt } | { error: unknown }> {
  try {
    return { prompt: await buildPromptWithin(ctx.model, req.messages as ChatMessage[], tokens, context) };
  } catch (err) {
    return { error: err instanceof ContextLengthError ? contextLengthApiError(err) : asApiError(err, images) };
  }
}

interface GenerateInput {
  snapshot: ConfigSnapshot;
  prompt: BuiltPrompt;
  prepared: PreparedImage[];
  worker: WorkerState;
  spec: WorkerSpec;
  dtype: EncoderDtype;
  requestId: string;
  timing: RequestTiming;
  record: RequestRecord;
  options: ChatOptions;
  isGone: () => boolean;
  /** The request's /dev/shm files so far, and the tensors among them already written. */
  scope?: ShmRequestScope;
  prewritten?: PrewrittenTensor[];
}

async function generate(ctx: RouterContext, req: ChatCompletionRequest, res: ResponseTarget, g: GenerateInput): Promise<void> {
  const { snapshot, prompt, prepared, worker, spec, dtype, requestId, timing } = g;
  const runtime = worker.runtime!;
  const { decision, minBytes, resolved } = transportFor(ctx, snapshot, spec, worker, g.options);
  const mode = resolved.multimodal_tensor_transport.value;
  const scope = g.scope ?? ctx.writer.newScope();
  const placement: PlacementContext = {
    requestId,
    revision: snapshot.revision,
    source: g.options.source ?? 'api',
    worker: spec.url,
    runtime,
    decision,
    minBytes,
    writer: ctx.writer,
    scope,
    metrics: ctx.metrics,
    events: ctx.events,
    tally: g.record.paths,
    ...(g.prewritten ? { prewritten: g.prewritten } : {}),
  };
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
  const responder = new ChatResponder(res, {
    stream: req.stream === true,
    includeUsage: req.stream_options?.include_usage === true,
    requestId,
    created: Math.floor(Date.now() / 1000),
    model: req.model ?? ctx.modelName,
    headers: { [REVISION_HEADER]: String(snapshot.revision) },
  });

  const stream = (wire: WireRequest, s: ShmRequestScope) =>
    streamFromWorker(ctx, worker, wire, { requestId, model: req.model ?? ctx.modelName, scope: s, res, responder, isGone: g.isGone, timeoutSecs: snapshot.config.request_timeout_secs, timing });
  let current = scope;
  try {
    const wire = await engineFor(runtime).buildRequest(engineRequest, placement);
    // Written files the request did not send (the lane changed since): gone before the call.
    for (const p of placement.prewritten?.splice(0) ?? []) scope.discard(p.name);
    timing.mark('place');
    if (g.isGone()) {
      scope.cleanup();
      return;
    }
    try {
      await stream(wire, scope);
    } catch (err) {
      if (!(err instanceof ShmReadFailure)) throw err;
      if (g.options.probe) throw new ApiError(502, `worker ${spec.url} could not read the request's /dev/shm files: ${err.details}`, 'server_error');
      // The worker could not open what we wrote (another uid, another /dev/shm): not the
      // client's problem. Send the same request once more, inline, and keep this worker's
      // lane inline until it is rediscovered or the operator resets it.
      scope.cleanup();
      ctx.registry.breakShmLane(worker, err.details);
      ctx.metrics.shmReadFallbacks.inc({ runtime });
      g.record.shmFallback = err.details;
      for (const path of Object.keys(g.record.paths) as TensorPath[]) g.record.paths[path] = 0;
      current = ctx.writer.newScope();
      // Attempt 2 of the same tensors, its reason in the mode's own words and the worker's error as its cause.
      const inline: PlacementContext = { ...placement, scope: current, attempt: 2, decision: { shmEnabled: false, reason: readFailedReason(mode), worker: spec.url, detail: err.details } };
      await stream(await engineFor(runtime).buildRequest(engineRequest, inline), current);
    }
  } catch (err) {
    current.cleanup();
    throw err;
  }
}

/** A worker's answer that it could not read the request's /dev/shm files. */
class ShmReadFailure extends Error {
  constructor(readonly details: string) {
    super(details);
  }
}

/**
 * How workers say they could not open or read a file in /dev/shm: our reference worker names
 * the file and the errno, Python servicers raise FileNotFoundError / PermissionError with
 * "[Errno 2]" / "[Errno 13]" and the path.
 */
export function isShmReadFailure(failure: EngineFailure): boolean {
  if (failure.kind !== 'broken' && failure.kind !== 'rejected') return false;
  return /smg-tokenspeed-|\/dev\/shm|\[Errno (?:2|13)\]|\bEACCES\b|\bENOENT\b|\bEPERM\b|Permission denied|No such file/i.test(failure.details);
}

interface StreamOptions {
  requestId: string;
  model: string;
  scope: ShmRequestScope;
  res: ResponseTarget;
  responder: ChatResponder;
  isGone: () => boolean;
  timeoutSecs: number;
  timing: RequestTiming;
}

function failureError(failure: EngineFailure, worker: WorkerState, timeoutSecs: number): ApiError {
  const url = worker.spec.url;
  if (failure.kind === 'deadline') return new ApiError(504, `worker ${url} did not finish within ${timeoutSecs} s`, 'timeout');
  if (failure.kind === 'rejected') return new ApiError(502, `worker ${url} rejected the request: ${failure.status}: ${failure.details}`, 'server_error');
  return new ApiError(502, `worker ${url} failed: ${failure.status}: ${failure.details}`, 'server_error');
}

/** Resolves when the response is complete (or the client left); rejects only before anything was written. */
function streamFromWorker(ctx: RouterContext, worker: WorkerState, wire: WireRequest, o: StreamOptions): Promise<void> {
  const connection = worker.connection!;
  const detok = new IncrementalDetokenizer(ctx.model);
  let complete: Extract<EngineEvent, { kind: 'complete' }> | undefined;
  let promptTokens = 0;

  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (error?: ApiError) => {
      if (settled) return;
      settled = true;
      o.res.off('close', onClose);
      if (!error) return resolve();
      o.scope.cleanup();
      if (!o.responder.streaming) return reject(error);
      o.responder.fail(error);
      resolve();
    };
    const onClose = () => {
      if (complete || o.res.writableFinished || settled) return;
      settled = true;
      call.cancel();
      connection.abort(o.requestId, 'client disconnected');
      o.scope.cleanup();
      resolve();
    };
    if (o.isGone()) {
      o.scope.cleanup();
      return resolve();
    }
    o.res.on('close', onClose);

    let firstToken = true;
    const call = connection.generate(wire, { deadline: Date.now() + o.timeoutSecs * 1000 }, {
      event(ev) {
        if (firstToken && ev.tokenIds.length > 0) {
          firstToken = false;
          ctx.metrics.routerTtft.observe(routerLabels(o.model), o.timing.elapsedMs() / 1000);
        }
        const bad = ev.tokenIds.find((id) => !Number.isInteger(id) || id < 0 || id >= ctx.model.vocabSize);
        if (bad !== undefined) {
          call.cancel();
          settle(new ApiError(502, `worker ${worker.spec.url} sent token id ${bad}, outside the model's vocabulary of ${ctx.model.vocabSize}`));
          return;
        }
        promptTokens = ev.promptTokens || promptTokens;
        if (ev.kind === 'complete') complete = ev;
        if (o.responder.stream) o.responder.delta(detok.push(ev.tokenIds));
        else detok.collect(ev.tokenIds);
      },
      failure(failure) {
        if (failure.kind === 'unavailable') ctx.registry.markDown(worker, `${failure.status}: ${failure.details}`);
        // Nothing sent to the client yet and the worker could not read our files: the caller retries inline.
        if (!o.responder.streaming && o.scope.pending.length > 0 && isShmReadFailure(failure) && !settled) {
          settled = true;
          o.res.off('close', onClose);
          return reject(new ShmReadFailure(`${failure.status}: ${failure.details}`));
        }
        settle(failureError(failure, worker, o.timeoutSecs));
      },
      end() {
        if (!complete) return settle(new ApiError(502, `worker ${worker.spec.url} ended the stream without a completion`));
        o.scope.complete();
        const prompt = complete.promptTokens || promptTokens;
        const usage = { prompt_tokens: prompt, completion_tokens: detok.count, total_tokens: prompt + detok.count };
        const finish = openAiFinishReason(complete.finishReason);
        if (o.responder.stream) o.responder.finish(detok.flush(), finish, usage);
        else {
          o.timing.mark('worker');
          o.responder.finish(detok.text(), finish, usage, { 'server-timing': o.timing.header() });
        }
        settle();
      },
    });
  });
}

export interface InMemoryChat {
  status: number;
  /** The response body: the completion JSON, or the OpenAI error body. */
  body: string;
  requestId: string | undefined;
  revision: number | undefined;
  timing: RequestTiming;
}

/**
 * One chat completion through this same pipeline without HTTP: how the console sends its
 * test requests and calibration traffic (marked as its own through `options.source`).
 */
export async function runChatInMemory(ctx: RouterContext, body: unknown, options: ChatOptions): Promise<InMemoryChat> {
  const res = new CapturedResponse();
  const timing = new RequestTiming();
  const record = newRequestRecord();
  try {
    await handleChatCompletion(ctx, body, res, timing, record, options);
  } catch (err) {
    sendError(res, err instanceof ApiError ? err : new ApiError(500, `internal error: ${(err as Error).message}`));
  }
  return { status: res.statusCode, body: res.body, requestId: record.id, revision: record.revision, timing };
}
