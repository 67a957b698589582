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
import type { SamplingOptions } from './sampling.ts';
import type { ImageModelTensor } from '../multimodal/families/index.ts';
import type { PlaceholderRange } from '../multimodal/prompt.ts';

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
  /**
   * Whether the worker opens an encoder input sent through /dev/shm in `dtype` read-write (and
   * maps it shared) rather than reading it: TokenSpeed's scheduler attaches a Generate item's
   * encoder input in the model's dtype (its `model_dtype` label) by name. Such a file must be
   * the request's own and writable by the worker's uid.
   */
  attachesShmReadWrite(call: 'generate' | 'encode', dtype: EncoderDtype, labels: Readonly<Record<string, string>>): boolean;
  /** Whether its protocol takes stop strings; one that does not gets the single-token ones as stop_token_ids (SGLang under skip_tokenizer_init). */
  stopStrings: boolean;
}

export interface PreparedImage {
  /** [patches, features] float32 encoder input (absent when only bfloat16 travels). */
  pixelValues?: Float32Array;
  /** The same values as bfloat16 bits, when the wire dtype is bfloat16. */
  bf16?: Uint16Array;
  /** Rows along the encoder input's first axis, and the values in each (patches and 3·T·P·P for Qwen). */
  patches: number;
  features: number;
  /** This image's encoder input shape as the gateway slices it per item (VisionFamily.encoderShape): its first axis is `patches`. */
  encoderShape: number[];
  /** The family's model-specific tensors of this image (image_grid_thw, patches_per_image for Qwen), with their field layouts. */
  modelTensors: ImageModelTensor[];
  /** Where the image's placeholder tokens sit in inputIds; `patches`, where the range holds more than the image token (Llama 4's separators): the runs of it. */
  placeholder: PlaceholderRange;
  /** BLAKE3 of the image's encoded bytes, as the gateway hashes an image (core/multimodal/media-hash.ts). */
  mediaHash: Buffer;
  /** The image's encoded bytes, kept only for an engine that sends them (sendsEncodedImages). */
  encoded?: Uint8Array;
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
  /** Sequential PD: the leg's kv_transfer_params_json (the prefill's ask, or what the decode takes: KvHandoff). */
  kvTransferParamsJson?: string;
  /** Sequential PD, the legacy typed handoff (Mooncake without an engine id): where the decode takes the KV. */
  kvTransferLegacy?: { host: string; port: number };
  /** A sequential prefill leg: one token, not streamed, no stop conditions, the EOS ignored. */
  prefillOnly?: boolean;
}

/** The ways a sequential PD runtime's KV goes from prefill to decode (KvHandoff.mode). */
export const KV_HANDOFF_MODES = ['nixl', 'mooncake', 'mooncake_legacy', 'none'] as const;
export type KvHandoffMode = (typeof KV_HANDOFF_MODES)[number];

/** The prefill worker of a sequential PD request, as its KV handoff needs it. */
export interface KvHandoffPrefill {
  labels: Readonly<Record<string, string>>;
  /** Its bootstrap host and port (the URL's host, bootstrap_port or the gateway's 8998). */
  host: string;
  port: number;
}

/**
 * How a sequential PD runtime hands a request's KV from its prefill to its decode worker, by
 * the prefill worker's KV connector (vLLM: NIXL, Mooncake, or none): what the prefill leg asks
 * for, and what the decode leg gets from what the prefill returned. A decode that gets no
 * handoff computes the prompt again, so it gets the pixels.
 */
export interface KvHandoff {
  /** How, in a word: nixl, mooncake, mooncake_legacy (no engine id: host and port only), none (the decode recomputes). */
  mode: KvHandoffMode;
  /** The prefill worker's connector as it reported it (undefined: none). */
  connector: string | undefined;
  /** One line for the console and the docs. */
  says: string;
  prefill: Pick<Leg, 'kvTransferParamsJson'>;
  decode(returned: string | undefined): Pick<Leg, 'kvTransferParamsJson' | 'kvTransferLegacy' | 'pixels'> & { recomputed?: string };
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
  /**
   * The worker attaches the encoder input's /dev/shm file read-write (attachesShmReadWrite): a
   * pixel-cache hit must then reach it as a file of the request's own, never the cached inode.
   */
  encoderReadWrite: boolean;
  /** Disaggregated serving: which leg this request is (absent: a whole request to a regular worker). */
  leg?: Leg;
}

/** One image's Encode call (EPD): the image, its place in the request, its room, its encoder input's dtype. */
export interface EncodeItemRequest {
  requestId: string;
  image: PreparedImage;
  /** Every image of the request, in prompt order: a tensor with no field layout goes whole to each item (Phi-3-vision's num_img_tokens). */
  requestImages: readonly PreparedImage[];
  index: number;
  imageTokenId: number;
  room: bigint;
  encoderDtype: EncoderDtype;
}

export type EngineEvent =
  | { kind: 'chunk'; tokenIds: number[]; promptTokens: number; completionTokens: number }
  | {
      kind: 'complete';
      tokenIds: number[];
      finishReason: string;
      promptTokens: number;
      completionTokens: number;
      cachedTokens: number;
      kvTransferParamsJson?: string;
    };

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
  /** Sequential PD (capabilities.pd 'sequential'): the KV handoff the prefill worker's connector makes. */
  kvHandoff?(prefill: KvHandoffPrefill): KvHandoff;
  /** One image's EncodeRequest (engines whose capabilities say `encodes`), its tensors placed through the transport. */
  buildEncodeRequest?(request: EncodeItemRequest, placement: PlacementContext): Promise<WireRequest>;
}

/** A request built for one runtime handed to another's connection is a bug, never silent. */
export function messageFor<T>(request: WireRequest, runtime: WireRuntime): T {
  if (request.runtime !== runtime) throw new Error(`a ${request.runtime} request cannot be sent over a ${runtime} connection`);
  return request.message as T;
}
