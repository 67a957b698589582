// The vision families mmtc serves (the gateway's registry, crates/multimodal/src/registry/mod.rs,
// tries its specs in its own order, names as well as model types; mmtc matches config.json's
// model_type alone, which no two families share, so the order here does not decide anything),
// and how a model directory's config.json is matched to one (docs/preprocessing.md,
// "Model families").
import type { ClipImageConfig } from '../clip-image.ts';
import type { InklingImageConfig } from '../inkling.ts';
import type { Llama4ImageConfig } from '../llama4.ts';
import type { AnyresImageConfig } from '../llava-next.ts';
import type { QwenVlImageConfig } from '../qwen-vl.ts';
import type { MoonVitImageConfig } from '../moonvit.ts';
import type { Phi3VisionImageConfig } from '../phi3v.ts';
import { ANYRES_CROP_PROCESSOR } from './anyres-crops.ts';
import { CLIP_CROP_PROCESSOR } from './clip-crop.ts';
import {
  isAnyresConfig,
  isClipConfig,
  isInklingConfig,
  isLlama4Config,
  isMoonVitConfig,
  isPhi3VisionConfig,
  type EncoderGeometry,
  type FamilyId,
  type ImageConfig,
  type ImageProcessor,
  type VisionFamily,
} from './family.ts';
import { INKLING } from './inkling.ts';
import { INKLING_PATCH_PROCESSOR } from './inkling-patches.ts';
import { KIMI_K25 } from './kimi-k25.ts';
import { KIMI_K3 } from './kimi-k3.ts';
import { LLAMA4 } from './llama4.ts';
import { LLAMA4_TILE_PROCESSOR } from './llama4-tiles.ts';
import { LLAVA } from './llava.ts';
import { LLAVA_NEXT } from './llava-next.ts';
import { MOONVIT_PATCH_PROCESSOR } from './moonvit-patches.ts';
import { PHI3_HD_PROCESSOR } from './phi3-hd.ts';
import { PHI3_V } from './phi3-v.ts';
import { QWEN_PATCH_PROCESSOR } from './qwen-patches.ts';
import { QWEN2_VL } from './qwen2-vl.ts';
import { QWEN3_5 } from './qwen3-5.ts';
import { QWEN3_OMNI } from './qwen3-omni.ts';
import { QWEN3_VL } from './qwen3-vl.ts';

export { asQwenConfig, isAnyresConfig, isClipConfig, isInklingConfig, isLlama4Config, isMoonVitConfig, isPhi3VisionConfig, isQwenConfig } from './family.ts';
export type { EncoderGeometry, FamilyId, ImageConfig, ImageModelTensor, ImageProcessor, PromptTokenIds, VisionFamily } from './family.ts';

export const FAMILIES: readonly VisionFamily[] = [QWEN3_OMNI, QWEN3_VL, QWEN3_5, QWEN2_VL, LLAVA, LLAVA_NEXT, KIMI_K25, KIMI_K3, PHI3_V, LLAMA4, INKLING];

export const FAMILY_IDS = FAMILIES.map((f) => f.id) as readonly FamilyId[];

/** Every model_type some family takes, for the error that names them. */
export const SUPPORTED_MODEL_TYPES: readonly string[] = FAMILIES.flatMap((f) => f.modelTypes);

export function familyById(id: FamilyId): VisionFamily {
  const found = FAMILIES.find((f) => f.id === id);
  if (!found) throw new RangeError(`no vision family ${JSON.stringify(id)} (expected one of ${FAMILY_IDS.join(', ')})`);
  return found;
}

/** The family of a config.json's model_type, as the gateway's registry detects it by model type; undefined when none takes it. */
export function familyOfModelType(modelType: string): VisionFamily | undefined {
  return FAMILIES.find((f) => f.modelTypes.includes(modelType));
}

/** An image processor bound to its configuration: what the pool, calibration and the reference worker ask of an image. */
export interface ConfiguredProcessor {
  name: string;
  geometry(height: number, width: number): EncoderGeometry;
  memoryBytes(width: number, height: number, kinds: { float32: boolean; bf16: boolean }): number;
  bandStarts(g: EncoderGeometry, count: number, source: { width: number; height: number }): number[];
  sizesNear(targets: readonly number[], elementBytes: number): Array<{ width: number; height: number; nbytes: number }>;
  tokensOf(received: { encoderShape: readonly number[]; grid?: readonly number[] }): number;
  gridded: boolean;
  /** Each image's encoder input is one row of a batched tensor. */
  batchedEncoder: boolean;
  /** The grid tensor's name where gridded (image_grid_thw, grid_thws, image_sizes). */
  gridKey: string;
  /** Values in one image's grid row. */
  gridWidth: number;
  /** Rows of the encoder input one image's grid row stands for. */
  gridPatches(row: readonly number[]): number;
}

function bind<C extends ImageConfig>(p: ImageProcessor<C>, cfg: C): ConfiguredProcessor {
  return {
    name: p.name,
    geometry: (h, w) => p.geometry(h, w, cfg),
    memoryBytes: (w, h, kinds) => p.memoryBytes(w, h, cfg, kinds),
    bandStarts: (g, count, source) => p.bandStarts(g, cfg, count, source),
    sizesNear: (targets, elementBytes) => p.sizesNear(targets, elementBytes, cfg),
    tokensOf: (received) => p.tokensOf(received, cfg),
    gridded: p.gridded,
    batchedEncoder: p.batchedEncoder,
    gridKey: p.gridKey ?? 'image_grid_thw',
    gridWidth: p.gridWidth ?? 3,
    gridPatches: p.gridPatches ?? ((row) => row.reduce((a, b) => a * b, 1)),
  };
}

/** The processor a configuration is for: CLIP's crop, LLaVA-NeXT's anyres crops, MoonViT's patches, Phi-3-vision's HD crops, Llama 4's tiles, Inkling's patches or Qwen's patches (what the pool thread runs follows the same tests). */
export function processorOf(cfg: ImageConfig): ConfiguredProcessor {
  if (isClipConfig(cfg)) return bind<ClipImageConfig>(CLIP_CROP_PROCESSOR, cfg);
  if (isAnyresConfig(cfg)) return bind<AnyresImageConfig>(ANYRES_CROP_PROCESSOR, cfg);
  if (isMoonVitConfig(cfg)) return bind<MoonVitImageConfig>(MOONVIT_PATCH_PROCESSOR, cfg);
  if (isPhi3VisionConfig(cfg)) return bind<Phi3VisionImageConfig>(PHI3_HD_PROCESSOR, cfg);
  if (isLlama4Config(cfg)) return bind<Llama4ImageConfig>(LLAMA4_TILE_PROCESSOR, cfg);
  if (isInklingConfig(cfg)) return bind<InklingImageConfig>(INKLING_PATCH_PROCESSOR, cfg);
  return bind<QwenVlImageConfig>(QWEN_PATCH_PROCESSOR, cfg);
}
