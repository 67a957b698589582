// LLaVA-NeXT's image preprocessing, anyres (docs/preprocessing.md, "Anyres crops (LLaVA-NeXT)"),
// as Hugging Face's LlavaNextImageProcessor runs it, from 8-bit RGB pixels to the encoder input:
//
//   best size    select_best_resolution over image_grid_pinpoints ([h, w] pairs): the most
//                effective pixels int(w · s) · int(h · s) (at most the image's own), then the
//                fewest wasted; s = min(pw / w, ph / h), in float64
//   resize       to get_patch_output_size: the limiting side to the pinpoint's, the other
//                min(ceil(side · s), the pinpoint's); Pillow-exact bicubic (resize.ts)
//   pad          with zeros (black) to the pinpoint, centred (the odd pixel after)
//   tiles        the padded image cut into crop × crop tiles, row by row
//   base image   the whole image resized to crop × crop (its aspect ratio not kept), first
//   each crop    rescale × rescale_factor in float64 then float32, normalize (x − mean) / std
//                in float32: the lookup table of qwen-vl.ts (CLIP's arithmetic, clip-image.ts)
//   layout       [1 + tiles, 3, crop, crop]: one image's crops; a request's images are padded
//                with zero crops to its most (engines/tensors.ts), as HF pads a batch
//   tokens       what vLLM's model computes: (crop / patch)² for the base image, the tiles'
//                features unpadded to the image's aspect ratio (integer arithmetic, as its
//                unpad_image) and one newline per unpadded row
//
// The reference (scripts/reference/llava_next_reference.py, Pillow + numpy) gives the same
// bytes. Where mmtc differs from the gateway (its resize filter, its token count's rounding):
// docs/preprocessing.md.
import type { ClipImageConfig } from './clip-image.ts';
import { CLIP_336_DEFAULTS } from './clip-image.ts';
import { cropBandStarts, cropResizesBytes, cropWriter, intoCrop, runCrops, shareCrops, withCrops, type CropResize, type CropWork } from './crop-writer.ts';
import { encoderOutputBytes, ImageSizeError, levelTable, type BandHelper, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';

export interface AnyresImageConfig extends ClipImageConfig {
  /** image_grid_pinpoints: the [height, width] sizes (whole crops) an image is resized and padded to. */
  image_grid_pinpoints: Array<[number, number]>;
}

/** llava-hf/llava-v1.6-*-hf's preprocessor_config.json: CLIP ViT-L/14 at 336 pixels, five pinpoints up to 2 × 2 crops. */
export const LLAVA_NEXT_DEFAULTS: AnyresImageConfig = {
  ...CLIP_336_DEFAULTS,
  image_grid_pinpoints: [
    [336, 672],
    [672, 336],
    [672, 672],
    [1008, 336],
    [336, 1008],
  ],
};

export interface AnyresGeometry {
  /** The pinpoint chosen: the padded image's size. */
  bestHeight: number;
  bestWidth: number;
  /** The resize's output, inside the pinpoint. */
  resizedHeight: number;
  resizedWidth: number;
  /** Where the resized image starts in the padded one. */
  top: number;
  left: number;
  /** The padded image's crops: rows × cols tiles. */
  rows: number;
  cols: number;
  /** The image's crops: the base image and the tiles. */
  crops: number;
  tokens: number;
}

/** Hugging Face's select_best_resolution: the pinpoint [h, w] that keeps the most of the image, then wastes the least. */
export function selectBestResolution(height: number, width: number, pinpoints: ReadonlyArray<readonly [number, number]>): [number, number] {
  let best: [number, number] | undefined;
  let maxEffective = 0;
  let minWasted = Infinity;
  for (const [ph, pw] of pinpoints) {
    const scale = Math.min(pw / width, ph / height);
    const effective = Math.min(Math.trunc(width * scale) * Math.trunc(height * scale), width * height);
    const wasted = pw * ph - effective;
    if (effective > maxEffective || (effective === maxEffective && wasted < minWasted)) {
      maxEffective = effective;
      minWasted = wasted;
      best = [ph, pw];
    }
  }
  if (!best) throw new ImageSizeError(`image of ${width}x${height} pixels fits none of the ${pinpoints.length} image_grid_pinpoints`);
  return best;
}

/**
 * The image's tokens as vLLM's LLaVA-NeXT model computes them (LlavaNextProcessingInfo,
 * get_num_image_tokens; its unpad_image in the model): the base image's (crop / patch)²
 * features, the rows × cols tiles' features with the padding the image's aspect ratio left
 * taken off (integer arithmetic), and one newline feature per row left.
 */
export function anyresTokens(height: number, width: number, rows: number, cols: number, cfg: Pick<ClipImageConfig, 'crop_height' | 'patch_size'>): number {
  const npatches = Math.floor(cfg.crop_height / cfg.patch_size);
  let currentHeight = npatches * rows;
  let currentWidth = npatches * cols;
  // The exact comparison of width / height with currentWidth / currentHeight, in integers.
  if (width * currentHeight > currentWidth * height) {
    const newHeight = Math.floor((height * currentWidth) / width);
    currentHeight -= 2 * Math.floor((currentHeight - newHeight) / 2);
  } else {
    const newWidth = Math.floor((width * currentHeight) / height);
    currentWidth -= 2 * Math.floor((currentWidth - newWidth) / 2);
  }
  return npatches * npatches + currentHeight * currentWidth + currentHeight;
}

export function anyresGeometry(height: number, width: number, cfg: AnyresImageConfig): AnyresGeometry {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const [bestHeight, bestWidth] = selectBestResolution(height, width, cfg.image_grid_pinpoints);
  const scaleW = bestWidth / width;
  const scaleH = bestHeight / height;
  const [resizedHeight, resizedWidth] =
    scaleW < scaleH ? [Math.min(Math.ceil(height * scaleW), bestHeight), bestWidth] : [bestHeight, Math.min(Math.ceil(width * scaleH), bestWidth)];
  const rows = Math.floor(bestHeight / cfg.crop_height);
  const cols = Math.floor(bestWidth / cfg.crop_width);
  return {
    bestHeight,
    bestWidth,
    resizedHeight,
    resizedWidth,
    top: Math.floor((bestHeight - resizedHeight) / 2),
    left: Math.floor((bestWidth - resizedWidth) / 2),
    rows,
    cols,
    crops: 1 + rows * cols,
    tokens: anyresTokens(height, width, rows, cols, cfg),
  };
}

/** Values of one crop: [3, crop, crop]. */
export const anyresCropElements = (cfg: Pick<ClipImageConfig, 'crop_height' | 'crop_width'>): number => 3 * cfg.crop_height * cfg.crop_width;

/** The image's resizes and where their rows go: the whole image squeezed into the base crop, then the image into its pinpoint's tiles. */
function anyresResizes(g: AnyresGeometry, cfg: AnyresImageConfig): CropResize[] {
  return [
    { outW: cfg.crop_width, outH: cfg.crop_height, place: intoCrop(0, cfg.crop_width) },
    { outW: g.resizedWidth, outH: g.resizedHeight, place: { top: g.top, left: g.left, cols: g.cols, resizedWidth: g.resizedWidth, first: 1 } },
  ];
}

/** Bytes an image of this size takes in the pool's memory: its outputs, then its resizes' working space (cropResizesBytes). */
export function anyresMemoryBytes(width: number, height: number, cfg: AnyresImageConfig, kinds: OutputKinds): number {
  const g = anyresGeometry(height, width, cfg);
  const outputs = encoderOutputBytes(g.crops * anyresCropElements(cfg), kinds);
  return outputs + cropResizesBytes(width, height, anyresResizes(g, cfg), outputs, 'bicubic');
}

/** Where the helper thread's band starts in the costliest resize (cropSplit: its first row when the helper takes it whole; none: one thread does the image): what the pool asks before it offers a helper. */
export function anyresBandStarts(width: number, height: number, cfg: AnyresImageConfig): number[] {
  return cropBandStarts(width, height, anyresResizes(anyresGeometry(height, width, cfg), cfg), 'bicubic');
}

type AnyresResult = AnyresGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean };

