// One chat completion, end to end, over one config snapshot, in four phases with a file each:
//   admit.ts    read the config store once, parse, check the limits, load the image bytes,
//               pick a regular worker of that revision
//   prepare.ts  headers -> pixel budget -> preprocess in the pool (in the worker's wire dtype,
//               written to /dev/shm as computed when the lane takes it) -> prompt
//   dispatch.ts the worker's engine builds its request, placing every tensor inline or in
//               /dev/shm; an inline retry when the worker cannot read its files
//   stream.ts   the Generate stream -> detokenize -> JSON or SSE (responder.ts)
// Under disaggregation pd or epd, disaggregated.ts takes the request after admission: its
// prefill, decode and encode workers (roles.ts), the same preparation, a call per leg.
// The phases know no protocol: the engine of the worker's runtime does (core/engines/). Every
// domain error becomes its API error in one table (errors.ts). Any failure after a /dev/shm
// write, and a client that goes away, unlinks every file of the request; a client that goes
// away also cancels the call and sends Abort.
import { admit, selectWorker } from './admit.ts';
import { keepRequest, newRequestRecord, recordChat, type ChatOptions, type RequestRecord, type RouterContext } from './context.ts';
import { serveDisaggregated } from './disaggregated.ts';
import { dispatch } from './dispatch.ts';
import { toApiError } from './errors.ts';
import { prepare } from './prepare.ts';
import { CapturedResponse, sendError, type ResponseTarget } from './responder.ts';
import { RequestTiming } from './timing.ts';

/** `timing` starts when the request arrives, and has its body span marked. */
export async function handleChatCompletion(
  ctx: RouterContext,
  body: unknown,
  res: ResponseTarget,
  timing: RequestTiming,
  record: RequestRecord,
  options: ChatOptions = {},
): Promise<void> {
  recordChat(ctx, record, options.source ?? 'api');
  let clientGone = false;
  res.on('close', () => {
    if (!res.writableFinished) clientGone = true;
  });
  const a = await admit(ctx, body, (id, revision) => {
    record.id = id;
    record.revision = revision;
  });
  timing.mark('fetch');
  if (a.snapshot.config.disaggregation !== 'none') {
    record.model = a.model;
    return serveDisaggregated(ctx, a, { res, timing, record, options, isGone: () => clientGone });
  }
  const target = selectWorker(ctx, a.snapshot, options.worker);
  record.worker = target.spec.url;
  record.model = a.model;
  // The request is the worker's from here on (its /dev/shm files may exist from now): a worker
  // removed meanwhile drains it before it closes.
  ctx.registry.acquire(target.state);
  try {
    const p = await prepare(ctx, a, target, options, timing, record);
    try {
      await dispatch(ctx, a, p, { target, res, timing, record, options, isGone: () => clientGone });
    } catch (err) {
      p.scope.cleanup();
      throw err;
    } finally {
      p.release();
    }
  } finally {
    ctx.registry.release(target.state);
  }
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
  let error: string | undefined;
  try {
    await handleChatCompletion(ctx, body, res, timing, record, options);
  } catch (err) {
    const apiError = toApiError(err);
    error = apiError.message;
    sendError(res, apiError);
  }
  keepRequest(ctx, record, res.statusCode, error, timing);
  return { status: res.statusCode, body: res.body, requestId: record.id, revision: record.revision, timing };
}
