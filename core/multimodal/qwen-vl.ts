// Qwen2-VL / Qwen2.5-VL / Qwen3-VL image preprocessing (docs/preprocessing.md, "Pipeline"),
// from 8-bit RGB pixels to the encoder input the model expects.
//
//   smart_resize   factor = patch·merge; each side rounded to a multiple (half to even, at
//                  least one factor); scaled down (floor) above max_pixels, up (ceil) below
//                  min_pixels; errors on a zero side or an aspect ratio above 200.
//   resize         Pillow-exact bicubic (resize.ts)
//   rescale        × rescale_factor (1/255), in float64 then float32, as the HF processor does
//   normalize      (x - mean) / std per channel, in float32
//   patchify       [grid_t·grid_h·grid_w, C·T·P·P]: rows by merge block (row-major), then by
//                  (merge row, merge column) inside a block; features by channel, temporal
//                  copy, pixel row, pixel column; a still image is repeated T times.
//
// Rescale and normalize of an 8-bit value have only 256 possible results per channel, so
// they are a lookup table, and the table lookup plus the patch-layout scatter are fused
// into the resize's last pass: no intermediate float image is ever materialised. When the
// wire dtype is bfloat16 the bf16 bits are written in the same pass.
import { bf16BitsFromF32Bits } from '../transport/dtype.ts';
import { fnv1a64 } from '../util/fnv.ts';
import { resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import {
  kernelsOn,
  MAX_KERNEL_BYTES,
  newSharedMemory,
  planResize,
  resizeBand,
  resizeBytes,
  simdAvailable,
  type Kernels,
  type ResizePlan,
  type SharedWasmMemory,
} from './resize-simd.ts';
import { errnoText } from '../util/errno.ts';
import { writeAllAtSync } from '../util/write-all.ts';
import type { MoonVitBandJob } from './moonvit.ts';
import type { CropBandJob } from './crop-writer.ts';
import type { InklingBandJob } from './inkling.ts';
import type { DecodeBandJob } from './decode-shared.ts';

export type QwenVlFamily = 'qwen2_vl' | 'qwen3_vl';

export interface QwenVlImageConfig {
  patch_size: number;
  merge_size: number;
  temporal_patch_size: number;
  min_pixels: number;
  max_pixels: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
  rescale_factor: number;
  do_resize: boolean;
  do_rescale: boolean;
  do_normalize: boolean;
}

/** OpenAI CLIP's normalization (Qwen2-VL's processor and LLaVA-1.5's CLIP crop). */
export const CLIP_MEAN: [number, number, number] = [0.48145466, 0.4578275, 0.40821073];
export const CLIP_STD: [number, number, number] = [0.26862954, 0.26130258, 0.27577711];

export const QWEN_VL_DEFAULTS: Record<QwenVlFamily, QwenVlImageConfig> = {
  qwen2_vl: {
    patch_size: 14,
    merge_size: 2,
    temporal_patch_size: 2,
    min_pixels: 200_704,
    max_pixels: 1_003_520,
    image_mean: CLIP_MEAN,
    image_std: CLIP_STD,
    rescale_factor: 1 / 255,
    do_resize: true,
    do_rescale: true,
    do_normalize: true,
  },
  qwen3_vl: {
    patch_size: 16,
    merge_size: 2,
    temporal_patch_size: 2,
    min_pixels: 65_536,
    max_pixels: 16_777_216,
    image_mean: [0.5, 0.5, 0.5],
    image_std: [0.5, 0.5, 0.5],
    rescale_factor: 1 / 255,
    do_resize: true,
    do_rescale: true,
    do_normalize: true,
  },
};

export class ImageSizeError extends Error {
  override readonly name = 'ImageSizeError';
}

/** Python's round(): half to even. */
function roundHalfEven(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

export function smartResize(height: number, width: number, factor: number, minPixels: number, maxPixels: number): { height: number; width: number } {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const ratio = Math.max(height, width) / Math.min(height, width);
  if (ratio > 200) throw new ImageSizeError(`image of ${width}x${height} pixels: absolute aspect ratio must be at most 200, got ${ratio.toFixed(1)}`);
  let h = Math.max(factor, roundHalfEven(height / factor) * factor);
  let w = Math.max(factor, roundHalfEven(width / factor) * factor);
  if (h * w > maxPixels) {
    const beta = Math.sqrt((height * width) / maxPixels);
    h = Math.max(factor, Math.floor(height / beta / factor) * factor);
    w = Math.max(factor, Math.floor(width / beta / factor) * factor);
  } else if (h * w < minPixels) {
    const beta = Math.sqrt(minPixels / (height * width));
    h = Math.ceil((height * beta) / factor) * factor;
    w = Math.ceil((width * beta) / factor) * factor;
  }
  return { height: h, width: w };
}

export interface PatchGeometry {
  resizedHeight: number;
  resizedWidth: number;
  gridT: number;
  gridH: number;
  gridW: number;
  /** Rows of the encoder input: grid_t·grid_h·grid_w. */
  patches: number;
  /** Columns: 3·T·P·P. */
  features: number;
  /** Placeholder tokens: patches / merge². */
  tokens: number;
}

/** The side of a merge block in pixels (patch · merge): smart_resize's factor, to which resized sides are rounded. */
export function mergeBlockSide(cfg: QwenVlImageConfig): number {
  return cfg.patch_size * cfg.merge_size;
}

/** Values in one row of the encoder input (one patch): 3 channels · T temporal copies · P · P pixels. */
export function patchFeatures(cfg: QwenVlImageConfig): number {
  return 3 * cfg.temporal_patch_size * cfg.patch_size * cfg.patch_size;
}

export function patchGeometry(height: number, width: number, cfg: QwenVlImageConfig): PatchGeometry {
  const factor = mergeBlockSide(cfg);
  const size = cfg.do_resize ? smartResize(height, width, factor, cfg.min_pixels, cfg.max_pixels) : { height, width };
  if (size.height % factor !== 0 || size.width % factor !== 0) {
    throw new ImageSizeError(`image of ${width}x${height} pixels is not a multiple of ${factor} and do_resize is off`);
  }
  const gridT = 1;
  const gridH = size.height / cfg.patch_size;
  const gridW = size.width / cfg.patch_size;
  const patches = gridT * gridH * gridW;
  return {
    resizedHeight: size.height,
    resizedWidth: size.width,
    gridT,
    gridH,
    gridW,
    patches,
    features: patchFeatures(cfg),
    tokens: patches / (cfg.merge_size * cfg.merge_size),
  };
}

/** Per channel, the encoder value of each 8-bit level: rescale then normalize, in float32. */
export function levelTable(cfg: Pick<QwenVlImageConfig, 'image_mean' | 'image_std' | 'rescale_factor' | 'do_rescale' | 'do_normalize'>): Float32Array[] {
  return [0, 1, 2].map((c) => {
    const table = new Float32Array(256);
    const mean = Math.fround(cfg.image_mean[c]!);
    const std = Math.fround(cfg.image_std[c]!);
    for (let v = 0; v < 256; v++) {
      let x = cfg.do_rescale ? Math.fround(v * cfg.rescale_factor) : v;
      if (cfg.do_normalize) x = Math.fround(Math.fround(x - mean) / std);
      table[v] = x;
    }
    return table;
  });
}

/** Each level table's values as bfloat16 bits (round to nearest even), for a lookup straight to the wire encoding. */
export function bf16LevelTables(levels: readonly Float32Array[]): Uint16Array[] {
  const bits = new Uint32Array(1);
  const asFloat = new Float32Array(bits.buffer);
  return levels.map((t) =>
    Uint16Array.from(t, (v) => {
      asFloat[0] = v;
      return bf16BitsFromF32Bits(bits[0]!);
    }),
  );
}

export interface PreprocessedImage extends PatchGeometry {
  /** [patches, features] float32, row-major (absent when only bfloat16 was asked for). */
  pixelValues?: Float32Array;
  /** The same values as bfloat16 bits, when asked for. */
  bf16?: Uint16Array;
  /** [1, 3] int64 (grid_t, grid_h, grid_w). */
  gridThw: [number, number, number];
  /** The shared memory the outputs live in (the caller's `into`, or a new one). */
  memory?: SharedWasmMemory;
  /** When the bands were also written to a tensor file (preprocessRgbInBands with `write`): both threads' write time, or the first error. */
  written?: BandWrite;
}

/** Which encodings of the encoder input to produce. */
export interface OutputKinds {
  float32: boolean;
  bf16: boolean;
}

/**
 * Where an image's encoder input is written: shared memory holding the float32 and/or
 * bfloat16 outputs (byte offsets), then the resize's working space from `scratchAt`. The
 * WebAssembly kernels resize and scatter in it directly, from one or two threads; the
 * preprocessing pool keeps these and reuses them across requests.
 */
export interface EncoderMemory {
  memory: SharedWasmMemory;
  elements: number;
  f32At?: number;
  bf16At?: number;
  scratchAt: number;
}

const align16 = (n: number) => Math.ceil(n / 16) * 16;
/** Scatter constants (float64 rescale, float32 mean[3] and std[3]) at the start of the scratch space. */
const CONSTS_BYTES = 64;

function encoderLayout(elements: number, kinds: OutputKinds): Omit<EncoderMemory, 'memory'> {
  let at = 0;
  const f32At = kinds.float32 ? at : undefined;
  if (kinds.float32) at = align16(at + elements * 4);
  const bf16At = kinds.bf16 ? at : undefined;
  if (kinds.bf16) at = align16(at + elements * 2);
  return { elements, ...(f32At !== undefined ? { f32At } : {}), ...(bf16At !== undefined ? { bf16At } : {}), scratchAt: at };
}

/** Bytes an image of this size needs in its EncoderMemory, resized in `bands` bands. */
export function encoderMemoryBytes(width: number, height: number, cfg: QwenVlImageConfig, kinds: OutputKinds, bands = 2): number {
  const g = patchGeometry(height, width, cfg);
  const layout = encoderLayout(g.patches * g.features, kinds);
  const base = layout.scratchAt + CONSTS_BYTES;
  return base + resizeBytes(width, height, g.resizedWidth, g.resizedHeight, bandStarts(g, cfg, bands), base);
}

/** Bytes of the outputs alone for `elements` values (a processor whose resize does not run in this memory needs no more). */
export function encoderOutputBytes(elements: number, kinds: OutputKinds): number {
  return encoderLayout(elements, kinds).scratchAt;
}

/** Lay out `elements` of encoder input in `memory` (which the resize then grows as needed). */
export function encoderMemoryIn(memory: SharedWasmMemory, elements: number, kinds: OutputKinds): EncoderMemory {
  return { memory, ...encoderLayout(elements, kinds) };
}

function outputKinds(options: { bf16?: boolean; float32?: boolean }): OutputKinds {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessRgb: asked for neither float32 nor bfloat16 output');
  return { float32: options.float32 !== false, bf16: options.bf16 === true };
}

/** `into` holds this many elements in (at least) these encodings. */
export const fits = (into: EncoderMemory | undefined, elements: number, kinds: OutputKinds): into is EncoderMemory =>
  into !== undefined && into.elements === elements && (!kinds.float32 || into.f32At !== undefined) && (!kinds.bf16 || into.bf16At !== undefined);

/** `given` when it is laid out for these elements in these encodings and holds `bytes` without growing; else undefined (the caller then works in memory of its own). */
export const memoryHolding = (given: EncoderMemory | undefined, elements: number, kinds: OutputKinds, bytes: number): EncoderMemory | undefined =>
  fits(given, elements, kinds) && bytes <= given.memory.buffer.byteLength ? given : undefined;

export function outputViews(mem: EncoderMemory, kinds: OutputKinds): { pixelValues?: Float32Array; bf16?: Uint16Array } {
  const buffer = mem.memory.buffer;
  return {
    ...(kinds.float32 ? { pixelValues: new Float32Array(buffer, mem.f32At, mem.elements) } : {}),
    ...(kinds.bf16 ? { bf16: new Uint16Array(buffer, mem.bf16At, mem.elements) } : {}),
  };
}

/**
 * Resize, rescale, normalize and patchify packed RGB. Where WebAssembly SIMD is available
 * the kernels resize in shared memory and the scatter kernel writes float32 and/or bfloat16
 * straight into the encoder input; elsewhere (or for a patch size under 4, or constants the
 * kernel cannot reproduce bit for bit) the JavaScript passes do, with the same bits.
 * `bf16: true` also produces the bfloat16 encoding; `float32: false` skips float32 when only
 * bfloat16 travels. `into` (reused memory) is used when it fits the image; `javascript`
 * forces the JavaScript passes (the second implementation the tests hold the kernels to);
 * `allocate: false` forbids making a new shared memory (the JavaScript passes run instead).
 */
export function preprocessRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: QwenVlImageConfig,
  options: { bf16?: boolean; float32?: boolean; into?: EncoderMemory; javascript?: boolean; allocate?: boolean } = {},
): PreprocessedImage {
  const g = patchGeometry(height, width, cfg);
  const kinds = outputKinds(options);
  const n = g.patches * g.features;
  const gridThw: [number, number, number] = [g.gridT, g.gridH, g.gridW];
  const into = fits(options.into, n, kinds) ? options.into : undefined;
  const bytes = into ? 0 : encoderMemoryBytes(width, height, cfg, kinds, 1);
  // allocate: false (pool threads): never a new shared memory; when `into` does not fit, the
  // JavaScript passes run in ordinary memory instead.
  const fresh = options.allocate !== false && bytes <= MAX_KERNEL_BYTES;
  const mem = !options.javascript && simdAvailable() && scatterable(cfg) && (into || fresh) ? (into ?? newEncoderMemory(bytes, n, kinds)) : undefined;
  if (mem) {
    const planned = planPreprocess(mem, rgb, width, height, cfg, g, kinds, []);
    if (planned) {
      runPreprocessBand(planned.k, { ...planned.job, band: 0 });
      return { ...g, ...outputViews(mem, kinds), gridThw, memory: mem.memory };
    }
  }
  // The JavaScript scatter (after either resize implementation), into `into` when given.
  const views = into ? outputViews(into, kinds) : {};
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(n)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(n)) : undefined;
  const scatter = patchScatter(g, cfg, out, bf);
  (options.javascript ? resizeRgbIntoJs : resizeRgbInto)(rgb, width, height, g.resizedWidth, g.resizedHeight, scatter.row);
  scatter.repeatTemporal();
  return { ...g, ...(out ? { pixelValues: out } : {}), ...(bf ? { bf16: bf } : {}), gridThw, ...(into ? { memory: into.memory } : {}) };
}

