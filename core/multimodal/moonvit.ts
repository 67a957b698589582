// MoonViT image preprocessing, as Kimi-K2.5's processor runs it (the checkpoint's
// KimiK25VisionProcessor as vLLM ports it, kimi_k25_vision_fused.py; docs/preprocessing.md,
// "MoonViT patches (Kimi-K2.5)"), from 8-bit RGB pixels to the encoder input:
//
//   navit resize  scale = min(1, sqrt(in_patch_limit / (max(1, w // p) · max(1, h // p))),
//                 side·p / w, side·p / h) (side: patch_limit_on_one_side); each side
//                 int(side · scale), at least 1, at most side·p; never scaled up
//   resize        Pillow-exact bicubic (resize.ts) to that size
//   pad           zeros to the right and the bottom, to a multiple of p·merge
//   normalize     x / 255 in float64 then float32, minus mean, times 1 / std (float32):
//                 the reference's order, so a padded pixel is (0 − mean) / std
//   patchify      [grid_h·grid_w, 3, p, p]: patches row by row, each channel's p×p block
//
// Tokens are (padded height / (p·merge)) · (padded width / (p·merge)): the model merges
// merge×merge patches into one.
import { bf16BitsFromF32Bits } from '../transport/dtype.ts';
import { encoderOutputBytes, fits, ImageSizeError, outputViews, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';
import { checkRgbBytes, resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import { kernelsOn, planResize, resizeBand, resizeBytes } from './resize-simd.ts';

export interface MoonVitImageConfig {
  patch_size: number;
  /** merge_kernel_size: patches merged into one token along each side. */
  merge_size: number;
  /** Most patches an image may have before the merge. */
  in_patch_limit: number;
  /** Most patches along one side. */
  patch_limit_on_one_side: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
}

/** Kimi-K2.5's preprocessor_config.json media_proc_cfg (moonshotai/Kimi-K2.5, as the gateway's KimiK25Processor defaults it). */
export const KIMI_K25_DEFAULTS: MoonVitImageConfig = {
  patch_size: 14,
  merge_size: 2,
  in_patch_limit: 16384,
  patch_limit_on_one_side: 512,
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
};

export interface MoonVitGeometry {
  /** The resize's output, before the padding. */
  resizedHeight: number;
  resizedWidth: number;
  /** The padded image: a multiple of patch · merge each side. */
  paddedHeight: number;
  paddedWidth: number;
  gridH: number;
  gridW: number;
  tokens: number;
}

/** navit_resize_image: the resize, the padding and the tokens of a width × height image. */
export function moonVitGeometry(height: number, width: number, cfg: MoonVitImageConfig): MoonVitGeometry {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const p = cfg.patch_size;
  const side = cfg.patch_limit_on_one_side * p;
  const byTotal = Math.sqrt(cfg.in_patch_limit / (Math.max(1, Math.floor(width / p)) * Math.max(1, Math.floor(height / p))));
  const scale = Math.min(1, byTotal, side / width, side / height);
  const resizedWidth = Math.min(Math.max(1, Math.trunc(width * scale)), side);
  const resizedHeight = Math.min(Math.max(1, Math.trunc(height * scale)), side);
  const factor = p * cfg.merge_size;
  const paddedHeight = resizedHeight + ((factor - (resizedHeight % factor)) % factor);
  const paddedWidth = resizedWidth + ((factor - (resizedWidth % factor)) % factor);
  return {
    resizedHeight,
    resizedWidth,
    paddedHeight,
    paddedWidth,
    gridH: paddedHeight / p,
    gridW: paddedWidth / p,
    tokens: (paddedHeight / factor) * (paddedWidth / factor),
  };
}

/** Per channel, the encoder value of each 8-bit level, in the reference's arithmetic: ((v / 255) − mean) · (1 / std), float32 at each step. */
export function moonVitLevels(cfg: Pick<MoonVitImageConfig, 'image_mean' | 'image_std'>): Float32Array[] {
  return [0, 1, 2].map((c) => {
    const mean = Math.fround(cfg.image_mean[c]!);
    const inverse = Math.fround(1 / Math.fround(cfg.image_std[c]!));
    return Float32Array.from({ length: 256 }, (_, v) => Math.fround(Math.fround(Math.fround(v / 255) - mean) * inverse));
  });
}

/**
 * One row of patches (p pixel rows of the image, `rows` of them the image's, the rest padding)
 * into the encoder input from `at` on, written in order: per patch, per channel, p runs of p
 * values, each one table lookup (a zero pixel's value past the image). Two copies, one per
 * output type, so each stays monomorphic.
 */
function patchRowF32(
  dst: Float32Array,
  at: number,
  tables: Float32Array[],
  src: Uint8Array,
  start: number,
  stride: number,
  rows: number,
  w: number,
  p: number,
  gridW: number,
): void {
  for (let gw = 0; gw < gridW; gw++) {
    const x0 = gw * p;
    const n = Math.max(0, Math.min(p, w - x0));
    for (let c = 0; c < 3; c++) {
      const table = tables[c]!;
      const pad = table[0]!;
      for (let ph = 0; ph < p; ph++) {
        let k = 0;
        if (ph < rows) for (let from = start + ph * stride + x0 * 3 + c; k < n; k++, from += 3) dst[at++] = table[src[from]!]!;
        for (; k < p; k++) dst[at++] = pad;
      }
    }
  }
}

function patchRowU16(
  dst: Uint16Array,
  at: number,
  tables: Uint16Array[],
  src: Uint8Array,
  start: number,
  stride: number,
  rows: number,
  w: number,
  p: number,
  gridW: number,
): void {
  for (let gw = 0; gw < gridW; gw++) {
    const x0 = gw * p;
    const n = Math.max(0, Math.min(p, w - x0));
    for (let c = 0; c < 3; c++) {
      const table = tables[c]!;
      const pad = table[0]!;
      for (let ph = 0; ph < p; ph++) {
        let k = 0;
        if (ph < rows) for (let from = start + ph * stride + x0 * 3 + c; k < n; k++, from += 3) dst[at++] = table[src[from]!]!;
        for (; k < p; k++) dst[at++] = pad;
      }
    }
  }
}

/** Values of the encoder input: the padded image's patches, 3·p·p each. */
export const moonVitElements = (g: MoonVitGeometry, cfg: MoonVitImageConfig): number => g.gridH * g.gridW * 3 * cfg.patch_size * cfg.patch_size;

/** Bytes an image of this size takes in the pool's memory: its outputs, then the resize's working space. */
export function moonVitMemoryBytes(width: number, height: number, cfg: MoonVitImageConfig, kinds: OutputKinds): number {
  const g = moonVitGeometry(height, width, cfg);
  const outputs = encoderOutputBytes(moonVitElements(g, cfg), kinds);
  return outputs + resizeBytes(width, height, g.resizedWidth, g.resizedHeight, [], outputs);
}

/**
 * Resize, pad, normalize and patchify packed RGB into [grid_h·grid_w, 3, p, p]: float32 unless
 * `float32: false`, bfloat16 bits too with `bf16: true`. `memory` (the pool's, laid out for
 * this image: moonVitMemoryBytes) holds the outputs and the resize's working space, so the
 * kernels run there; without it the resize runs in ordinary memory. `javascript` forces the
 * JavaScript resize (the second implementation the tests hold the kernels to).
 */
export function preprocessMoonVitRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: MoonVitImageConfig,
  options: { bf16?: boolean; float32?: boolean; javascript?: boolean; memory?: EncoderMemory } = {},
): MoonVitGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean } {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessMoonVitRgb: asked for neither float32 nor bfloat16 output');
  const g = moonVitGeometry(height, width, cfg);
  const p = cfg.patch_size;
  const n = moonVitElements(g, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const given = options.memory;
  const memory = fits(given, n, kinds) && moonVitMemoryBytes(width, height, cfg, kinds) <= given.memory.buffer.byteLength ? given : undefined;
  const views = memory ? outputViews(memory, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(n)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(n)) : undefined;
  const levels = moonVitLevels(cfg);
  const bits = new Uint32Array(1);
  const asFloat = new Float32Array(bits.buffer);
  const bfLevels = levels.map((t) =>
    Uint16Array.from(t, (v) => {
      asFloat[0] = v;
      return bf16BitsFromF32Bits(bits[0]!);
    }),
  );
  const w = g.resizedWidth;
  const stride = w * 3;
  const rowValues = g.gridW * 3 * p * p;
  /** Patch row `gh` from `rows` image rows at `src[start]` (the rest of its p rows, and every row past the image, padding). */
  const emit = (gh: number, src: Uint8Array, start: number, rows: number) => {
    if (out) patchRowF32(out, gh * rowValues, levels, src, start, stride, rows, w, p, g.gridW);
    if (bf) patchRowU16(bf, gh * rowValues, bfLevels, src, start, stride, rows, w, p, g.gridW);
  };
  if (w === width && g.resizedHeight === height) {
    // Not scaled: Pillow's resize to an image's own size is a copy of it, so its rows are the source's.
    checkRgbBytes(rgb, width, height);
    for (let gh = 0; gh < g.gridH; gh++) emit(gh, rgb, gh * p * stride, Math.max(0, Math.min(p, height - gh * p)));
  } else {
    // The resize gives a row at a time: p of them make a row of patches.
    const block = new Uint8Array(p * stride);
    const row = (y: number, line: Uint8Array) => {
      block.set(line.subarray(0, stride), (y % p) * stride);
      if (y % p === p - 1 || y === g.resizedHeight - 1) emit(Math.floor(y / p), block, 0, (y % p) + 1);
    };
    const kernels = memory && !options.javascript ? kernelsOn(memory.memory) : null;
    const plan = kernels ? planResize(kernels, rgb, width, height, w, g.resizedHeight, [], memory!.scratchAt) : null;
    if (kernels && plan) resizeBand(kernels, plan, 0, row);
    else (options.javascript ? resizeRgbIntoJs : resizeRgbInto)(rgb, width, height, w, g.resizedHeight, row);
    // Patch rows wholly below the image.
    for (let gh = Math.ceil(g.resizedHeight / p); gh < g.gridH; gh++) emit(gh, block, 0, 0);
  }
  return { ...g, ...(out ? { pixelValues: out } : {}), ...(bf ? { bf16: bf } : {}), inMemory: memory !== undefined };
}
