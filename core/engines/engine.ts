// The boundary between the router and a worker's protocol. The router builds one
// engine-neutral request (token ids, prepared images, sampling options, the encoder dtype)
// and reads back a neutral event stream; each runtime's engine (tokenspeed.ts, vllm.ts,
// sglang.ts) turns the request into its own GenerateRequest, placing every tensor inline or in
// /dev/shm, and its own responses into those events. HealthCheck, Abort and model/server info
// are the engine's too, and so is everything else a runtime means: an engine states its
// capabilities (below) and every other module asks it, through the engine table
// (table.ts). Nothing outside core/engines/ and core/refworker/ imports generated protocol
// code or names a runtime, so adding one is an engine file, its reference worker, its .proto
// and a line in each table (docs/router.md, "Adding a runtime").
import type { PlacementContext } from '../transport/placement.ts';
import type { EncoderDtype } from '../transport/vocabulary.ts';
import type { WireRuntime } from '../config/schema.ts';

/** Which input decided a worker's encoder-input dtype, and any warning about it. */
export interface EncoderDtypeChoice {
  dtype: EncoderDtype;
  /** An env variable name, `label multimodal_encoder_dtype`, `default`, or the runtime's own rule. */
  source: string;
  warning?: string;
}

export type Modality = 'image' | 'video' | 'audio';

/** What a runtime is, for every module that must know: the router asks, never assumes. */
export interface EngineCapabilities {
  /** The runtime's name as people write it (`TokenSpeed`), for messages. */
  label: string;
  /** One line for `--help` and the docs. */
  description: string;
  /** Whether its TensorData can carry a /dev/shm handle; without one, shm and auto travel inline (runtime_inline_only). */
  shmLane: boolean;
  /** Where it advertises its /dev/shm namespace token, in words (for the doctor); undefined without a lane. */
  tokenAdvertisedIn: string | undefined;
  /** One encoder tensor per image (its own MultimodalItem) or one per request (every image's rows concatenated). */
  encoderTensor: 'per_image' | 'per_request';
  /** Whether the request carries the images' encoded bytes as well as their tensors. */
  sendsEncodedImages: boolean;
  /** The dtypes its encoder input may travel in. */
  encoderDtypes: readonly EncoderDtype[];
  /**
   * How it serves one request across a prefill and a decode worker: `parallel` (both at once,
   * meeting on a KV bootstrap room: TokenSpeed), `sequential` (prefill first, its KV transfer
   * parameters relayed to the decode: vLLM), undefined (it does not).
   */
  pd: 'parallel' | 'sequential' | undefined;
  /** Whether its workers can be encode workers (EPD: an Encode call per image; TokenSpeed). */
  encodes: boolean;
  /** What the gateway (SMG) offers this runtime beyond this router: its NIXL RDMA lane for pixel tensors, and encode workers in its EPD mode (for the gateway export's notes). */
  gateway: { rdmaLane: boolean; epdEncode: boolean };
  /** This worker's encoder-input dtype, by the runtime's rule (env, the worker's labels, its default). */
  encoderDtype(modality: Modality, env: Readonly<Record<string, string | undefined>>, labels: Readonly<Record<string, string>>): EncoderDtypeChoice;
}

export interface PreparedImage {
  /** [patches, features] float32 encoder input (absent when only bfloat16 travels). */
  pixelValues?: Float32Array;
  /** The same values as bfloat16 bits, when the wire dtype is bfloat16. */
  bf16?: Uint16Array;
  patches: number;
  features: number;
  gridThw: [number, number, number];
  /** Where the image's placeholder tokens sit in inputIds. */
  placeholder: { offset: number; length: number };
  /** SHA-256 of the image's encoded bytes. */
  contentHash: Buffer;
  /** The image's encoded bytes, kept only for an engine that sends them (sendsEncodedImages). */
  encoded?: Uint8Array;
}

export interface SamplingOptions {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
}

/** Where a prefill worker's KV is taken from: its bootstrap server, and the request's room. */
export interface KvBootstrap {
  host: string;
  port: number;
  room: bigint;
}

/** Where one image's embedding comes from under EPD: its encode worker's bootstrap server, and the image's room. */
export interface EncodeBootstrapItem {
  item: number;
  host: string;
  port: number;
  room: bigint;
}

