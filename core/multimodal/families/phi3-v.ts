// Phi-3-vision / Phi-3.5-vision (model_type `phi3_v`, microsoft/Phi-3-vision-128k-instruct,
// microsoft/Phi-3.5-vision-instruct): the gateway's phi3_v spec (registry/phi3_v.rs) and its
// Phi3VisionProcessor (vision/processors/phi3_vision.rs): HD crops (phi3v.ts), pixel values
// batched [images, num_crops + 1, 3, 336, 336], image_sizes [images, 2] (the HD image's h, w)
// batched, num_img_tokens [images] with no field layout (shared: every item gets the whole).
// config.json has no image token id: the placeholder is the tokenizer's <|image|> (32044), as
// the gateway's spec reads it; the chat template takes content as a string, so each image's
// <|image|> is written before the message's text (content-format.ts), and becomes the image's
// tokens. Where mmtc differs from the gateway: docs/preprocessing.md, "HD crops (Phi-3-vision)".
import { PHI3_VISION_DEFAULTS, PHI3V_TILE } from '../phi3v.ts';
import { isPhi3VisionConfig, type EncoderGeometry, type ImageModelTensor, type VisionFamily } from './family.ts';

function imageTensors(g: Pick<EncoderGeometry, 'imageSize'> & { tokens?: number }): ImageModelTensor[] {
  if (!g.imageSize || g.tokens === undefined) throw new TypeError('a Phi-3-vision image geometry without its HD size and tokens');
  return [
    { name: 'image_sizes', dtype: 'int64', shape: [1, 2], values: [...g.imageSize], layout: 'batched', keepOnCpu: false },
    { name: 'num_img_tokens', dtype: 'int64', shape: [1], values: [g.tokens], layout: 'shared', keepOnCpu: false },
  ];
}

export const PHI3_V: VisionFamily = {
  id: 'phi3_v',
  label: 'Phi-3-vision',
  gatewaySpec: 'phi3_v',
  modelTypes: ['phi3_v'],
  // No config.json key: the tokenizer's <|image|> (the gateway's placeholder_token_id).
  tokenFallbacks: { image_token_id: '<|image|>' },
  visionMarkers: false,
  defaults: PHI3_VISION_DEFAULTS,
  imageTensors,
  // Batched: one image's slice of [images, crops, 3, 336, 336] keeps its first dimension.
  encoderShape: (_g, cfg) => {
    if (!isPhi3VisionConfig(cfg)) throw new TypeError('Phi-3-vision takes an HD crop configuration');
    return [1, cfg.num_crops + 1, 3, PHI3V_TILE, PHI3V_TILE];
  },
};
