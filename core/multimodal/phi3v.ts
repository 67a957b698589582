// Phi-3-vision's image preprocessing (docs/preprocessing.md, "HD crops (Phi-3-vision)"), as the
// checkpoint's Phi3VImageProcessor runs it (microsoft/Phi-3-vision-128k-instruct,
// image_processing_phi3_v.py, which vLLM runs for its Phi-3-vision), from 8-bit RGB pixels to
// the encoder input:
//
//   HD size      a portrait image is transposed; ratio = w / h; scale = the largest s with
//                s · ceil(s / ratio) ≤ num_crops; new_w = int(s · 336), new_h = int(new_w / ratio)
//   resize       Pillow-exact BILINEAR to new_w × new_h (torchvision's resize of a PIL image)
//   pad          the height with white to a multiple of 336, top int((tar − h) / 2); transposed back
//   normalize    x / 255, − mean, / std, each step in float32 (ToTensor, Normalize)
//   global       the whole normalized image to 336 × 336 by torch's bicubic interpolate
//                (a = −0.75, align_corners false, no antialias), in float32
//   layout       [num_crops + 1, 3, 336, 336]: the global image, the 336 × 336 tiles row by row,
//                zeros; one image's slice of the batched pixel_values
//   tokens       ((h / 336) · (w / 336) + 1) · 144 + 1 + (h / 336 + 1) · 12 of the HD size
//
// The reference (scripts/reference/phi3v_reference.py) runs the processor's own code in Pillow
// and torch; mmtc's values are its bytes exactly, the global image included (torch's bicubic
// as its AVX2 kernel computes it, fused multiply-adds and all: docs/preprocessing.md).
import { f32ToBf16 } from '../transport/dtype.ts';
import {
  cropBandStarts,
  cropResizesBytes,
  cropWriter,
  runCrops,
  shareCrops,
  withCrops,
  type CanvasPlanes,
  type CropResize,
  type CropWork,
} from './crop-writer.ts';
import { CLIP_MEAN, CLIP_STD, encoderOutputBytes, ImageSizeError, type BandHelper, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';
import { pickedRows, rowSummer, sumRows, torchBicubicPlane, torchCubicAxis } from './torch-bicubic.ts';

/** The side of a crop, and of the global image. */
export const PHI3V_TILE = 336;

export interface Phi3VisionImageConfig {
  /** preprocessor_config.json num_crops: the most HD tiles an image is cut into. */
  num_crops: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
}

/** Phi-3-vision-128k-instruct's preprocessor_config.json: 16 crops, CLIP's mean and std. */
export const PHI3_VISION_DEFAULTS: Phi3VisionImageConfig = { num_crops: 16, image_mean: CLIP_MEAN, image_std: CLIP_STD };

export interface Phi3VisionGeometry {
  /** The image transposed for the HD transform (taller than wide). */
  transposed: boolean;
  /** The resize's output, in the image's own orientation. */
  resizedHeight: number;
  resizedWidth: number;
  /** The HD image (padded to multiples of 336): image_sizes [h, w]. */
  hdHeight: number;
  hdWidth: number;
  /** Where the resized image starts along the padded side. */
  padStart: number;
  /** HD tiles (not counting the global image). */
  tiles: number;
  tokens: number;
}

/** Placeholder tokens of an HD image of `hdHeight` × `hdWidth` (multiples of 336), as the processor and vLLM's model count them. */
export function phi3VisionTokens(hdHeight: number, hdWidth: number): number {
  const rows = Math.floor(hdHeight / PHI3V_TILE);
  const cols = Math.floor(hdWidth / PHI3V_TILE);
  return (rows * cols + 1) * 144 + 1 + (rows + 1) * 12;
}

export function phi3VisionGeometry(height: number, width: number, cfg: Pick<Phi3VisionImageConfig, 'num_crops'>): Phi3VisionGeometry {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const transposed = width < height;
  const [w, h] = transposed ? [height, width] : [width, height];
  const ratio = w / h;
  // The largest scale whose tiles fit num_crops (bounded: scale · ceil(scale / ratio) ≥ scale).
  let scale = 1;
  while (scale * Math.ceil(scale / ratio) <= cfg.num_crops) scale += 1;
  scale -= 1;
  const newW = Math.trunc(scale * PHI3V_TILE);
  const newH = Math.trunc(newW / ratio);
  if (newH === 0)
    throw new ImageSizeError(
      `image of ${width}x${height} pixels is too thin for Phi-3-vision's HD transform: its short side would be resized to 0 pixels (at most ${newW} : 1)`,
    );
  const padded = Math.ceil(newH / PHI3V_TILE) * PHI3V_TILE;
  const padStart = Math.trunc((padded - newH) / 2);
  const [hdHeight, hdWidth] = transposed ? [newW, padded] : [padded, newW];
  const [resizedHeight, resizedWidth] = transposed ? [newW, newH] : [newH, newW];
  return {
    transposed,
    resizedHeight,
    resizedWidth,
    hdHeight,
    hdWidth,
    padStart,
    tiles: (hdHeight / PHI3V_TILE) * (hdWidth / PHI3V_TILE),
    tokens: phi3VisionTokens(hdHeight, hdWidth),
  };
}

/** Values of one image's encoder input: num_crops + 1 crops of [3, 336, 336]. */
export const phi3VisionElements = (cfg: Pick<Phi3VisionImageConfig, 'num_crops'>): number => (cfg.num_crops + 1) * 3 * PHI3V_TILE * PHI3V_TILE;

/** ToTensor then Normalize of each 8-bit level, every step rounded to float32 as torch computes it: ((x / 255) − mean) / std. */
export function phi3VisionLevels(cfg: Pick<Phi3VisionImageConfig, 'image_mean' | 'image_std'>): Float32Array[] {
  return [0, 1, 2].map((c) => {
    const mean = Math.fround(cfg.image_mean[c]!);
    const std = Math.fround(cfg.image_std[c]!);
    const table = new Float32Array(256);
    for (let v = 0; v < 256; v++) table[v] = Math.fround(Math.fround(Math.fround(v / 255) - mean) / std);
    return table;
  });
}

/** Packed RGB transposed (Pillow's Image.TRANSPOSE: pixel (x, y) to (y, x)). */
function transposeRgb(rgb: Uint8Array, width: number, height: number): Uint8Array {
  const out = new Uint8Array(rgb.length);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const from = (y * width + x) * 3;
      const to = (x * height + y) * 3;
      out[to] = rgb[from]!;
      out[to + 1] = rgb[from + 1]!;
      out[to + 2] = rgb[from + 2]!;
    }
  }
  return out;
}

