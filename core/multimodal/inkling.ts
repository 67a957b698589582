// Inkling's image patches, as Hugging Face's InklingImageProcessor computes them
// (src/transformers/models/inkling/image_processing_inkling.py, a torchvision processor; the
// gateway's vision/processors/inkling.rs; docs/preprocessing.md, "Patches (Inkling)"), from
// 8-bit RGB pixels to the encoder input:
//
//   size       the image as it is (rescale_image_frac None, the processor's default: no resize)
//   patches    ceil(h / p) rows of floor(w / p) + 1 columns of p × p (p 40): divide_to_patches,
//              whose column count always holds one more, past the image's right edge
//   pad        each patch to p × p with the raw value −1.0 (before rescale and normalize)
//   normalize  rescale fused into normalize, in float32 as torch runs it: mean and std
//              times 255 (float32 tensors), then (x − mean') / std'
//   layout     [patches, temporal, p, p, 3]: each patch's pixels row by row, channels last,
//              the frame repeated `temporal` (2) times
//
// Tokens: one per patch (the worker's model embeds each patch's frames as one soft token);
// tokens_per_item is the tensor they follow from.
import {
  bf16LevelTables,
  encoderOutputBytes,
  ImageSizeError,
  memoryHolding,
  outputViews,
  shareWithHelper,
  type BandHelper,
  type EncoderMemory,
  type OutputKinds,
} from './qwen-vl.ts';
import { checkRgbBytes } from './resize.ts';
import { BF16_TABLES_OFFSET, kernelsOn, LEVEL_TABLES_BYTES, writeLevelTables, type Kernels, type SharedWasmMemory } from './resize-simd.ts';

export interface InklingImageConfig {
  /** Side of a patch: preprocessor_config.json's size (40); its name tells this configuration from the others. */
  patch_side: number;
  /** Frames each patch is repeated into. */
  temporal_patch_size: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
}

/** OpenAI's CLIP mean and std, Inkling's processor's defaults. */
export const INKLING_DEFAULTS: InklingImageConfig = {
  patch_side: 40,
  temporal_patch_size: 2,
  image_mean: [0.48145466, 0.4578275, 0.40821073],
  image_std: [0.26862954, 0.26130258, 0.27577711],
};

/** The raw value divide_to_patches' padding takes, before rescale and normalize. */
const PAD_RAW = -1;

export interface InklingGeometry {
  rows: number;
  cols: number;
  patches: number;
}

/** divide_to_patches: ceil(h / p) rows, floor(w / p) + 1 columns; a patch a token. */
export function inklingGeometry(height: number, width: number, cfg: InklingImageConfig): InklingGeometry {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const p = cfg.patch_side;
  const rows = Math.ceil(height / p);
  const cols = Math.floor(width / p) + 1;
  return { rows, cols, patches: rows * cols };
}

/** Values in one patch: its frames of p × p pixels, three channels each. */
export const inklingPatchElements = (cfg: InklingImageConfig): number => cfg.temporal_patch_size * cfg.patch_side * cfg.patch_side * 3;

/**
 * Per channel, the encoder value of each 8-bit level and (index 256) of the padding, in torch's
 * float32 arithmetic for the fused rescale and normalize: m = f32(f32(mean) · 255), s =
 * f32(f32(std) · 255), value = f32(f32(x − m) / s).
 */
export function inklingLevels(cfg: Pick<InklingImageConfig, 'image_mean' | 'image_std'>): Float32Array[] {
  const f = Math.fround;
  return [0, 1, 2].map((c) => {
    const mean = f(f(cfg.image_mean[c]!) * 255);
    const std = f(f(cfg.image_std[c]!) * 255);
    const level = (x: number) => f(f(x - mean) / std);
    return Float32Array.from({ length: 257 }, (_, v) => level(v === 256 ? PAD_RAW : v));
  });
}

const align16 = (n: number) => Math.ceil(n / 16) * 16;

/**
 * Bytes an image takes in the pool's memory: its outputs, then the SIMD kernels' level tables
 * and a copy of its pixels (what both threads read; no resize).
 */
export function inklingMemoryBytes(width: number, height: number, cfg: InklingImageConfig, kinds: OutputKinds): number {
  return inklingTablesAt(width, height, cfg, kinds) + LEVEL_TABLES_BYTES + width * height * 3;
}

/** Where the level tables are in the pool's memory (the pixels' copy follows them). */
const inklingTablesAt = (width: number, height: number, cfg: InklingImageConfig, kinds: OutputKinds): number =>
  align16(encoderOutputBytes(inklingGeometry(height, width, cfg).patches * inklingPatchElements(cfg), kinds));

