// Phase 2 of a chat request: preparation (docs/preprocessing.md). The images' headers give
// their sizes before anything is decoded (a decompression bomb stops at the request's pixel
// budget); the pool decodes, resizes and patchifies them off the event loop in the worker's
// wire dtype, writing an encoder input straight to its /dev/shm file when the lane will take
// it there as it is; and the prompt is built from the headers' token counts meanwhile (again
// if a decoded image disagrees), then checked against the context with the completion limit.
// On any failure the pool's memory and the request's files are released before it throws.
import type { EngineRequest, PreparedImage } from '../engines/engine.ts';
import { resolveSampling, samplingDefaultsOf, type ClientSampling } from '../engines/sampling.ts';
import { capabilitiesOf } from '../engines/table.ts';
import { paddedToBatch } from '../engines/tensors.ts';
import { familyById, isQwenConfig, type ImageModelTensor, type VisionFamily } from '../multimodal/families/index.ts';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { ImageHeader } from '../multimodal/pool.ts';
import { PREWRITE_HEADER_MISMATCH, type ShmPrewriteTask } from '../multimodal/preprocess-task.ts';
import { buildPromptWithin, promptTokenIdsOf, type BuiltPrompt, type ImageSlot } from '../multimodal/prompt.ts';
import type { PrewrittenTensor } from '../transport/placement.ts';
import type { WorkerTransport } from '../transport/resolve.ts';
import type { CachedKind } from '../transport/pixel-cache.ts';
import type { ShmRequestScope } from '../transport/shm-writer.ts';
import type { EncoderDtype } from '../transport/vocabulary.ts';
import type { WorkerSpec } from '../config/schema.ts';
import type { WorkerState } from '../workers/registry.ts';
import type { AdmittedRequest } from './admit.ts';
import type { ChatOptions, RequestRecord, RouterContext } from './context.ts';
import { toApiError } from './errors.ts';
import { imageFingerprint, RequestCacheUses } from './cached-images.ts';
import { laneFor } from './lane.ts';
import { ApiError } from './openai.ts';
import type { RequestTiming } from './timing.ts';

/** What the worker is sent, ready: the prompt, every image's tensors, the files already written. */
export interface PreparedRequest {
  prompt: BuiltPrompt;
  images: PreparedImage[];
  encoderDtype: EncoderDtype;
  /** Each image's wire dtype (its receiver's: under EPD, its encode worker's). */
  imageDtypes: EncoderDtype[];
  /** The request's /dev/shm files so far (reserved for prewriting), and the tensors among them already written. */
  scope: ShmRequestScope;
  prewritten: PrewrittenTensor[];
  /** The images the pixel cache answered or keeps, for placement. */
  cached: RequestCacheUses;
  /** Give the pool's output memory back (when the request is over, whatever its outcome). */
  release(): void;
}

interface Target {
  state: WorkerState;
  spec: WorkerSpec;
}

/**
 * A /dev/shm file for an image's encoder input, named and counted now and written by the pool
 * as the image is computed, when the tensor will go by SHM as it is: the lane is SHM, the wire
 * dtype is one preprocessing produces (float16 is converted afterwards), the tensor is the
 * image's own (an engine with one encoder tensor per request concatenates several images'
 * rows), it reaches the threshold and fits the budget.
 */
function prewriteFor(
  ctx: RouterContext,
  lane: WorkerTransport,
  oneTensorPerImage: boolean,
  dtype: EncoderDtype,
  header: ImageHeader | undefined,
  scope: ShmRequestScope,
): { name: string; task: ShmPrewriteTask } | undefined {
  if (!lane.decision.shmEnabled || !header || (dtype !== 'float32' && dtype !== 'bfloat16') || !oneTensorPerImage) return undefined;
  const nbytes = header.geometry.patches * header.geometry.features * (dtype === 'float32' ? 4 : 2);
  if (nbytes < lane.minBytes) return undefined;
  const file = ctx.writer.reserve(nbytes, scope);
  return file ? { name: file.name, task: { path: file.path, nbytes, kind: dtype === 'float32' ? 'float32' : 'bf16' } } : undefined;
}

/** An image's tokens in the prompt: its `tokens` copies of the image token, or its family's sequence (Llama 4's tiles and separators, Kimi-K3's media block). */
function slotOf(
  model: ModelDirectory,
  family: VisionFamily,
  tensors: () => readonly ImageModelTensor[],
  tokens: number,
  source: { width: number; height: number },
): ImageSlot {
  if (!family.promptSequence) return tokens;
  return family.promptSequence(tensors(), tokens, promptTokenIdsOf(model), source);
}

