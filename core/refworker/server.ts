// The reference worker: a real gRPC server speaking the TokenSpeed or the vLLM protocol,
// reading tensors exactly as real workers do (SPEC §5: O_NOFOLLOW, regular file, read at
// offset, unlink after read) and answering with a deterministic completion that states what
// it received, e.g. `1 image: encoder_input [4900,1176] bfloat16 via shm, 11524800 bytes,
// fnv1a 1f0e…`. It advertises its real /dev/shm namespace token unless told otherwise.
//
// Until a model directory supplies a tokenizer, completion token ids are the UTF-8 bytes of
// that sentence (the router decodes them the same way).
import * as grpc from '@grpc/grpc-js';
import { existsSync, unlinkSync } from 'node:fs';
import {
  TokenSpeedSchedulerService,
  type GenerateRequest as TsGenerateRequest,
  type GenerateResponse as TsGenerateResponse,
  type TokenSpeedSchedulerServer,
} from '../gen/tokenspeed/grpc/scheduler.ts';
import { VllmEngineService, type GenerateRequest as VllmGenerateRequest, type GenerateResponse as VllmGenerateResponse, type VllmEngineServer } from '../gen/vllm/grpc/engine.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import { fnv1a64Hex } from '../transport/fnv.ts';
import { readNamespaceToken } from '../transport/namespace.ts';
import { TensorReadError, TensorReader, type WireTensor } from '../transport/shm-reader.ts';
import { wireTensorFromTensorData } from '../transport/wire.ts';
import { GRPC_CHANNEL_OPTIONS, type WireRuntime } from '../workers/client.ts';

export interface ReferenceWorkerOptions {
  runtime: WireRuntime;
  host?: string;
  port?: number;
  /** Listen on a unix socket instead of host:port. */
  socket?: string;
  /** Advertise this token instead of the real one; '' advertises none. */
  shmNamespaceId?: string;
  modelPath?: string;
  /** Hash every tensor's bytes for the completion text (off for benchmarks). */
  fingerprint?: boolean;
  reader?: TensorReader;
  /** Where SHM read latency is observed (smg_mm_shm_read_seconds). */
  metrics?: TransportMetrics;
}

export interface ReceivedTensor {
  name: string;
  shape: number[];
  dtype: string;
  path: 'inline' | 'shm';
  nbytes: number;
  fnv1a?: string;
}

export interface ReferenceWorker {
  /** grpc://host:port or unix:///path, as a router's worker url. */
  url: string;
  runtime: WireRuntime;
  token: string | undefined;
  close(): Promise<void>;
}

const VLLM_DTYPES = new Set(['float32', 'int64', 'uint32']);

interface NamedTensor {
  name: string;
  tensor: WireTensor;
}

