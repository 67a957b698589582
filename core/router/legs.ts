// The legs of a disaggregated request (disaggregated.ts runs them): one image's Encode call,
// the prefill call, the decode stream. Each places its tensors by the lane of the worker that
// reads them, is sent again inline (attempt 2, the same room) when that worker cannot read its
// files, and ends when another leg fails (Legs.onStop). docs/router.md, "Disaggregated serving".
import type { EngineFailure, EngineRequest, PreparedImage, WireRequest } from '../engines/engine.ts';
import { engineFor } from '../engines/table.ts';
import type { PlacementContext } from '../transport/placement.ts';
import type { ShmRequestScope } from '../transport/shm-writer.ts';
import type { LegName } from '../transport/event-schema.ts';
import { readFailedReason } from '../transport/vocabulary.ts';
import type { AdmittedRequest } from './admit.ts';
import { LegClock, STOPPED_BY_OTHER_LEG, STOPPED_CLIENT_GONE, type ChatOptions, type RequestRecord, type RouterContext } from './context.ts';
import { chatResponder } from './dispatch.ts';
import { EngineFailureError, toApiError } from './errors.ts';
import { laneFor } from './lane.ts';
import { ApiError } from './openai.ts';
import type { PreparedRequest } from './prepare.ts';
import type { ResponseTarget } from './responder.ts';
import type { RoleTarget } from './roles.ts';
import { isShmReadFailure, ShmReadFailure, streamFromWorker } from './stream.ts';
import type { RequestTiming } from './timing.ts';

export interface Legs {
  ctx: RouterContext;
  a: AdmittedRequest;
  p: PreparedRequest;
  record: RequestRecord;
  /** The request's timing, from its arrival (each leg's record is timed by it). */
  timing: RequestTiming;
  options: ChatOptions;
  deadline: number;
  /**
   * A leg failed. The request's failure is the first one whose worker is gone, or else the
   * first one reported within LEG_FAILURE_GRACE_MS; the other legs are stopped with it.
   */
  fail(error: ApiError): void;
  /** Whether the request's failure is decided (the legs are being stopped). */
  failed(): boolean;
  /** A leg starts (`who` as its errors name it); call what it returns when it has succeeded. */
  begin(who: string): () => void;
  /** The failure that ended the request (when failed()). */
  failure(): ApiError;
  onStop(stop: () => void): void;
}

/** Leg errors whose worker is gone (UNAVAILABLE): the cause of whatever the other legs then report. */
const workerGoneErrors = new WeakSet<ApiError>();

/** Whether a leg's error says its worker is gone (it answered UNAVAILABLE, and is out of rotation). */
export function isWorkerGoneError(error: ApiError): boolean {
  return workerGoneErrors.has(error);
}

/** Leg errors that are a wait in vain for another leg's transfer (the worker's own deadline, a peer's bootstrap server it could not reach): error -> the leg's name. */
const waitFailures = new WeakMap<ApiError, string>();

/** The leg (as its errors name it) whose error this is, when the error says it waited in vain for another leg. */
export function waitingLegOf(error: ApiError): string | undefined {
  return waitFailures.get(error);
}

/** Why a leg was ended before it finished: the request's failure elsewhere, the client gone, or the answer already complete. */
function whyStopped(l: Legs): string {
  if (!l.failed()) return 'the request had its answer';
  return l.failure().status === 499 ? STOPPED_CLIENT_GONE : STOPPED_BY_OTHER_LEG;
}

function legError(failure: EngineFailure, who: string, url: string, l: Legs): ApiError {
  const error = toApiError(new EngineFailureError(failure, url, l.a.snapshot.config.request_timeout_secs, { who, deadline: l.deadline }));
  if (failure.kind === 'unavailable') workerGoneErrors.add(error);
  if (failure.kind === 'deadline' || failure.status === 'FAILED_PRECONDITION') waitFailures.set(error, who);
  return error;
}

function placementFor(
  l: Legs,
  target: RoleTarget,
  scope: ShmRequestScope,
  leg: LegName,
  room: bigint | undefined,
  prewritten: PlacementContext['prewritten'],
): PlacementContext {
  const { decision, minBytes } = laneFor(l.ctx, l.a.snapshot, target.spec, target.state, l.options);
  return {
    requestId: l.a.requestId,
    revision: l.a.snapshot.revision,
    source: l.options.source ?? 'api',
    worker: target.spec.url,
    runtime: target.state.runtime!,
    decision,
    minBytes,
    writer: l.ctx.writer,
    scope,
    metrics: l.ctx.metrics,
    events: l.ctx.events,
    tally: l.record.paths,
    ...(l.record.tensors ? { kept: l.record.tensors } : {}),
    prewritten,
    cached: l.p.cached,
    leg,
    ...(room !== undefined ? { room } : {}),
  };
}