const sameSlot = (a: ImageSlot | undefined, b: ImageSlot): boolean =>
  typeof a === 'number' || typeof b === 'number' ? a === b : a !== undefined && a.length === b.length && a.every((id, i) => id === b[i]);

/** The prompt for these images' tokens, admitted against the context, or the API error building it gives. */
async function promptFor(ctx: RouterContext, a: AdmittedRequest, tokens: readonly ImageSlot[]): Promise<{ prompt: BuiltPrompt } | { error: unknown }> {
  try {
    return { prompt: await buildPromptWithin(ctx.model, a.req.messages, tokens, ctx.model.maxContextLength) };
  } catch (err) {
    return { error: toApiError(err, { imageParams: a.imageParams }) };
  }
}

/** Every image's header, and the request refused when their pixels together pass its budget. */
async function readHeaders(ctx: RouterContext, a: AdmittedRequest, imageConfig: typeof ctx.model.imageConfig): Promise<Array<ImageHeader | undefined>> {
  const headers = await Promise.all(
    a.bytes.map((b, i) =>
      ctx.pool.readHeader(b, imageConfig).catch((err: unknown) => {
        throw toApiError(err, { imageParams: a.imageParams, image: i });
      }),
    ),
  );
  const limit = a.snapshot.config.max_request_image_pixels;
  const pixels = headers.reduce((n, h) => n + (h ? h.width * h.height : 0), 0);
  if (pixels > limit) {
    const sizes = headers.map((h, i) => (h ? `image ${i} ${h.width}x${h.height}` : `image ${i} unknown`)).join(', ');
    throw new ApiError(
      413,
      `the request's images have ${pixels} pixels in all (${sizes}), above max_request_image_pixels = ${limit}`,
      'invalid_request_error',
      'messages',
    );
  }
  return headers;
}

/** The completion limit against the prompt that was built: prompt and completion together must fit the context. */
function checkContext(ctx: RouterContext, a: AdmittedRequest, prompt: BuiltPrompt): void {
  const context = ctx.model.maxContextLength;
  const promptTokens = prompt.inputIds.length;
  if (a.maxTokens !== undefined && promptTokens + a.maxTokens > context) {
    throw new ApiError(
      400,
      `This model's maximum context length is ${context} tokens. However, you requested ${promptTokens + a.maxTokens} tokens (${promptTokens} in the messages, ${a.maxTokens} in the completion). Please reduce the length of the messages or completion.`,
      'invalid_request_error',
      'messages',
      'context_length_exceeded',
    );
  }
}

/**
 * `target` receives the request; `imageTargets`, when given, the pixels of each image (an
 * encode worker per image under EPD): each image is computed in its receiver's wire dtype and
 * prewritten by its receiver's lane.
 */
