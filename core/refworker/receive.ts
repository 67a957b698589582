// What the reference worker does with a Generate request, whichever protocol carried it:
// read every tensor as real workers do (docs/transport.md, "Reading a tensor"), so /dev/shm
// files are unlinked; check the request by the runtime's own rules (grids match the encoder
// rows, placeholders sit inside the prompt and hold the image token); then describe what
// arrived in one sentence, e.g. `1 image: encoder_input [4900,1176] bfloat16 via shm,
// 11524800 bytes, fnv1a 1f0e…`. The runtime modules (tokenspeed.ts, vllm.ts, sglang.ts) only
// say where their protocol keeps the tensors and how to answer.
import type * as grpc from '@grpc/grpc-js';
import { status } from '@grpc/grpc-js';
import type { ModelDirectory } from '../multimodal/model-dir.ts';
import type { TransportMetrics } from '../telemetry/metrics.ts';
import { fnv1a64Hex } from '../transport/fnv.ts';
import { TensorReadError, type TensorReader, type WireTensor } from '../transport/shm-reader.ts';
import { type WireRuntime } from '../config/schema.ts';

export interface NamedTensor {
  name: string;
  tensor: WireTensor;
  /** The dtypes this tensor may have, when its role fixes them (a grid is int64, an encoder input a float). */
  dtypes?: TensorDtypes;
}

export interface TensorDtypes {
  allowed: ReadonlySet<string>;
  says: string;
}

/** The dtypes of the tensors the router sends, by role. */
export const ENCODER_DTYPES: TensorDtypes = { allowed: new Set(['float32', 'bfloat16', 'float16']), says: 'float32, bfloat16 or float16' };
export const INDEX_DTYPES: TensorDtypes = { allowed: new Set(['int64']), says: 'int64' };

/** What must hold for one image once its tensors are read. */
export interface ImageCheck {
  label: string;
  /** Name of the encoder-input tensor and the rows of it this image owns. */
  encoder: string;
  /** Name of the int64 grid tensor and which of its rows is this image's. */
  grid: string;
  gridRow: number;
  placeholders: Array<{ offset: number; length: number }>;
  placeholderTokenId: number | undefined;
}

/** A request that breaks the runtime's rules: INVALID_ARGUMENT. */
export class RequestInvalid extends Error {}

/** One Generate call, the same for both protocols once its runtime module has read it. */
export interface GenerateJob {
  requestId: string;
  stream: boolean;
  inputIds: readonly number[];
  maxTokens: number | undefined;
  images: number;
  tensors: NamedTensor[];
  checks: ImageCheck[];
  /** The dtypes the runtime accepts, when it restricts them (vLLM), and how it says so. */
  dtypeRule?: { allowed: ReadonlySet<string>; says: string };
}

/** How a runtime's responses are made from token ids. */
export interface ResponseBuilder<Res> {
  chunk(ids: number[], completionTokens: number, promptTokens: number): Res;
  complete(ids: number[], finish: string, promptTokens: number, completionTokens: number): Res;
}

interface ReceivedTensor {
  name: string;
  shape: number[];
  dtype: string;
  path: 'inline' | 'shm';
  nbytes: number;
  fnv1a?: string;
}

