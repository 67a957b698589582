// Phase 4 of a chat request: the worker's Generate stream, to the client (docs/router.md,
// "What happens to a request"). Token ids are checked against the vocabulary, detokenized
// incrementally (a stream sends deltas as they come, a JSON answer the whole text at the end),
// cut at the client's first stop string (stop-matcher.ts: a stream that meets one ends there,
// finish_reason stop, and the worker's call is cancelled and aborted, since SGLang would
// generate on to its token limit) and answered by the responder; the first token's time is
// the router's TTFT. A client that
// goes away cancels the call, sends Abort and unlinks the request's files; a failure before
// anything was sent becomes the request's API error, after it the stream's error event. A
// worker that says it could not read the request's /dev/shm files, before anything was sent,
// is a ShmReadFailure: the dispatcher sends the request again inline.
import type { EngineEvent, EngineFailure, WireRequest } from '../engines/engine.ts';
import { routerLabels } from '../telemetry/metrics.ts';
import { SHM_PREFIX } from '../transport/shm-names.ts';
import type { ShmRequestScope } from '../transport/shm-writer.ts';
import type { WorkerState } from '../workers/registry.ts';
import { STOPPED_BY_OTHER_LEG, STOPPED_CLIENT_GONE, type LegClock, type RequestRecord, type RouterContext } from './context.ts';
import { IncrementalDetokenizer } from './detokenizer.ts';
import { StopMatcher } from './stop-matcher.ts';
import { EngineFailureError, toApiError } from './errors.ts';
import { ApiError, openAiFinishReason } from './openai.ts';
import type { ChatResponder, ResponseTarget } from './responder.ts';
import type { RequestTiming } from './timing.ts';

/** A worker's answer that it could not read the request's /dev/shm files. */
export class ShmReadFailure extends Error {
  constructor(readonly details: string) {
    super(details);
  }
}

const SHM_READ_FAILURE = new RegExp(`${SHM_PREFIX}|/dev/shm|\\[Errno (?:2|13)\\]|\\bEACCES\\b|\\bENOENT\\b|\\bEPERM\\b|Permission denied|No such file`, 'i');

/**
 * How workers say they could not open or read a file in /dev/shm: our reference worker names
 * the file and the errno, Python servicers raise FileNotFoundError / PermissionError with
 * "[Errno 2]" / "[Errno 13]" and the path.
 */
export function isShmReadFailure(failure: EngineFailure): boolean {
  if (failure.kind !== 'broken' && failure.kind !== 'rejected') return false;
  return SHM_READ_FAILURE.test(failure.details);
}

export interface StreamOptions {
  requestId: string;
  model: string;
  scope: ShmRequestScope;
  res: ResponseTarget;
  responder: ChatResponder;
  isGone: () => boolean;
  timeoutSecs: number;
  timing: RequestTiming;
  /** Disaggregated serving: hands over how to end this stream with an error when another leg of the request failed. */
  stopWith?: (stop: (error: ApiError) => void) => void;
  /** The client's stop strings: the answer ends at the first (stop-matcher.ts). */
  stop?: readonly string[];
  /** The deadline of the call (default: now + timeoutSecs). */
  deadline?: number;
  /** Disaggregated serving: the worker as its leg names it, and the router's deadline (a DEADLINE_EXCEEDED before it is the worker's own). */
  leg?: { who: string; deadline: number };
  /** This call's leg in the request's record: its first token, its end. */
  clock?: LegClock;
  /** The request's record: an error after the answer began is noted there. */
  record?: RequestRecord;
}

/** Resolves when the response is complete (or the client left); rejects only before anything was written. */
export function streamFromWorker(ctx: RouterContext, worker: WorkerState, wire: WireRequest, o: StreamOptions): Promise<void> {
  const connection = worker.connection!;
  const detok = new IncrementalDetokenizer(ctx.model);
  const stops = new StopMatcher(o.stop ?? []);
  let complete: Extract<EngineEvent, { kind: 'complete' }> | undefined;
  let promptTokens = 0;

  return new Promise<void>((resolve, reject) => {
    let settled = false;
    const settle = (error?: ApiError) => {
      if (settled) return;
      settled = true;
      o.res.off('close', onClose);
      o.clock?.end(error?.message);
      if (!error) return resolve();
      o.scope.cleanup();
      if (!o.responder.streaming) return reject(error);
      if (o.record) o.record.streamError = error.message;
      o.responder.fail(error);
      resolve();
    };
    const onClose = () => {
      if (complete || o.res.writableFinished || settled) return;
      settled = true;
      o.clock?.stop(STOPPED_CLIENT_GONE);
      call.cancel();
      connection.abort(o.requestId, 'client disconnected');
      o.scope.cleanup();
      resolve();
    };
    if (o.isGone()) {
      o.clock?.stop(STOPPED_CLIENT_GONE);
      o.scope.cleanup();
      return resolve();
    }
    o.res.on('close', onClose);

    let firstToken = true;
    const call = connection.generate(
      wire,
      { deadline: o.deadline ?? Date.now() + o.timeoutSecs * 1000 },
      {
        event(ev) {
          if (firstToken && ev.tokenIds.length > 0) {
            firstToken = false;
            o.clock?.firstToken();
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
          if (!o.responder.stream) return detok.collect(ev.tokenIds);
          o.responder.delta(stops.push(detok.push(ev.tokenIds)));
          if (stops.done && !complete) {
            // The client's answer ends at the stop: the worker need not generate on.
            call.cancel();
            connection.abort(o.requestId, 'a stop sequence of the request was matched');
            o.scope.complete();
            const usage = { prompt_tokens: promptTokens, completion_tokens: detok.count, total_tokens: promptTokens + detok.count };
            o.responder.finish('', 'stop', usage);
            settle();
          }
        },
        failure(failure) {
          if (failure.kind === 'unavailable') ctx.registry.markDown(worker, `${failure.status}: ${failure.details}`);
          // Nothing sent to the client yet and the worker could not read our files: the caller retries inline.
          if (!o.responder.streaming && o.scope.pending.length > 0 && isShmReadFailure(failure) && !settled) {
            settled = true;
            o.res.off('close', onClose);
            o.clock?.end(`could not read the request's /dev/shm files: ${failure.status}: ${failure.details}`);
            return reject(new ShmReadFailure(`${failure.status}: ${failure.details}`));
          }
          settle(toApiError(new EngineFailureError(failure, worker.spec.url, o.timeoutSecs, o.leg)));
        },
        end() {
          if (!complete) return settle(new ApiError(502, `worker ${worker.spec.url} ended the stream without a completion`));
          o.scope.complete();
          const prompt = complete.promptTokens || promptTokens;
          const usage = { prompt_tokens: prompt, completion_tokens: detok.count, total_tokens: prompt + detok.count };
          if (o.responder.stream) {
            const last = stops.done ? '' : stops.push(detok.flush());
            o.responder.finish(last + stops.flush(), stops.done ? 'stop' : openAiFinishReason(complete.finishReason), usage);
          } else {
            o.timing.mark('worker');
            const text = stops.cut(detok.text());
            o.responder.finish(text, stops.done ? 'stop' : openAiFinishReason(complete.finishReason), usage, { 'server-timing': o.timing.header() });
          }
          settle();
        },
      },
    );
    o.stopWith?.((error) => {
      if (settled || complete) return;
      o.clock?.stop(STOPPED_BY_OTHER_LEG);
      call.cancel();
      connection.abort(o.requestId, 'another leg of the request failed');
      settle(error);
    });
  });
}
