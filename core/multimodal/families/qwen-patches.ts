// What every Qwen-VL family shares (docs/preprocessing.md, "Model families"): the patch
// processor of qwen-vl.ts (smart resize, patchify) and its tensors, image_grid_thw and
// patches_per_image, as the gateway's Qwen specs lay them out (registry/qwen_vl.rs,
// qwen3_vl.rs, qwen3_omni.rs): pixel values flat by patches_per_image, both side tensors
// batched, the grid kept on the CPU.
import { mergeBlockSide, patchFeatures, patchGeometry } from '../qwen-vl.ts';
import type { ImageModelTensor, ImageProcessor, VisionFamily } from './family.ts';

export const QWEN_PATCH_PROCESSOR: ImageProcessor = {
  name: 'Qwen-VL patches (smart resize, patchify)',
  geometry: patchGeometry,
  rowFeatures: patchFeatures,
  blockSide: mergeBlockSide,
  tokensOfGrid: (thw, cfg) => (thw[0]! * thw[1]! * thw[2]!) / (cfg.merge_size * cfg.merge_size),
};

export function qwenImageTensors(g: Parameters<VisionFamily['imageTensors']>[0]): ImageModelTensor[] {
  return [
    { name: 'image_grid_thw', dtype: 'int64', shape: [1, 3], values: [g.gridT, g.gridH, g.gridW], layout: 'batched', keepOnCpu: true },
    { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [g.patches], layout: 'batched', keepOnCpu: false, splitsPixels: true },
  ];
}