export async function prepare(
  ctx: RouterContext,
  a: AdmittedRequest,
  target: Target,
  options: ChatOptions,
  timing: RequestTiming,
  record: RequestRecord,
  imageTargets?: readonly Target[],
): Promise<PreparedRequest> {
  ctx.pool.stillBusy();
  const runtime = target.state.runtime!;
  const capabilities = capabilitiesOf(runtime);
  const dtypeOf = (t: Target) => capabilitiesOf(t.state.runtime!).encoderDtype('image', ctx.processEnv, t.state.labels).dtype;
  const dtype = dtypeOf(target);
  const receivers = a.bytes.map((_, i) => imageTargets?.[i] ?? target);
  const imageDtypes = receivers.map(dtypeOf);
  // Pixel bounds (calibration's sizes) apply to a processor that has them: Qwen's smart resize; a CLIP crop's size is fixed, MoonViT keeps an image within its budget as it is.
  const imageConfig = options.pixelBounds && isQwenConfig(ctx.model.imageConfig) ? { ...ctx.model.imageConfig, ...options.pixelBounds } : ctx.model.imageConfig;
  const headers = await readHeaders(ctx, a, imageConfig);

  // Pooled output memory goes back when the request is over, whatever its outcome.
  const releases: Array<() => void> = [];
  const release = () => releases.splice(0).forEach((r) => r());
  // The request's /dev/shm files, from the first one reserved for an image to the end of the
  // request: when the worker's lane is SHM, each image's encoder input is written to its file
  // by the pool threads as its bands are done (docs/transport.md, "Writing a tensor").
  const scope = ctx.writer.newScope();
  const lanes = new Map<string, WorkerTransport>();
  const laneOf = (t: Target) => lanes.get(t.spec.url) ?? lanes.set(t.spec.url, laneFor(ctx, a.snapshot, t.spec, t.state, options)).get(t.spec.url)!;
  // An encode worker gets one image per call: its tensor is always the image's own; unless the
  // family pads a request's images to its most crops (LLaVA-NeXT), which needs their values in
  // memory and gives a tensor no image has alone.
  const family = familyById(ctx.model.family);
  const padsCrops = family.paddedCrops === true && a.bytes.length > 1;
  const oneTensorPerImage = !padsCrops && (imageTargets !== undefined || capabilities.encoderTensor === 'per_image' || a.bytes.length === 1);
  // Bytes are handed over (transferred) to the pool thread, which also hashes them. Only what
  // travels: bfloat16 alone for a bfloat16 wire dtype, float32 otherwise. An engine that sends
  // the encoded images keeps its own copy (a copy: a Buffer's slice() would share the memory
  // the transfer detaches).
  const encoded = capabilities.sendsEncodedImages ? a.bytes.map((b) => new Uint8Array(b)) : undefined;
  const prewritten: PrewrittenTensor[] = [];
  // The pixel cache (docs/performance.md, "The pixel cache"): keyed by the encoded bytes, hashed
  // now, before a transfer detaches them, and what changes the tensor.
  const cached = new RequestCacheUses(a.snapshot.config.multimodal_pixel_cache_shm === 'copy', (n) => ctx.pool.borrow(n));
  releases.push(() => cached.release());
  const cache = ctx.pixelCache;
  const kindOf = (i: number): CachedKind => (imageDtypes[i] === 'bfloat16' ? 'bf16' : 'float32');
  const keys = a.hashes.map((h, i) =>
    cache?.enabled && !options.bypassPixelCache && headers[i] ? cache.keyOf(h, imageFingerprint(ctx.model, imageConfig, kindOf(i))) : undefined,
  );
  // Whether an image's receiver attaches its encoder input's /dev/shm file read-write (an
  // encode worker's Encode call reads it): its file is then never shared with the cache.
  const readWrite = receivers.map((t, i) =>
    capabilitiesOf(t.state.runtime!).attachesShmReadWrite(imageTargets ? 'encode' : 'generate', imageDtypes[i]!, t.state.labels),
  );
  // The prompt needs each image's token count, which its header gives: build it while the
  // pool works on the pixels (rebuilt below in the rare case the decoded image disagrees).
  const headerSlots = headers.map((h) => h && slotOf(ctx.model, family, () => family.imageTensors(h.geometry), h.geometry.tokens, h));
  // Each image's decoded size (its header's, else the decoder's), which Kimi-K3's prompt writes.
  const sources: Array<{ width: number; height: number } | undefined> = headers.map((h) => h && { width: h.width, height: h.height });
  const early = headerSlots.every((t): t is ImageSlot => t !== undefined) ? promptFor(ctx, a, headerSlots) : undefined;

  const imageOf = async (i: number): Promise<PreparedImage> => {
    const lane = laneOf(receivers[i]!);
    const look = keys[i] && cache ? await cache.lookup(keys[i]) : undefined;
    if (look?.kind === 'hit') {
      // Read at once unless the tensor goes as it is over SHM (a hard link then, bytes untouched).
      const asLink =
        lane.decision.shmEnabled &&
        look.entry.shape.nbytes >= lane.minBytes &&
        oneTensorPerImage &&
        imageDtypes[i] !== 'float16' &&
        !capabilities.sendsEncodedImages;
      const image = await cached.hitImage(look.entry, !asLink, encoded?.[i]);
      if (image) return image;
    }
    const miss = look?.kind === 'miss' ? look.miss : undefined;
    try {
      const file = prewriteFor(ctx, lane, oneTensorPerImage, imageDtypes[i]!, headers[i], scope);
      const job = ctx.pool.start(
        {
          bytes: a.bytes[i]!,
          config: imageConfig,
          bf16: imageDtypes[i] === 'bfloat16',
          float32: imageDtypes[i] !== 'bfloat16',
          maxPixels: a.snapshot.config.max_request_image_pixels,
          ...(file ? { shm: file.task } : {}),
        },
        Promise.resolve(headers[i]),
      );
      const r = await job.result;
      sources[i] = { width: r.width, height: r.height };
      let written = false;
      if (file) {
        const values = file.task.kind === 'float32' ? r.pixelValues : r.bf16;
        if (r.shm?.written && values) {
          written = true;
          prewritten.push({ bytes: new Uint8Array(values.buffer, values.byteOffset, values.byteLength), name: file.name, micros: r.shm.micros });
        } else {
          scope.discard(file.name); // ours (reserve created it), not written: placed the usual way
          if (r.shm && !r.shm.written && r.shm.error !== PREWRITE_HEADER_MISMATCH) record.prewriteFailed ??= r.shm.error;
        }
      }
      // The family's model-specific tensors of the image (for Qwen: its grid and patch count).
      const modelTensors = family.imageTensors(r);
      const encoderShape = family.encoderShape(r, imageConfig);
      if (miss) {
        const kept = await cached.keep(
          cache!,
          miss,
          r,
          modelTensors,
          encoderShape,
          kindOf(i),
          a.hashes[i]!,
          written ? file!.task.path : undefined,
          receivers[i]!.spec.url,
          readWrite[i]!,
        );
        // The cache now counts the file's bytes (the inode has its name too): once, not twice.
        if (kept.stored && written) scope.uncount(file!.name);
        releases.push(kept.release);
      } else releases.push(r.release);
      return {
        ...(r.pixelValues ? { pixelValues: r.pixelValues } : {}),
        ...(r.bf16 ? { bf16: r.bf16 } : {}),
        patches: r.patches,
        features: r.features,
        encoderShape,
        modelTensors,
        placeholder: { offset: 0, length: r.tokens },
        mediaHash: a.hashes[i]!,
        ...(encoded ? { encoded: encoded[i]! } : {}),
      };
    } catch (err) {
      miss?.abandon();
      throw toApiError(err, { imageParams: a.imageParams, image: i });
    }
  };
  const settled = await Promise.allSettled(a.bytes.map((_, i) => imageOf(i)));
  try {
    const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
    if (failed) throw failed.reason;
    const own = settled.map((s) => (s as PromiseFulfilledResult<PreparedImage>).value);
    const images = padsCrops ? paddedToBatch(own) : own;
    timing.mark('preprocess');
    const slots = images.map((p, i) => slotOf(ctx.model, family, () => p.modelTensors, p.placeholder.length, sources[i]!));
    const built = await (early && headerSlots.every((n, i) => sameSlot(n, slots[i]!)) ? early : promptFor(ctx, a, slots));
    if ('error' in built) throw built.error;
    built.prompt.placeholders.forEach((range, i) => (images[i]!.placeholder = range));
    checkContext(ctx, a, built.prompt);
    timing.mark('prompt');
    return { prompt: built.prompt, images, encoderDtype: dtype, imageDtypes, scope, prewritten, cached, release };
  } catch (err) {
    release();
    scope.cleanup();
    throw err;
  }
}

