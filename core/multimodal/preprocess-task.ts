// One image's preprocessing, as run inside a pool thread: decode, then the fused Qwen-VL
// pipeline, with the time of each stage.
import { createHash } from 'node:crypto';
import { decodeToRgb } from './decode.ts';
import { preprocessRgb, type PatchGeometry, type QwenVlImageConfig } from './qwen-vl.ts';

export interface PreprocessTask {
  bytes: Uint8Array;
  config: QwenVlImageConfig;
  bf16: boolean;
  /** Produce float32 values too (default true); false when only bfloat16 travels. */
  float32?: boolean;
  /** Shared output memory sized by the pool from the image header (reused across requests). */
  output?: { pixelValues?: SharedArrayBuffer; bf16?: SharedArrayBuffer; elements: number };
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
}

export async function runPreprocessTask(task: PreprocessTask): Promise<PreprocessResult> {
  const t0 = performance.now();
  const contentHash = createHash('sha256').update(task.bytes).digest();
  const image = await decodeToRgb(task.bytes);
  const t1 = performance.now();
  const o = task.output;
  const into = o
    ? { ...(o.pixelValues ? { pixelValues: new Float32Array(o.pixelValues, 0, o.elements) } : {}), ...(o.bf16 ? { bf16: new Uint16Array(o.bf16, 0, o.elements) } : {}) }
    : undefined;
  const out = preprocessRgb(image.rgb, image.width, image.height, task.config, { bf16: task.bf16, float32: task.float32 !== false, ...(into ? { into } : {}) });
  const t2 = performance.now();
  return { ...out, width: image.width, height: image.height, format: image.format, contentHash, timings: { decode: t1 - t0, preprocess: t2 - t1 } };
}
