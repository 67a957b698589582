// Qwen3-Omni's vision (model_type `qwen3_omni_moe`, or `qwen3_omni_moe_thinker` for a
// thinker-only checkpoint): the gateway's qwen3_omni spec (registry/qwen3_omni.rs) and its
// Qwen3OmniVisionProcessor (vision/processors/qwen3_omni_vision.rs): the Qwen3-VL processor
// with its own pixel range, 3136 to 12845056 pixels (HF's Qwen2VLImageProcessor under the
// checkpoints' preprocessor_config.json), mean and std 0.5. Its token ids live under
// config.json's thinker_config. Audio and video are not served here.
import { QWEN_VL_DEFAULTS } from '../qwen-vl.ts';
import type { VisionFamily } from './family.ts';
import { qwenEncoderShape, qwenImageTensors } from './qwen-patches.ts';

export const QWEN3_OMNI: VisionFamily = {
  id: 'qwen3_omni',
  label: 'Qwen3-Omni (vision)',
  gatewaySpec: 'qwen3_omni',
  modelTypes: ['qwen3_omni_moe', 'qwen3_omni_moe_thinker'],
  configSection: 'thinker_config',
  tokenFallbacks: { vision_start_token_id: '<|vision_start|>', vision_end_token_id: '<|vision_end|>' },
  visionMarkers: true,
  defaults: { ...QWEN_VL_DEFAULTS.qwen3_vl, min_pixels: 3_136, max_pixels: 12_845_056 },
  imageTensors: qwenImageTensors,
  encoderShape: qwenEncoderShape,
};
