// Llama 4's image preprocessing (docs/preprocessing.md, "Tiles (Llama 4)"), as Hugging Face's
// Llama4ImageProcessor runs it (image_processing_llama4.py), from 8-bit RGB pixels to the
// encoder input:
//
//   canvases     for 1 to max_patches tiles, every rows × cols factorisation times the tile
//                side, in HF's order (find_supported_resolutions)
//   best fit     scale = min(canvas_h / h, canvas_w / w) in float32 (torch divides the
//                canvases' integer tensor); the smallest scale ≥ 1, else the largest below
//                1; of the canvases with that scale the smallest area (get_best_fit)
//   resize       into the canvas without distortion, never upscaling past a tile
//                (get_max_res_without_distortion, with HF's mix of float32 tensor values and
//                Python floats); Pillow-exact BILINEAR (resize.ts; HF runs torchvision's uint8
//                antialiased bilinear, Pillow-SIMD's kernel: within one level of it)
//   pad          with 0 (black) at the bottom and the right, to the canvas
//   normalize    in bfloat16, as HF's rescale_and_normalize: bf16(x · rescale in float32),
//                then (x − bf16(mean)) / bf16(std), each step rounded to bfloat16: a table
//                per channel of the 256 levels' values (exact as float32 too)
//   tiles        the canvas cut into tile × tile tiles row by row, then (more than one tile)
//                the whole image squeezed to tile × tile by the same resize: the global tile
//   layout       [tiles (+ 1), 3, tile, tile]: one image's rows of the flat pixel_values, split
//                by patches_per_image; aspect_ratios [rows, cols]
//   tokens       (tile / patch)² / round(1 / pixel_shuffle_ratio²) per crop (144), as vLLM's
//                model embeds them; the prompt wraps them in the tile separators (families/llama4.ts)
//
// The reference (scripts/reference/llama4_reference.py) gives the same bytes. Where mmtc
// differs from the gateway (its filter, its float64 best fit, its float32 normalize, its
// max_image_tiles key): docs/preprocessing.md.
import { bf16BitsFromF32Bits } from '../transport/dtype.ts';
import { cropBandStarts, cropResizesBytes, cropWriter, intoCrop, runCrops, shareCrops, withCrops, type CropResize, type CropWork } from './crop-writer.ts';
import { encoderOutputBytes, ImageSizeError, type BandHelper, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';

export interface Llama4ImageConfig {
  /** preprocessor_config.json size.height (and width): a tile's side, the vision tower's image_size. */
  tile_size: number;
  /** max_patches: the most tiles an image's canvas holds. */
  max_patches: number;
  /** resize_to_max_canvas: upscale to the largest canvas (HF's default false: never past a tile). */
  resize_to_max_canvas: boolean;
  rescale_factor: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
  /** config.json vision_config.patch_size and pixel_shuffle_ratio: the tokens a tile gives. */
  patch_size: number;
  pixel_shuffle_ratio: number;
}

/** meta-llama/Llama-4-Scout-17B-16E-Instruct's preprocessor_config.json and vision_config. */
export const LLAMA4_DEFAULTS: Llama4ImageConfig = {
  tile_size: 336,
  max_patches: 16,
  resize_to_max_canvas: false,
  rescale_factor: 0.00392156862745098,
  image_mean: [0.5, 0.5, 0.5],
  image_std: [0.5, 0.5, 0.5],
  patch_size: 14,
  pixel_shuffle_ratio: 0.5,
};

export interface Llama4Geometry {
  /** The canvas chosen (rows × cols tiles). */
  canvasHeight: number;
  canvasWidth: number;
  /** The resize's output, at the canvas's top left. */
  resizedHeight: number;
  resizedWidth: number;
  /** aspect_ratios: the canvas's tiles. */
  rows: number;
  cols: number;
  /** The image's crops: its tiles, and the global tile when there is more than one. */
  crops: number;
  /** Embedded tokens: crops × tokens a tile. */
  tokens: number;
}

/** The tokens one tile gives the model: (tile / patch)² patches, pixel-shuffled (HF's and vLLM's integer arithmetic). */
export function llama4TokensPerTile(cfg: Pick<Llama4ImageConfig, 'tile_size' | 'patch_size' | 'pixel_shuffle_ratio'>): number {
  const side = Math.floor(cfg.tile_size / cfg.patch_size);
  return Math.floor((side * side) / Math.round(1 / (cfg.pixel_shuffle_ratio * cfg.pixel_shuffle_ratio)));
}

const supported = new Map<string, Array<[number, number]>>();

/** HF's find_supported_resolutions: [height, width] canvases, grouped by aspect ratio in the order the ratios first appear. */
export function llama4Canvases(maxPatches: number, tile: number): Array<[number, number]> {
  const key = `${maxPatches}/${tile}`;
  const known = supported.get(key);
  if (known) return known;
  const byRatio = new Map<number, Array<[number, number]>>();
  for (let chunks = maxPatches; chunks >= 1; chunks--) {
    const factors: number[] = [];
    for (let i = 1; i * i <= chunks; i++) if (chunks % i === 0) factors.push(i, chunks / i);
    for (const rows of [...new Set(factors)].sort((a, b) => a - b)) {
      const cols = chunks / rows;
      const ratio = rows / cols;
      if (!byRatio.has(ratio)) byRatio.set(ratio, []);
      byRatio.get(ratio)!.push([rows * tile, cols * tile]);
    }
  }
  const canvases = [...byRatio.values()].flat();
  supported.set(key, canvases);
  return canvases;
}

/** A number as HF's code holds it: a float32 tensor's value (a canvas's side) or a Python int or float. */
interface Held {
  v: number;
  f32: boolean;
}

const over = (a: Held, b: number): Held => ({ v: a.f32 ? Math.fround(a.v / b) : a.v / b, f32: a.f32 });
/** a < b as torch compares a tensor with a Python number: in float32 when either is a tensor. */
const below = (a: Held, b: Held): boolean => (a.f32 || b.f32 ? Math.fround(a.v) < Math.fround(b.v) : a.v < b.v);
const times = (n: number, s: Held): number => (s.f32 ? Math.fround(n * s.v) : n * s.v);

export function llama4Geometry(height: number, width: number, cfg: Llama4ImageConfig): Llama4Geometry {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const T = cfg.tile_size;
  const canvases = llama4Canvases(cfg.max_patches, T);
  // get_best_fit, its scales in float32.
  const scales = canvases.map(([ch, cw]) => {
    const sw = Math.fround(cw / width);
    const sh = Math.fround(ch / height);
    return sh > sw ? sw : sh;
  });
  const up = scales.filter((s) => s >= 1);
  const selected = up.length > 0 ? (cfg.resize_to_max_canvas ? Math.max(...up) : Math.min(...up)) : Math.max(...scales.filter((s) => s < 1));
  let best = -1;
  scales.forEach((s, i) => {
    if (s !== selected) return;
    if (best < 0 || canvases[i]![0] * canvases[i]![1] < canvases[best]![0] * canvases[best]![1]) best = i;
  });
  const [canvasHeight, canvasWidth] = canvases[best]!;
  // HF's cap on upscaling: Python's min(max(side, tile), canvas) keeps the canvas's tensor value where it is the smaller.
  const cap = (side: number, canvas: number): Held =>
    cfg.resize_to_max_canvas || canvas < Math.max(side, T) ? { v: canvas, f32: true } : { v: Math.max(side, T), f32: false };
  const capH = cap(height, canvasHeight);
  const capW = cap(width, canvasWidth);
  // get_max_res_without_distortion.
  const scaleW = over(capW, width);
  const scaleH = over(capH, height);
  const [resizedHeight, resizedWidth] = below(scaleW, scaleH)
    ? [Math.min(Math.floor(times(height, scaleW)), capH.v), capW.v]
    : [capH.v, Math.min(Math.floor(times(width, scaleH)), capW.v)];
  const rows = Math.floor(canvasHeight / T);
  const cols = Math.floor(canvasWidth / T);
  const crops = rows * cols + (rows * cols > 1 ? 1 : 0);
  return {
    canvasHeight,
    canvasWidth,
    resizedHeight: Math.max(resizedHeight, 1),
    resizedWidth: Math.max(resizedWidth, 1),
    rows,
    cols,
    crops,
    tokens: crops * llama4TokensPerTile(cfg),
  };
}

/** Values of one crop: [3, tile, tile]. */
export const llama4CropElements = (cfg: Pick<Llama4ImageConfig, 'tile_size'>): number => 3 * cfg.tile_size * cfg.tile_size;

/** A float32 value rounded to bfloat16 (to nearest, ties to even), as a float32. */
const scratchF32 = new Float32Array(1);
const scratchBits = new Uint32Array(scratchF32.buffer);
function toBf16(x: number): number {
  scratchF32[0] = x;
  scratchBits[0] = bf16BitsFromF32Bits(scratchBits[0]!) << 16;
  return scratchF32[0];
}

/** Per channel, the encoder value of each 8-bit level as HF computes it in bfloat16 (rescale, then normalize, each step rounded). */
export function llama4Levels(cfg: Pick<Llama4ImageConfig, 'rescale_factor' | 'image_mean' | 'image_std'>): Float32Array[] {
  const rescale = Math.fround(cfg.rescale_factor);
  return [0, 1, 2].map((c) => {
    const mean = toBf16(cfg.image_mean[c]!);
    const std = toBf16(cfg.image_std[c]!);
    const table = new Float32Array(256);
    for (let v = 0; v < 256; v++) {
      const x = toBf16(Math.fround(v * rescale));
      table[v] = toBf16(Math.fround(toBf16(Math.fround(x - mean)) / std));
    }
    return table;
  });
}

/** The image's resizes and where their rows go: into the canvas's tiles, then (more than one tile) squeezed into the global tile after them. */
function llama4Resizes(g: Llama4Geometry, cfg: Pick<Llama4ImageConfig, 'tile_size'>): CropResize[] {
  const T = cfg.tile_size;
  const tiles = g.rows * g.cols;
  const canvas: CropResize = { outW: g.resizedWidth, outH: g.resizedHeight, place: { top: 0, left: 0, cols: g.cols, resizedWidth: g.resizedWidth, first: 0 } };
  return g.crops > tiles ? [canvas, { outW: T, outH: T, place: intoCrop(tiles, T) }] : [canvas];
}

/** Bytes an image of this size takes in the pool's memory: its outputs, then its resizes' working space (cropResizesBytes). */
export function llama4MemoryBytes(width: number, height: number, cfg: Llama4ImageConfig, kinds: OutputKinds): number {
  const g = llama4Geometry(height, width, cfg);
  const outputs = encoderOutputBytes(g.crops * llama4CropElements(cfg), kinds);
  return outputs + cropResizesBytes(width, height, llama4Resizes(g, cfg), outputs, 'bilinear');
}

/** Where the helper thread's band starts in the costliest resize (cropSplit: its first row when the helper takes it whole; none: one thread does the image): what the pool asks before it offers a helper. */
export function llama4BandStarts(width: number, height: number, cfg: Llama4ImageConfig): number[] {
  return cropBandStarts(width, height, llama4Resizes(llama4Geometry(height, width, cfg), cfg), 'bilinear');
}

type Llama4Result = Llama4Geometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean };

/** An image's crops to write: its resizes, and its padding beside them (crop-writer.ts). */
function llama4Crops(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Llama4ImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean },
): CropWork<Llama4Result> {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessLlama4Rgb: asked for neither float32 nor bfloat16 output');
  const g = llama4Geometry(height, width, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const T = cfg.tile_size;
  const w = cropWriter(rgb, width, height, {
    ...options,
    crops: g.crops,
    cropHeight: T,
    cropWidth: T,
    levels: llama4Levels(cfg),
    filter: 'bilinear',
    bytes: llama4MemoryBytes(width, height, cfg, kinds),
  });
  // The padding (black, normalized) at the bottom and the right of the canvas: right of the
  // resized image along its rows, then the rows below it.
  const canvas = { cols: g.cols, first: 0 };
  const canvasWidth = g.cols * T;
  const padding = () => {
    w.fillCanvas(canvas, 0, g.resizedHeight, g.resizedWidth, canvasWidth, 0);
    w.fillCanvas(canvas, g.resizedHeight, g.rows * T, 0, canvasWidth, 0);
  };
  return { w, resizes: llama4Resizes(g, cfg), padding, finish: () => withCrops(g, w) };
}

/**
 * Llama 4's encoder input of one image, [tiles (+ 1), 3, tile, tile]: the canvas's tiles row by
 * row, then the global tile; float32 unless `float32: false`, bfloat16 bits too with
 * `bf16: true` (the same values: they are bfloat16's). `memory` (the pool's, laid out for this
 * image: llama4MemoryBytes) holds the outputs and the resizes; `javascript` forces the
 * JavaScript resize (the tests hold the kernels to it).
 */
export function preprocessLlama4Rgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Llama4ImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean } = {},
): Llama4Result {
  return runCrops(llama4Crops(rgb, width, height, cfg, options));
}

/** As preprocessLlama4Rgb, the resizes shared with `helper` in the pool's memory (crop-writer.ts): the same bytes. */
export function preprocessLlama4Shared(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Llama4ImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory },
  helper: BandHelper | undefined,
): Promise<Llama4Result & { threads: number }> {
  return shareCrops(llama4Crops(rgb, width, height, cfg, options), helper);
}
