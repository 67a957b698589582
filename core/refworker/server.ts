// The reference worker: a real gRPC server speaking the TokenSpeed or the vLLM protocol,
// reading tensors exactly as real workers do (SPEC §5: O_NOFOLLOW, regular file, read at
// offset, unlink after read) and answering with a deterministic completion that states what
// it received, e.g. `1 image: encoder_input [4900,1176] bfloat16 via shm, 11524800 bytes,
// fnv1a 1f0e…`. It advertises its real /dev/shm namespace token unless told otherwise.
//
// The sentence is tokenized with the model directory's tokenizer (the bundled one by
// default), so the router's detokenizer turns it back into the same text.
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
import { loadModelDirectory } from '../multimodal/model-dir.ts';
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
  /** Hold each Generate this long before reading its tensors (a queued request, for demos and failure tests). */
  delayMs?: number;
}

interface ReceivedTensor {
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

/** What must hold for one image once its tensors are read (the runtime's own rules). */
interface ImageCheck {
  label: string;
  /** Name of the encoder-input tensor and the rows of it this image owns. */
  encoder: string;
  /** Name of the int64 grid tensor and which of its rows is this image's. */
  grid: string;
  gridRow: number;
  placeholders: Array<{ offset: number; length: number }>;
  placeholderTokenId: number | undefined;
}

class RequestInvalid extends Error {}

function tensorsOfTokenSpeed(req: TsGenerateRequest): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const items = req.mmInputs?.items ?? [];
  const tensors: NamedTensor[] = [];
  const checks: ImageCheck[] = [];
  items.forEach((item, i) => {
    const suffix = items.length > 1 ? `[${i}]` : '';
    if (!item.encoderInput) throw new RequestInvalid(`item ${i} has no encoder_input`);
    if (!item.modelSpecificTensors.image_grid_thw) throw new RequestInvalid(`item ${i} has no image_grid_thw tensor`);
    tensors.push({ name: `encoder_input${suffix}`, tensor: wireTensorFromTensorData(item.encoderInput) });
    for (const [key, t] of Object.entries(item.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
      tensors.push({ name: `${key}${suffix}`, tensor: wireTensorFromTensorData(t) });
    }
    checks.push({ label: `item ${i}`, encoder: `encoder_input${suffix}`, grid: `image_grid_thw${suffix}`, gridRow: 0, placeholders: item.placeholders, placeholderTokenId: item.placeholderTokenId });
  });
  return { images: items.length, tensors, checks };
}

function tensorsOfVllm(req: VllmGenerateRequest): { images: number; tensors: NamedTensor[]; checks: ImageCheck[] } {
  const mm = req.mmInputs;
  if (!mm) return { images: 0, tensors: [], checks: [] };
  if (!mm.pixelValues) throw new RequestInvalid('mm_inputs has no pixel_values');
  if (!mm.modelSpecificTensors.image_grid_thw) throw new RequestInvalid('mm_inputs has no image_grid_thw tensor');
  const tensors: NamedTensor[] = [{ name: 'pixel_values', tensor: wireTensorFromTensorData(mm.pixelValues) }];
  for (const [key, t] of Object.entries(mm.modelSpecificTensors).sort(([a], [b]) => (a < b ? -1 : 1))) {
    tensors.push({ name: key, tensor: wireTensorFromTensorData(t) });
  }
  const checks = mm.mmPlaceholders.map((p, i) => ({ label: `image ${i}`, encoder: 'pixel_values', grid: 'image_grid_thw', gridRow: i, placeholders: [p], placeholderTokenId: mm.imTokenId }));
  return { images: mm.mmPlaceholders.length, tensors, checks };
}

/** The runtime's consistency rules: grids match the encoder rows, placeholders sit inside the prompt. */
function validateImages(checks: ImageCheck[], grids: Map<string, number[]>, rows: Map<string, number>, inputIds: readonly number[], mergeSize: number): void {
  const rowsUsed = new Map<string, number>();
  for (const c of checks) {
    const grid = grids.get(c.grid);
    if (!grid) throw new RequestInvalid(`${c.label}: ${c.grid} is missing or not int64`);
    const thw = grid.slice(c.gridRow * 3, c.gridRow * 3 + 3);
    if (thw.length !== 3) throw new RequestInvalid(`${c.label}: ${c.grid} has no row ${c.gridRow}`);
    const patches = thw[0]! * thw[1]! * thw[2]!;
    rowsUsed.set(c.encoder, (rowsUsed.get(c.encoder) ?? 0) + patches);
    const tokens = patches / (mergeSize * mergeSize);
    for (const p of c.placeholders) {
      if (p.offset + p.length > inputIds.length) throw new RequestInvalid(`${c.label}: placeholder range [${p.offset}, ${p.offset + p.length}) is outside the ${inputIds.length} input ids`);
      if (p.length !== tokens) throw new RequestInvalid(`${c.label}: placeholder length ${p.length} does not match grid ${thw.join('x')} (${tokens} tokens)`);
      if (c.placeholderTokenId !== undefined && inputIds.slice(p.offset, p.offset + p.length).some((id) => id !== c.placeholderTokenId)) {
        throw new RequestInvalid(`${c.label}: placeholder range holds ids other than ${c.placeholderTokenId}`);
      }
    }
  }
  for (const [name, used] of rowsUsed) {
    const have = rows.get(name);
    if (have !== used) throw new RequestInvalid(`${name} has ${have} rows but the grids describe ${used} patches`);
  }
}

/** Read every tensor (so SHM files are unlinked), check the request, then describe it in one sentence. */
function receive(
  runtime: WireRuntime,
  job: { tensors: NamedTensor[]; images: number; checks: ImageCheck[]; inputIds: readonly number[] },
  reader: TensorReader,
  fingerprint: boolean,
  mergeSize: number,
  metrics?: TransportMetrics,
): string {
  const received: ReceivedTensor[] = [];
  const grids = new Map<string, number[]>();
  const rows = new Map<string, number>();
  for (const { name, tensor } of job.tensors) {
    if (runtime === 'vllm' && !VLLM_DTYPES.has(tensor.dtype)) {
      throw new TensorReadError('unknown_dtype', `vLLM accepts float32, int64 and uint32 tensors; ${name} is ${tensor.dtype || 'missing a dtype'}`);
    }
    const read = reader.read(tensor);
    if (read.path === 'shm') metrics?.shmReadSeconds.observe({ runtime }, read.micros / 1e6);
    try {
      if (tensor.dtype === 'int64' && read.bytes.byteLength <= 4096) {
        grids.set(name, Array.from(new BigInt64Array(Uint8Array.from(read.bytes).buffer), Number));
      }
      if (tensor.shape.length === 2) rows.set(name, tensor.shape[0]!);
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
  validateImages(job.checks, grids, rows, job.inputIds, mergeSize);
  const parts = received.map((t) => `${t.name} [${t.shape.join(',')}] ${t.dtype} via ${t.path}, ${t.nbytes} bytes${t.fnv1a ? `, fnv1a ${t.fnv1a}` : ''}`);
  const head = job.images === 0 ? 'no images' : `${job.images} image${job.images === 1 ? '' : 's'}`;
  return parts.length ? `${head}: ${parts.join('; ')}` : `${head}.`;
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
  const model = await loadModelDirectory(options.modelPath);
  const modelPath = model.path;

  interface GenerateJob {
    requestId: string;
    stream: boolean;
    inputIds: readonly number[];
    maxTokens: number | undefined;
    images: number;
    tensors: NamedTensor[];
    checks: ImageCheck[];
  }
  /** One Generate call, the same for both protocols; only the response messages differ. */
  function serveGenerate<Res>(
    call: grpc.ServerWritableStream<unknown, Res>,
    job: () => GenerateJob,
    build: { chunk(ids: number[], completionTokens: number, promptTokens: number): Res; complete(ids: number[], finish: string, promptTokens: number, completionTokens: number): Res },
  ) {
    if (options.delayMs && !call.cancelled) {
      const timer = setTimeout(() => serveGenerateNow(call, job, build), options.delayMs);
      call.on('cancelled', () => clearTimeout(timer));
      return;
    }
    serveGenerateNow(call, job, build);
  }
  function serveGenerateNow<Res>(
    call: grpc.ServerWritableStream<unknown, Res>,
    job: () => GenerateJob,
    build: { chunk(ids: number[], completionTokens: number, promptTokens: number): Res; complete(ids: number[], finish: string, promptTokens: number, completionTokens: number): Res },
  ) {
    if (call.cancelled) return;
    let requestId: string | undefined;
    try {
      const j = job();
      requestId = j.requestId;
      active.add(j.requestId);
      const text = receive(options.runtime, j, reader, fingerprint, model.imageConfig.merge_size, options.metrics);
      const all = model.tokenizer.encode(text, { add_special_tokens: false }).ids;
      const ids = all.slice(0, j.maxTokens ?? Infinity);
      const finish = ids.length < all.length ? 'length' : 'stop';
      const promptTokens = j.inputIds.length;
      if (j.stream) for (let i = 0; i < ids.length; i += 4) call.write(build.chunk(ids.slice(i, i + 4), Math.min(ids.length, i + 4), promptTokens));
      call.write(build.complete(j.stream ? [] : ids, finish, promptTokens, ids.length));
      call.end();
    } catch (err) {
      const invalid = err instanceof TensorReadError || err instanceof RequestInvalid;
      call.emit('error', grpcError(invalid ? grpc.status.INVALID_ARGUMENT : grpc.status.INTERNAL, (err as Error).message));
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
          () => ({ requestId: req.requestId, stream: req.stream, inputIds: req.tokenized?.inputIds ?? [], maxTokens: req.samplingParams?.maxNewTokens, ...tensorsOfTokenSpeed(req) }),
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
            inputIds: req.input?.$case === 'tokenized' ? req.input.value.inputIds : [],
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