/** A new memory for one image, or undefined when the process cannot reserve one (the JavaScript passes then run). */
function newEncoderMemory(bytes: number, elements: number, kinds: OutputKinds): EncoderMemory | undefined {
  try {
    return encoderMemoryIn(newSharedMemory(bytes), elements, kinds);
  } catch {
    return undefined; // e.g. address space limited (ulimit -v): WebAssembly memories reserve theirs up front
  }
}

/** Encoder-input elements in one row of merge blocks: grid_w · merge patches of `features` values. */
function blockRowElements(g: PatchGeometry, cfg: QwenVlImageConfig): number {
  return g.gridW * cfg.merge_size * g.features;
}

/** Whether the scatter kernel reproduces levelTable() bit for bit for this configuration. */
function scatterable(cfg: QwenVlImageConfig): boolean {
  const finite = [cfg.rescale_factor, ...cfg.image_mean, ...cfg.image_std].every(Number.isFinite);
  // The kernel's last 4-pixel step of a patch row overlaps the one before it.
  return cfg.patch_size >= 4 && finite && cfg.image_std.every((v) => Math.fround(v) !== 0);
}

/**
 * Writes resized rows into the encoder input(s): the table lookup for rescale/normalize
 * (and bfloat16) plus the patch-layout scatter, then the temporal copies of a still image.
 * (The JavaScript path; the scatter kernel in resize.wat does the same in WebAssembly.)
 */
