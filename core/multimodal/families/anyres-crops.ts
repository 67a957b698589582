// LLaVA-NeXT's anyres crop processor (llava-next.ts): every image resized into the pinpoint that
// keeps the most of it, padded with black, cut into crops after a base image of the whole, so
// an image's encoder input is [1, 1 + tiles, 3, 336, 336] (a request's images padded with zero
// crops to its most). Its tokens follow from the image's own size, which the model reads from
// image_sizes [h, w] (its grid: one row per image, one crop stack each).
import { anyresBandStarts, anyresCropElements, anyresGeometry, anyresMemoryBytes, type AnyresImageConfig } from '../llava-next.ts';
import { checkCropStack, IMAGE_SIZES_GRID } from './crop-stack.ts';
import type { EncoderGeometry, ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: AnyresImageConfig): EncoderGeometry {
  const g = anyresGeometry(height, width, cfg);
  return {
    resizedHeight: g.resizedHeight,
    resizedWidth: g.resizedWidth,
    patches: 1,
    features: g.crops * anyresCropElements(cfg),
    tokens: g.tokens,
    imageSize: [height, width],
  };
}

export const ANYRES_CROP_PROCESSOR: ImageProcessor<AnyresImageConfig> = {
  name: 'anyres crops (best pinpoint, base image, 336-pixel tiles)',
  geometry,
  memoryBytes: anyresMemoryBytes,
  bandStarts: (_g, cfg, count, source) => (count < 2 ? [] : anyresBandStarts(source.width, source.height, cfg)),
  // An image's bytes depend on its crops alone: one image per crop count its pinpoints give
  // (an image of a pinpoint's own size takes that pinpoint), the nearest to each target.
  sizesNear: (targets, elementBytes, cfg) => {
    const byCrops = new Map<number, { width: number; height: number; nbytes: number }>();
    for (const [h, w] of cfg.image_grid_pinpoints) {
      const crops = anyresGeometry(h, w, cfg).crops;
      if (!byCrops.has(crops)) byCrops.set(crops, { width: w, height: h, nbytes: crops * anyresCropElements(cfg) * elementBytes });
    }
    const sizes = [...byCrops.values()];
    const near = targets.map((t) => sizes.reduce((a, b) => (Math.abs(b.nbytes - t) < Math.abs(a.nbytes - t) ? b : a)));
    return [...new Set(near)];
  },
  ...IMAGE_SIZES_GRID,
  tokensOf: ({ encoderShape, grid }, cfg) => {
    if (!grid || grid.length !== 2) throw new TypeError("no image_sizes row: LLaVA-NeXT computes an image's tokens from its size");
    const [h, w] = grid as [number, number];
    if (!(Number.isInteger(h) && Number.isInteger(w) && h > 0 && w > 0))
      throw new RangeError(`image_sizes row [${grid.join(', ')}] is not an image's size: h and w must be whole numbers above 0`);
    // The model takes the base image and the best pinpoint's tiles from the image's crops (the rest is a batch's padding).
    const g = anyresGeometry(h, w, cfg);
    if (encoderShape.length > 0) checkCropStack(encoderShape, cfg.crop_height, cfg.crop_width, g.crops, [h, w]);
    return g.tokens;
  },
};
