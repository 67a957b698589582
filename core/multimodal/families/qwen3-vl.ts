// Qwen3-VL (dense and MoE): the gateway's qwen3_vl spec (registry/qwen3_vl.rs), the Qwen3-VL
// processor (mean and std 0.5, 16-pixel patches).
import { QWEN_VL_DEFAULTS } from '../qwen-vl.ts';
import type { VisionFamily } from './family.ts';
import { qwenEncoderShape, qwenImageTensors } from './qwen-patches.ts';

export const QWEN3_VL: VisionFamily = {
  id: 'qwen3_vl',
  label: 'Qwen3-VL',
  gatewaySpec: 'qwen3_vl',
  modelTypes: ['qwen3_vl', 'qwen3_vl_moe'],
  visionMarkers: true,
  defaults: QWEN_VL_DEFAULTS.qwen3_vl,
  imageTensors: qwenImageTensors,
  encoderShape: qwenEncoderShape,
};
