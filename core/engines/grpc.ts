// What every engine shares about talking gRPC with grpc-js: the channel settings (inline
// tensors of a few hundred MB must fit what the router sends; what it takes back is capped at
// what a reply needs), how a
// worker URL becomes a gRPC target, unary calls with a deadline, how a gRPC status maps onto
// the engine-neutral failure the router turns into an HTTP status, the Generate response
// every protocol shapes alike (a chunk or a completion), and the connection built on them.
import * as grpc from '@grpc/grpc-js';
import type { WireRuntime } from '../config/schema.ts';
import { messageFor, type EngineConnection, type EngineEvent, type EngineFailure, type GenerateCall, type GenerateSink, type WorkerInfo } from './engine.ts';

/** The largest message the router sends a worker: a request with its inline tensors (hundreds of MB). */
export const REQUEST_MESSAGE_MAX_BYTES = 1024 * 1024 * 1024;
/**
 * The largest message the router takes from a worker. Replies are small (a chunk's or a
 * completion's token ids, 5 bytes each at most: 16 MiB holds over 3 million; health, model and
 * server info; an Encode's `accepted`); grpc-js refuses a larger one from its length prefix,
 * before reading it, so a worker's reply costs the router at most this (twice, while it is
 * joined and decoded) per call in flight.
 */
export const WORKER_REPLY_MAX_BYTES = 16 * 1024 * 1024;

/** The router's channels to its workers. */
export const GRPC_CHANNEL_OPTIONS: grpc.ChannelOptions = {
  'grpc.max_receive_message_length': WORKER_REPLY_MAX_BYTES,
  'grpc.max_send_message_length': REQUEST_MESSAGE_MAX_BYTES,
  'grpc.keepalive_time_ms': 30_000,
};

/** grpc://host:port -> host:port; unix:///path stays as is (grpc-js understands it). */
export function grpcTarget(url: string): string {
  if (url.startsWith('grpc://')) return url.slice('grpc://'.length);
  if (url.startsWith('unix://')) return url;
  throw new Error(`unsupported worker url '${url}': expected grpc://host:port or unix:///path`);
}

