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
import { fnv1a64Hex } from '../util/fnv.ts';
import { TensorReadError, type TensorReader, type WireTensor } from '../transport/shm-reader.ts';
import { type WireRuntime } from '../config/schema.ts';
import { CallRefused, type BootstrapServer } from './bootstrap.ts';
import type { StopRules } from './sampling-rules.ts';
import { processorOf, type ConfiguredProcessor } from '../multimodal/families/index.ts';

/**
 * How the worker's model takes an image's tokens from what arrived (the model's processor):
 * `tokensOf`, and whether it needs a grid tensor to (`gridded`: Qwen's image_grid_thw, which an
 * item must carry even where its pixels went elsewhere).
 */
export type TokensOf = Pick<ConfiguredProcessor, 'tokensOf' | 'gridded' | 'gridKey' | 'gridWidth' | 'gridPatches' | 'batchedEncoder'>;

/**
 * The grid tensors a family's model reads (Qwen's image_grid_thw, Kimi's grid_thws, Phi-3-vision's
 * image_sizes, Llama 4's patches_per_image, Inkling's tokens_per_item): int64, one row per
 * image. patches_per_image last: Qwen and Kimi send it beside their own grid.
 */
export const GRID_KEYS: readonly string[] = ['image_grid_thw', 'grid_thws', 'image_sizes', 'tokens_per_item', 'patches_per_image'];

/** The grid key among a request's model-specific tensors, if any. */
export const gridKeyIn = (tensors: Record<string, unknown>): string | undefined => GRID_KEYS.find((k) => tensors[k] !== undefined);

/** The dtypes a model-specific tensor must have, where its role fixes them. */
export const modelTensorDtypes = (key: string): { dtypes?: TensorDtypes } =>
  GRID_KEYS.includes(key) || key === 'num_img_tokens' || key === 'aspect_ratios' ? { dtypes: INDEX_DTYPES } : {};

/** A grid the model does not read (a Qwen grid sent to Kimi's model, or the other way): its forward pass finds no grid of its own. */
function wrongGrid(c: ImageCheck, tokensOf: TokensOf): void {
  if (tokensOf.gridded && c.gridKey !== undefined && c.gridKey !== tokensOf.gridKey)
    throw new RequestInvalid(`${c.label}: its grid is ${c.gridKey}, but the model reads ${tokensOf.gridKey} (KeyError: '${tokensOf.gridKey}')`);
}

/** The model's rule for an image's tokens. */
export const tokensOfModel = (model: Pick<ModelDirectory, 'imageConfig'>): TokensOf => processorOf(model.imageConfig);

export interface NamedTensor {
  name: string;
  tensor: WireTensor;
  /** The dtypes this tensor may have, when its role fixes them (a grid is int64, an encoder input a float). */
  dtypes?: TensorDtypes;
  /** Its /dev/shm file is attached read-write rather than read (TokenSpeed's scheduler: TensorReader.attach). */
  attach?: boolean;
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
  /**
   * Name of the int64 grid tensor and which of its rows is this image's, when the request
   * carries one (Qwen's image_grid_thw); without one the image's tokens follow from its slice
   * of the encoder input (a batched family's [1, 3, H, W]).
   */
  grid: string | undefined;
  /** The grid's model-specific key (image_grid_thw, grid_thws): the model reads only its own. */
  gridKey?: string;
  gridRow: number;
  placeholders: Array<{ offset: number; length: number }>;
  placeholderTokenId: number | undefined;
  /**
   * The runtime embeds at the placeholder token alone within a range that may hold others
   * (vLLM's is_embed, which its servicer builds from im_token_id): Llama 4's separators. Else
   * every position of a range takes a feature, and must hold the placeholder token.
   */
  masksByToken?: boolean;
}

/** A request that breaks the runtime's rules: INVALID_ARGUMENT. */
export class RequestInvalid extends Error {}

/** One Generate call, the same for both protocols once its runtime module has read it. */
export interface GenerateJob {
  requestId: string;
  stream: boolean;
  inputIds: readonly number[];
  maxTokens: number | undefined;
  /** The stop conditions the runtime's engine applies (sampling-rules.ts). */
  stops?: StopRules;
  images: number;
  tensors: NamedTensor[];
  checks: ImageCheck[];
  /** The dtypes the runtime accepts, when it restricts them (vLLM), and how it says so. */
  dtypeRule?: { allowed: ReadonlySet<string>; says: string };
  /** The runtime's own check of how its tensors split into images, once they are read (vLLM's field layouts), by the model's grid rule. */
  layout?: (read: TensorsRead, tokensOf: TokensOf) => void;
}

