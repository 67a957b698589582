// Kimi-K2.5 / K2.6 (model_type `kimi_k25`, moonshotai/Kimi-K2.5): the gateway's kimi_k25 spec
// (registry/kimi_k25.rs) and its KimiK25Processor (vision/processors/kimi_k25.rs,
// moonvit.rs): MoonViT patches (moonvit.ts), pixel values [patches, 3, 14, 14] flat by
// patches_per_image, grid_thws [images, 3] batched and kept on the CPU. The prompt's one
// <|media_pad|> per image (config.json media_placeholder_token_id, 163605) becomes the image's
// tokens; the chat template wraps it in <|media_begin|>image<|media_content|> … <|media_end|>.
// Its checkpoints ship tiktoken.model, not tokenizer.json (tiktoken.ts).
import { KIMI_K25_DEFAULTS } from '../moonvit.ts';
import { isMoonVitConfig, type EncoderGeometry, type ImageConfig, type ImageModelTensor, type VisionFamily } from './family.ts';

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

export const KIMI_K25: VisionFamily = {
  id: 'kimi_k25',
  label: 'Kimi-K2.5',
  gatewaySpec: 'kimi_k25',
  modelTypes: ['kimi_k25'],
  imageTokenKey: 'media_placeholder_token_id',
  tokenFallbacks: { media_placeholder_token_id: '<|media_pad|>' },
  visionMarkers: false,
  tiktoken: true,
  defaults: KIMI_K25_DEFAULTS,
  imageTensors: moonVitImageTensors,
  encoderShape: moonVitEncoderShape,
};
