// A chat request under disaggregated serving (docs/router.md, "Disaggregated serving"), after
// the gateway's EPD/PD protocol: one prefill and one decode worker meet on a KV bootstrap
// room the router picks (a random 63-bit number) at the prefill worker's bootstrap server;
// under EPD each image also goes to an encode worker in its own Encode call, with a room of
// its own at that encode worker's bootstrap server, and the prefill worker is told where to
// take each embedding. All calls run at once, each with the request's deadline; the decode
// worker's stream is the client's answer. Every tensor travels as its receiver's transport
// says: an image's pixels by its encode worker's (EPD) or the prefill worker's (PD) lane, as
// a regular worker's would; the decode leg carries no pixels. A worker that cannot read the
// files gets that call again inline (attempt 2, the same room). A leg's failure ends the
// others and is the request's error, naming the worker and, for an encode call, the image
// (a worker gone, reported within LEG_FAILURE_GRACE_MS, before what follows from it; a leg that
// waited in vain for another, after the legs before it that had not finished; at the router's
// deadline, every leg not finished). The legs themselves are legs.ts.
import { randomBytes } from 'node:crypto';
import { bootstrapAddress } from '../config/schema.ts';
import type { EncodeBootstrapItem, EngineRequest, KvBootstrap, Leg } from '../engines/engine.ts';
import { samplingSummary } from '../engines/sampling.ts';
import { engineFor } from '../engines/table.ts';
import type { ShmRequestScope } from '../transport/shm-writer.ts';
import type { AdmittedRequest } from './admit.ts';
import type { RouterContext } from './context.ts';
import { toApiError } from './errors.ts';
import { encodeImage, isWorkerGoneError, runPrefill, streamDecode, waitingLegOf, type DisaggregatedInput, type Legs } from './legs.ts';
import { ApiError } from './openai.ts';
import { engineRequestOf, prepare, type PreparedRequest } from './prepare.ts';
import { encodeWorkerFor, selectDisaggregatedRoute, type DisaggregatedRoute, type RoleTarget } from './roles.ts';

export type { DisaggregatedInput } from './legs.ts';

/** A bootstrap room: random, 63 bits (a non-negative int64 on the wire). */
export function newBootstrapRoom(): bigint {
  return randomBytes(8).readBigUInt64LE(0) >> 1n;
}

/** Serve an admitted request across its prefill, decode and (EPD) encode workers. */
export async function serveDisaggregated(ctx: RouterContext, a: AdmittedRequest, d: DisaggregatedInput): Promise<void> {
  const route = selectDisaggregatedRoute(ctx, a.snapshot, d.options.worker);
  const epd = route.mode === 'epd' && a.bytes.length > 0;
  const encoders = epd ? a.hashes.map((h) => encodeWorkerFor(ctx, a.snapshot, h, d.options.worker)) : [];
  d.record.worker = route.prefill.spec.url;
  const involved = [...new Set([route.prefill.state, route.decode.state, ...encoders.map((e) => e.state)])];
  for (const w of involved) ctx.registry.acquire(w);
  try {
    const p = await prepare(ctx, a, route.prefill, d.options, d.timing, d.record, epd ? encoders : undefined);
    try {
      await runLegs(ctx, a, p, route, encoders, d);
    } finally {
      // Whatever the outcome (an answer, a failure, a client gone): no file of the request stays.
      p.scope.cleanup();
      p.release();
    }
  } finally {
    for (const w of involved) ctx.registry.release(w);
  }
}

/**
 * How long the other legs of a request may still report a failure nearer its cause once one
 * leg has failed. An encode worker that dies fails its Encode call (UNAVAILABLE) and, at the
 * same moment, the prefill worker's fetch from its bootstrap server (FAILED_PRECONDITION); the
 * prefill's report could arrive first, naming a bootstrap address instead of the worker, and
 * the Encode call, stopped with it, would not take the dead worker out of rotation.
 */
export const LEG_FAILURE_GRACE_MS = 200;

/** `a`, `a and b`, `a, b and c`. */
function listed(items: readonly string[]): string {
  return items.length <= 1 ? (items[0] ?? '') : `${items.slice(0, -1).join(', ')} and ${items.at(-1)}`;
}

/**
 * A leg that waited in vain for another's transfer (a prefill worker that got no embedding, or
 * could not reach the encode worker's bootstrap server) failed because of a leg before it that
 * has not finished (a hung encode worker): the error names those first, the wait's words after.
 */
function namingUpstream(error: ApiError, unfinished: ReadonlyMap<string, number>): ApiError {
  const waiting = waitingLegOf(error);
  if (waiting === undefined) return error;
  const upstream: Array<[string, number]> = [];
  for (const leg of unfinished) {
    if (leg[0] === waiting) break;
    upstream.push(leg);
  }
  if (upstream.length === 0) return error;
  const secs = ((performance.now() - Math.min(...upstream.map(([, at]) => at))) / 1000).toFixed(1);
  const whos = upstream.map(([who]) => who);
  const calls = whos.length > 1 ? 'their calls' : whos[0]!.startsWith('encode worker') ? 'its Encode call' : 'its call';
  return new ApiError(error.status, `${listed(whos)} had not answered ${calls} after ${secs} s; ${error.message}`, error.type, error.param, error.code);
}

