// The CLIP crop processor (clip-image.ts): every image resized by its shortest edge and
// center-cropped to one fixed size, so every image's encoder input is the same
// [1, 3, crop_height, crop_width] (one row of 3·H·W values along the first axis) and the same
// number of placeholder tokens, whatever its size.
import { clipBandStarts, clipGeometry, clipMemoryBytes, clipTokens, type ClipImageConfig } from '../clip-image.ts';
import type { EncoderGeometry, ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: ClipImageConfig): EncoderGeometry {
  const g = clipGeometry(height, width, cfg);
  return {
    resizedHeight: g.resizedHeight,
    resizedWidth: g.resizedWidth,
    patches: 1,
    features: 3 * g.height * g.width,
    tokens: clipTokens(g.height, g.width, cfg),
  };
}

export const CLIP_CROP_PROCESSOR: ImageProcessor<ClipImageConfig> = {
  name: 'CLIP crop (shortest edge, center crop)',
  geometry,
  // The outputs, then the resize's working space: the kernels run in the pool's memory.
  memoryBytes: clipMemoryBytes,
  bandStarts: (_g, cfg, count, source) => (count < 2 ? [] : clipBandStarts(source.width, source.height, cfg)),
  batchedEncoder: true,
  gridded: false,
  // Every image gives the same encoder input: one size to measure.
  sizesNear: (_targets, elementBytes, cfg) => [{ width: cfg.crop_width, height: cfg.crop_height, nbytes: 3 * cfg.crop_height * cfg.crop_width * elementBytes }],
  tokensOf: ({ encoderShape }, cfg) => {
    const [n, c, h, w] = encoderShape;
    if (encoderShape.length !== 4 || n !== 1 || c !== 3 || h !== cfg.crop_height || w !== cfg.crop_width)
      throw new RangeError(`an image's pixel values are [${encoderShape.join(', ')}], expected [1, 3, ${cfg.crop_height}, ${cfg.crop_width}]`);
    return clipTokens(h, w, cfg);
  },
};