function patchScatter(g: PatchGeometry, cfg: QwenVlImageConfig, out: Float32Array | undefined, bf: Uint16Array | undefined) {
  const P = cfg.patch_size;
  const m = cfg.merge_size;
  const T = cfg.temporal_patch_size;
  const F = g.features;
  const PP = P * P;
  const [t0, t1, t2] = levelTable(cfg) as [Float32Array, Float32Array, Float32Array];
  const [b0, b1, b2] = (bf ? bf16LevelTables([t0, t1, t2]) : [new Uint16Array(256), new Uint16Array(256), new Uint16Array(256)]) as [
    Uint16Array,
    Uint16Array,
    Uint16Array,
  ];
  const cs = T * PP; // distance between channels within a feature vector
  // The scatter walks one patch row (P pixels) at a time: its P values per channel and
  // temporal copy land in P consecutive slots, so every store stream is sequential.
  const layout: ScatterLayout = { P, m, F, cs, gridW: g.gridW, rowStride: blockRowElements(g, cfg) };
  return {
    row: (y: number, row: Uint8Array) => {
      if (out) scatterRow(row, y, out, t0, t1, t2, layout);
      if (bf) scatterRow(row, y, bf, b0, b1, b2, layout);
    },
    /** A still image is repeated T times: copy each channel's P×P block to temporal slots 1..T-1. */
    repeatTemporal: () => {
      for (let patch = 0; patch < g.patches; patch++) {
        for (let c = 0; c < 3; c++) {
          const from = patch * F + c * cs;
          for (let t = 1; t < T; t++) {
            out?.copyWithin(from + t * PP, from, from + PP);
            bf?.copyWithin(from + t * PP, from, from + PP);
          }
        }
      }
    },
  };
}