/** The patch row the second band starts at, for two threads: none when the image has one patch row. */
export function inklingBandStarts(height: number, cfg: InklingImageConfig): number[] {
  const rows = Math.ceil(height / cfg.patch_side);
  return rows < 2 ? [] : [Math.round(rows / 2)];
}

/**
 * Where the SIMD kernels write a patch's pixels from (resize.wat "levels"): the image's pixels,
 * the outputs and the tables all in their memory; `tables` the byte offset of the output's
 * kind's tables.
 */
interface PatchKernel {
  k: Kernels;
  tables: number;
}

/**
 * One patch's first frame from the image (the padding's index, 256, past its edges), then its
 * copies; the image's pixels through the SIMD kernels with `kernel`, else in JavaScript.
 */
function writePatch<A extends Float32Array | Uint16Array>(
  dst: A,
  at: number,
  tables: readonly A[],
  rgb: Uint8Array,
  width: number,
  height: number,
  x0: number,
  y0: number,
  p: number,
  frames: number,
  kernel: PatchKernel | undefined,
): void {
  const start = at;
  const [t0, t1, t2] = tables as [A, A, A];
  const pad0 = t0[256]!;
  const pad1 = t1[256]!;
  const pad2 = t2[256]!;
  const inside = Math.max(0, Math.min(p, width - x0));
  const size = dst.BYTES_PER_ELEMENT;
  for (let y = 0; y < p; y++) {
    const iy = y0 + y;
    let x = 0;
    if (iy < height && kernel && inside > 0) {
      // Channels last: a channel's values are one element apart, a pixel's three.
      kernel.k.levels(rgb.byteOffset + (iy * width + x0) * 3, inside, dst.byteOffset + at * size, size, 3 * size, kernel.tables, size);
      at += inside * 3;
      x = inside;
    } else if (iy < height)
      for (let from = (iy * width + x0) * 3; x < inside; x++, from += 3) {
        dst[at++] = t0[rgb[from]!]!;
        dst[at++] = t1[rgb[from + 1]!]!;
        dst[at++] = t2[rgb[from + 2]!]!;
      }
    for (; x < p; x++) {
      dst[at++] = pad0;
      dst[at++] = pad1;
      dst[at++] = pad2;
    }
  }
  const frame = at - start;
  for (let t = 1; t < frames; t++, at += frame) dst.copyWithin(at, start, start + frame);
}

/**
 * Patch rows [r0, r1) of the image into the outputs: on the SIMD kernels over `kernels` when
 * given (the pixels, the outputs and the level tables at `tablesAt` all in their memory), else
 * in JavaScript.
 */
function writeRows(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: InklingImageConfig,
  out: { pixelValues?: Float32Array | undefined; bf16?: Uint16Array | undefined },
  r0: number,
  r1: number,
  simd?: { k: Kernels; tablesAt: number },
): void {
  const levels = inklingLevels(cfg);
  const bfLevels = bf16LevelTables(levels);
  const { cols } = inklingGeometry(height, width, cfg);
  const p = cfg.patch_side;
  const per = inklingPatchElements(cfg);
  const f32Kernel = simd && { k: simd.k, tables: simd.tablesAt };
  const bf16Kernel = simd && { k: simd.k, tables: simd.tablesAt + BF16_TABLES_OFFSET };
  for (let r = r0; r < r1; r++)
    for (let c = 0; c < cols; c++) {
      const i = r * cols + c;
      if (out.pixelValues) writePatch(out.pixelValues, i * per, levels, rgb, width, height, c * p, r * p, p, cfg.temporal_patch_size, f32Kernel);
      if (out.bf16) writePatch(out.bf16, i * per, bfLevels, rgb, width, height, c * p, r * p, p, cfg.temporal_patch_size, bf16Kernel);
    }
}

/**
 * The image's pixels copied into the pool's memory after the level tables (written there), for
 * the SIMD kernels and a helper thread: the copy, and the kernels over the memory (none where
 * WebAssembly SIMD is unavailable: the JavaScript writes then read the copy).
 */
function inklingInMemory(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: InklingImageConfig,
  memory: EncoderMemory,
  kinds: OutputKinds,
): { pixels: Uint8Array; tablesAt: number; simd?: { k: Kernels; tablesAt: number } } {
  const tablesAt = inklingTablesAt(width, height, cfg, kinds);
  const levels = inklingLevels(cfg);
  writeLevelTables(memory.memory, tablesAt, levels, bf16LevelTables(levels));
  const pixels = new Uint8Array(memory.memory.buffer, tablesAt + LEVEL_TABLES_BYTES, rgb.length);
  pixels.set(rgb);
  const simd = simdOn(memory.memory, tablesAt);
  return { pixels, tablesAt, ...(simd ? { simd } : {}) };
}

