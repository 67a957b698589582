// Llama 4's tile processor (llama4.ts): every image resized without distortion into a canvas
// of at most max_patches tiles, padded at the bottom and right, cut into tile × tile tiles, and
// a global tile after them when there is more than one. An image's crops are rows of the flat
// pixel_values; the worker's model splits them by patches_per_image and embeds each crop as
// (tile / patch)² / round(1 / pixel_shuffle_ratio²) tokens (vLLM's Llama4ForConditionalGeneration):
// patches_per_image is the tensor the tokens follow from, its one value the image's crops.
import { llama4BandStarts, llama4CropElements, llama4Geometry, llama4MemoryBytes, llama4TokensPerTile, type Llama4ImageConfig } from '../llama4.ts';
import type { EncoderGeometry, ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: Llama4ImageConfig): EncoderGeometry {
  const g = llama4Geometry(height, width, cfg);
  return {
    resizedHeight: g.resizedHeight,
    resizedWidth: g.resizedWidth,
    patches: g.crops,
    features: llama4CropElements(cfg),
    tokens: g.tokens,
    tiles: [g.rows, g.cols],
  };
}

/** One image of each crop count up to the tile budget (the tiles' canvas of a square image is square: 1, 5, 10, 17 crops): squares of one to four tiles a side, nearest each target. */
function sizesNear(targets: readonly number[], elementBytes: number, cfg: Llama4ImageConfig): Array<{ width: number; height: number; nbytes: number }> {
  const plans: Array<{ width: number; height: number; nbytes: number }> = [];
  const crop = llama4CropElements(cfg) * elementBytes;
  for (const target of targets) {
    let best: { width: number; height: number; nbytes: number } | undefined;
    for (let side = 1; side * side <= cfg.max_patches; side++) {
      const px = side * cfg.tile_size;
      const nbytes = llama4Geometry(px, px, cfg).crops * crop;
      if (!best || Math.abs(nbytes - target) < Math.abs(best.nbytes - target)) best = { width: px, height: px, nbytes };
    }
    if (best && !plans.some((p) => p.nbytes === best.nbytes)) plans.push(best);
  }
  return plans;
}

export const LLAMA4_TILE_PROCESSOR: ImageProcessor<Llama4ImageConfig> = {
  name: 'Llama 4 tiles (best-fit canvas, pad, tiles and a global tile)',
  geometry,
  memoryBytes: llama4MemoryBytes,
  bandStarts: (_g, cfg, count, source) => (count < 2 ? [] : llama4BandStarts(source.width, source.height, cfg)),
  sizesNear,
  batchedEncoder: false,
  gridded: true,
  gridKey: 'patches_per_image',
  gridWidth: 1,
  gridPatches: (row) => row[0]!,
  tokensOf: ({ encoderShape, grid }, cfg) => {
    if (!grid || grid.length !== 1) throw new TypeError('no patches_per_image value: a Llama 4 model embeds an image by its crops');
    const crops = grid[0]!;
    // One crop, or rows · cols tiles and the global tile: never 2, nor more than the budget allows.
    if (!Number.isInteger(crops) || crops < 1 || crops === 2 || crops > cfg.max_patches + 1)
      throw new RangeError(
        `patches_per_image ${crops} is not an image's crops: ${cfg.max_patches < 2 ? '1' : `1, or 3 to ${cfg.max_patches + 1} (its tiles and the global tile)`}`,
      );
    const T = cfg.tile_size;
    if (encoderShape.length > 0 && (encoderShape.length !== 4 || encoderShape[1] !== 3 || encoderShape[2] !== T || encoderShape[3] !== T))
      throw new RangeError(`pixel_values are [${encoderShape.join(', ')}], expected [crops, 3, ${T}, ${T}]`);
    return crops * llama4TokensPerTile(cfg);
  },
};