/** The placement of a retry after the worker could not read the files: inline, attempt 2, the reason in the mode's words. */
function inlineRetry(l: Legs, target: RoleTarget, first: PlacementContext, details: string): PlacementContext {
  const resolved = laneFor(l.ctx, l.a.snapshot, target.spec, target.state, l.options).resolved;
  l.ctx.registry.breakShmLane(target.state, details);
  l.ctx.metrics.shmReadFallbacks.inc({ runtime: target.state.runtime! });
  l.record.shmFallback = details;
  return {
    ...first,
    scope: l.ctx.writer.newScope(),
    attempt: 2,
    prewritten: [],
    decision: { shmEnabled: false, reason: readFailedReason(resolved.multimodal_tensor_transport.value), worker: target.spec.url, detail: details },
  };
}

/** The files prewritten for one image, moved from the request's scope to the scope of its own Encode call. */
function takeImageFiles(p: PreparedRequest, image: PreparedImage, scope: ShmRequestScope): NonNullable<PlacementContext['prewritten']> {
  const buffers = [image.bf16?.buffer, image.pixelValues?.buffer].filter((b) => b !== undefined);
  const mine = p.prewritten.filter((w) => buffers.includes(w.bytes.buffer as ArrayBuffer));
  for (const w of mine) {
    p.prewritten.splice(p.prewritten.indexOf(w), 1);
    p.scope.transferTo(scope, w.name);
  }
  return mine;
}

/** One image's Encode call; its files are gone when it returns. */
export async function encodeImage(l: Legs, target: RoleTarget, index: number, room: bigint): Promise<void> {
  const engine = engineFor(target.state.runtime!);
  const image = l.p.images[index]!;
  const request = {
    requestId: l.a.requestId,
    image,
    requestImages: l.p.images,
    index,
    imageTokenId: l.ctx.model.imageTokenId,
    room,
    encoderDtype: l.p.imageDtypes[index]!,
  };
  const who = `encode worker ${target.spec.url} (image ${index})`;
  const succeeded = l.begin(who);
  const first = placementFor(l, target, l.ctx.writer.newScope(), 'encode', room, []);
  first.prewritten = takeImageFiles(l.p, image, first.scope);
  let placement = first;
  let clock = LegClock.begin(l.record, l.timing, 'encode', target.spec.url, { image: index });
  try {
    for (let attempt = 1; attempt <= 2; attempt++) {
      const wire = await engine.buildEncodeRequest!(request, placement);
      for (const w of placement.prewritten?.splice(0) ?? []) placement.scope.discard(w.name);
      clock.sent();
      if (l.failed()) return clock.stop(whyStopped(l));
      const call = target.state.connection!.encode!(wire, { deadline: l.deadline });
      // Another leg's failure (or the client leaving) ends this call too.
      let stopped = false;
      l.onStop(() => {
        stopped = true;
        call.cancel();
      });
      const answer = await call.done;
      if (stopped || l.failed()) return clock.stop(whyStopped(l));
      if ('accepted' in answer) {
        if (!answer.accepted) throw new ApiError(502, `${who} did not accept the image (EncodeResponse.accepted is false)`, 'server_error');
        placement.scope.complete();
        clock.end();
        succeeded();
        return;
      }
      if (answer.failure.kind === 'unavailable') l.ctx.registry.markDown(target.state, `${answer.failure.status}: ${answer.failure.details}`);
      if (attempt === 1 && !l.options.probe && placement.scope.pending.length > 0 && isShmReadFailure(answer.failure)) {
        clock.end(`could not read the request's /dev/shm files: ${answer.failure.status}: ${answer.failure.details}`);
        placement.scope.cleanup();
        placement = inlineRetry(l, target, first, `${answer.failure.status}: ${answer.failure.details}`);
        clock = LegClock.begin(l.record, l.timing, 'encode', target.spec.url, { image: index, attempt: 2 });
        continue;
      }
      throw legError(answer.failure, who, target.spec.url, l);
    }
  } catch (err) {
    clock.end(toApiError(err).message);
    throw err;
  } finally {
    placement.scope.cleanup();
    first.scope.cleanup();
  }
}

/** What a prefill call came to: a failure, or its end (with the KV transfer parameters a sequential prefill returns). */
type PrefillOutcome = { failure: EngineFailure } | { kvTransferParamsJson: string | undefined };

/** The prefill leg: its tokens are not the client's (the decode worker has the completion). */
function prefillOnce(l: Legs, target: RoleTarget, wire: WireRequest): Promise<PrefillOutcome> {
  return new Promise((resolve) => {
    let done = false;
    let kvTransferParamsJson: string | undefined;
    const call = target.state.connection!.generate(
      wire,
      { deadline: l.deadline },
      {
        event(ev) {
          if (ev.kind === 'complete') kvTransferParamsJson = ev.kvTransferParamsJson;
        },
        failure(failure) {
          if (done) return;
          done = true;
          if (failure.kind === 'unavailable') l.ctx.registry.markDown(target.state, `${failure.status}: ${failure.details}`);
          resolve({ failure });
        },
        end() {
          if (done) return;
          done = true;
          resolve({ kvTransferParamsJson });
        },
      },
    );
    l.onStop(() => {
      if (done) return;
      done = true;
      // A cancelled call reports nothing more: the leg is over now.
      call.cancel();
      target.state.connection!.abort(l.a.requestId, 'another leg of the request failed');
      resolve({ kvTransferParamsJson: undefined });
    });
  });
}