/** An image's crops to write: its resizes, and its padding beside them (crop-writer.ts). */
function anyresCrops(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: AnyresImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean },
): CropWork<AnyresResult> {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessAnyresRgb: asked for neither float32 nor bfloat16 output');
  const g = anyresGeometry(height, width, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  const w = cropWriter(rgb, width, height, {
    ...options,
    crops: g.crops,
    cropHeight: cfg.crop_height,
    cropWidth: cfg.crop_width,
    levels: levelTable(cfg),
    filter: 'bicubic',
    bytes: anyresMemoryBytes(width, height, cfg, kinds),
  });
  // The padding (black, normalized) around the resized image in the pinpoint: the bands above
  // and below it, then left and right of it.
  const canvas = { cols: g.cols, first: 1 };
  const bottom = g.top + g.resizedHeight;
  const right = g.left + g.resizedWidth;
  const padding = () => {
    w.fillCanvas(canvas, 0, g.top, 0, g.bestWidth, 0);
    w.fillCanvas(canvas, bottom, g.bestHeight, 0, g.bestWidth, 0);
    w.fillCanvas(canvas, g.top, bottom, 0, g.left, 0);
    w.fillCanvas(canvas, g.top, bottom, right, g.bestWidth, 0);
  };
  return { w, resizes: anyresResizes(g, cfg), padding, finish: () => withCrops(g, w) };
}

/**
 * LLaVA-NeXT's encoder input of one image, [1 + tiles, 3, crop, crop]: the base image, then the
 * padded image's tiles row by row; float32 unless `float32: false`, bfloat16 bits too with
 * `bf16: true`. `memory` (the pool's, laid out for this image: anyresMemoryBytes) holds the
 * outputs and the resizes; `javascript` forces the JavaScript resize (the tests hold the
 * kernels to it).
 */
export function preprocessAnyresRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: AnyresImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory; javascript?: boolean } = {},
): AnyresResult {
  return runCrops(anyresCrops(rgb, width, height, cfg, options));
}

/** As preprocessAnyresRgb, the resizes shared with `helper` in the pool's memory (crop-writer.ts): the same bytes. */
export function preprocessAnyresShared(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: AnyresImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory },
  helper: BandHelper | undefined,
): Promise<AnyresResult & { threads: number }> {
  return shareCrops(anyresCrops(rgb, width, height, cfg, options), helper);
}
