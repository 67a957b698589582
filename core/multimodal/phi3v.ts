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
import { CLIP_MEAN, CLIP_STD, encoderOutputBytes, ImageSizeError, memoryHolding, outputViews, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';
import { resizeRgbInto, resizeRgbIntoJs } from './resize.ts';
import { kernelsOn, planResize, resizeBand, resizeBytes } from './resize-simd.ts';

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
 * The normalized HD image, channel first [3, hdHeight, hdWidth], into `out`: the Pillow-exact
 * bilinear resize of the (transposed) image, each 8-bit value through its channel's level
 * table as its row comes out of the resize, white bands on the padded side. The resize runs on
 * the SIMD kernels in `memory` from byte `scratchAt` when given (the pool's), else on this
 * thread's kernels, or in JavaScript with `javascript` (the same bytes).
 */
function hdPlanes(
  rgb: Uint8Array,
  width: number,
  height: number,
  g: Phi3VisionGeometry,
  levels: readonly Float32Array[],
  out: Float32Array,
  where: { memory?: EncoderMemory['memory']; scratchAt?: number; javascript?: boolean },
): Float32Array {
  const W = g.hdWidth;
  const plane = g.hdHeight * W;
  for (let c = 0; c < 3; c++) out.fill(levels[c]![255]!, c * plane, (c + 1) * plane);
  // In the transposed frame the resize runs on the transposed pixels, as Pillow does (its
  // horizontal pass first): its row y is the HD image's column padStart + y.
  const source = g.transposed ? transposeRgb(rgb, width, height) : rgb;
  const { srcW, srcH, outW, outH } = resizeFrame(width, height, g);
  const [l0, l1, l2] = levels as [Float32Array, Float32Array, Float32Array];
  const row = g.transposed
    ? (y: number, line: Uint8Array) => {
        for (let x = 0, at = g.padStart + y; x < outW; x++, at += W) {
          out[at] = l0[line[x * 3]!]!;
          out[plane + at] = l1[line[x * 3 + 1]!]!;
          out[2 * plane + at] = l2[line[x * 3 + 2]!]!;
        }
      }
    : (y: number, line: Uint8Array) => {
        for (let x = 0, at = (g.padStart + y) * W; x < outW; x++, at++) {
          out[at] = l0[line[x * 3]!]!;
          out[plane + at] = l1[line[x * 3 + 1]!]!;
          out[2 * plane + at] = l2[line[x * 3 + 2]!]!;
        }
      };
  if (where.javascript) {
    resizeRgbIntoJs(source, srcW, srcH, outW, outH, row, undefined, 'bilinear');
    return out;
  }
  const kernels = where.memory ? kernelsOn(where.memory) : null;
  const plan = kernels ? planResize(kernels, source, srcW, srcH, outW, outH, [], where.scratchAt, undefined, 'bilinear') : null;
  if (kernels && plan) resizeBand(kernels, plan, 0, row);
  else resizeRgbInto(source, srcW, srcH, outW, outH, row, undefined, 'bilinear');
  return out;
}

/**
 * torch's cubic interpolation weights and source indices along one axis (upsample_bicubic2d,
 * align_corners false: source = scale · (i + 0.5) − 0.5, a = −0.75, indices clamped to the
 * edge), every step in float32 as its CPU kernel computes them.
 */
function torchCubicAxis(inSize: number, outSize: number): { index: Int32Array; weight: Float32Array } {
  const f = Math.fround;
  const A = -0.75;
  const scale = f(inSize / outSize);
  const conv1 = (x: number) => f(f(f(1.25 * x - 2.25) * x) * x + 1);
  const conv2 = (x: number) => f(f(f(A * x + 3.75) * x - 6) * x + 3);
  const index = new Int32Array(outSize * 4);
  const weight = new Float32Array(outSize * 4);
  for (let i = 0; i < outSize; i++) {
    const real = f(scale * f(i + 0.5) - 0.5);
    const at = Math.floor(real);
    const t = f(real - at);
    const x2 = f(1 - t);
    weight[i * 4] = conv2(f(t + 1));
    weight[i * 4 + 1] = conv1(t);
    weight[i * 4 + 2] = conv1(x2);
    weight[i * 4 + 3] = conv2(f(x2 + 1));
    for (let j = 0; j < 4; j++) index[i * 4 + j] = Math.max(Math.min(at - 1 + j, inSize - 1), 0);
  }
  return { index, weight };
}

/**
 * One channel plane of the normalized HD image resized to `outH` × `outW` by torch's bicubic
 * interpolate: per output value four rows' sums of four columns each, in float32, each product
 * added with one rounding (a fused multiply-add) in torch's order: torch's CPU kernel compiled
 * for AVX2 fuses them (that is the reference's arithmetic bit for bit; a build without fused
 * multiply-adds differs by a float32 ulp, docs/preprocessing.md). A float32 product is exact
 * in a double, so rounding `a * b + c` once is the fused multiply-add (up to a double rounding
 * of the sum that a tie would need: none in the reference's images). `sums` holds a row of
 * `outW` for each source row.
 */
export function torchBicubicPlane(src: Float32Array, height: number, width: number, outH: number, outW: number, into: Float32Array, sums: Float32Array): void {
  const rows = torchCubicAxis(height, outH);
  const cols = torchCubicAxis(width, outW);
  // A source row's four-column sums do not depend on the output row: every row's once (the
  // interpolation reads each row of a downscaled image), then the rows' sums combined.
  for (let r = 0; r < height; r++) rowSums(src, r * width, cols.index, cols.weight, sums, r * outW, outW);
  const f = Math.fround;
  const ri = rows.index;
  const rw = rows.weight;
  for (let y = 0; y < outH; y++) {
    const k = y * 4;
    const a0 = ri[k]! * outW;
    const a1 = ri[k + 1]! * outW;
    const a2 = ri[k + 2]! * outW;
    const a3 = ri[k + 3]! * outW;
    const w0 = rw[k]!;
    const w1 = rw[k + 1]!;
    const w2 = rw[k + 2]!;
    const w3 = rw[k + 3]!;
    const at = y * outW;
    for (let x = 0; x < outW; x++) {
      const output = f(sums[a2 + x]! * w2 + f(sums[a0 + x]! * w0 + f(sums[a1 + x]! * w1)));
      into[at + x] = sums[a3 + x]! * w3 + output;
    }
  }
}

/** One source row's four-column sums (the row at `from` of `src`) into `sums` from `to`. */
function rowSums(src: Float32Array, from: number, ci: Int32Array, cw: Float32Array, sums: Float32Array, to: number, outW: number): void {
  for (let x = 0, k = 0; x < outW; x++, k += 4) {
    const t = Math.fround(src[from + ci[k]!]! * cw[k]! + Math.fround(src[from + ci[k + 1]!]! * cw[k + 1]!));
    const u = Math.fround(src[from + ci[k + 2]!]! * cw[k + 2]! + t);
    sums[to + x] = src[from + ci[k + 3]!]! * cw[k + 3]! + u;
  }
}

/** Bytes of the HD image's float32 planes. */
const hdBytes = (g: Phi3VisionGeometry) => 3 * g.hdHeight * g.hdWidth * 4;

/** Bytes of the working space beside: a row of the global image's sums for each HD row, and, when only bfloat16 is written, its float32 crop and one channel of a tile. */
const globalBytes = (g: Phi3VisionGeometry) => g.hdHeight * PHI3V_TILE * 4 + 4 * PHI3V_TILE * PHI3V_TILE * 4;

/**
 * Bytes an image of this size takes in the pool's memory: its outputs, the HD image's planes,
 * then the resize's working space (the SIMD kernels resize there); and the transposed copy of
 * a portrait and the global image's working space (the thread's own memory, freed when the
 * image is done), counted so the budget holds them too.
 */
export function phi3VisionMemoryBytes(width: number, height: number, cfg: Phi3VisionImageConfig, kinds: OutputKinds): number {
  const g = phi3VisionGeometry(height, width, cfg);
  const { srcW, srcH, outW, outH } = resizeFrame(width, height, g);
  const base = encoderOutputBytes(phi3VisionElements(cfg), kinds) + hdBytes(g);
  const transposed = g.transposed ? width * height * 3 : 0;
  return base + resizeBytes(srcW, srcH, outW, outH, [], base, undefined, 'bilinear') + transposed + globalBytes(g);
}

/**
 * Phi-3-vision's encoder input of one image, [num_crops + 1, 3, 336, 336]: the global image,
 * the HD tiles row by row, zeros; float32 unless `float32: false`, bfloat16 bits too with
 * `bf16: true` (each value rounded to nearest even from its float32). `memory` (the pool's,
 * laid out for this image: phi3VisionMemoryBytes) holds the outputs, the HD planes and the
 * resize; `javascript` forces the JavaScript resize (the tests hold the kernels to it).
 */
export function preprocessPhi3VisionRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: Phi3VisionImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean } = {},
): Phi3VisionGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean } {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessPhi3VisionRgb: asked for neither float32 nor bfloat16 output');
  const g = phi3VisionGeometry(height, width, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const elements = phi3VisionElements(cfg);
  const given = options.memory;
  const memory = memoryHolding(given, elements, kinds, (given?.scratchAt ?? 0) + hdBytes(g));
  const views = memory ? outputViews(memory, kinds) : {};
  const hd = hdPlanes(
    rgb,
    width,
    height,
    g,
    phi3VisionLevels(cfg),
    memory ? new Float32Array(memory.memory.buffer, memory.scratchAt, hdBytes(g) / 4) : new Float32Array(hdBytes(g) / 4),
    {
      ...(memory ? { memory: memory.memory, scratchAt: memory.scratchAt + hdBytes(g) } : {}),
      ...(options.javascript ? { javascript: true } : {}),
    },
  );
  const out = kinds.float32 ? (views.pixelValues ?? new Float32Array(elements)) : undefined;
  const bf = kinds.bf16 ? (views.bf16 ?? new Uint16Array(elements)) : undefined;
  const bfBytes = bf ? new Uint8Array(bf.buffer, bf.byteOffset, bf.byteLength) : undefined;
  const T = PHI3V_TILE;
  const plane = T * T;
  const crop = 3 * plane;
  const W = g.hdWidth;
  const hdPlane = g.hdHeight * W;
  // The global image first: float32 from torch's interpolate, its bfloat16 rounded from it.
  const global = out ? out.subarray(0, crop) : new Float32Array(crop);
  const sums = new Float32Array(g.hdHeight * T);
  for (let c = 0; c < 3; c++)
    torchBicubicPlane(hd.subarray(c * hdPlane, (c + 1) * hdPlane), g.hdHeight, W, T, T, global.subarray(c * plane, (c + 1) * plane), sums);
  if (bfBytes) f32ToBf16(global, bfBytes.subarray(0, crop * 2));
  // The tiles row by row, each a copy of the HD planes' rows (its bfloat16 rounded a whole
  // channel at a time, from the float32 output or a reused crop of one channel); then zeros.
  const cols = W / T;
  const channel = bfBytes && !out ? new Float32Array(plane) : undefined;
  for (let tile = 0; tile < g.tiles; tile++) {
    const top = Math.floor(tile / cols) * T;
    const left = (tile % cols) * T;
    for (let c = 0; c < 3; c++) {
      const to = (tile + 1) * crop + c * plane;
      const into = out ? out.subarray(to, to + plane) : channel!;
      for (let y = 0; y < T; y++) {
        const from = c * hdPlane + (top + y) * W + left;
        into.set(hd.subarray(from, from + T), y * T);
      }
      if (bfBytes) f32ToBf16(into, bfBytes.subarray(to * 2, (to + plane) * 2));
    }
  }
  out?.fill(0, (g.tiles + 1) * crop);
  bf?.fill(0, (g.tiles + 1) * crop);
  return { ...g, ...(out ? { pixelValues: out } : {}), ...(bf ? { bf16: bf } : {}), inMemory: memory !== undefined };
}
