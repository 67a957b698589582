// The family interface (docs/preprocessing.md, "Model families"): everything the router, the
// engines, the reference worker, the pixel cache, calibration and the CLI need to know about a
// vision-language model family, in one object per family (one file each in this folder, listed
// by index.ts). A family says how it is detected from config.json (as the gateway's registry
// detects it), where config.json keeps its special token ids, its image processor (geometry,
// memory, preprocessing) with the processor's defaults, and the model-specific tensors of each
// image with their field layouts on the wire.
import type { PatchGeometry, QwenVlImageConfig } from '../qwen-vl.ts';

export type FamilyId = 'qwen2_vl' | 'qwen3_vl' | 'qwen3_5' | 'qwen3_omni';

/**
 * One model-specific tensor of one image, as the engines place it: int64 values, this image's
 * shape with a leading dimension of 1. `batched`: the runtime stacks the images' tensors along
 * that dimension (the gateway's FieldLayout::Batched); `keepOnCpu`: the worker keeps it off
 * the accelerator (keep_on_cpu_keys); `splitsPixels`: the encoder input is flat, split into
 * images by this tensor's values (FieldLayout::flat).
 */
export interface ImageModelTensor {
  name: string;
  dtype: 'int64';
  shape: number[];
  values: number[];
  layout: 'batched';
  keepOnCpu: boolean;
  splitsPixels?: boolean;
}

/**
 * An image processor: from an image's size to its encoder input's shape and placeholder
 * tokens, under the processor's configuration. The pool (pool.ts, preprocess-task.ts) runs
 * the processor's preprocessing itself.
 */
export interface ImageProcessor {
  /** The processor's name, as docs/preprocessing.md, "Model families" lists it. */
  name: string;
  geometry(height: number, width: number, cfg: QwenVlImageConfig): PatchGeometry;
  /** Values in one row of the encoder input. */
  rowFeatures(cfg: QwenVlImageConfig): number;
  /** The side, in pixels, that resized images are a multiple of. */
  blockSide(cfg: QwenVlImageConfig): number;
  /** Placeholder tokens of an image whose grid is `thw` (what the worker's model computes from the grid it receives). */
  tokensOfGrid(thw: readonly number[], cfg: QwenVlImageConfig): number;
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
  processor: ImageProcessor;
  /** The processor's settings when preprocessor_config.json does not say. */
  defaults: QwenVlImageConfig;
  /** The model-specific tensors of one image, in the order they go on the wire. */
  imageTensors(g: Pick<PatchGeometry, 'gridT' | 'gridH' | 'gridW' | 'patches'>): ImageModelTensor[];
}
