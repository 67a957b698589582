// The family interface (docs/preprocessing.md, "Model families"): everything the router, the
// engines, the reference worker, the pixel cache, calibration and the CLI need to know about a
// vision-language model family, in one object per family (one file each in this folder, listed
// by index.ts). A family says how it is detected from config.json (as the gateway's registry
// detects it), where config.json keeps its special token ids, its image processor (geometry,
// memory, preprocessing) with the processor's defaults, and the model-specific tensors of each
// image with their field layouts on the wire.
import type { ClipImageConfig } from '../clip-image.ts';
import type { InklingImageConfig } from '../inkling.ts';
import type { Llama4ImageConfig } from '../llama4.ts';
import type { AnyresImageConfig } from '../llava-next.ts';
import type { MoonVitImageConfig } from '../moonvit.ts';
import type { Phi3VisionImageConfig } from '../phi3v.ts';
import type { OutputKinds, QwenVlImageConfig } from '../qwen-vl.ts';

export type FamilyId = 'qwen2_vl' | 'qwen3_vl' | 'qwen3_5' | 'qwen3_omni' | 'llava' | 'llava_next' | 'kimi_k25' | 'kimi_k3' | 'phi3_v' | 'llama4' | 'inkling';

/** A family's image processor settings: Qwen's patches (qwen-vl.ts), CLIP's crop (clip-image.ts), LLaVA-NeXT's anyres crops (llava-next.ts), MoonViT's patches (moonvit.ts), Phi-3-vision's HD crops (phi3v.ts), Llama 4's tiles (llama4.ts) or Inkling's patches (inkling.ts). */
export type ImageConfig =
  QwenVlImageConfig | ClipImageConfig | AnyresImageConfig | MoonVitImageConfig | Phi3VisionImageConfig | Llama4ImageConfig | InklingImageConfig;

/** LLaVA-NeXT's anyres configuration (its pinpoints are what tell it from CLIP's crop, whose settings it has too). */
export const isAnyresConfig = (cfg: ImageConfig): cfg is AnyresImageConfig => 'image_grid_pinpoints' in cfg;

/** A CLIP crop configuration (its crop size is what tells it from the others, anyres aside). */
export const isClipConfig = (cfg: ImageConfig): cfg is ClipImageConfig => 'crop_height' in cfg && !isAnyresConfig(cfg);

/** A MoonViT configuration (its patch limit is what tells it from the others). */
export const isMoonVitConfig = (cfg: ImageConfig): cfg is MoonVitImageConfig => 'in_patch_limit' in cfg;

/** Phi-3-vision's HD crop configuration (its crop count is what tells it from the others). */
export const isPhi3VisionConfig = (cfg: ImageConfig): cfg is Phi3VisionImageConfig => 'num_crops' in cfg;

/** Llama 4's tile configuration (its tile budget is what tells it from the others). */
export const isLlama4Config = (cfg: ImageConfig): cfg is Llama4ImageConfig => 'max_patches' in cfg;

/** Inkling's patch configuration (its patch side is what tells it from the others). */
export const isInklingConfig = (cfg: ImageConfig): cfg is InklingImageConfig => 'patch_side' in cfg;

/** Qwen's patch configuration (smart resize between min_pixels and max_pixels). */
export const isQwenConfig = (cfg: ImageConfig): cfg is QwenVlImageConfig =>
  !isClipConfig(cfg) && !isAnyresConfig(cfg) && !isMoonVitConfig(cfg) && !isPhi3VisionConfig(cfg) && !isLlama4Config(cfg) && !isInklingConfig(cfg);

/** A configuration that must be Qwen's (a caller of Qwen's own pipeline, qwen-vl.ts). */
export function asQwenConfig(cfg: ImageConfig): QwenVlImageConfig {
  if (!isQwenConfig(cfg))
    throw new TypeError(
      `a ${isClipConfig(cfg) ? 'CLIP crop' : isAnyresConfig(cfg) ? 'LLaVA-NeXT anyres' : isMoonVitConfig(cfg) ? 'MoonViT' : isLlama4Config(cfg) ? 'Llama 4 tile' : isInklingConfig(cfg) ? 'Inkling patch' : 'Phi-3-vision HD crop'} configuration where Qwen's patch configuration is needed`,
    );
  return cfg;
}

