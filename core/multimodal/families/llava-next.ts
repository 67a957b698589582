// LLaVA-NeXT / LLaVA-1.6 (model_type `llava_next`, llava-hf/llava-v1.6-*-hf): the gateway's
// llava_next spec (registry/llava.rs) and its LlavaNextProcessor (vision/processors/llava.rs):
// anyres crops (llava-next.ts), pixel values batched [images, crops, 3, 336, 336] (a request's
// images padded with zero crops to its most, as Hugging Face's processor pads a batch),
// image_sizes [images, 2] (each image's own h, w) batched. The prompt's one `<image>` per
// image (config.json image_token_index) becomes the image's tokens as vLLM's model counts them.
// Where mmtc differs from the gateway: docs/preprocessing.md, "Anyres crops (LLaVA-NeXT)".
import { LLAVA_NEXT_DEFAULTS } from '../llava-next.ts';
import { isAnyresConfig, type EncoderGeometry, type ImageModelTensor, type VisionFamily } from './family.ts';

function imageTensors(g: Pick<EncoderGeometry, 'imageSize'>): ImageModelTensor[] {
  if (!g.imageSize) throw new TypeError('a LLaVA-NeXT image geometry without its size');
  return [{ name: 'image_sizes', dtype: 'int64', shape: [1, 2], values: [...g.imageSize], layout: 'batched', keepOnCpu: false }];
}

export const LLAVA_NEXT: VisionFamily = {
  id: 'llava_next',
  label: 'LLaVA-NeXT',
  gatewaySpec: 'llava_next',
  modelTypes: ['llava_next'],
  imageTokenKey: 'image_token_index',
  // The gateway's placeholder_token_id: config.json's image_token_index, else the tokenizer's <image>.
  tokenFallbacks: { image_token_index: '<image>' },
  visionMarkers: false,
  defaults: LLAVA_NEXT_DEFAULTS,
  imageTensors,
  paddedCrops: true,
  // Batched: one image's slice of [images, crops, 3, H, W] keeps its first dimension; its crops are its own (the request pads them).
  encoderShape: (g, cfg) => {
    if (!isAnyresConfig(cfg)) throw new TypeError('LLaVA-NeXT takes an anyres configuration');
    return [1, g.features / (3 * cfg.crop_height * cfg.crop_width), 3, cfg.crop_height, cfg.crop_width];
  },
};
