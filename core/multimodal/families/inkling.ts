// Inkling (model_type `inkling_mm_model`), its vision: the gateway's inkling spec
// (registry/inkling.rs) and its InklingImageProcessor (vision/processors/inkling.rs), written
// from Hugging Face's (inkling.ts): pixel values [patches, 2, 40, 40, 3] flat by
// tokens_per_item, batched. The checkpoint's template writes an image as <|content_image|>
// then one <|unused_200054|>, which becomes the image's run of <|unused_200054|> (a token a
// patch); the range the gateway records starts at the <|content_image|> before it
// (structural_prefix 1): vLLM gets that range and masks it by im_token_id, SGLang and
// TokenSpeed get the run. Its parts keep the order the client wrote them in (the gateway's
// MediaPartOrder::Authored), where every other family puts a message's images first.
import { INKLING_DEFAULTS } from '../inkling.ts';
import { isInklingConfig, type EncoderGeometry, type ImageModelTensor, type VisionFamily } from './family.ts';

function imageTensors(g: Pick<EncoderGeometry, 'patches'>): ImageModelTensor[] {
  return [{ name: 'tokens_per_item', dtype: 'int64', shape: [1], values: [g.patches], layout: 'batched', keepOnCpu: false, splitsPixels: true }];
}

export const INKLING: VisionFamily = {
  id: 'inkling',
  label: 'Inkling',
  gatewaySpec: 'inkling',
  modelTypes: ['inkling_mm_model'],
  // The gateway's spec takes the tokenizer's <|unused_200054|>; config.json names none (one that
  // named another token would be refused at load: its text must be the placeholder's).
  imageTokenKey: 'image_token_id',
  tokenFallbacks: { image_token_id: '<|unused_200054|>' },
  visionMarkers: false,
  promptTokens: ['<|content_image|>'],
  structuralPrefix: '<|content_image|>',
  authoredOrder: true,
  defaults: INKLING_DEFAULTS,
  imageTensors,
  // Flat: the image's patches, each [temporal, p, p, 3].
  encoderShape: (g, cfg) => {
    if (!isInklingConfig(cfg)) throw new TypeError('Inkling takes its patch configuration');
    return [g.patches, cfg.temporal_patch_size, cfg.patch_side, cfg.patch_side, 3];
  },
};
