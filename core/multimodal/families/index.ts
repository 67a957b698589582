// The vision families mmtc serves, in the gateway registry's order of detection
// (crates/multimodal/src/registry/mod.rs: Qwen3-Omni, then Qwen3-VL with Qwen3.5, then Qwen-VL),
// and how a model directory's config.json is matched to one (docs/preprocessing.md,
// "Model families").
import type { FamilyId, VisionFamily } from './family.ts';
import { QWEN2_VL } from './qwen2-vl.ts';
import { QWEN3_5 } from './qwen3-5.ts';
import { QWEN3_OMNI } from './qwen3-omni.ts';
import { QWEN3_VL } from './qwen3-vl.ts';

export type { FamilyId, ImageModelTensor, ImageProcessor, VisionFamily } from './family.ts';

export const FAMILIES: readonly VisionFamily[] = [QWEN3_OMNI, QWEN3_VL, QWEN3_5, QWEN2_VL];

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

/** Placeholder tokens of an image whose grid is `thw`, by the model's family and its processor settings (what the worker's model computes). */
export function tokensOfGrid(model: { family: FamilyId; imageConfig: VisionFamily['defaults'] }): (thw: readonly number[]) => number {
  const processor = familyById(model.family).processor;
  return (thw) => processor.tokensOfGrid(thw, model.imageConfig);
}