/**
 * One band of an image's preprocessing, as a thread runs it: a resize planned in the shared
 * memory that also holds the encoder outputs. Plain data, so the band can be posted to
 * another thread.
 */
export interface PreprocessBandJob {
  /** The shared memory the plan and the outputs live in. */
  memory: SharedWasmMemory;
  plan: ResizePlan;
  band: number;
  cfg: QwenVlImageConfig;
  geometry: PatchGeometry;
  /** Byte offsets of the outputs to write (float32, bfloat16) and of the scatter constants. */
  f32At?: number;
  bf16At?: number;
  consts: number;
  /** Also write the band's rows of this encoding to this open file, at their offset in the tensor (docs/transport.md, "Writing a tensor"). */
  write?: TensorFileWrite;
}

/**
 * Where the encoder input of one wire encoding also goes as each band is done: a file the
 * caller opened (for a request's /dev/shm file, core/transport/prewrite-file.ts), by its
 * descriptor, which any thread of the process may write to (so a band posted to a helper thread
 * carries it). The image library writes to it and never opens or closes it.
 */
export interface TensorFileWrite {
  fd: number;
  kind: 'float32' | 'bf16';
}

/** Write all of `bytes` to the file at `position`; the microseconds it took (throws the write's error). */
export function writeTimed(target: TensorFileWrite, bytes: Uint8Array, position: number): number {
  const t = performance.now();
  writeAllAtSync(target.fd, bytes, position);
  return (performance.now() - t) * 1000;
}

