// Phi-3-vision's HD crop processor (phi3v.ts): every image resized within num_crops tiles of
// 336 × 336 (its aspect ratio kept, scaled up or down), padded with white to whole tiles, and
// given as the same [num_crops + 1, 3, 336, 336] (the global image, the tiles, zeros), so every
// image's encoder input is one size. The image's tokens follow from the HD image's size,
// which the model reads from image_sizes [h, w] (its grid: one row per image, one crop stack each).
import {
  PHI3V_TILE,
  phi3VisionBandStarts,
  phi3VisionElements,
  phi3VisionGeometry,
  phi3VisionMemoryBytes,
  phi3VisionTokens,
  type Phi3VisionImageConfig,
} from '../phi3v.ts';
import { checkCropStack, IMAGE_SIZES_GRID } from './crop-stack.ts';
import type { EncoderGeometry, ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: Phi3VisionImageConfig): EncoderGeometry {
  const g = phi3VisionGeometry(height, width, cfg);
  return {
    resizedHeight: g.resizedHeight,
    resizedWidth: g.resizedWidth,
    patches: 1,
    features: phi3VisionElements(cfg),
    tokens: g.tokens,
    imageSize: [g.hdHeight, g.hdWidth],
  };
}

export const PHI3_HD_PROCESSOR: ImageProcessor<Phi3VisionImageConfig> = {
  name: 'HD crops (HD transform, global image, 336-pixel tiles)',
  geometry,
  memoryBytes: phi3VisionMemoryBytes,
  bandStarts: (_g, cfg, count, source) => (count < 2 ? [] : phi3VisionBandStarts(source.width, source.height, cfg)),
  // Every image gives the same encoder input: one size to measure.
  sizesNear: (_targets, elementBytes, cfg) => [{ width: PHI3V_TILE, height: PHI3V_TILE, nbytes: phi3VisionElements(cfg) * elementBytes }],
  ...IMAGE_SIZES_GRID,
  tokensOf: ({ encoderShape, grid }, cfg) => {
    if (!grid || grid.length !== 2) throw new TypeError("no image_sizes row: Phi-3-vision computes an image's tokens from its HD size");
    const [h, w] = grid as [number, number];
    // The model takes h // 336 by w // 336 tiles (hd_feature_transform): a size that is not whole tiles is floored, one under a tile has none.
    if (!(Number.isInteger(h) && Number.isInteger(w) && h >= PHI3V_TILE && w >= PHI3V_TILE))
      throw new RangeError(`image_sizes row [${grid.join(', ')}] is not an HD image's size: h and w must be whole numbers of at least ${PHI3V_TILE}`);
    const tiles = Math.floor(h / PHI3V_TILE) * Math.floor(w / PHI3V_TILE);
    // The model takes the global image and h/336 · w/336 tiles from the image's crops (hd_feature_transform).
    if (encoderShape.length > 0) checkCropStack(encoderShape, PHI3V_TILE, PHI3V_TILE, tiles + 1, [h, w]);
    else if (tiles > cfg.num_crops) throw new RangeError(`image_sizes [${h}, ${w}] is ${tiles} tiles, more than num_crops ${cfg.num_crops}`);
    return phi3VisionTokens(h, w);
  },
};