/**
 * An image's encoder input, from its size alone: what the prompt (tokens), the pool (memory)
 * and the /dev/shm file (bytes) need before its pixels exist. `patches` rows of `features`
 * values along the first axis (a CLIP crop is one row of 3·H·W); Qwen's grid rides along.
 */
export interface EncoderGeometry {
  resizedHeight: number;
  resizedWidth: number;
  patches: number;
  features: number;
  tokens: number;
  gridT?: number;
  gridH?: number;
  gridW?: number;
  /** The size the family's model reads for the image (image_sizes: Phi-3-vision's HD image's height and width, LLaVA-NeXT's image's own). */
  imageSize?: [number, number];
  /** The canvas's tiles, rows and columns (Llama 4's aspect_ratios). */
  tiles?: [number, number];
}

/**
 * One model-specific tensor of one image, as the engines place it: int64 values, this image's
 * shape with a leading dimension of 1. `batched`: the runtime stacks the images' tensors along
 * that dimension (the gateway's FieldLayout::Batched); `shared`: the request's tensor holds
 * every image's values (the images' rows stacked) and goes whole to each item, as a value
 * with no field layout does (Phi-3-vision's num_img_tokens; vLLM's
 * MultiModalFieldConfig.shared); `keepOnCpu`: the worker keeps it off the accelerator
 * (keep_on_cpu_keys); `splitsPixels`: the encoder input is flat, split into images by this
 * tensor's values (FieldLayout::flat).
 */
export interface ImageModelTensor {
  name: string;
  dtype: 'int64';
  shape: number[];
  values: number[];
  layout: 'batched' | 'shared';
  keepOnCpu: boolean;
  splitsPixels?: boolean;
}

/**
 * An image processor: from an image's size to its encoder input's geometry and placeholder
 * tokens under the processor's configuration, the memory its preprocessing takes, and the
 * sizes calibration measures. The pool (pool.ts, preprocess-task.ts) runs the processor's
 * preprocessing itself, dispatched by the configuration (processorOf, index.ts).
 */
export interface ImageProcessor<C extends ImageConfig> {
  /** The processor's name, as docs/preprocessing.md, "Model families" lists it. */
  name: string;
  geometry(height: number, width: number, cfg: C): EncoderGeometry;
  /** Bytes of pooled memory an image of this size takes: its outputs, and the resize's working space where the kernels run in it. */
  memoryBytes(width: number, height: number, cfg: C, kinds: OutputKinds): number;
  /** Output rows where the bands after the first start, for `count` threads, for an image of `source` size; none: one thread does the image. */
  bandStarts(g: EncoderGeometry, cfg: C, count: number, source: { width: number; height: number }): number[];
  /** Square images whose encoder input is nearest each target size in bytes, one per distinct size (calibration). */
  sizesNear(targets: readonly number[], elementBytes: number, cfg: C): Array<{ width: number; height: number; nbytes: number }>;
  /** The worker's model computes an image's tokens from a grid tensor it must receive with it (Qwen's image_grid_thw, Kimi's grid_thws, Phi-3-vision's image_sizes). */
  gridded: boolean;
  /** That grid tensor's name. */
  gridKey?: string;
  /** Each image's encoder input is one row of a batched tensor ([1, ...]: the CLIP crop, Phi-3-vision's crops), not rows of a flat one. */
  batchedEncoder: boolean;
  /** Values in one image's row of the grid (3: t, h, w; Phi-3-vision's image_sizes 2: h, w). */
  gridWidth?: number;
  /** Rows of the encoder input one image's grid row stands for (t·h·w patches; a batched family's image is 1). */
  gridPatches?(row: readonly number[]): number;
  /**
   * Placeholder tokens of one image, from what the worker received (what its model computes):
   * the encoder input's shape as the image's slice, and its grid row where the family has one.
   */
  tokensOf(received: { encoderShape: readonly number[]; grid?: readonly number[] }, cfg: C): number;
}

/** The ids a family's prompt sequence is made of: the image token (where the features go), the family's promptTokens by spelling, and ordinary text's. */
export interface PromptTokenIds {
  image: number;
  named: Readonly<Record<string, number>>;
  /** The ids of plain text (Kimi-K3's "image 1024x768"), as the model's tokenizer encodes it. */
  text(s: string): number[];
}