/** What the client asked of sampling (null and absent alike: not asked). */
export function clientSampling(a: AdmittedRequest): ClientSampling {
  const { req } = a;
  const given = <T>(v: T | null | undefined): v is T => v !== null && v !== undefined;
  return {
    ...(a.maxTokens !== undefined ? { maxTokens: a.maxTokens } : {}),
    ...(given(req.temperature) ? { temperature: req.temperature } : {}),
    ...(given(req.top_p) ? { topP: req.top_p } : {}),
    ...(given(req.top_k) ? { topK: req.top_k } : {}),
    ...(given(req.min_p) ? { minP: req.min_p } : {}),
    ...(given(req.repetition_penalty) ? { repetitionPenalty: req.repetition_penalty } : {}),
    ...(given(req.frequency_penalty) ? { frequencyPenalty: req.frequency_penalty } : {}),
    ...(given(req.presence_penalty) ? { presencePenalty: req.presence_penalty } : {}),
    ...(given(req.stop) ? { stop: typeof req.stop === 'string' ? [req.stop] : req.stop } : {}),
  };
}

/** The id of a stop string that is exactly one token of the model's vocabulary (encoded without special tokens), as the gateway tells them. */
export function singleTokenStop(ctx: RouterContext, stop: string): number | undefined {
  const ids = ctx.model.tokenizer.encode(stop);
  return ids.length === 1 ? ids[0] : undefined;
}

/**
 * The engine-neutral request for a prepared chat, as `target` receives it: what every engine
 * builds its GenerateRequest from. Its sampling takes the model defaults of `sampler`, the
 * worker that samples the completion (the target itself, or under disaggregation the decode
 * worker).
 */
export function engineRequestOf(ctx: RouterContext, a: AdmittedRequest, p: PreparedRequest, target: Target, sampler: Target = target): EngineRequest {
  const sampling = resolveSampling(clientSampling(a), samplingDefaultsOf(sampler.state.labels).defaults, (s) => singleTokenStop(ctx, s));
  return {
    requestId: a.requestId,
    text: p.prompt.text,
    inputIds: p.prompt.inputIds,
    images: p.images,
    imageTokenId: ctx.model.imageTokenId,
    sampling,
    stream: a.req.stream === true,
    encoderDtype: p.encoderDtype,
    encoderReadWrite: capabilitiesOf(target.state.runtime!).attachesShmReadWrite('generate', p.encoderDtype, target.state.labels),
  };
}