/** The resize of the HD transform, in the transposed frame of a portrait (Pillow resizes the transposed image): source and output sizes. */
function resizeFrame(width: number, height: number, g: Phi3VisionGeometry): { srcW: number; srcH: number; outW: number; outH: number } {
  return g.transposed
    ? { srcW: height, srcH: width, outW: g.resizedHeight, outH: g.resizedWidth }
    : { srcW: width, srcH: height, outW: g.resizedWidth, outH: g.resizedHeight };
}

/**
 * Bytes of the global image's working space after the outputs: its sums (a row of 336 for each
 * HD row, each channel), then, for a portrait, the HD image's float32 planes (its resized rows
 * are the HD image's columns: they are summed once the planes are whole); for a landscape,
 * whose rows are summed as they come out of the resize, a row of float32 values (3 channels)
 * for each of the two threads.
 */
const globalBytes = (g: Phi3VisionGeometry) => 3 * g.hdHeight * PHI3V_TILE * 4 + (g.transposed ? 3 * g.hdHeight * g.hdWidth * 4 : 2 * 3 * g.hdWidth * 4);

/**
 * The HD transform's one resize (in the transposed frame of a portrait): its rows written into
 * the HD tiles (crops 1 on) at the padded side's offset, and into the HD planes when given.
 */
function phi3Resize(width: number, height: number, g: Phi3VisionGeometry, canvas?: CanvasPlanes): CropResize {
  const { outW, outH } = resizeFrame(width, height, g);
  return {
    outW,
    outH,
    place: { top: g.padStart, left: 0, cols: g.hdWidth / PHI3V_TILE, resizedWidth: outW, first: 1, ...(g.transposed ? { transposed: true } : {}) },
    ...(canvas ? { canvas } : {}),
  };
}

/**
 * Bytes an image of this size takes in the pool's memory: its outputs, the global image's
 * working space (globalBytes), then the resize's working space (the SIMD kernels resize
 * there, split in two bands: cropResizesBytes); and the transposed copy of a portrait and,
 * bfloat16 alone, the global image's float32 crop (the thread's own memory, freed when the
 * image is done; a landscape of an odd HD height keeps it at the start of the sums instead),
 * counted so the budget holds them too.
 */