async function runLegs(
  ctx: RouterContext,
  a: AdmittedRequest,
  p: PreparedRequest,
  route: DisaggregatedRoute,
  encoders: readonly RoleTarget[],
  d: DisaggregatedInput,
): Promise<void> {
  const timeoutSecs = a.snapshot.config.request_timeout_secs;
  let failure: ApiError | undefined;
  let firstReported: ApiError | undefined;
  let grace: NodeJS.Timeout | undefined;
  // Set once the request is over: a leg that fails while the rest wind down decides nothing.
  let finished = false;
  let announce!: () => void;
  const decided = new Promise<void>((resolve) => (announce = resolve));
  const stops: Array<() => void> = [];
  let stopDecode: ((error: ApiError) => void) | undefined;
  // The legs begun and not (yet) succeeded, in the order they began (encode, prefill, decode), with when they began.
  const unfinished = new Map<string, number>();
  const decide = (error: ApiError) => {
    if (failure) return;
    clearTimeout(grace);
    // The router's own deadline ends every leg at once: name all that had not finished, not
    // only the one whose timer fired first (a decode waiting for a hung encode worker's embedding).
    failure =
      error.status === 504 && error.type === 'timeout' && unfinished.size > 1
        ? new ApiError(504, `${listed([...unfinished.keys()])} did not finish within ${timeoutSecs} s`, 'timeout')
        : namingUpstream(error, unfinished);
    for (const stop of stops.splice(0)) stop();
    stopDecode?.(failure);
    announce();
  };
  const l: Legs = {
    ctx,
    a,
    p,
    record: d.record,
    timing: d.timing,
    options: d.options,
    deadline: Date.now() + timeoutSecs * 1000,
    fail(error) {
      if (failure || finished) return;
      if (isWorkerGoneError(error)) return decide(error);
      if (firstReported) return;
      firstReported = error;
      grace = setTimeout(() => decide(error), LEG_FAILURE_GRACE_MS);
    },
    failed: () => failure !== undefined,
    begin(who) {
      unfinished.set(who, performance.now());
      return () => unfinished.delete(who);
    },
    failure: () => failure!,
    onStop(stop) {
      if (failure) stop();
      else stops.push(stop);
    },
  };
  // A client that goes away ends every leg (the decode's own stream sees it too).
  const onClose = () => {
    if (d.res.writableFinished || failure) return;
    clearTimeout(grace);
    failure = new ApiError(499, 'the client went away');
    for (const stop of stops.splice(0)) stop();
    announce();
  };
  d.res.on('close', onClose);
  let others: Array<Promise<unknown>> = [];
  const decodeScopes: ShmRequestScope[] = [];
  try {
    // The decode worker samples the completion: its model defaults fill what the client left out.
    const base = engineRequestOf(ctx, a, p, route.prefill, route.decode);
    const decodeBase = engineRequestOf(ctx, a, p, route.decode);
    d.record.sampling = samplingSummary(decodeBase.sampling);
    let decodeLeg: Leg;
    let room: bigint | undefined;
    const engine = engineFor(route.prefill.state.runtime!);
    if (engine.capabilities.pd === 'sequential' && engine.kvHandoff) {
      // One leg after the other: the prefill first (one token, and the KV handoff its
      // connector makes); the decode takes what the handoff gives it, or recomputes the
      // prompt (with the pixels) when there is none.
      const handoff = engine.kvHandoff({ labels: route.prefill.state.labels, ...bootstrapAddress(route.prefill.spec)! });
      const returned = await runPrefill(
        l,
        route.prefill,
        { ...base, leg: { role: 'prefill', pixels: true, prefillOnly: true, ...handoff.prefill } },
        undefined,
      );
      if (failure) throw failure;
      const { recomputed, ...given } = handoff.decode(returned);
      d.record.kvHandoff = recomputed ? `${handoff.mode}: ${recomputed}` : handoff.mode;
      decodeLeg = { role: 'decode', ...given };
    } else {
      // All at once: the legs meet on rooms at the prefill's and the encode workers' bootstrap servers.
      const kv: KvBootstrap = { ...bootstrapAddress(route.prefill.spec)!, room: newBootstrapRoom() };
      room = kv.room;
      const rooms = encoders.map(() => newBootstrapRoom());
      const encodeBootstrap: EncodeBootstrapItem[] = encoders.map((e, i) => ({ item: i, ...bootstrapAddress(e.spec)!, room: rooms[i]! }));
      const prefillRequest: EngineRequest = {
        ...base,
        leg: { role: 'prefill', pixels: encoders.length === 0, kvBootstrap: kv, ...(encoders.length ? { encodeBootstrap } : {}) },
      };
      others = [...encoders.map((e, i) => encodeImage(l, e, i, rooms[i]!)), runPrefill(l, route.prefill, prefillRequest, kv.room)].map((leg) =>
        leg.catch((err: unknown) => l.fail(err instanceof ApiError ? err : toApiError(err))),
      );
      decodeLeg = { role: 'decode', pixels: false, kvBootstrap: kv };
    }
    await streamDecode(l, route.decode, { ...decodeBase, leg: decodeLeg }, room, d, decodeScopes, (stop) => {
      stopDecode = stop;
    });
  } catch (err) {
    // The decode (or vLLM's prefill before it) failed: reported like any leg's failure, so a
    // worker gone or an earlier leg's failure (the cause a decode's error may follow from)
    // is the client's answer when there is one.
    if (!failure) {
      l.fail(err instanceof ApiError ? err : toApiError(err));
      await decided;
    }
    throw failure!;
  } finally {
    finished = true;
    clearTimeout(grace);
    // A leg reported a failure, yet the decode answered: the client has its answer; the log line says what failed.
    if (firstReported && !failure) d.record.legFailed = firstReported.message;
    d.res.off('close', onClose);
    // The decode is over (answered, failed, or the client left): no other leg is needed now.
    for (const stop of stops.splice(0)) stop();
    await Promise.all(others);
    for (const scope of decodeScopes) scope.cleanup();
  }
}
