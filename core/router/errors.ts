// Every domain error a chat request can end with, and the API error the client gets for it:
// one table, as the gateway keeps typed error enums, so a status and a code are decided in one
// place (docs/router.md, "Errors").
//
//   image input (a URL refused, too big, unreachable)   400 / 413, the image's own param
//   image decode or size (not an image, a zero side)     400 `image i: …`, the image's param
//   image memory (preprocessing budget exhausted)         413 `image i: …`, the image's param
//   prompt (a template the model's chat format refuses)  400
//   context length (prompt + completion over context)    400 context_length_exceeded, param messages
//   engine: deadline                                      504 timeout
//   engine: rejected (the worker refused the request)     502
//   engine: broken, unavailable, cancelled                502
//   anything else                                         500 internal error
import type { EngineFailure } from '../engines/engine.ts';
import { ImageDecodeError } from '../multimodal/decode.ts';
import { ImageInputError } from '../multimodal/fetch.ts';
import { ImageMemoryError } from '../multimodal/pool.ts';
import { ContextLengthError, PromptError } from '../multimodal/prompt.ts';
import { ImageSizeError } from '../multimodal/qwen-vl.ts';
import { ApiError } from './openai.ts';

/** What an error is about: the request's image parameters (`messages[0].content[1].image_url.url`), and the image it happened to. */
export interface ErrorScope {
  imageParams?: readonly string[];
  /** The image an error of preprocessing belongs to. */
  image?: number;
}

type Rule = { matches: (err: unknown) => boolean; toApi: (err: never, scope: ErrorScope) => ApiError };

const imageParam = (scope: ErrorScope, i: number | undefined) => (i === undefined ? null : (scope.imageParams?.[i] ?? null));

const RULES: readonly Rule[] = [
  { matches: (e) => e instanceof ApiError, toApi: (e: ApiError) => e },
  {
    matches: (e) => e instanceof ImageInputError,
    toApi: (e: ImageInputError, s) => new ApiError(e.status, e.message, 'invalid_request_error', imageParam(s, e.index)),
  },
  {
    matches: (e) => e instanceof ImageDecodeError || e instanceof ImageSizeError,
    toApi: (e: Error, s) => new ApiError(400, `image ${s.image}: ${e.message}`, 'invalid_request_error', imageParam(s, s.image)),
  },
  {
    matches: (e) => e instanceof ImageMemoryError,
    toApi: (e: ImageMemoryError, s) => new ApiError(413, `image ${s.image}: ${e.message}`, 'invalid_request_error', imageParam(s, s.image)),
  },
  { matches: (e) => e instanceof ContextLengthError, toApi: (e: ContextLengthError) => contextLengthApiError(e) },
  { matches: (e) => e instanceof PromptError, toApi: (e: PromptError) => new ApiError(400, e.message) },
  { matches: (e) => e instanceof EngineFailureError, toApi: (e: EngineFailureError) => engineFailureApiError(e) },
];

/** The API error for anything a request's phases throw. */
export function toApiError(err: unknown, scope: ErrorScope = {}): ApiError {
  const rule = RULES.find((r) => r.matches(err));
  return rule ? rule.toApi(err as never, scope) : new ApiError(500, `internal error: ${(err as Error)?.message ?? String(err)}`);
}

/** OpenAI's answer to a prompt longer than the context. */
export function contextLengthApiError(err: ContextLengthError): ApiError {
  return new ApiError(400, err.message, 'invalid_request_error', 'messages', 'context_length_exceeded');
}

/** A worker's Generate failed: which worker, how, and the deadline it had. */
export class EngineFailureError extends Error {
  constructor(
    readonly failure: EngineFailure,
    readonly workerUrl: string,
    readonly timeoutSecs: number,
    /** Under disaggregated serving: the worker as its part names it (`prefill worker grpc://…`, `encode worker grpc://… (image 1)`) and when the router's own deadline was. */
    readonly leg?: { who: string; deadline: number },
  ) {
    super(`worker ${workerUrl}: ${failure.kind}: ${failure.status}: ${failure.details}`);
  }
}

function engineFailureApiError(e: EngineFailureError): ApiError {
  const { failure, workerUrl, leg } = e;
  const who = leg ? leg.who : `worker ${workerUrl}`;
  // A leg's DEADLINE_EXCEEDED before the router's deadline is the worker's own (a transfer it waited for in vain): its words, not a timeout of ours.
  const ours = !leg || Date.now() >= leg.deadline - 100;
  if (failure.kind === 'deadline' && ours) return new ApiError(504, `${who} did not finish within ${e.timeoutSecs} s`, 'timeout');
  if (failure.kind === 'rejected') return new ApiError(502, `${who} rejected the request: ${failure.status}: ${failure.details}`, 'server_error');
  return new ApiError(502, `${who} failed: ${failure.status}: ${failure.details}`, 'server_error');
}