/** What became of one band's write to the tensor's file: its time, or why it failed. */
export interface BandWrite {
  micros: number;
  error?: string;
}

/** The bytes of encoder rows [first, end) of merge-block rows, in the encoding `write` asks for, and their offset in the tensor. */
function bandBytes(job: PreprocessBandJob, write: TensorFileWrite): { bytes: Uint8Array; position: number } {
  const { cfg, geometry: g } = job;
  const band = job.plan.bands[job.band]!;
  const rowsPerBlock = mergeBlockSide(cfg);
  const per = blockRowElements(g, cfg);
  const first = (band.y0 / rowsPerBlock) * per;
  const end = (band.y1 / rowsPerBlock) * per;
  const size = write.kind === 'float32' ? 4 : 2;
  const at = write.kind === 'float32' ? job.f32At! : job.bf16At!;
  return { bytes: new Uint8Array(job.memory.buffer, at + first * size, (end - first) * size), position: first * size };
}

/** Runs a band of this thread's image on another thread; resolves when it is computed (and its write, if asked for, done or failed). */
export interface BandHelper {
  (job: PreprocessBandJob | MoonVitBandJob | InklingBandJob | CropBandJob | DecodeBandJob): Promise<BandWrite | string | undefined>;
  /**
   * Take the answer on this thread, polling for up to `ms`, instead of sleeping until it comes:
   * once this thread's band is done the other's is due about now, and a thread that sleeps
   * takes milliseconds to wake on a VM whose core has gone idle (measured: docs/performance.md,
   * "Image preprocessing (`npm run bench:preprocess`)").
   */
  pollAnswer?(ms: number): void;
}