/**
 * The request's part in disaggregated serving: a prefill or a decode leg. `pixels` false: the
 * items go without their encoder input (the metadata stays: grid, placeholders, hash), as the
 * gateway strips them from the legs that do not consume them.
 */
export interface Leg {
  role: 'prefill' | 'decode';
  pixels: boolean;
  kvBootstrap?: KvBootstrap;
  encodeBootstrap?: EncodeBootstrapItem[];
  /** The KV transfer parameters a sequential decode relays (what its prefill returned). */
  kvTransferParamsJson?: string;
  /** A sequential prefill leg: one token, not streamed, no stop conditions, the EOS ignored, and a KV handoff asked for. */
  prefillOnly?: boolean;
}

export interface EngineRequest {
  requestId: string;
  text: string;
  inputIds: number[];
  images: PreparedImage[];
  imageTokenId: number;
  sampling: SamplingOptions;
  stream: boolean;
  /** Wire dtype of the encoder input (the engine's encoderDtype for this worker). */
  encoderDtype: EncoderDtype;
  /** Disaggregated serving: which leg this request is (absent: a whole request to a regular worker). */
  leg?: Leg;
}

/** One image's Encode call (EPD): the image, its place in the request, its room, its encoder input's dtype. */
export interface EncodeItemRequest {
  requestId: string;
  image: PreparedImage;
  index: number;
  imageTokenId: number;
  room: bigint;
  encoderDtype: EncoderDtype;
}

export type EngineEvent =
  | { kind: 'chunk'; tokenIds: number[]; promptTokens: number; completionTokens: number }
  | { kind: 'complete'; tokenIds: number[]; finishReason: string; promptTokens: number; completionTokens: number; cachedTokens: number; kvTransferParamsJson?: string };

/**
 * Why a call failed, in terms the router answers with: `deadline` (504), `cancelled`,
 * `unavailable` (the worker is down: 502 and out of rotation), `broken` (the worker failed
 * the request: 502), `rejected` (the worker refused it: 502).
 */
export interface EngineFailure {
  kind: 'deadline' | 'cancelled' | 'unavailable' | 'broken' | 'rejected';
  /** The protocol's own status name, e.g. INTERNAL. */
  status: string;
  details: string;
}

export interface GenerateSink {
  event(event: EngineEvent): void;
  failure(failure: EngineFailure): void;
  end(): void;
}

export interface GenerateCall {
  cancel(): void;
}

/** A built request in one runtime's protocol; only that runtime's connection can send it. */
export interface WireRequest {
  readonly runtime: WireRuntime;
  readonly message: unknown;
}

/** What a worker says about itself, as labels the way the gateway names them. */
export interface WorkerInfo {
  labels: Record<string, string>;
}

/** One channel to one worker. */
export interface EngineConnection {
  readonly runtime: WireRuntime;
  readonly url: string;
  generate(request: WireRequest, options: { deadline: number }, sink: GenerateSink): GenerateCall;
  /** Fire and forget: tell the worker to stop a request (client gone). */
  abort(requestId: string, reason: string): void;
  health(timeoutMs: number): Promise<{ healthy: boolean; message: string }>;
  info(timeoutMs: number): Promise<WorkerInfo>;
  /** An encode worker's Encode (engines whose capabilities say `encodes`): accepted or not, or why it failed; cancel() ends the call (it then settles as a failure). */
  encode?(request: WireRequest, options: { deadline: number }): { done: Promise<{ accepted: boolean } | { failure: EngineFailure }>; cancel(): void };
  close(): void;
}

export interface Engine {
  readonly runtime: WireRuntime;
  readonly capabilities: EngineCapabilities;
  connect(url: string): EngineConnection;
  /** The runtime's GenerateRequest, every tensor placed through the transport. */
  buildRequest(request: EngineRequest, placement: PlacementContext): Promise<WireRequest>;
  /** One image's EncodeRequest (engines whose capabilities say `encodes`), its tensors placed through the transport. */
  buildEncodeRequest?(request: EncodeItemRequest, placement: PlacementContext): Promise<WireRequest>;
}

/** A request built for one runtime handed to another's connection is a bug, never silent. */
export function messageFor<T>(request: WireRequest, runtime: WireRuntime): T {
  if (request.runtime !== runtime) throw new Error(`a ${request.runtime} request cannot be sent over a ${runtime} connection`);
  return request.message as T;
}
