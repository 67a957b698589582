// Phase 1 of a chat request: admission (docs/router.md, "Limits", "Workers"). The request is
// parsed against the OpenAI schema and refused before any heavy work when its image count, a
// completion that could never fit, or text whose bytes alone prove it longer than the context
// say so; its images' bytes are loaded under the media policy and the per-request byte
// budget; and a worker of the request's own config revision is picked. What the later phases
// derive from the request (the completion limit, the model name) is derived here, once.
import { randomUUID } from 'node:crypto';
import type { RouterConfig, WorkerSpec } from '../config/schema.ts';
import type { ConfigSnapshot } from '../config/store.ts';
import { loadImageBytes, RequestImageBudget } from '../multimodal/fetch.ts';
import { mediaHash } from '../multimodal/media-hash.ts';
import { createMediaPolicy, type MediaPolicy } from '../multimodal/media-policy.ts';
import { ContextLengthError } from '../multimodal/prompt.ts';
import { outOfRotationReason, type WorkerState } from '../workers/registry.ts';
import type { RouterContext } from './context.ts';
import { contextLengthApiError, toApiError } from './errors.ts';
import { ApiError, parseChatRequest, type ChatCompletionRequest } from './openai.ts';

/** A request admitted: parsed, within the limits, its images' bytes loaded. */
export interface AdmittedRequest {
  req: ChatCompletionRequest;
  snapshot: ConfigSnapshot;
  requestId: string;
  /** Each image's parameter path, for errors about it (`messages[0].content[1].image_url.url`). */
  imageParams: string[];
  /** Each image's encoded bytes, in prompt order. */
  bytes: Uint8Array[];
  /** Each image's media hash (BLAKE3 of its bytes, core/multimodal/media-hash.ts): the workers' content hashes, the pixel cache's key, EPD's ring point. */
  hashes: Buffer[];
  /** The completion limit asked for (max_completion_tokens, else max_tokens). */
  maxTokens: number | undefined;
  /** The model the response names: the request's own, else the router's. */
  model: string;
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

function forgetImageUrls(req: ChatCompletionRequest): void {
  for (const m of req.messages) if (Array.isArray(m.content)) for (const p of m.content) if (p.type === 'image_url') p.image_url.url = LOADED_IMAGE_URL;
}

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

/** The limits checked before any heavy work; the image bytes are bounded as they arrive, their pixels from their headers (prepare.ts). */
function checkLimits(ctx: RouterContext, config: RouterConfig, req: ChatCompletionRequest, images: readonly ImageRef[], maxTokens: number | undefined): void {
  const limit = config.limit_mm_per_prompt.image;
  if (images.length > limit) {
    throw new ApiError(
      400,
      `this request has ${images.length} images; at most ${limit} are accepted per request (limit_mm_per_prompt.image = ${limit})`,
      'invalid_request_error',
      'messages',
    );
  }
  const context = ctx.model.maxContextLength;
  if (maxTokens !== undefined && maxTokens >= context) {
    const param = req.max_completion_tokens != null ? 'max_completion_tokens' : 'max_tokens';
    throw new ApiError(
      400,
      `${param} is ${maxTokens}, but this model's maximum context length is ${context} tokens, prompt and completion together`,
      'invalid_request_error',
      param,
      'context_length_exceeded',
    );
  }
  const atLeast = Math.ceil(textLength(req) / ctx.model.maxTokenBytes);
  if (atLeast > context) throw contextLengthApiError(new ContextLengthError(atLeast, context, true));
}

/** Parse and check the request, then load its images' bytes. Throws the API error a refusal is. */
export async function admit(ctx: RouterContext, body: unknown, onParsed: (requestId: string, revision: number) => void): Promise<AdmittedRequest> {
  const snapshot = ctx.store.current();
  const config = snapshot.config;
  const req = parseChatRequest(body);
  const requestId = `chatcmpl-${randomUUID().replaceAll('-', '')}`;
  onParsed(requestId, snapshot.revision);
  const images = imagesOf(req);
  const maxTokens = req.max_completion_tokens ?? req.max_tokens ?? undefined;
  checkLimits(ctx, config, req, images, maxTokens);
  const budget = new RequestImageBudget(config.max_request_image_bytes);
  const sourceOptions = {
    maxBytes: config.max_image_bytes,
    timeoutMs: config.media_fetch_timeout_secs * 1000,
    policy: mediaPolicyOf(config),
    requestBudget: budget,
  };
  const imageParams = images.map((im) => im.param);
  const bytes = await Promise.all(images.map((im, i) => loadImageBytes(im.url, i, sourceOptions))).catch((err: unknown) => {
    throw toApiError(err, { imageParams });
  });
  // The image URLs (a data: URL is the image, base64) are not needed once their bytes are here:
  // let them go now rather than when the request ends.
  forgetImageUrls(req);
  return { req, snapshot, requestId, imageParams, bytes, hashes: bytes.map(mediaHash), maxTokens, model: req.model ?? ctx.modelName };
}

/** 503 for a config with workers but none that takes a whole chat request. */
function noRegularWorker(snapshot: ConfigSnapshot): ApiError {
  const types = new Map<string, number>();
  for (const w of snapshot.config.workers) types.set(w.worker_type, (types.get(w.worker_type) ?? 0) + 1);
  const present = [...types].map(([t, n]) => `${n} ${t}`).join(', ');
  return new ApiError(
    503,
    `no regular worker is configured (configured: ${present}); routing one request across prefill, decode and encode workers needs disaggregation: pd or epd`,
    'service_unavailable',
  );
}

/** A healthy regular worker of the request's revision (or the one the console pinned), by the revision's policy. */
export function selectWorker(ctx: RouterContext, snapshot: ConfigSnapshot, pinned?: string): { state: WorkerState; spec: WorkerSpec } {
  if (pinned !== undefined && !snapshot.config.workers.some((w) => w.url === pinned))
    throw new ApiError(404, `no worker ${pinned} in configuration revision ${snapshot.revision}`);
  const eligible = snapshot.config.workers.filter((w) => w.worker_type === 'regular' && (pinned === undefined || w.url === pinned));
  if (eligible.length === 0 && pinned !== undefined)
    throw new ApiError(400, `worker ${pinned} is not a regular worker: a whole chat request only goes to a regular worker`);
  if (eligible.length === 0 && snapshot.config.workers.length > 0) throw noRegularWorker(snapshot);
  const picked = ctx.registry.select(snapshot.config.policy, eligible);
  if (picked) return picked;
  const reasons = eligible.map((spec) => `${spec.url}: ${outOfRotationReason(ctx.registry.get(spec.url)) ?? 'not yet discovered'}`);
  throw new ApiError(503, `no healthy worker (${reasons.join('; ') || 'none configured'})`, 'service_unavailable');
}