/** How long a thread that finished its band polls for the helper's (preprocessRgbInBands). */
const ANSWER_POLL_MS = 20;

/**
 * Run `own` (this thread's band) while `helper` runs `job`: a helper that fails has its band
 * made up for here (`runHere`, after `own`), and nothing returns or throws while the other
 * thread may still use the image's memory (or its file). Resolves to both bands' results and
 * whether the helper's thread did its band.
 */
export async function shareWithHelper<O, W>(
  helper: BandHelper,
  job: Parameters<BandHelper>[0],
  runHere: () => W,
  own: () => O,
): Promise<{ own: O; other: W; helped: boolean }> {
  let helped = true;
  const other = helper(job).then(
    (answer) => answer as W,
    () => {
      helped = false;
      return runHere();
    },
  );
  let mine: O;
  try {
    mine = own();
    helper.pollAnswer?.(ANSWER_POLL_MS);
  } finally {
    // Never return (or throw) while the other thread may still use the memory: its failure, if any, is thrown below.
    await other.catch(() => undefined);
  }
  return { own: mine, other: await other, helped };
}

/**
 * Output rows where bands after the first start, for `count` bands: whole merge-block rows
 * (patch_size · merge_size pixels), so each band writes its own patches; fewer bands when
 * the image has fewer block rows.
 */
export function bandStarts(g: PatchGeometry, cfg: QwenVlImageConfig, count: number): number[] {
  const blockRows = g.gridH / cfg.merge_size;
  const rowsPerBlock = mergeBlockSide(cfg);
  const starts: number[] = [];
  for (let b = 1; b < Math.min(count, blockRows); b++) starts.push(Math.round((b * blockRows) / count) * rowsPerBlock);
  return starts;
}

