// MoonViT image preprocessing, as Kimi-K2.5's processor runs it (the checkpoint's
// KimiK25VisionProcessor as vLLM ports it, kimi_k25_vision_fused.py; docs/preprocessing.md,
// "MoonViT patches (Kimi-K2.5, Kimi-K3)"), from 8-bit RGB pixels to the encoder input:
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
// Kimi-K3 (transparent_bg): an image with alpha is flattened over its background before the
// resize, or resized with its alpha (premultiplied, as Pillow resizes RGBA) and flattened
// after it (transparent-bg.ts); the rest is the same.
//
// Tokens are (padded height / (p·merge)) · (padded width / (p·merge)): the model merges
// merge×merge patches into one.
import {
  bf16LevelTables,
  encoderOutputBytes,
  memoryHolding,
  ImageSizeError,
  levelTable,
  outputViews,
  shareWithHelper,
  type BandHelper,
  type BandWrite,
  type EncoderMemory,
  type OutputKinds,
} from './qwen-vl.ts';
import { checkRgbBytes, resizeRgb, resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import {
  KIMI_K3_TRANSPARENT_BG,
  alphaAsRgb,
  compositeOverBackground,
  firstChannel,
  premultiplied,
  unpremultiply,
  type TransparentBackground,
} from './transparent-bg.ts';
import { kernelsOn, planResize, resizeBand, resizeBytes, simdAvailable, type Kernels, type ResizePlan, type SharedWasmMemory } from './resize-simd.ts';

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
  /** How an image with alpha is flattened (Kimi-K3's transparent_bg_config and fill stage: transparent-bg.ts); absent: its alpha is dropped (Kimi-K2.5). */
  transparent_bg?: TransparentBackground;
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

/** Kimi-K3's preprocessor_config.json media_proc_cfg (moonshotai/Kimi-K3, as the gateway's KimiK3Processor defaults it): four times K2.5's patch budget, and its chessboard under transparent pixels. */
export const KIMI_K3_DEFAULTS: MoonVitImageConfig = {
  ...KIMI_K25_DEFAULTS,
  in_patch_limit: 65536,
  transparent_bg: KIMI_K3_TRANSPARENT_BG,
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
 * values, each one table lookup (a zero pixel's value past the image).
 */
function patchRow<A extends Float32Array | Uint16Array>(
  dst: A,
  at: number,
  tables: readonly A[],
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

const align16 = (n: number) => Math.ceil(n / 16) * 16;
/** Scatter constants (float64 rescale, float32 mean[3] and std[3]), as the scatter kernel reads them. */
const CONSTS_BYTES = 64;

/**
 * Where the kernel path keeps its working space after the outputs: the scatter constants, one
 * block of p padded rows per band (the scatter kernel reads a patch row's pixels from it, zeros
 * past the image), then the resize's buffers.
 */
function kernelLayout(g: MoonVitGeometry, cfg: MoonVitImageConfig, outputs: number) {
  const blockStride = align16(g.gridW * cfg.patch_size * 3 + 16);
  const blockBytes = cfg.patch_size * blockStride;
  const consts = align16(outputs);
  const blocks = consts + CONSTS_BYTES;
  return { consts, blocks, blockStride, blockBytes, resizeAt: align16(blocks + 2 * blockBytes) };
}

/**
 * The first output row of the second band: a whole patch row near the middle; none when the
 * image has one patch row.
 */
export function moonVitBandStarts(g: Pick<MoonVitGeometry, 'resizedHeight'>, cfg: MoonVitImageConfig): number[] {
  const imageRows = Math.ceil(g.resizedHeight / cfg.patch_size);
  return imageRows < 2 ? [] : [Math.round(imageRows / 2) * cfg.patch_size];
}

/** Bytes an image of this size takes in the pool's memory: its outputs, then the kernels' working space (blocks, the resize's buffers in two bands). */
export function moonVitMemoryBytes(width: number, height: number, cfg: MoonVitImageConfig, kinds: OutputKinds): number {
  const g = moonVitGeometry(height, width, cfg);
  const l = kernelLayout(g, cfg, encoderOutputBytes(moonVitElements(g, cfg), kinds));
  return l.resizeAt + resizeBytes(width, height, g.resizedWidth, g.resizedHeight, moonVitBandStarts(g, cfg), l.resizeAt);
}

/** The scatter kernel computes ((v · rescale) − mean) / std: Kimi's ((v / 255) − mean) · (1 / std) only where every level agrees (mean and std 0.5 do). */
function kernelArithmeticAgrees(cfg: MoonVitImageConfig, levels: Float32Array[]): boolean {
  if (cfg.patch_size < 4 || cfg.image_std.some((v) => Math.fround(v) === 0)) return false;
  const kernel = levelTable({ image_mean: cfg.image_mean, image_std: cfg.image_std, rescale_factor: 1 / 255, do_rescale: true, do_normalize: true });
  return kernel.every((t, c) => t.every((v, i) => Object.is(v, levels[c]![i])));
}

/** An image's encoder input: in the pool's memory (`inMemory`) or its own, computed by `threads` threads. */
export type MoonVitOutput = MoonVitGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean; threads: number };

/** One band of an image on the kernel path, as a thread runs it: plain data, so it can be posted to a helper thread. */
export interface MoonVitBandJob {
  kind: 'moonvit';
  memory: SharedWasmMemory;
  plan: ResizePlan;
  band: number;
  geometry: MoonVitGeometry;
  patch: number;
  f32At?: number;
  bf16At?: number;
  consts: number;
  /** This band's block of p padded rows. */
  blockAt: number;
  blockStride: number;
}

/**
 * Resize one band of rows into the memory, then each of its patch rows: its p rows copied into
 * the band's block (zeros past the image's right edge and bottom) and scattered by the kernel
 * (merge 1, one temporal copy: Kimi's [3, p, p] patches, row by row). The last band also writes
 * the patch rows wholly below the image.
 */
function runMoonVitBand(k: Kernels, job: MoonVitBandJob): undefined {
  const { geometry: g, patch: p } = job;
  const band = job.plan.bands[job.band]!;
  const rows = resizeBand(k, job.plan, job.band);
  const heap = new Uint8Array(job.memory.buffer);
  const rowBytes = g.resizedWidth * 3;
  const kinds = (job.f32At !== undefined ? 1 : 0) | (job.bf16At !== undefined ? 2 : 0);
  const features = 3 * p * p;
  heap.fill(0, job.blockAt, job.blockAt + p * job.blockStride);
  const last = job.band === job.plan.bands.length - 1;
  for (let gh = band.y0 / p; gh < (last ? g.gridH : band.y1 / p); gh++) {
    for (let r = 0; r < p; r++) {
      const y = gh * p + r;
      const at = job.blockAt + r * job.blockStride;
      if (y < g.resizedHeight) heap.copyWithin(at, rows.at + (y - band.y0) * rows.stride, rows.at + (y - band.y0) * rows.stride + rowBytes);
      else heap.fill(0, at, at + rowBytes);
    }
    k.scatter(job.blockAt, job.blockStride, gh, 1, job.f32At ?? 0, job.bf16At ?? 0, kinds, p, 1, features, 1, g.gridW, g.gridW * features, job.consts);
  }
  return undefined;
}

/** Run a band another thread planned, on kernels over its memory (what a helper thread does). */
export function runPostedMoonVitBand(job: MoonVitBandJob): BandWrite | undefined {
  const k = kernelsOn(job.memory);
  if (!k) throw new Error('WebAssembly SIMD kernels are unavailable in this thread');
  return runMoonVitBand(k, job);
}

/**
 * The kernel path in the pool's memory: the resize in two bands, this thread running the first
 * while `helper` runs the second (one thread without a helper). Null where it does not apply
 * (no SIMD kernels, memory not laid out for this image, arithmetic the kernel does not
 * reproduce): the caller then runs preprocessMoonVitRgb. An image the budget does not scale
 * has no resize pass (its rows are the source's, as Pillow's copy is): its two bands are the
 * scatter's patch rows.
 */
export async function preprocessMoonVitWithKernels(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: MoonVitImageConfig,
  memory: EncoderMemory,
  options: { bf16?: boolean; float32?: boolean; alpha?: Uint8Array },
  helper?: BandHelper,
): Promise<MoonVitOutput | null> {
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  if (!kinds.float32 && !kinds.bf16) throw new RangeError('preprocessMoonVitWithKernels: asked for neither float32 nor bfloat16 output');
  if (!simdAvailable()) return null;
  // An image flattened over a background takes preprocessMoonVitRgb, on one thread.
  if (options.alpha && cfg.transparent_bg) return null;
  const g = moonVitGeometry(height, width, cfg);
  if (!memoryHolding(memory, moonVitElements(g, cfg), kinds, moonVitMemoryBytes(width, height, cfg, kinds))) return null;
  if (!kernelArithmeticAgrees(cfg, moonVitLevels(cfg))) return null;
  const k = kernelsOn(memory.memory);
  if (!k) return null;
  const l = kernelLayout(g, cfg, memory.scratchAt);
  const starts = helper ? moonVitBandStarts(g, cfg) : [];
  const plan = planResize(k, rgb, width, height, g.resizedWidth, g.resizedHeight, starts, l.resizeAt);
  if (!plan) return null;
  const buffer = memory.memory.buffer;
  new Float64Array(buffer, l.consts, 1)[0] = 1 / 255;
  new Float32Array(buffer, l.consts + 16, 3).set(cfg.image_mean);
  new Float32Array(buffer, l.consts + 32, 3).set(cfg.image_std);
  const job: Omit<MoonVitBandJob, 'band' | 'blockAt'> = {
    kind: 'moonvit',
    memory: memory.memory,
    plan,
    geometry: g,
    patch: cfg.patch_size,
    ...(kinds.float32 ? { f32At: memory.f32At! } : {}),
    ...(kinds.bf16 ? { bf16At: memory.bf16At! } : {}),
    consts: l.consts,
    blockStride: l.blockStride,
  };
  const second = { ...job, band: 1, blockAt: l.blocks + l.blockBytes };
  const first = () => runMoonVitBand(k, { ...job, band: 0, blockAt: l.blocks });
  // The helper's thread, when it did its band: 2 threads.
  const helped = helper && plan.bands.length === 2 ? (await shareWithHelper(helper, second, () => runMoonVitBand(k, second), first)).helped : (first(), false);
  return { ...g, ...outputViews(memory, kinds), inMemory: true, threads: helped ? 2 : 1 };
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
  options: { bf16?: boolean; float32?: boolean; javascript?: boolean; memory?: EncoderMemory; alpha?: Uint8Array } = {},
): MoonVitOutput {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessMoonVitRgb: asked for neither float32 nor bfloat16 output');
  const g = moonVitGeometry(height, width, cfg);
  // An image with alpha under a transparent background (Kimi-K3): flattened at its own size,
  // or resized with its alpha and flattened at the resized size; its rows are then the image's.
  let resized: Uint8Array | undefined;
  if (options.alpha && cfg.transparent_bg) {
    checkRgbBytes(rgb, width, height);
    if (options.alpha.length !== width * height)
      throw new RangeError(`expected ${width * height} bytes of alpha for ${width}x${height}, got ${options.alpha.length}`);
    const scaled = g.resizedWidth !== width || g.resizedHeight !== height;
    if (cfg.transparent_bg.stage === 'after_resize' && scaled) {
      const impl = options.javascript ? 'js' : 'auto';
      resized = resizeRgb(premultiplied(rgb, options.alpha), width, height, g.resizedWidth, g.resizedHeight, impl);
      const alpha = firstChannel(resizeRgb(alphaAsRgb(options.alpha), width, height, g.resizedWidth, g.resizedHeight, impl));
      unpremultiply(resized, alpha);
      compositeOverBackground(resized, alpha, g.resizedWidth, g.resizedHeight, cfg.transparent_bg);
    } else {
      const flat = rgb.slice();
      compositeOverBackground(flat, options.alpha, width, height, cfg.transparent_bg);
      if (scaled) return preprocessMoonVitRgb(flat, width, height, cfg, { ...options, alpha: undefined });
      resized = flat;
    }
  }
  const p = cfg.patch_size;
  const n = moonVitElements(g, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const given = options.memory;
  const memory = memoryHolding(given, n, kinds, moonVitMemoryBytes(width, height, cfg, kinds));
  const views = memory ? outputViews(memory, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(n)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(n)) : undefined;
  const levels = moonVitLevels(cfg);
  const bfLevels = bf16LevelTables(levels);
  const w = g.resizedWidth;
  const stride = w * 3;
  const rowValues = g.gridW * 3 * p * p;
  /** Patch row `gh` from `rows` image rows at `src[start]` (the rest of its p rows, and every row past the image, padding). */
  const emit = (gh: number, src: Uint8Array, start: number, rows: number) => {
    if (out) patchRow(out, gh * rowValues, levels, src, start, stride, rows, w, p, g.gridW);
    if (bf) patchRow(bf, gh * rowValues, bfLevels, src, start, stride, rows, w, p, g.gridW);
  };
  if (resized || (w === width && g.resizedHeight === height)) {
    // Not scaled: Pillow's resize to an image's own size is a copy of it, so its rows are the source's.
    const rows = resized ?? rgb;
    if (!resized) checkRgbBytes(rgb, width, height);
    for (let gh = 0; gh < g.gridH; gh++) emit(gh, rows, gh * p * stride, Math.max(0, Math.min(p, g.resizedHeight - gh * p)));
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
  return { ...g, ...(out ? { pixelValues: out } : {}), ...(bf ? { bf16: bf } : {}), inMemory: memory !== undefined, threads: 1 };
}