/** The second band of an image, as a helper thread runs it: plain data over the pool's shared memory. */
export interface InklingBandJob {
  kind: 'inkling';
  memory: SharedWasmMemory;
  cfg: InklingImageConfig;
  width: number;
  height: number;
  /** The image's pixels, copied into the memory. */
  srcAt: number;
  /** The SIMD kernels' level tables in the memory. */
  tablesAt: number;
  elements: number;
  f32At?: number;
  bf16At?: number;
  rows: [number, number];
}

/** Run a band another thread posted (what a helper thread does). */
export function runPostedInklingBand(job: InklingBandJob): undefined {
  const buffer = job.memory.buffer;
  const rgb = new Uint8Array(buffer, job.srcAt, job.width * job.height * 3);
  writeRows(
    rgb,
    job.width,
    job.height,
    job.cfg,
    {
      pixelValues: job.f32At !== undefined ? new Float32Array(buffer, job.f32At, job.elements) : undefined,
      bf16: job.bf16At !== undefined ? new Uint16Array(buffer, job.bf16At, job.elements) : undefined,
    },
    job.rows[0],
    job.rows[1],
    simdOn(job.memory, job.tablesAt),
  );
  return undefined;
}

/** The SIMD kernels over `memory` with the level tables at `tablesAt`, or undefined where WebAssembly SIMD is unavailable. */
function simdOn(memory: SharedWasmMemory, tablesAt: number): { k: Kernels; tablesAt: number } | undefined {
  const k = kernelsOn(memory);
  return k ? { k, tablesAt } : undefined;
}

/**
 * Two threads in the pool's memory: the image's pixels copied after the outputs and the level
 * tables, the second half of its patch rows posted to `helper`, the first written here (each
 * on the SIMD kernels where they run). Null where it does not
 * apply (memory not laid out for this image, one patch row): the caller runs preprocessInklingRgb.
 */
export async function preprocessInklingInBands(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: InklingImageConfig,
  memory: EncoderMemory,
  options: { bf16?: boolean; float32?: boolean },
  helper: BandHelper,
): Promise<(InklingGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: true; threads: number }) | null> {
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  if (!kinds.float32 && !kinds.bf16) throw new RangeError('preprocessInklingInBands: asked for neither float32 nor bfloat16 output');
  checkRgbBytes(rgb, width, height);
  const g = inklingGeometry(height, width, cfg);
  const elements = g.patches * inklingPatchElements(cfg);
  const starts = inklingBandStarts(height, cfg);
  if (starts.length === 0 || !memoryHolding(memory, elements, kinds, inklingMemoryBytes(width, height, cfg, kinds))) return null;
  const { pixels, tablesAt, simd } = inklingInMemory(rgb, width, height, cfg, memory, kinds);
  const views = outputViews(memory, kinds);
  const split = starts[0]!;
  const job: InklingBandJob = {
    kind: 'inkling',
    memory: memory.memory,
    cfg,
    width,
    height,
    srcAt: pixels.byteOffset,
    tablesAt,
    elements,
    ...(kinds.float32 ? { f32At: memory.f32At! } : {}),
    ...(kinds.bf16 ? { bf16At: memory.bf16At! } : {}),
    rows: [split, g.rows],
  };
  const { helped } = await shareWithHelper(
    helper,
    job,
    () => runPostedInklingBand(job),
    () => writeRows(pixels, width, height, cfg, views, 0, split, simd),
  );
  return { ...g, ...views, inMemory: true, threads: helped ? 2 : 1 };
}

/**
 * Patchify, pad and normalize packed RGB into [patches, temporal, p, p, 3]: float32 unless
 * `float32: false`, bfloat16 bits too with `bf16: true`; into the pool's memory when given
 * (laid out for this image), else new arrays.
 */
export function preprocessInklingRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: InklingImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory } = {},
): InklingGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean } {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessInklingRgb: asked for neither float32 nor bfloat16 output');
  checkRgbBytes(rgb, width, height);
  const g = inklingGeometry(height, width, cfg);
  const per = inklingPatchElements(cfg);
  const n = g.patches * per;
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const memory = memoryHolding(options.memory, n, kinds, inklingMemoryBytes(width, height, cfg, kinds));
  const views = memory ? outputViews(memory, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(n)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(n)) : undefined;
  // In the pool's memory, the pixels copied beside the outputs for the SIMD kernels.
  const inMemory = memory ? inklingInMemory(rgb, width, height, cfg, memory, kinds) : undefined;
  writeRows(inMemory?.pixels ?? rgb, width, height, cfg, { pixelValues: out, bf16: bf }, 0, g.rows, inMemory?.simd);
  return { ...g, ...(out ? { pixelValues: out } : {}), ...(bf ? { bf16: bf } : {}), inMemory: memory !== undefined };
}
