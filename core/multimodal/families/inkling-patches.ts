// Inkling's patch processor (inkling.ts): every image as it is, cut into p × p patches with a
// column past its right edge, padded with −1 before the normalize, each patch's pixels
// channels last and its frame repeated. A patch is a token: tokens_per_item (one value an
// image) is the tensor the worker's model reads them from, and splits the flat pixel values by.
import { inklingBandStarts, inklingGeometry, inklingMemoryBytes, inklingPatchElements, type InklingImageConfig } from '../inkling.ts';
import type { EncoderGeometry, ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: InklingImageConfig): EncoderGeometry {
  const g = inklingGeometry(height, width, cfg);
  return { resizedHeight: height, resizedWidth: width, patches: g.patches, features: inklingPatchElements(cfg), tokens: g.patches };
}

/** Square images whose encoder input is nearest each target: whole patches a side (the extra column included). */
function sizesNear(targets: readonly number[], elementBytes: number, cfg: InklingImageConfig): Array<{ width: number; height: number; nbytes: number }> {
  const plans: Array<{ width: number; height: number; nbytes: number }> = [];
  const patch = inklingPatchElements(cfg) * elementBytes;
  for (const target of targets) {
    const side = Math.max(1, Math.round(Math.sqrt(target / patch))) * cfg.patch_side;
    const nbytes = inklingGeometry(side, side, cfg).patches * patch;
    if (!plans.some((p) => p.nbytes === nbytes)) plans.push({ width: side, height: side, nbytes });
  }
  return plans;
}

export const INKLING_PATCH_PROCESSOR: ImageProcessor<InklingImageConfig> = {
  name: 'Inkling patches (no resize, -1 padding, channels last, frames repeated)',
  geometry,
  memoryBytes: inklingMemoryBytes,
  // Two threads take half the patch rows each (the second from a copy of the pixels in the pool's memory).
  bandStarts: (g, cfg, count) => (count < 2 ? [] : inklingBandStarts(g.resizedHeight, cfg).map((row) => row * cfg.patch_side)),
  sizesNear,
  batchedEncoder: false,
  gridded: true,
  gridKey: 'tokens_per_item',
  gridWidth: 1,
  gridPatches: (row) => row[0]!,
  tokensOf: ({ encoderShape, grid }, cfg) => {
    if (!grid || grid.length !== 1) throw new TypeError('no tokens_per_item value: an Inkling model embeds an image by its patches');
    const patches = grid[0]!;
    if (!Number.isInteger(patches) || patches < 1) throw new RangeError(`tokens_per_item ${patches} is not an image's patches (a positive count)`);
    const p = cfg.patch_side;
    const want = [cfg.temporal_patch_size, p, p, 3];
    if (encoderShape.length > 0 && (encoderShape.length !== 5 || want.some((v, i) => encoderShape[i + 1] !== v)))
      throw new RangeError(`pixel_values are [${encoderShape.join(', ')}], expected [patches, ${want.join(', ')}]`);
    return patches;
  },
};