/** Plan an image's resize into `mem` (after its outputs) and write the scatter constants. */
function planPreprocess(
  mem: EncoderMemory,
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: QwenVlImageConfig,
  g: PatchGeometry,
  kinds: OutputKinds,
  starts: number[],
): { k: Kernels; job: Omit<PreprocessBandJob, 'band'> } | null {
  const k = kernelsOn(mem.memory);
  if (!k) return null;
  const consts = mem.scratchAt; // 16-byte aligned by encoderLayout
  const plan = planResize(k, rgb, width, height, g.resizedWidth, g.resizedHeight, starts, consts + CONSTS_BYTES);
  if (!plan) return null;
  const buffer = mem.memory.buffer;
  new Float64Array(buffer, consts, 1)[0] = cfg.do_rescale ? cfg.rescale_factor : 1;
  new Float32Array(buffer, consts + 16, 3).set(cfg.do_normalize ? cfg.image_mean : [0, 0, 0]);
  new Float32Array(buffer, consts + 32, 3).set(cfg.do_normalize ? cfg.image_std : [1, 1, 1]);
  const outputs = { ...(kinds.float32 ? { f32At: mem.f32At! } : {}), ...(kinds.bf16 ? { bf16At: mem.bf16At! } : {}) };
  return { k, job: { memory: mem.memory, plan, cfg, geometry: g, ...outputs, consts } };
}

/** Run a band another thread planned, on kernels over its memory (what a helper thread does). */
export function runPostedPreprocessBand(job: PreprocessBandJob): BandWrite | undefined {
  const k = kernelsOn(job.memory);
  if (!k) throw new Error('WebAssembly SIMD kernels are unavailable in this thread');
  return runPreprocessBand(k, job);
}

/** Resize one band of a planned image and scatter its rows into the outputs (any thread holding kernels on the plan's memory). */
function runPreprocessBand(k: Kernels, job: PreprocessBandJob): BandWrite | undefined {
  const { cfg, geometry: g } = job;
  const band = job.plan.bands[job.band]!;
  // Bands are whole merge-block rows (bandStarts; the resized height is a multiple of patch × merge).
  const blockHeight = mergeBlockSide(cfg);
  if (band.y0 % blockHeight !== 0 || band.y1 % blockHeight !== 0 || g.gridW % cfg.merge_size !== 0)
    throw new RangeError(
      `scatter: rows ${band.y0}..${band.y1} are not whole merge-block rows of ${blockHeight}, or grid_w ${g.gridW} is not a multiple of merge_size ${cfg.merge_size}`,
    );
  const rows = resizeBand(k, job.plan, job.band);
  // One pass writes every encoding asked for: bit 0 float32, bit 1 bfloat16.
  const kinds = (job.f32At !== undefined ? 1 : 0) | (job.bf16At !== undefined ? 2 : 0);
  k.scatter(
    rows.at,
    rows.stride,
    band.y0 / blockHeight,
    (band.y1 - band.y0) / blockHeight,
    job.f32At ?? 0,
    job.bf16At ?? 0,
    kinds,
    cfg.patch_size,
    cfg.merge_size,
    g.features,
    cfg.temporal_patch_size,
    g.gridW,
    blockRowElements(g, cfg),
    job.consts,
  );
  if (!job.write) return undefined;
  // A failed write is reported, not thrown: the band is computed all the same, and the other
  // band's thread may still be writing to the same descriptor (it is closed once both are done).
  const { bytes, position } = bandBytes(job, job.write);
  const t = performance.now();
  try {
    return { micros: writeTimed(job.write, bytes, position) };
  } catch (err) {
    // Any failure of the write is the band's outcome, said as the system call said it.
    return { micros: (performance.now() - t) * 1000, error: errnoText(err) };
  }
}

/**
 * Preprocess in two bands into `into`, this thread running the first while `helper` runs
 * the second on another thread. Null when the image cannot be split (no SIMD kernels, a
 * configuration the scatter kernel does not take, a single merge-block row, `into` not
 * fitting the image, a layout over the kernels' memory limit): the caller then runs
 * preprocessRgb. A failed helper is made up for by running its band here.
 */
