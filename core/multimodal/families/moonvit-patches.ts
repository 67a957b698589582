// The MoonViT patch processor (moonvit.ts): every image resized within a patch budget (never
// up), zero-padded to whole merge blocks, and cut into [3, p, p] patches row by row; the
// worker's model merges merge×merge patches into a token. Its grid (1, grid_h, grid_w) is
// the tensor the model computes the tokens from (Kimi's grid_thws).
import { moonVitBandStarts, moonVitElements, moonVitGeometry, moonVitMemoryBytes, type MoonVitImageConfig } from '../moonvit.ts';
import { isMoonVitConfig, type EncoderGeometry, type ImageConfig, type ImageModelTensor, type ImageProcessor } from './family.ts';

function geometry(height: number, width: number, cfg: MoonVitImageConfig): EncoderGeometry {
  const g = moonVitGeometry(height, width, cfg);
  return {
    resizedHeight: g.resizedHeight,
    resizedWidth: g.resizedWidth,
    patches: g.gridH * g.gridW,
    features: 3 * cfg.patch_size * cfg.patch_size,
    tokens: g.tokens,
    gridT: 1,
    gridH: g.gridH,
    gridW: g.gridW,
  };
}

/** Square images whose encoder input is nearest each target: a square of merge blocks, within the patch budget. */
function sizesNear(targets: readonly number[], elementBytes: number, cfg: MoonVitImageConfig): Array<{ width: number; height: number; nbytes: number }> {
  const factor = cfg.patch_size * cfg.merge_size;
  const plans: Array<{ width: number; height: number; nbytes: number }> = [];
  for (const target of targets) {
    const patches = target / (3 * cfg.patch_size * cfg.patch_size * elementBytes);
    const blocks = Math.max(1, Math.round(Math.sqrt(patches) / cfg.merge_size));
    const side = blocks * factor;
    const nbytes = moonVitElements(moonVitGeometry(side, side, cfg), cfg) * elementBytes;
    if (!plans.some((p) => p.nbytes === nbytes)) plans.push({ width: side, height: side, nbytes });
  }
  return plans;
}

export const MOONVIT_PATCH_PROCESSOR: ImageProcessor<MoonVitImageConfig> = {
  name: 'MoonViT patches (navit resize, zero pad, patchify)',
  geometry,
  memoryBytes: moonVitMemoryBytes,
  // Two threads share an image's resize and scatter (an image the budget keeps as it is: its scatter).
  bandStarts: (g, cfg, count) => (count < 2 ? [] : moonVitBandStarts(g, cfg)),
  sizesNear,
  batchedEncoder: false,
  gridded: true,
  gridKey: 'grid_thws',
  tokensOf: ({ grid }, cfg) => {
    if (!grid || grid.length !== 3) throw new TypeError('no grid_thws row: a MoonViT model computes its image tokens from the grid');
    const [t, h, w] = grid as [number, number, number];
    // An image is one frame whose sides are whole merge blocks: the model merges merge×merge patches into a token.
    if (t !== 1 || h % cfg.merge_size !== 0 || w % cfg.merge_size !== 0 || h <= 0 || w <= 0)
      throw new RangeError(`grid_thws row [${grid.join(', ')}] is not an image's grid: t must be 1 and h, w positive multiples of ${cfg.merge_size}`);
    return (h * w) / (cfg.merge_size * cfg.merge_size);
  },
};

/** A MoonViT image's model tensors, Kimi-K2.5's and K3's alike: grid_thws (kept on the CPU) and patches_per_image, which splits the flat pixel values. */
export function moonVitImageTensors(g: Pick<EncoderGeometry, 'patches' | 'gridT' | 'gridH' | 'gridW'>): ImageModelTensor[] {
  if (g.gridT === undefined || g.gridH === undefined || g.gridW === undefined) throw new TypeError('a MoonViT image geometry without its grid');
  return [
    { name: 'grid_thws', dtype: 'int64', shape: [1, 3], values: [g.gridT, g.gridH, g.gridW], layout: 'batched', keepOnCpu: true },
    { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [g.patches], layout: 'batched', keepOnCpu: false, splitsPixels: true },
  ];
}

/** Flat: the image's patches, each [3, p, p] (the gateway's 4-D encoder input). */
export function moonVitEncoderShape(g: Pick<EncoderGeometry, 'patches'>, cfg: ImageConfig): number[] {
  if (!isMoonVitConfig(cfg)) throw new TypeError('a Kimi family takes a MoonViT configuration');
  return [g.patches, 3, cfg.patch_size, cfg.patch_size];
}
