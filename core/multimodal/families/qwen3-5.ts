// Qwen3.5 and Qwen3.6 (dense `qwen3_5`, MoE `qwen3_5_moe`): the gateway serves them with its
// qwen3_vl spec (registry/qwen3_vl.rs matches both model types) and the Qwen3-VL processor
// (vision/processor.rs registers `qwen3_5` to Qwen3VLProcessor): the same processor, defaults
// and tensors as Qwen3-VL; their own vocabulary (image_token_id 248056 in the checkpoints).
import { QWEN_VL_DEFAULTS } from '../qwen-vl.ts';
import type { VisionFamily } from './family.ts';
import { qwenEncoderShape, qwenImageTensors } from './qwen-patches.ts';

export const QWEN3_5: VisionFamily = {
  id: 'qwen3_5',
  label: 'Qwen3.5, Qwen3.6',
  gatewaySpec: 'qwen3_vl',
  modelTypes: ['qwen3_5', 'qwen3_5_moe'],
  visionMarkers: true,
  defaults: QWEN_VL_DEFAULTS.qwen3_vl,
  imageTensors: qwenImageTensors,
  encoderShape: qwenEncoderShape,
};