function validateImages(checks: ImageCheck[], grids: Map<string, number[]>, rows: Map<string, number>, inputIds: readonly number[], mergeSize: number): void {
  const rowsUsed = new Map<string, number>();
  // Every image has its place in the prompt, and every grid row is an image with one.
  const imagesOfGrid = new Map<string, number>();
  for (const c of checks) {
    if (c.placeholders.length === 0) throw new RequestInvalid(`${c.label}: no placeholder range (where the image's tokens go in the prompt)`);
    imagesOfGrid.set(c.grid, (imagesOfGrid.get(c.grid) ?? 0) + 1);
  }
  for (const [name, images] of imagesOfGrid) {
    const grid = grids.get(name);
    if (grid && grid.length / 3 !== images) throw new RequestInvalid(`${name} has ${grid.length / 3} rows but the request places ${images} image${images === 1 ? '' : 's'} in the prompt`);
  }
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

/** Read every tensor, check the request, then describe it in one sentence. */
export function receive(runtime: WireRuntime, job: GenerateJob, reader: TensorReader, fingerprint: boolean, mergeSize: number, metrics?: TransportMetrics): string {
  const received: ReceivedTensor[] = [];
  const grids = new Map<string, number[]>();
  const rows = new Map<string, number>();
  for (const { name, tensor } of job.tensors) {
    if (job.dtypeRule && !job.dtypeRule.allowed.has(tensor.dtype)) {
      throw new TensorReadError('unknown_dtype', `${job.dtypeRule.says}; ${name} is ${tensor.dtype || 'missing a dtype'}`);
    }
    const expected = job.tensors.find((t) => t.name === name)?.dtypes;
    if (expected && !expected.allowed.has(tensor.dtype)) throw new RequestInvalid(`${name} must be ${expected.says}, got ${tensor.dtype || 'no dtype'}`);
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
  if (job.checks.length === 0 && received.length > 0) throw new RequestInvalid('multimodal tensors but no image placed in the prompt (no placeholder range)');
  validateImages(job.checks, grids, rows, job.inputIds, mergeSize);
  const parts = received.map((t) => `${t.name} [${t.shape.join(',')}] ${t.dtype} via ${t.path}, ${t.nbytes} bytes${t.fnv1a ? `, fnv1a ${t.fnv1a}` : ''}`);
  const head = job.images === 0 ? 'no images' : `${job.images} image${job.images === 1 ? '' : 's'}`;
  return parts.length ? `${head}: ${parts.join('; ')}` : `${head}.`;
}

/** What a worker advertises about itself beyond the model. */
export interface WorkerIdentity {
  token: string | undefined;
  started: number;
}

export interface GenerateServing {
  runtime: WireRuntime;
  model: ModelDirectory;
  reader: TensorReader;
  fingerprint: boolean;
  metrics?: TransportMetrics;
  /** Hold each Generate this long before reading its tensors. */
  delayMs: number;
  /** Request ids in progress (GetServerInfo reports their count; Abort removes one). */
  active: Set<string>;
}

/**
 * Serve one Generate call: (after the delay) read the job, answer with the sentence
 * tokenized by the model's tokenizer, streamed four tokens a chunk when asked, cut at
 * max tokens with finish reason `length`. A broken request is INVALID_ARGUMENT.
 */
export function serveGenerate<Res>(s: GenerateServing, call: grpc.ServerWritableStream<unknown, Res>, job: () => GenerateJob, build: ResponseBuilder<Res>): void {
  const run = () => {
    if (call.cancelled) return;
    let requestId: string | undefined;
    try {
      const j = job();
      requestId = j.requestId;
      s.active.add(j.requestId);
      const text = receive(s.runtime, j, s.reader, s.fingerprint, s.model.imageConfig.merge_size, s.metrics);
      const all = s.model.tokenizer.encode(text, { add_special_tokens: false }).ids;
      const ids = all.slice(0, j.maxTokens ?? Infinity);
      const finish = ids.length < all.length ? 'length' : 'stop';
      const promptTokens = j.inputIds.length;
      if (j.stream) for (let i = 0; i < ids.length; i += 4) call.write(build.chunk(ids.slice(i, i + 4), Math.min(ids.length, i + 4), promptTokens));
      call.write(build.complete(j.stream ? [] : ids, finish, promptTokens, ids.length));
      call.end();
    } catch (err) {
      const invalid = err instanceof TensorReadError || err instanceof RequestInvalid;
      const details = (err as Error).message;
      call.emit('error', { code: invalid ? status.INVALID_ARGUMENT : status.INTERNAL, details, message: details });
    } finally {
      if (requestId !== undefined) s.active.delete(requestId);
    }
  };
  if (s.delayMs > 0 && !call.cancelled) {
    const timer = setTimeout(run, s.delayMs);
    call.on('cancelled', () => clearTimeout(timer));
    return;
  }
  run();
}
