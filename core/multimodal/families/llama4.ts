// Llama 4 (model_type `llama4`, meta-llama/Llama-4-Scout-17B-16E-Instruct and -Maverick): the
// gateway's llama4 spec (registry/llama4.rs) and its Llama4VisionProcessor
// (vision/processors/llama4_vision.rs), written from Hugging Face's Llama4ImageProcessor and
// Llama4Processor: tiles (llama4.ts), pixel values [crops, 3, 336, 336] flat by
// patches_per_image, aspect_ratios [images, 2] and patches_per_image [images] batched. The
// template's one <|image|> per image becomes HF's _prompt_split_image: <|image_start|>, for
// more than one tile each row's tiles as runs of <|patch|> (config.json image_token_index,
// 200092) with <|tile_x_separator|> between them and <|tile_y_separator|> after the row, then
// <|image|> and the global tile's run, <|image_end|>. The worker's model embeds at the
// <|patch|> tokens alone (vLLM masks the range by im_token_id; SGLang and TokenSpeed get the
// runs as the image's ranges: engines).
import { isLlama4Config, type EncoderGeometry, type ImageModelTensor, type PromptTokenIds, type VisionFamily } from './family.ts';
import { LLAMA4_DEFAULTS } from '../llama4.ts';

const IMAGE_START = '<|image_start|>';
const IMAGE_END = '<|image_end|>';
const IMAGE = '<|image|>';
const TILE_X = '<|tile_x_separator|>';
const TILE_Y = '<|tile_y_separator|>';

function imageTensors(g: Pick<EncoderGeometry, 'patches' | 'tiles'>): ImageModelTensor[] {
  if (!g.tiles) throw new TypeError('a Llama 4 image geometry without its tiles');
  return [
    { name: 'aspect_ratios', dtype: 'int64', shape: [1, 2], values: [...g.tiles], layout: 'batched', keepOnCpu: false },
    { name: 'patches_per_image', dtype: 'int64', shape: [1], values: [g.patches], layout: 'batched', keepOnCpu: false, splitsPixels: true },
  ];
}

/** HF's _prompt_split_image for an image of rows × cols tiles whose crops give `tokens` <|patch|> tokens. */
function promptSequence(tensors: readonly ImageModelTensor[], tokens: number, ids: PromptTokenIds): number[] {
  const aspect = tensors.find((t) => t.name === 'aspect_ratios')?.values;
  const crops = tensors.find((t) => t.name === 'patches_per_image')?.values[0];
  if (!aspect || aspect.length !== 2 || crops === undefined) throw new TypeError('a Llama 4 image without aspect_ratios and patches_per_image');
  const [rows, cols] = aspect as [number, number];
  const perTile = tokens / crops;
  const id = (spelling: string) => ids.named[spelling]!;
  const run = () => new Array<number>(perTile).fill(ids.image);
  const out = [id(IMAGE_START)];
  if (rows * cols > 1)
    for (let r = 0; r < rows; r++) {
      for (let c = 0; c < cols; c++) {
        out.push(...run());
        if (c < cols - 1) out.push(id(TILE_X));
      }
      out.push(id(TILE_Y));
    }
  out.push(id(IMAGE), ...run(), id(IMAGE_END));
  return out;
}

export const LLAMA4: VisionFamily = {
  id: 'llama4',
  label: 'Llama 4',
  gatewaySpec: 'llama4',
  modelTypes: ['llama4'],
  imageTokenKey: 'image_token_index',
  // config.json's image_token_index, else the tokenizer's <|patch|>, the token the model embeds at (the gateway falls back to <|image|>: docs/preprocessing.md).
  tokenFallbacks: { image_token_index: '<|patch|>' },
  visionMarkers: false,
  promptPlaceholder: IMAGE,
  promptTokens: [IMAGE_START, IMAGE_END, IMAGE, TILE_X, TILE_Y],
  promptSequence,
  defaults: LLAMA4_DEFAULTS,
  imageTensors,
  // Flat: the image's crops, each [3, tile, tile].
  encoderShape: (g, cfg) => {
    if (!isLlama4Config(cfg)) throw new TypeError('Llama 4 takes a tile configuration');
    return [g.patches, 3, cfg.tile_size, cfg.tile_size];
  },
};