export interface VisionFamily {
  id: FamilyId;
  /** The models it covers, for people. */
  label: string;
  /** The gateway's spec that serves it (crates/multimodal/src/registry, ModelProcessorSpec::name). */
  gatewaySpec: string;
  /** config.json model_type values detected as this family. */
  modelTypes: readonly string[];
  /** Where config.json keeps the special token ids (and the text model's settings): undefined for the top level. */
  configSection?: string;
  /**
   * Token ids config.json may leave out, by their text in the tokenizer (as the gateway's spec
   * falls back to them): Qwen3-Omni's thinker_config has no vision_end_token_id.
   */
  tokenFallbacks?: Readonly<Record<string, string>>;
  /** config.json's key for the image placeholder's token id (image_token_id; LLaVA's image_token_index). */
  imageTokenKey?: string;
  /** Whether config.json names the vision start and end tokens (Qwen's <|vision_start|>, <|vision_end|>). */
  visionMarkers: boolean;
  /** Its checkpoints ship tiktoken's ranks (tiktoken.model) instead of tokenizer.json: Kimi's (tiktoken.ts). */
  tiktoken?: boolean;
  /**
   * Its images' encoder inputs have crop counts of their own ([1, crops, 3, H, W]): a request's
   * are padded with zero crops to its most, as Hugging Face's processor pads a batch
   * (LLaVA-NeXT's _pad_for_batching; the model drops them: engines/tensors.ts, paddedToBatch).
   */
  paddedCrops?: boolean;
  /** The processor's settings when preprocessor_config.json does not say; their kind is the family's processor (processorOf, index.ts). */
  defaults: ImageConfig;
  /** The model-specific tensors of one image, in the order they go on the wire. */
  imageTensors(g: Pick<EncoderGeometry, 'patches' | 'gridT' | 'gridH' | 'gridW' | 'imageSize' | 'tiles'> & { tokens?: number }): ImageModelTensor[];
  /**
   * Where the chat template writes an image as another token than the one its features go to
   * (Llama 4's <|image|>, its features at <|patch|>): that token's spelling; the prompt's
   * placeholders are found by it (ModelDirectory.imagePlaceholderId).
   */
  promptPlaceholder?: string;
  /** Token spellings the family's prompt sequence and built-in chat template use, looked up in the tokenizer at load (ModelDirectory.promptTokenIds). */
  promptTokens?: readonly string[];
  /**
   * An image's tokens in the prompt where they are more than its image token repeated (Llama
   * 4: <|image_start|>, the tiles' <|patch|> runs and separators, <|image|>, the global tile's
   * run, <|image_end|>; Kimi-K3: its media block with the image's size), from its model
   * tensors, embedded `tokens` and decoded size (`source`, before any resize); `ids` the image
   * token's, the promptTokens' and plain text's ids. Undefined: `tokens` copies of the image token.
   */
  promptSequence?(tensors: readonly ImageModelTensor[], tokens: number, ids: PromptTokenIds, source: { width: number; height: number }): number[];
  /**
   * The chat template of a family whose checkpoints render their prompt in code rather than
   * ship a Jinja template (Kimi-K3's XTML renderer), written from that code: used instead of
   * any template in the directory, as the gateway picks its renderer by the model.
   */
  chatTemplate?: string;
  /**
   * A token the chat template writes right before each image's placeholder that the gateway
   * counts into the image's range (its spec's structural_prefix: Inkling's <|content_image|>):
   * vLLM's range starts there; the features go to the run after it.
   */
  structuralPrefix?: string;
  /** A message's parts keep the order the client wrote (the gateway's MediaPartOrder::Authored: Inkling); else its images come first. */
  authoredOrder?: boolean;
  /**
   * One image's encoder input as the gateway slices it per item (assemble.rs,
   * encoder_input_for_item): `patches` rows of `features` values along its first axis.
   * [patches, features] for a family whose pixel values are flat (split into images by a
   * tensor with `splitsPixels`); a batched family's is [1, ...one image's dimensions].
   */
  encoderShape(g: Pick<EncoderGeometry, 'patches' | 'features'>, cfg: ImageConfig): number[];
}