/** What reading a job's tensors gives its checks: each small int64 tensor's values, and each tensor's rows (first dimension) and shape. */
export interface TensorsRead {
  grids: ReadonlyMap<string, readonly number[]>;
  rows: ReadonlyMap<string, number>;
  shapes: ReadonlyMap<string, readonly number[]>;
}

/** What ended a generation on a stop condition: a stop token or a stop string (GenerateComplete.matched_stop). */
export type MatchedStop = { $case: 'matchedTokenId'; value: number } | { $case: 'matchedStopStr'; value: string } | undefined;

/** How a runtime's responses are made from token ids. */
export interface ResponseBuilder<Res> {
  chunk(ids: number[], completionTokens: number, promptTokens: number): Res;
  complete(ids: number[], finish: string, promptTokens: number, completionTokens: number, matched: MatchedStop): Res;
}

interface ReceivedTensor {
  name: string;
  shape: number[];
  dtype: string;
  path: 'inline' | 'shm';
  nbytes: number;
  fnv1a?: string;
}

/** The model's tokens of an image, a shape or grid it refuses said as the request's fault. */
function tokensFor(c: ImageCheck, rule: TokensOf, received: Parameters<TokensOf['tokensOf']>[0]): number {
  try {
    return rule.tokensOf(received);
  } catch (err) {
    if (err instanceof RangeError || err instanceof TypeError) throw new RequestInvalid(`${c.label}: ${err.message}`);
    throw err;
  }
}

function validateImages(checks: ImageCheck[], read: TensorsRead, encoderRows: boolean, inputIds: readonly number[], tokensOf: TokensOf): void {
  const { grids, shapes } = read;
  const rows = encoderRows ? read.rows : undefined;
  const rowsUsed = new Map<string, number>();
  // Every image has its place in the prompt, and every grid row is an image with one.
  const imagesOfGrid = new Map<string, number>();
  for (const c of checks) {
    if (c.placeholders.length === 0) throw new RequestInvalid(`${c.label}: no placeholder range (where the image's tokens go in the prompt)`);
    if (c.grid !== undefined) imagesOfGrid.set(c.grid, (imagesOfGrid.get(c.grid) ?? 0) + 1);
  }
  const width = tokensOf.gridWidth;
  for (const [name, images] of imagesOfGrid) {
    const grid = grids.get(name);
    if (grid && grid.length / width !== images)
      throw new RequestInvalid(`${name} has ${grid.length / width} rows but the request places ${images} image${images === 1 ? '' : 's'} in the prompt`);
  }
  for (const c of checks) {
    // The image's tokens: from its grid row (Qwen), else from its slice of the encoder input; a
    // prefill under EPD without either (its encode workers had the pixels) is not judged by count.
    let tokens: number | undefined;
    let from = '';
    if (c.grid !== undefined) {
      wrongGrid(c, tokensOf);
      const grid = grids.get(c.grid);
      if (!grid) throw new RequestInvalid(`${c.label}: ${c.grid} is missing or not int64`);
      const row = grid.slice(c.gridRow * width, c.gridRow * width + width);
      if (row.length !== width) throw new RequestInvalid(`${c.label}: ${c.grid} has no row ${c.gridRow}`);
      rowsUsed.set(c.encoder, (rowsUsed.get(c.encoder) ?? 0) + tokensOf.gridPatches(row));
      // A batched family's image is one row of its encoder input: its slice goes with the grid row (Phi-3-vision's crops must hold the tiles image_sizes says);
      // a flat family's, its grid's rows of it (Llama 4's crops must be tiles its model takes).
      const shape = shapes.get(c.encoder);
      const slice = shape ? (tokensOf.batchedEncoder ? [1, ...shape.slice(1)] : [tokensOf.gridPatches(row), ...shape.slice(1)]) : [];
      tokens = tokensFor(c, tokensOf, { encoderShape: slice, grid: row });
      from = width === 1 ? `${c.grid} ${row[0]}` : `grid ${row.join('x')}`;
    } else {
      if (tokensOf.gridded) throw new RequestInvalid(`${c.label}: no ${tokensOf.gridKey} tensor (the model computes an image's tokens from its grid)`);
      const shape = shapes.get(c.encoder);
      if (shape) {
        const slice = [1, ...shape.slice(1)];
        rowsUsed.set(c.encoder, (rowsUsed.get(c.encoder) ?? 0) + 1);
        tokens = tokensFor(c, tokensOf, { encoderShape: slice });
        from = `its pixel values [${slice.join(', ')}]`;
      } else if (rows) tokens = tokensFor(c, tokensOf, { encoderShape: [] });
    }
    // The positions that take the image's features: every one of its ranges, or (masked) those holding the placeholder token.
    let embeds = 0;
    for (const p of c.placeholders) {
      if (p.offset + p.length > inputIds.length)
        throw new RequestInvalid(`${c.label}: placeholder range [${p.offset}, ${p.offset + p.length}) is outside the ${inputIds.length} input ids`);
      const ids = inputIds.slice(p.offset, p.offset + p.length);
      if (c.masksByToken && c.placeholderTokenId !== undefined) embeds += ids.filter((id) => id === c.placeholderTokenId).length;
      else {
        if (c.placeholderTokenId !== undefined && ids.some((id) => id !== c.placeholderTokenId))
          throw new RequestInvalid(`${c.label}: placeholder range holds ids other than ${c.placeholderTokenId}`);
        embeds += p.length;
      }
    }
    if (tokens !== undefined && embeds !== tokens) {
      const p = c.placeholders[0]!;
      const masked = c.masksByToken && c.placeholderTokenId !== undefined && embeds !== p.length;
      throw new RequestInvalid(
        masked
          ? `${c.label}: placeholder range [${p.offset}, ${p.offset + p.length}) holds ${embeds} image tokens (id ${c.placeholderTokenId}), but ${from} gives ${tokens}`
          : c.placeholders.length === 1
            ? `${c.label}: placeholder length ${p.length} does not match ${from} (${tokens} tokens)`
            : `${c.label}: its ${c.placeholders.length} placeholder ranges hold ${embeds} tokens, but ${from} gives ${tokens}`,
      );
    }
  }
  // A prefill under EPD has no encoder input to count rows of: its encode workers had them.
  if (!rows) return;
  for (const [name, used] of rowsUsed) {
    const have = rows.get(name);
    if (have !== used)
      throw new RequestInvalid(
        checks.some((c) => c.encoder === name && c.grid !== undefined)
          ? `${name} has ${have} rows but the grids describe ${used} patches`
          : `${name} has ${have} rows but the request places ${used} image${used === 1 ? '' : 's'} in the prompt`,
      );
  }
}