export async function preprocessRgbInBands(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: QwenVlImageConfig,
  into: EncoderMemory,
  options: { bf16?: boolean; float32?: boolean; write?: TensorFileWrite },
  helper: BandHelper,
): Promise<PreprocessedImage | null> {
  if (!simdAvailable() || !scatterable(cfg)) return null;
  const kinds = outputKinds(options);
  const g = patchGeometry(height, width, cfg);
  if (!fits(into, g.patches * g.features, kinds)) return null;
  const starts = bandStarts(g, cfg, 2);
  if (starts.length === 0) return null;
  const planned = planPreprocess(into, rgb, width, height, cfg, g, kinds, starts);
  if (!planned || planned.job.plan.bands.length !== 2) return null;
  // Each thread writes its own band to the tensor's file as soon as it is done (a band is a
  // contiguous range of encoder rows), so little is left to write when both are.
  if (options.write && (options.write.kind === 'float32' ? kinds.float32 : kinds.bf16)) planned.job.write = options.write;
  const { own: first, other: second } = await shareWithHelper(
    helper,
    { ...planned.job, band: 1 },
    () => runPreprocessBand(planned.k, { ...planned.job, band: 1 }),
    () => runPreprocessBand(planned.k, { ...planned.job, band: 0 }),
  );
  const written = planned.job.write
    ? { micros: (first?.micros ?? 0) + (second?.micros ?? 0), ...(first?.error || second?.error ? { error: (first?.error ?? second?.error)! } : {}) }
    : undefined;
  return { ...g, ...outputViews(into, kinds), gridThw: [g.gridT, g.gridH, g.gridW], memory: into.memory, ...(written ? { written } : {}) };
}

interface ScatterLayout {
  P: number;
  m: number;
  F: number;
  cs: number;
  gridW: number;
  rowStride: number;
}

/**
 * One resized row into patch layout, temporal copy 0 only: for each patch column, the row's
 * P pixels land as P consecutive values per channel. A plain function with everything in
 * parameters, so the JIT keeps the loop state in registers.
 */
function scatterRow<A extends Float32Array | Uint16Array>(row: Uint8Array, y: number, out: A, l0: A, l1: A, l2: A, l: ScatterLayout): void {
  const { P, m, F, cs, gridW } = l;
  const gy = (y / P) | 0;
  const pr = y - gy * P;
  const bh = (gy / m) | 0;
  const mr = gy - bh * m;
  const rowBase = bh * l.rowStride + mr * m * F + pr * P;
  for (let gx = 0; gx < gridW; gx++) {
    const bw = (gx / m) | 0;
    const base = rowBase + (bw * m * m + (gx - bw * m)) * F;
    const o1 = base + cs;
    const o2 = o1 + cs;
    for (let pc = 0, q = gx * P * 3; pc < P; pc++, q += 3) {
      out[base + pc] = l0[row[q]!]!;
      out[o1 + pc] = l1[row[q + 1]!]!;
      out[o2 + pc] = l2[row[q + 2]!]!;
    }
  }
}

/**
 * FNV-1a-64 over the encoder values × 255 (in float32, as numpy computes it), rounded half
 * to even and clamped to 0..255, as bytes in row-major order. With normalization off it
 * identifies the resized pixels in patch layout.
 */
export function encoderFingerprint(values: Float32Array): string {
  const chunk = new Uint8Array(Math.min(values.length, 1 << 16));
  let state: { hi: number; lo: number } | undefined;
  for (let start = 0; start < values.length; start += chunk.length) {
    const n = Math.min(chunk.length, values.length - start);
    for (let i = 0; i < n; i++) {
      const byte = roundHalfEven(Math.fround(values[start + i]! * 255));
      chunk[i] = byte > 255 ? 255 : byte > 0 ? byte : 0; // NaN and negatives -> 0
    }
    state = fnv1a64(chunk.subarray(0, n), state);
  }
  const { hi, lo } = state ?? fnv1a64(new Uint8Array(0));
  return hi.toString(16).padStart(8, '0') + lo.toString(16).padStart(8, '0');
}
