// LLaVA-1.5 (model_type `llava`, llava-hf/llava-1.5-*-hf): the gateway's llava spec
// (registry/llava.rs) and its LlavaProcessor (vision/processors/llava.rs): Hugging Face's
// CLIPImageProcessor at 336 pixels (clip-image.ts), pixel values batched [images, 3, 336, 336],
// no model-specific tensors. The prompt's one `<image>` per image (config.json
// image_token_index, 32000) becomes 576 tokens: (336 / 14)², the patches the vision tower's
// features are taken from (vision_feature_select_strategy "default" drops the CLS token;
// "full" keeps it: 577). Where mmtc differs from the gateway: docs/preprocessing.md, "CLIP crop (LLaVA-1.5)".
import { CLIP_336_DEFAULTS } from '../clip-image.ts';
import { isClipConfig, type VisionFamily } from './family.ts';

export const LLAVA: VisionFamily = {
  id: 'llava',
  label: 'LLaVA-1.5',
  gatewaySpec: 'llava',
  modelTypes: ['llava'],
  imageTokenKey: 'image_token_index',
  // The gateway's placeholder_token_id: config.json's image_token_index, else the tokenizer's <image>.
  tokenFallbacks: { image_token_index: '<image>' },
  visionMarkers: false,
  defaults: CLIP_336_DEFAULTS,
  imageTensors: () => [],
  // Batched: one image's slice of [images, 3, H, W] keeps its first dimension.
  encoderShape: (_g, cfg) => {
    if (!isClipConfig(cfg)) throw new TypeError('LLaVA-1.5 takes a CLIP crop configuration');
    return [1, 3, cfg.crop_height, cfg.crop_width];
  },
};
