// The boundary between the router and a worker's protocol. The router builds one
// engine-neutral request (token ids, prepared images, sampling options, the encoder dtype)
// and reads back a neutral event stream; each runtime's engine (tokenspeed.ts, vllm.ts)
// turns the request into its own GenerateRequest, placing every tensor inline or in
// /dev/shm, and its own responses into those events. HealthCheck, Abort and model/server
// info are the engine's too. Nothing outside core/engines/ and core/refworker/ imports
// generated protocol code, so adding a runtime is one new engine file plus its entry in
// ENGINES below (docs/router.md, "Adding a runtime").
import type { PlacementContext } from '../transport/placement.ts';
import type { EncoderDtype, WireRuntime } from '../transport/vocabulary.ts';
import { tokenSpeedEngine } from './tokenspeed.ts';
import { vllmEngine } from './vllm.ts';

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
}

export interface SamplingOptions {
  maxTokens?: number;
  temperature?: number;
  topP?: number;
  stop?: string[];
}

export interface EngineRequest {
  requestId: string;
  text: string;
  inputIds: number[];
  images: PreparedImage[];
  imageTokenId: number;
  sampling: SamplingOptions;
  stream: boolean;
  /** Wire dtype of the encoder input (vLLM: always float32). */
  encoderDtype: EncoderDtype;
}

export type EngineEvent =
  | { kind: 'chunk'; tokenIds: number[]; promptTokens: number; completionTokens: number }
  | { kind: 'complete'; tokenIds: number[]; finishReason: string; promptTokens: number; completionTokens: number; cachedTokens: number };

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
  close(): void;
}

export interface Engine {
  readonly runtime: WireRuntime;
  connect(url: string): EngineConnection;
  /** The runtime's GenerateRequest, every tensor placed through the transport. */
  buildRequest(request: EngineRequest, placement: PlacementContext): Promise<WireRequest>;
}

export const ENGINES: Readonly<Record<WireRuntime, Engine>> = { tokenspeed: tokenSpeedEngine, vllm: vllmEngine };

export function engineFor(runtime: WireRuntime): Engine {
  return ENGINES[runtime];
}

/** A request built for one runtime handed to another's connection is a bug, never silent. */
export function messageFor<T>(request: WireRequest, runtime: WireRuntime): T {
  if (request.runtime !== runtime) throw new Error(`a ${request.runtime} request cannot be sent over a ${runtime} connection`);
  return request.message as T;
}
