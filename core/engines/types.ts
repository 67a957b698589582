// The engine-neutral request the router pipeline builds, and the neutral stream it reads
// back. tokenspeed.ts and vllm.ts turn the first into their protocol's GenerateRequest
// (placing every tensor through the transport) and their responses into the second.
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
  encoderDtype: 'float32' | 'bfloat16' | 'float16';
}

export type EngineEvent =
  | { kind: 'chunk'; tokenIds: number[]; promptTokens: number; completionTokens: number }
  | { kind: 'complete'; tokenIds: number[]; finishReason: string; promptTokens: number; completionTokens: number; cachedTokens: number };