export function phi3VisionMemoryBytes(width: number, height: number, cfg: Phi3VisionImageConfig, kinds: OutputKinds): number {
  const g = phi3VisionGeometry(height, width, cfg);
  const { srcW, srcH } = resizeFrame(width, height, g);
  const base = encoderOutputBytes(phi3VisionElements(cfg), kinds) + globalBytes(g);
  const transposed = g.transposed ? width * height * 3 : 0;
  const global = kinds.float32 ? 0 : 3 * PHI3V_TILE * PHI3V_TILE * 4;
  return base + cropResizesBytes(srcW, srcH, [phi3Resize(width, height, g)], base, 'bilinear') + transposed + global;
}

/** Where the helper thread's band of the resize starts (cropSplit; none: one thread does the image): what the pool asks before it offers a helper. */
export function phi3VisionBandStarts(width: number, height: number, cfg: Phi3VisionImageConfig): number[] {
  const g = phi3VisionGeometry(height, width, cfg);
  const { srcW, srcH } = resizeFrame(width, height, g);
  return cropBandStarts(srcW, srcH, [phi3Resize(width, height, g)], 'bilinear');
}

type Phi3VisionResult = Phi3VisionGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean };

/**
 * An image's crops to write: the resize, the padding beside it (which it never writes), and
 * what finishes the image once both have run: the global image from the rows' sums.
 */
