// A model directory as the router needs it: which vision family (families/index.ts), the special token ids,
// the tokenizer (tokenizer.json via @huggingface/tokenizers, or Kimi's tiktoken.model: text-tokenizer.ts), the chat template (from
// tokenizer_config.json, chat_template.json or chat_template.jinja, rendered with
// @huggingface/jinja) and the image processor settings (preprocessor_config.json over the
// family's defaults). Works on real checkpoints of every family and on the
// bundled demo directory alike; every missing or malformed file is an error naming it.
import { Template } from '@huggingface/jinja';
import { Tokenizer } from '@huggingface/tokenizers';
import { existsSync, promises as fs } from 'node:fs';
import path from 'node:path';
import type { ClipImageConfig } from './clip-image.ts';
import type { AnyresImageConfig } from './llava-next.ts';
import { llama4TokensPerTile, type Llama4ImageConfig } from './llama4.ts';
import { chatTemplateContentFormat, type ContentFormat } from './content-format.ts';
import type { InklingImageConfig } from './inkling.ts';
import type { MoonVitImageConfig } from './moonvit.ts';
import { TRANSPARENT_BG_PATTERNS, TRANSPARENT_BG_STAGES, type TransparentBackground } from './transparent-bg.ts';
import type { Phi3VisionImageConfig } from './phi3v.ts';
import {
  familyById,
  familyOfModelType,
  isAnyresConfig,
  isClipConfig,
  isLlama4Config,
  isInklingConfig,
  isMoonVitConfig,
  isPhi3VisionConfig,
  SUPPORTED_MODEL_TYPES,
  type FamilyId,
  type ImageConfig,
  type VisionFamily,
} from './families/index.ts';
import type { QwenVlImageConfig } from './qwen-vl.ts';
import { huggingFaceTokenizer, type TextTokenizer } from './text-tokenizer.ts';
import { kimiTokenizer, parseTiktokenRanks, TiktokenError } from './tiktoken.ts';

export const BUNDLED_MODEL_PATH = path.resolve(import.meta.dirname, '../../models/qwen2-vl-mini');

export class ModelDirectoryError extends Error {
  override readonly name = 'ModelDirectoryError';
}

export interface ModelDirectory {
  path: string;
  modelType: string;
  /** The vision family (families/index.ts) its config.json's model_type is detected as. */
  family: FamilyId;
  architectures: string[];
  /** The token an image's features go to (config.json's image token id). */
  imageTokenId: number;
  /** The token the chat template writes for an image: imageTokenId, or the family's promptPlaceholder (Llama 4's <|image|>). */
  imagePlaceholderId: number;
  /** The ids of the family's promptTokens (VisionFamily.promptTokens), by spelling: what its prompt sequence is made of. */
  promptTokenIds: Readonly<Record<string, number>>;
  /** Qwen's <|vision_start|> and <|vision_end|> (undefined for a family without them: VisionFamily.visionMarkers). */
  visionStartTokenId: number | undefined;
  visionEndTokenId: number | undefined;
  eosTokenIds: number[];
  vocabSize: number;
  /** Longest prompt plus completion, in tokens (config.json max_position_embeddings). */
  maxContextLength: number;
  /**
   * Most UTF-8 bytes one token can stand for: text of N bytes has at least N / this many
   * tokens, so a prompt too long for the context is refused before it is tokenized.
   */
  maxTokenBytes: number;
  imageConfig: ImageConfig;
  tokenizer: TextTokenizer;
  chatTemplate: Template;
  /** Whether the template takes a message's content as a list of parts or as one string (content-format.ts): a string's parts are flattened for it. */
  contentFormat: ContentFormat;
  /** Special tokens the template may reference (bos_token, eos_token, …). */
  templateTokens: Record<string, string>;
  /** The weights' dtype (config.json torch_dtype), when it says. */
  torchDtype: string | undefined;
  /**
   * The sampling defaults of generation_config.json that a worker publishes as its
   * default_sampling_params_json (vLLM's get_diff_sampling_param): temperature, top_p, top_k,
   * min_p and repetition_penalty, those it sets.
   */
  generationDefaults: Record<string, number>;
}

/** The sampling keys a worker takes from generation_config.json. */
const GENERATION_DEFAULT_KEYS = ['temperature', 'top_p', 'top_k', 'min_p', 'repetition_penalty'] as const;

