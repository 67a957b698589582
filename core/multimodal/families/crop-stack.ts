// What the crop-stack processors share (Phi-3-vision's HD crops, LLaVA-NeXT's anyres crops):
// an image's encoder input is one [1, crops, 3, H, W] row of the batched pixel values, and its
// grid is image_sizes, one [h, w] row per image, from which the model computes its tokens and
// how many of its crops it takes.
import type { ImageProcessor } from './family.ts';

/** The grid settings of a crop-stack processor: image_sizes, two values a row, one crop stack each. */
export const IMAGE_SIZES_GRID = {
  batchedEncoder: true,
  gridded: true,
  gridKey: 'image_sizes',
  gridWidth: 2,
  gridPatches: () => 1,
} as const satisfies Partial<ImageProcessor<never>>;

/** Refuse an image's pixel values that are not [1, crops, 3, height, width] with at least `need` crops (what the model takes for image_sizes `size`). */
export function checkCropStack(encoderShape: readonly number[], height: number, width: number, need: number, size: readonly [number, number]): void {
  const [n, crops, c, y, x] = encoderShape;
  if (encoderShape.length !== 5 || n !== 1 || c !== 3 || y !== height || x !== width || crops! < need)
    throw new RangeError(
      `an image's pixel values are [${encoderShape.join(', ')}], expected [1, crops, 3, ${height}, ${width}] with at least ${need} crops for image_sizes [${size[0]}, ${size[1]}]`,
    );
}