function phi3Crops(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Phi3VisionImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean },
): CropWork<Phi3VisionResult> {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessPhi3VisionRgb: asked for neither float32 nor bfloat16 output');
  const g = phi3VisionGeometry(height, width, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const T = PHI3V_TILE;
  const levels = phi3VisionLevels(cfg);
  // In the transposed frame the resize runs on the transposed pixels, as Pillow does (its
  // horizontal pass first): its row y is the HD image's column padStart + y.
  const source = g.transposed ? transposeRgb(rgb, width, height) : rgb;
  const { srcW, srcH, outH } = resizeFrame(width, height, g);
  const given = options.memory;
  const bytes = phi3VisionMemoryBytes(width, height, cfg, kinds);
  const w = cropWriter(source, srcW, srcH, {
    ...options,
    crops: cfg.num_crops + 1,
    cropHeight: T,
    cropWidth: T,
    levels,
    filter: 'bilinear',
    bytes,
    ...(given ? { resizeAt: given.scratchAt + globalBytes(g) } : {}),
  });
  // The sums (and a portrait's HD planes) in the pool's memory when the outputs are there (the helper thread writes them too).
  const W = g.hdWidth;
  const H = g.hdHeight;
  const plane = H * W;
  const sumsLength = 3 * H * T;
  const sums = w.inMemory ? new Float32Array(given!.memory.buffer, given!.scratchAt, sumsLength) : new Float32Array(sumsLength);
  const hd = g.transposed
    ? w.inMemory
      ? new Float32Array(given!.memory.buffer, given!.scratchAt + sumsLength * 4, 3 * plane)
      : new Float32Array(3 * plane)
    : undefined;
  const rowsAt = w.inMemory && !hd ? given!.scratchAt + sumsLength * 4 : undefined;
  const crop = 3 * T * T;
  // A landscape whose HD height is an odd multiple of 336 (a 16:9 photo's 1008): each of the
  // global image's rows is one HD row's sums, written into the float32 global crop as the rows
  // come (none is left for the finish to sum); for bfloat16 alone, a float32 crop at the start
  // of the sums, which are then not used.
  const outputRow = hd ? undefined : pickedRows(H, T);
  const globalOutput = outputRow ? (w.pixelValues ?? sums).subarray(0, crop) : undefined;
  // Its bfloat16 rounded from each row as it is written, on that row's thread.
  const globalBf16 = globalOutput && w.bf16 ? w.bf16.subarray(0, crop) : undefined;
  const canvas: CanvasPlanes = hd
    ? { width: W, height: H, hd }
    : {
        width: W,
        height: H,
        sums,
        sumsWidth: T,
        sumsHeight: T,
        ...(globalOutput ? { output: globalOutput } : {}),
        ...(globalBf16 ? { outputBf16: globalBf16 } : {}),
        ...(rowsAt !== undefined ? { rowsAt: [rowsAt, rowsAt + 3 * W * 4] as const } : {}),
      };
  const canvasOf = { cols: W / T, first: 1 };
  // The white padding of the padded side: in the tiles, and in a portrait's HD planes.
  const white = (r0: number, r1: number, c0: number, c1: number) => {
    if (r1 <= r0 || c1 <= c0) return;
    w.fillCanvas(canvasOf, r0, r1, c0, c1, 255);
    if (hd) for (let c = 0; c < 3; c++) for (let r = r0; r < r1; r++) hd.fill(levels[c]![255]!, c * plane + r * W + c0, c * plane + r * W + c1);
  };
  const end = g.padStart + outH;
  // What the resize never writes: the padded side's white (and a landscape's padding rows'
  // sums), the zero crops after the tiles. Run beside the resize (crop-writer.ts).
  const padding = () => {
    if (g.transposed) {
      white(0, H, 0, g.padStart);
      white(0, H, end, W);
    } else {
      white(0, g.padStart, 0, W);
      white(end, H, 0, W);
      // A landscape's padding rows' sums: one white row's, copied to every padding row (to the
      // global image's rows that pick one, where they are written directly).
      const pads = [...Array(g.padStart).keys(), ...Array.from({ length: H - end }, (_, i) => end + i)];
      if (pads.length > 0) {
        const sumRow = rowSummer(torchCubicAxis(W, T));
        for (let c = 0; c < 3; c++) {
          const whiteSums = new Float32Array(T);
          sumRow(new Float32Array(W).fill(levels[c]![255]!), 0, whiteSums, 0);
          for (const r of pads) {
            if (!outputRow) sums.set(whiteSums, (c * H + r) * T);
            else if (outputRow[r]! >= 0) {
              const at = (c * T + outputRow[r]!) * T;
              globalOutput!.set(whiteSums, at);
              if (globalBf16) f32ToBf16(whiteSums, new Uint8Array(globalBf16.buffer, globalBf16.byteOffset + at * 2, T * 2));
            }
          }
        }
      }
    }
    w.pixelValues?.fill(0, (g.tiles + 1) * crop);
    w.bf16?.fill(0, (g.tiles + 1) * crop);
  };
  const global = (): Phi3VisionResult => {
    // The global image first: float32 from torch's interpolate (a portrait's from its whole HD
    // planes, a landscape's from the sums its rows left, or already written by them where its
    // rows are picks, its bfloat16 too), its bfloat16 rounded from it.
    const globalCrop = globalOutput ?? (w.pixelValues ? w.pixelValues.subarray(0, crop) : new Float32Array(crop));
    for (let c = 0; c < 3; c++) {
      const channelSums = sums.subarray(c * H * T, (c + 1) * H * T);
      const into = globalCrop.subarray(c * T * T, (c + 1) * T * T);
      if (hd) torchBicubicPlane(hd.subarray(c * plane, (c + 1) * plane), H, W, T, T, into, channelSums);
      else if (!globalOutput) sumRows(channelSums, H, T, T, into);
    }
    if (w.bf16 && !globalBf16) f32ToBf16(globalCrop, new Uint8Array(w.bf16.buffer, w.bf16.byteOffset, crop * 2));
    return withCrops(g, w);
  };
  return { w, resizes: [phi3Resize(width, height, g, canvas)], padding, finish: global };
}

/**
 * Phi-3-vision's encoder input of one image, [num_crops + 1, 3, 336, 336]: the global image,
 * the HD tiles row by row, zeros; float32 unless `float32: false`, bfloat16 bits too with
 * `bf16: true` (each value rounded to nearest even from its float32). `memory` (the pool's,
 * laid out for this image: phi3VisionMemoryBytes) holds the outputs, the global image's
 * working space and the resize; `javascript` forces the JavaScript resize (the tests hold the kernels to it).
 */
export function preprocessPhi3VisionRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Phi3VisionImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean } = {},
): Phi3VisionResult {
  return runCrops(phi3Crops(rgb, width, height, cfg, options));
}

/** As preprocessPhi3VisionRgb, the resize's rows shared with `helper` in the pool's memory (crop-writer.ts): the same bytes. */
export function preprocessPhi3VisionShared(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Phi3VisionImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory },
  helper: BandHelper | undefined,
): Promise<Phi3VisionResult & { threads: number }> {
  return shareCrops(phi3Crops(rgb, width, height, cfg, options), helper);
}