/** Every tensor of the job read (its /dev/shm files unlinked), with the grids and the rows the checks need. */
function readTensors(
  runtime: WireRuntime,
  job: GenerateJob,
  reader: TensorReader,
  fingerprint: boolean,
  metrics?: TransportMetrics,
): { received: ReceivedTensor[] } & TensorsRead {
  const received: ReceivedTensor[] = [];
  const grids = new Map<string, number[]>();
  const rows = new Map<string, number>();
  const shapes = new Map<string, number[]>();
  for (const { name, tensor, dtypes, attach } of job.tensors) {
    if (job.dtypeRule && !job.dtypeRule.allowed.has(tensor.dtype)) {
      throw new TensorReadError('unknown_dtype', `${job.dtypeRule.says}; ${name} is ${tensor.dtype || 'missing a dtype'}`);
    }
    if (dtypes && !dtypes.allowed.has(tensor.dtype)) throw new RequestInvalid(`${name} must be ${dtypes.says}, got ${tensor.dtype || 'no dtype'}`);
    const read = attach && tensor.payload.kind === 'shm' ? reader.attach(tensor, tensor.payload.handle) : reader.read(tensor);
    if (read.path === 'shm') metrics?.shmReadSeconds.observe({ runtime }, read.micros / 1e6);
    try {
      if (tensor.dtype === 'int64' && read.bytes.byteLength <= 4096) {
        grids.set(name, Array.from(new BigInt64Array(Uint8Array.from(read.bytes).buffer), Number));
      }
      if (tensor.shape.length >= 2) {
        rows.set(name, tensor.shape[0]!);
        shapes.set(name, [...tensor.shape]);
      }
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
  return { received, grids, rows, shapes };
}

function describeTensors(received: readonly ReceivedTensor[]): string {
  return received.map((t) => `${t.name} [${t.shape.join(',')}] ${t.dtype} via ${t.path}, ${t.nbytes} bytes${t.fnv1a ? `, fnv1a ${t.fnv1a}` : ''}`).join('; ');
}

export function imagesPhrase(n: number): string {
  return n === 0 ? 'no images' : `${n} image${n === 1 ? '' : 's'}`;
}

/**
 * Read every tensor, check the request, then describe it in one sentence. `encoderRows`
 * false: the images' encoder inputs went elsewhere (a prefill under EPD), so their rows are
 * not counted against the grids.
 */
export function receive(
  runtime: WireRuntime,
  job: GenerateJob,
  reader: TensorReader,
  fingerprint: boolean,
  tokensOf: TokensOf,
  metrics?: TransportMetrics,
): string {
  const tensors = receiveTensors(runtime, job, reader, fingerprint, tokensOf, metrics);
  const head = imagesPhrase(job.images);
  return tensors ? `${head}: ${tensors}` : `${head}.`;
}

/** What `receive` does, the description of the tensors alone ('' for none). */
export function receiveTensors(
  runtime: WireRuntime,
  job: GenerateJob,
  reader: TensorReader,
  fingerprint: boolean,
  tokensOf: TokensOf,
  metrics?: TransportMetrics,
  encoderRows = true,
): string {
  const { received, ...read } = readTensors(runtime, job, reader, fingerprint, metrics);
  if (job.checks.length === 0 && received.length > 0) throw new RequestInvalid('multimodal tensors but no image placed in the prompt (no placeholder range)');
  job.layout?.(read, tokensOf);
  validateImages(job.checks, read, encoderRows, job.inputIds, tokensOf);
  return describeTensors(received);
}

/** An encode worker's reading of one image's tensors (no prompt: the prefill worker has it), described as a regular worker describes them. */
export function receiveItem(
  runtime: WireRuntime,
  job: GenerateJob,
  reader: TensorReader,
  fingerprint: boolean,
  tokensOf: TokensOf,
  metrics?: TransportMetrics,
): string {
  const { received, grids, rows, shapes } = readTensors(runtime, job, reader, fingerprint, metrics);
  for (const c of job.checks) {
    if (c.grid === undefined) {
      if (tokensOf.gridded) throw new RequestInvalid(`${c.label}: no ${tokensOf.gridKey} tensor (the model computes an image's tokens from its grid)`);
      // A batched family's image: its encoder input is the model's one shape (the tokens' rule refuses another).
      tokensFor(c, tokensOf, { encoderShape: shapes.get(c.encoder) ?? [] });
      continue;
    }
    wrongGrid(c, tokensOf);
    const thw = grids.get(c.grid)?.slice(0, tokensOf.gridWidth);
    if (!thw || thw.length !== tokensOf.gridWidth) throw new RequestInvalid(`${c.label}: ${c.grid} is missing or not int64`);
    const patches = tokensOf.gridPatches(thw);
    if (rows.get(c.encoder) !== patches)
      throw new RequestInvalid(`${c.encoder} has ${rows.get(c.encoder)} rows but the grid ${thw.join('x')} describes ${patches} patches`);
    // The model's rule holds for the grid row, and for the crops beside it (the item's own).
    tokensFor(c, tokensOf, { encoderShape: shapes.get(c.encoder) ?? [], grid: thw });
  }
  return describeTensors(received);
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
  /** Its part in disaggregated serving (roles.ts); absent for a regular worker. */
  role?: RoleServing;
  /** The model's dtype it advertises (TokenSpeed attaches an encoder input in it read-write). */
  modelDtype: string;
  /** What it publishes as GetModelInfo.default_sampling_params_json ('' none). */
  samplingDefaults: string;
}

export type WorkerRole = 'regular' | 'encode' | 'prefill' | 'decode';

/** What an encode, prefill or decode worker needs beyond a regular one. */
export interface RoleServing {
  role: Exclude<WorkerRole, 'regular'>;
  /** Its bootstrap server (encode and prefill workers). */
  bootstrap?: BootstrapServer;
  /** Its own grpc:// URL, as the records name it (known once it listens). */
  url: string;
  /** An encode worker that answers accepted: false (reading nothing). */
  encodeAccept: boolean;
  /** An encode worker that reads and accepts, but never hands the embedding over. */
  encodeDrop: boolean;
  /** How long a prefill waits for an image's embedding, and a decode for the KV. */
  embeddingTimeoutMs: number;
  kvTimeoutMs: number;
  /** vLLM: the KV connector it hands the KV over with, by vLLM's name ('' none: vllm-roles.ts). */
  kvConnector: string;
}

/** What an answer is made for: the request's id, whether it streams, its prompt and completion limit, and the stop conditions its engine applies. */
export interface AnswerFor {
  requestId: string;
  stream: boolean;
  inputIds: readonly number[];
  maxTokens: number | undefined;
  stops?: StopRules;
}

/**
 * The tokens of `text` an engine would generate under `j`'s rules, and why it stopped: token
 * by token, a stop token ends it (included in the output, as the engines return it), then a
 * stop string the text so far contains (the ids end with the token that completed it), then
 * the token limit.
 */
export function generate(
  all: readonly number[],
  j: Pick<AnswerFor, 'maxTokens' | 'stops'>,
  decode: (ids: number[]) => string,
): { ids: number[]; finish: string; matched: MatchedStop } {
  const max = j.maxTokens ?? Infinity;
  const tokenIds = j.stops?.tokenIds ?? [];
  const strings = (j.stops?.strings ?? []).filter((s) => s.length > 0);
  for (let k = 1; k <= all.length; k++) {
    if (k > max) return { ids: all.slice(0, max), finish: 'length', matched: undefined };
    const id = all[k - 1]!;
    if (tokenIds.includes(id)) return { ids: all.slice(0, k), finish: 'stop', matched: { $case: 'matchedTokenId', value: id } };
    if (strings.length > 0) {
      const sofar = decode(all.slice(0, k));
      const hit = strings.find((s) => sofar.includes(s));
      if (hit !== undefined) return { ids: all.slice(0, k), finish: 'stop', matched: { $case: 'matchedStopStr', value: hit } };
    }
  }
  return { ids: [...all], finish: 'stop', matched: undefined };
}

/** Answer with `text` tokenized by the model's tokenizer as the engine would generate it (generate()), four tokens a chunk when streamed. */
export function answer<Res>(s: GenerateServing, call: grpc.ServerWritableStream<unknown, Res>, j: AnswerFor, text: string, build: ResponseBuilder<Res>): void {
  const all = s.model.tokenizer.encode(text);
  const { ids, finish, matched } = generate(all, j, (some) => s.model.tokenizer.decode(some, true));
  const promptTokens = j.inputIds.length;
  if (j.stream) for (let i = 0; i < ids.length; i += 4) call.write(build.chunk(ids.slice(i, i + 4), Math.min(ids.length, i + 4), promptTokens));
  call.write(build.complete(j.stream ? [] : ids, finish, promptTokens, ids.length, matched));
  call.end();
}

/** The gRPC status an error of serving a call is: INVALID_ARGUMENT for a broken request, a refusal's own, INTERNAL otherwise. */
export function statusOf(err: unknown): { code: status; details: string } {
  const details = (err as Error).message;
  if (err instanceof CallRefused) return { code: err.code, details };
  const invalid = err instanceof TensorReadError || err instanceof RequestInvalid;
  return { code: invalid ? status.INVALID_ARGUMENT : status.INTERNAL, details };
}

export function failCall(call: { emit(event: 'error', err: unknown): boolean }, err: unknown): void {
  const { code, details } = statusOf(err);
  call.emit('error', { code, details, message: details });
}

/** Run `serve` after the worker's delay, unless the call was cancelled meanwhile. */
export function afterDelay(
  s: GenerateServing,
  call: grpc.ServerWritableStream<unknown, unknown> | grpc.ServerUnaryCall<unknown, unknown>,
  serve: () => void,
): void {
  if (s.delayMs > 0 && !call.cancelled) {
    const timer = setTimeout(serve, s.delayMs);
    call.on('cancelled', () => clearTimeout(timer));
    return;
  }
  serve();
}

/**
 * Serve one Generate call: (after the delay) read the job, answer with the sentence that
 * describes it. A broken request is INVALID_ARGUMENT.
 */
export function serveGenerate<Res>(
  s: GenerateServing,
  call: grpc.ServerWritableStream<unknown, Res>,
  job: () => GenerateJob,
  build: ResponseBuilder<Res>,
): void {
  afterDelay(s, call, () => {
    if (call.cancelled) return;
    let requestId: string | undefined;
    try {
      const j = job();
      requestId = j.requestId;
      s.active.add(j.requestId);
      answer(s, call, j, receive(s.runtime, j, s.reader, s.fingerprint, tokensOfModel(s.model), s.metrics), build);
    } catch (err) {
      failCall(call, err);
    } finally {
      if (requestId !== undefined) s.active.delete(requestId);
    }
  });
}
