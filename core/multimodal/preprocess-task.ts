// One image's preprocessing, as run inside a pool thread: decode, then the fused Qwen-VL
// pipeline, with the time of each stage.
import { createHash } from 'node:crypto';
import { decodeToRgb } from './decode.ts';
import { preprocessRgb, preprocessRgbInBands, type BandHelper, type EncoderMemory, type PatchGeometry, type QwenVlImageConfig } from './qwen-vl.ts';

export interface PreprocessTask {
  bytes: Uint8Array;
  config: QwenVlImageConfig;
  bf16: boolean;
  /** Produce float32 values too (default true); false when only bfloat16 travels. */
  float32?: boolean;
  /** Shared memory for the outputs and the resize, sized by the pool from the image header (reused across requests). */
  output?: EncoderMemory;
  /** The decoder refuses images above this many pixels, whatever their header said. */
  maxPixels?: number;
}

export interface PreprocessResult extends PatchGeometry {
  width: number;
  height: number;
  format: string;
  pixelValues?: Float32Array;
  bf16?: Uint16Array;
  gridThw: [number, number, number];
  /** SHA-256 of the encoded image bytes (the workers' content_hash / mm_hashes). */
  contentHash: Uint8Array;
  /** Milliseconds: decode, and resize+rescale+normalize+patchify (fused). */
  timings: { decode: number; preprocess: number };
  /** Threads that resized and scattered the image: 2 when a helper thread took half. */
  threads: number;
  /** The outputs are in the task's `output` memory (false: the decoded image did not fit it). */
  inOutput: boolean;
}

export async function runPreprocessTask(task: PreprocessTask, helper?: BandHelper): Promise<PreprocessResult> {
  const t0 = performance.now();
  // sharp decodes on a libuv thread; the hash is computed here meanwhile.
  const decoding = decodeToRgb(task.bytes, task.maxPixels);
  const contentHash = createHash('sha256').update(task.bytes).digest();
  const image = await decoding;
  const t1 = performance.now();
  // Only the pool's memory, or the JavaScript passes in ordinary memory: a shared WebAssembly
  // memory made here would reach the main thread with the result, and V8 never frees those
  // once two threads have held them (pool.ts, SharedMemoryArena).
  const options = { bf16: task.bf16, float32: task.float32 !== false, allocate: false };
  // With a helper and pooled memory, two threads take half of the image each.
  const split = helper && task.output ? await preprocessRgbInBands(image.rgb, image.width, image.height, task.config, task.output, options, helper) : null;
  const { memory, ...out } = split ?? preprocessRgb(image.rgb, image.width, image.height, task.config, { ...options, ...(task.output ? { into: task.output } : {}) });
  const t2 = performance.now();
  return { ...out, width: image.width, height: image.height, format: image.format, contentHash, timings: { decode: t1 - t0, preprocess: t2 - t1 }, threads: split ? 2 : 1, inOutput: memory !== undefined && memory === task.output?.memory };
}
