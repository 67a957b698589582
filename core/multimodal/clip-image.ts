// CLIP image preprocessing, as LLaVA-1.5's processor runs it (Hugging Face's CLIPImageProcessor,
// docs/preprocessing.md, "CLIP crop (LLaVA-1.5)"), from 8-bit RGB pixels to the encoder input:
//
//   resize       the shortest edge to `shortest_edge`, the aspect ratio kept; the long side is
//                int(shortest_edge · long / short), truncated as Hugging Face's
//                get_resize_output_image_size does (the gateway rounds it: see the docs);
//                Pillow-exact bicubic (resize.ts)
//   center crop  crop_height × crop_width from top (h − crop) // 2, left (w − crop) // 2
//   rescale      × rescale_factor in float64 then float32; normalize (x − mean) / std in
//                float32: the lookup table of qwen-vl.ts (the same arithmetic)
//   layout       channel first, [3, crop_height, crop_width]: one image's slice of the
//                batched pixel_values [images, 3, crop_height, crop_width]
//
// Only the crop's pixels are resized (each output pixel's taps are its own, so they are the
// bytes Pillow's whole resize has there), and normalized straight into the output.
import { cropBandStarts, cropResizesBytes, cropWriter, runCrops, shareCrops, withCrops, type CropResize, type CropWork } from './crop-writer.ts';
import { CLIP_MEAN, CLIP_STD, encoderOutputBytes, ImageSizeError, levelTable, type BandHelper, type EncoderMemory, type OutputKinds } from './qwen-vl.ts';
import type { OutputWindow } from './resample.ts';

export interface ClipImageConfig {
  /** size.shortest_edge: the side the shorter edge is resized to. */
  shortest_edge: number;
  crop_height: number;
  crop_width: number;
  image_mean: [number, number, number];
  image_std: [number, number, number];
  rescale_factor: number;
  do_resize: boolean;
  do_center_crop: boolean;
  do_rescale: boolean;
  do_normalize: boolean;
  /** The vision tower's patch side (config.json vision_config.patch_size): the crop is (crop / patch)² patches. */
  patch_size: number;
  /** The CLS token's feature is kept too (vision_feature_select_strategy "full"): one token more per image. */
  keep_cls: boolean;
}

/** LLaVA-1.5's preprocessor_config.json (llava-hf/llava-1.5-7b-hf): CLIP ViT-L/14 at 336 pixels. */
export const CLIP_336_DEFAULTS: ClipImageConfig = {
  shortest_edge: 336,
  crop_height: 336,
  crop_width: 336,
  image_mean: CLIP_MEAN,
  image_std: CLIP_STD,
  rescale_factor: 1 / 255,
  do_resize: true,
  do_center_crop: true,
  do_rescale: true,
  do_normalize: true,
  patch_size: 14,
  keep_cls: false,
};

export interface ClipGeometry {
  resizedHeight: number;
  resizedWidth: number;
  /** Where the crop starts in the resized image. */
  top: number;
  left: number;
  /** The encoder input's height and width: the crop (or the resized image without one). */
  height: number;
  width: number;
}

/** Hugging Face's get_resize_output_image_size(default_to_square=False): the short side to `size`, the long one truncated. */
export function clipResizeSize(height: number, width: number, size: number): { height: number; width: number } {
  if (height <= 0 || width <= 0) throw new ImageSizeError(`image of ${width}x${height} pixels has a zero side`);
  const [short, long] = width <= height ? [width, height] : [height, width];
  const newLong = Math.trunc((size * long) / short);
  return width <= height ? { height: newLong, width: size } : { height: size, width: newLong };
}

/** Placeholder tokens of a crop of `height` × `width`: its patches, and the CLS token when the model keeps it. */
export function clipTokens(height: number, width: number, cfg: Pick<ClipImageConfig, 'patch_size' | 'keep_cls'>): number {
  return Math.floor(height / cfg.patch_size) * Math.floor(width / cfg.patch_size) + (cfg.keep_cls ? 1 : 0);
}

export function clipGeometry(height: number, width: number, cfg: ClipImageConfig): ClipGeometry {
  const resized = cfg.do_resize ? clipResizeSize(height, width, cfg.shortest_edge) : { height, width };
  if (!cfg.do_center_crop) return { resizedHeight: resized.height, resizedWidth: resized.width, top: 0, left: 0, height: resized.height, width: resized.width };
  if (resized.height < cfg.crop_height || resized.width < cfg.crop_width) {
    throw new ImageSizeError(
      `image of ${width}x${height} pixels is ${resized.width}x${resized.height} after its resize, smaller than the ${cfg.crop_width}x${cfg.crop_height} crop`,
    );
  }
  return {
    resizedHeight: resized.height,
    resizedWidth: resized.width,
    top: Math.floor((resized.height - cfg.crop_height) / 2),
    left: Math.floor((resized.width - cfg.crop_width) / 2),
    height: cfg.crop_height,
    width: cfg.crop_width,
  };
}