export function unary<Req, Res>(
  fn: (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown,
  req: Req,
  timeoutMs: number,
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn(req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

export function describeGrpcError(err: unknown): string {
  const e = err as grpc.ServiceError;
  if (typeof e?.code === 'number') return `${grpc.status[e.code] ?? e.code}: ${e.details || e.message}`;
  return String((err as Error)?.message ?? err);
}

const BROKEN = new Set([grpc.status.UNAVAILABLE, grpc.status.INTERNAL, grpc.status.UNKNOWN, grpc.status.ABORTED, grpc.status.DATA_LOSS]);

export function engineFailure(err: grpc.ServiceError): EngineFailure {
  const status = grpc.status[err.code] ?? String(err.code);
  // grpc-js's words for a reply past WORKER_REPLY_MAX_BYTES: the worker's doing, not a refusal.
  const tooLarge = err.code === grpc.status.RESOURCE_EXHAUSTED ? /^Received message larger than max \((\d+) vs (\d+)\)$/.exec(err.details ?? '') : null;
  if (tooLarge)
    return { kind: 'broken', status, details: `its reply message of ${tooLarge[1]} bytes is above the ${tooLarge[2]} bytes the router takes from a worker` };
  const details = err.details || err.message;
  if (err.code === grpc.status.DEADLINE_EXCEEDED) return { kind: 'deadline', status, details };
  if (err.code === grpc.status.CANCELLED) return { kind: 'cancelled', status, details };
  if (err.code === grpc.status.UNAVAILABLE) return { kind: 'unavailable', status, details };
  if (BROKEN.has(err.code)) return { kind: 'broken', status, details };
  return { kind: 'rejected', status, details };
}

/**
 * A server-streaming Generate call read into the neutral sink: every message through
 * `toEvent`, then exactly one of failure or end. After cancel() the sink hears nothing more
 * (the caller asked for it).
 */
export function readGenerateStream<Res>(
  call: grpc.ClientReadableStream<Res>,
  toEvent: (res: Res) => EngineEvent | undefined,
  sink: GenerateSink,
): GenerateCall {
  let settled = false;
  call.on('data', (res: Res) => {
    if (settled) return;
    const ev = toEvent(res);
    if (ev) sink.event(ev);
  });
  call.on('error', (err: grpc.ServiceError) => {
    if (settled) return;
    settled = true;
    sink.failure(engineFailure(err));
  });
  call.on('end', () => {
    if (settled) return;
    settled = true;
    sink.end();
  });
  return {
    cancel: () => {
      settled = true;
      call.cancel();
    },
  };
}

/** A Generate response as every protocol here shapes it: a streamed chunk or the completion. */
export interface GenerateResponseLike {
  response?:
    | { $case: 'chunk'; value: { tokenIds: number[]; promptTokens: number; completionTokens: number } }
    | {
        $case: 'complete';
        value: {
          outputIds: number[];
          finishReason: string;
          promptTokens: number;
          completionTokens: number;
          cachedTokens: number;
          kvTransferParamsJson?: string | undefined;
        };
      }
    | undefined;
}

/** The neutral event of a Generate response. */
export function generateEvent(res: GenerateResponseLike): EngineEvent | undefined {
  const r = res.response;
  if (r?.$case === 'chunk')
    return { kind: 'chunk', tokenIds: r.value.tokenIds, promptTokens: r.value.promptTokens, completionTokens: r.value.completionTokens };
  if (r?.$case === 'complete') {
    const v = r.value;
    return {
      kind: 'complete',
      tokenIds: v.outputIds,
      finishReason: v.finishReason,
      promptTokens: v.promptTokens,
      completionTokens: v.completionTokens,
      cachedTokens: v.cachedTokens,
      ...(v.kvTransferParamsJson ? { kvTransferParamsJson: v.kvTransferParamsJson } : {}),
    };
  }
  return undefined;
}

type Unary<Req, Res> = (req: Req, md: grpc.Metadata, opts: Partial<grpc.CallOptions>, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown;

/** The calls of a generated grpc-js client every engine makes. */
export interface GeneratedClient<GenReq, GenRes extends GenerateResponseLike> {
  generate(req: GenReq, md: grpc.Metadata, opts: Partial<grpc.CallOptions>): grpc.ClientReadableStream<GenRes>;
  healthCheck: Unary<Record<string, never>, { healthy: boolean; message: string }>;
  close(): void;
}

/**
 * One channel to one worker over a generated client: Generate read into the neutral stream,
 * HealthCheck, and the runtime's own Abort and model/server info (how it names the request
 * to abort, which labels its answers become).
 */
export function grpcConnection<GenReq, GenRes extends GenerateResponseLike, C extends GeneratedClient<GenReq, GenRes>>(o: {
  runtime: WireRuntime;
  url: string;
  client: C;
  abort(client: C, requestId: string, reason: string): void;
  info(client: C, timeoutMs: number): Promise<WorkerInfo>;
}): EngineConnection {
  const { client } = o;
  return {
    runtime: o.runtime,
    url: o.url,
    generate(request, options, sink) {
      const call = client.generate(messageFor<GenReq>(request, o.runtime), new grpc.Metadata(), { deadline: options.deadline });
      return readGenerateStream(call, generateEvent, sink);
    },
    abort: (requestId, reason) => o.abort(client, requestId, reason),
    health: (timeoutMs) => unary(client.healthCheck.bind(client), {}, timeoutMs),
    info: (timeoutMs) => o.info(client, timeoutMs),
    close: () => client.close(),
  };
}

/** Deadline for a fire-and-forget Abort. */
export const ABORT_DEADLINE_MS = 2000;
