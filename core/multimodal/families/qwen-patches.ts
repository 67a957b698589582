// What every Qwen-VL family shares (docs/preprocessing.md, "Model families"): the patch
// processor of qwen-vl.ts (smart resize, patchify) and its tensors, image_grid_thw and
// patches_per_image, as the gateway's Qwen specs lay them out (registry/qwen_vl.rs,
// qwen3_vl.rs, qwen3_omni.rs): pixel values flat by patches_per_image, both side tensors
// batched, the grid kept on the CPU.
import { bandStarts, encoderMemoryBytes, mergeBlockSide, patchFeatures, patchGeometry, type PatchGeometry, type QwenVlImageConfig } from '../qwen-vl.ts';
import type { EncoderGeometry, ImageModelTensor, ImageProcessor } from './family.ts';

/** The grid of a Qwen geometry (every Qwen processor's geometry has one). */
function gridOf(g: Pick<EncoderGeometry, 'gridT' | 'gridH' | 'gridW'>): Pick<PatchGeometry, 'gridT' | 'gridH' | 'gridW'> {
  if (g.gridT === undefined || g.gridH === undefined || g.gridW === undefined) throw new TypeError('a Qwen image geometry without its grid');
  return { gridT: g.gridT, gridH: g.gridH, gridW: g.gridW };
}

/** Square images whose encoder input is nearest each target: a square grid of merge blocks per target. */
function sizesNear(targets: readonly number[], elementBytes: number, cfg: QwenVlImageConfig): Array<{ width: number; height: number; nbytes: number }> {
  const factor = mergeBlockSide(cfg);
  const patchBytes = patchFeatures(cfg) * elementBytes;
  const plans: Array<{ width: number; height: number; nbytes: number }> = [];
  for (const target of targets) {
    const patches = target / patchBytes;
    // A square grid of merge blocks: side in blocks, at least one block.
    const blocks = Math.max(1, Math.round(Math.sqrt(patches) / cfg.merge_size));
    const side = blocks * factor;
    const g = patchGeometry(side, side, { ...cfg, min_pixels: factor * factor, max_pixels: side * side });
    const nbytes = g.patches * g.features * elementBytes;
    if (!plans.some((p) => p.nbytes === nbytes)) plans.push({ width: side, height: side, nbytes });
  }
  return plans;
}

export const QWEN_PATCH_PROCESSOR: ImageProcessor<QwenVlImageConfig> = {
  name: 'Qwen-VL patches (smart resize, patchify)',
  geometry: patchGeometry,
  memoryBytes: (width, height, cfg, kinds) => encoderMemoryBytes(width, height, cfg, kinds),
  bandStarts: (g, cfg, count) => bandStarts({ ...g, ...gridOf(g) }, cfg, count),
  sizesNear,
  batchedEncoder: false,
  gridded: true,
  // The worker's model takes grid_t·grid_h·grid_w patches and merges merge² of them into a token.
  tokensOf: ({ grid }, cfg) => {
    if (!grid || grid.length !== 3) throw new TypeError('no image_grid_thw row: a Qwen-VL model computes its image tokens from the grid');
    return (grid[0]! * grid[1]! * grid[2]!) / (cfg.merge_size * cfg.merge_size);
  },
};

/** Qwen's pixel values are flat: an image's encoder input is its rows of patches. */
export const qwenEncoderShape = (g: Pick<EncoderGeometry, 'patches' | 'features'>): number[] => [g.patches, g.features];

export function qwenImageTensors(geometry: Pick<EncoderGeometry, 'patches' | 'gridT' | 'gridH' | 'gridW'>): ImageModelTensor[] {
  const g = { ...gridOf(geometry), patches: geometry.patches };
  return [
    { name: 'image_grid_thw', dtype: 'int64', shape: [1, 3], values: [g.gridT, g.gridH, g.gridW], layout: 'batched', keepOnCpu: true },
    { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [g.patches], layout: 'batched', keepOnCpu: false, splitsPixels: true },
  ];
}