/** The crop as a window of the resized image (the only pixels resized). */
const cropWindow = (g: ClipGeometry): OutputWindow => ({ x0: g.left, x1: g.left + g.width, y0: g.top, y1: g.top + g.height });

/** The image's one resize: only the crop's window, its rows written into the crop. */
const clipResize = (g: ClipGeometry): CropResize => ({
  outW: g.resizedWidth,
  outH: g.resizedHeight,
  window: cropWindow(g),
  place: { top: -g.top, left: 0, cols: 1, resizedWidth: g.width, first: 0 },
});

/**
 * Bytes an image of this size takes in the pool's memory: its outputs, then the crop writer's
 * working space (the level tables, the source pixels, the crop's columns of the rows it reads,
 * the crop; the resize in two bands: cropResizesBytes).
 */
export function clipMemoryBytes(width: number, height: number, cfg: ClipImageConfig, kinds: OutputKinds): number {
  const g = clipGeometry(height, width, cfg);
  const outputs = encoderOutputBytes(3 * g.height * g.width, kinds);
  return outputs + cropResizesBytes(width, height, [clipResize(g)], outputs, 'bicubic');
}

/** Where the helper thread's band of the crop's rows starts (cropSplit; none: one thread does the image): what the pool asks before it offers a helper. */
export function clipBandStarts(width: number, height: number, cfg: ClipImageConfig): number[] {
  return cropBandStarts(width, height, [clipResize(clipGeometry(height, width, cfg))], 'bicubic');
}

type ClipResult = ClipGeometry & { pixelValues?: Float32Array; bf16?: Uint16Array; inMemory: boolean };

function clipCrop(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: ClipImageConfig,
  options: { bf16?: boolean; float32?: boolean; javascript?: boolean; memory?: EncoderMemory },
): CropWork<ClipResult> {
  if (options.float32 === false && !options.bf16) throw new RangeError('preprocessClipRgb: asked for neither float32 nor bfloat16 output');
  const g = clipGeometry(height, width, cfg);
  const kinds = { float32: options.float32 !== false, bf16: options.bf16 === true };
  // The pool's memory when it is laid out for this image's values in these encodings and holds
  // its resize without growing (a decoded image larger than its header said would need more
  // than the budget counted: it then resizes in the thread's own memory). Rescale and
  // normalize of an 8-bit level have 256 results per channel: a float32 table, and its
  // bfloat16 bits, so each value is one lookup.
  const w = cropWriter(rgb, width, height, {
    ...options,
    crops: 1,
    cropHeight: g.height,
    cropWidth: g.width,
    levels: levelTable(cfg),
    filter: 'bicubic',
    bytes: clipMemoryBytes(width, height, cfg, kinds),
  });
  return { w, resizes: [clipResize(g)], finish: () => withCrops(g, w) };
}

/**
 * Resize, crop, rescale and normalize packed RGB into a channel-first [3, height, width]
 * encoder input: float32 unless `float32: false`, bfloat16 bits too with `bf16: true`.
 * `memory` (the pool's, laid out for this image: clipMemoryBytes) holds the outputs and the
 * resize's working space, so the kernels run there and nothing else grows; without it the
 * thread's own kernels resize into their memory. `javascript` forces the JavaScript resize
 * (the second implementation the tests hold the kernels to).
 */
export function preprocessClipRgb(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: ClipImageConfig,
  options: { bf16?: boolean; float32?: boolean; javascript?: boolean; memory?: EncoderMemory } = {},
): ClipResult {
  return runCrops(clipCrop(rgb, width, height, cfg, options));
}

/** As preprocessClipRgb, the crop's rows shared with `helper` in the pool's memory (crop-writer.ts): the same bytes. */
export function preprocessClipShared(
  rgb: Uint8Array,
  width: number,
  height: number,
  cfg: ClipImageConfig,
  options: { bf16?: boolean; float32?: boolean; memory?: EncoderMemory },
  helper: BandHelper | undefined,
): Promise<ClipResult & { threads: number }> {
  return shareCrops(clipCrop(rgb, width, height, cfg, options), helper);
}