/** The prefill leg, sent again inline when the worker cannot read its files; the KV transfer parameters it returned (a sequential prefill). */
export async function runPrefill(l: Legs, target: RoleTarget, request: EngineRequest, room: bigint | undefined): Promise<string | undefined> {
  const engine = engineFor(target.state.runtime!);
  const who = `prefill worker ${target.spec.url}`;
  const succeeded = l.begin(who);
  // Under PD the pixels are the prefill worker's, in the request's scope (prewritten there).
  const first = placementFor(l, target, l.p.scope, 'prefill', room, l.p.prewritten);
  let placement = first;
  let clock = LegClock.begin(l.record, l.timing, 'prefill', target.spec.url);
  try {
    for (let attempt = 1; ; attempt++) {
      const wire = await engine.buildRequest(request, placement);
      for (const w of placement.prewritten?.splice(0) ?? []) placement.scope.discard(w.name);
      clock.sent();
      if (l.failed()) {
        clock.stop(whyStopped(l));
        placement.scope.cleanup();
        return undefined;
      }
      const outcome = await prefillOnce(l, target, wire);
      if (l.failed()) {
        clock.stop(whyStopped(l));
        placement.scope.cleanup();
        return undefined;
      }
      if (!('failure' in outcome)) {
        placement.scope.complete();
        clock.end();
        succeeded();
        return outcome.kvTransferParamsJson;
      }
      const { failure } = outcome;
      const unreadFiles = placement.scope.pending.length > 0;
      placement.scope.cleanup();
      if (attempt === 1 && !l.options.probe && unreadFiles && isShmReadFailure(failure)) {
        clock.end(`could not read the request's /dev/shm files: ${failure.status}: ${failure.details}`);
        placement = inlineRetry(l, target, first, `${failure.status}: ${failure.details}`);
        clock = LegClock.begin(l.record, l.timing, 'prefill', target.spec.url, { attempt: 2 });
        continue;
      }
      throw legError(failure, who, target.spec.url, l);
    }
  } catch (err) {
    clock.end(toApiError(err).message);
    throw err;
  }
}

export interface DisaggregatedInput {
  res: ResponseTarget;
  timing: RequestTiming;
  record: RequestRecord;
  options: ChatOptions;
  isGone: () => boolean;
}

/** The decode leg, the client's answer; sent again inline when the worker cannot read its files (its tensors follow the lane it resolves to). */
export async function streamDecode(
  l: Legs,
  target: RoleTarget,
  request: EngineRequest,
  room: bigint | undefined,
  d: DisaggregatedInput,
  scopes: ShmRequestScope[],
  stopWith: (stop: (error: ApiError) => void) => void,
): Promise<void> {
  const engine = engineFor(target.state.runtime!);
  const who = `decode worker ${target.spec.url}`;
  const succeeded = l.begin(who);
  const first = placementFor(l, target, l.ctx.writer.newScope(), 'decode', room, []);
  scopes.push(first.scope);
  let placement = first;
  let clock = LegClock.begin(l.record, l.timing, 'decode', target.spec.url);
  for (let attempt = 1; ; attempt++) {
    let wire: WireRequest;
    try {
      wire = await engine.buildRequest(request, placement);
    } catch (err) {
      clock.end(toApiError(err).message);
      throw err;
    }
    if (attempt === 1) d.timing.mark('place');
    clock.sent();
    if (l.failed()) {
      clock.stop(whyStopped(l));
      throw l.failure();
    }
    try {
      await streamFromWorker(l.ctx, target.state, wire, {
        clock,
        record: l.record,
        requestId: l.a.requestId,
        model: l.a.model,
        scope: placement.scope,
        res: d.res,
        responder: chatResponder(l.a, d.res),
        isGone: d.isGone,
        timeoutSecs: l.a.snapshot.config.request_timeout_secs,
        timing: d.timing,
        stop: request.sampling.stop,
        deadline: l.deadline,
        leg: { who, deadline: l.deadline },
        stopWith,
      });
      succeeded();
      return;
    } catch (err) {
      if (!(err instanceof ShmReadFailure) || attempt > 1 || l.options.probe)
        throw err instanceof ShmReadFailure ? new ApiError(502, `${who} could not read the request's /dev/shm files: ${err.details}`, 'server_error') : err;
      placement.scope.cleanup();
      placement = inlineRetry(l, target, first, err.details);
      clock = LegClock.begin(l.record, l.timing, 'decode', target.spec.url, { attempt: 2 });
      scopes.push(placement.scope);
    }
  }
}