function tensorsOfTokenSpeed(req: TsGenerateRequest): { images: number; tensors: NamedTensor[] } {
  const items = req.mmInputs?.items ?? [];
  const tensors: NamedTensor[] = [];
  items.forEach((item, i) => {
    tensors.push({ name: items.length > 1 ? `encoder_input[${i}]` : 'encoder_input', tensor: wireTensorFromTensorData(item.encoderInput) });
    for (const [key, t] of Object.entries(item.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
      tensors.push({ name: items.length > 1 ? `${key}[${i}]` : key, tensor: wireTensorFromTensorData(t) });
    }
  });
  return { images: items.length, tensors };
}

function tensorsOfVllm(req: VllmGenerateRequest): { images: number; tensors: NamedTensor[] } {
  const mm = req.mmInputs;
  if (!mm) return { images: 0, tensors: [] };
  const tensors: NamedTensor[] = [{ name: 'pixel_values', tensor: wireTensorFromTensorData(mm.pixelValues) }];
  for (const [key, t] of Object.entries(mm.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
    tensors.push({ name: key, tensor: wireTensorFromTensorData(t) });
  }
  return { images: mm.mmPlaceholders.length, tensors };
}

/** Read every tensor (so SHM files are unlinked), then describe them in one sentence. */
function receive(runtime: WireRuntime, named: NamedTensor[], images: number, reader: TensorReader, fingerprint: boolean, metrics?: TransportMetrics): { text: string; received: ReceivedTensor[] } {
  const received: ReceivedTensor[] = [];
  for (const { name, tensor } of named) {
    if (runtime === 'vllm' && !VLLM_DTYPES.has(tensor.dtype)) {
      throw new TensorReadError('unknown_dtype', `vLLM accepts float32, int64 and uint32 tensors; ${name} is ${tensor.dtype || 'missing a dtype'}`);
    }
    const read = reader.read(tensor);
    if (read.path === 'shm') metrics?.shmReadSeconds.observe({ runtime }, read.micros / 1e6);
    try {
      received.push({
        name,
        shape: [...tensor.shape],
        dtype: tensor.dtype,
        path: read.path,
        nbytes: read.bytes.byteLength,
        ...(fingerprint ? { fnv1a: fnv1a64Hex(read.bytes) } : {}),
      });
    } finally {
      read.release();
    }
  }
  const parts = received.map((t) => `${t.name} [${t.shape.join(',')}] ${t.dtype} via ${t.path}, ${t.nbytes} bytes${t.fnv1a ? `, fnv1a ${t.fnv1a}` : ''}`);
  const head = images === 0 ? 'no images' : `${images} image${images === 1 ? '' : 's'}`;
  return { text: parts.length ? `${head}: ${parts.join('; ')}` : `${head}.`, received };
}

function textTokenIds(text: string): number[] {
  return [...Buffer.from(text, 'utf8')];
}

function grpcError(code: grpc.status, details: string): Partial<grpc.ServiceError> {
  return { code, details, message: details };
}

export async function startReferenceWorker(options: ReferenceWorkerOptions): Promise<ReferenceWorker> {
  const reader = options.reader ?? new TensorReader();
  const fingerprint = options.fingerprint ?? true;
  const token = options.shmNamespaceId !== undefined ? options.shmNamespaceId || undefined : readNamespaceToken().token;
  const started = Date.now();
  const active = new Set<string>();
  const server = new grpc.Server(GRPC_CHANNEL_OPTIONS);
  const modelPath = options.modelPath ?? 'bundled';

  interface GenerateJob {
    requestId: string;
    stream: boolean;
    promptTokens: number;
    maxTokens: number | undefined;
    images: number;
    tensors: NamedTensor[];
  }
  /** One Generate call, the same for both protocols; only the response messages differ. */
  function serveGenerate<Res>(
    call: grpc.ServerWritableStream<unknown, Res>,
    job: () => GenerateJob,
    build: { chunk(ids: number[], completionTokens: number, promptTokens: number): Res; complete(ids: number[], finish: string, promptTokens: number, completionTokens: number): Res },
  ) {
    let requestId: string | undefined;
    try {
      const j = job();
      requestId = j.requestId;
      active.add(j.requestId);
      const { text } = receive(options.runtime, j.tensors, j.images, reader, fingerprint, options.metrics);
      const ids = textTokenIds(text).slice(0, j.maxTokens ?? Infinity);
      const finish = j.maxTokens !== undefined && ids.length >= j.maxTokens ? 'length' : 'stop';
      if (j.stream) for (let i = 0; i < ids.length; i += 16) call.write(build.chunk(ids.slice(i, i + 16), Math.min(ids.length, i + 16), j.promptTokens));
      call.write(build.complete(j.stream ? [] : ids, finish, j.promptTokens, ids.length));
      call.end();
    } catch (err) {
      call.emit('error', grpcError(err instanceof TensorReadError ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL, (err as Error).message));
    } finally {
      if (requestId !== undefined) active.delete(requestId);
    }
  }

  if (options.runtime === 'tokenspeed') {
    const impl: TokenSpeedSchedulerServer = {
      generate(call) {
        const req = call.request;
        serveGenerate<TsGenerateResponse>(
          call,
          () => ({ requestId: req.requestId, stream: req.stream, promptTokens: req.tokenized?.inputIds.length ?? 0, maxTokens: req.samplingParams?.maxNewTokens, ...tensorsOfTokenSpeed(req) }),
          {
            chunk: (tokenIds, completionTokens, promptTokens) => ({ requestId: req.requestId, response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, index: 0 } } }),
            complete: (outputIds, finishReason, promptTokens, completionTokens) => ({
              requestId: req.requestId,
              response: { $case: 'complete', value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, matchedStop: undefined, index: 0 } },
            }),
          },
        );
      },
      healthCheck(_call, cb) {
        cb(null, { healthy: true, message: 'reference worker ready' });
      },
      abort(call, cb) {
        cb(null, { success: active.delete(call.request.requestId), message: '' });
      },
      getModelInfo(_call, cb) {
        cb(null, {
          modelPath,
          tokenizerPath: modelPath,
          servedModelName: 'mmtc-reference',
          modelType: 'qwen2_vl',
          architectures: ['Qwen2VLForConditionalGeneration'],
          maxContextLength: 32768,
          maxReqInputLen: 32768,
          vocabSize: 151936,
          eosTokenIds: [151645],
          padTokenId: 151643,
          bosTokenId: 151643,
          weightVersion: 'reference',
          defaultSamplingParamsJson: '',
          supportsVision: true,
          supportsMultimodal: true,
          supportedModalities: [1],
          modelDtype: 'bfloat16',
          multimodalEncoderDtype: 'bfloat16',
        });
      },
      getServerInfo(_call, cb) {
        cb(null, {
          serverArgs: { model_path: modelPath },
          schedulerInfo: token ? { shm_namespace_id: token } : {},
          activeRequests: active.size,
          isPaused: false,
          uptimeSeconds: (Date.now() - started) / 1000,
          maxTotalNumTokens: 32768,
          tokenspeedVersion: 'mmtc-reference',
          startTime: { seconds: Math.floor(started / 1000), nanos: (started % 1000) * 1e6 },
        });
      },
    };
    server.addService(TokenSpeedSchedulerService, impl);
  } else {
    const impl: VllmEngineServer = {
      generate(call) {
        const req = call.request;
        serveGenerate<VllmGenerateResponse>(
          call,
          () => ({
            requestId: req.requestId,
            stream: req.stream,
            promptTokens: req.input?.$case === 'tokenized' ? req.input.value.inputIds.length : 0,
            maxTokens: req.samplingParams?.maxTokens,
            ...tensorsOfVllm(req),
          }),
          {
            chunk: (tokenIds, completionTokens, promptTokens) => ({ response: { $case: 'chunk', value: { tokenIds, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, inputLogprobs: undefined, index: 0 } } }),
            complete: (outputIds, finishReason, promptTokens, completionTokens) => ({
              response: {
                $case: 'complete',
                value: { outputIds, finishReason, promptTokens, completionTokens, cachedTokens: 0, outputLogprobs: undefined, inputLogprobs: undefined, index: 0, matchedStop: undefined, kvTransferParamsJson: undefined },
              },
            }),
          },
        );
      },
      healthCheck(_call, cb) {
        cb(null, { healthy: true, message: 'reference worker ready' });
      },
      abort(call, cb) {
        for (const id of call.request.requestIds) active.delete(id);
        cb(null, {});
      },
      getModelInfo(_call, cb) {
        cb(null, {
          modelPath,
          isGeneration: true,
          maxContextLength: 32768,
          vocabSize: 151936,
          supportsVision: true,
          servedModelName: 'mmtc-reference',
          tokenizerPath: modelPath,
          modelType: 'qwen2_vl',
          architectures: ['Qwen2VLForConditionalGeneration'],
          eosTokenIds: [151645],
          padTokenId: 151643,
          bosTokenId: 151643,
          maxReqInputLen: 32768,
          defaultSamplingParamsJson: '',
        });
      },
      getServerInfo(_call, cb) {
        cb(null, {
          activeRequests: active.size,
          isPaused: false,
          lastReceiveTimestamp: Date.now() / 1000,
          uptimeSeconds: (Date.now() - started) / 1000,
          serverType: 'mmtc-reference',
          kvConnector: '',
          kvRole: '',
          kvEngineId: '',
          dataParallelSize: 1,
          shmNamespaceId: token ?? '',
        });
      },
    };
    server.addService(VllmEngineService, impl);
  }

  let url: string;
  if (options.socket) {
    if (existsSync(options.socket)) unlinkSync(options.socket);
    await bind(server, `unix://${options.socket}`);
    url = `unix://${options.socket}`;
  } else {
    const host = options.host ?? '127.0.0.1';
    const port = await bind(server, `${host.includes(':') ? `[${host}]` : host}:${options.port ?? 0}`);
    url = `grpc://${host.includes(':') ? `[${host}]` : host}:${port}`;
  }
  return {
    url,
    runtime: options.runtime,
    token,
    close: () =>
      new Promise<void>((resolve) => {
        server.tryShutdown(() => resolve());
        setTimeout(() => server.forceShutdown(), 2000).unref();
      }),
  };
}

function bind(server: grpc.Server, address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.bindAsync(address, grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(new Error(`cannot listen on ${address}: ${err.message}`)) : resolve(port)));
  });
}