async function readJson(dir: string, name: string, required: boolean): Promise<Record<string, unknown> | undefined> {
  const file = path.join(dir, name);
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (err) {
    if (!required && (err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    const code = (err as NodeJS.ErrnoException).code;
    throw new ModelDirectoryError(`cannot read ${file}: ${code === 'ENOENT' ? 'no such file' : (code ?? (err as Error).message)}`);
  }
  try {
    const value: unknown = JSON.parse(text);
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('expected a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new ModelDirectoryError(`invalid JSON in ${file}: ${(err as Error).message}`);
  }
}

/** The part of config.json holding the family's token ids and text model (thinker_config for Qwen3-Omni), and its name for errors. */
function configRoot(config: Record<string, unknown>, family: VisionFamily): { root: Record<string, unknown>; at: string } {
  const section = family.configSection ? config[family.configSection] : undefined;
  if (section && typeof section === 'object' && !Array.isArray(section)) return { root: section as Record<string, unknown>, at: `${family.configSection}.` };
  return { root: config, at: '' };
}

/**
 * A token id from config.json (top level or text_config), else, where the family names a
 * token to stand for it, that token's id in the tokenizer (`fallback`: its text, its id there
 * if any, and the tokenizer's file, for the error when it has none).
 */
function tokenId(
  config: Record<string, unknown>,
  at: string,
  key: string,
  file: string,
  fallback?: { text: string; id: number | undefined; tokenizerFile: string },
): number {
  const direct = config[key];
  const nested = (config.text_config as Record<string, unknown> | undefined)?.[key];
  if (direct === undefined && nested === undefined && fallback && fallback.id === undefined)
    throw new ModelDirectoryError(`${file}: no ${at}${key}, and ${fallback.tokenizerFile} has no ${fallback.text} token to stand for it`);
  const value = direct ?? nested ?? fallback?.id;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0) {
    throw new ModelDirectoryError(`${file}: ${at}${key} must be a non-negative integer token id, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** The context window when config.json does not say: 32768 (the Qwen2-VL checkpoints' value) when config.json omits it. */
export const DEFAULT_CONTEXT_LENGTH = 32768;

function contextLength(config: Record<string, unknown>, file: string): number {
  const value = config.max_position_embeddings ?? (config.text_config as Record<string, unknown> | undefined)?.max_position_embeddings;
  if (value === undefined) return DEFAULT_CONTEXT_LENGTH;
  if (typeof value !== 'number' || !Number.isInteger(value) || value <= 0)
    throw new ModelDirectoryError(`${file}: max_position_embeddings must be a positive integer, got ${JSON.stringify(value)}`);
  return value;
}

function numberField(pre: Record<string, unknown>, key: string, file: string, fallback: number): number {
  const v = pre[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'number' || !Number.isFinite(v) || v <= 0)
    throw new ModelDirectoryError(`${file}: ${key} must be a positive number, got ${JSON.stringify(v)}`);
  return v;
}

/** Standard deviations divide: a zero would make every value of its channel infinite. */
function nonZero(values: [number, number, number], key: string, file: string): [number, number, number] {
  if (values.some((v) => v === 0)) throw new ModelDirectoryError(`${file}: ${key} must not hold 0 (it divides), got ${JSON.stringify(values)}`);
  return values;
}

function triple(pre: Record<string, unknown>, key: string, file: string, fallback: [number, number, number]): [number, number, number] {
  const v = pre[key];
  if (v === undefined || v === null) return fallback;
  const list = typeof v === 'number' ? [v, v, v] : v;
  if (!Array.isArray(list) || list.length !== 3 || !list.every((x) => typeof x === 'number' && Number.isFinite(x))) {
    throw new ModelDirectoryError(`${file}: ${key} must be 3 numbers, got ${JSON.stringify(v)}`);
  }
  return list as [number, number, number];
}

function flag(pre: Record<string, unknown>, key: string, file: string, fallback: boolean): boolean {
  const v = pre[key];
  if (v === undefined || v === null) return fallback;
  if (typeof v !== 'boolean') throw new ModelDirectoryError(`${file}: ${key} must be true or false, got ${JSON.stringify(v)}`);
  return v;
}

/** A size in preprocessor_config.json: a number, or {height, width} (crop_size) / {shortest_edge} (size). */
function sideField(pre: Record<string, unknown>, key: string, side: 'height' | 'width' | 'shortest_edge', file: string, fallback: number): number {
  const v = pre[key];
  if (v === undefined || v === null) return fallback;
  const n = typeof v === 'number' ? v : typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>)[side] : undefined;
  if (typeof n !== 'number' || !Number.isInteger(n) || n <= 0)
    throw new ModelDirectoryError(`${file}: ${key} must be a positive integer or an object with a positive integer ${side}, got ${JSON.stringify(v)}`);
  return n;
}

/** A JSON file's section that must be an object when present (an empty one when absent). */
function section(container: Record<string, unknown>, key: string, file: string): Record<string, unknown> {
  const v = container[key] ?? {};
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ModelDirectoryError(`${file}: ${key} must be an object, got ${JSON.stringify(v)}`);
  return v as Record<string, unknown>;
}

/**
 * A CLIP crop's settings: preprocessor_config.json's size.shortest_edge and crop_size over the
 * family defaults, and from config.json the vision tower's patch size and whether its
 * features keep the CLS token (vision_feature_select_strategy "full").
 */
function clipConfigFrom(d: ClipImageConfig, pre: Record<string, unknown>, file: string, config: Record<string, unknown>, configFile: string): ClipImageConfig {
  const vision = section(config, 'vision_config', configFile);
  // The token count below is a CLIP tower's (its CLS token kept with "full"); another tower (SigLIP has none) counts otherwise.
  if (vision.model_type !== undefined && vision.model_type !== 'clip_vision_model')
    throw new ModelDirectoryError(
      `${configFile}: vision_config.model_type ${JSON.stringify(vision.model_type)} is not served (LLaVA-1.5 with a CLIP tower, clip_vision_model, is)`,
    );
  const strategy = config.vision_feature_select_strategy ?? 'default';
  if (strategy !== 'default' && strategy !== 'full')
    throw new ModelDirectoryError(`${configFile}: vision_feature_select_strategy must be "default" or "full", got ${JSON.stringify(strategy)}`);
  const patch = vision.patch_size ?? d.patch_size;
  if (typeof patch !== 'number' || !Number.isInteger(patch) || patch <= 0)
    throw new ModelDirectoryError(`${configFile}: vision_config.patch_size must be a positive integer, got ${JSON.stringify(patch)}`);
  // Bicubic (3) is what the processor resamples with; another filter would give other pixels than the model was trained on.
  if (pre.resample !== undefined && pre.resample !== 3)
    throw new ModelDirectoryError(`${file}: resample ${JSON.stringify(pre.resample)} is not served (3, bicubic, is)`);
  // The worker's model takes crops of its tower's image_size, every image cropped to it.
  if (pre.do_center_crop === false)
    throw new ModelDirectoryError(`${file}: do_center_crop false is not served (every image must be cropped to the tower's size)`);
  const cfg: ClipImageConfig = {
    shortest_edge: sideField(pre, 'size', 'shortest_edge', file, d.shortest_edge),
    crop_height: sideField(pre, 'crop_size', 'height', file, d.crop_height),
    crop_width: sideField(pre, 'crop_size', 'width', file, d.crop_width),
    image_mean: triple(pre, 'image_mean', file, d.image_mean),
    image_std: nonZero(triple(pre, 'image_std', file, d.image_std), 'image_std', file),
    rescale_factor: numberField(pre, 'rescale_factor', file, d.rescale_factor),
    do_resize: flag(pre, 'do_resize', file, d.do_resize),
    do_center_crop: flag(pre, 'do_center_crop', file, d.do_center_crop),
    do_rescale: flag(pre, 'do_rescale', file, d.do_rescale),
    do_normalize: flag(pre, 'do_normalize', file, d.do_normalize),
    patch_size: patch,
    keep_cls: strategy === 'full',
  };
  const tower = vision.image_size;
  if (tower !== undefined && (cfg.crop_height !== tower || cfg.crop_width !== tower))
    throw new ModelDirectoryError(
      `${file}: crop_size ${cfg.crop_height}x${cfg.crop_width} differs from ${configFile}'s vision_config.image_size ${JSON.stringify(tower)}, the crops the worker's model takes`,
    );
  if (cfg.do_resize && cfg.shortest_edge < Math.max(cfg.crop_height, cfg.crop_width))
    throw new ModelDirectoryError(
      `${file}: size.shortest_edge ${cfg.shortest_edge} is below the crop_size ${cfg.crop_height}x${cfg.crop_width}: no image would fill the crop`,
    );
  return cfg;
}

/** A list of [height, width] pinpoints, each whole crops of `crop`, from `source`'s `key` (preprocessor_config.json or config.json). */
function pinpointsField(source: Record<string, unknown>, key: string, file: string, crop: [number, number]): Array<[number, number]> | undefined {
  const v = source[key];
  if (v === undefined) return undefined;
  const ok =
    Array.isArray(v) &&
    v.length > 0 &&
    v.every(
      (p) =>
        Array.isArray(p) &&
        p.length === 2 &&
        p.every((n) => typeof n === 'number' && Number.isInteger(n) && n > 0) &&
        (p[0] as number) % crop[0] === 0 &&
        (p[1] as number) % crop[1] === 0,
    );
  if (!ok)
    throw new ModelDirectoryError(
      `${file}: ${key} must be a list of [height, width] pairs, each a whole number of ${crop[0]}x${crop[1]} crops, got ${JSON.stringify(v).slice(0, 200)}`,
    );
  return (v as Array<[number, number]>).map(([h, w]) => [h, w]);
}

/** LLaVA-NeXT: CLIP's settings (clipConfigFrom) and the pinpoints, which preprocessor_config.json (the processor) and config.json (the model's count) must agree on. */
function anyresConfigFrom(
  d: AnyresImageConfig,
  pre: Record<string, unknown>,
  file: string,
  config: Record<string, unknown>,
  configFile: string,
): AnyresImageConfig {
  const clip = clipConfigFrom(d, pre, file, config, configFile);
  // vLLM's model takes the base image's crop as a square of patches: the CLS token ("full") does not fit it.
  if (clip.keep_cls) throw new ModelDirectoryError(`${configFile}: vision_feature_select_strategy "full" is not served for LLaVA-NeXT ("default" is)`);
  if (clip.shortest_edge !== clip.crop_height || clip.crop_height !== clip.crop_width)
    throw new ModelDirectoryError(
      `${file}: size.shortest_edge ${clip.shortest_edge} and crop_size ${clip.crop_height}x${clip.crop_width} must be one square side for LLaVA-NeXT's crops`,
    );
  const crop: [number, number] = [clip.crop_height, clip.crop_width];
  // Either file may leave them out: Hugging Face's processor and LlavaNextConfig then take the same default five.
  const processor = pinpointsField(pre, 'image_grid_pinpoints', file, crop) ?? d.image_grid_pinpoints;
  const model = pinpointsField(config, 'image_grid_pinpoints', configFile, crop) ?? d.image_grid_pinpoints;
  if (JSON.stringify(processor) !== JSON.stringify(model))
    throw new ModelDirectoryError(
      `${file}: image_grid_pinpoints ${JSON.stringify(processor)} differs from ${configFile}'s ${JSON.stringify(model)}${'image_grid_pinpoints' in config ? '' : ' (its default: it names none)'}: the processor's crops and the model's token count would disagree`,
    );
  return { ...clip, image_grid_pinpoints: processor };
}

function positiveInteger(pre: Record<string, unknown>, key: string, file: string, fallback: number): number {
  const v = numberField(pre, key, file, fallback);
  if (!Number.isInteger(v)) throw new ModelDirectoryError(`${file}: ${key} must be a positive integer, got ${JSON.stringify(pre[key])}`);
  return v;
}

/**
 * MoonViT's settings (Kimi): preprocessor_config.json's media_proc_cfg (a top-level key wins,
 * as the gateway's PreProcessorConfig reads them) over the family defaults; config.json's
 * vision tower must take the same patches.
 */
function moonVitConfigFrom(
  d: MoonVitImageConfig,
  pre: Record<string, unknown>,
  file: string,
  config: Record<string, unknown>,
  configFile: string,
): MoonVitImageConfig {
  const media = { ...section(pre, 'media_proc_cfg', file), ...pre };
  const at = pre.media_proc_cfg ? `${file} media_proc_cfg` : file;
  // merge_kernel_size may be written [2, 2].
  const merge = Array.isArray(media.merge_kernel_size) ? media.merge_kernel_size[0] : (media.merge_size ?? media.merge_kernel_size);
  if (media.fixed_output_tokens !== undefined && media.fixed_output_tokens !== null)
    throw new ModelDirectoryError(`${at}: fixed_output_tokens ${JSON.stringify(media.fixed_output_tokens)} is not served (tokens follow each image's grid)`);
  const cfg: MoonVitImageConfig = {
    patch_size: positiveInteger(media, 'patch_size', at, d.patch_size),
    merge_size: positiveInteger({ merge_kernel_size: merge }, 'merge_kernel_size', at, d.merge_size),
    in_patch_limit: positiveInteger(media, 'in_patch_limit', at, d.in_patch_limit),
    patch_limit_on_one_side: positiveInteger(media, 'patch_limit_on_one_side', at, d.patch_limit_on_one_side),
    image_mean: triple(media, 'image_mean', at, d.image_mean),
    image_std: nonZero(triple(media, 'image_std', at, d.image_std), 'image_std', at),
  };
  const background = transparentBgFrom(media, at, d.transparent_bg);
  if (background) cfg.transparent_bg = background;
  const tower = (config.vision_config as Record<string, unknown> | undefined)?.patch_size;
  if (tower !== undefined && tower !== cfg.patch_size)
    throw new ModelDirectoryError(
      `${at}: patch_size ${cfg.patch_size} differs from ${configFile}'s vision_config.patch_size ${JSON.stringify(tower)}, the patches the worker's model takes`,
    );
  return cfg;
}

/** The fields a transparent_bg_config leaves out, as the checkpoint's TransparentBgConfig (and the gateway's serde default) fills them. */
const TRANSPARENT_BG_FIELD_DEFAULTS: Omit<TransparentBackground, 'stage'> = {
  pattern: 'black',
  chessboard_square_size: 16,
  chessboard_square_on_top_left: true,
  chessboard_white_value: 255,
  chessboard_gray_value: 200,
};

/**
 * Kimi-K3's transparent background (transparent-bg.ts) from media_proc_cfg's
 * transparent_bg_config and transparent_bg_fill_stage, for a family that has one (`d`): absent,
 * the family's (K3's chessboard, after the resize, as the gateway keeps it when the file does
 * not say); null, none (alpha dropped); an object, its fields over the reference's defaults.
 * Every field checked, the key and the value named.
 */
function transparentBgFrom(media: Record<string, unknown>, at: string, d: TransparentBackground | undefined): TransparentBackground | undefined {
  if (!d || media.transparent_bg_config === null) return undefined;
  const stageValue = media.transparent_bg_fill_stage as TransparentBackground['stage'] | null | undefined;
  if (stageValue !== undefined && stageValue !== null && !TRANSPARENT_BG_STAGES.includes(stageValue))
    throw new ModelDirectoryError(
      `${at}: transparent_bg_fill_stage must be ${TRANSPARENT_BG_STAGES.map((s) => JSON.stringify(s)).join(' or ')}, got ${JSON.stringify(stageValue)}`,
    );
  const stage = stageValue ?? d.stage;
  if (media.transparent_bg_config === undefined) return { ...d, stage };
  const given = section(media, 'transparent_bg_config', at);
  const key = `${at} transparent_bg_config`;
  const pattern = (given.pattern ?? TRANSPARENT_BG_FIELD_DEFAULTS.pattern) as TransparentBackground['pattern'];
  if (!TRANSPARENT_BG_PATTERNS.includes(pattern))
    throw new ModelDirectoryError(
      `${key}: pattern must be one of ${TRANSPARENT_BG_PATTERNS.map((p) => JSON.stringify(p)).join(', ')}, got ${JSON.stringify(pattern)}`,
    );
  const level = (name: 'chessboard_white_value' | 'chessboard_gray_value') => {
    const v = given[name] ?? TRANSPARENT_BG_FIELD_DEFAULTS[name];
    if (typeof v !== 'number' || !Number.isInteger(v) || v < 0 || v > 255)
      throw new ModelDirectoryError(`${key}: ${name} must be an integer from 0 to 255, got ${JSON.stringify(v)}`);
    return v;
  };
  return {
    pattern,
    chessboard_square_size: positiveInteger(given, 'chessboard_square_size', key, TRANSPARENT_BG_FIELD_DEFAULTS.chessboard_square_size),
    chessboard_square_on_top_left: flag(given, 'chessboard_square_on_top_left', key, TRANSPARENT_BG_FIELD_DEFAULTS.chessboard_square_on_top_left),
    chessboard_white_value: level('chessboard_white_value'),
    chessboard_gray_value: level('chessboard_gray_value'),
    stage,
  };
}

/**
 * Phi-3-vision's settings: preprocessor_config.json's num_crops, image_mean and image_std over
 * the family defaults; config.json's img_processor must count the 144 tokens a crop gives,
 * the processor's and the model's formula.
 */
function phi3VisionConfigFrom(
  d: Phi3VisionImageConfig,
  pre: Record<string, unknown>,
  file: string,
  config: Record<string, unknown>,
  configFile: string,
): Phi3VisionImageConfig {
  const perCrop = section(config, 'img_processor', configFile).num_img_tokens;
  if (perCrop !== undefined && perCrop !== 144)
    throw new ModelDirectoryError(
      `${configFile}: img_processor.num_img_tokens ${JSON.stringify(perCrop)} is not served (144, the tokens of a 336-pixel crop that the processor and the model count, is)`,
    );
  return {
    num_crops: positiveInteger(pre, 'num_crops', file, d.num_crops),
    image_mean: triple(pre, 'image_mean', file, d.image_mean),
    image_std: nonZero(triple(pre, 'image_std', file, d.image_std), 'image_std', file),
  };
}

/**
 * Llama 4's settings: preprocessor_config.json's size (a square tile), max_patches,
 * resize_to_max_canvas, rescale_factor, image_mean and image_std over the family defaults;
 * config.json's vision_config gives the tokens a tile makes (patch_size, pixel_shuffle_ratio)
 * and must take tiles of the size the processor cuts.
 */
function llama4ConfigFrom(
  d: Llama4ImageConfig,
  pre: Record<string, unknown>,
  file: string,
  config: Record<string, unknown>,
  configFile: string,
): Llama4ImageConfig {
  const vision = section(config, 'vision_config', configFile);
  const height = sideField(pre, 'size', 'height', file, d.tile_size);
  const width = sideField(pre, 'size', 'width', file, d.tile_size);
  if (height !== width) throw new ModelDirectoryError(`${file}: size ${height}x${width} is not served (a square tile is; HF's processor refuses another)`);
  // Bilinear (2) is what the processor resamples with; another filter would give other pixels than the model was trained on.
  if (pre.resample !== undefined && pre.resample !== 2)
    throw new ModelDirectoryError(`${file}: resample ${JSON.stringify(pre.resample)} is not served (2, bilinear, is)`);
  for (const key of ['do_resize', 'do_rescale', 'do_normalize'] as const)
    if (pre[key] === false) throw new ModelDirectoryError(`${file}: ${key} false is not served (Llama 4's processor always resizes, rescales and normalizes)`);
  const cfg: Llama4ImageConfig = {
    tile_size: height,
    max_patches: positiveInteger(pre, 'max_patches', file, d.max_patches),
    resize_to_max_canvas: flag(pre, 'resize_to_max_canvas', file, d.resize_to_max_canvas),
    rescale_factor: numberField(pre, 'rescale_factor', file, d.rescale_factor),
    image_mean: triple(pre, 'image_mean', file, d.image_mean),
    image_std: nonZero(triple(pre, 'image_std', file, d.image_std), 'image_std', file),
    patch_size: positiveInteger(vision, 'patch_size', `${configFile} vision_config`, d.patch_size),
    pixel_shuffle_ratio: numberField(vision, 'pixel_shuffle_ratio', `${configFile} vision_config`, d.pixel_shuffle_ratio),
  };
  const tower = vision.image_size;
  if (tower !== undefined && tower !== cfg.tile_size)
    throw new ModelDirectoryError(
      `${file}: size ${cfg.tile_size}x${cfg.tile_size} differs from ${configFile}'s vision_config.image_size ${JSON.stringify(tower)}, the tiles the worker's model takes`,
    );
  if (cfg.tile_size % cfg.patch_size !== 0)
    throw new ModelDirectoryError(`${configFile}: vision_config.patch_size ${cfg.patch_size} does not divide the ${cfg.tile_size}-pixel tile`);
  if (llama4TokensPerTile(cfg) < 1)
    throw new ModelDirectoryError(`${configFile}: vision_config.pixel_shuffle_ratio ${cfg.pixel_shuffle_ratio} leaves a tile no tokens`);
  return cfg;
}

/**
 * Inkling's settings: preprocessor_config.json's size (the patch, square; the gateway's
 * patch_size too, which must agree), temporal_patch_size, image_mean and image_std. Refused:
 * a rescale_image_frac (the processor's Lanczos pre-scaling, not served: images go as they
 * are, the processor's default), do_resize, do_rescale or do_normalize false.
 */
function inklingConfigFrom(d: InklingImageConfig, pre: Record<string, unknown>, file: string): InklingImageConfig {
  if (pre.rescale_image_frac !== undefined && pre.rescale_image_frac !== null)
    throw new ModelDirectoryError(
      `${file}: rescale_image_frac ${JSON.stringify(pre.rescale_image_frac)} is not served (images go at their own size, the processor's default)`,
    );
  for (const key of ['do_resize', 'do_rescale', 'do_normalize'] as const)
    if (pre[key] === false)
      throw new ModelDirectoryError(`${file}: ${key} false is not served (Inkling's processor always patchifies, rescales and normalizes)`);
  const height = sideField(pre, 'size', 'height', file, d.patch_side);
  const width = sideField(pre, 'size', 'width', file, d.patch_side);
  if (height !== width) throw new ModelDirectoryError(`${file}: size ${height}x${width} is not served (a square patch is; HF's processor refuses another)`);
  // The gateway's patch_size: a number or {height, width}.
  const patchHeight = sideField(pre, 'patch_size', 'height', file, height);
  const patchWidth = sideField(pre, 'patch_size', 'width', file, height);
  if (patchHeight !== height || patchWidth !== height)
    throw new ModelDirectoryError(`${file}: patch_size ${JSON.stringify(pre.patch_size)} differs from size ${height}x${width}`);
  return {
    patch_side: height,
    temporal_patch_size: positiveInteger(pre, 'temporal_patch_size', file, d.temporal_patch_size),
    image_mean: triple(pre, 'image_mean', file, d.image_mean),
    image_std: nonZero(triple(pre, 'image_std', file, d.image_std), 'image_std', file),
  };
}

/** preprocessor_config.json over the family defaults (Qwen: min/max_pixels or size.shortest/longest_edge; CLIP: size and crop_size, with config.json's vision tower; LLaVA-NeXT: CLIP's and image_grid_pinpoints; MoonViT: media_proc_cfg; Phi-3-vision: num_crops; Llama 4: the tile and max_patches; Inkling: the patch). */
export function imageConfigFrom(
  family: FamilyId,
  pre: Record<string, unknown> | undefined,
  file = 'preprocessor_config.json',
  config: Record<string, unknown> = {},
  configFile = 'config.json',
): ImageConfig {
  const defaults = familyById(family).defaults;
  if (isClipConfig(defaults)) return clipConfigFrom(defaults, pre ?? {}, file, config, configFile);
  if (isAnyresConfig(defaults)) return anyresConfigFrom(defaults, pre ?? {}, file, config, configFile);
  if (isMoonVitConfig(defaults)) return moonVitConfigFrom(defaults, pre ?? {}, file, config, configFile);
  if (isPhi3VisionConfig(defaults)) return phi3VisionConfigFrom(defaults, pre ?? {}, file, config, configFile);
  if (isLlama4Config(defaults)) return llama4ConfigFrom(defaults, pre ?? {}, file, config, configFile);
  if (isInklingConfig(defaults)) return inklingConfigFrom(defaults, pre ?? {}, file);
  const d: QwenVlImageConfig = defaults;
  if (!pre) return d;
  const size = (pre.size ?? {}) as Record<string, unknown>;
  const cfg: QwenVlImageConfig = {
    patch_size: numberField(pre, 'patch_size', file, d.patch_size),
    merge_size: numberField(pre, 'merge_size', file, d.merge_size),
    temporal_patch_size: numberField(pre, 'temporal_patch_size', file, d.temporal_patch_size),
    min_pixels: numberField(pre, 'min_pixels', file, numberField(size, 'shortest_edge', `${file} size`, d.min_pixels)),
    max_pixels: numberField(pre, 'max_pixels', file, numberField(size, 'longest_edge', `${file} size`, d.max_pixels)),
    image_mean: triple(pre, 'image_mean', file, d.image_mean),
    image_std: nonZero(triple(pre, 'image_std', file, d.image_std), 'image_std', file),
    rescale_factor: numberField(pre, 'rescale_factor', file, d.rescale_factor),
    do_resize: flag(pre, 'do_resize', file, d.do_resize),
    do_rescale: flag(pre, 'do_rescale', file, d.do_rescale),
    do_normalize: flag(pre, 'do_normalize', file, d.do_normalize),
  };
  for (const k of ['patch_size', 'merge_size', 'temporal_patch_size'] as const) {
    if (!Number.isInteger(cfg[k])) throw new ModelDirectoryError(`${file}: ${k} must be an integer, got ${cfg[k]}`);
  }
  if (cfg.min_pixels > cfg.max_pixels) throw new ModelDirectoryError(`${file}: min_pixels ${cfg.min_pixels} is above max_pixels ${cfg.max_pixels}`);
  return cfg;
}

async function readChatTemplate(dir: string, tokenizerConfig: Record<string, unknown>): Promise<string> {
  const inline = tokenizerConfig.chat_template;
  if (typeof inline === 'string') return inline;
  if (Array.isArray(inline)) {
    const named = inline.find((t: { name?: string }) => t?.name === 'default') as { template?: string } | undefined;
    if (typeof named?.template === 'string') return named.template;
  }
  const jinja = path.join(dir, 'chat_template.jinja');
  if (existsSync(jinja)) return fs.readFile(jinja, 'utf8');
  const json = await readJson(dir, 'chat_template.json', false);
  if (typeof json?.chat_template === 'string') return json.chat_template;
  throw new ModelDirectoryError(`no chat template in ${dir}: expected chat_template in tokenizer_config.json, chat_template.jinja or chat_template.json`);
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === 'string') return value;
  if (value && typeof value === 'object' && typeof (value as { content?: unknown }).content === 'string') return (value as { content: string }).content;
  return undefined;
}

/**
 * The directory's tokenizer: tokenizer.json (Hugging Face's), else, for a family whose
 * checkpoints ship tiktoken's ranks (Kimi: VisionFamily.tiktoken), tiktoken.model with
 * tokenizer_config.json's added tokens.
 */
async function loadTokenizer(
  dir: string,
  family: VisionFamily,
  json: Record<string, unknown> | undefined,
  tokenizerConfig: Record<string, unknown>,
): Promise<TextTokenizer> {
  if (json) {
    try {
      return huggingFaceTokenizer(new Tokenizer(json, tokenizerConfig), json);
    } catch (err) {
      throw new ModelDirectoryError(`${path.join(dir, 'tokenizer.json')}: cannot build the tokenizer: ${(err as Error).message}`);
    }
  }
  const ranksFile = path.join(dir, 'tiktoken.model');
  if (!family.tiktoken || !existsSync(ranksFile))
    throw new ModelDirectoryError(
      `cannot read ${path.join(dir, 'tokenizer.json')}: no such file${family.tiktoken ? ' (nor tiktoken.model)' : ` (${family.label} checkpoints ship one)`}`,
    );
  try {
    const ranks = parseTiktokenRanks(await fs.readFile(ranksFile, 'utf8'), ranksFile);
    return kimiTokenizer(ranks, tokenizerConfig, path.join(dir, 'tokenizer_config.json'));
  } catch (err) {
    if (err instanceof TiktokenError) throw new ModelDirectoryError(err.message);
    throw new ModelDirectoryError(`cannot read ${ranksFile}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

export async function loadModelDirectory(dir: string = BUNDLED_MODEL_PATH): Promise<ModelDirectory> {
  const abs = path.resolve(dir);
  if (!existsSync(abs)) throw new ModelDirectoryError(`model directory ${abs} does not exist`);
  const [config, tokenizerJson, tokenizerConfig, pre, generation] = await Promise.all([
    readJson(abs, 'config.json', true),
    readJson(abs, 'tokenizer.json', false),
    readJson(abs, 'tokenizer_config.json', true),
    readJson(abs, 'preprocessor_config.json', false),
    readJson(abs, 'generation_config.json', false),
  ]);
  const configFile = path.join(abs, 'config.json');
  const modelType = String(config!.model_type ?? '');
  const vision = familyOfModelType(modelType);
  if (!vision) {
    throw new ModelDirectoryError(
      `${configFile}: model_type '${modelType}' is not a supported vision-language model (expected ${SUPPORTED_MODEL_TYPES.join(', ')})`,
    );
  }
  const family = vision.id;
  const { root, at } = configRoot(config!, vision);
  /** A token id config.json may leave out, by its text in the tokenizer (the family's tokenFallbacks). */
  const fallbackId = (key: string) => {
    const text = vision.tokenFallbacks?.[key];
    return text === undefined
      ? undefined
      : { text, id: tokenizer.tokenToId(text), tokenizerFile: path.join(abs, tokenizerJson ? 'tokenizer.json' : 'tiktoken.model') };
  };
  const tokenizer = await loadTokenizer(abs, vision, tokenizerJson, tokenizerConfig!);
  const templateSource = vision.chatTemplate ?? (await readChatTemplate(abs, tokenizerConfig!));
  let chatTemplate: Template;
  try {
    chatTemplate = new Template(templateSource);
  } catch (err) {
    throw new ModelDirectoryError(`chat template of ${abs} does not parse: ${(err as Error).message}`);
  }
  const eos = root.eos_token_id ?? (root.text_config as Record<string, unknown> | undefined)?.eos_token_id ?? config!.eos_token_id;
  const eosTokenIds = (Array.isArray(eos) ? eos : eos === undefined ? [] : [eos]).filter((x): x is number => typeof x === 'number');
  const templateTokens: Record<string, string> = {};
  for (const key of ['bos_token', 'eos_token', 'pad_token', 'unk_token']) {
    const text = tokenText(tokenizerConfig![key]);
    if (text !== undefined) templateTokens[key] = text;
  }
  const tokenizerFile = path.join(abs, tokenizerJson ? 'tokenizer.json' : 'tiktoken.model');
  /** A spelling the family's prompt needs, as the tokenizer has it. */
  const promptTokenId = (spelling: string, why: string): number => {
    const id = tokenizer.tokenToId(spelling);
    if (id === undefined) throw new ModelDirectoryError(`${tokenizerFile}: no token ${JSON.stringify(spelling)} (${why})`);
    return id;
  };
  const imageTokenId = tokenId(root, at, vision.imageTokenKey ?? 'image_token_id', configFile, fallbackId(vision.imageTokenKey ?? 'image_token_id'));
  const model: ModelDirectory = {
    path: abs,
    modelType,
    family,
    architectures: Array.isArray(config!.architectures) ? (config!.architectures as string[]) : [],
    imageTokenId,
    imagePlaceholderId:
      vision.promptPlaceholder === undefined ? imageTokenId : promptTokenId(vision.promptPlaceholder, `the chat template's placeholder of an image`),
    promptTokenIds: Object.fromEntries((vision.promptTokens ?? []).map((t) => [t, promptTokenId(t, `${vision.label}'s prompt is written with it`)])),
    visionStartTokenId: vision.visionMarkers ? tokenId(root, at, 'vision_start_token_id', configFile, fallbackId('vision_start_token_id')) : undefined,
    visionEndTokenId: vision.visionMarkers ? tokenId(root, at, 'vision_end_token_id', configFile, fallbackId('vision_end_token_id')) : undefined,
    eosTokenIds,
    vocabSize: typeof config!.vocab_size === 'number' ? config!.vocab_size : tokenizer.vocabSize,
    maxContextLength: contextLength(root, configFile),
    maxTokenBytes: tokenizer.maxTokenBytes,
    imageConfig: imageConfigFrom(family, pre, path.join(abs, 'preprocessor_config.json'), config, configFile),
    tokenizer,
    chatTemplate,
    contentFormat: chatTemplateContentFormat(chatTemplate),
    templateTokens,
    torchDtype: typeof config!.torch_dtype === 'string' ? config!.torch_dtype : undefined,
    generationDefaults: Object.fromEntries(GENERATION_DEFAULT_KEYS.flatMap((k) => (typeof generation?.[k] === 'number' ? [[k, generation[k]]] : []))),
  };
  const padText = tokenizer.idToToken(model.imageTokenId);
  if (padText === undefined)
    throw new ModelDirectoryError(
      `${tokenizerFile}: ${vision.imageTokenKey ?? 'image_token_id'} ${model.imageTokenId} from config.json is not in the vocabulary`,
    );
  // Where the family names its image token's spelling, the prompt holds that spelling: an id the tokenizer spells otherwise would never be found in a prompt (or, for Llama 4, be where the model embeds).
  const spelling = vision.tokenFallbacks?.[vision.imageTokenKey ?? 'image_token_id'];
  if (spelling !== undefined && padText !== spelling)
    throw new ModelDirectoryError(
      `${path.join(abs, tokenizerJson ? 'tokenizer.json' : 'tokenizer_config.json')}: token ${model.imageTokenId} (config.json ${vision.imageTokenKey ?? 'image_token_id'}) is ${JSON.stringify(padText)}, not ${JSON.stringify(spelling)}: ${
        vision.promptPlaceholder === undefined
          ? `the chat template's ${spelling} would not be found`
          : `${vision.label}'s prompt puts an image's features at ${spelling}`
      }`,
    );
  return model;
}
