// Qwen2-VL and Qwen2.5-VL: the gateway's qwen_vl spec (registry/qwen_vl.rs), the Qwen2-VL
// processor (CLIP mean and std, 14-pixel patches).
import { QWEN_VL_DEFAULTS } from '../qwen-vl.ts';
import type { VisionFamily } from './family.ts';
import { qwenEncoderShape, qwenImageTensors } from './qwen-patches.ts';

export const QWEN2_VL: VisionFamily = {
  id: 'qwen2_vl',
  label: 'Qwen2-VL, Qwen2.5-VL',
  gatewaySpec: 'qwen_vl',
  modelTypes: ['qwen2_vl', 'qwen2_5_vl'],
  visionMarkers: true,
  defaults: QWEN_VL_DEFAULTS.qwen2_vl,
  imageTensors: qwenImageTensors,
  encoderShape: qwenEncoderShape,
};
