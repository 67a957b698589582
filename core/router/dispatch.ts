// Phase 3 of a chat request: dispatch (docs/transport.md, "A worker that cannot read the
// files"). The worker's engine builds its GenerateRequest, every tensor placed inline or in
// /dev/shm by the lane the request gets now; files written during preparation for a lane that
// changed since are discarded before the call; then the Generate stream (stream.ts). A worker
// that could not read the request's files, before anything reached the client, gets the same
// request once more, inline: attempt 2 of the same tensors, its reason in the mode's own words
// (shm_worker_read_failed, auto_worker_read_failed) and the worker's error as its cause; its
// lane stays inline until it is rediscovered or reset. Any failure unlinks the request's files.
import type { WireRequest } from '../engines/engine.ts';
import { samplingSummary } from '../engines/sampling.ts';
import { engineFor } from '../engines/table.ts';
import type { WorkerSpec } from '../config/schema.ts';
import type { PlacementContext } from '../transport/placement.ts';
import type { ShmRequestScope } from '../transport/shm-writer.ts';
import { readFailedReason, type TensorPath } from '../transport/vocabulary.ts';
import type { WorkerState } from '../workers/registry.ts';
import type { AdmittedRequest } from './admit.ts';
import { LegClock, REVISION_HEADER, STOPPED_CLIENT_GONE, type ChatOptions, type RequestRecord, type RouterContext } from './context.ts';
import { toApiError } from './errors.ts';
import { laneFor } from './lane.ts';
import { ApiError } from './openai.ts';
import { engineRequestOf, type PreparedRequest } from './prepare.ts';
import { ChatResponder, type ResponseTarget } from './responder.ts';
import { ShmReadFailure, streamFromWorker } from './stream.ts';
import type { RequestTiming } from './timing.ts';

export interface DispatchInput {
  target: { state: WorkerState; spec: WorkerSpec };
  res: ResponseTarget;
  timing: RequestTiming;
  record: RequestRecord;
  options: ChatOptions;
  isGone: () => boolean;
}

/** The client's answer to a chat request: JSON or SSE as asked, naming the config revision that served it. */
export function chatResponder(a: AdmittedRequest, res: ResponseTarget): ChatResponder {
  return new ChatResponder(res, {
    stream: a.req.stream === true,
    includeUsage: a.req.stream_options?.include_usage === true,
    requestId: a.requestId,
    created: Math.floor(Date.now() / 1000),
    model: a.model,
    headers: { [REVISION_HEADER]: String(a.snapshot.revision) },
  });
}

export async function dispatch(ctx: RouterContext, a: AdmittedRequest, p: PreparedRequest, d: DispatchInput): Promise<void> {
  const { state: worker, spec } = d.target;
  const runtime = worker.runtime!;
  const engine = engineFor(runtime);
  const { decision, minBytes, resolved } = laneFor(ctx, a.snapshot, spec, worker, d.options);
  const placement: PlacementContext = {
    requestId: a.requestId,
    revision: a.snapshot.revision,
    source: d.options.source ?? 'api',
    worker: spec.url,
    runtime,
    decision,
    minBytes,
    writer: ctx.writer,
    scope: p.scope,
    metrics: ctx.metrics,
    events: ctx.events,
    tally: d.record.paths,
    ...(d.record.tensors ? { kept: d.record.tensors } : {}),
    prewritten: p.prewritten,
    cached: p.cached,
  };
  const engineRequest = engineRequestOf(ctx, a, p, d.target);
  d.record.sampling = samplingSummary(engineRequest.sampling);
  const responder = chatResponder(a, d.res);
  let clock = LegClock.begin(d.record, d.timing, 'regular', spec.url);
  const stream = (wire: WireRequest, scope: ShmRequestScope) =>
    streamFromWorker(ctx, worker, wire, {
      clock,
      record: d.record,
      requestId: a.requestId,
      model: a.model,
      scope,
      res: d.res,
      responder,
      isGone: d.isGone,
      timeoutSecs: a.snapshot.config.request_timeout_secs,
      timing: d.timing,
      stop: engineRequest.sampling.stop,
    });

  let current = p.scope;
  try {
    const wire = await engine.buildRequest(engineRequest, placement);
    // Written files the request did not send (the lane changed since): gone before the call.
    for (const w of placement.prewritten?.splice(0) ?? []) p.scope.discard(w.name);
    d.timing.mark('place');
    clock.sent();
    if (d.isGone()) {
      clock.stop(STOPPED_CLIENT_GONE);
      p.scope.cleanup();
      return;
    }
    try {
      await stream(wire, p.scope);
    } catch (err) {
      if (!(err instanceof ShmReadFailure)) throw err;
      if (d.options.probe) throw new ApiError(502, `worker ${spec.url} could not read the request's /dev/shm files: ${err.details}`, 'server_error');
      // The worker could not open what we wrote (another uid, another /dev/shm): not the
      // client's problem. Send the same request once more, inline, and keep this worker's
      // lane inline until it is rediscovered or the operator resets it.
      p.scope.cleanup();
      ctx.registry.breakShmLane(worker, err.details);
      ctx.metrics.shmReadFallbacks.inc({ runtime });
      d.record.shmFallback = err.details;
      for (const path of Object.keys(d.record.paths) as TensorPath[]) d.record.paths[path] = 0;
      current = ctx.writer.newScope();
      clock = LegClock.begin(d.record, d.timing, 'regular', spec.url, { attempt: 2 });
      const inline: PlacementContext = {
        ...placement,
        scope: current,
        attempt: 2,
        prewritten: [],
        decision: { shmEnabled: false, reason: readFailedReason(resolved.multimodal_tensor_transport.value), worker: spec.url, detail: err.details },
      };
      const retry = await engine.buildRequest(engineRequest, inline);
      clock.sent();
      await stream(retry, current);
    }
  } catch (err) {
    current.cleanup();
    clock.end(toApiError(err).message);
    throw err;
  }
}
