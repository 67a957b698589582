// Kimi-K2.5 / K2.6 (model_type `kimi_k25`, moonshotai/Kimi-K2.5): the gateway's kimi_k25 spec
// (registry/kimi_k25.rs) and its KimiK25Processor (vision/processors/kimi_k25.rs,
// moonvit.rs): MoonViT patches (moonvit.ts), pixel values [patches, 3, 14, 14] flat by
// patches_per_image, grid_thws [images, 3] batched and kept on the CPU. The prompt's one
// <|media_pad|> per image (config.json media_placeholder_token_id, 163605) becomes the image's
// tokens; the chat template wraps it in <|media_begin|>image<|media_content|> … <|media_end|>.
// Its checkpoints ship tiktoken.model, not tokenizer.json (tiktoken.ts).
import { KIMI_K25_DEFAULTS } from '../moonvit.ts';
import type { VisionFamily } from './family.ts';
import { moonVitEncoderShape, moonVitImageTensors } from './moonvit-patches.ts';

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
